"""PyTorch-level Tensor ops beyond the core (indexing, scatter/gather, sorting, scans, einsum, ...).

Tensor inherits OpsMixin, so these are ordinary Tensor methods. Everything is composed from the core lazy ops
(movement, elementwise, reduce, GATHER, WINDOW), so it fuses and differentiates like any other graph. A few ops have a
result shape that depends on the data (masked_select, nonzero, boolean-mask indexing, repeat_interleave with a tensor of
counts): those realize the mask/counts first, as PyTorch does.

Index outputs (sort/argsort/topk/cummax/... indices, nonzero, multinomial, randperm) are int32, fusegrad's default int,
where PyTorch returns int64."""
from __future__ import annotations
import collections, math, string
from typing import TYPE_CHECKING, Any, Sequence
from fusegrad.dtype import DType, dtypes, to_dtype
from fusegrad.gradient import with_derivative
from fusegrad.helpers import TensorError, _T, flatten, prod

if TYPE_CHECKING:
  from fusegrad.tensor import Tensor

def _norm(axis: int, ndim: int, name: str = "dim") -> int:
  from fusegrad.tensor import _norm_axis
  return _norm_axis(axis, ndim, name)

def _pick(axis, dim, name: str = "dim"):
  """Methods take tinygrad's `axis` and PyTorch's `dim` keyword; at most one may be given."""
  if dim is not None and axis is not None and axis != dim: raise TypeError(f"got both axis={axis} and {name}={dim}")
  return dim if dim is not None else axis

IDX = dtypes.int32  # dtype of index results

_MaxRet = collections.namedtuple("max", ["values", "indices"])
_MinRet = collections.namedtuple("min", ["values", "indices"])

def _einops_side(side: str, formula: str) -> list:
  """One side of an einops formula: 'b (h w) c' -> ['b', ['h', 'w'], 'c']; '1' and '()' give an empty group;
  '...' (or the character …) is kept as '...'."""
  toks = side.replace("\u2026", "...").replace("(", " ( ").replace(")", " ) ").split()
  out: list = []
  grp: list | None = None
  for t in toks:
    if t == "(":
      if grp is not None: raise TensorError(f"rearrange: nested parentheses in {formula!r}")
      grp = []
    elif t == ")":
      if grp is None: raise TensorError(f"rearrange: unbalanced parentheses in {formula!r}")
      out.append(grp)
      grp = None
    elif t == "1":
      if grp is None: out.append([])
    elif t == "..." or (t.isidentifier() and not t.startswith("_") and not t.endswith("_")): (out if grp is None else grp).append(t)
    else: raise TensorError(f"rearrange: invalid axis name {t!r} in {formula!r}")
  if grp is not None: raise TensorError(f"rearrange: unbalanced parentheses in {formula!r}")
  if [n for it in out for n in (it if isinstance(it, list) else [it])].count("...") > 1:
    raise TensorError(f"rearrange: more than one '...' in {formula!r}")
  return out

def _arange(n: int, device, dtype: DType = IDX) -> Tensor: return _T().arange(n, device=device, dtype=dtype)

def _to_last(x: Tensor, d: int) -> Tensor:
  return x if d == x.ndim - 1 else x.permute(tuple(i for i in range(x.ndim) if i != d) + (d,))

def _from_last(x: Tensor, d: int) -> Tensor:
  if d == x.ndim - 1: return x
  order = list(range(x.ndim - 1))
  order.insert(d, x.ndim - 1)
  return x.permute(order)

def _shrink_dim(x: Tensor, d: int, b: int, e: int) -> Tensor:
  return x.shrink(tuple((b, e) if i == d else None for i in range(x.ndim)))

def _pad_dim(x: Tensor, d: int, b: int, a: int, value: Any = 0) -> Tensor:
  return x.pad(tuple((b, a) if i == d else (0, 0) for i in range(x.ndim)), value=value)

def _fmath(x: Tensor, fn) -> Tensor:
  """Run fn in the tensor's float dtype; ints become the default float; half types compute in float32 and round back."""
  dt = x.dtype if dtypes.is_float(x.dtype) else dtypes.default_float
  if dt in (dtypes.float16, dtypes.bfloat16): return fn(x.cast(dtypes.float32)).cast(dt)
  return fn(x.cast(dt))

def _sgn(x: Tensor) -> Tensor:
  """+1 or -1 (for x >= 0 / x < 0, NaN gives +1) as a gradient-free constant of x's dtype."""
  return (x.detach() < 0).where(x.full_like(-1), x.full_like(1))

def _log1p(x: Tensor) -> Tensor: return x.log1p()

_LN2 = math.log(2)
# atan(u) = u + u^3 * P(u^2) on |u| <= tan(pi/8): a least-squares fit of relative error (max ~1.2e-15), made for fusegrad
_ATAN_P = (-0.333333333332696, 0.19999999984243705, -0.14285712963812083, 0.11111057034145731, -0.09089657655333021,
           0.07674726014888729, -0.06512526638467957, 0.050443173781714534, -0.025561489571818835)
_TAN_PI_8 = 0.41421356237309503

def _atan(x: Tensor) -> Tensor:
  """atan on a float tensor: reduce |x| > 1 with atan(x) = ±pi/2 - atan(1/x), then |t| > tan(pi/8) with
  atan(t) = ±pi/4 + atan((t ∓ 1)/(1 ± t)), then a polynomial. Signs are constants, so the gradient is exact at 0."""
  sx = _sgn(x)
  big = x.abs() > 1
  t = big.where(1 / big.where(x, 1), x)
  st = _sgn(t)
  mid = t.abs() > _TAN_PI_8
  u = mid.where((t - st) / (1 + t * st), t)
  z = u * u
  p = z * _ATAN_P[-1] + _ATAN_P[-2]
  for c in reversed(_ATAN_P[:-2]): p = p * z + c
  r = u + u * z * p
  r = mid.where(r + st * (math.pi / 4), r)
  return big.where(sx * (math.pi / 2) - r, r)

# ---------------------------------------------------------------- scans
_SCAN_BLOCK = 32

def _scan_identity(op: str, dt: DType):
  return {"sum": 0, "prod": 1, "max": dtypes.min(dt), "min": dtypes.max(dt), "logsumexp": -math.inf}[op]

def _scan_combine(op: str, a: Tensor, b: Tensor) -> Tensor:
  if op == "sum": return a + b
  if op == "prod": return a * b
  if op == "max": return a.maximum(b)
  if op == "min": return a.minimum(b)
  return a.logaddexp(b)

def _reduce_last(w: Tensor, op: str) -> Tensor:
  if op == "sum": return w.sum(-1, dtype=w.dtype)
  if op == "prod": return w.prod(-1, dtype=w.dtype)
  if op == "max": return w.max(-1)
  if op == "min": return w.min(-1)
  m = w.max(-1, keepdim=True).detach()
  m = m.isinf().where(0, m)
  return ((w - m).exp().sum(-1, keepdim=True).log() + m).squeeze(-1)

def _window_scan(x: Tensor, op: str) -> Tensor:
  """Inclusive scan over the last dim in one reduce: a (n, n) view w[i, k] = x[i - n + 1 + k] (identity before the
  start) built from movement ops only (tile the padded row n+1 times and read it with rows one element longer)."""
  n = x.shape[-1]
  if n <= 1: return x
  lead = x.shape[:-1]
  keep = tuple((0, s) for s in lead)
  xp = _pad_dim(x, x.ndim - 1, n - 1, 0, _scan_identity(op, x.dtype))
  L = 2 * n - 1
  t = xp.unsqueeze(-2).expand(*lead, n + 1, L).reshape(*lead, (n + 1) * L)
  t = t.shrink(keep + ((0, 2 * n * n),)).reshape(*lead, n, 2 * n).shrink(keep + ((0, n), (0, n)))
  return _reduce_last(t, op)

