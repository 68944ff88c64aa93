"""Indexing: numpy/PyTorch getitem and setitem, gather and scatter (index_select, take, masked_fill/select, nonzero,
scatter_reduce, index_add ...), sorting (sort, topk, median, kthvalue, mode) and scans (cumsum, cumprod, cummax ...).

Tensor inherits IndexingMixin. Everything is composed from the core lazy ops (movement, elementwise, reduce, GATHER,
WINDOW), so it fuses and differentiates like any other graph. A few ops have a result shape that depends on the data
(masked_select, nonzero, boolean-mask indexing): those realize the mask first, as PyTorch does.

Index outputs (sort/argsort/topk/cummax/... indices, nonzero) are int32, fusegrad's default int, where PyTorch returns
int64."""
from __future__ import annotations
import collections, math
from typing import TYPE_CHECKING, Any
from fusegrad.dtype import DType, dtypes, to_dtype
from fusegrad.helpers import DTypeError, TensorError, flatten, prod
from fusegrad.uop.ops import Ops, UOp, Variable, _movement, broadcast_shape, wide_dtype
from fusegrad.tensor.elementwise import _fmath
from fusegrad.tensor.common import IDX, TensorMixin, is_tensor, value_device, _arange, _from_last, _norm, _norm_axis, _note_view, _pad_dim, _pick, _to_last

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

# torch.return_types: the (values, indices) pairs read by name too (x.sort().values, x.topk(3).indices)
_SortRet, _TopkRet, _MedianRet, _KthvalueRet, _ModeRet, _CummaxRet, _CumminRet = (collections.namedtuple(n, ["values", "indices"])
  for n in ("sort", "topk", "median", "kthvalue", "mode", "cummax", "cummin"))
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
  ar = _arange(n, x)
  earlier = ar.reshape(1, n) < ar.reshape(n, 1)  # [i, j]: j < i
  return (before | (eq & earlier)).sum(-1, dtype=IDX)

SORT_NETWORK_MIN = 2048  # rows longer than this sort by a bitonic network; shorter ones by ranks (one O(n^2) kernel)

def _sort_indices(x: Tensor, descending: bool, k: int | None = None) -> Tensor:
  """The indices of the first k (default: all) elements of x's last dim in a stable sort (NaN as the largest value):
  by ranks for short rows, by a bitonic network for long ones (16384 values: ranks 1.7 s, the network 0.03-0.1 s; a
  million took hours by ranks)."""
  n = x.shape[-1]
  k = n if k is None else k
  return _rank_to_index(_sort_rank(x, descending), k) if n <= SORT_NETWORK_MIN else _bitonic_order(x, descending, k)

def _bitonic_order(x: Tensor, descending: bool, k: int) -> Tensor:
  """The first k indices of a stable sort of the last dim, by a bitonic sorting network over it padded to a power of two
  N: log2(N) * (log2(N) + 1) / 2 passes, each comparing every position i with i ^ j in blocks ordered up
  (i & block == 0) or down, and keeping the element that goes there. j and block are bound Variables, so every pass runs
  the same two kernels (values, indices): one compile, not two a pass. An element goes before another when it is not padding and the other is, or by value (NaN as the largest),
  then by its original index: ties keep their order, as in a stable sort."""
  if x.dtype == dtypes.bool: x = x.cast(dtypes.uint8)
  *lead, n = x.shape
  N = 1 << (n - 1).bit_length()
  i = _arange(N, x)
  v, idx = _pad_dim(x, x.ndim - 1, 0, N - n), i.reshape(*(1,) * len(lead), N).expand(*lead, N)
  block = 2
  while block <= N:
    j = block // 2
    while j:
      jt, kt = (type(x)(Variable(name, 1, N).bind(val)) for name, val in (("_sort_j", j), ("_sort_k", block)))
      partner = (i ^ jt).expand(*lead, N)
      pv, pi = v.gather(-1, partner), idx.gather(-1, partner)
      before, same = (v > pv, v == pv) if descending else (v < pv, v == pv)
      if dtypes.is_float(x.dtype):
        nan, pnan = v != v, pv != pv
        before, same = before | ((nan if descending else pnan) & (pnan if descending else nan).logical_not()), same | (nan & pnan)
      pad, ppad = idx >= n, pi >= n
      first = (ppad & pad.logical_not()) | ((pad == ppad) & (before | (same & (idx < pi))))
      keep = first == (((i & jt) == 0) == ((i & kt) == 0))  # the lower of a pair in an up block takes the first
      v, idx = keep.where(v, pv).contiguous(), keep.where(idx, pi).contiguous()
      j //= 2
    block *= 2
  return idx[..., :k]

def _rank_to_index(rank: Tensor, k: int) -> Tensor:
  """idx[..., r] = the i with rank[..., i] == r, for r < k."""
  n = rank.shape[-1]
  hit = rank.unsqueeze(-2) == _arange(k, rank).reshape(k, 1)  # [..., r, i]
  return hit.where(_arange(n, rank), 0).sum(-1, dtype=IDX)

class _Index:
  """A parsed index expression: the basic part (per source dim a shrink, flip and stride), the view shape after it
  (ints removed, None inserted) and the advanced index tensors with the view dim each applies to."""
  def __init__(self, shrinks, flips, strides, mid, final, adv):
    self.shrinks, self.flips, self.strides, self.mid, self.final, self.adv = shrinks, flips, strides, mid, final, adv

def _index_tensor_from(x: Any, like: Tensor) -> tuple[Tensor, list | None]:
  """x (a tensor, list or array) as an index tensor on like's device, and its values when they were known already."""
  T, device = type(like), like.device
  if is_tensor(x): return x, None
  vals = x.tolist() if hasattr(x, "tolist") else x
  def _flat_all(v): return [y for z in v for y in _flat_all(z)] if isinstance(v, (list, tuple)) else [v]
  flat = _flat_all(vals)
  if any(is_tensor(v) for v in flat): raise IndexError("a list of tensors as an index is not supported; index with a tuple of tensors")
  if flat and all(isinstance(v, bool) for v in flat): return T(vals, device=device, dtype=dtypes.bool), None
  if any(isinstance(v, float) for v in flat): raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
  return T(vals, device=device, dtype=IDX) if flat else T(vals, device=device, dtype=IDX).reshape(0), [int(v) for v in flat]

