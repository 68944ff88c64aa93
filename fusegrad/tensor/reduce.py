"""Reductions (sum, prod, max/min, mean/var/std, any/all, argmax/argmin) and linear algebra (matmul, einsum, outer,
inner, cross, Newton-Schulz).

Tensor inherits ReduceMixin. The REDUCE_AXIS builders (split into groups, accumulate 16-bit floats wide) live on UOp
(uop/ops.py), shared with the derivative rules."""
from __future__ import annotations
import collections, math, string
from typing import TYPE_CHECKING
from fusegrad.dtype import DType, dtypes, least_upper_dtype, to_dtype
from fusegrad.gradient import with_gradient
from fusegrad.helpers import TensorError, prod
from fusegrad.uop.ops import REDUCE_GROUP_MAX_OUT, REDUCE_GROUP_MIN, Ops, UOp, broadcast_shape, sum_dtype, wide_dtype
from fusegrad.tensor.common import TensorMixin, is_tensor, _norm, _norm_axis, _pick, _shrink_dim

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

_MaxRet = collections.namedtuple("max", ["values", "indices"])

_MinRet = collections.namedtuple("min", ["values", "indices"])
_AminmaxRet = collections.namedtuple("aminmax", ["min", "max"])

def _safe_sqrt(s: Tensor) -> Tensor:
  """sqrt(s) for s >= 0 whose gradient is 0 where s is 0 (torch's for norms and distances; sqrt's own is inf there)."""
  zero = s == 0
  return zero.where(0, zero.where(1, s).sqrt())

