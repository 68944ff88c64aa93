"""One kernel per materialized node: its value becomes SINK(STORE(DEFINE_GLOBAL(0), value)), materialized sources
become DEFINE_GLOBAL loads, and bound variables become DEFINE_VARs whose values travel with the item."""
from __future__ import annotations
from dataclasses import dataclass
from fusegrad.buffers import buffer_of, buffer_view
from fusegrad.device import Buffer, BufferView, Device
from fusegrad.dtype import dtypes
from fusegrad.helpers import prod
from fusegrad.uop.ops import PERMUTED_STORE, Capturing, Ops, UOp, sym_node

@dataclass(frozen=True)
class ScheduleItem:
  ast: UOp               # SINK(STORE(DEFINE_GLOBAL(0), value[, ASSIGN or PERMUTE placement])) or SINK(COPY)
  bufs: tuple            # Buffer objects; bufs[i] is DEFINE_GLOBAL(i)
  device: str
  var_vals: tuple = ()   # ((DEFINE_VAR, value), ...) bound for this launch

class Window(BufferView):
  """A box of an input buffer that a kernel reads as an input of its own (`x[i]`, `x[:, j]`, `x[a:b, c:d]` of a
  realized x): a pointer to the box's first element, spanning to its last, indexed with the buffer's strides. Its start
  is where the pointer points, not a constant in the code, so a loop over rows or columns compiles once, and the
  schedule cache keys the box by its sizes, taking its start from each call."""
  def __init__(self, source: Buffer, start: int, size: int):
    super().__init__(source, start * source.dtype.itemsize, size, source.dtype)
    self.source, self.start = source, start

def window(x: UOp, s: UOp | None = None) -> tuple[Buffer, int, int] | None:
  """(buffer, first element, span in elements) if x shrinks s (default: its source), a whole input buffer reshaped at
  most, to a box that is not empty. Not on DISK (the scheduler copies its byte ranges) or a device that cannot point
  into a buffer."""
  # (not in a TinyJit capture: a replay swaps the buffers it was given for new ones, and a window is another buffer)
  if x.op is not Ops.SHRINK or len(x.src) != 1 or not x.arg or Capturing.active: return None
  s = x.src[0] if s is None else s
  b = s if s.op is Ops.BUFFER else s.src[0] if s.op is Ops.RESHAPE and s.src[0].op is Ops.BUFFER else None
  # (a reshape with symbolic sizes lays the buffer out by their values, which a window's strides cannot follow)
  if b is None or s.vshape is not s.shape or (buf := buffer_of(b)) is None or b.dtype != buf.dtype or b.arg[1] != buf.size or \
     buf.device.startswith("DISK") or not hasattr(Device[buf.device].allocator, "offset") or any(b == e for b, e in x.arg):
    return None
  start, span, stride = 0, 1, 1
  for (lo, hi), n in zip(reversed(x.arg), reversed(s.shape)):
    start, span, stride = start + lo * stride, span + (hi - lo - 1) * stride, stride * n
  return buf, start, span

def _window_view(g: UOp, x: UOp, span: int) -> UOp:
  """x's box read from g, its window of `span` elements: the dims before the first that keeps more than one element
  drop out, and the rest are the buffer's rows from the box's first element on, the last padded past the window's end
  (no index of the box reaches there)."""
  sizes, shape = [e - b for b, e in x.arg], x.src[0].shape
  d = next((i for i, n in enumerate(sizes) if n > 1), len(sizes) - 1)
  rows, dt = (sizes[d], *shape[d + 1:]), g.dtype.base
  v = UOp(Ops.PAD, dt, (g,), ((0, pad),)) if (pad := prod(rows) - span) else g
  v = UOp(Ops.RESHAPE, dt, (v,), rows)
  if tuple(sizes[d:]) != rows: v = UOp(Ops.SHRINK, dt, (v,), tuple((0, n) for n in sizes[d:]))
  return UOp(Ops.RESHAPE, dt, (v,), x.shape) if v.shape != x.shape else v

