"""One kernel per materialized node: its value becomes SINK(STORE(DEFINE_GLOBAL(0), value)), materialized sources
become DEFINE_GLOBAL loads, and bound variables become DEFINE_VARs whose values travel with the item."""
from __future__ import annotations
from dataclasses import dataclass
from fusegrad.buffers import buffer_of, buffer_view
from fusegrad.dtype import dtypes
from fusegrad.uop.ops import PERMUTED_STORE, Ops, UOp, sym_node

@dataclass(frozen=True)
class ScheduleItem:
  ast: UOp               # SINK(STORE(DEFINE_GLOBAL(0), value[, ASSIGN or PERMUTE placement])) or SINK(COPY)
  bufs: tuple            # Buffer objects; bufs[i] is DEFINE_GLOBAL(i)
  device: str
  var_vals: tuple = ()   # ((DEFINE_VAR, value), ...) bound for this launch

class _Kernel:
  """The nodes of one kernel as they are built: its buffers, its variables and each graph node's kernel node. (A class,
  not closures: closures calling each other form a cycle that would keep graph nodes alive until the next collection.)"""
  def __init__(self, u: UOp, out: UOp, out_view: dict[UOp, UOp]):
    self.u, self.out_view = u, out_view
    self.bufs = [buffer_of(out)]
    self.var_vals: dict[UOp, UOp] = {}  # DEFINE_VAR -> the BIND giving its value
    self.index: dict[UOp, UOp] = {}
  def size(self, s):
    """A symbolic size of a loaded buffer in the kernel's terms (its BINDs as DEFINE_VARs)."""
    if not isinstance(s, UOp): return s
    for y in s.toposort():
      if y not in self.index: self.convert(y)
    return self.index[s]
  def convert(self, x: UOp) -> None:
    bufs, var_vals, index = self.bufs, self.var_vals, self.index
    if x is not self.u and (x in self.out_view or x.op is Ops.BUFFER):
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
  for x in (u.src[0] if u.op in (Ops.CONTIGUOUS, Ops.COPY) else u).toposort(lambda x: x is not u and (x in out_view or x.op is Ops.BUFFER)): k.convert(x)
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
