"""Reverse-mode differentiation as a graph-to-graph function on tensor-level UOps: one rule per op.

The rules build with UOp's op builders (OpBuilder in uop/ops.py), which make the nodes Tensor's methods of the same names make:
the gradient graph is ordinary lazy graph, and fuses and schedules like any forward computation."""
from __future__ import annotations
import itertools, math
from typing import Callable
from fusegrad.dtype import dtypes
from fusegrad.uop.ops import DERIVATIVE, Ops, UOp

def _unbroadcast_expand(g: UOp, src: UOp) -> UOp:
  """EXPAND backward: sum over the dims the expand made larger."""
  axes = tuple(i for i, (a, b) in enumerate(zip(src.shape, g.shape)) if a != b)
  return g.sum(axes, keepdim=True, dtype=g.dtype) if axes else g

def _max_hits(x: UOp, out: UOp) -> UOp:
  """Where x holds its max `out` (keepdim shape): equal values, or NaN where the max is NaN."""
  oe = out.expand(x.shape)
  return x.eq(oe) | (x.ne(x) & oe.ne(oe)) if dtypes.is_float(x.dtype) else x.eq(oe)

def _reduce_grad(g: UOp, u: UOp):
  op, axes = u.arg
  x = u.src[0]
  if op is Ops.ADD: return (g.expand(x.shape),)
  if op is Ops.MAX:
    # torch.max()'s rule: ties split the gradient evenly, a NaN max sends it to the NaN inputs. Select with where, never
    # multiply by a 0/1 mask: an inf or NaN upstream gradient must not reach the inputs that were not chosen (0 * inf = NaN)
    hit = _max_hits(x, u)
    if x.op is Ops.CONTIGUOUS and x.arg is None and x.src[0].op is Ops.REDUCE_AXIS and x.src[0].arg[0] is Ops.MAX:
      # the second pass of a max in two passes (OpBuilder._reduce_in_groups): weight each partial max by its number of
      # tied inputs, so that ties split evenly over the original elements, not per group
      inner = x.src[0]
      w = hit.where(_max_hits(inner.src[0], inner).cast(g.dtype).sum(inner.arg[1], keepdim=True, dtype=g.dtype), 0)
      return (hit.where((g / w.sum(axes, keepdim=True, dtype=g.dtype)).expand(x.shape) * w, 0),)
    return (hit.where((g / hit.cast(g.dtype).sum(axes, keepdim=True, dtype=g.dtype)).expand(x.shape), 0),)
  if op is Ops.MUL:
    # product of all the other elements; correct with zeros as well (one zero: only it gets a gradient)
    zero = x.eq(0)
    nonzero_prod = zero.where(1, x).prod(axes, keepdim=True, dtype=x.dtype)
    nzeros = zero.cast(g.dtype).sum(axes, keepdim=True, dtype=g.dtype)
    others = nzeros.eq(0).where(u.expand(x.shape) / zero.where(1, x), 0) + \
             (nzeros.eq(1) & zero).where(nonzero_prod.expand(x.shape), 0)
    return (g.expand(x.shape) * others,)
  raise NotImplementedError(f"no gradient for reduce {op}")

def _pow_grad(g: UOp, u: UOp):
  a, b = u.src
  ga = g * b.eq(0).where(0, b * a.pow(b - 1))  # d(a**0)/da is 0, also at a == 0 where a**-1 is inf
  gb = g * (a.eq(0) & (b >= 0)).where(0, u * a.log())
  return ga, gb

def _max_grad(g: UOp, u: UOp):
  a, b = u.src
  # torch.maximum's rule: ties split the gradient 0.5/0.5, a NaN input passes it to both. Selected with where, never by
  # multiplying with a 0/1 mask, so an inf/NaN upstream gradient does not leak into the input that was not chosen
  share = a.eq(b).where(g * 0.5, g)
  return (a < b).where(0, share), (a > b).where(0, share)

