"""Byte-range views of DISK buffers: `disk_view(uop)` turns a RESHAPE/SHRINK/BITCAST chain over a DISK buffer that covers
one contiguous byte range into a BUFFER uop naming a view of that range (or returns None), so slicing a file tensor
and copying it reads only those bytes. `buffer_view` (schedule/__init__.py) calls it."""
from __future__ import annotations
import weakref
from fusegrad.device import BufferView
from fusegrad.uop.ops import Ops, UOp

_views: "weakref.WeakKeyDictionary[UOp, UOp]" = weakref.WeakKeyDictionary()

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

def disk_view(u: UOp) -> UOp | None:
  """A BUFFER uop for u's bytes if u is RESHAPE/SHRINK/BITCAST of a DISK buffer that covers one contiguous byte range."""
  if u.op not in (Ops.RESHAPE, Ops.SHRINK, Ops.BITCAST): return None
  if (hit := _views.get(u)) is not None: return hit
  chain, x = [], u
  while x.op in (Ops.RESHAPE, Ops.SHRINK, Ops.BITCAST):
    chain.append(x)
    x = x.src[0]
  if x.op is not Ops.BUFFER or not str(x.device).startswith("DISK:"): return None
  from fusegrad import schedule as sched
  offset, shape = 0, x.shape  # element offset into the base buffer, current (C-contiguous) shape
  for y in reversed(chain):
    if y.op is Ops.BITCAST and y.dtype.itemsize != y.src[0].dtype.itemsize: return None
    if y.op is Ops.SHRINK:
      if (start := _contiguous_start(shape, y.arg)) is None: return None
      offset += start
    shape = y.shape
  base = sched.buffers.get(x)
  if base is None: return None
  view = BufferView(base, offset * x.dtype.itemsize, u.size, u.dtype)
  ret = _views[u] = sched.new_buffer_uop(u.device, u.size, u.dtype, view)
  return ret