class ReduceMixin(TensorMixin):
  # ---------------- reductions
  # the reduce builders live on UOp (OpBuilder, uop/ops.py), shared with the derivative rules: backward reduces split and
  # widen alike; Tensor adds its spellings (dim=, dtype names) and the (values, indices) of torch's max(dim=)
  def _axes(self: Tensor, axis) -> tuple[int, ...]: return self.uop._axes(axis)
  def _reduce(self: Tensor, op: Ops, axis=None, keepdim: bool = False) -> Tensor: return self._wrap(self.uop._reduce(op, axis, keepdim))
  def _sum_dtype(self: Tensor) -> DType: return sum_dtype(self.dtype)
  def _wide(self: Tensor) -> Tensor: return self.cast(wide_dtype(self.dtype))
  def sum(self: Tensor, axis=None, keepdim: bool = False, dtype: DType | str | None = None, acc_dtype=None, *, dim=None) -> Tensor:
    return self._wrap(self.uop.sum(self._pick_axis(axis, dim), keepdim, None if dtype is None else to_dtype(dtype)))
  def prod(self: Tensor, axis=None, keepdim: bool = False, dtype: DType | str | None = None, *, dim=None) -> Tensor:
    return self._wrap(self.uop.prod(self._pick_axis(axis, dim), keepdim, None if dtype is None else to_dtype(dtype)))
  def max(self: Tensor, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    """tinygrad's max(axis) gives the values; torch's spelling max(dim=d) gives (values, indices) as torch does."""
    if dim is not None: return self._max_min_dim(self._pick_axis(axis, dim), keepdim, True)
    self._check_nonempty("max", axis)
    return self._wrap(self.uop.max(axis, keepdim))
  def amax(self: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """torch.amax: the largest values over dim (an int or a tuple; None: every dim), without indices."""
    return self.max(None if dim is None or dim == () else dim, keepdim)
  def amin(self: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """torch.amin: the smallest values over dim (an int or a tuple; None: every dim), without indices."""
    return self.min(None if dim is None or dim == () else dim, keepdim)
  def min(self: Tensor, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    if dim is not None: return self._max_min_dim(self._pick_axis(axis, dim), keepdim, False)
    self._check_nonempty("min", axis)
    if self.dtype == dtypes.bool: return self.logical_not().max(axis, keepdim).logical_not()
    if dtypes.is_int(self.dtype): return (~(~self).max(axis, keepdim))
    return -((-self).max(axis, keepdim))
  def _check_nonempty(self: Tensor, name: str, axis):
    if any(self.shape[a] == 0 for a in self._axes(axis)): raise RuntimeError(f"{name}() of an empty dimension has no identity: shape {self.shape}, dim {axis}")
  def mean(self: Tensor, axis=None, keepdim: bool = False, dtype: DType | str | None = None, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    x = self.cast(dtype) if dtype is not None else self._float()
    n = prod(self.shape[a] for a in self._axes(axis))
    out = x._wide().sum(axis, keepdim)
    return (out.div(n) if n else out * math.nan).cast(x.dtype)
  # torch's NaN-skipping and counting reductions
  def nansum(self: Tensor, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    return self.isnan().where(0, self).sum(self._pick_axis(axis, dim), keepdim)
  def nanmean(self: Tensor, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    x = self._float()
    return x.nansum(axis, keepdim) / x.isnan().logical_not().sum(axis, keepdim).cast(x.dtype)
  def count_nonzero(self: Tensor, axis=None, *, dim=None) -> Tensor: return (self != 0).sum(self._pick_axis(axis, dim))
  def aminmax(self: Tensor, *, dim=None, keepdim: bool = False):
    """torch.aminmax: a (min, max) named tuple over dim (every element when None)."""
    return _AminmaxRet(self.amin(dim, keepdim), self.amax(dim, keepdim))
  def var(self: Tensor, axis=None, keepdim: bool = False, correction: int = 1, unbiased: bool | None = None, *, dim=None) -> Tensor:
    x = self._float()
    return self._wide_var(self._pick_axis(axis, dim), keepdim, correction, unbiased).cast(x.dtype)
  def std(self: Tensor, axis=None, keepdim: bool = False, correction: int = 1, unbiased: bool | None = None, *, dim=None) -> Tensor:
    x = self._float()
    return _safe_sqrt(self._wide_var(self._pick_axis(axis, dim), keepdim, correction, unbiased)).cast(x.dtype)
  def _wide_var(self: Tensor, axis, keepdim: bool, correction: int, unbiased: bool | None) -> Tensor:
    """The variance in float32 for 16-bit floats (else in self's float dtype), rounded by the caller: a float16 std of
    [60000, -60000, 1] squared past float16's range on the way (inf; torch: 60000)."""
    if unbiased is not None: correction = int(unbiased)
    x = self._float()._wide()
    n = prod(self.shape[a] for a in self._axes(axis))
    d = x - x.mean(axis, keepdim=True)
    sq = d.square().sum(axis, keepdim)
    # a long reduction into few outputs (the partial-sums path of _reduce_in_groups) takes the corrected two-pass form: the
    # deviations' own sum removes the error the mean carries, which the squares would add as n * error**2 (the variance of
    # 4e6 samples of 1e6 + N(0, 1) was 1.77 under AVX2). Per-channel statistics (batchnorm) keep one pass: their kernels
    # add fewer values per output, and the extra reduction cost 5% of an MNIST step
    if isinstance(n, int) and n >= REDUCE_GROUP_MIN and isinstance(total := prod(self.shape), int) and total // n < REDUCE_GROUP_MAX_OUT:
      sq = sq - d.sum(axis, keepdim).square() / n
    if isinstance(n, UOp): return sq.div((n - correction).maximum(0))  # a symbolic count: its value is known at launch
    return sq.div(max(0, n - correction)) if n - correction > 0 else sq * math.nan if n == 0 else sq.div(0)
  def var_mean(self: Tensor, axis=None, keepdim=False, correction=1, *, dim=None):
    axis = self._pick_axis(axis, dim)
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)
  def std_mean(self: Tensor, axis=None, keepdim=False, correction=1, *, dim=None):
    axis = self._pick_axis(axis, dim)
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)
  def any(self: Tensor, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    # MAX over an empty axis gives the identity 0, so any() of nothing is False as in torch
    return self.bool().cast(dtypes.uint8)._reduce(Ops.MAX, axis, keepdim).cast(dtypes.bool)
  def all(self: Tensor, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    return self.logical_not().any(self._pick_axis(axis, dim), keepdim).logical_not()
  def _arg(self: Tensor, axis, keepdim: bool, largest: bool) -> Tensor:
    x = self if largest else (-self if dtypes.is_float(self.dtype) else ~self if dtypes.is_int(self.dtype) else self.logical_not())
    if axis is None: return x.flatten()._arg(0, keepdim=False, largest=True).reshape(() if not keepdim else (1,) * self.ndim)
    a = _norm_axis(axis, self.ndim)
    if not self.ndim: return x.reshape(1)._arg(0, keepdim=False, largest=True)  # a 0-d tensor's dim 0 or -1: its one element
    self._check_nonempty("argmax" if largest else "argmin", a)
    m = x.max(a, keepdim=True)
    n = self.shape[a]
    # the first index holding the max: NaN counts as the max, as in torch
    hit = (x == m) | (x != x) if dtypes.is_float(self.dtype) else (x == m)
    rev = (-type(self).arange(n, device=self.device) + n).reshape((n,) + (1,) * (self.ndim - a - 1))  # n, n-1, ..., 1
    return (-(hit * rev).max(a, keepdim) + n).cast(dtypes.int32)  # (n may be a symbolic size: it goes on the right)
  def argmax(self: Tensor, axis=None, keepdim: bool = False, *, dim=None) -> Tensor: return self._arg(self._pick_axis(axis, dim), keepdim, True)
  def argmin(self: Tensor, axis=None, keepdim: bool = False, *, dim=None) -> Tensor: return self._arg(self._pick_axis(axis, dim), keepdim, False)
  def _pick_axis(self: Tensor, axis, dim):
    """The reduction axis from tinygrad's `axis` or PyTorch's `dim` keyword (at most one may be given)."""
    return _pick(axis, dim)
  def _max_min_dim(self: Tensor, dim, keepdim: bool, largest: bool):
    """torch's `x.max(dim=d)` / `x.min(dim=d)`: a (values, indices) named tuple."""
    if not isinstance(dim, int): raise TypeError(f"{'max' if largest else 'min'}(dim=...) takes one int dim, got {dim!r}")
    vals = self.max(dim, keepdim) if largest else self.min(dim, keepdim)
    idx = self.argmax(dim, keepdim) if largest else self.argmin(dim, keepdim)
    return (_MaxRet if largest else _MinRet)(vals, idx)

  # ---------------- linear algebra
  def dot(self: Tensor, w: Tensor, dtype: DType | str | None = None) -> Tensor:
    """Matrix product; dtype= (tinygrad's) casts both operands to it first, so the product is computed and returned in it."""
    x = self
    if x.ndim == 0 or w.ndim == 0: raise TensorError(f"matmul needs at least 1-d operands, got shapes {x.shape} and {w.shape}")
    if x.device != w.device: raise RuntimeError(f"matmul operands are on different devices: {x.device} and {w.device}")
    k1, k2 = x.shape[-1], w.shape[-2] if w.ndim > 1 else w.shape[0]
    if k1 != k2: raise TensorError(f"matmul shape mismatch: {x.shape} @ {w.shape} (inner sizes {k1} and {k2} differ)")
    dt = least_upper_dtype(x.dtype, w.dtype) if dtype is None else to_dtype(dtype)
    x, w = x.cast(dt), w.cast(dt)
    squeeze = []
    if x.ndim == 1: x = x.reshape(1, k1); squeeze.append(-2)
    if w.ndim == 1: w = w.reshape(k2, 1); squeeze.append(-1)
    batch = broadcast_shape(x.shape[:-2], w.shape[:-2])
    m, n = x.shape[-2], w.shape[-1]
    xb = x.reshape(x.shape[:-1] + (1, k1))._broadcast_to(batch + (m, n, k1))
    wb = w.transpose(-1, -2).reshape(w.shape[:-2] + (1, n, k1))._broadcast_to(batch + (m, n, k1))
    # like torch, integer matmul keeps its dtype (and wraps), and 16-bit floats multiply and add in float32 and round once
    # (a float16 product rounded to 16 bits could overflow: 300 * 300 - 300 * 300 was NaN)
    wide = wide_dtype(dt)
    out = (xb.cast(wide) * wb.cast(wide)).sum(-1, dtype=wide).cast(dt)
    if -1 in squeeze: out = out.squeeze(-1)
    if -2 in squeeze: out = out.squeeze(-1 if -1 in squeeze else -2)
    return out
  def matmul(self: Tensor, x: Tensor, reverse: bool = False, dtype: DType | str | None = None) -> Tensor:
    return x.dot(self, dtype) if reverse else self.dot(x, dtype)
  def linear(self: Tensor, weight: Tensor, bias: Tensor | None = None, dtype: DType | str | None = None) -> Tensor:
    x = (self.mul(weight) if dtype is None else self.cast(dtype).mul(weight.cast(dtype))) if weight.ndim == 1 else self.dot(weight, dtype)
    return x.add(bias) if bias is not None else x
  @classmethod
  def einsum(cls: type[Tensor], formula: str, *operands, acc_dtype=None, dtype=None) -> Tensor:
    """Einstein summation: explicit ('ij,jk->ik') or implicit output, '...' broadcasting, repeated labels (diagonals)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    ops = [o if is_tensor(o) else cls(o) for o in operands]
    eq = formula.replace(" ", "")
    for c in eq:
      if c not in string.ascii_letters and c not in ",.->": raise TensorError(f"einsum(): invalid subscript {c!r} in {formula!r} (letters only)")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ops): raise TensorError(f"einsum(): {formula!r} has {len(terms)} operands but {len(ops)} tensors were given")
    def split(t: str) -> tuple[str, str, bool]:
      if "." in t.replace("...", "") or t.count("...") > 1: raise TensorError(f"einsum(): invalid ellipsis in {t!r}")
      a, e, b = t.partition("...")
      return a, b, bool(e)
    ell_n = 0
    for i, (t, o) in enumerate(zip(terms, ops)):
      a, b, e = split(t)
      k = o.ndim - len(a) - len(b)
      if (not e and k != 0) or k < 0:
        raise TensorError(f"einsum(): subscripts {t!r} of operand {i} do not match its {o.ndim} dims (shape {o.shape})")
      ell_n = max(ell_n, k)
    ell = [chr(0x100 + i) for i in range(ell_n)]
    labels = []
    for t, o in zip(terms, ops):
      a, b, e = split(t)
      k = o.ndim - len(a) - len(b)
      labels.append(list(a) + ell[ell_n - k:] + list(b))
    if arrow:
      a, b, e = split(rhs)
      out = list(a) + (ell if e else []) + list(b)
      for c in out:
        if c not in lhs and c not in ell: raise TensorError(f"einsum(): output subscript {c!r} does not appear in the inputs of {formula!r}")
      if len(set(out)) != len(out): raise TensorError(f"einsum(): output subscripts repeat in {formula!r}")
    else:
      counts = {c: lhs.count(c) for c in lhs if c in string.ascii_letters}
      out = ell + sorted(c for c, n in counts.items() if n == 1)
    # repeated labels inside one operand take a diagonal
    xs = []
    for lab, o in zip(labels, ops):
      lab = list(lab)
      while (dup := next((c for c in lab if lab.count(c) > 1), None)) is not None:
        p = lab.index(dup)
        q = lab.index(dup, p + 1)
        if o.shape[p] != o.shape[q]: raise TensorError(f"einsum(): subscript {dup!r} is repeated for dims of different sizes {o.shape[p]} and {o.shape[q]}")
        o = o.diagonal(0, p, q)
        lab = [c for i, c in enumerate(lab) if i not in (p, q)] + [dup]
      xs.append((lab, o))
    sizes: dict[str, int] = {}
    for lab, o in xs:
      for c, s in zip(lab, o.shape):
        if sizes.get(c, 1) != 1 and s != 1 and sizes[c] != s:
          raise TensorError(f"einsum(): subscript {c if ord(c) < 0x100 else '...'!r} has sizes {sizes[c]} and {s} that do not broadcast")
        sizes[c] = s if sizes.get(c, 1) == 1 else sizes[c]
    everything = out + [c for lab, _ in xs for c in lab if c not in out]
    everything = list(dict.fromkeys(everything))
    # 16-bit floats multiply and add in float32 and round once, as matmul does
    prod_dt = least_upper_dtype(*[o.dtype for _, o in xs])
    wide, prodt = wide_dtype(prod_dt), None
    for lab, o in xs:
      o = o.permute(tuple(sorted(range(len(lab)), key=lambda i: everything.index(lab[i])))) if lab else o
      present = sorted(lab, key=everything.index)
      o = o.reshape(tuple(o.shape[present.index(c)] if c in present else 1 for c in everything)).cast(wide)
      prodt = o if prodt is None else prodt * o
    prodt = prodt._broadcast_to(tuple(sizes.get(c, 1) for c in everything))
    dt = to_dtype(dtype or acc_dtype) if (dtype or acc_dtype) is not None else prod_dt
    if len(everything) > len(out): prodt = prodt.sum(tuple(range(len(out), len(everything))), dtype=wide if wide != prod_dt else dt)
    return prodt.cast(dt)
  def outer(self: Tensor, other: Tensor) -> Tensor:
    if self.ndim != 1 or other.ndim != 1: raise RuntimeError(f"outer(): expects 1-d tensors, got {self.shape} and {other.shape}")
    return self.reshape(-1, 1) * other.reshape(1, -1)
  ger = outer
  def inner(self: Tensor, other: Tensor) -> Tensor:
    """Sum over the last dims: shape self.shape[:-1] + other.shape[:-1] (a product when either is 0-d)."""
    if self.ndim == 0 or other.ndim == 0: return self * other
    if self.shape[-1] != other.shape[-1]: raise RuntimeError(f"inner(): last dims must match, got {self.shape} and {other.shape}")
    a = self.reshape(self.shape[:-1] + (1,) * (other.ndim - 1) + self.shape[-1:])
    prodt = a * other.reshape((1,) * (self.ndim - 1) + other.shape)
    return prodt.sum(-1, dtype=prodt.dtype)
  def vdot(self: Tensor, other: Tensor) -> Tensor:
    if self.ndim != 1 or other.ndim != 1 or self.shape != other.shape: raise RuntimeError(f"vdot(): expects 1-d tensors of the same size, got {self.shape} and {other.shape}")
    prodt = self * other
    return prodt.sum(dtype=prodt.dtype)
  def cross(self: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """Cross product of 3-vectors along dim (default: the first dim of size 3, as torch.cross)."""
    a, b = self._broadcasted(other)
    if dim is None:
      dim = next((i for i, s in enumerate(a.shape) if s == 3), None)
      if dim is None: raise RuntimeError(f"cross(): no dim of size 3 in shape {a.shape}")
    d = _norm(dim, a.ndim)
    if a.shape[d] != 3: raise RuntimeError(f"cross(): dim {d} must have size 3, got shape {a.shape}")
    a0, a1, a2 = (_shrink_dim(a, d, i, i + 1) for i in range(3))
    b0, b1, b2 = (_shrink_dim(b, d, i, i + 1) for i in range(3))
    return type(self).cat(a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0, dim=d)
  # ---------------- searching and counting
  def isin(self: Tensor, test_elements, invert: bool = False) -> Tensor:
    """Whether each element is among test_elements (a tensor, list or number); NaN is in nothing."""
    t = test_elements if is_tensor(test_elements) else type(self)(test_elements, device=self.device)
    hit = (self.unsqueeze(-1) == t.flatten()).any(-1) if t.numel() else self.zeros_like(dtype=dtypes.bool)
    return hit.logical_not() if invert else hit
  def bucketize(self: Tensor, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """torch.bucketize: for each value the index of its bucket among the sorted 1-d boundaries, the number of boundaries
    below it (right: at or below it). int64 unless out_int32."""
    if boundaries.ndim != 1: raise RuntimeError(f"bucketize(): boundaries must be 1-d, got shape {boundaries.shape}")
    return boundaries.searchsorted(self, out_int32=out_int32, right=right)
  def searchsorted(self: Tensor, values, *, out_int32: bool = False, right: bool = False, side: str | None = None) -> Tensor:
    """torch.searchsorted with self the sorted sequence: 1-d for values of any shape, else one sorted row per row of
    values (the leading dims equal). side 'left'/'right' is right=False/True."""
    if side is not None:
      if side not in ("left", "right"): raise RuntimeError(f"searchsorted(): side must be 'left' or 'right', got {side!r}")
      right = side == "right"
    v = values if is_tensor(values) else type(self)(values, device=self.device)
    if self.ndim > 1 and self.shape[:-1] != v.shape[:-1]:
      raise RuntimeError(f"searchsorted(): the sorted sequence {self.shape} and the values {v.shape} must agree but in the last dim")
    seq = self.reshape((1,) * v.ndim + self.shape) if self.ndim == 1 else self.unsqueeze(-2)  # (..., 1 or n_values, n)
    below = seq <= v.unsqueeze(-1) if right else seq < v.unsqueeze(-1)
    return below.sum(-1, dtype=dtypes.int32 if out_int32 else dtypes.int64)
  def histc(self: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """torch.histc: counts in `bins` equal bins over [min, max] (the data's own range when min == max; realizes it),
    the last bin closed; values outside are not counted. The result has self's float dtype."""
    x = self._float()
    if min == max: min, max = x.min().item(), x.max().item()
    if min == max: min, max = min - 1, max + 1  # (torch widens a point range too)
    if bins <= 0 or min > max: raise RuntimeError(f"histc(): needs bins > 0 and min <= max, got bins={bins}, min={min}, max={max}")
    idx = ((x.flatten() - min) * (bins / (max - min))).floor().cast(dtypes.int32).minimum(bins - 1)
    inside = (x.flatten() >= min) & (x.flatten() <= max)
    return (inside.unsqueeze(-1) & (idx.unsqueeze(-1) == type(self).arange(bins, device=self.device))).sum(0).cast(x.dtype)
  def kron(self: Tensor, other: Tensor) -> Tensor:
    """Kronecker product: block (i, j, ...) is self[i, j, ...] * other (the shorter shape padded with leading 1s)."""
    n = max(self.ndim, other.ndim)
    a, b = self.reshape((1,) * (n - self.ndim) + self.shape), other.reshape((1,) * (n - other.ndim) + other.shape)
    prodt = a.reshape(tuple(v for s in a.shape for v in (s, 1))) * b.reshape(tuple(v for s in b.shape for v in (1, s)))
    return prodt.reshape(tuple(x * y for x, y in zip(a.shape, b.shape)))
  def norm(self: Tensor, p=None, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """torch.norm / linalg.vector_norm over dim (every element when None): p 2 ('fro', None), 1, inf, -inf, 0 (the count
    of non-zeros) or any other number; a float result. The 2-norm's gradient at 0 is 0, as torch's (sqrt's is inf)."""
    x = (self.cast(to_dtype(dtype)) if dtype is not None else self)._float()
    p = 2 if p in (None, "fro") else p
    if isinstance(p, str): raise NotImplementedError(f"norm(p={p!r}) is not supported; use a number, 'fro' or None")
    if p == 2: return _safe_sqrt(x.square().sum(dim, keepdim))
    a = x.abs()
    if p == math.inf: return a.amax(dim, keepdim)
    if p == -math.inf: return a.amin(dim, keepdim)
    if p == 0: return (x != 0).sum(dim, keepdim).cast(x.dtype)
    if p == 1: return a.sum(dim, keepdim)
    keep = tuple(1 if i in x._axes(dim) else s for i, s in enumerate(x.shape))
    def vjp(g: Tensor, x: Tensor) -> Tensor:
      # torch's sign(x) * (|x| / norm) ** (p - 1): none where x or the norm is 0 (the composed graph's is inf * 0 there)
      n = x.abs().pow(p).sum(dim, keepdim=True).pow(1 / p)
      dead = (n == 0) | (x == 0)
      return g.reshape(keep) * dead.where(0, x.sign() * (x.abs() / dead.where(1, n)).pow(p - 1))
    return with_gradient(a.pow(p).sum(dim, keepdim).pow(1 / p), x, vjp)
  def cdist(self: Tensor, other: Tensor, p: float = 2.0) -> Tensor:
    """torch.cdist: the p-norm distance of each row of self (..., P, M) to each row of other (..., R, M): (..., P, R)."""
    if self.ndim < 2 or other.ndim < 2 or self.shape[-1] != other.shape[-1]:
      raise RuntimeError(f"cdist(): expects (..., P, M) and (..., R, M), got {self.shape} and {other.shape}")
    return (self.unsqueeze(-2) - other.unsqueeze(-3)).norm(p, dim=-1)
  def newton_schulz(self: Tensor, steps: int, params: tuple, eps: float = 1e-7) -> Tensor:
    """Newton-Schulz iteration with the odd polynomial sum_i params[i] * (G G^T)^i G on the last two dims (as
    Muon uses to orthogonalize), starting from self / (||self||_F + eps)."""
    if self.ndim < 2: raise TensorError(f"newton_schulz needs at least 2 dims, got shape {self.shape}")
    if self.shape[-2] > self.shape[-1]: return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
    g = self / (self.square().sum((-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      a, term, acc = g @ g.transpose(-2, -1), g, None
      for i, c in enumerate(params):
        if i: term = a @ term
        acc = term * c if acc is None else acc + term * c
      g = acc
    return g