def _parse_index(self: Tensor, indices) -> _Index:
  T = type(self)
  if not isinstance(indices, tuple): indices = (indices,)
  items: list[tuple[str, Any, Any]] = []
  for x in indices:
    if x is None: items.append(("none", None, None))
    elif x is Ellipsis: items.append(("ell", None, None))
    elif isinstance(x, slice): items.append(("slice", x, None))
    elif isinstance(x, bool) or (type(x).__module__ == "numpy" and type(x).__name__ in ("bool_", "bool")): items.append(("bool", bool(x), None))
    elif is_tensor(x) or isinstance(x, (list, tuple)) or (hasattr(x, "__array_interface__") and getattr(x, "ndim", 0) > 0):
      t, vals = _index_tensor_from(x, self)
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
    if isinstance(size, UOp) and k in ("slice", "int"):  # a symbolic dim
      span, cnt = _symbolic_dim_index(k, v, size, dim)
      shrinks.append(span); flips.append(False); strides.append(1); mid.append(cnt)
      if k == "slice": final.append(cnt)
      dim += 1
      continue
    if k == "slice":
      if v.step == 0: raise TensorError("slice step cannot be zero")
      span, cnt, step = _slice_dim(v, size)
      shrinks.append(span); flips.append(step < 0); strides.append(abs(step)); mid.append(cnt); final.append(cnt)
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

def _symbolic_dim_index(kind: str, v, size: UOp, dim: int) -> tuple[tuple, Any]:
  """The (start, end) an int or a step-1 slice takes of a symbolic dim, and how many it keeps: the whole dim, or
  positions every bound value has (below the size's smallest value), as tinygrad allows."""
  if kind == "int":
    if not 0 <= v < size.vmin: raise IndexError(f"index {v} of the symbolic dim {dim} (size in [{size.vmin}, {size.vmax}]) must be in [0, {size.vmin})")
    return (v, v + 1), 1
  if v.step not in (None, 1) or any(b is not None and (isinstance(b, bool) or not isinstance(b, (int, UOp))) for b in (v.start, v.stop)):
    raise TypeError(f"dim {dim} is symbolic: only step-1 slices with int or Variable bounds are supported there, got {v}")
  b = 0 if v.start is None else v.start
  e = size if v.stop is None else v.stop
  if isinstance(b, int) and not 0 <= b <= size.vmin: raise IndexError(f"slice start {b} of the symbolic dim {dim} must be in [0, {size.vmin}]")
  if isinstance(e, int) and not 0 <= e <= size.vmin: raise IndexError(f"slice end {e} of the symbolic dim {dim} must be in [0, {size.vmin}]")
  return (b, e), e if isinstance(b, int) and b == 0 else e - b