class _Kernel:
  """The nodes of one kernel as they are built: its buffers, its variables and each graph node's kernel node. (A class,
  not closures: closures calling each other form a cycle that would keep graph nodes alive until the next collection.)"""
  def __init__(self, u: UOp, out: UOp, out_view: dict[UOp, UOp]):
    self.u, self.out_view = u, out_view
    self.bufs = [buffer_of(out)]
    self.var_vals: dict[UOp, UOp] = {}  # DEFINE_VAR -> the BIND giving its value
    self.index: dict[UOp, UOp] = {}
    self.windows: dict[tuple, Window] = {}
  def size(self, s):
    """A symbolic size of a loaded buffer in the kernel's terms (its BINDs as DEFINE_VARs)."""
    if not isinstance(s, UOp): return s
    for y in s.toposort():
      if y not in self.index: self.convert(y)
    return self.index[s]
  def convert(self, x: UOp) -> None:
    bufs, var_vals, index = self.bufs, self.var_vals, self.index
    if x not in self.out_view and (win := window(x)) is not None:
      if (view := self.windows.get(win)) is None:  # (equal boxes are one input: the schedule cache numbers them alike)
        view = self.windows[win] = Window(*win)
        bufs.append(view)
      r = _window_view(UOp(Ops.DEFINE_GLOBAL, view.dtype.ptr(view.size), (), bufs.index(view)), x, view.size)
    elif x is not self.u and (x in self.out_view or x.op is Ops.BUFFER):
      buf = buffer_of(self.out_view[x].base if x in self.out_view else x)
      if buf not in bufs: bufs.append(buf)
      g = UOp(Ops.DEFINE_GLOBAL, buf.dtype.ptr(buf.size), (), bufs.index(buf))
      if x.vshape is not x.shape: r = sym_node(Ops.RESHAPE, g, tuple(self.size(s) for s in x.vshape), g.dtype.base)
      else: r = UOp(Ops.RESHAPE, g.dtype.base, (g,), x.shape) if x.shape != g.shape else g
    elif x.op is Ops.CONST: r = UOp(Ops.CONST, x.dtype, (), x.arg)
    elif x.op is Ops.BIND:  # the kernel sees only the variable; its value is passed at launch, so no recompile
      r, n = x.src[0], 0
      while var_vals.setdefault(r, x).src[1].arg != x.src[1].arg:  # a second binding in one kernel gets its own name
        n += 1
        r = x.src[0].replace(arg=(f"{x.src[0].arg[0]}_{n}",) + x.src[0].arg[1:])
    elif x.op is Ops.COPY: r = index[x.src[0]]
    elif x.op is Ops.DEVICE: return
    else: r = x.replace(src=tuple(index[s] for s in x.src if s.op is not Ops.DEVICE))
    index[x] = r

def build_kernel(u: UOp, out: UOp, out_view: dict[UOp, UOp]) -> tuple[ScheduleItem, tuple]:
  """The kernel computing u into `out`: materialized sources become DEFINE_GLOBAL loads, bound variables become
  DEFINE_VARs whose values travel with the item. Also returns the BIND behind each of the item's var_vals."""
  if u.op is Ops.COPY:
    src = u.src[0]
    bv = out_view[src].base if src in out_view else buffer_view(src)
    if bv is not None and src.device != u.device:
      return ScheduleItem(UOp(Ops.SINK, dtypes.void, (UOp(Ops.COPY, u.dtype, (), (src.device, u.device)),)), (buffer_of(out), buffer_of(bv)), u.device), ()
  k = _Kernel(u, out, out_view)
  for x in (u.src[0] if u.op in (Ops.CONTIGUOUS, Ops.COPY) else u).toposort(lambda x: (x is not u and (x in out_view or x.op is Ops.BUFFER)) or window(x) is not None):
    k.convert(x)
  bufs, var_vals, index = k.bufs, k.var_vals, k.index
  g0 = UOp(Ops.DEFINE_GLOBAL, u.dtype.ptr(u.size), (), 0)
  if u.op is Ops.ASSIGN:  # only value's elements are stored, at the starts along dims arg of the target's shape
    place = UOp(Ops.ASSIGN, dtypes.void, tuple(index[s] for s in u.src[2:]), (u.arg, u.shape))
    store = UOp(Ops.STORE, dtypes.void, (g0, index[u.src[1]], place))
  elif u.op is Ops.CONTIGUOUS and u.arg == PERMUTED_STORE:  # loops in the order of the value before its permute
    store = UOp(Ops.STORE, dtypes.void, (g0, index[u.src[0].src[0]], UOp(Ops.PERMUTE, dtypes.void, (), u.src[0].arg)))
  else: store = UOp(Ops.STORE, dtypes.void, (g0, index[u.src[0] if u.op in (Ops.CONTIGUOUS, Ops.COPY) else u]))
  ast = UOp(Ops.SINK, dtypes.void, (store,))
  return ScheduleItem(ast, tuple(bufs), u.device, tuple((v, b.src[1].arg) for v, b in var_vals.items())), tuple(var_vals.values())
