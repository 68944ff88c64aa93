"""Statistics and data-dependent results (unique, bincount, quantile, median variants, cov, corrcoef, ...).

Tensor inherits StatsMixin. A result whose shape depends on the data (unique, bincount) realizes only what decides that
shape (where the groups start, the largest value) and builds the rest from Tensor ops. The order statistics (quantile,
nanmedian, unique) rank each row with indexing.py's stable comparison sort, so ties and NaN order as sort's do, and
gradients reach the picked elements through gather."""
from __future__ import annotations
import collections, math, warnings
from typing import TYPE_CHECKING
from fusegrad.dtype import dtypes
from fusegrad.helpers import DTypeError, TensorError, prod
from fusegrad.uop.ops import broadcast_shape, wide_dtype
from fusegrad.tensor.common import IDX, TensorMixin, is_tensor, _arange, _norm, _to_last
from fusegrad.tensor.indexing import _rank_to_index, _sort_indices

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor  # noqa: F401

_NanmedianRet = collections.namedtuple("nanmedian", ["values", "indices"])
_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")

# ---------------- helpers
def _diag_embed(x: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
  """torch.diag_embed: each vector of x's last dim placed on diagonal `offset` of a new (n + |offset|)-square plane,
  whose rows are dim dim1 and columns dim dim2 of the result (dims counted in the result's x.ndim + 1)."""
  nd = x.ndim + 1
  a, b = _norm(dim1, nd), _norm(dim2, nd)
  if a == b: raise RuntimeError(f"diag_embed(): diagonal dimensions cannot be identical ({dim1}, {dim2})")
  n, k, lead = x.shape[-1], abs(offset), x.shape[:-1]
  keep, z = tuple((0, s) for s in lead), tuple((0, 0) for _ in lead)
  # an n x n diagonal from movement ops only: each element followed by n zeros, read back n at a time
  m = x.unsqueeze(-1).pad(z + ((0, 0), (0, n))).reshape(lead + (n * (n + 1),)).shrink(keep + ((0, n * n),)).reshape(lead + (n, n))
  m = m.pad(z + (((0, k), (k, 0)) if offset >= 0 else ((k, 0), (0, k))))
  rest = iter(range(nd - 2))
  return m.permute(tuple(nd - 2 if i == a else nd - 1 if i == b else next(rest) for i in range(nd)))

def _lex_rank(rows: Tensor) -> Tensor:
  """Position of each row of rows (n, m) in a stable lexicographic sort (the number of rows that go before it). Rows
  compare at their first differing column; NaN sorts after every number and differs from every value, itself
  included, so two NaNs there go in row order (torch.unique(dim=) keeps such rows apart)."""
  n, m = rows.shape
  x = rows.cast(dtypes.uint8) if rows.dtype == dtypes.bool else rows
  a, b = x.unsqueeze(1), x.unsqueeze(0)  # [i, j, k]: column k of rows i and j
  ar = _arange(n, x)
  earlier = ar.reshape(1, n) < ar.reshape(n, 1)  # [i, j]: j < i
  diff, before = a != b, b < a
  if dtypes.is_float(x.dtype):
    an, bn = a.isnan(), b.isnan()
    before = before | (an & bn.logical_not()) | (an & bn & earlier.unsqueeze(-1))
  col = _arange(m, x)
  first = diff.where(col, m).min(-1, keepdim=True)  # the first column where rows i and j differ (m: none)
  before = (before & (col == first)).any(-1)
  return (before | ((first.reshape(n, n) == m) & earlier)).sum(-1, dtype=IDX)

def _group_starts(rows: Tensor) -> Tensor:
  """True at the first row of rows (n, m), n > 0, and at each row that differs from the row before it."""
  new = (rows[1:] != rows[:-1]).any(-1)
  return type(rows).ones(1, dtype=dtypes.bool, device=rows.device).cat(new)

def _unique(x: Tensor, dim, sort: bool, return_inverse: bool, return_counts: bool, name: str):
  """unique (sort=True) and unique_consecutive: the distinct elements (dim=None, flattened) or slices along dim."""
  T, x = type(x), x.detach()
  if dim is None: rows, d = x.reshape(-1, 1), None
  else:
    if x.ndim == 0: raise IndexError(f"{name}(): dim {dim} was given for a 0-d tensor, which has no dims")
    d = _norm(dim, x.ndim)
    m = prod(s for i, s in enumerate(x.shape) if i != d)
    if m == 0: raise RuntimeError(f"{name}(): the dims of {x.shape} other than dim {d} hold no elements, so there are no slices to compare")
    rows = x.movedim(d, 0).reshape(x.shape[d], m)
  n = rows.shape[0]
  if n == 0:
    vals = x.reshape(0) if d is None else x
    inv = T.zeros(x.shape if d is None else (0,), dtype=IDX, device=x.device)
    return _unique_result(vals, inv, T.zeros(0, dtype=IDX, device=x.device), return_inverse, return_counts)
  if not sort: order = rank = None
  elif rows.shape[1] == 1:  # values: sorted as sort() does (a bitonic network for long rows); the argsort of that
    order = _sort_indices(rows.reshape(n), False)  # permutation is its inverse, where each value went
    rank = _sort_indices(order, False) if return_inverse else None
  else: order = _rank_to_index(rank := _lex_rank(rows), n)
  srows = rows.index_select(0, order) if order is not None else rows
  new = _group_starts(srows)
  gid = new.cast(IDX).cumsum() - 1
  if rank is not None: gid = gid.gather(0, rank)
  T.realize_all(srows, new, gid)  # (the ranks are computed once, for the values and the inverse)
  starts = new.nonzero().reshape(-1)  # realizes the flags: the number of groups is the result's size
  vals = srows.index_select(0, starts)
  vals = vals.reshape(-1) if d is None else vals.reshape((starts.shape[0],) + x.movedim(d, 0).shape[1:]).movedim(0, d)
  counts = starts[1:].cat(T([n], device=x.device, dtype=IDX)) - starts
  return _unique_result(vals, gid.reshape(x.shape if d is None else (n,)), counts, return_inverse, return_counts)

def _unique_result(vals: Tensor, inv: Tensor, counts: Tensor, return_inverse: bool, return_counts: bool):
  """torch's convention: the values alone, or a tuple with the inverse and/or the counts after them."""
  out = (vals,) + ((inv,) if return_inverse else ()) + ((counts,) if return_counts else ())
  return out[0] if len(out) == 1 else out

def _q_values(x: Tensor, q, name: str) -> tuple[Tensor, bool]:
  """q (a number, a list, a 0-d or 1-d tensor) as a 1-d tensor of x's dtype, and whether it was a scalar. Its values are
  read to check that they lie in [0, 1] (torch reads them too)."""
  T = type(x)
  if is_tensor(q):
    if q.ndim > 1: raise RuntimeError(f"{name}(): q must be a scalar or 1-d tensor, got shape {q.shape}")
    scalar, vals = q.ndim == 0, q.tolist()
  elif isinstance(q, (list, tuple)): scalar, vals = False, list(q)
  else: scalar, vals = True, q
  qs = [vals] if scalar else vals
  if not all(isinstance(v, (int, float)) and 0 <= v <= 1 for v in qs):
    raise RuntimeError(f"{name}(): q values must be in the range [0, 1], got {vals}")
  qt = q.detach().cast(x.dtype) if is_tensor(q) else T(qs, device=x.device, dtype=x.dtype).reshape(len(qs))
  return qt.reshape(len(qs)), scalar

def _pick_sorted(xr: Tensor, order: Tensor, pos: Tensor) -> tuple[Tensor, Tensor]:
  """(value, index) of the element at position pos (..., 1) of each row of xr (..., n) in a stable sort, whose indices
  are `order`."""
  n = xr.shape[-1]
  shape = broadcast_shape(xr.shape[:-1], pos.shape[:-1])
  idx = order._broadcast_to(shape + (n,)).gather(-1, pos._broadcast_to(shape + (1,)))
  return xr._broadcast_to(shape + (n,)).gather(-1, idx), idx

def _quantile(self: Tensor, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool, name: str) -> Tensor:
  """quantile and nanquantile: torch's ranks q * (n - 1) over the sorted row (n: the non-NaN count for nanquantile; a
  row with NaN gives NaN for quantile), rounded or interpolated as `interpolation` says."""
  if interpolation not in _QUANTILE_MODES:
    raise RuntimeError(f"{name}(): interpolation must be one of {', '.join(_QUANTILE_MODES)}, but got {interpolation!r}")
  if self.numel() == 0: raise RuntimeError(f"{name}(): input tensor must be non-empty, got shape {self.shape}")
  out_dt = self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float
  x = self.cast(wide_dtype(out_dt))  # 16-bit floats are ranked and interpolated in float32, then rounded once
  qt, scalar = _q_values(x, q, name)
  if dim is None: xr, d = x.reshape(-1), None
  else:
    d = _norm(dim, max(self.ndim, 1))
    xr = _to_last(x, d) if x.ndim else x.reshape(1)
  n, nq = xr.shape[-1], qt.shape[0]
  qv = qt.reshape((nq,) + (1,) * xr.ndim)
  order = _sort_indices(xr.detach(), False)
  nan = xr.detach().isnan()
  if ignore_nan:
    r = qv * (nan.logical_not().sum(-1, keepdim=True, dtype=IDX) - 1).cast(x.dtype)
    r = (r < 0).where(0, r)  # an all-NaN row: rank 0, a NaN
  else: r = nan.any(-1, keepdim=True).where(n - 1, qv * (n - 1))  # a row with NaN: its last element, a NaN
  if interpolation == "lower": r = r.floor()
  elif interpolation == "higher": r = r.ceil()
  elif interpolation == "nearest": r = r.round()  # half to even, as torch
  v, _ = _pick_sorted(xr, order, r.floor().cast(IDX))
  if interpolation in ("linear", "midpoint"):
    above, _ = _pick_sorted(xr, order, r.ceil().cast(IDX))
    v = v.lerp(above, r - r.floor() if interpolation == "linear" else 0.5)
  lead = (nq,) + xr.shape[:-1]
  if not keepdim: v = v.reshape(lead)
  elif d is None: v = v.reshape((nq,) + (1,) * self.ndim)
  else: v = v.reshape(lead).unsqueeze(d + 1) if self.ndim else v.reshape(lead)
  return (v.reshape(v.shape[1:]) if scalar else v).cast(out_dt)

class StatsMixin(TensorMixin):
  def diag_embed(self: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Each last-dim vector on diagonal `offset` of new (dim1, dim2) planes (torch's)."""
    return _diag_embed(self, offset, dim1, dim2)
  # ---------------- distinct values and counts
  def unique(self: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None):
    """torch.unique: the distinct elements (dim=None: of the flattened tensor) or distinct slices along dim, sorted (also
    for sorted=False, which leaves torch the order). With return_inverse, where each element (slice) went; with
    return_counts, how often each occurs; both int32. NaN is unequal to everything, so each NaN is kept. Realizes."""
    return _unique(self, dim, True, return_inverse, return_counts, "unique")
  def unique_consecutive(self: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None):
    """torch.unique_consecutive: each run of equal consecutive elements (slices along dim) kept once. Realizes."""
    return _unique(self, dim, False, return_inverse, return_counts, "unique_consecutive")
  def bincount(self: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """torch.bincount: out[v] counts the elements of a 1-d non-negative integer tensor equal to v (int32), or sums their
    weights (float32 for float32 weights, else float64, as torch); length max(max + 1, minlength). Realizes the
    largest value (the result's length)."""
    T = type(self)
    if not dtypes.is_int(self.dtype): raise DTypeError(f"bincount(): input must be an integer tensor, got {self.dtype}")
    if self.ndim != 1: raise RuntimeError(f"bincount(): only supports 1-d non-negative integral inputs, got shape {self.shape}")
    if minlength < 0: raise RuntimeError(f"bincount(): minlength should be >= 0, got {minlength}")
    if weights is not None and (weights.ndim != 1 or weights.shape != self.shape):
      raise RuntimeError(f"bincount(): weights should be 1-d and have the same length as input, got {weights.shape} for {self.shape}")
    length = minlength
    if self.numel():
      lo, hi = T.stack(self.min(), self.max()).tolist()
      if lo < 0: raise TensorError(f"bincount(): only supports non-negative inputs, got the value {lo}")
      length = max(length, hi + 1)
    hit = self.unsqueeze(-1) == _arange(length, self)
    if weights is None: return hit.sum(0, dtype=IDX)
    dt = dtypes.float32 if weights.dtype == dtypes.float32 else dtypes.float64
    return hit.where(weights.detach().cast(dt).unsqueeze(-1), 0).sum(0, dtype=dt)

  # ---------------- order statistics
  def quantile(self: Tensor, q, dim: int | None = None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
    """torch.quantile: the q-th quantiles (q a number, or a 1-d tensor: a leading dim of the result) over dim (None: of
    every element); interpolation linear, lower, higher, midpoint or nearest. A row holding NaN gives NaN. Gradient to
    the elements interpolated between, as torch's through sort."""
    return _quantile(self, q, dim, keepdim, interpolation, False, "quantile")
  def nanquantile(self: Tensor, q, dim: int | None = None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
    """torch.nanquantile: quantile of the elements that are not NaN (NaN where a row has none)."""
    return _quantile(self, q, dim, keepdim, interpolation, True, "nanquantile")
  def nanmedian(self: Tensor, dim: int | None = None, keepdim: bool = False):
    """torch.nanmedian: the lower median of the elements that are not NaN (NaN where there are none). Without dim the
    value over every element; with dim (values, indices). Ties: the element a stable sort puts there (torch's)."""
    T = type(self)
    if not dtypes.is_float(self.dtype): return self.median() if dim is None else _NanmedianRet(*self.median(dim, keepdim))
    if dim is None:
      if self.numel() == 0: return T.full((), math.nan, dtype=self.dtype, device=self.device)
      return self.flatten().nanmedian(0).values
    d = _norm(dim, max(self.ndim, 1))
    if self.ndim == 0: return _NanmedianRet(self, T.zeros((), dtype=IDX, device=self.device))
    if self.shape[d] == 0: raise IndexError(f"nanmedian(): cannot take the median of an empty dim {d} of {self.shape}")
    xr = _to_last(self, d)
    count = xr.detach().isnan().logical_not().sum(-1, keepdim=True, dtype=IDX)
    vals, idx = _pick_sorted(xr, _sort_indices(xr.detach(), False), (count - 1).maximum(0) // 2)
    shape = self.shape[:d] + (1,) + self.shape[d + 1:] if keepdim else xr.shape[:-1]
    return _NanmedianRet(vals.reshape(shape), idx.reshape(shape))

  # ---------------- covariance and distances
  def cov(self: Tensor, *, correction: int = 1, fweights: Tensor | None = None, aweights: Tensor | None = None) -> Tensor:
    """torch.cov: the covariance of the rows (variables) of a 2-d tensor over its columns (observations); a 1-d or 0-d
    tensor is one variable and gives a 0-d result. fweights (integer) and aweights (float) weight the observations; a
    non-positive number of degrees of freedom divides by 0, as torch (with a warning). Reads the weights to check them."""
    if self.ndim > 2: raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got shape {self.shape}")
    if self.dtype == dtypes.bool: raise DTypeError("cov(): bool dtype is not supported for input")
    x = (self.reshape(1, -1) if self.ndim < 2 else self)._float()
    nobs = x.shape[1]
    for w, name, is_kind in ((fweights, "fweights", dtypes.is_int), (aweights, "aweights", dtypes.is_float)):
      if w is None: continue
      if w.ndim > 1: raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got shape {w.shape}")
      if w.numel() != nobs: raise RuntimeError(f"cov(): expected {name} to have as many elements as there are observations ({nobs}), got {w.numel()}")
      if not is_kind(w.dtype):
        raise DTypeError(f"cov(): expected {name} to have {'integral' if name == 'fweights' else 'floating point'} dtype, got {w.dtype}")
    fw = None if fweights is None else fweights.reshape(nobs)
    aw = None if aweights is None else aweights.reshape(nobs)
    w = fw if aw is None else aw if fw is None else fw * aw
    if w is None:
      avg, wsum = x.mean(1, keepdim=True), nobs
      norm = nobs - correction
      if norm <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0; correction should be less than the number of observations", stacklevel=2)
        norm = 0
      xm = x - avg
      return (xm @ xm.T).div(norm).squeeze()
    _check_cov_weights(fw, aw, w)
    wsum = w.sum()
    avg = (x * w).sum(1, keepdim=True) / wsum
    norm = wsum - correction * (w * aw).sum() / wsum if aw is not None and correction != 0 else wsum - correction
    norm = (norm <= 0).where(0, norm)
    xm = x - avg
    return (xm @ (xm * w).T).div(norm).squeeze()
  def corrcoef(self: Tensor) -> Tensor:
    """torch.corrcoef: the Pearson correlation of the rows, cov / (std_i * std_j), clipped to [-1, 1]."""
    c = self.cov()
    if c.ndim == 0: return c / c
    std = c.diagonal().sqrt()
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clip(-1, 1)
  def dist(self: Tensor, other, p: float = 2) -> Tensor:
    """torch.dist: the p-norm of self - other (broadcast): p any number, inf or -inf (0: the count of differing
    elements). Integer inputs give a float result (torch raises)."""
    a, b = self._broadcasted(other)
    return (a - b).norm(p)
  def renorm(self: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """torch.renorm: each slice along dim (self.select(dim, i)) whose p-norm exceeds maxnorm scaled to norm maxnorm
    (by maxnorm / (norm + 1e-7), as torch); the others unchanged."""
    if not dtypes.is_float(self.dtype): raise DTypeError(f"renorm(): needs a float tensor, got {self.dtype}")
    if self.ndim < 2: raise RuntimeError(f"renorm(): input needs at least 2 dimensions, got shape {self.shape}")
    if not p > 0: raise RuntimeError(f"renorm(): non-positive norm p={p} is not supported")
    if not maxnorm >= 0: raise RuntimeError(f"renorm(): expected maxnorm to be >= 0 but got {maxnorm}")
    d = _norm(dim, self.ndim)
    # 16-bit floats: the norm and the scale computed in float32, the scale rounded to self's dtype (torch's kernel)
    norm = self.cast(wide_dtype(self.dtype)).norm(p, dim=tuple(i for i in range(self.ndim) if i != d), keepdim=True)
    return self * (norm > maxnorm).where(maxnorm / (norm + 1e-7), 1.0).cast(self.dtype)
  def diagflat(self: Tensor, offset: int = 0) -> Tensor:
    """torch.diagflat: the flattened tensor on diagonal `offset` of a square matrix."""
    return self.flatten().diag(offset)

  # ---------------- writes at indices and under masks
  def index_copy(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """torch.index_copy: self with row index[i] of dim replaced by row i of source. Repeated indices: the last write
    wins; an index tensor's out-of-range values write nothing (fusegrad's rule for index tensors)."""
    d = _norm(dim, max(self.ndim, 1))
    if not is_tensor(index) or not dtypes.is_int(index.dtype):
      raise DTypeError(f"index_copy(): index must be an integer tensor, got {getattr(index, 'dtype', type(index).__name__)}")
    if index.ndim > 1: raise IndexError(f"index_copy(): index should have dimension 1 or 0, got shape {index.shape}")
    if source.dtype != self.dtype:
      raise RuntimeError(f"index_copy(): self and source expected to have the same dtype, got {self.dtype} and {source.dtype}")
    if self.ndim == 0 or source.ndim == 0:
      if self.numel() != 1 or source.numel() != 1 or index.numel() != 1:
        raise RuntimeError(f"index_copy(): a 0-d self or source takes one index and one element, got {self.shape}, {index.shape}, {source.shape}")
      return self.reshape(1).index_copy(0, index.reshape(1), source.reshape(1)).reshape(self.shape)
    want = self.shape[:d] + (index.numel(),) + self.shape[d + 1:]
    if source.shape != want:
      raise RuntimeError(f"index_copy(): source {source.shape} must be shaped {want} (self {self.shape}, {index.numel()} indices along dim {d})")
    if index.numel() == 0: return self
    return self.scatter(d, index.reshape(tuple(-1 if i == d else 1 for i in range(self.ndim))).expand(want), source)
  def masked_scatter(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """torch.masked_scatter: self (broadcast with mask) with the positions where mask is True filled, in row-major order,
    by source's first elements. Realizes the mask's count only when source has fewer elements than mask."""
    if not is_tensor(mask) or mask.dtype != dtypes.bool:
      raise DTypeError(f"masked_scatter only supports boolean masks, got {getattr(mask, 'dtype', type(mask).__name__)}")
    if source.dtype != self.dtype:
      raise RuntimeError(f"masked_scatter(): expected self and source to have the same dtype, got {self.dtype} and {source.dtype}")
    shape = broadcast_shape(self.shape, mask.shape)
    x, m, src = self._broadcast_to(shape).flatten(), mask._broadcast_to(shape).flatten(), source.flatten()
    if src.numel() < m.numel() and (count := m.sum().item()) > src.numel():
      raise RuntimeError(f"masked_scatter(): source has {src.numel()} elements, fewer than the {count} True in the mask")
    if src.numel() == 0 or m.numel() == 0: return x.reshape(shape)
    pos = (m.cast(IDX).cumsum() - 1).maximum(0)  # where each True reads from source
    return m.where(src.gather(0, pos), x).reshape(shape)

def _check_cov_weights(fw: Tensor | None, aw: Tensor | None, w: Tensor) -> None:
  """torch's checks on cov's weights (they need the values: one read for all of them)."""
  T = type(w)
  checks = [w.sum().cast(dtypes.float64)]
  if fw is not None and fw.numel(): checks.append(fw.min().cast(dtypes.float64))
  if aw is not None and aw.numel(): checks.append(aw.min().cast(dtypes.float64))
  wsum, *mins = T.stack(*checks).tolist()
  if fw is not None and fw.numel() and mins.pop(0) < 0: raise RuntimeError("cov(): fweights cannot be negative")
  if aw is not None and aw.numel() and mins.pop(0) < 0: raise RuntimeError("cov(): aweights cannot be negative")
  if wsum == 0: raise RuntimeError("cov(): weights sum to zero, can't be normalized")
