"""Reverse-mode differentiation as a graph-to-graph function on tensor-level UOps: one rule per op.

The gradient graph is ordinary lazy Tensor graph, so it fuses and schedules like any forward computation."""
from __future__ import annotations
import itertools, math
from typing import Callable
from fusegrad.dtype import dtypes
from fusegrad.uop.ops import Ops, UOp

def _T(u: UOp):
  from fusegrad.tensor import Tensor
  return Tensor(u)

def _unbroadcast_expand(g, src: UOp):
  """EXPAND backward: sum over the dims the expand made larger."""
  axes = tuple(i for i, (a, b) in enumerate(zip(src.shape, g.shape)) if a != b)
  return g.sum(axes, keepdim=True, dtype=g.dtype) if axes else g

def _reduce_grad(g, u: UOp):
  op, axes = u.arg
  x = _T(u.src[0])
  if op is Ops.ADD: return (g.expand(x.shape),)
  out = _T(u)
  if op is Ops.MAX:
    # split the gradient evenly among tied maxima (torch's amax behaviour)
    hit = (x == out.expand(x.shape)).cast(g.dtype)
    return (hit * (g / hit.sum(axes, keepdim=True, dtype=g.dtype)).expand(x.shape),)
  if op is Ops.MUL:
    # product of all the other elements; correct with zeros as well (one zero: only it gets a gradient)
    zero = x == 0
    nonzero_prod = zero.where(1, x).prod(axes, keepdim=True, dtype=x.dtype)
    nzeros = zero.cast(g.dtype).sum(axes, keepdim=True, dtype=g.dtype)
    others = (nzeros == 0).where(out.expand(x.shape) / zero.where(1, x), 0) + \
             ((nzeros == 1) & zero).where(nonzero_prod.expand(x.shape), 0)
    return (g.expand(x.shape) * others,)
  raise NotImplementedError(f"no gradient for reduce {op}")

def _pow_grad(g, u: UOp):
  a, b, out = _T(u.src[0]), _T(u.src[1]), _T(u)
  ga = g * (b == 0).where(0, b * a.pow(b - 1))  # d(a**0)/da is 0, also at a == 0 where a**-1 is inf
  gb = g * ((a == 0) & (b >= 0)).where(0, out * a.log())
  return ga, gb

def _max_grad(g, u: UOp):
  a, b = _T(u.src[0]), _T(u.src[1])
  # ties share the gradient equally, as torch.maximum does
  wa = (a > b).cast(g.dtype) + (a == b).cast(g.dtype) * 0.5
  return g * wa, g * (1 - wa)

def _gather_grad(g, u: UOp):
  # scatter-add: every output position sends its gradient to the source element it read
  from fusegrad.tensor import Tensor
  dim, x, index = u.arg, u.src[0], _T(u.src[1])
  n = x.shape[dim]
  hit = index.unsqueeze(-1) == Tensor.arange(n, device=index.device)          # (*index.shape, n)
  contrib = (hit.cast(g.dtype) * g.unsqueeze(-1)).transpose(dim, -1)          # n moves to `dim`, index's dim to the end
  out = contrib.sum(-1, dtype=g.dtype)                                          # (*index.shape with n at dim)
  return (out.pad(tuple((0, xs - os) for xs, os in zip(x.shape, out.shape))), None)

def _window_grad(g, u: UOp):
  # each input element collects the gradient of every window position that read it: one shifted copy per offset k
  k_, s_, d_ = u.arg
  n, src_shape = len(k_), u.src[0].shape
  lead, i_ = src_shape[:-n], src_shape[-n:]
  o_ = u.shape[len(lead):len(lead) + n]
  total = None
  for ks in itertools.product(*[range(k) for k in k_]):
    piece = g.shrink(tuple((0, x) for x in lead + o_) + tuple((k, k + 1) for k in ks)).reshape(lead + o_)
    for j, (o, st) in enumerate(zip(o_, s_)):  # spread by the stride: o -> o*st
      if st > 1:
        ax = len(lead) + j
        piece = piece.unsqueeze(ax + 1)
        piece = piece.pad(tuple((0, st - 1) if a == ax + 1 else (0, 0) for a in range(piece.ndim))).flatten(ax, ax + 1)
    pads = tuple((0, 0) for _ in lead) + tuple((k * d, i - k * d - p) for k, d, i, p in zip(ks, d_, i_, piece.shape[len(lead):]))
    piece = piece.pad(pads)
    total = piece if total is None else total + piece
  return (total,)

def _inv_permute(order): return tuple(sorted(range(len(order)), key=lambda i: order[i]))

