"""Moving data without computing: reshape, expand, permute, flip, shrink, pad (and its reflect/replicate/circular
modes), cat/stack/split, and the shape ops built on them (roll, tril/triu, unfold, diagonal, rot90, rearrange ...).

Tensor inherits MovementMixin. A movement op never copies: the scheduler turns each into index math."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Sequence
from fusegrad.dtype import DType, dtypes, least_upper_dtype, truncate
from fusegrad.helpers import TensorError, flatten, prod
from fusegrad.uop.ops import Ops, UOp
from fusegrad.tensor.common import IDX, TensorMixin, is_tensor, _arange, _norm, _norm_axis, _note_view, _shrink_dim, _to_last

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

def _sequence_args(first, others: tuple, dim: int) -> tuple:
  """Accept torch's `f([a, b], dim)` besides tinygrad's `f(a, b, dim=dim)`."""
  if not isinstance(first, (list, tuple)): return first, others, dim
  if not first: raise TensorError("expected a non-empty sequence of tensors")
  if any(is_tensor(o) for o in others):  # f((a, b), c): neither spelling
    raise TensorError("pass the tensors either as one sequence (torch: f([a, b], dim)) or one by one (tinygrad: f(a, b)), not both")
  return first[0], tuple(first[1:]), next((o for o in others if isinstance(o, int)), dim)

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

class MovementMixin(TensorMixin):
  # ---------------- building blocks: the nodes (and their checks) come from UOp's builders (OpBuilder, uop/ops.py);
  # Tensor takes its own spellings of the arguments (None in reshape, dims= in flip, torch's flat padding, pad modes)
  def _moved(self: Tensor, u: UOp) -> Tensor:
    """self viewed as u (a movement of self's node), noting that self's buffer has a view; self when nothing moved."""
    if u is self.uop: return self
    _note_view(self.uop)
    return type(self)(u)
  def _broadcast_to(self: Tensor, shape: tuple[int, ...]) -> Tensor: return self._moved(self.uop._broadcast_to(shape))

  # ---------------- movement
  def reshape(self: Tensor, shape, *args) -> Tensor:
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if None in shape:  # tinygrad: None keeps that dim's size
      if len(shape) > self.ndim and None in shape[self.ndim:]: raise TensorError(f"reshape {shape}: None at a dim that {self.shape} does not have")
      shape = tuple(self.shape[i] if s is None else s for i, s in enumerate(shape))
    if not all(type(s) is int for s in shape):
      for s in shape:
        if not isinstance(s, (int, UOp)) or isinstance(s, bool): raise TypeError(f"reshape sizes must be ints (or bound Variables), got {shape}")
    return self._moved(self.uop.reshape(shape))
  def view(self: Tensor, *shape) -> Tensor: return self.reshape(*shape) if shape and not isinstance(shape[0], DType) else self.bitcast(shape[0])
  def expand(self: Tensor, shape, *args) -> Tensor: return self._moved(self.uop.expand(shape, *args))
  def permute(self: Tensor, order=None, *args, dims=None) -> Tensor:
    """permute(1, 0), permute((1, 0)) or torch's permute(dims=(1, 0))."""
    if (order is None) == (dims is None): raise TypeError("permute() takes the order once, positionally or as dims=")
    return self._moved(self.uop.permute(order if dims is None else dims, *args))
  # a 0-d tensor takes dim 0 or -1 (as torch) and is its own transpose and flip
  def transpose(self: Tensor, dim0: int = 1, dim1: int = 0) -> Tensor:
    if not self.ndim:
      _norm_axis(dim0, 0), _norm_axis(dim1, 0)  # (each must be 0 or -1)
      return self
    return self._moved(self.uop.transpose(dim0, dim1))
  def flip(self: Tensor, axis=None, *args, dims=None) -> Tensor:
    if (axis is None) == (dims is None): raise TypeError("flip() takes the axes to flip, as `axis` (tinygrad) or `dims=` (torch), once")
    axis = axis if dims is None else dims
    if not self.ndim:
      self.uop._axes(axis if not args else (axis, *args))  # (each must be 0 or -1)
      return self
    return self._moved(self.uop.flip(axis, *args))
  def shrink(self: Tensor, arg: Sequence[tuple[int, int] | None]) -> Tensor:
    if any(a is not None and isinstance(a[0], UOp) for a in arg):  # (pos, pos+n) at a bound Variable: a slice
      return self[tuple(slice(None) if a is None else slice(*a) for a in arg)]
    return self._moved(self.uop.shrink(arg))
  def pad(self: Tensor, padding, mode: str = "constant", value: float = 0.0) -> Tensor:
    """padding: one (before, after) pair per dim (None = no pad), or a flat torch-style sequence starting from the last dim.
    Negative amounts crop."""
    if all(isinstance(p, int) for p in padding) and len(padding) > 0:
      if len(padding) % 2 or len(padding) // 2 > self.ndim: raise TensorError(f"flat padding {padding} needs an even length of at most 2*ndim={2*self.ndim}")
      padding = pairs = [(0, 0)] * (self.ndim - len(padding) // 2) + [(padding[i], padding[i + 1]) for i in range(len(padding) - 2, -1, -2)]
    else:
      if len(padding) != self.ndim: raise TensorError(f"padding {padding} needs one pair per dim of {self.shape}")
      pairs = [(0, 0) if p is None else tuple(p) for p in padding]
    if mode != "constant":  # reflect / replicate / circular: _pad_mode below
      if value != 0: raise TensorError(f"pad mode {mode!r} does not take a value argument")
      return self._pad_mode(pairs, mode)
    out = self._moved(self.uop.pad(padding))
    if value != 0 and out.uop.op is Ops.PAD and out is not self:  # the padded part is value: a mask of the kept part selects
      mask = type(self).ones(out.uop.src[0].vshape, dtype=dtypes.bool, device=self.device).uop.pad(out.uop.sym_arg)
      out = type(self)(mask).where(out, truncate(self.dtype, value))  # the value in the tensor's dtype, as torch's pad
    return out
  def squeeze(self: Tensor, dim: int | None = None) -> Tensor:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(_norm_axis(d, self.ndim) for d in dims)
    return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1))) if self.ndim else self
  def unsqueeze(self: Tensor, dim: int) -> Tensor: return self._moved(self.uop.unsqueeze(dim))
  def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor: return self._moved(self.uop.flatten(start_dim, end_dim))
  def unflatten(self: Tensor, dim: int, sizes: tuple[int, ...]) -> Tensor:
    d = _norm_axis(dim, self.ndim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])
  def repeat(self: Tensor, repeats, *args) -> Tensor:
    repeats = tuple(repeats) if isinstance(repeats, (tuple, list)) else (repeats,) + args
    if len(repeats) < self.ndim: raise TensorError(f"repeat needs at least {self.ndim} repeat counts for shape {self.shape}, got {repeats}")
    base = (1,) * (len(repeats) - self.ndim) + self.shape
    x = self.reshape(base)
    x = x.reshape(flatten((1, s) for s in base)).expand(flatten((r, s) for r, s in zip(repeats, base)))
    return x.reshape(tuple(r * s for r, s in zip(repeats, base)))
  def cat(self: Tensor, *others: Tensor, dim: int = 0) -> Tensor:
    """tinygrad's `a.cat(b, c, dim=...)` / `Tensor.cat(a, b, c)`, and torch's `Tensor.cat([a, b, c], dim)`."""
    self, others, dim = _sequence_args(self, others, dim)
    ts = [self, *others]
    if any(t.ndim == 0 for t in ts): raise TensorError("zero-dimensional tensors cannot be concatenated")
    if any(t.ndim > 1 for t in ts) and any(t.shape == (0,) for t in ts):  # torch skips legacy empty (0,) tensors
      if not (ts := [t for t in ts if t.shape != (0,)]): return self
      self, others = ts[0], ts[1:]
    d = _norm_axis(dim, self.ndim)
    for t in ts:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise TensorError(f"cat: shapes {[t.shape for t in ts]} must match except in dim {d}")
    dt = least_upper_dtype(*[t.dtype for t in ts])
    total, off, out = sum(t.shape[d] for t in ts), 0, None
    for t in ts:
      p = [(0, 0)] * self.ndim
      p[d] = (off, total - off - t.shape[d])
      piece = t.cast(dt).pad(p)
      out = piece if out is None else out + piece
      off += t.shape[d]
    return out  # type: ignore
  def stack(self: Tensor, *others: Tensor, dim: int = 0) -> Tensor:
    """tinygrad's `a.stack(b, dim=...)` / `Tensor.stack(a, b)`, and torch's `Tensor.stack([a, b], dim)`."""
    self, others, dim = _sequence_args(self, others, dim)
    ts = [self, *others]
    if any(t.shape != self.shape for t in ts): raise TensorError(f"stack needs equal shapes, got {[t.shape for t in ts]}")
    d = _norm_axis(dim, self.ndim + 1)
    return type(self).cat(*[t.unsqueeze(d) for t in ts], dim=d)
  def split(self: Tensor, sizes: int | Sequence[int], dim: int = 0) -> list[Tensor]:
    d = _norm_axis(dim, self.ndim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0: raise TensorError(f"split size must be positive, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
    if sum(sizes) != n: raise TensorError(f"split sizes {list(sizes)} must sum to {n} (dim {d} of {self.shape})")
    out, off = [], 0
    for s in sizes:
      out.append(self.shrink(tuple((off, off + s) if i == d else None for i in range(self.ndim))))
      off += s
    return out
  def chunk(self: Tensor, chunks: int, dim: int = 0) -> list[Tensor]:
    if chunks <= 0: raise TensorError(f"chunk needs a positive number of chunks, got {chunks}")
    d = _norm_axis(dim, self.ndim)
    if self.shape[d] == 0: return [self] * chunks  # (torch: that many empty chunks)
    return self.split(max(1, math.ceil(self.shape[d] / chunks)), d)

  # ---------------- shape ops
  def roll(self: Tensor, shifts, dims=None) -> Tensor:
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
  def _tri(self: Tensor, diagonal: int, lower: bool) -> Tensor:
    if self.ndim < 2: raise RuntimeError(f"{'tril' if lower else 'triu'}: input tensor must have at least 2 dimensions, got shape {self.shape}")
    r, c = self.shape[-2:]
    rows, cols = _arange(r, self).reshape(r, 1), _arange(c, self).reshape(1, c)
    keep = (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)
    return keep.where(self, self.zeros_like())
  def tril(self: Tensor, diagonal: int = 0) -> Tensor: return self._tri(diagonal, True)
  def triu(self: Tensor, diagonal: int = 0) -> Tensor: return self._tri(diagonal, False)
  def unfold(self: Tensor, dim: int, size: int, step: int) -> Tensor:
    """Sliding windows of `size` with stride `step` along dim: that dim becomes the window count, and a new last
    dim holds each window (torch.Tensor.unfold)."""
    d = _norm(dim, max(self.ndim, 1))
    x = self.reshape(1) if self.ndim == 0 else self
    n = x.shape[d]
    if step <= 0: raise RuntimeError(f"unfold(): step must be > 0, got {step}")
    if size < 0 or size > n: raise RuntimeError(f"unfold(): size {size} must be in [0, {n}] (dim {d} of {self.shape})")
    if size == 0: return type(self).zeros(*x.shape[:d], (n - size) // step + 1, *x.shape[d + 1:], 0, dtype=self.dtype, device=self.device)
    w = _to_last(x, d)._pool((size,), step)  # (..., windows, size)
    order = list(range(w.ndim - 2))
    order.insert(d, w.ndim - 2)
    return w.permute(order + [w.ndim - 1])
  def _pad_mode(self: Tensor, pairs: Sequence[tuple[int, int]], mode: str) -> Tensor:
    """pad with mode 'reflect', 'replicate' or 'circular'; pairs has one (before, after) per dim. Negative amounts
    crop, as in torch: first for circular; reflect and replicate pad from the input's own ends, then crop (replicate's
    (3, -5) of a 5-wide dim is 3 copies of its first element)."""
    if mode not in ("reflect", "replicate", "circular"):
      raise NotImplementedError(f"pad mode {mode!r} is not supported; use 'constant', 'reflect', 'replicate' or 'circular'")
    if mode != "circular" and any(b < 0 or a < 0 for b, a in pairs) and any(b > 0 or a > 0 for b, a in pairs):
      x = self._pad_mode([(max(b, 0), max(a, 0)) for b, a in pairs], mode)
      return x._pad_mode([(min(b, 0), min(a, 0)) for b, a in pairs], mode)
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
      x = type(self).cat(*[p for p in (left, x, right) if p.shape[d]], dim=d)
    return x
  def repeat_interleave(self: Tensor, repeats, dim: int | None = None, *, output_size: int | None = None) -> Tensor:
    """Repeat each element `repeats` times along dim (flattened when dim is None); repeats may be per element.
    output_size (torch's hint of the result's length along dim) is checked."""
    out = self._repeat_interleave(repeats, dim)
    if output_size is not None and out.shape[0 if dim is None else _norm(dim, self.ndim)] != output_size:
      raise RuntimeError(f"repeat_interleave(): output_size {output_size} does not match the result's {out.shape}")
    return out
  def _repeat_interleave(self: Tensor, repeats, dim: int | None) -> Tensor:
    T = type(self)
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
  def meshgrid(self: Tensor, *others: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-d (or 0-d) tensors; indexing 'ij' (matrix) or 'xy' (Cartesian: first two dims swapped)."""
    ts = [self, *others]
    if len(ts) == 1 and isinstance(ts[0], (list, tuple)): ts = list(ts[0])
    if indexing not in ("ij", "xy"): raise TensorError(f"meshgrid(): indexing must be 'ij' or 'xy', got {indexing!r}")
    if any(t.ndim > 1 for t in ts): raise RuntimeError(f"meshgrid(): expects 0-d or 1-d tensors, got shapes {[t.shape for t in ts]}")
    ts = [t.reshape(-1) for t in ts]
    shape = tuple(t.shape[0] for t in ts)
    out = [t.reshape(tuple(-1 if i == k else 1 for i in range(len(ts)))).expand(shape) for k, t in enumerate(ts)]
    return tuple(o.transpose(0, 1) for o in out) if indexing == "xy" and len(ts) >= 2 else tuple(out)
  def diagonal(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
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
  def diag(self: Tensor, diagonal: int = 0) -> Tensor:
    """1-d: a square matrix with self on the given diagonal. 2-d: that diagonal as a 1-d tensor."""
    if self.ndim == 2: return self.diagonal(diagonal)
    if self.ndim != 1: raise RuntimeError(f"diag(): expects a 1-d or 2-d tensor, got shape {self.shape}")
    n, k = self.shape[0], abs(diagonal)
    m = self.reshape(n, 1).pad(((0, 0), (0, n))).reshape(n * (n + 1))[:n * n].reshape(n, n) if n else self.reshape(0, 0)
    return m.pad(((0, k), (k, 0)) if diagonal >= 0 else ((k, 0), (0, k)))
  def trace(self: Tensor) -> Tensor:
    if self.ndim != 2: raise RuntimeError(f"trace(): expects a 2-d tensor, got shape {self.shape}")
    return self.diagonal().sum()
  def movedim(self: Tensor, source, destination) -> Tensor:
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst): raise RuntimeError(f"movedim(): source {src} and destination {dst} must have the same number of dims")
    src, dst = tuple(_norm(s, self.ndim) for s in src), tuple(_norm(d, self.ndim) for d in dst)
    if not self.ndim: return self  # (dim 0 or -1 of a 0-d tensor, as torch)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst): raise RuntimeError(f"movedim(): repeated dim in source {source} or destination {destination}")
    order = [None] * self.ndim
    for s, d in zip(src, dst): order[d] = s
    rest = iter(i for i in range(self.ndim) if i not in src)
    return self.permute(tuple(o if o is not None else next(rest) for o in order))
  moveaxis = movedim
  def swapaxes(self: Tensor, axis0: int, axis1: int) -> Tensor: return self.transpose(axis0, axis1)
  swapdims = swapaxes
  # torch spellings of other ops
  concat = concatenate = cat
  def broadcast_to(self: Tensor, shape) -> Tensor: return self.expand(shape)
  def expand_as(self: Tensor, other: Tensor) -> Tensor: return self.expand(other.shape)
  def view_as(self: Tensor, other: Tensor) -> Tensor: return self.reshape(other.shape)
  def select(self: Tensor, dim: int, index: int) -> Tensor:
    """torch.select: position `index` of dim `dim`, the dim dropped (x.select(1, i) is x[:, i])."""
    d = _norm(dim, self.ndim)
    if not -self.shape[d] <= index < self.shape[d]: raise IndexError(f"select(): index {index} is out of range for dim {d} of size {self.shape[d]}")
    return self[(slice(None),) * d + (index,)]
  def tensor_split(self: Tensor, indices_or_sections, dim: int = 0) -> list[Tensor]:
    """torch.tensor_split: k sections (the first n % k one longer) or the pieces between the given indices."""
    d = _norm(dim, self.ndim)
    n = self.shape[d]
    if isinstance(indices_or_sections, int):
      k = indices_or_sections
      if k <= 0: raise RuntimeError(f"tensor_split(): number of sections must be positive, got {k}")
      return self.split([n // k + (i < n % k) for i in range(k)], d)
    # between the cuts, as Python slices: a cut before the previous one leaves an empty piece
    cuts = [0, *(min(max(b + n if b < 0 else b, 0), n) for b in indices_or_sections), n]
    return [_shrink_dim(self, d, lo, max(lo, hi)) for lo, hi in zip(cuts, cuts[1:])]
  def _split_evenly(self: Tensor, sections, dim: int, name: str) -> list[Tensor]:
    if isinstance(sections, int) and (sections <= 0 or self.shape[dim] % sections):
      raise RuntimeError(f"{name}(): dim {dim} of size {self.shape[dim]} does not split into {sections} equal parts")
    return self.tensor_split(sections, dim)
  def hsplit(self: Tensor, sections) -> list[Tensor]:
    if self.ndim == 0: raise RuntimeError("hsplit(): needs a tensor of at least 1 dim")
    return self._split_evenly(sections, 1 if self.ndim > 1 else 0, "hsplit")
  def vsplit(self: Tensor, sections) -> list[Tensor]:
    if self.ndim < 2: raise RuntimeError(f"vsplit(): needs a tensor of at least 2 dims, got {self.shape}")
    return self._split_evenly(sections, 0, "vsplit")
  def diff(self: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None, append: Tensor | None = None) -> Tensor:
    """torch.diff: x[i + 1] - x[i] along dim, n times (bool: x[i + 1] != x[i]), after prepend and append join it."""
    x = type(self).cat(*[t for t in (prepend, self, append) if t is not None], dim=dim) if prepend is not None or append is not None else self
    d = _norm(dim, x.ndim)
    for _ in range(n):
      a, b = _shrink_dim(x, d, 0, max(x.shape[d] - 1, 0)), _shrink_dim(x, d, min(1, x.shape[d]), x.shape[d])
      x = b != a if x.dtype == dtypes.bool else b - a
    return x
  def narrow(self: Tensor, dim: int, start: int, length: int) -> Tensor:
    if is_tensor(start): start = int(start.item())  # (torch takes a 0-d tensor)
    d = _norm(dim, self.ndim)
    n = self.shape[d]
    if not -n <= start <= n: raise IndexError(f"narrow(): start {start} is out of range for dim {d} of size {n}")
    start %= max(n, 1) if start < 0 else n + 1
    if length < 0 or start + length > n: raise RuntimeError(f"narrow(): start ({start}) + length ({length}) exceeds dim {d} of size {n}")
    return _shrink_dim(self, d, start, start + length)
  def fliplr(self: Tensor) -> Tensor:
    if self.ndim < 2: raise RuntimeError(f"fliplr(): input must have at least 2 dims, got {self.shape}")
    return self.flip(1)
  def flipud(self: Tensor) -> Tensor:
    if self.ndim < 1: raise RuntimeError("flipud(): input must have at least 1 dim")
    return self.flip(0)
  def rot90(self: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    if len(dims) != 2: raise RuntimeError(f"rot90(): dims must have 2 entries, got {dims}")
    a, b = _norm(dims[0], self.ndim), _norm(dims[1], self.ndim)
    if a == b: raise RuntimeError(f"rot90(): dims must differ, got {dims}")
    k %= 4
    if k == 1: return self.flip(b).transpose(a, b)
    if k == 2: return self.flip((a, b))
    if k == 3: return self.transpose(a, b).flip(b)
    return self
  def tile(self: Tensor, dims, *args) -> Tensor:
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,) + args
    return self.repeat((1,) * (self.ndim - len(dims)) + dims)

  # ---------------- tinygrad / PyTorch spellings
  def shrink_to(self: Tensor, shape, *args) -> Tensor:
    """Keep the first shape[i] entries of each dim (None keeps the dim): tinygrad's shrink_to."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if len(shape) != self.ndim: raise TensorError(f"shrink_to {shape} needs one size per dim of {self.shape}")
    return self.shrink(tuple(None if s is None else (0, s) for s in shape))
  def pad_to(self: Tensor, shape, *args, value: float = 0) -> Tensor:
    """Pad the end of each dim with `value` up to shape[i] (None keeps the dim): tinygrad's pad_to."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if len(shape) != self.ndim: raise TensorError(f"pad_to {shape} needs one size per dim of {self.shape}")
    if any(n is not None and n < s for n, s in zip(shape, self.shape)): raise TensorError(f"pad_to {shape} is smaller than {self.shape}")
    return self.pad(tuple(None if n is None else (0, n - s) for n, s in zip(shape, self.shape)), value=value)
  def pad2d(self: Tensor, padding: Sequence[int], value: float = 0.0) -> Tensor:
    """Older tinygrad's pad2d: flat (left, right, top, bottom, ...) padding from the last dim; negative crops."""
    return self.pad(tuple(padding), value=value)
  def rearrange(self: Tensor, formula: str, **sizes) -> Tensor:
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
  def t(self: Tensor) -> Tensor:
    """torch's t(): 0-d and 1-d tensors as they are, a 2-d tensor transposed."""
    if self.ndim > 2: raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return self.transpose(0, 1) if self.ndim == 2 else self
  @property
  def mT(self: Tensor) -> Tensor:
    if self.ndim < 2: raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices, got {self.ndim}-D tensor")
    return self.transpose(-2, -1)
  def unbind(self: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along dim, with dim removed."""
    d = _norm_axis(dim, self.ndim)
    return tuple(t.squeeze(d) for t in self.split(1, d)) if self.shape[d] else ()