def _scan(x: Tensor, op: str) -> Tensor:
  """Inclusive scan over the last dim. Blocks of _SCAN_BLOCK are scanned with a window each, and the block totals
  recursively, so the work is O(n * block) instead of O(n^2)."""
  n = x.shape[-1]
  if n <= _SCAN_BLOCK: return _window_scan(x, op)
  B, lead = _SCAN_BLOCK, x.shape[:-1]
  nb, ident, keep = -(-n // B), _scan_identity(op, x.dtype), tuple((0, s) for s in lead)
  inner = _window_scan(_pad_dim(x, x.ndim - 1, 0, nb * B - n, ident).reshape(*lead, nb, B), op)
  totals = inner.shrink(keep + ((0, nb), (B - 1, B))).reshape(*lead, nb)
  before = _pad_dim(_scan(totals, op), len(lead), 1, 0, ident).shrink(keep + ((0, nb),))
  out = _scan_combine(op, before.unsqueeze(-1), inner)
  return out.reshape(*lead, nb * B).shrink(keep + ((0, n),))

# ---------------------------------------------------------------- sorting helpers
def _sort_rank(x: Tensor, descending: bool) -> Tensor:
  """Position of each element (last dim) in a stable sort: the number of elements that go before it. NaN sorts as
  the largest value, as in torch."""
  n = x.shape[-1]
  if x.dtype == dtypes.bool: x = x.cast(dtypes.uint8)
  xi, xj = x.unsqueeze(-1), x.unsqueeze(-2)  # [..., i, j]
  before, eq = (xj > xi) if descending else (xj < xi), xj == xi
  if dtypes.is_float(x.dtype):
    ni, nj = xi != xi, xj != xj
    before = before | ((nj & ni.logical_not()) if descending else (ni & nj.logical_not()))
    eq = eq | (ni & nj)
  ar = _arange(n, x.device)
  earlier = ar.reshape(1, n) < ar.reshape(n, 1)  # [i, j]: j < i
  return (before | (eq & earlier)).sum(-1, dtype=IDX)

def _rank_to_index(rank: Tensor, k: int) -> Tensor:
  """idx[..., r] = the i with rank[..., i] == r, for r < k."""
  n = rank.shape[-1]
  hit = rank.unsqueeze(-2) == _arange(k, rank.device).reshape(k, 1)  # [..., r, i]
  return hit.where(_arange(n, rank.device), 0).sum(-1, dtype=IDX)

# ---------------------------------------------------------------- indexing helpers
class _Index:
  """A parsed index expression: the basic part (per source dim a shrink, flip and stride), the view shape after it
  (ints removed, None inserted) and the advanced index tensors with the view dim each applies to."""
  def __init__(self, shrinks, flips, strides, mid, final, adv):
    self.shrinks, self.flips, self.strides, self.mid, self.final, self.adv = shrinks, flips, strides, mid, final, adv

def _index_tensor_from(x: Any, device) -> tuple[Tensor, list | None]:
  T = _T()
  if isinstance(x, T): return x, None
  vals = x.tolist() if hasattr(x, "tolist") else x
  def _flat_all(v): return [y for z in v for y in _flat_all(z)] if isinstance(v, (list, tuple)) else [v]
  flat = _flat_all(vals)
  if any(isinstance(v, T) for v in flat): raise IndexError("a list of tensors as an index is not supported; index with a tuple of tensors")
  if flat and all(isinstance(v, bool) for v in flat): return T(vals, device=device, dtype=dtypes.bool), None
  if any(isinstance(v, float) for v in flat): raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
  return T(vals, device=device, dtype=IDX) if flat else T(vals, device=device, dtype=IDX).reshape(0), [int(v) for v in flat]

def _parse_index(self, indices) -> _Index:
  T = _T()
  if not isinstance(indices, tuple): indices = (indices,)
  items: list[tuple[str, Any, Any]] = []
  for x in indices:
    if x is None: items.append(("none", None, None))
    elif x is Ellipsis: items.append(("ell", None, None))
    elif isinstance(x, slice): items.append(("slice", x, None))
    elif isinstance(x, bool) or (type(x).__module__ == "numpy" and type(x).__name__ in ("bool_", "bool")): items.append(("bool", bool(x), None))
    elif isinstance(x, T) or isinstance(x, (list, tuple)) or (hasattr(x, "__array_interface__") and getattr(x, "ndim", 0) > 0):
      t, vals = _index_tensor_from(x, self.device)
      if t.dtype == dtypes.bool:
        if t.ndim == 0: items.append(("bool", bool(t.item()), None))
        else: items.append(("mask", t, None))
      elif not dtypes.is_int(t.dtype): raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors, got {t.dtype}")
      else: items.append(("tensor", t, vals))
    elif hasattr(x, "__index__"): items.append(("int", int(x.__index__()), None))
    else: raise IndexError(f"unsupported index type {type(x).__name__}: only integers, slices, None, ..., lists and integer or bool tensors are valid indices")
  if sum(1 for k, _, _ in items if k == "ell") > 1: raise IndexError("an index can only have a single ellipsis (...)")
  consumed = sum(1 if k in ("int", "slice", "tensor") else v.ndim if k == "mask" else 0 for k, v, _ in items)
  if consumed > self.ndim: raise IndexError(f"too many indices for tensor of dimension {self.ndim} (got {consumed})")
  if any(k == "ell" for k, _, _ in items):
    e = [k for k, _, _ in items].index("ell")
    items = items[:e] + [("slice", slice(None), None)] * (self.ndim - consumed) + items[e + 1:]
  else: items = items + [("slice", slice(None), None)] * (self.ndim - consumed)
  # boolean masks become one integer index per dim they cover (their count needs the data, as in torch)
  expanded, dim = [], 0
  for k, v, vals in items:
    if k == "mask":
      if v.shape != self.shape[dim:dim + v.ndim]:
        raise IndexError(f"the shape of the mask {v.shape} at index {dim} does not match the shape of the indexed tensor {self.shape[dim:dim + v.ndim]}")
      expanded.extend(("tensor", t, None) for t in v.nonzero(as_tuple=True))
      dim += v.ndim
    else:
      expanded.append((k, v, vals))
      dim += 1 if k in ("int", "slice", "tensor") else 0
  shrinks, flips, strides, mid, final, adv, dim = [], [], [], [], [], [], 0
  for k, v, vals in expanded:
    if k == "none": final.append(1); continue
    if k == "bool":  # a new dim of size 1, indexed by [0] (True) or [] (False)
      adv.append((len(final), T([0] if v else [], device=self.device, dtype=IDX).reshape(1 if v else 0)))
      final.append(1)
      continue
    size = self.shape[dim]
    if k == "slice":
      start, stop, step = v.indices(size)
      if step == 0: raise TensorError("slice step cannot be zero")
      if step > 0: shrinks.append((start, max(start, stop))); cnt = max(0, math.ceil((stop - start) / step))
      else:  # a negative step walks backwards: take [stop+1, start] and flip it
        shrinks.append((stop + 1, start + 1) if start > stop else (0, 0)); cnt = max(0, math.ceil((start - stop) / -step))
      flips.append(step < 0); strides.append(abs(step)); mid.append(cnt); final.append(cnt)
    elif k == "int":
      if not -size <= v < size: raise IndexError(f"index {v} is out of bounds for dimension {dim} with size {size}")
      shrinks.append((v % size, v % size + 1)); flips.append(False); strides.append(1); mid.append(1)
    else:
      if vals is not None and vals and not (-size <= min(vals) and max(vals) < size):
        bad = min(vals) if min(vals) < -size else max(vals)
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
      shrinks.append((0, size)); flips.append(False); strides.append(1); mid.append(size)
      adv.append((len(final), v)); final.append(size)
    dim += 1
  return _Index(shrinks, flips, strides, mid, final, adv)

def _basic_view(x: Tensor, ix: _Index) -> Tensor:
  x = x.shrink(ix.shrinks)
  if any(ix.flips): x = x.flip([i for i, f in enumerate(ix.flips) if f])
  if any(s != 1 for s in ix.strides):
    # stride s: pad each dim to a multiple of s, split it into (n, s) and keep column 0
    x = x.pad(tuple((0, (-sh) % st if sh else 0) for sh, st in zip(x.shape, ix.strides)))
    x = x.reshape(flatten((sh // st, st) for sh, st in zip(x.shape, ix.strides)))
    x = x.shrink([p for sh in x.shape[0::2] for p in ((0, sh), (0, 1))])
  return x.reshape(tuple(ix.final))

def _basic_unview(v: Tensor, shape: tuple[int, ...], ix: _Index) -> Tensor:
  """The inverse of _basic_view: v (shaped like the view) placed where the view reads from, zeros elsewhere."""
  v = v.reshape(tuple(ix.mid))
  if any(s != 1 for s in ix.strides):
    lens = [e - b for b, e in ix.shrinks]
    v = v.reshape(flatten((m, 1) for m in ix.mid))
    v = v.pad([p for m, st in zip(ix.mid, ix.strides) for p in ((0, 0), (0, st - 1))])
    v = v.reshape(tuple(m * st for m, st in zip(ix.mid, ix.strides))).shrink(tuple((0, n) for n in lens))
  if any(ix.flips): v = v.flip([i for i, f in enumerate(ix.flips) if f])
  return v.pad(tuple((b, s - e) for (b, e), s in zip(ix.shrinks, shape)))

def _fit_value(v: Tensor, shape: tuple[int, ...]) -> Tensor:
  """A setitem value broadcast to the indexed shape (leading size-1 dims beyond it are dropped, as torch does)."""
  while v.ndim > len(shape) and v.shape[0] == 1: v = v.reshape(v.shape[1:])
  try: return v._broadcast_to(tuple(shape))
  except ValueError: raise RuntimeError(f"shape mismatch: value tensor of shape {v.shape} cannot be broadcast to indexing result of shape {tuple(shape)}") from None

def _static_positions(mask: Tensor, size: int) -> tuple[Tensor, Tensor]:
  """For a 1-d bool mask: (idx, valid), both of shape (size,): idx[r] is the position of the r-th True (0 past the
  count), valid[r] is r < count. Lazy (no realize): a (size, n) comparison against the running count."""
  n = mask.shape[0]
  r = _arange(size, mask.device)
  if n == 0: return r * 0, r < 0
  c = mask.cast(IDX).cumsum()
  hit = mask.reshape(1, n) & (c.reshape(1, n) == (r + 1).reshape(size, 1))
  return hit.where(_arange(n, mask.device).reshape(1, n), 0).sum(-1, dtype=IDX), r < c[n - 1]

class OpsMixin:
  # ================================================================ indexing
  def _getitem(self: Any, indices) -> Tensor:
    ix = _parse_index(self, indices)
    v = _basic_view(self, ix)
    if not ix.adv: return v
    dims = [d for d, _ in ix.adv]
    sizes = [v.shape[d] for d in dims]
    from fusegrad.tensor import broadcast_shape
    bshape = broadcast_shape(*[t.shape for _, t in ix.adv])
    idt = IDX if prod(sizes) < 2**31 else dtypes.int64
    flat, stride = None, 1
    for (d, t), n in zip(reversed(ix.adv), reversed(sizes)):
      t = t.cast(idt)
      t = (t < 0).where(t + n, t)
      term = t * stride if stride != 1 else t
      flat = term if flat is None else flat + term
      stride *= n
    flat = flat._broadcast_to(bshape)
    rest = [i for i in range(v.ndim) if i not in dims]
    xv = v.permute(dims + rest).reshape((prod(sizes),) + tuple(v.shape[i] for i in rest))
    out = xv._index_tensor(0, flat)
    # the indexed dims replace the advanced ones where they were when those are adjacent, else they go first
    if dims == list(range(dims[0], dims[0] + len(dims))) and dims[0] > 0:
      k, p = len(bshape), dims[0]
      out = out.permute(tuple(range(k, k + p)) + tuple(range(k)) + tuple(range(k + p, out.ndim)))
    return out

  def _setitem_value(self: Any, indices, value) -> Tensor:
    """The full new value of self after `self[indices] = value` (basic indexing: a mask and a padded value;
    advanced indexing: a scatter into the flat positions the index selects; the last write to a position wins)."""
    T = _T()
    v = value if isinstance(value, T) else T(value, device=self.device, dtype=self.dtype)
    v = v.cast(self.dtype)
    ix = _parse_index(self, indices)
    if not ix.adv:
      v = _fit_value(v, tuple(ix.final))
      mask = _basic_unview(T.ones(tuple(ix.final), dtype=dtypes.bool, device=self.device), self.shape, ix)
      return mask.where(_basic_unview(v, self.shape, ix), self)
    pos = _arange(self.numel(), self.device).reshape(self.shape)._getitem(indices)
    v = _fit_value(v, pos.shape)
    return self.flatten().scatter(0, pos.flatten(), v.flatten()).reshape(self.shape)

  def index_select(self: Any, dim: int, index: Tensor) -> Tensor:
    """Rows `index` (a 0-d or 1-d integer tensor) of dim `dim`."""
    T = _T()
    if not isinstance(index, T): index = T(index, device=self.device, dtype=IDX)
    if not dtypes.is_int(index.dtype): raise TypeError(f"index_select(): index must be an integer tensor, got {index.dtype}")
    if index.ndim > 1: raise IndexError(f"index_select(): index must be 0-d or 1-d, got shape {index.shape}")
    d = _norm(dim, self.ndim)
    if self.ndim == 0: return self.reshape(1)._index_tensor(0, index.reshape(-1)).reshape(index.shape)
    return self._index_tensor(d, index.reshape(-1))

  def take(self: Any, index: Tensor) -> Tensor:
    """self.flatten()[index], shaped like index."""
    T = _T()
    if not isinstance(index, T): index = T(index, device=self.device, dtype=IDX)
    if not dtypes.is_int(index.dtype): raise TypeError(f"take(): index must be an integer tensor, got {index.dtype}")
    return self.flatten()._index_tensor(0, index.reshape(-1)).reshape(index.shape)

  def take_along_dim(self: Any, indices: Tensor, dim: int | None = None) -> Tensor:
    if dim is None: return self.flatten().gather(0, indices.flatten())
    from fusegrad.tensor import broadcast_shape
    d = _norm(dim, self.ndim)
    if indices.ndim != self.ndim: raise RuntimeError(f"take_along_dim(): indices {indices.shape} must have as many dims as the input {self.shape}")
    shp = broadcast_shape(tuple(1 if i == d else s for i, s in enumerate(self.shape)), tuple(1 if i == d else s for i, s in enumerate(indices.shape)))
    x = self._broadcast_to(tuple(self.shape[d] if i == d else s for i, s in enumerate(shp)))
    return x.gather(d, indices._broadcast_to(tuple(indices.shape[d] if i == d else s for i, s in enumerate(shp))))

  def masked_fill(self: Any, mask: Tensor, value) -> Tensor:
    """self where mask is False, value where it is True. mask must be bool; value a scalar or a tensor that broadcasts
    to self (torch takes only 0-d tensors, tinygrad any broadcastable one); it is cast to self's dtype."""
    T = _T()
    if not isinstance(mask, T) or mask.dtype != dtypes.bool: raise TypeError(f"masked_fill only supports boolean masks, got {getattr(mask, 'dtype', type(mask).__name__)}")
    value = value.cast(self.dtype) if isinstance(value, T) else T(value, device=self.device, dtype=self.dtype)
    return mask.where(value, self)

  def masked_select(self: Any, mask: Tensor, *, size: int | None = None, fill_value=0) -> Tensor:
    """The elements where mask is True, as a 1-d tensor (realizes the mask to know the count). With size=N the result
    has exactly N elements and nothing is realized: the first N selected, then fill_value."""
    T = _T()
    if not isinstance(mask, T) or mask.dtype != dtypes.bool: raise TypeError(f"masked_select only supports boolean masks, got {getattr(mask, 'dtype', type(mask).__name__)}")
    from fusegrad.tensor import broadcast_shape
    shape = broadcast_shape(self.shape, mask.shape)
    x, m = self._broadcast_to(shape).flatten(), mask._broadcast_to(shape).flatten()
    if size is None: return x._index_tensor(0, m.nonzero().reshape(-1))
    idx, valid = _static_positions(m, size)
    if x.shape[0] == 0: return T.full((size,), fill_value, dtype=self.dtype, device=self.device)
    return valid.where(x._index_tensor(0, idx), T(fill_value, device=self.device, dtype=self.dtype))

  def nonzero(self: Any, as_tuple: bool = False, *, size: int | None = None, fill_value: int = -1):
    """Indices of the nonzero elements: (count, ndim) int32, or a tuple of ndim 1-d tensors. Realizes self.
    With size=N (torch.nonzero_static): exactly N rows, computed lazily; rows past the count hold fill_value."""
    T = _T()
    if size is not None:
      if size < 0: raise RuntimeError(f"nonzero(): size must be non-negative, got {size}")
      idx, valid = _static_positions((self.reshape(1) if self.ndim == 0 else self.flatten()) != 0, size)
      cols, stride = [], 1
      for s in reversed(self.shape):
        cols.insert(0, (idx // stride) % s if s > 1 else idx * 0)
        stride *= s
      out = valid.unsqueeze(-1).where(T.stack(*cols, dim=-1), fill_value) if cols else T.zeros(size, 0, dtype=IDX, device=self.device)
      return tuple(out[:, d] for d in range(self.ndim)) if as_tuple else out.cast(IDX)
    vals = self.flatten().tolist() if self.ndim else [self.item()]
    hits = [i for i, v in enumerate(vals) if v]
    coords = []
    for h in hits:
      c = []
      for s in reversed(self.shape):
        c.append(h % s); h //= s
      coords.append(c[::-1])
    if as_tuple:
      if self.ndim == 0: return (T([0] * len(hits), device=self.device, dtype=IDX).reshape(len(hits)),)
      return tuple(T([c[d] for c in coords], device=self.device, dtype=IDX).reshape(len(hits)) for d in range(self.ndim))
    return T(coords, device=self.device, dtype=IDX).reshape(len(hits), self.ndim) if hits else T.zeros(0, self.ndim, dtype=IDX, device=self.device)
  argwhere = nonzero

  def _scatter_setup(self: Any, dim: int, index: Tensor, src: Tensor | None, name: str):
    T = _T()
    if not isinstance(index, T): index = T(index, device=self.device, dtype=IDX)
    d = _norm(dim, max(self.ndim, 1))
    if not dtypes.is_int(index.dtype): raise TypeError(f"{name}(): index must be an integer tensor, got {index.dtype}")
    if index.ndim != self.ndim: raise RuntimeError(f"{name}(): index {index.shape} must have as many dims as self {self.shape}")
    if any(i > s for k, (i, s) in enumerate(zip(index.shape, self.shape)) if k != d):
      raise RuntimeError(f"{name}(): index {index.shape} is larger than self {self.shape} outside dim {d}")
    if src is not None:
      if src.ndim != self.ndim or any(i > s for i, s in zip(index.shape, src.shape)):
        raise RuntimeError(f"{name}(): index {index.shape} is larger than src {src.shape}")
      if src.dtype != self.dtype: raise RuntimeError(f"{name}(): expected self.dtype ({self.dtype}) to equal src.dtype ({src.dtype})")
      src = src.shrink(tuple((0, i) for i in index.shape))
    return d, index, src

  def _scatter_parts(self: Any, d: int, index: Tensor):
    """(hit[..., i, m]: index[..., i] == m with dim d last; self with dim d last, shrunk to the index's other dims)."""
    n = self.shape[d]
    idx = _to_last(index, d)
    hit = idx.unsqueeze(-1) == _arange(n, self.device)
    x = _to_last(self, d).shrink(tuple((0, i) for i in idx.shape[:-1]) + ((0, n),))
    return hit, x

  def _scatter_finish(self: Any, d: int, index: Tensor, touched: Tensor, val: Tensor) -> Tensor:
    """Write val where touched (both with dim d last, over the index's other dims), keep self elsewhere."""
    pads = tuple((0, s - i) for s, i in zip(_to_last(self, d).shape[:-1], touched.shape[:-1])) + ((0, 0),)
    return _from_last(touched.pad(pads), d).where(_from_last(val.pad(pads), d), self)

  def scatter(self: Any, dim: int, index: Tensor, src=None, value=None, reduce: str | None = None) -> Tensor:
    """out[index[i][j]][j] = src[i][j] (for dim=0); src may be a tensor or a scalar (`value`).
    With repeated indices the last write wins (torch leaves the order unspecified)."""
    T = _T()
    if src is None and value is None: raise TypeError("scatter() needs src or value")
    if src is None or not isinstance(src, T):
      src = value if src is None else src
      if isinstance(src, T): raise TypeError("scatter(): pass a tensor as src, not value")
      d = _norm(dim, max(self.ndim, 1))
      src = T.full(index.shape if isinstance(index, T) else T(index).shape, src, dtype=self.dtype, device=self.device)
    if reduce is not None:
      if reduce not in ("add", "multiply"): raise TensorError(f"scatter(): reduce must be 'add' or 'multiply', got {reduce!r}")
      return self.scatter_reduce(dim, index, src, "sum" if reduce == "add" else "prod")
    d, index, src = self._scatter_setup(dim, index, src, "scatter")
    if index.numel() == 0: return self
    hit, _ = self._scatter_parts(d, index)
    k = index.shape[d]
    order = (_arange(k, self.device) + 1).reshape(k, 1)
    last = hit.where(order, 0).max(-2, keepdim=True)  # 1 + the last i writing to each position, 0 if none
    win = hit & (order == last)
    s = _to_last(src, d).unsqueeze(-1)
    sdt = dtypes.uint8 if s.dtype == dtypes.bool else s.dtype
    val = win.where(s.cast(sdt), 0).sum(-2, dtype=sdt).cast(self.dtype)
    return self._scatter_finish(d, index, last.squeeze(-2) > 0, val)

  def scatter_add(self: Any, dim: int, index: Tensor, src: Tensor) -> Tensor: return self.scatter_reduce(dim, index, src, "sum")

  def scatter_reduce(self: Any, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
    """Reduce src into self at index along dim with 'sum', 'prod', 'mean', 'amax' or 'amin' (torch semantics,
    including include_self=False, integer 'mean' rounding down, and ties of amax/amin sharing the gradient)."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"): raise TensorError(f"scatter_reduce(): reduce must be one of sum, prod, mean, amax, amin, got {reduce!r}")
    d, index, src = self._scatter_setup(dim, index, src, "scatter_reduce")
    if index.numel() == 0: return self
    hit, x = self._scatter_parts(d, index)
    s = _to_last(src, d).unsqueeze(-1)  # [..., i, 1]
    touched = hit.any(-2)
    dt = self.dtype
    if dt == dtypes.bool and reduce in ("sum", "mean", "prod"):
      out = self.cast(dtypes.uint8).scatter_reduce(dim, index, src.cast(dtypes.uint8), reduce, include_self)
      return (out != 0) if reduce != "prod" else out.cast(dtypes.bool)
    if reduce in ("sum", "mean"):
      val = hit.where(s, 0).sum(-2, dtype=dt)
      if include_self: val = val + x
      if reduce == "mean":
        cnt = hit.sum(-2, dtype=IDX) + int(include_self)
        cnt = (cnt == 0).where(1, cnt)
        val = val / cnt.cast(dt) if dtypes.is_float(dt) else val.idiv(cnt.cast(dt))
    elif reduce == "prod":
      val = hit.where(s, 1).prod(-2, dtype=dt)
      if include_self: val = val * x
    else:
      fill = _scan_identity("max" if reduce == "amax" else "min", dt)
      cands = hit.where(s, fill)
      if include_self: cands = x.unsqueeze(-2).cat(cands, dim=-2)
      val = cands.max(-2) if reduce == "amax" else cands.min(-2)
    return self._scatter_finish(d, index, touched, val)

  def index_add(self: Any, dim: int, index: Tensor, source: Tensor, alpha=1) -> Tensor:
    """self with source's slices added at rows `index` of dim (repeated rows accumulate)."""
    d = _norm(dim, max(self.ndim, 1))
    if index.ndim > 1 or not dtypes.is_int(index.dtype): raise IndexError(f"index_add(): index must be a 0-d or 1-d integer tensor, got {index.shape} {index.dtype}")
    if source.shape[:d] + source.shape[d + 1:] != self.shape[:d] + self.shape[d + 1:] or source.shape[d] != index.numel():
      raise RuntimeError(f"index_add(): source {source.shape} does not match self {self.shape} and index {index.shape} along dim {d}")
    idx = index.reshape(tuple(-1 if i == d else 1 for i in range(self.ndim))).expand(source.shape)
    return self.scatter_reduce(d, idx, (source * alpha if alpha != 1 else source).cast(self.dtype), "sum")

  def index_fill(self: Any, dim: int, index: Tensor, value) -> Tensor:
    """self with the rows `index` of dim set to value."""
    d = _norm(dim, max(self.ndim, 1))
    if index.ndim > 1 or not dtypes.is_int(index.dtype): raise IndexError(f"index_fill(): index must be a 0-d or 1-d integer tensor, got {index.shape} {index.dtype}")
    n = self.shape[d]
    i = index.reshape(-1, 1)
    rows = ((i == _arange(n, self.device)) | (i + n == _arange(n, self.device))).any(0)
    return self.masked_fill(rows.reshape(tuple(n if k == d else 1 for k in range(self.ndim))), value)

  # ================================================================ shape ops
  def roll(self: Any, shifts, dims=None) -> Tensor:
    """Rotate elements along dims (the flattened tensor when dims is None)."""
    if dims is None: return self.flatten().roll(shifts, 0).reshape(self.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims): raise RuntimeError(f"roll(): shifts {shifts} and dims {dims} must have the same length")
    x = self
    for s, d in zip(shifts, dims):
      d = _norm(d, self.ndim)
      n = x.shape[d]
      if n == 0 or s % n == 0: continue
      s %= n
      x = _shrink_dim(x, d, n - s, n).cat(_shrink_dim(x, d, 0, n - s), dim=d)
    return x

  def _tri(self: Any, diagonal: int, lower: bool) -> Tensor:
    if self.ndim < 2: raise RuntimeError(f"{'tril' if lower else 'triu'}: input tensor must have at least 2 dimensions, got shape {self.shape}")
    r, c = self.shape[-2:]
    rows, cols = _arange(r, self.device).reshape(r, 1), _arange(c, self.device).reshape(1, c)
    keep = (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)
    return keep.where(self, self.zeros_like())
  def tril(self: Any, diagonal: int = 0) -> Tensor: return self._tri(diagonal, True)
  def triu(self: Any, diagonal: int = 0) -> Tensor: return self._tri(diagonal, False)

  def unfold(self: Any, dim: int, size: int, step: int) -> Tensor:
    """Sliding windows of `size` with stride `step` along dim: that dim becomes the window count, and a new last
    dim holds each window (torch.Tensor.unfold)."""
    d = _norm(dim, max(self.ndim, 1))
    x = self.reshape(1) if self.ndim == 0 else self
    n = x.shape[d]
    if step <= 0: raise RuntimeError(f"unfold(): step must be > 0, got {step}")
    if size < 0 or size > n: raise RuntimeError(f"unfold(): size {size} must be in [0, {n}] (dim {d} of {self.shape})")
    if size == 0: return _T().zeros(*x.shape[:d], (n - size) // step + 1, *x.shape[d + 1:], 0, dtype=self.dtype, device=self.device)
    w = _to_last(x, d)._pool((size,), step)  # (..., windows, size)
    order = list(range(w.ndim - 2))
    order.insert(d, w.ndim - 2)
    return w.permute(order + [w.ndim - 1])

  def _pad_mode(self: Any, pairs: Sequence[tuple[int, int]], mode: str) -> Tensor:
    """pad with mode 'reflect', 'replicate' or 'circular'; pairs has one (before, after) per dim. Negative amounts
    crop first, as in torch."""
    if mode not in ("reflect", "replicate", "circular"):
      raise NotImplementedError(f"pad mode {mode!r} is not supported; use 'constant', 'reflect', 'replicate' or 'circular'")
    crop = tuple((-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pairs, self.shape))
    if any(lo > hi for lo, hi in crop): raise TensorError(f"negative padding {list(pairs)} crops more than shape {self.shape}")
    x = self.shrink(crop)
    for d, (b, a) in enumerate(pairs):
      pb, pa, n = max(b, 0), max(a, 0), x.shape[d]
      if pb == 0 and pa == 0: continue
      if mode == "reflect" and (pb >= n or pa >= n):
        raise TensorError(f"reflect padding ({b}, {a}) must be smaller than the input size {n} at dim {d} of {x.shape}")
      if mode == "circular" and (pb > n or pa > n):
        raise TensorError(f"circular padding ({b}, {a}) must be at most the input size {n} at dim {d} of {x.shape}")
      if mode == "replicate" and n == 0: raise TensorError(f"replicate padding needs a non-empty dim {d} of {x.shape}")
      if mode == "reflect": left, right = _shrink_dim(x, d, 1, pb + 1).flip(d), _shrink_dim(x, d, n - 1 - pa, n - 1).flip(d)
      elif mode == "circular": left, right = _shrink_dim(x, d, n - pb, n), _shrink_dim(x, d, 0, pa)
      else:
        left = _shrink_dim(x, d, 0, 1).expand(tuple(pb if i == d else s for i, s in enumerate(x.shape)))
        right = _shrink_dim(x, d, n - 1, n).expand(tuple(pa if i == d else s for i, s in enumerate(x.shape)))
      x = _T().cat(*[p for p in (left, x, right) if p.shape[d]], dim=d)
    return x

  def repeat_interleave(self: Any, repeats, dim: int | None = None) -> Tensor:
    """Repeat each element `repeats` times along dim (flattened when dim is None); repeats may be per element."""
    T = _T()
    x, d = (self.flatten(), 0) if dim is None else (self, _norm(dim, self.ndim))
    if isinstance(repeats, T) and repeats.numel() == 1 and repeats.ndim <= 1: repeats = int(repeats.item())
    if isinstance(repeats, int):
      if repeats < 0: raise RuntimeError(f"repeat_interleave(): repeats must be non-negative, got {repeats}")
      shp = x.shape
      y = x.unsqueeze(d + 1).expand(shp[:d + 1] + (repeats,) + shp[d + 1:])
      return y.reshape(shp[:d] + (shp[d] * repeats,) + shp[d + 1:])
    reps = repeats.tolist() if isinstance(repeats, T) else list(repeats)
    if len(reps) != x.shape[d]: raise RuntimeError(f"repeat_interleave(): repeats must have {x.shape[d]} entries (dim {d} of {x.shape}), got {len(reps)}")
    if any(r < 0 for r in reps): raise RuntimeError("repeat_interleave(): repeats must be non-negative")
    idx = [i for i, r in enumerate(reps) for _ in range(r)]
    return x.index_select(d, T(idx, device=self.device, dtype=IDX).reshape(len(idx)))

  def meshgrid(self: Any, *others: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-d (or 0-d) tensors; indexing 'ij' (matrix) or 'xy' (Cartesian: first two dims swapped)."""
    ts = [self, *others]
    if len(ts) == 1 and isinstance(ts[0], (list, tuple)): ts = list(ts[0])
    if indexing not in ("ij", "xy"): raise TensorError(f"meshgrid(): indexing must be 'ij' or 'xy', got {indexing!r}")
    if any(t.ndim > 1 for t in ts): raise RuntimeError(f"meshgrid(): expects 0-d or 1-d tensors, got shapes {[t.shape for t in ts]}")
    ts = [t.reshape(-1) for t in ts]
    shape = tuple(t.shape[0] for t in ts)
    out = [t.reshape(tuple(-1 if i == k else 1 for i in range(len(ts)))).expand(shape) for k, t in enumerate(ts)]
    return tuple(o.transpose(0, 1) for o in out) if indexing == "xy" and len(ts) >= 2 else tuple(out)

  def diagonal(self: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal (shifted by offset) of the (dim1, dim2) planes, as a new last dim."""
    a, b = _norm(dim1, self.ndim), _norm(dim2, self.ndim)
    if a == b: raise RuntimeError(f"diagonal(): dim1 and dim2 cannot be the same dim ({dim1}, {dim2})")
    x = self.permute(tuple(i for i in range(self.ndim) if i not in (a, b)) + (a, b))
    r, c = x.shape[-2:]
    lead = x.shape[:-2]
    keep = tuple((0, s) for s in lead)
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    m = max(0, min(r - r0, c - c0))
    x = x.shrink(keep + ((min(r0, r), min(r0, r) + m), (min(c0, c), min(c0, c) + m)))
    if m == 0: return x.reshape(lead + (0,))
    # read the m x m block with a row stride of m+1: pad the flat block by m and view it as (m, m+1)
    x = x.reshape(lead + (m * m,)).pad(tuple((0, 0) for _ in lead) + ((0, m),)).reshape(lead + (m, m + 1))
    return x.shrink(keep + ((0, m), (0, 1))).reshape(lead + (m,))

  def diag(self: Any, diagonal: int = 0) -> Tensor:
    """1-d: a square matrix with self on the given diagonal. 2-d: that diagonal as a 1-d tensor."""
    if self.ndim == 2: return self.diagonal(diagonal)
    if self.ndim != 1: raise RuntimeError(f"diag(): expects a 1-d or 2-d tensor, got shape {self.shape}")
    n, k = self.shape[0], abs(diagonal)
    m = self.reshape(n, 1).pad(((0, 0), (0, n))).reshape(n * (n + 1))[:n * n].reshape(n, n) if n else self.reshape(0, 0)
    return m.pad(((0, k), (k, 0)) if diagonal >= 0 else ((k, 0), (0, k)))

  def diag_embed(self: Any, offset: int = 0) -> Tensor:
    """Each last-dim vector placed on the diagonal of a new trailing square matrix."""
    n, k = self.shape[-1], abs(offset)
    lead = self.shape[:-1]
    z = tuple((0, 0) for _ in lead)
    m = self.unsqueeze(-1).pad(z + ((0, 0), (0, n))).reshape(lead + (n * (n + 1),)).shrink(tuple((0, s) for s in lead) + ((0, n * n),)).reshape(lead + (n, n))
    return m.pad(z + (((0, k), (k, 0)) if offset >= 0 else ((k, 0), (0, k))))

  def trace(self: Any) -> Tensor:
    if self.ndim != 2: raise RuntimeError(f"trace(): expects a 2-d tensor, got shape {self.shape}")
    return self.diagonal().sum()

  def movedim(self: Any, source, destination) -> Tensor:
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst): raise RuntimeError(f"movedim(): source {src} and destination {dst} must have the same number of dims")
    src, dst = tuple(_norm(s, self.ndim) for s in src), tuple(_norm(d, self.ndim) for d in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst): raise RuntimeError(f"movedim(): repeated dim in source {source} or destination {destination}")
    order = [None] * self.ndim
    for s, d in zip(src, dst): order[d] = s
    rest = iter(i for i in range(self.ndim) if i not in src)
    return self.permute(tuple(o if o is not None else next(rest) for o in order))
  moveaxis = movedim

  def swapaxes(self: Any, axis0: int, axis1: int) -> Tensor: return self.transpose(axis0, axis1)
  swapdims = swapaxes

  def narrow(self: Any, dim: int, start: int, length: int) -> Tensor:
    d = _norm(dim, self.ndim)
    n = self.shape[d]
    if not -n <= start <= n: raise IndexError(f"narrow(): start {start} is out of range for dim {d} of size {n}")
    start %= max(n, 1) if start < 0 else n + 1
    if length < 0 or start + length > n: raise RuntimeError(f"narrow(): start ({start}) + length ({length}) exceeds dim {d} of size {n}")
    return _shrink_dim(self, d, start, start + length)

  def fliplr(self: Any) -> Tensor:
    if self.ndim < 2: raise RuntimeError(f"fliplr(): input must have at least 2 dims, got {self.shape}")
    return self.flip(1)
  def flipud(self: Any) -> Tensor:
    if self.ndim < 1: raise RuntimeError("flipud(): input must have at least 1 dim")
    return self.flip(0)
  def rot90(self: Any, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    if len(dims) != 2: raise RuntimeError(f"rot90(): dims must have 2 entries, got {dims}")
    a, b = _norm(dims[0], self.ndim), _norm(dims[1], self.ndim)
    if a == b: raise RuntimeError(f"rot90(): dims must differ, got {dims}")
    k %= 4
    if k == 1: return self.flip(b).transpose(a, b)
    if k == 2: return self.flip((a, b))
    if k == 3: return self.transpose(a, b).flip(b)
    return self
  def tile(self: Any, dims, *args) -> Tensor:
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,) + args
    return self.repeat((1,) * (self.ndim - len(dims)) + dims)

  # ================================================================ ordering and scans
  def sort(self: Any, dim: int = -1, descending: bool = False, stable: bool = True) -> tuple[Tensor, Tensor]:
    """(values, indices) sorted along dim. Always stable (ties keep their order); NaN sorts as the largest value.
    O(n^2) comparisons per row, fused into one reduce."""
    T = _T()
    if self.ndim == 0: return self, T.zeros((), dtype=IDX, device=self.device)
    d = _norm(dim, self.ndim)
    n = self.shape[d]
    if n == 0: return self, T.zeros(self.shape, dtype=IDX, device=self.device)
    x = _to_last(self, d)
    idx = _rank_to_index(_sort_rank(x.detach(), descending), n)
    return _from_last(x.gather(-1, idx), d), _from_last(idx, d)

  def argsort(self: Any, dim: int = -1, descending: bool = False, stable: bool = True) -> Tensor: return self.sort(dim, descending)[1]

  def msort(self: Any) -> Tensor: return self.sort(0)[0]

  def topk(self: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, sorted_: bool | None = None) -> tuple[Tensor, Tensor]:
    """(values, indices) of the k largest (or smallest) along dim, in sorted order (ties: the earlier index first)."""
    T = _T()
    d = _norm(dim, max(self.ndim, 1))
    n = self.shape[d] if self.ndim else 1
    if not 0 <= k <= n: raise RuntimeError(f"topk(): selected index k={k} out of range for dim {d} of size {n}")
    if self.ndim == 0: return self, T.zeros((), dtype=IDX, device=self.device)
    x = _to_last(self, d)
    if k == 0: return _from_last(x.shrink(tuple((0, s) for s in x.shape[:-1]) + ((0, 0),)), d), T.zeros(self.shape[:d] + (0,) + self.shape[d + 1:], dtype=IDX, device=self.device)
    idx = _rank_to_index(_sort_rank(x.detach(), largest), k)
    return _from_last(x.gather(-1, idx), d), _from_last(idx, d)

  def _select_rank(self: Any, k: int, dim, keepdim: bool, name: str, nan_wins: bool = False):
    """(value, index) of the element of sorted rank k along dim."""
    d = _norm(dim, max(self.ndim, 1))
    if self.ndim == 0: return self, _T().zeros((), dtype=IDX, device=self.device)
    n = self.shape[d]
    if n == 0: raise IndexError(f"{name}(): cannot take a {name} of an empty dim {d} of {self.shape}")
    x = _to_last(self, d)
    idx = _rank_to_index(_sort_rank(x.detach(), False), k + 1).shrink(tuple((0, s) for s in x.shape[:-1]) + ((k, k + 1),))
    if nan_wins and dtypes.is_float(self.dtype):
      isn = x.detach().isnan()
      idx = isn.any(-1, keepdim=True).where(isn.argmax(-1, keepdim=True).cast(IDX), idx)
    vals = x.gather(-1, idx)
    if not keepdim: return vals.squeeze(-1), idx.squeeze(-1)
    return _from_last(vals, d), _from_last(idx, d)

  def median(self: Any, dim: int | None = None, keepdim: bool = False):
    """The lower median: element (n-1)//2 of the sorted values; NaN if the row has a NaN. Without dim: only the value
    of the whole tensor; with dim: (values, indices)."""
    if dim is None:
      x = self.flatten()
      if x.numel() == 0: return _T().full((), math.nan, dtype=self.dtype, device=self.device)
      return x._select_rank((x.numel() - 1) // 2, 0, False, "median", True)[0]
    d = _norm(dim, max(self.ndim, 1))
    n = self.shape[d] if self.ndim else 1
    return self._select_rank((n - 1) // 2, d, keepdim, "median", True)

  def kthvalue(self: Any, k: int, dim: int = -1, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """(value, index) of the k-th smallest element (1-based) along dim."""
    d = _norm(dim, max(self.ndim, 1))
    n = self.shape[d] if self.ndim else 1
    if not 1 <= k <= n: raise RuntimeError(f"kthvalue(): k={k} out of range for dim {d} of size {n}")
    return self._select_rank(k - 1, d, keepdim, "kthvalue")

  def mode(self: Any, dim: int = -1, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """(value, index) of the most frequent value along dim (ties: the smallest value; index: its last occurrence)."""
    T = _T()
    if self.ndim == 0: return self, T.zeros((), dtype=IDX, device=self.device)
    d = _norm(dim, self.ndim)
    n = self.shape[d]
    if n == 0: raise IndexError(f"mode(): cannot take the mode of an empty dim {d} of {self.shape}")
    x = _to_last(self, d)
    xd = x.detach().cast(dtypes.uint8) if self.dtype == dtypes.bool else x.detach()
    count = (xd.unsqueeze(-1) == xd.unsqueeze(-2)).sum(-1, dtype=IDX)
    best = count == count.max(-1, keepdim=True)
    v = best.where(xd, _scan_identity("min", xd.dtype)).min(-1, keepdim=True)
    idx = (best & (xd == v)).where(_arange(n, self.device), -1).max(-1, keepdim=True)
    vals = x.gather(-1, idx)
    if not keepdim: return vals.squeeze(-1), idx.squeeze(-1)
    return _from_last(vals, d), _from_last(idx, d)

  def _scan_op(self: Any, axis, op: str, dtype) -> Tensor:
    x = self.cast(to_dtype(dtype) if dtype is not None else self._sum_dtype() if op in ("sum", "prod") else self.dtype)
    if x.ndim == 0: _norm(axis, 0); return x
    d = _norm(axis, x.ndim)
    return _from_last(_scan(_to_last(x, d), op), d)
  def cumsum(self: Any, axis: int | None = None, dtype=None, *, dim: int | None = None) -> Tensor:
    """Running sum along axis (O(n * 32) work: blocked window sums). Small ints accumulate in int32 (torch: int64)."""
    return self._scan_op(_pick(axis, dim) if (axis, dim) != (None, None) else 0, "sum", dtype)
  def cumprod(self: Any, axis: int | None = None, dtype=None, *, dim: int | None = None) -> Tensor:
    return self._scan_op(_pick(axis, dim) if (axis, dim) != (None, None) else 0, "prod", dtype)
  def logcumsumexp(self: Any, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    ax = _pick(axis, dim) if (axis, dim) != (None, None) else 0
    return _fmath(self, lambda x: x._scan_op(ax, "logsumexp", None))

  def _cum_extreme(self: Any, axis: int, op: str) -> tuple[Tensor, Tensor]:
    T = _T()
    if self.ndim == 0: _norm(axis, 0); return self, T.zeros((), dtype=IDX, device=self.device)
    d = _norm(axis, self.ndim)
    n = self.shape[d]
    if n == 0: return self, T.zeros(self.shape, dtype=IDX, device=self.device)
    x = _to_last(self, d)
    xd = x.detach().cast(dtypes.uint8) if self.dtype == dtypes.bool else x.detach()
    v = _scan(xd, op)
    # a position that equals the running extreme is where it was (last) reached: the index is the latest such position
    e = (xd == v) | ((xd != xd) & (v != v)) if dtypes.is_float(xd.dtype) else xd == v
    idx = _scan(e.where(_arange(n, self.device), -1), "max")
    return _from_last(x.gather(-1, idx), d), _from_last(idx, d)
  def cummax(self: Any, axis: int | None = None, *, dim: int | None = None) -> tuple[Tensor, Tensor]:
    """(running max, index where it was reached: the latest on ties; NaN propagates)."""
    return self._cum_extreme(_pick(axis, dim) if (axis, dim) != (None, None) else 0, "max")
  def cummin(self: Any, axis: int | None = None, *, dim: int | None = None) -> tuple[Tensor, Tensor]:
    return self._cum_extreme(_pick(axis, dim) if (axis, dim) != (None, None) else 0, "min")

  # ================================================================ math
  @staticmethod
  def einsum(formula: str, *operands, acc_dtype=None, dtype=None) -> Tensor:
    """Einstein summation: explicit ('ij,jk->ik') or implicit output, '...' broadcasting, repeated labels (diagonals)."""
    T = _T()
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    ops = [o if isinstance(o, T) else T(o) for o in operands]
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
    prodt = None
    for lab, o in xs:
      o = o.permute(tuple(sorted(range(len(lab)), key=lambda i: everything.index(lab[i])))) if lab else o
      present = sorted(lab, key=everything.index)
      o = o.reshape(tuple(o.shape[present.index(c)] if c in present else 1 for c in everything))
      prodt = o if prodt is None else prodt * o
    prodt = prodt._broadcast_to(tuple(sizes.get(c, 1) for c in everything))
    dt = to_dtype(dtype or acc_dtype) if (dtype or acc_dtype) is not None else prodt.dtype
    if len(everything) > len(out): prodt = prodt.sum(tuple(range(len(out), len(everything))), dtype=dt)
    return prodt.cast(dt)

  def outer(self: Any, other: Tensor) -> Tensor:
    if self.ndim != 1 or other.ndim != 1: raise RuntimeError(f"outer(): expects 1-d tensors, got {self.shape} and {other.shape}")
    return self.reshape(-1, 1) * other.reshape(1, -1)
  ger = outer
  def inner(self: Any, other: Tensor) -> Tensor:
    """Sum over the last dims: shape self.shape[:-1] + other.shape[:-1] (a product when either is 0-d)."""
    if self.ndim == 0 or other.ndim == 0: return self * other
    if self.shape[-1] != other.shape[-1]: raise RuntimeError(f"inner(): last dims must match, got {self.shape} and {other.shape}")
    a = self.reshape(self.shape[:-1] + (1,) * (other.ndim - 1) + self.shape[-1:])
    prodt = a * other.reshape((1,) * (self.ndim - 1) + other.shape)
    return prodt.sum(-1, dtype=prodt.dtype)
  def vdot(self: Any, other: Tensor) -> Tensor:
    if self.ndim != 1 or other.ndim != 1 or self.shape != other.shape: raise RuntimeError(f"vdot(): expects 1-d tensors of the same size, got {self.shape} and {other.shape}")
    prodt = self * other
    return prodt.sum(dtype=prodt.dtype)
  def cross(self: Any, other: Tensor, dim: int | None = None) -> Tensor:
    """Cross product of 3-vectors along dim (default: the first dim of size 3, as torch.cross)."""
    a, b = self._broadcasted(other)
    if dim is None:
      dim = next((i for i, s in enumerate(a.shape) if s == 3), None)
      if dim is None: raise RuntimeError(f"cross(): no dim of size 3 in shape {a.shape}")
    d = _norm(dim, a.ndim)
    if a.shape[d] != 3: raise RuntimeError(f"cross(): dim {d} must have size 3, got shape {a.shape}")
    a0, a1, a2 = (_shrink_dim(a, d, i, i + 1) for i in range(3))
    b0, b1, b2 = (_shrink_dim(b, d, i, i + 1) for i in range(3))
    return _T().cat(a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0, dim=d)

  # inverse trig and hyperbolic functions: float results (ints become the default float), half types computed in float32
  def atan(self: Any) -> Tensor: return _fmath(self, _atan)
  arctan = atan
  def asin(self: Any) -> Tensor: return _fmath(self, lambda x: _atan(x / ((1 - x) * (1 + x)).sqrt()))
  arcsin = asin
  def acos(self: Any) -> Tensor: return _fmath(self, lambda x: 2 * _atan(((1 - x) / (1 + x)).sqrt()))
  arccos = acos
  def atan2(self: Any, other) -> Tensor:
    """Angle of the point (other, self) in (-pi, pi], with torch's signed-zero and infinity conventions."""
    y, x = self._broadcasted(other)
    def f(y: Tensor, x: Tensor) -> Tensor:
      x = x.cast(y.dtype)
      sy, sx = _signbit(y), _signbit(x)
      ay, ax = y * sy.where(-1, 1).cast(y.dtype), x * sx.where(-1, 1).cast(x.dtype)
      zero, inf = (ay == 0) & (ax == 0), ay.isinf() & ax.isinf()
      odd = zero | inf
      t = _atan(odd.where(0, ay) / odd.where(1, ax))
      t = inf.where(math.pi / 4, t)
      t = sx.where(math.pi - t, t)
      return sy.where(-t, t)
    if not dtypes.is_float(y.dtype): y, x = y.cast(dtypes.default_float), x.cast(dtypes.default_float)
    return _fmath(y, lambda yy: f(yy, x.cast(yy.dtype)))
  arctan2 = atan2
  def asinh(self: Any) -> Tensor:
    def f(x: Tensor) -> Tensor:
      s = _sgn(x)
      a = x * s
      big = a > 2.0 ** 28
      sa = big.where(1, a)
      small = _log1p(sa + sa * sa / (1 + (1 + sa * sa).sqrt()))
      return s * big.where(a.log() + _LN2, small)
    return _fmath(self, f)
  arcsinh = asinh
  def acosh(self: Any) -> Tensor:
    def f(x: Tensor) -> Tensor:
      big = x > 2.0 ** 28
      sx = big.where(2, x)
      t = sx - 1
      # torch's derivative rsqrt(x*x - 1) (inf at ±1, finite below -1 where the value is NaN): the graph's own one is NaN at 1
      return with_derivative(big.where(x.log() + _LN2, _log1p(t + (t * (sx + 1)).sqrt())), x, lambda x: (x * x - 1).rsqrt())
    return _fmath(self, f)
  arccosh = acosh
  def atanh(self: Any) -> Tensor:
    # torch's derivative 1/(1 - x*x): ±inf at ±1 and finite outside [-1, 1], where the graph's own one is NaN
    return _fmath(self, lambda x: with_derivative(0.5 * (_log1p(x) - _log1p(-x)), x, lambda x: 1 / (1 - x * x)))
  arctanh = atanh

  def logaddexp(self: Any, other) -> Tensor:
    """log(exp(self) + exp(other)) without overflow: max + log1p(exp(-|a - b|))."""
    a, b = self._broadcasted(other)
    def f(a: Tensor) -> Tensor:
      bb = b.cast(a.dtype)
      d = a - bb
      d = d.isnan().where(0, d)  # inf - inf: both equal
      return a.maximum(bb) + _log1p((-d.abs()).exp())
    return _fmath(a, f)
  def logaddexp2(self: Any, other) -> Tensor:
    a, b = self._broadcasted(other)
    return _fmath(a, lambda x: (x * _LN2).logaddexp(b.cast(x.dtype) * _LN2) * (1 / _LN2))

  def copysign(self: Any, other) -> Tensor:
    """|self| with the sign bit of other (so -0.0 counts as negative); float result."""
    a, b = self._broadcasted(other)
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    mag = _signbit(a).where(-a, a)  # |a| with a +0.0 for -0.0 (a * sign(a) kept -0.0, so copysign(-0.0, -1) gave +0.0)
    # torch's derivative: result / a, 0 where a == 0 (so NaN for NaN and inf a); other gets none. The closure must not hold
    # the result (it would keep its own registry key alive): it rebuilds it, the same hash-consed node
    return with_derivative(_signbit(b).where(-mag, mag), a, lambda a: (a == 0).where(0, _signbit(b).where(-mag, mag).detach() / a))
  def signbit(self: Any) -> Tensor:
    if not dtypes.is_float(self.dtype): return self < 0 if self.dtype != dtypes.bool else self.full_like(False)
    return _signbit(self)
  def frac(self: Any) -> Tensor:
    if not dtypes.is_float(self.dtype): raise TypeError(f"frac() needs a float tensor, got {self.dtype}")
    return self - self.trunc()
  def isposinf(self: Any) -> Tensor: return self == math.inf if dtypes.is_float(self.dtype) else self.full_like(False, dtype=dtypes.bool)
  def isneginf(self: Any) -> Tensor: return self == -math.inf if dtypes.is_float(self.dtype) else self.full_like(False, dtype=dtypes.bool)
  def nan_to_num(self: Any, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """NaN -> nan, +inf -> posinf (default: the dtype's largest finite value), -inf -> neginf (default: its lowest)."""
    if not dtypes.is_float(self.dtype): return self
    big = {dtypes.float16: 65504.0, dtypes.bfloat16: 3.3895313892515355e38, dtypes.float32: 3.4028234663852886e38, dtypes.float64: 1.7976931348623157e308}[self.dtype]
    x = self.isnan().where(self.full_like(nan), self)
    x = (self == math.inf).where(self.full_like(big if posinf is None else posinf), x)
    return (self == -math.inf).where(self.full_like(-big if neginf is None else neginf), x)

  # ================================================================ random
  def multinomial(self: Any, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """Sample indices from the (unnormalized) weights in each row of a 1-d or 2-d tensor; integer weights work as in
    tinygrad (torch takes only floats). With replacement: inverse-CDF sampling; without: the num_samples smallest
    exponential race times Exp(1)/p (distinct indices)."""
    T = _T()
    if self.ndim not in (1, 2): raise RuntimeError(f"multinomial(): prob_dist must be 1 or 2 dim, got shape {self.shape}")
    if num_samples <= 0: raise RuntimeError(f"multinomial(): num_samples must be positive, got {num_samples}")
    p = (self if self.ndim == 2 else self.unsqueeze(0)).detach().float()
    rows, n = p.shape
    if not replacement and num_samples > n: raise RuntimeError(f"multinomial(): cannot sample n_sample={num_samples} > prob_dist.size(-1)={n} samples without replacement")
    if replacement:
      cdf = p.cumsum(1)
      u = T.rand(rows, num_samples, 1, device=self.device) * cdf[:, -1:].unsqueeze(1)
      idx = (cdf.unsqueeze(1) <= u).sum(-1, dtype=IDX).minimum(n - 1)
    else:
      race = -(1 - T.rand(rows, n, device=self.device)).log() / p
      idx = race.topk(num_samples, 1, largest=False)[1]
    return idx if self.ndim == 2 else idx.reshape(num_samples)

  def bernoulli(self: Any, p: float | None = None) -> Tensor:
    """0/1 samples (in self's dtype): each element is 1 with probability self (or the scalar p, with self's shape)."""
    T = _T()
    if p is not None and not 0 <= p <= 1: raise RuntimeError(f"bernoulli(): p must be in [0, 1], got {p}")
    probs = self.detach() if p is None else T.full(self.shape, float(p), device=self.device)
    return (T.rand(self.shape, device=self.device) < probs).cast(self.dtype if dtypes.is_float(self.dtype) or p is not None else dtypes.default_float)

  @staticmethod
  def randperm(n: int, device: str | None = None, dtype=None, **kwargs) -> Tensor:
    """A random permutation of 0..n-1: the ranks of n random 32-bit keys (ties broken by position)."""
    T = _T()
    if n < 0: raise RuntimeError(f"randperm(): n must be non-negative, got {n}")
    dt = to_dtype(dtype) if dtype is not None else IDX
    if n == 0: return T.zeros(0, dtype=dt, device=device, **kwargs)
    keys = T._random_bits((n,), device)
    rank = _sort_rank(keys, False)
    return T(rank.cast(dt).uop, **kwargs)

  # ================================================================ tinygrad / PyTorch API extras
  def _pick_axis(self: Any, axis, dim):
    """The reduction axis from tinygrad's `axis` or PyTorch's `dim` keyword (at most one may be given)."""
    return _pick(axis, dim)

  def _max_min_dim(self: Any, dim, keepdim: bool, largest: bool):
    """torch's `x.max(dim=d)` / `x.min(dim=d)`: a (values, indices) named tuple."""
    if not isinstance(dim, int): raise TypeError(f"{'max' if largest else 'min'}(dim=...) takes one int dim, got {dim!r}")
    vals = self.max(dim, keepdim) if largest else self.min(dim, keepdim)
    idx = self.argmax(dim, keepdim) if largest else self.argmin(dim, keepdim)
    return (_MaxRet if largest else _MinRet)(vals, idx)

  def isclose(self: Any, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """|self - other| <= atol + rtol * |other| elementwise (torch.isclose): infinities are close only to an equal
    infinity, NaN only to NaN and only with equal_nan. Ints and bools compare in float64. Bool result, no gradient."""
    a, b = self._broadcasted(other)
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.float64), b.cast(dtypes.float64)
    a, b = a.detach(), b.detach()
    close = (a == b) | (a.isfinite() & b.isfinite() & ((a - b).abs() <= atol + rtol * b.abs()))
    return close | (a.isnan() & b.isnan()) if equal_nan else close
  def allclose(self: Any, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """True when every element is close (isclose); a Python bool, as torch.allclose (realizes)."""
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

  def normalize(self: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """self / max(||self||_p along dim, eps) (torch.nn.functional.normalize; p may be inf, -inf or 0)."""
    x = self._float()
    if p == math.inf: n = x.abs().max(dim, keepdim=True)
    elif p == -math.inf: n = x.abs().min(dim, keepdim=True)
    elif p == 0: n = (x != 0).sum(dim, keepdim=True).cast(x.dtype)
    else:
      s = (x.square() if p == 2 else x.abs().pow(p)).sum(dim, keepdim=True)
      pos = s > 0  # an all-zero slice has norm 0 and gradient 0 (not the NaN of sqrt'(0) * 0)
      n = pos.where(pos.where(s, 1).sqrt() if p == 2 else pos.where(s, 1).pow(1 / p), 0)
    return x / n.maximum(eps)

  def shrink_to(self: Any, shape, *args) -> Tensor:
    """Keep the first shape[i] entries of each dim (None keeps the dim): tinygrad's shrink_to."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if len(shape) != self.ndim: raise TensorError(f"shrink_to {shape} needs one size per dim of {self.shape}")
    return self.shrink(tuple(None if s is None else (0, s) for s in shape))
  def pad_to(self: Any, shape, *args) -> Tensor:
    """Zero-pad the end of each dim up to shape[i] (None keeps the dim): tinygrad's pad_to."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if len(shape) != self.ndim: raise TensorError(f"pad_to {shape} needs one size per dim of {self.shape}")
    if any(n is not None and n < s for n, s in zip(shape, self.shape)): raise TensorError(f"pad_to {shape} is smaller than {self.shape}")
    return self.pad(tuple(None if n is None else (0, n - s) for n, s in zip(shape, self.shape)))
  def pad2d(self: Any, padding: Sequence[int], value: float = 0.0) -> Tensor:
    """Older tinygrad's pad2d: flat (left, right, top, bottom, ...) padding from the last dim; negative crops."""
    return self.pad(tuple(padding), value=value)

  def rearrange(self: Any, formula: str, **sizes) -> Tensor:
    """einops-style rearrange: "b c (h w) -> b h w c" with the sizes of split axes as keywords (h=4), "..." for the
    remaining dims and "1" / "()" for a dim of size 1. A reshape, a permute and a reshape: no data is copied."""
    if formula.count("->") != 1: raise TensorError(f"rearrange: {formula!r} needs exactly one '->'")
    lhs, rhs = (_einops_side(side, formula) for side in formula.split("->"))
    if any(isinstance(it, list) and "..." in it for it in lhs):
      raise TensorError(f"rearrange: '...' cannot be inside parentheses on the left of {formula!r}")
    n_ell = self.ndim - len(lhs) + 1 if "..." in lhs else 0
    if ("..." in lhs and n_ell < 0) or ("..." not in lhs and len(lhs) != self.ndim):
      raise TensorError(f"rearrange: the left side of {formula!r} has {len(lhs)} dims, the tensor has {self.ndim} (shape {self.shape})")
    if any("..." in (it if isinstance(it, list) else [it]) for it in rhs) != ("..." in lhs):
      raise TensorError(f"rearrange: '...' must be on both sides of {formula!r} or on neither")
    ell = [f"...{i}" for i in range(n_ell)]
    def expand(items: list) -> list:
      out: list = []
      for it in items:
        if it == "...": out.extend(ell)
        elif isinstance(it, list): out.append([e for n in it for e in (ell if n == "..." else [n])])
        else: out.append(it)
      return out
    lhs, rhs = expand(lhs), expand(rhs)
    names: list[str] = []
    dims: dict[str, int] = {}
    for it, s in zip(lhs, self.shape):
      group = it if isinstance(it, list) else [it]
      known = [sizes[n] for n in group if n in sizes]
      unknown = [n for n in group if n not in sizes]
      if isinstance(it, str): unknown, known = [it], []
      if len(unknown) > 1: raise TensorError(f"rearrange: give the sizes of all but one of {group} in {formula!r}")
      rest, k = s, prod(known)
      if unknown:
        if k == 0 or s % k: raise TensorError(f"rearrange: dim of size {s} cannot be split into {group} with sizes {sizes}")
        rest = s // k
      elif k != s: raise TensorError(f"rearrange: sizes {known} of {group or '()'} do not multiply to the dim size {s}")
      for n in group: dims[n] = sizes[n] if n in sizes and n not in unknown else rest
      names.extend(group)
    for n, v in sizes.items():
      if n not in dims: raise TensorError(f"rearrange: axis {n!r} is not on the left side of {formula!r}")
      if dims[n] != v: raise TensorError(f"rearrange: axis {n!r} has size {dims[n]}, not {v}")
    rnames = [n for it in rhs for n in (it if isinstance(it, list) else [it])]
    if len(set(names)) != len(names) or sorted(names) != sorted(rnames):
      raise TensorError(f"rearrange: {formula!r} must name the same axes once on each side")
    x = self.reshape(tuple(dims[n] for n in names)).permute(tuple(names.index(n) for n in rnames))
    return x.reshape(tuple(prod(dims[n] for n in it) if isinstance(it, list) else dims[it] for it in rhs))

  def max_unpool2d(self: Any, indices: Tensor, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None) -> Tensor:
    """The partial inverse of max_pool2d(return_indices=True): each value goes to its flat spatial index, zeros
    elsewhere. tinygrad's signature (dilation before padding); works for any number of spatial dims."""
    k_ = (kernel_size,) * 2 if isinstance(kernel_size, int) else tuple(kernel_size)
    n = len(k_)
    def tup(v) -> tuple: return (v,) * n if isinstance(v, int) else tuple(v)
    s_, d_ = tup(k_ if stride is None or stride == () else stride), tup(dilation)
    p = (padding,) * n if isinstance(padding, int) else tuple(padding)
    pads = [p[i] * 2 for i in range(n)] if len(p) == n else [p[2 * (n - 1 - i)] + p[2 * (n - 1 - i) + 1] for i in range(n)]
    lead, i_ = self.shape[:-n], self.shape[-n:]
    if indices.shape != self.shape: raise TensorError(f"max_unpool2d: indices shape {indices.shape} must match the input {self.shape}")
    if output_size is None: out = tuple((i - 1) * s - pp + d * (k - 1) + 1 for i, s, pp, d, k in zip(i_, s_, pads, d_, k_))
    else: out = tuple(output_size)[-n:]
    flat, idx = self.reshape(lead + (prod(i_),)), indices.reshape(lead + (prod(i_),))
    val = _T().zeros(lead + (prod(out),), dtype=self.dtype, device=self.device).scatter(len(lead), idx, flat.detach())
    if not dtypes.is_float(self.dtype): return val.reshape(lead + out)
    # overlapping windows can pick one element twice: its copies all land on the same output, and, as in torch, each
    # copy gets that output's whole gradient (the adjoint is a gather). `total - total.detach()` is 0 but carries it.
    total = (idx.unsqueeze(-1) == _arange(prod(out), self.device)).where(flat.unsqueeze(-1), 0).sum(-2)
    return (val + total.isfinite().where(total - total.detach(), 0)).reshape(lead + out)

  def newton_schulz(self: Any, steps: int, params: tuple, eps: float = 1e-7) -> Tensor:
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

  def contiguous_backward(self: Any) -> Tensor:
    """tinygrad's marker for a contiguous gradient; the value (and the gradient) pass through unchanged here."""
    return _T()(self.uop)
  def leakyrelu(self: Any, neg_slope: float = 0.01) -> Tensor:
    """Older tinygrad spelling of leaky_relu."""
    return self.leaky_relu(neg_slope)
  def rmsnorm(self: Any, axis=-1, eps: float = 1e-6) -> Tensor:
    """tinygrad's spelling of rms_norm."""
    return self.rms_norm(axis, eps)

  @staticmethod
  def from_blob(ptr, shape, **kwargs) -> Tensor:
    """A tensor holding a copy of the memory at ptr (an int address, a ctypes pointer, or an object with
    __array_interface__ such as a numpy array): shape and dtype (default float32) say how much. tinygrad aliases the
    memory instead; fusegrad copies it, so the pointer need not outlive the call."""
    import ctypes
    from fusegrad.device import canonicalize
    T = _T()
    dtype = to_dtype(kwargs.pop("dtype", None) or dtypes.default_float)
    device = canonicalize(kwargs.pop("device", None))
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if hasattr(ptr, "__array_interface__"): addr = ptr.__array_interface__["data"][0]
    elif isinstance(ptr, int): addr = ptr
    else: addr = ctypes.cast(ptr, ctypes.c_void_p).value
    nbytes = prod(shape) * dtype.itemsize
    if nbytes and not addr: raise TensorError("from_blob: null pointer")
    return T(T._from_bytes(ctypes.string_at(addr, nbytes) if nbytes else b"", dtype, device, shape), **kwargs)

  def _bitcast_resize(self: Any, dtype) -> Tensor:
    """Bitcast to a dtype of another size (little-endian, as tinygrad and numpy's view): the last dim is regrouped,
    e.g. (..., 4n) uint8 -> (..., n) float32, or (..., n) int32 -> (..., 4n) uint8. Composed from shifts, masks and
    same-size bitcasts."""
    dt = to_dtype(dtype)
    ns, os_ = dt.itemsize, self.dtype.itemsize
    if ns == os_: return self.bitcast(dt)
    if self.ndim == 0 or (self.shape[-1] * os_) % ns:
      raise TensorError(f"bitcast {self.dtype} -> {dt}: the last dim of {self.shape} must hold whole {dt} elements")
    uint = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}
    x = self.bitcast(uint[os_]) if self.dtype != dtypes.bool else self.cast(dtypes.uint8)
    if ns > os_:
      r = ns // os_
      x = x.reshape(self.shape[:-1] + (self.shape[-1] // r, r)).cast(uint[ns])
      parts = [_shrink_dim(x, x.ndim - 1, i, i + 1) << (8 * os_ * i) for i in range(r)]
      acc = parts[0]
      for q in parts[1:]: acc = acc | q
      return acc.squeeze(-1).bitcast(dt)
    r = os_ // ns
    lanes = [((x >> (8 * ns * i)) & ((1 << (8 * ns)) - 1)).cast(uint[ns]) for i in range(r)]
    out = _T().stack(*lanes, dim=-1).reshape(self.shape[:-1] + (self.shape[-1] * r,))
    return out if dt == uint[ns] else out.bitcast(dt)

def _signbit(x: Tensor) -> Tensor:
  """True for negative values including -0.0 (1/-0.0 is -inf)."""
  return (x < 0) | ((x == 0) & ((1 / (x == 0).where(x, 1)) < 0))