def _slice_dim(s: slice, size: int) -> tuple[tuple[int, int], int, int]:
  """A slice of a dim of `size`: the (start, end) it shrinks the dim to, how many elements it keeps, and its step. A
  negative step walks backwards: it takes [stop+1, start], to be flipped."""
  b, e, st = s.indices(size)
  span = (b, max(b, e)) if st > 0 else (e + 1, b + 1) if b > e else (0, 0)
  return span, max(0, -(-(e - b) // st)), st

def _plain_view(u: UOp, indices) -> UOp | None:
  """u[indices] when each index is an int, a slice with int bounds and step, None or ... and u has no symbolic dims,
  built on nodes: step-1 slices and ints are one shrink and one reshape (the general path took 20 us for x[0], torch
  1 us), other steps take _view_nodes. None for any other index, and for an int out of range (the general path raises)."""
  idx = indices if type(indices) is tuple else (indices,)
  shape = u.shape
  if u.vshape is not shape: return None
  arg, flips, strides, out, d, rest = [], [], [], [], 0, len(shape) - sum(1 for i in idx if type(i) is int or type(i) is slice)
  if rest < 0: return None
  for i in idx:
    if type(i) is int:
      size = shape[d]
      if not -size <= i < size: return None
      i %= size
      arg.append((i, i + 1))
      flips.append(False)
      strides.append(1)
    elif type(i) is slice:
      if not all(b is None or type(b) is int for b in (i.start, i.stop, i.step)) or i.step == 0: return None
      span, cnt, st = _slice_dim(i, shape[d])
      arg.append(span)
      out.append(cnt)
      flips.append(st < 0)
      strides.append(abs(st))
    elif i is None:
      out.append(1)
      continue
    elif i is Ellipsis and rest >= 0:
      arg.extend((0, s) for s in shape[d:d + rest])
      out.extend(shape[d:d + rest])
      flips.extend([False] * rest)
      strides.extend([1] * rest)
      d, rest = d + rest, -1  # (a second ... falls to the general path)
      continue
    else: return None
    d += 1
  arg.extend((0, s) for s in shape[d:])
  out.extend(shape[d:])
  n = len(shape) - len(flips)
  if any(flips) or any(st != 1 for st in strides): return _view_nodes(u, arg, flips + [False] * n, strides + [1] * n, out)
  if any(a != (0, s) for a, s in zip(arg, shape)): u = _movement(Ops.SHRINK, u, tuple(e - b for b, e in arg), tuple(arg))
  return u if u.shape == tuple(out) else _movement(Ops.RESHAPE, u, tuple(out))

def _view_nodes(u: UOp, shrinks, flips, strides, final) -> UOp:
  """The basic part of an index on node u: each dim shrunk, flipped, every stride-th element kept (the dim padded to a
  multiple of the stride, split into (n, stride), column 0 kept), then reshaped to the final shape. The index's bounds
  come checked (slice.indices), so without symbolic dims the nodes are made directly, not by the movement builders,
  whose checks made a strided slice (w[:, :, 0::2, 1::2]) 39 us against 2.8 for a step-1 one."""
  if u.vshape is not u.shape:
    u = u.shrink(shrinks)
    if any(flips): u = u.flip([i for i, f in enumerate(flips) if f])
    if any(s != 1 for s in strides):
      u = u.pad(tuple((0, (-sh) % st if sh else 0) for sh, st in zip(u.shape, strides)))
      u = u.reshape(flatten((sh // st, st) for sh, st in zip(u.shape, strides)))
      u = u.shrink([p for sh in u.shape[0::2] for p in ((0, sh), (0, 1))])
    return u.reshape(tuple(final))
  def moved(op: Ops, x: UOp, shape: tuple, arg=None) -> UOp: return x if shape == x.shape and op is not Ops.FLIP else _movement(op, x, shape, arg)
  shrinks = tuple(shrinks)
  u = moved(Ops.SHRINK, u, tuple(e - b for b, e in shrinks), shrinks)
  if any(flips): u = moved(Ops.FLIP, u, u.shape, tuple(flips))
  if any(s != 1 for s in strides):
    pads = tuple((0, (-sh) % st if sh else 0) for sh, st in zip(u.shape, strides))
    u = moved(Ops.PAD, u, tuple(sh + a for sh, (_, a) in zip(u.shape, pads)), pads)
    u = moved(Ops.RESHAPE, u, tuple(flatten((sh // st, st) for sh, st in zip(u.shape, strides))))
    cut = tuple(p for sh in u.shape[0::2] for p in ((0, sh), (0, 1)))
    u = moved(Ops.SHRINK, u, tuple(e - b for b, e in cut), cut)
  return moved(Ops.RESHAPE, u, tuple(final))

def _basic_view(x: Tensor, ix: _Index) -> Tensor:
  v = _view_nodes(x.uop, ix.shrinks, ix.flips, ix.strides, ix.final)
  if v is x.uop: return x
  _note_view(x.uop)
  return type(x)(v)

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

def _box(x: Tensor, indices) -> tuple[dict[int, int], tuple[int, ...], tuple[int, ...]] | None:
  """For an index of ints, step-1 slices, None and ... (what x[i] = v, x[a:b, j] = v write): (the start of each dim the
  box does not cover whole, the box's shape in x's dims, the shape the value broadcasts to); None for any other index."""
  if x.uop.vshape is not x.uop.shape: return None
  ix = _parse_index(x, indices)
  if ix.adv or any(ix.flips) or any(s != 1 for s in ix.strides): return None
  return {d: b for d, ((b, e), size) in enumerate(zip(ix.shrinks, x.shape)) if e - b != size}, tuple(ix.mid), tuple(ix.final)

def _value_tensor(x: Tensor, value) -> Tensor:
  """A setitem value as a tensor of x's dtype."""
  T = type(x)
  return (value if isinstance(value, T) else T(value, device=value_device(x.device), dtype=x.dtype)).cast(x.dtype)

def _fit_value(v: Tensor, shape: tuple[int, ...]) -> Tensor:
  """A setitem value broadcast to the indexed shape (leading size-1 dims beyond it are dropped, as torch does)."""
  while v.ndim > len(shape) and v.shape[0] == 1: v = v.reshape(v.shape[1:])
  try: return v._broadcast_to(tuple(shape))
  except ValueError: raise RuntimeError(f"shape mismatch: value tensor of shape {v.shape} cannot be broadcast to indexing result of shape {tuple(shape)}") from None

def _static_positions(mask: Tensor, size: int) -> tuple[Tensor, Tensor]:
  """For a 1-d bool mask: (idx, valid), both of shape (size,): idx[r] is the position of the r-th True (0 past the
  count), valid[r] is r < count. Lazy (no realize): a (size, n) comparison against the running count."""
  n = mask.shape[0]
  r = _arange(size, mask)
  if n == 0: return r * 0, r < 0
  c = mask.cast(IDX).cumsum()
  hit = mask.reshape(1, n) & (c.reshape(1, n) == (r + 1).reshape(size, 1))
  return hit.where(_arange(n, mask).reshape(1, n), 0).sum(-1, dtype=IDX), r < c[n - 1]

# ---------------- slices at a bound Variable: x[:, :, pos:pos+n] with pos = Variable(...).bind(p)
# The length n is a constant and the start a value, so the shape stays fixed and one compiled kernel (one TinyJit
# capture) serves every position: reading gathers the n positions, writing selects them with a mask.

def _var_offset(u: Any) -> tuple[UOp | None, int] | None:
  """A slice bound as (bound-variable part, constant): 3 -> (None, 3), pos -> (pos, 0), pos+2 -> (pos, 2); None if it is
  not an int or a bound Variable plus a constant."""
  if isinstance(u, int) and not isinstance(u, bool): return None, u
  if not isinstance(u, UOp): return None
  if u.op is Ops.ADD and u.src[1].op is Ops.CONST and (inner := _var_offset(u.src[0])) is not None and inner[0] is not None: return inner[0], inner[1] + u.src[1].arg
  return (u, 0) if u.op is Ops.BIND else None

def _spell_ellipsis(x: Tensor, idx: tuple) -> tuple:
  """idx (with at most one ...) with the ... spelled out as full slices."""
  if Ellipsis not in idx: return idx
  e = idx.index(Ellipsis)
  return idx[:e] + (slice(None),) * (x.ndim - len(idx) + 1) + idx[e + 1:]

def _slices_only(x: Tensor, idx: tuple) -> tuple:
  """idx (slices and at most one ...) with the ... spelled out as full slices."""
  if idx.count(Ellipsis) > 1 or not all(i is Ellipsis or isinstance(i, slice) for i in idx):
    raise TypeError("a slice at a Variable takes only slices and ... in its other dims")
  idx = _spell_ellipsis(x, idx)
  if len(idx) > x.ndim: raise IndexError(f"too many indices for a tensor of {x.ndim} dimension(s)")
  return idx

def _ints_first(x: Tensor, indices) -> tuple[tuple, tuple] | None:
  """(the int indices with full slices elsewhere, the other indices) when indices mix ints with a slice bounded by a
  Variable (`cache[0, :, 0:pos+1]`): x[first][rest] reads the same; None otherwise."""
  idx = indices if isinstance(indices, tuple) else (indices,)
  if not any(isinstance(i, slice) and any(isinstance(b, UOp) for b in (i.start, i.stop)) for i in idx): return None
  if not any(isinstance(i, int) and not isinstance(i, bool) for i in idx) or idx.count(Ellipsis) > 1: return None
  idx = _spell_ellipsis(x, idx)
  is_int = [isinstance(i, int) and not isinstance(i, bool) for i in idx]
  return tuple(i if k else slice(None) for i, k in zip(idx, is_int)), tuple(i for i, k in zip(idx, is_int) if not k)

def _symbolic_end(x: Tensor, indices) -> tuple | None:
  """The shrink for slices of step 1 of which some end at a symbolic size (`x[:, :, 0:pos+1]`: the dim becomes
  symbolic); None if no slice does."""
  idx = indices if isinstance(indices, tuple) else (indices,)
  if not any(isinstance(i, slice) and isinstance(i.stop, UOp) and not isinstance(i.start, UOp) for i in idx): return None
  idx = _slices_only(x, idx)
  arg = []
  for d, (i, n) in enumerate(zip(idx, x.shape)):
    if isinstance(i.start, UOp) or i.step not in (None, 1) or (not isinstance(i.stop, UOp) and isinstance(n, UOp) and i != slice(None)):
      raise TypeError(f"dim {d}: with a slice ending at a Variable, the slices must have step 1 and int starts (x[:, 0:pos+1])")
    if isinstance(i.stop, UOp): arg.append((i.start or 0, i.stop))
    else: arg.append(None if isinstance(n, UOp) else i.indices(n)[:2])
  return tuple(arg) + (None,) * (x.ndim - len(arg))

def _symbolic_slice(x: Tensor, indices) -> tuple[int, UOp, int] | None:
  """(dim, start, length) if indices is full slices plus one `start:start+n` slice at a bound Variable; None if no slice
  bound is a UOp. Anything else with a UOp in it raises a clear error."""
  idx = indices if isinstance(indices, tuple) else (indices,)
  if not any(isinstance(i, slice) and (isinstance(i.start, UOp) or isinstance(i.stop, UOp)) for i in idx): return None
  idx = _slices_only(x, idx)
  found = None
  for d, i in enumerate(idx):
    if not any(isinstance(b, UOp) for b in (i.start, i.stop, i.step)) and i.indices(x.shape[d]) == (0, x.shape[d], 1): continue  # the whole dim
    lo, hi = _var_offset(i.start), _var_offset(i.stop)
    if found is not None or i.step not in (None, 1) or lo is None or hi is None or lo[0] is None or lo[0] is not hi[0]:
      raise TypeError(f"dim {d}: a slice at a Variable must be start:start+n, with start a bound Variable (plus a constant), n a constant, step 1 "
                      "(and the other dims full slices)")
    var, n = lo[0], hi[1] - lo[1]
    lo_min, lo_max = var.src[0].arg[1] + lo[1], var.src[0].arg[2] + lo[1]
    if n < 0 or lo_min < 0 or lo_max + n > x.shape[d]:
      raise IndexError(f"dim {d}: slice {var.src[0].arg[0]}+{lo[1]} : +{n} with {var.src[0].arg[0]} in [{var.src[0].arg[1]}, {var.src[0].arg[2]}] "
                       f"can leave the dim's {x.shape[d]} positions")
    found = (d, i.start, n)
  return found

def _positions(x: Tensor, d: int, start: UOp, n: int) -> tuple[Tensor, Tensor]:
  """(where each of dim d's positions reads from in the n-long slice, clipped; which positions the slice covers), both
  shaped to broadcast along dim d."""
  T = type(x)
  shape = [1] * x.ndim
  shape[d] = x.shape[d]
  rel = T.arange(x.shape[d], device=x.device).reshape(shape) - T(start, device=x.device)
  return rel.clip(0, max(n - 1, 0)), (rel >= 0) & (rel < n)

class IndexingMixin(TensorMixin):
  # ---------------- indexing
  def __getitem__(self: Tensor, indices) -> Tensor:
    """numpy/PyTorch indexing: ints, slices (negative steps too), None, ..., and integer/bool tensors or lists
    (advanced indexing, PyTorch's rules for where the indexed dims go); `x[:, pos:pos+n]` with pos a bound Variable
    (a fixed shape whatever its value; assigning to the result writes into x)."""
    if (v := _plain_view(self.uop, indices)) is not None:
      if v is self.uop: return self
      _note_view(self.uop)
      return type(self)(v)
    if (split := _ints_first(self, indices)) is not None: return self[split[0]][split[1]]
    if (arg := _symbolic_end(self, indices)) is not None: return self.shrink(arg)
    if (sym := _symbolic_slice(self, indices)) is not None: return self._symbolic_read(*sym)
    return self._getitem(indices)
  def _symbolic_read(self: Tensor, d: int, start: UOp, n: int) -> Tensor:
    """self[..., start:start+n, ...] (dim d; start a bound Variable): the n positions gathered."""
    T = type(self)
    out = self[(slice(None),) * d + (T.arange(n, device=self.device) + T(start, device=self.device),)]
    out._symbolic_view = (self, d, start, n)  # assign() writes through it
    return out
  def __setitem__(self: Tensor, indices, value) -> None:
    """self[indices] = value, written in place into the data this tensor holds or views: every view of it (slices,
    reshapes, transposes, made before or after) sees the new values, as in torch. Inside a TinyJit capture the views are
    rebound to the new value instead."""
    if self._requires_grad and not type(self).no_grad:
      raise RuntimeError("a leaf tensor that requires grad cannot be modified in place by setitem; use `with Tensor.inference_mode():` or detach()")
    if self.device.startswith("DISK"):  # a file: the indexed range's bytes are written to it now
      view = self[indices]
      view._write_file(_fit_value(_value_tensor(view, value), view.shape))
      return
    if (sym := _symbolic_slice(self, indices)) is not None: return self._write_slice(*sym, value)
    if (box := _box(self, indices)) is not None:
      starts, sizes, final = box
      v = _fit_value(_value_tensor(self, value), final).reshape(sizes)
      if self._assign_box(starts, v): return
    self._write(self._setitem_value(indices, value))
  def _slice_value(self: Tensor, d: int, n: int, value) -> Tensor:
    """value as the n positions of dim d written into self: self's dtype, broadcast to the slice's shape."""
    v = (value if is_tensor(value) else type(self)(value, device=self.device)).cast(self.dtype)
    shape = self.shape[:d] + (n,) + self.shape[d + 1:]
    return v._broadcast_to(shape) if v.shape != shape else v
  def _symbolic_value(self: Tensor, d: int, start: UOp, n: int, value) -> Tensor:
    """self's full new value after self[..., start:start+n, ...] = value (dim d; start a bound Variable)."""
    v = self._slice_value(d, n, value)
    src, inside = _positions(self, d, start, n)
    # one position: every position would read the same one, so a broadcast serves (no gather)
    placed = v._broadcast_to(self.shape) if n == 1 else v.gather(d, src.expand(*self.shape[:d], self.shape[d], *self.shape[d + 1:]))
    return inside.where(placed, self)
  def _getitem(self: Tensor, indices) -> Tensor:
    ix = _parse_index(self, indices)
    v = _basic_view(self, ix)
    if not ix.adv: return v
    dims = [d for d, _ in ix.adv]
    sizes = [v.shape[d] for d in dims]
    bshape = broadcast_shape(*[t.shape for _, t in ix.adv])
    idt = IDX if prod(sizes) < 2**31 else dtypes.int64
    flat, inside, stride = None, None, 1
    for (d, t), n in zip(reversed(ix.adv), reversed(sizes)):
      t = t.cast(idt)
      ok = (t >= -n) & (t < n)
      inside = ok if inside is None else inside & ok
      t = (t < 0).where(t + n, t)
      term = t * stride if stride != 1 else t
      flat = term if flat is None else flat + term
      stride *= n
    # an index out of [-n, n) reads 0, as gather does past the end (it would reach another element of the flat
    # positions, or wrap twice)
    flat = inside.where(flat, stride)._broadcast_to(bshape)
    rest = [i for i in range(v.ndim) if i not in dims]
    xv = v.permute(dims + rest).reshape((prod(sizes),) + tuple(v.shape[i] for i in rest))
    out = xv._index_tensor(0, flat)
    # the indexed dims replace the advanced ones where they were when those are adjacent, else they go first
    if dims == list(range(dims[0], dims[0] + len(dims))) and dims[0] > 0:
      k, p = len(bshape), dims[0]
      out = out.permute(tuple(range(k, k + p)) + tuple(range(k)) + tuple(range(k + p, out.ndim)))
    return out
  def _setitem_value(self: Tensor, indices, value) -> Tensor:
    """The full new value of self after `self[indices] = value` (basic indexing: a mask and a padded value;
    advanced indexing: a scatter into the flat positions the index selects; the last write to a position wins)."""
    T, v = type(self), _value_tensor(self, value)
    ix = _parse_index(self, indices)
    if not ix.adv:
      v = _fit_value(v, tuple(ix.final))
      mask = _basic_unview(T.ones(tuple(ix.final), dtype=dtypes.bool, device=self.device), self.shape, ix)
      return mask.where(_basic_unview(v, self.shape, ix), self)
    # 1 + each indexed position, 0 where an index is out of range: those write nothing (scatter drops numel)
    pos = (_arange(self.numel(), self) + 1).reshape(self.shape)._getitem(indices)
    pos = (pos == 0).where(self.numel(), pos - 1)
    v = _fit_value(v, pos.shape)
    return self.flatten().scatter(0, pos.flatten(), v.flatten()).reshape(self.shape)

  # ---------------- gather and scatter
  def gather(self: Tensor, dim: int, index: Tensor) -> Tensor:
    """torch.gather: out[i][j][k] = self[index[i][j][k]][j][k] for dim=0 (and likewise for other dims).
    index must be an integer tensor with self's ndim and index.shape[d] <= self.shape[d] for d != dim."""
    if not is_tensor(index): index = type(self)(index, device=self.device)
    d = _norm_axis(dim, self.ndim)
    if not dtypes.is_int(index.dtype): raise DTypeError(f"gather index must be an integer tensor, got {index.dtype}")
    if not self.ndim and not index.ndim: return self.reshape(1).gather(0, index.reshape(1)).reshape(())  # (torch: dim 0 or -1)
    if index.ndim != self.ndim or any(i > s for k, (i, s) in enumerate(zip(index.shape, self.shape)) if k != d):
      raise TensorError(f"gather: index shape {index.shape} must have {self.ndim} dims and fit in {self.shape} outside dim {d}")
    x = self.shrink(tuple((0, i) if k != d else None for k, i in enumerate(index.shape)))
    return type(self)(UOp(Ops.GATHER, self.dtype, (x.uop, index.uop), d))
  def _index_tensor(self: Tensor, dim: int, idx: Tensor) -> Tensor:
    """self indexed along `dim` by an integer tensor (numpy advanced indexing with one index array)."""
    if not dtypes.is_int(idx.dtype): raise DTypeError(f"index tensors must be integer (bool masks are not supported yet), got {idx.dtype}")
    n = self.shape[dim]
    idx = (idx < 0).where(idx + n, idx)
    x = self.permute((dim,) + tuple(i for i in range(self.ndim) if i != dim))  # indexed dim first
    rest = x.shape[1:]
    k = idx.ndim
    xe = x.reshape((n,) + (1,) * max(k - 1, 0) + rest).expand((n,) + idx.shape[1:] + rest) if k else x
    ie = idx.reshape(idx.shape + (1,) * len(rest)).expand(idx.shape + rest) if k else idx.reshape((1,) * (1 + len(rest))).expand((1,) + rest)
    out = xe.gather(0, ie) if k else xe.gather(0, ie).reshape(rest)
    # numpy puts the index dims where the indexed dim was when it is the only advanced index
    lead = tuple(range(k, k + dim))
    return out.permute(lead + tuple(range(k)) + tuple(range(k + dim, out.ndim))) if dim and k else out
  def index_select(self: Tensor, dim: int, index: Tensor) -> Tensor:
    """Rows `index` (a 0-d or 1-d integer tensor) of dim `dim`."""
    T = type(self)
    if not isinstance(index, T): index = T(index, device=self.device, dtype=IDX)
    if not dtypes.is_int(index.dtype): raise DTypeError(f"index_select(): index must be an integer tensor, got {index.dtype}")
    if index.ndim > 1: raise IndexError(f"index_select(): index must be 0-d or 1-d, got shape {index.shape}")
    d = _norm(dim, self.ndim)
    if self.ndim == 0: return self.reshape(1)._index_tensor(0, index.reshape(-1)).reshape(index.shape)
    return self._index_tensor(d, index.reshape(-1))
  def take(self: Tensor, index: Tensor) -> Tensor:
    """self.flatten()[index], shaped like index."""
    T = type(self)
    if not isinstance(index, T): index = T(index, device=self.device, dtype=IDX)
    if not dtypes.is_int(index.dtype): raise DTypeError(f"take(): index must be an integer tensor, got {index.dtype}")
    return self.flatten()._index_tensor(0, index.reshape(-1)).reshape(index.shape)
  def take_along_dim(self: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    if dim is None: return self.flatten().gather(0, indices.flatten())
    d = _norm(dim, self.ndim)
    if indices.ndim != self.ndim: raise RuntimeError(f"take_along_dim(): indices {indices.shape} must have as many dims as the input {self.shape}")
    shp = broadcast_shape(tuple(1 if i == d else s for i, s in enumerate(self.shape)), tuple(1 if i == d else s for i, s in enumerate(indices.shape)))
    x = self._broadcast_to(tuple(self.shape[d] if i == d else s for i, s in enumerate(shp)))
    return x.gather(d, indices._broadcast_to(tuple(indices.shape[d] if i == d else s for i, s in enumerate(shp))))
  def masked_fill(self: Tensor, mask: Tensor, value) -> Tensor:
    """self where mask is False, value where it is True. mask must be bool; value a scalar or a tensor that broadcasts
    to self (torch takes only 0-d tensors, tinygrad any broadcastable one); it is cast to self's dtype."""
    T = type(self)
    if not isinstance(mask, T) or mask.dtype != dtypes.bool: raise DTypeError(f"masked_fill only supports boolean masks, got {getattr(mask, 'dtype', type(mask).__name__)}")
    value = value.cast(self.dtype) if isinstance(value, T) else T(value, device=self.device, dtype=self.dtype)
    return mask.where(value, self)
  def masked_select(self: Tensor, mask: Tensor, *, size: int | None = None, fill_value=0) -> Tensor:
    """The elements where mask is True, as a 1-d tensor (realizes the mask to know the count). With size=N the result
    has exactly N elements and nothing is realized: the first N selected, then fill_value."""
    T = type(self)
    if not isinstance(mask, T) or mask.dtype != dtypes.bool: raise DTypeError(f"masked_select only supports boolean masks, got {getattr(mask, 'dtype', type(mask).__name__)}")
    shape = broadcast_shape(self.shape, mask.shape)
    x, m = self._broadcast_to(shape).flatten(), mask._broadcast_to(shape).flatten()
    if size is None: return x._index_tensor(0, m.nonzero().reshape(-1))
    idx, valid = _static_positions(m, size)
    if x.shape[0] == 0: return T.full((size,), fill_value, dtype=self.dtype, device=self.device)
    return valid.where(x._index_tensor(0, idx), T(fill_value, device=self.device, dtype=self.dtype))
  def nonzero(self: Tensor, as_tuple: bool = False, *, size: int | None = None, fill_value: int = -1):
    """Indices of the nonzero elements: (count, ndim) int32, or a tuple of ndim 1-d tensors. Realizes self.
    With size=N (torch.nonzero_static): exactly N rows, computed lazily; rows past the count hold fill_value."""
    T = type(self)
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
  def _scatter_setup(self: Tensor, dim: int, index: Tensor, src: Tensor | None, name: str):
    T = type(self)
    if not isinstance(index, T): index = T(index, device=self.device, dtype=IDX)
    d = _norm(dim, max(self.ndim, 1))
    if not dtypes.is_int(index.dtype): raise DTypeError(f"{name}(): index must be an integer tensor, got {index.dtype}")
    if index.ndim != self.ndim: raise RuntimeError(f"{name}(): index {index.shape} must have as many dims as self {self.shape}")
    if any(i > s for k, (i, s) in enumerate(zip(index.shape, self.shape)) if k != d):
      raise RuntimeError(f"{name}(): index {index.shape} is larger than self {self.shape} outside dim {d}")
    if src is not None:
      if src.ndim != self.ndim or any(i > s for i, s in zip(index.shape, src.shape)):
        raise RuntimeError(f"{name}(): index {index.shape} is larger than src {src.shape}")
      if src.dtype != self.dtype: raise RuntimeError(f"{name}(): expected self.dtype ({self.dtype}) to equal src.dtype ({src.dtype})")
      src = src.shrink(tuple((0, i) for i in index.shape))
    return d, index, src
  def _scatter_parts(self: Tensor, d: int, index: Tensor):
    """(hit[..., i, m]: index[..., i] == m with dim d last; self with dim d last, shrunk to the index's other dims)."""
    n = self.shape[d]
    idx = _to_last(index, d)
    hit = idx.unsqueeze(-1) == _arange(n, self)
    x = _to_last(self, d).shrink(tuple((0, i) for i in idx.shape[:-1]) + ((0, n),))
    return hit, x
  def _scatter_finish(self: Tensor, d: int, index: Tensor, touched: Tensor, val: Tensor) -> Tensor:
    """Write val where touched (both with dim d last, over the index's other dims), keep self elsewhere."""
    pads = tuple((0, s - i) for s, i in zip(_to_last(self, d).shape[:-1], touched.shape[:-1])) + ((0, 0),)
    return _from_last(touched.pad(pads), d).where(_from_last(val.pad(pads), d), self)
  def scatter(self: Tensor, dim: int, index: Tensor, src=None, value=None, reduce: str | None = None) -> Tensor:
    """out[index[i][j]][j] = src[i][j] (for dim=0); src may be a tensor or a scalar (`value`).
    With repeated indices the last write wins (torch leaves the order unspecified)."""
    T = type(self)
    if src is None and value is None: raise TypeError("scatter() needs src or value")
    if src is None or not isinstance(src, T):
      src = value if src is None else src
      if isinstance(src, T): raise TypeError("scatter(): pass a tensor as src, not value")
      d = _norm(dim, max(self.ndim, 1))
      src = T.full(index.shape if isinstance(index, T) else T(index).shape, src, dtype=self.dtype, device=self.device)
    if not self.ndim and is_tensor(index) and not index.ndim:  # a 0-d tensor's dim 0 or -1 (as torch): its one element
      _norm_axis(dim, 0)
      return self.reshape(1).scatter(0, index.reshape(1), src.reshape(1), reduce=reduce).reshape(())
    if reduce is not None:
      if reduce not in ("add", "multiply"): raise TensorError(f"scatter(): reduce must be 'add' or 'multiply', got {reduce!r}")
      return self.scatter_reduce(dim, index, src, "sum" if reduce == "add" else "prod")
    d, index, src = self._scatter_setup(dim, index, src, "scatter")
    if index.numel() == 0: return self
    hit, _ = self._scatter_parts(d, index)
    k = index.shape[d]
    order = (_arange(k, self) + 1).reshape(k, 1)
    last = hit.where(order, 0).max(-2, keepdim=True)  # 1 + the last i writing to each position, 0 if none
    win = hit & (order == last)
    s = _to_last(src, d).unsqueeze(-1)
    sdt = dtypes.uint8 if s.dtype == dtypes.bool else s.dtype
    val = win.where(s.cast(sdt), 0).sum(-2, dtype=sdt).cast(self.dtype)
    return self._scatter_finish(d, index, last.squeeze(-2) > 0, val)
  def scatter_add(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor: return self.scatter_reduce(dim, index, src, "sum")
  def scatter_reduce(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
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
        val = val / cnt.cast(dt) if dtypes.is_float(dt) else val // cnt.cast(dt)
    elif reduce == "prod":
      val = hit.where(s, 1).prod(-2, dtype=dt)
      if include_self: val = val * x
    else:
      fill = _scan_identity("max" if reduce == "amax" else "min", dt)
      cands = hit.where(s, fill)
      if include_self: cands = x.unsqueeze(-2).cat(cands, dim=-2)
      val = cands.max(-2) if reduce == "amax" else cands.min(-2)
    return self._scatter_finish(d, index, touched, val)
  def index_add(self: Tensor, dim: int, index: Tensor, source: Tensor, alpha=1) -> Tensor:
    """self with source's slices added at rows `index` of dim (repeated rows accumulate)."""
    d = _norm(dim, max(self.ndim, 1))
    if index.ndim > 1 or not dtypes.is_int(index.dtype): raise IndexError(f"index_add(): index must be a 0-d or 1-d integer tensor, got {index.shape} {index.dtype}")
    if source.shape[:d] + source.shape[d + 1:] != self.shape[:d] + self.shape[d + 1:] or source.shape[d] != index.numel():
      raise RuntimeError(f"index_add(): source {source.shape} does not match self {self.shape} and index {index.shape} along dim {d}")
    idx = index.reshape(tuple(-1 if i == d else 1 for i in range(self.ndim))).expand(source.shape)
    return self.scatter_reduce(d, idx, (source * alpha if alpha != 1 else source).cast(self.dtype), "sum")
  def index_fill(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """self with the rows `index` of dim set to value."""
    d = _norm(dim, max(self.ndim, 1))
    if index.ndim > 1 or not dtypes.is_int(index.dtype): raise IndexError(f"index_fill(): index must be a 0-d or 1-d integer tensor, got {index.shape} {index.dtype}")
    n = self.shape[d]
    i = index.reshape(-1, 1)
    rows = ((i == _arange(n, self)) | (i + n == _arange(n, self))).any(0)
    return self.masked_fill(rows.reshape(tuple(n if k == d else 1 for k in range(self.ndim))), value)

  # ---------------- ordering and scans
  def sort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = True) -> tuple[Tensor, Tensor]:
    """(values, indices) sorted along dim. Always stable (ties keep their order); NaN sorts as the largest value.
    Rows of up to SORT_NETWORK_MIN: O(n^2) comparisons, fused into one reduce; longer ones a bitonic network."""
    T = type(self)
    if self.ndim == 0: return _SortRet(self, T.zeros((), dtype=IDX, device=self.device))
    d = _norm(dim, self.ndim)
    n = self.shape[d]
    if n == 0: return _SortRet(self, T.zeros(self.shape, dtype=IDX, device=self.device))
    x = _to_last(self, d)
    idx = _sort_indices(x.detach(), descending)
    return _SortRet(_from_last(x.gather(-1, idx), d), _from_last(idx, d))
  def argsort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = True) -> Tensor: return self.sort(dim, descending)[1]
  def msort(self: Tensor) -> Tensor: return self.sort(0)[0]
  def topk(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, sorted_: bool | None = None) -> tuple[Tensor, Tensor]:
    """(values, indices) of the k largest (or smallest) along dim, in sorted order (ties: the earlier index first)."""
    T = type(self)
    d = _norm(dim, max(self.ndim, 1))
    n = self.shape[d] if self.ndim else 1
    if not 0 <= k <= n: raise RuntimeError(f"topk(): selected index k={k} out of range for dim {d} of size {n}")
    if self.ndim == 0: return _TopkRet(self, T.zeros((), dtype=IDX, device=self.device))
    x = _to_last(self, d)
    if k == 0:
      return _TopkRet(_from_last(x.shrink(tuple((0, s) for s in x.shape[:-1]) + ((0, 0),)), d),
                      T.zeros(self.shape[:d] + (0,) + self.shape[d + 1:], dtype=IDX, device=self.device))
    idx = _sort_indices(x.detach(), largest, k)
    return _TopkRet(_from_last(x.gather(-1, idx), d), _from_last(idx, d))
  def _select_rank(self: Tensor, k: int, dim, keepdim: bool, name: str, nan_wins: bool = False):
    """(value, index) of the element of sorted rank k along dim."""
    d = _norm(dim, max(self.ndim, 1))
    if self.ndim == 0: return self, type(self).zeros((), dtype=IDX, device=self.device)
    n = self.shape[d]
    if n == 0: raise IndexError(f"{name}(): cannot take a {name} of an empty dim {d} of {self.shape}")
    x = _to_last(self, d)
    idx = _sort_indices(x.detach(), False, k + 1).shrink(tuple((0, s) for s in x.shape[:-1]) + ((k, k + 1),))
    if nan_wins and dtypes.is_float(self.dtype):
      isn = x.detach().isnan()
      idx = isn.any(-1, keepdim=True).where(isn.argmax(-1, keepdim=True).cast(IDX), idx)
    vals = x.gather(-1, idx)
    if not keepdim: return vals.squeeze(-1), idx.squeeze(-1)
    return _from_last(vals, d), _from_last(idx, d)
  def median(self: Tensor, dim: int | None = None, keepdim: bool = False):
    """The lower median: element (n-1)//2 of the sorted values; NaN if the row has a NaN. Without dim: only the value
    of the whole tensor; with dim: (values, indices)."""
    if dim is None:
      x = self.flatten()
      if x.numel() == 0: return type(self).full((), math.nan, dtype=self.dtype, device=self.device)
      return x._select_rank((x.numel() - 1) // 2, 0, False, "median", True)[0]
    d = _norm(dim, max(self.ndim, 1))
    n = self.shape[d] if self.ndim else 1
    return _MedianRet(*self._select_rank((n - 1) // 2, d, keepdim, "median", True))
  def kthvalue(self: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """(value, index) of the k-th smallest element (1-based) along dim."""
    d = _norm(dim, max(self.ndim, 1))
    n = self.shape[d] if self.ndim else 1
    if not 1 <= k <= n: raise RuntimeError(f"kthvalue(): k={k} out of range for dim {d} of size {n}")
    return _KthvalueRet(*self._select_rank(k - 1, d, keepdim, "kthvalue"))
  def mode(self: Tensor, dim: int = -1, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """(value, index) of the most frequent value along dim (ties: the smallest value; index: its last occurrence)."""
    T = type(self)
    if self.ndim == 0: return _ModeRet(self, T.zeros((), dtype=IDX, device=self.device))
    d = _norm(dim, self.ndim)
    n = self.shape[d]
    if n == 0: raise IndexError(f"mode(): cannot take the mode of an empty dim {d} of {self.shape}")
    x = _to_last(self, d)
    xd = x.detach().cast(dtypes.uint8) if self.dtype == dtypes.bool else x.detach()
    # NaN is a value like any other here (torch): it equals NaN, and it is the largest in a tie
    def same(a: Tensor, b: Tensor) -> Tensor: return (a == b) | (a.isnan() & b.isnan()) if dtypes.is_float(xd.dtype) else a == b
    count = same(xd.unsqueeze(-1), xd.unsqueeze(-2)).sum(-1, dtype=IDX)
    best = count == count.max(-1, keepdim=True)
    num = best & xd.isnan().logical_not()
    v = num.any(-1, keepdim=True).where(num.where(xd, _scan_identity("min", xd.dtype)).min(-1, keepdim=True), math.nan if dtypes.is_float(xd.dtype) else 0)
    idx = (best & same(xd, v)).where(_arange(n, self), -1).max(-1, keepdim=True)
    vals = x.gather(-1, idx)
    return _ModeRet(vals.squeeze(-1), idx.squeeze(-1)) if not keepdim else _ModeRet(_from_last(vals, d), _from_last(idx, d))
  def _scan_op(self: Tensor, axis, op: str, dtype) -> Tensor:
    x = self.cast(to_dtype(dtype) if dtype is not None else self._sum_dtype() if op in ("sum", "prod") else self.dtype)
    if x.ndim == 0: _norm(axis, 0); return x
    d = _norm(axis, x.ndim)
    # 16-bit floats carry their running sums and products in float32 (the blocked scan rounded each block's carry)
    wide = wide_dtype(x.dtype) if op in ("sum", "prod") else x.dtype
    return _from_last(_scan(_to_last(x.cast(wide), d), op), d).cast(x.dtype)
  def cumsum(self: Tensor, axis: int | None = None, dtype=None, *, dim: int | None = None) -> Tensor:
    """Running sum along axis (O(n * 32) work: blocked window sums). Small ints accumulate in int32 (torch: int64)."""
    return self._scan_op(_pick(axis, dim) if (axis, dim) != (None, None) else 0, "sum", dtype)
  def cumprod(self: Tensor, axis: int | None = None, dtype=None, *, dim: int | None = None) -> Tensor:
    return self._scan_op(_pick(axis, dim) if (axis, dim) != (None, None) else 0, "prod", dtype)
  def logcumsumexp(self: Tensor, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    ax = _pick(axis, dim) if (axis, dim) != (None, None) else 0
    return _fmath(self, lambda x: x._scan_op(ax, "logsumexp", None))
  def _cum_extreme(self: Tensor, axis: int, op: str) -> tuple[Tensor, Tensor]:
    T = type(self)
    if self.ndim == 0: _norm(axis, 0); return self, T.zeros((), dtype=IDX, device=self.device)
    d = _norm(axis, self.ndim)
    n = self.shape[d]
    if n == 0: return self, T.zeros(self.shape, dtype=IDX, device=self.device)
    x = _to_last(self, d)
    xd = x.detach().cast(dtypes.uint8) if self.dtype == dtypes.bool else x.detach()
    v = _scan(xd, op)
    # a position that equals the running extreme is where it was (last) reached: the index is the latest such position
    e = (xd == v) | ((xd != xd) & (v != v)) if dtypes.is_float(xd.dtype) else xd == v
    idx = _scan(e.where(_arange(n, self), -1), "max")
    return _from_last(x.gather(-1, idx), d), _from_last(idx, d)
  def cummax(self: Tensor, axis: int | None = None, *, dim: int | None = None) -> tuple[Tensor, Tensor]:
    """(running max, index where it was reached: the latest on ties; NaN propagates)."""
    return _CummaxRet(*self._cum_extreme(_pick(axis, dim) if (axis, dim) != (None, None) else 0, "max"))
  def cummin(self: Tensor, axis: int | None = None, *, dim: int | None = None) -> tuple[Tensor, Tensor]:
    return _CumminRet(*self._cum_extreme(_pick(axis, dim) if (axis, dim) != (None, None) else 0, "min"))