RULES: dict[Ops, Callable] = {
  Ops.ADD: lambda g, u: (g, g),
  Ops.SUB: lambda g, u: (g, -g),
  Ops.MUL: lambda g, u: (g * _T(u.src[1]), g * _T(u.src[0])),
  Ops.FDIV: lambda g, u: (g / _T(u.src[1]), -g * _T(u) / _T(u.src[1])),
  Ops.NEG: lambda g, u: (-g,),
  Ops.EXP: lambda g, u: (g * _T(u),),
  Ops.EXP2: lambda g, u: (g * _T(u) * math.log(2),),
  Ops.LOG: lambda g, u: (g / _T(u.src[0]),),
  Ops.LOG2: lambda g, u: (g / (_T(u.src[0]) * math.log(2)),),
  Ops.SIN: lambda g, u: (g * _T(u.src[0]).cos(),),
  Ops.COS: lambda g, u: (-g * _T(u.src[0]).sin(),),
  Ops.TAN: lambda g, u: (g * (1 + _T(u) * _T(u)),),
  Ops.SQRT: lambda g, u: (g / (2 * _T(u)),),
  Ops.RECIP: lambda g, u: (-g * _T(u) * _T(u),),
  Ops.TANH: lambda g, u: (g * (1 - _T(u) * _T(u)),),
  Ops.ERF: lambda g, u: (g * (2 / math.sqrt(math.pi)) * (-_T(u.src[0]).square()).exp(),),
  Ops.ABS: lambda g, u: (g * _T(u.src[0]).sign(),),
  Ops.TRUNC: lambda g, u: (g * 0,), Ops.FLOOR: lambda g, u: (g * 0,), Ops.CEIL: lambda g, u: (g * 0,), Ops.RINT: lambda g, u: (g * 0,),
  Ops.MAX: _max_grad,
  Ops.POW: _pow_grad,
  Ops.WHERE: lambda g, u: (None, _T(u.src[0]).where(g, 0), _T(u.src[0]).where(0, g)),
  Ops.SIGMOID: lambda g, u: (g * _T(u) * (1 - _T(u)),),
  Ops.CAST: lambda g, u: (g.cast(u.src[0].dtype) if dtypes.is_float(u.src[0].dtype) else None,),
  # comparisons and bit ops are piecewise constant: no gradient flows through them
  **{op: (lambda g, u: (None,) * len(u.src)) for op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR,
                                                        Ops.IDIV, Ops.MOD, Ops.BITCAST, Ops.IOTA)},
  Ops.RESHAPE: lambda g, u: (g.reshape(u.src[0].shape),),
  Ops.PERMUTE: lambda g, u: (g.permute(_inv_permute(u.arg)),),
  Ops.EXPAND: lambda g, u: (_unbroadcast_expand(g, u.src[0]),),
  Ops.PAD: lambda g, u: (g.shrink(tuple((b, b + s) for (b, _), s in zip(u.arg, u.src[0].shape))),),
  Ops.SHRINK: lambda g, u: (g.pad(tuple((b, s - e) for (b, e), s in zip(u.arg, u.src[0].shape))),),
  Ops.FLIP: lambda g, u: (g.flip([i for i, f in enumerate(u.arg) if f]),),
  Ops.REDUCE_AXIS: _reduce_grad,
  Ops.GATHER: _gather_grad,
  Ops.WINDOW: _window_grad,
  Ops.CONTIGUOUS: lambda g, u: (g,),
  Ops.COPY: lambda g, u: (g.to(u.src[0].device), None),
}

def compute_gradient(root: UOp, root_grad: UOp, targets: set[UOp]) -> dict[UOp, UOp]:
  """d(root)/d(target) for each target reachable from root, seeded with root_grad."""
  order = root.toposort()
  on_path: dict[UOp, bool] = {}
  for u in order: on_path[u] = u in targets or (u.op is not Ops.DETACH and any(on_path[s] for s in u.src))
  grads = {root: _T(root_grad)}
  for u in reversed(order):
    if u not in grads or u in targets and not u.src or not on_path[u] or u.op is Ops.DETACH: continue
    if u.op not in RULES:
      if any(on_path[s] for s in u.src): raise NotImplementedError(f"no gradient rule for {u.op}")
      continue
    for s, sg in zip(u.src, RULES[u.op](grads[u], u)):
      if sg is None or not on_path.get(s, False): continue
      grads[s] = grads[s] + sg if s in grads else sg
  return {t: grads[t].uop for t in targets if t in grads}