def _gather_grad(g: UOp, u: UOp):
  # scatter-add: every output position sends its gradient to the source element it read
  dim, (x, index) = u.arg, u.src
  hit = index.unsqueeze(-1).eq(UOp.arange(x.shape[dim], device=index.device))  # (*index.shape, n)
  contrib = (hit.cast(g.dtype) * g.unsqueeze(-1)).transpose(dim, -1)          # n moves to `dim`, index's dim to the end
  out = contrib.sum(-1, dtype=g.dtype)                                          # (*index.shape with n at dim)
  return (out.pad(tuple((0, xs - os) for xs, os in zip(x.shape, out.shape))), None)

def _window_grad(g: UOp, u: UOp):
  # each input element collects the gradient of every window position that read it: one shifted copy per offset k
  k_, s_, d_ = u.arg
  n, src_shape = len(k_), u.src[0].shape
  lead, i_ = src_shape[:-n], src_shape[-n:]
  o_ = u.shape[len(lead):len(lead) + n]
  if g.base.op is Ops.REDUCE_AXIS and math.prod(k_) > 1:
    # g is a product summed over output channels (a convolution's input gradient), read once per offset below, so it
    # gets a buffer anyway: laid out with the offsets k before the positions o, each shifted copy is a contiguous read
    order = tuple(range(len(lead))) + tuple(range(len(lead) + n, len(lead) + 2 * n)) + tuple(range(len(lead), len(lead) + n))
    g = UOp(Ops.CONTIGUOUS, g.dtype, (g.permute(order),)).permute(tuple(order.index(i) for i in range(len(order))))
  total = None
  for ks in itertools.product(*[range(k) for k in k_]):
    piece = g.shrink(tuple((0, x) for x in lead + o_) + tuple((k, k + 1) for k in ks)).reshape(lead + o_)
    for j, (o, st) in enumerate(zip(o_, s_)):  # spread by the stride: o -> o*st
      if st > 1:
        ax = len(lead) + j
        piece = piece.unsqueeze(ax + 1)
        piece = piece.pad(tuple((0, st - 1) if a == ax + 1 else (0, 0) for a in range(len(piece.shape)))).flatten(ax, ax + 1)
    pads = tuple((0, 0) for _ in lead) + tuple((k * d, i - k * d - p) for k, d, i, p in zip(ks, d_, i_, piece.shape[len(lead):]))
    piece = piece.pad(pads)
    total = piece if total is None else total + piece
  return (total,)

# A function built from several ops for an accurate value can have a composed derivative that is NaN where the true one is
# inf or finite (an intermediate 0 or inf meets 0 * inf: acosh at 1, atanh at ±1); a convolution's composed gradient is
# correct but slow. Such a function registers its output node with its inputs and a vector-Jacobian product;
# hash-consing makes the node stand for that function of those inputs only. The entry lives on the node (its
# DERIVATIVE attribute, gone with it; a weak map's Python-level insert was a tenth of an eager clamp): (input nodes,
# vjp on UOps taking which inputs need a gradient and returning one gradient or None per input).

def with_derivative(y, x, dydx: Callable):
  """y (a Tensor computed from the Tensor x) whose gradient is g * dydx(x), instead of the derivative of y's own graph.
  dydx must not hold y (the entry would keep its own key alive)."""
  return with_gradient(y, x, lambda g, x: g * dydx(x))

