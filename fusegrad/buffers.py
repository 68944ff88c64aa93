"""Buffer state, with one owner: which Buffer each BUFFER uop names, and which lazy uops are realized (into which
buffer view). The scheduler, Tensor, TinyJit and the weight loaders ask and tell through these calls; no other module
holds or edits the maps.

Both maps live on the nodes themselves (an entry of the node's __dict__), so they are weak: a BUFFER uop nobody
references any more takes its Buffer with it, and a realized result is remembered only while its lazy uop is alive
(hash-consing makes a later, equal graph find it). The scheduler asks them of every node it walks, and a
WeakKeyDictionary's lookup (a new weak reference each time) was a quarter of its walk."""
from __future__ import annotations
import itertools, weakref
from fusegrad.device import Buffer, BufferView
from fusegrad.dtype import DType
from fusegrad.helpers import WeakValueCache
from fusegrad.uop.ops import Ops, UOp

_buffer_ids = itertools.count()
_BUFFER, REALIZED = "buffer", "realized_view"  # the keys in a node's __dict__ (the schedule walk reads REALIZED)
_realized = WeakValueCache()  # id -> each node with a realized view, for invalidate()

def new_buffer_uop(device: str, size: int, dtype: DType, buf: Buffer | None = None) -> UOp:
  """A new BUFFER uop naming `buf` (default: a new, not yet allocated Buffer)."""
  u = UOp(Ops.BUFFER, dtype, (UOp.device_node(device),), (next(_buffer_ids), size))
  u.__dict__[_BUFFER] = buf if buf is not None else Buffer(device, size, dtype)
  return u

def view_uop(base: Buffer, byte_offset: int, size: int, dtype: DType) -> UOp:
  """A new BUFFER uop naming `size` elements of `dtype` at `byte_offset` into base (a BufferView: base's memory)."""
  return new_buffer_uop(base.device, size, dtype, BufferView(base, byte_offset, size, dtype))

def buffer_of(u: UOp) -> Buffer | None:
  """The Buffer a BUFFER uop names (None for any other uop)."""
  return u.__dict__.get(_BUFFER)

def is_realized(u: UOp) -> bool: return REALIZED in u.__dict__
def realized_view(u: UOp) -> UOp | None:
  """The buffer view (RESHAPE of a BUFFER) holding u's value, or None."""
  return u.__dict__.get(REALIZED)

def mark_realized(u: UOp, view: UOp) -> None:
  """u's value now lives in `view`: later schedules read it instead of recomputing u. Not a constant (a CONST, reshaped
  or expanded): it costs nothing to compute, and OpBuilder.tensor_const keeps its recent ones alive, so every later
  kernel using that number would read the buffer instead (a softmax then took two kernels)."""
  c = u
  while c.op in (Ops.RESHAPE, Ops.EXPAND): c = c.src[0]
  if c.op is not Ops.CONST:
    u.__dict__[REALIZED] = view
    _realized[id(u)] = u

def buffer_view(u: UOp) -> UOp | None:
  """The BUFFER behind u if u is (a realized value that is) only a reshape of a whole buffer, or a contiguous byte
  range of a DISK buffer: its value needs no kernel."""
  while True:
    if (v := u.__dict__.get(REALIZED)) is not None: u = v
    elif u.op is Ops.RESHAPE: u = u.src[0]
    else: break
  return u if u.op is Ops.BUFFER else _disk_view(u)

def invalidate(base: UOp) -> None:
  """The contents of BUFFER `base` changed: forget every realized result held in it or computed from it."""
  _forget(lambda k: buffer_view(k.__dict__[REALIZED]) is base or base in k.toposort())

def invalidate_device(device: str) -> None:
  """Memory of `device` changed around the scheduler (a file written by assign): forget every realized result computed
  from a buffer on it."""
  _forget(lambda k: any(u.op is Ops.BUFFER and u.device == device for u in k.toposort()))

def _forget(stale) -> None:
  for k in [k for r in list(_realized.refs.values()) if (k := r()) is not None]:
    if stale(k):
      del k.__dict__[REALIZED]
      _realized.refs.pop(id(k), None)

# ---------------- byte-range views of DISK buffers: slicing a file tensor and copying it reads only those bytes
_disk_views: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()

def _contiguous_start(shape: tuple[int, ...], arg: tuple[tuple[int, int], ...]) -> int | None:
  """Element offset of SHRINK(arg) of a C-contiguous `shape` if the kept elements are one contiguous run, else None."""
  if any(e == b for b, e in arg): return 0  # empty: any start will do
  # contiguous iff: after the first dim that keeps more than one element, every dim is kept whole
  partial = False
  for (b, e), s in zip(arg, shape):
    if partial and (b, e) != (0, s): return None
    if e - b > 1: partial = True
  start, stride = 0, 1
  for (b, _), s in zip(reversed(arg), reversed(shape)):
    start += b * stride
    stride *= s
  return start

def _disk_view(u: UOp) -> UOp | None:
  """A BUFFER uop for u's bytes if u is RESHAPE/SHRINK/BITCAST of a DISK buffer that covers one contiguous byte range."""
  if u.op not in (Ops.RESHAPE, Ops.SHRINK, Ops.BITCAST): return None
  if (hit := _disk_views.get(u)) is not None: return hit
  chain, x = [], u
  while x.op in (Ops.RESHAPE, Ops.SHRINK, Ops.BITCAST):
    chain.append(x)
    x = x.src[0]
  if x.op is not Ops.BUFFER or not str(x.device).startswith("DISK:") or (base := buffer_of(x)) is None: return None
  offset, shape = 0, x.shape  # element offset into the base buffer, current (C-contiguous) shape
  for y in reversed(chain):
    if y.op is Ops.BITCAST and y.dtype.itemsize != y.src[0].dtype.itemsize: return None
    if y.op is Ops.SHRINK:
      if (start := _contiguous_start(shape, y.arg)) is None: return None
      offset += start
    shape = y.shape
  view = _disk_views[u] = view_uop(base, offset * x.dtype.itemsize, u.size, u.dtype)
  return view