def with_gradient(y, x, vjp: Callable):
  """y (a Tensor computed from x, a Tensor or a tuple of Tensors) whose gradient for x is vjp(g, x), g being y's gradient
  (for a rule that must select, not multiply: where(mask, g, 0) keeps an inf g out of the unselected elements). With a
  tuple x, vjp(g, *x, needs=...) returns one gradient (or None) per input, where needs tells which inputs need one (an
  input image of a convolution does not). y and x may be UOps, and vjp then takes and returns UOps; otherwise vjp runs on
  y's class, each UOp wrapped in it."""
  xs, one = (x, False) if isinstance(x, tuple) else ((x,), True)
  if isinstance(y, UOp):
    y.__dict__[DERIVATIVE] = (xs, (lambda g, x, needs: (vjp(g, x),)) if one else vjp)
    return y
  wrap = type(y)  # the caller's class (Tensor): this module sits below tensor.py and does not import it
  def on_uops(g: UOp, *us: UOp, needs: tuple[bool, ...]) -> tuple:
    out = vjp(wrap(g), wrap(us[0])) if one else vjp(wrap(g), *map(wrap, us), needs=needs)
    return tuple(o if o is None else o.uop for o in ((out,) if one else out))
  y.uop.__dict__[DERIVATIVE] = (tuple(t.uop for t in xs), on_uops)
  return y

def _inv_permute(order): return tuple(sorted(range(len(order)), key=lambda i: order[i]))

RULES: dict[Ops, Callable[[UOp, UOp], tuple]] = {
  Ops.ADD: lambda g, u: (g, g),
  Ops.SUB: lambda g, u: (g, -g),
  Ops.MUL: lambda g, u: (g * u.src[1], g * u.src[0]),
  Ops.FDIV: lambda g, u: (g / u.src[1], -g * u / u.src[1]),
  Ops.NEG: lambda g, u: (-g,),
  Ops.EXP: lambda g, u: (g * u,),
  Ops.EXP2: lambda g, u: (g * u * math.log(2),),
  Ops.LOG: lambda g, u: (g / u.src[0],),
  Ops.LOG2: lambda g, u: (g / (u.src[0] * math.log(2)),),
  Ops.SIN: lambda g, u: (g * u.src[0].cos(),),
  Ops.COS: lambda g, u: (-g * u.src[0].sin(),),
  Ops.TAN: lambda g, u: (g * (1 + u * u),),
  Ops.SQRT: lambda g, u: (g / (2 * u),),
  Ops.RECIP: lambda g, u: (-g * u * u,),
  Ops.TANH: lambda g, u: (g * (1 - u * u),),
  Ops.ERF: lambda g, u: (g * (2 / math.sqrt(math.pi)) * (-u.src[0].square()).exp(),),
  Ops.ABS: lambda g, u: (g * u.src[0].sign(),),
  Ops.TRUNC: lambda g, u: (g * 0,), Ops.FLOOR: lambda g, u: (g * 0,), Ops.CEIL: lambda g, u: (g * 0,), Ops.RINT: lambda g, u: (g * 0,),
  Ops.MAX: _max_grad,
  Ops.POW: _pow_grad,
  Ops.WHERE: lambda g, u: (None, u.src[0].where(g, 0), u.src[0].where(0, g)),
  Ops.SIGMOID: lambda g, u: (g * u * (1 - u),),
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
  grads = {root: root_grad}
  for u in reversed(order):
    if u not in grads or u in targets and not u.src or not on_path[u] or u.op is Ops.DETACH: continue
    if u.vshape is not u.shape: raise NotImplementedError("gradients through tensors with symbolic (Variable) sizes are not supported")
    if (d := u.__dict__.get(DERIVATIVE)) is not None and any(on_path.get(x, False) for x in d[0]):
      srcs, src_grads = d[0], d[1](grads[u], *d[0], needs=tuple(on_path.get(x, False) for x in d[0]))
    elif u.op in RULES: srcs, src_grads = u.src, RULES[u.op](grads[u], u)
    elif any(on_path[s] for s in u.src): raise NotImplementedError(f"no gradient rule for {u.op}")
    else: continue
    for s, sg in zip(srcs, src_grads):
      if sg is None or not on_path.get(s, False): continue
      grads[s] = grads[s] + sg if s in grads else sg
  return {t: grads[t] for t in targets if t in grads}
