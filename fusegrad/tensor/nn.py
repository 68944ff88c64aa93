"""Neural-network functions on Tensor: softmax and log-softmax, pooling and windows, interpolation, convolution,
activations, dropout and normalisation, losses, attention.

Tensor inherits NNMixin. Everything here is built from the core lazy ops (movement, elementwise, reduce), so it fuses
like any other graph."""
from __future__ import annotations
import itertools, math, struct
from typing import TYPE_CHECKING, Any, Callable, Sequence
from fusegrad.dtype import DType, dtypes
from fusegrad.helpers import TensorError, flatten, prod
from fusegrad.uop.ops import GroupOp, Ops, UOp
from fusegrad import buffers
from fusegrad.device import Device
from fusegrad.tensor.common import IDX, TensorMixin, is_tensor, _arange
from fusegrad.gradient import compute_gradient, with_derivative, with_gradient

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

def _tup(x: int | Sequence[int], n: int, name: str) -> tuple[int, ...]:
  t = (x,) * n if isinstance(x, int) else tuple(x)
  if len(t) != n: raise TensorError(f"{name} {x} needs {n} values (one per spatial dim)")
  return t

def _f32(x: float) -> float: return struct.unpack("f", struct.pack("f", x))[0]

def _interp_size(shape: tuple, size, scale_factor, recompute: bool | None) -> tuple[tuple[int, ...], tuple[float | None, ...]]:
  """interpolate's output size and, per dim, the float32 scale from output to input coordinates that torch uses: with a
  scale_factor (unless recompute_scale_factor), 1/scale_factor, not the sizes' ratio (they differ when the input size
  times the factor is not whole); None where the sizes give it."""
  if size is not None:
    if scale_factor is not None: raise TensorError("interpolate takes size or scale_factor, not both")
    if recompute: raise TensorError("recompute_scale_factor only applies with a scale_factor, not with an explicit size")
    size = (size,) * max(len(shape) - 2, 1) if isinstance(size, int) else tuple(size)
    return size, (None,) * len(size)
  if scale_factor is None: raise TensorError("interpolate needs size or scale_factor")
  nsp = len(shape) - 2 if isinstance(scale_factor, (int, float)) else len(scale_factor)
  sf = (scale_factor,) * nsp if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
  size = tuple(int(math.floor(float(i) * f)) for i, f in zip(shape[-nsp:], sf))
  if any(o <= 0 for o in size): raise TensorError(f"interpolate: scale_factor {scale_factor} gives an empty output {size} for input shape {shape}")
  return size, (None,) * nsp if recompute else tuple(_f32(1.0 / f) for f in sf)

def _conv_pads(padding: Any, k_: tuple[int, ...], d_: tuple[int, ...], s_: tuple[int, ...] | None = None) -> list[tuple[int, int]]:
  """padding as int, per-dim tuple (torch), flat 2*n tuple starting from the last dim (tinygrad), or 'same'/'valid'.
  Returns one (before, after) pair per spatial dim, in dim order."""
  n = len(k_)
  if isinstance(padding, str):
    if padding == "valid": return [(0, 0)] * n
    if padding == "same":
      if s_ is not None and any(s != 1 for s in s_): raise TensorError(f"padding='same' needs stride 1, got stride {s_}")
      tot = [d * (k - 1) for k, d in zip(k_, d_)]
      return [(t // 2, t - t // 2) for t in tot]  # the odd extra pixel goes after, as in torch
    raise TensorError(f"padding string must be 'same' or 'valid', got {padding!r}")
  if isinstance(padding, int): return [(padding, padding)] * n
  p = tuple(padding)
  if len(p) == n: return [(x, x) for x in p]
  if len(p) == 2 * n: return [(p[2 * (n - 1 - i)], p[2 * (n - 1 - i) + 1]) for i in range(n)]
  raise TensorError(f"padding {padding} needs 1, {n} or {2 * n} values for {n} spatial dims")

def _conv_vjp(red: UOp, groups: int, s_: tuple[int, ...], d_: tuple[int, ...], pads: list[tuple[int, int]] | None) -> Callable:
  """The gradients of a convolution of the padded input xp with the weight w, red being the node of its (bs, g, cout/g,
  *o) sum (a node, not a Tensor: the rule lives as long as the graph, which a lazy .grad can keep for many steps, and a
  Tensor in it would stay in the live-tensor registry that every assign and backward scans);
  with `pads`, of the input x that xp pads (symmetric pads of a stride-1 convolution, any of an undilated strided one).
  The composed graph is correct but slow: its input gradient sums k shifted copies of a buffer k times the input's
  size, and its weight gradient reads both operands along a short spatial row. So the input gradient of a stride-1
  convolution is conv_transpose2d of the output gradient with the same weight (padded by the kernel's span less the
  convolution's padding, convolved with the flipped weight), a strided one such transposed convolutions by phases
  (_input_grad_by_phases; dilated strided ones keep the composed graph), and the weight gradient reduces both operands
  copied batch-last, where the batch joins the image rows into one long contiguous reduction (MNIST's 5x5 weight
  gradient ran 3.5x faster), or, where the target's registers make that tile spill, with the output channels in vector
  lanes (_wgrad_by_channels)."""
  def vjp(g: Tensor, x: Tensor, w: Tensor, needs: tuple[bool, bool]) -> tuple:
    xp = x if pads is None else x.pad(((0, 0), (0, 0), *pads))
    bs, (cout, cin, *k_) = xp.shape[0], w.shape
    n, o_ = len(k_), g.shape[2:]
    gx = gw = None
    by_channels = needs[1] and _wgrad_by_channels(Device[xp.device].renderer, cout // groups, k_, o_, s_[-1])
    # computed once for both gradients, channels last where the weight gradient reads it so (computed channels first,
    # it was copied again channels last: 2.9 of a 3x3 64-channel layer's 26 ms step at 56x56, batch 8)
    if all(needs): g = g.permute(0, *range(2, 2 + n), 1).contiguous().permute(0, n + 1, *range(1, n + 1)) if by_channels else g.contiguous()
    lefts = tuple(b for b, _ in pads or [(0, 0)] * n)
    if needs[0] and all(s == 1 for s in s_): gx = g.conv_transpose2d(w, groups=groups, dilation=d_, padding=lefts).cast(xp.dtype)
    elif needs[0] and all(d == 1 for d in d_): gx = _input_grad_by_phases(g, w, x.shape, groups, s_, lefts).cast(x.dtype)
    elif needs[0]: gx = type(g)(compute_gradient(red, g.reshape(red.shape).uop, {xp.uop})[xp.uop])
    if by_channels: gw = _wgrad_channels_last(g, xp, w.shape, groups, s_, d_).cast(w.dtype)
    elif needs[1]:
      last = lambda t: t.permute(*range(1, t.ndim), 0).contiguous()  # noqa: E731  (c, *spatial, bs)
      xw = last(xp).permute(0, n + 1, *range(1, n + 1))._pool(k_, s_, d_)  # (cin_all, bs, *o, *k)
      xw = xw.reshape(groups, 1, cin, bs, *o_, *k_).permute(0, 1, 2, *range(4 + n, 4 + 2 * n), *range(4, 4 + n), 3)
      gt = last(g).reshape(groups, cout // groups, 1, *(1,) * n, *o_, bs)
      gw = (gt * xw).sum(tuple(range(-1 - n, 0))).reshape(cout, cin, *k_).cast(w.dtype)
    return gx, gw
  return vjp

def _input_grad_by_phases(g: Tensor, w: Tensor, x_shape: tuple[int, ...], groups: int, s_: tuple[int, ...], lefts: tuple[int, ...]) -> Tensor:
  """The gradient of a strided convolution's input x (dilation 1, padded by `lefts` before each dim), one stride-1
  transposed convolution per phase: the positions i with i % s == q are the padded input's i + left, which take the
  kernel taps r, r + s, ... (w[..., r::s]) for r = (q + left) % s, from the output positions shifted by (q + left) // s;
  the phases interleaved are the gradient. The composed gradient wrote a column buffer of every tap's product, 9x the
  output gradient for a 3x3 kernel, and summed it into the input (ResNet's 3x3 stride-2 64->128 layer at 56x56, batch
  8: 7.7 ms). Phases of x rather than of the padded input leave the interleave no shift to undo: it and the padding's
  cut were one copy whose every element divided its index by the stride, 12 GB/s."""
  n, k_, (bs, cin_all, *size) = len(s_), w.shape[2:], x_shape
  spans = [-(-sz // s) for sz, s in zip(size, s_)]  # positions per phase (the first phase's; others pad to it)
  phases, rows = [], []  # rows: the width of each computed phase's rows (which decides its conv's layout)
  for q in itertools.product(*(range(s) for s in s_)):
    r, shift = zip(*(((qi + left) % s, (qi + left) // s) for qi, left, s in zip(q, lefts, s_)))
    if any(ri >= k for ri, k in zip(r, k_)):  # a phase no tap reaches (a 1x1 kernel's odd positions): zeros
      phases.append(type(g).zeros(bs, cin_all, *spans, dtype=g.dtype, device=g.device))
      continue
    part = g.conv_transpose2d(w[(slice(None), slice(None), *(slice(ri, None, s) for ri, s in zip(r, s_)))], groups=groups)
    rows.append(part.shape[-1])
    # positions shift .. shift + span of it, zeros past its ends
    phases.append(part.pad(((0, 0), (0, 0), *((-c, c + sp - ps) for c, sp, ps in zip(shift, spans, part.shape[2:])))))
  # (s_0 * s_1 ..., bs, c, *spans) -> (bs, c, span_0, s_0, span_1, s_1, ...) -> rows of span * s, cut to the input's size
  out = type(g).stack(*phases).reshape(*s_, bs, cin_all, *spans).permute(n, n + 1, *flatten((n + 2 + i, i) for i in range(n)))
  out = out.reshape(bs, cin_all, *(sp * s for sp, s in zip(spans, s_))).shrink(((0, bs), (0, cin_all), *((0, sz) for sz in size)))
  if not all(_channels_last(Device[g.device].renderer, w.shape[1], row) for row in rows): return out
  # phases computed channels last are interleaved so, moving whole vectors of channels, and the gradient is a view of
  # that buffer (a stride-1 conv's input gradient is one too): interleaved channels first, the copy gathered every
  # element (ResNet's 3x3 stride-2 64 -> 128 layer at 56x56, batch 8: 0.9-1.2 -> 0.45 ms)
  return out.permute(0, *range(2, 2 + n), 1).contiguous().permute(0, n + 1, *range(1, n + 1))

WGRAD_BLOCK = 102_400  # floats of output gradient summed into one partial weight gradient (see _wgrad_channels_last)

def _wgrad_by_channels(target, rcout: int, k_: tuple[int, ...], o_: tuple[int, ...], stride: int = 1) -> bool:
  """Whether a weight gradient is computed with output channels in vector lanes (_wgrad_channels_last) rather than
  batch-last (lanes along the batch): a matmul register tile with the kernel columns as its rows. The columns must fill
  such a tile. With 16 vector registers (AVX2) the batch-last 4 x 4 tile spills and loads two vectors per FMA (MNIST's
  32-channel 5x5 layer 26-27 -> 20 ms on Zen 3), but 3 columns leave too few accumulators (3 rows x 2 vectors: 3x3
  layers 0.6-0.9x as fast on Zen 3 and, under CPU_ISA=avx2, an AVX-512 Xeon), unless the columns are strided (`stride`,
  the last dim's): batch-last then loads every column's input vector anew, where at stride 1 a column's vector is the
  next column's one step later (ResNet's 3x3 stride-2 training steps under CPU_ISA=avx2, 64 -> 128 channels at 56x56
  and 128 -> 256 at 28x28, batch 8: 25.2-25.8 -> 22.0-23.7 ms and 26.4-27.0 -> 23.4-24.9). 7 columns did not fit a
  tile (2.1 -> 2.4 ms on Zen 3). With 32 (AVX-512), where the columns' tile has up to 4 vectors a row, it was 1.1-2.1x
  as fast for every 3x3, 5x5 and 7x7 layer measured (an AVX-512 Xeon: MNIST's 5x5 15.2 -> 7.4 ms, ResNet's 3x3 at
  56x56 8 -> 5.8 ms, 256 channels at 14x14 7.9 -> 7.1 ms). A chunk must hold an image: one too large for L2 keeps the batch-last form.
  GPUs keep it too."""
  from fusegrad.codegen.opt import Budget
  if not target.simd_width or target.has_threads: return False
  budget = Budget.of(target)
  lo, hi = (3, budget.rows(budget.width)) if target.vector_registers >= 32 else (4 if stride == 1 else 3, budget.rows(2 * budget.width))
  return rcout % budget.width == 0 and lo <= k_[-1] <= hi and 0 < prod(o_) * rcout <= 2 * WGRAD_BLOCK

def _wgrad_channels_last(g: Tensor, xp: Tensor, w_shape: tuple, groups: int, s_: tuple[int, ...], d_: tuple[int, ...]) -> Tensor:
  """A convolution's weight gradient as a matmul whose vector lanes are output channels: each image pixel's window of
  the input (broadcast) times the output gradient's channels there, from a channels-last copy of it. It is summed in
  partial gradients over chunks of images holding about WGRAD_BLOCK floats of output gradient per group, so the block
  that every input channel and kernel row reads again stays in L2 (unchunked, the 5x5 MNIST layer read it from memory:
  42 ms; chunks sized in images x pixels rather than floats left 128- and 256-channel blocks of 1.6 and 3.2 MB, 1.2-1.4x
  slower), then the partials are summed, and the result is stored in the weight's layout from its own loop."""
  bs, (cout, cin, *k_), n, o_ = xp.shape[0], w_shape, len(w_shape) - 2, g.shape[2:]
  rcout = cout // groups
  bc = max(1, min(bs, WGRAD_BLOCK // (prod(o_) * rcout)))
  while bs % bc: bc -= 1
  gt = g.permute(0, *range(2, 2 + n), 1).contiguous().reshape(bs // bc, bc, *o_, groups, 1, *(1,) * n, rcout)
  xw = xp._pool(k_, s_, d_).reshape(bs // bc, bc, groups, cin, *o_, *k_)
  xw = xw.permute(0, 1, *range(4, 4 + n), 2, 3, *range(4 + n, 4 + 2 * n)).reshape(bs // bc, bc, *o_, groups, cin, *k_, 1)
  part = (xw * gt).sum(tuple(range(1, 2 + n)))  # (chunks, groups, cin, *k, rcout)
  total = part.reshape(part.shape[1:]) if bs == bc else part.contiguous().sum(0)  # (no images: no chunks, zeros)
  return type(g)(total.uop.permuted_contiguous((0, 2 + n, *range(1, 2 + n)))).reshape(cout, cin, *k_)

def _channels_last(target, rcout: int, row: int) -> bool:
  """Whether a conv with rcout output channels a group and output rows `row` wide computes its output channels last
  (conv2d says why)."""
  return rcout % 8 == 0 and (row < 16 or rcout >= 64 or not _row_fills_vectors(target, row))

def _row_fills_vectors(target, n: int) -> bool:
  """Whether an n-wide image row is one or two whole SIMD vectors of the target (targets without them: yes)."""
  from fusegrad.codegen.opt import Budget
  if not target.simd_width: return True
  width = Budget.of(target).width
  return n % width == 0 and n <= 2 * width

_TARGET_CHECK_MAX = 1 << 16
_valid_targets: list[tuple] = [()]  # (classes, ignore_index, dtype, bytes) of the last buffer of targets found valid

def _check_targets(Y: Tensor, C: int, ignore_index: int) -> None:
  """Raise IndexError, as torch does, for a class index outside [0, C) that is not ignore_index. Only targets whose values
  are cheap to know are checked: a constant, or a realized integer buffer of at most _TARGET_CHECK_MAX elements (read
  once, no kernel, ~50 ns an element; the same bytes again, as when a loop reuses one batch, are one comparison).
  Realizing lazy targets here (Y_train[samples] in a training step) would add a kernel launch and a wait to every step:
  the loss graph gives NaN for their bad indices instead."""
  u, key = Y.uop, ()
  while u.op in (Ops.RESHAPE, Ops.EXPAND): u = u.src[0]
  if u.op is Ops.CONST: vals = {u.arg}
  elif not dtypes.is_int(Y.dtype) or Y.numel() > _TARGET_CHECK_MAX or (b := buffers.buffer_view(Y.uop)) is None: return
  elif not (buf := buffers.buffer_of(b)).is_allocated: return
  else:
    key = (C, ignore_index, Y.dtype, bytes(buf.as_memoryview()))
    if key == _valid_targets[0]: return
    vals = set(memoryview(key[-1]).cast(Y.dtype.fmt))
  if not (bad := sorted(v for v in vals if v != ignore_index and not 0 <= v < C)):
    if key: _valid_targets[0] = key
    return
  raise IndexError(f"target class {bad[0]} is out of bounds for {C} classes (valid: 0 to {C - 1}, or ignore_index={ignore_index}); "
                   f"target shape {Y.shape}")

def _elu(x: Tensor, alpha: float, inv: float) -> Tensor:
  """x for x > 0, else alpha * expm1(x * inv) (elu: inv 1, celu: 1/alpha; NaN and -0.0 come through as in torch), with
  torch's derivative alpha * inv * exp(x * inv) for x <= 0 and 1 otherwise (so at 0 too). The graph's own one split
  the gradient at 0 between the two sides and was -inf or NaN where exp(x) is tiny (expm1's guards)."""
  neg = x <= 0
  y = neg.where(alpha * (neg.where(x, 0) * inv).expm1(), x)
  return with_derivative(y, x, lambda x: (x <= 0).where(alpha * inv * (x * inv).exp(), 1))

def _half_exp(x: Tensor) -> tuple[Tensor, Tensor]:
  """(|x| > 20, exp(|x|) / 2 computed as exp(|x|/2) / 2 * exp(|x|/2)): where exp(-|x|) is below rounding, sinh and cosh
  are ±exp(|x|) / 2, which is finite a little past where exp(|x|) overflows (float32: |x| up to 89.4, not 88.7)."""
  ax = x.abs()
  e = (ax * 0.5).exp()
  return ax > 20, e * 0.5 * e

def _bce_vjp(g: Tensor, x: Tensor, y: Tensor, needs: tuple[bool, bool]) -> tuple:
  """binary_crossentropy's gradients, torch's rules: (x - y) / max(x (1 - x), 1e-12) for the probability x, -logit(x)
  for the target y (±inf where x is exactly 0 or 1). The graph's own ones met 0 * inf = NaN there: the clamp's flat
  side times log's infinite slope."""
  gx = g * (x - y) / (x * (1 - x)).maximum(1e-12) if needs[0] else None
  gy = g * -(x / (1 - x)).log() if needs[1] else None
  return gx, gy

def _attention_probs(scores: Tensor) -> Tensor:
  """softmax over the last axis, but zeros (and a zero gradient) for a row that attends to nothing (all -inf), as torch
  gives since 2.5. Only the row-sized max and sum are guarded: such a row exps to zeros, and its sum is replaced by 1."""
  m = scores._shift(-1)
  if not is_tensor(m): return scores.softmax(-1)  # no keys
  dead = m == -math.inf
  e = (scores - dead.where(0, m)).exp()  # (the -inf max would make -inf - -inf = NaN)
  return e * dead.where(1, e.sum(-1, keepdim=True)).reciprocal()

def _fixed_point_pass(x: Tensor, w: list[list[float]], a: int, trail: tuple) -> Tensor:
  """One dim's linear pass over a uint8 image (x: int32 values) as torch's uint8 kernel computes it: the weights in
  fixed point with the most bits that keep the largest under 2^15, the sum rounded half up and clamped to 0..255 (the
  next pass reads the rounded values), so the results are torch's to the bit."""
  bits = next((b for b in range(22) if int(0.5 + max(map(max, w)) * (1 << (b + 1))) >= 1 << 15), 22)
  q = [[int(v * (1 << bits) + 0.5) for v in row] for row in w]
  o, i = len(w), len(w[0])
  s = (x.unsqueeze(a) * type(x)(q, device=x.device, dtype=dtypes.int32).reshape((o, i) + trail)).sum(a + 1, dtype=dtypes.int32)
  return ((s + (1 << (bits - 1))) >> bits).clip(0, 255)

class NNMixin(TensorMixin):
  # ---------------- softmax and friends
  def _shift(self: Tensor, axis) -> Tensor | float:
    """The max along axis, subtracted before exp to keep it in range. The result does not depend on it, so no gradient
    goes through it; an empty axis has no max (and needs no shift)."""
    if self.ndim and not all(self.shape[a] for a in self._axes(axis)): return 0.0
    return (self.max(axis, keepdim=True) if self.ndim else self).detach()
  def softmax(self: Tensor, axis: int = -1, dtype: DType | str | None = None, *, dim: int | None = None) -> Tensor:
    if dim is not None: axis = dim  # torch's spelling; the default axis=-1 is not a conflict
    x = self.cast(dtype) if dtype is not None else self._float()
    e = (x - x._shift(axis)).exp()
    # times the reciprocal: a division per element cost 8% of the row kernel (AVX-512), and torch's CPU results are
    # bit-equal to this form more often (55% of elements against 43%)
    return e * e.sum(axis, keepdim=True).reciprocal()
  def log_softmax(self: Tensor, axis: int = -1, dtype: DType | str | None = None, *, dim: int | None = None) -> Tensor:
    if dim is not None: axis = dim
    x = self.cast(dtype) if dtype is not None else self._float()
    m = x - x._shift(axis)
    return m - m.exp().sum(axis, keepdim=True).log()
  def logsumexp(self: Tensor, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    x = self._float()
    m = x._shift(axis)
    if is_tensor(m): m = (m.abs() == math.inf).where(0, m)  # all -inf (or an inf) must not give inf - inf = NaN
    out = (x - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.squeeze(self._axes(axis))
  def _pool(self: Tensor, k_: Sequence[int], stride: int | Sequence[int] = 1, dilation: int | Sequence[int] = 1) -> Tensor:
    """Sliding windows over the last len(k_) dims, a WINDOW view (index math only; its gradient is a sum of shifted
    copies): (..., *i) -> (..., *o, *k) where out[..., o, k] = in[..., o*stride + k*dilation]."""
    n = len(k_)
    if self.ndim < n: raise TensorError(f"pooling with a {n}-d window needs at least {n} dims, got shape {self.shape}")
    if any(isinstance(i, UOp) for i in self.shape[-n:]): raise TypeError("pooling or convolving over a symbolic (Variable) dim is not supported")
    s_, d_ = _tup(stride, n, "stride"), _tup(dilation, n, "dilation")
    i_ = self.shape[-n:]
    o_ = tuple((i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(i_, k_, s_, d_))
    if any(o <= 0 for o in o_) or any(k <= 0 for k in k_) or any(s <= 0 for s in s_) or any(d <= 0 for d in d_):
      raise TensorError(f"window {tuple(k_)} (stride {s_}, dilation {d_}) does not fit the input's spatial size {i_}")
    if all(s == k and d == 1 and i % k == 0 for i, k, s, d in zip(i_, k_, s_, d_)):
      # windows that tile the input exactly are a reshape: (..., o1*k1, o2*k2) -> (..., o1, o2, k1, k2), whose gradient
      # is a view too (no sum over shifted, gated copies)
      lead = self.ndim - n
      x = self.reshape(*self.shape[:lead], *[d for o, k in zip(o_, k_) for d in (o, k)])
      return x.permute(*range(lead), *(lead + 2 * j for j in range(n)), *(lead + 2 * j + 1 for j in range(n)))
    return type(self)(UOp(Ops.WINDOW, self.dtype, (self.uop,), (tuple(k_), s_, d_)))
  def _pool_pads(self: Tensor, k_, s_, d_, padding, ceil_mode: bool) -> tuple[list[tuple[int, int]], list[int]]:
    """(regular (before, after) pads per dim, extra after-padding that ceil_mode adds)."""
    n = len(k_)
    pads = _conv_pads(padding, k_, d_)
    extra = [0] * n
    if ceil_mode:
      for j, (i, k, s, d, (pb, pa)) in enumerate(zip(self.shape[-n:], k_, s_, d_, pads)):
        span = i + pb + pa - d * (k - 1) - 1
        o = -(-span // s) + 1
        if (o - 1) * s >= i + pb: o -= 1  # the last window must start inside the input or the left padding
        extra[j] = max(0, (o - 1) * s + d * (k - 1) + 1 - (i + pb + pa))
    return pads, extra
  def _pool_args(self: Tensor, kernel_size, stride, dilation):
    k_ = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    n = len(k_)
    s_ = k_ if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _tup(stride, n, "stride")
    return k_, s_, _tup(dilation, n, "dilation")
  def max_pool2d(self: Tensor, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False, return_indices: bool = False):
    """Max over sliding windows of the last len(kernel_size) dims (2 for an int). PyTorch semantics, incl. ceil_mode."""
    T = type(self)
    k_, s_, d_ = self._pool_args(kernel_size, stride, dilation)
    n = len(k_)
    pads, extra = self._pool_pads(k_, s_, d_, padding, ceil_mode)
    allp = tuple(None for _ in self.shape[:-n]) + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra))
    lo = dtypes.min(self.dtype)  # (-inf for floats; E4M3 has none: its lowest finite)
    win = self.pad(allp, value=lo)._pool(k_, s_, d_)
    out = win.max(tuple(range(-n, 0)))
    if not return_indices: return out
    # flat index (into the unpadded spatial dims) of the first max in each window, as torch returns it
    i_ = self.shape[-n:]
    idx = T.arange(prod(i_), device=self.device).reshape(i_).pad(tuple(p for p in allp if p is not None), value=-1)._pool(k_, s_, d_)
    K = prod(k_)
    wflat = win.reshape(win.shape[:-n] + (K,))
    first = wflat.argmax(-1)
    sel = first.unsqueeze(-1) == T.arange(K, device=self.device)
    ind = sel.where(idx.reshape(idx.shape[:-n] + (K,)), 0).sum(-1)
    return out, ind.cast(IDX)  # (int32, as every index result: the default int)
  def avg_pool2d(self: Tensor, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over sliding windows of the last len(kernel_size) dims. PyTorch semantics for padding, ceil_mode, count_include_pad."""
    T = type(self)
    k_, s_, d_ = self._pool_args(kernel_size, stride, dilation)
    n = len(k_)
    pads, extra = self._pool_pads(k_, s_, d_, padding, ceil_mode)
    lead = tuple(None for _ in self.shape[:-n])
    x = self._float()
    tot = x.pad(lead + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra)))._pool(k_, s_, d_).sum(tuple(range(-n, 0)))
    if divisor_override is not None: return tot / divisor_override
    if all(e == 0 for e in extra) and (count_include_pad or all(p == (0, 0) for p in pads)): return tot / prod(k_)
    # per-window divisor: count the window's cells that lie in the input (or in the regular padding if count_include_pad)
    ones = T.ones(self.shape[-n:], device=self.device, dtype=x.dtype)
    if count_include_pad: ones = ones.pad(tuple(pads), value=1.0).pad(tuple((0, e) for e in extra))
    else: ones = ones.pad(tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra)))
    return tot / ones._pool(k_, s_, d_).sum(tuple(range(-n, 0)))
  def _adaptive(self: Tensor, output_size, is_max: bool) -> Tensor:
    T = type(self)
    o_ = (output_size,) * 2 if isinstance(output_size, int) else tuple(output_size)
    n = len(o_)
    i_ = self.shape[-n:]
    o_ = tuple(i if o is None else o for o, i in zip(o_, i_))
    if all(i % o == 0 for i, o in zip(i_, o_)):
      k_ = tuple(i // o for i, o in zip(i_, o_))
      return self.max_pool2d(k_, k_) if is_max else self.avg_pool2d(k_, k_)
    # general sizes: window o covers [floor(o*i/O), ceil((o+1)*i/O)); apply one dim at a time with a window mask
    x = self if is_max else self._float()
    for j in range(n):
      a, i, o = x.ndim - n + j, i_[j], o_[j]
      rows = [[(oo * i) // o <= ii < -(-((oo + 1) * i) // o) for ii in range(i)] for oo in range(o)]
      mask = T(rows, device=self.device).reshape((o, i) + (1,) * (n - j - 1))
      xe = x.unsqueeze(a)
      if is_max: x = mask.where(xe, dtypes.min(x.dtype)).max(a + 1)
      else: x = mask.where(xe, 0.0).sum(a + 1) / T([sum(r) for r in rows], device=self.device, dtype=x.dtype).reshape((o,) + (1,) * (n - j - 1))
    return x
  def adaptive_avg_pool2d(self: Tensor, output_size) -> Tensor: return self._adaptive(output_size, False)
  def adaptive_max_pool2d(self: Tensor, output_size) -> Tensor: return self._adaptive(output_size, True)
  def max_unpool2d(self: Tensor, indices: Tensor, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None) -> Tensor:
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
    val = type(self).zeros(lead + (prod(out),), dtype=self.dtype, device=self.device).scatter(len(lead), idx, flat.detach())
    if not dtypes.is_float(self.dtype): return val.reshape(lead + out)
    # overlapping windows can pick one element twice: its copies all land on the same output, and, as in torch, each
    # copy gets that output's whole gradient (the adjoint is a gather). `total - total.detach()` is 0 but carries it.
    total = (idx.unsqueeze(-1) == _arange(prod(out), self)).where(flat.unsqueeze(-1), 0).sum(-2)
    return (val + total.isfinite().where(total - total.detach(), 0)).reshape(lead + out)
  def interpolate(self: Tensor, size=None, mode: str = "linear", align_corners: bool = False, scale_factor=None,
                  recompute_scale_factor: bool | None = None) -> Tensor:
    """Resize the last len(size) dims. mode: 'nearest', 'nearest-exact', 'linear' (also 'bilinear'/'trilinear').
    Index math follows PyTorch (float32 scales, half-pixel centres unless align_corners). Every dtype keeps its dtype
    with the nearest modes; integer tensors keep theirs with linear too (rounded, as torch does for uint8)."""
    T = type(self)
    if mode in ("bilinear", "trilinear"): mode = "linear"
    if mode not in ("nearest", "nearest-exact", "linear"): raise NotImplementedError(f"interpolate mode {mode!r} is not supported (use nearest, nearest-exact, linear)")
    if align_corners and mode != "linear": raise TensorError("align_corners only applies to linear interpolation")
    size, scales = _interp_size(self.shape, size, scale_factor, recompute_scale_factor)
    n = len(size)
    x = (self.cast(dtypes.int32) if self.dtype == dtypes.uint8 else self._float()) if mode == "linear" else self
    for j in reversed(range(n)):  # (the last dim first: torch's order, which the rounding of integer images shows)
      a, i, o = self.ndim - n + j, self.shape[self.ndim - n + j], size[j]
      # torch maps output to input coordinates by 1/scale_factor when one is given, by the sizes' ratio otherwise
      scale = _f32(_f32(float(i)) / _f32(float(o))) if scales[j] is None else scales[j]
      trail = (1,) * (n - j - 1)
      if mode.startswith("nearest"):
        if i == o and scale == 1.0: continue  # (a scale factor that keeps the size but is not 1 still moves pixels)
        off = 0.5 if mode == "nearest-exact" else 0.0
        src = [min(int(math.floor(_f32((oo + off) * scale))), i - 1) for oo in range(o)]
        mask = T([[s == ii for ii in range(i)] for s in src], device=self.device).reshape((o, i) + trail)
        x = mask.where(x.unsqueeze(a), 0).sum(a + 1).cast(x.dtype)
        continue
      if i == o: continue  # torch's linear modes copy a dim whose size is unchanged, whatever the scale factor
      w = [[0.0] * i for _ in range(o)]
      if align_corners: scale = _f32((i - 1) / (o - 1)) if o > 1 else 0.0  # from the sizes even with a scale factor, as torch
      for oo in range(o):
        src = _f32(scale * oo) if align_corners else max(_f32(_f32(scale * (oo + 0.5)) - 0.5), 0.0)
        i0 = min(int(src), i - 1)
        i1 = i0 + (1 if i0 < i - 1 else 0)
        l1 = _f32(src - i0)
        w[oo][i0] += _f32(1.0 - l1); w[oo][i1] += l1
      if self.dtype == dtypes.uint8: x = _fixed_point_pass(x, w, a, trail)
      else:
        x = (x.unsqueeze(a) * T(w, device=self.device, dtype=x.dtype).reshape((o, i) + trail)).sum(a + 1)
        # wider integer images stay integer too, rounded half up after each dim's pass
        if dtypes.is_int(self.dtype): x = (x + 0.5).floor().clip(dtypes.min(self.dtype), dtypes.max(self.dtype))
    return x.cast(self.dtype) if mode == "linear" and dtypes.is_int(self.dtype) else x
  def conv2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding=0, dtype=None) -> Tensor:
    """N-d convolution (cross-correlation, as torch): input (N, Cin, *spatial), weight (Cout, Cin/groups, *kernel).
    padding: int, per-dim tuple, 'same'/'valid', or a flat (left, right, top, bottom, ...) tuple as tinygrad."""
    unbatched = self.ndim == weight.ndim - 1
    x = self.unsqueeze(0) if unbatched else self
    if x.ndim != weight.ndim or x.ndim < 3:
      raise TensorError(f"conv: input shape {self.shape} and weight shape {weight.shape} need matching ranks (N, C, *spatial) and (Cout, Cin/groups, *kernel)")
    (bs, cin_all), (cout, cin), k_ = x.shape[:2], weight.shape[:2], weight.shape[2:]
    n = len(k_)
    if groups <= 0 or cin * groups != cin_all or cout % groups:
      raise TensorError(f"conv: input shape {self.shape} with {cin_all} channels does not match weight shape {weight.shape} with groups={groups} (needs Cin = {cin}*{groups} and Cout divisible by groups)")
    s_, d_ = _tup(stride, n, "stride"), _tup(dilation, n, "dilation")
    # an input computed by elementwise ops (the previous layer's bias and ReLU) is computed once into a buffer: fused,
    # the convolution would recompute each value for every kernel tap and output-channel tile that reads it
    if x.uop.base.op in GroupOp.Elementwise: x = x.contiguous()
    pads = _conv_pads(padding, k_, d_, s_)
    xp = x.pad(((0, 0), (0, 0), *pads))
    xw = xp._pool(k_, s_, d_)  # (bs, cin_all, *o, *k)
    o_, rcout = xw.shape[2:2 + n], cout // groups
    xw = xw.reshape(bs, groups, cin, *o_, *k_).permute(0, 1, *range(3, 3 + n), 2, *range(3 + n, 3 + 2 * n))  # (bs, g, *o, cin, *k)
    if _channels_last(Device[x.device].renderer, rcout, o_[-1]):
      # channels last: the output channels are the innermost loop, read from a (g, cin, *k, rcout) copy of the weight,
      # so the kernel is a matmul with whole SIMD vectors where an image row is too short for them (a 6x6 image made
      # 6-wide vectors: 4.4x slower), or where 64 or more channels fill a whole tile (ResNet's 56x56 layers: 1.3x).
      # Rows of one or two whole vectors with few channels stay channels first: the ops that read the output (bias,
      # ReLU, batchnorm) walk it by rows and gather from a channels-last one. Other rows leave lanes idle (AVX-512: 20
      # is 16 + 4) or, from 3 vectors (AVX2: 20 or 24 wide), fill the 16 registers with a 4-row tile's accumulators,
      # so gcc reloads the row for every FMA: MNIST's 32-channel 5x5 layers' step ran 1.4x faster channels last on
      # AVX2 (Zen 3), 1.15x on AVX-512 (a Xeon)
      wt = weight.reshape(groups, rcout, cin, *k_).permute(0, 2, *range(3, 3 + n), 1).contiguous()
      wt = wt.permute(0, 2 + n, 1, *range(2, 2 + n)).reshape(1, groups, *(1,) * n, rcout, cin, *k_)
      red = (xw.reshape(bs, groups, *o_, 1, cin, *k_) * wt).sum(tuple(range(-1 - n, 0)), dtype=dtype)  # (bs, g, *o, rcout)
      # its own buffer: fused into a single reader, it would be computed in that reader's channels-first loop order.
      # (Stored NCHW from this loop instead, lane by lane, it was no faster: see docs/performance.md, Convolutions)
      red = red.contiguous().permute(0, 1, 2 + n, *range(2, 2 + n))
    else:
      w = weight.reshape(1, groups, rcout, *(1,) * n, cin, *k_)
      red = (xw.reshape(bs, groups, 1, *o_, cin, *k_) * w).sum(tuple(range(-1 - n, 0)), dtype=dtype)  # (bs, g, rcout, *o)
    # a stride-1 conv padded alike on both sides, within the kernel's span, takes its input gradient for x itself: a
    # transposed conv with that padding. For the padded copy, the border computed was then cropped off (a 56x56 layer
    # computed 58x58) and the crop copied. So does a strided one (dilation 1), by phases of x (_input_grad_by_phases)
    direct = all(d == 1 for d in d_) if any(s != 1 for s in s_) else all(b == a <= d * (k - 1) for (b, a), d, k in zip(pads, d_, k_))
    out = with_gradient(red.reshape(bs, cout, *o_), (x if direct else xp, weight), _conv_vjp(red.uop, groups, s_, d_, pads if direct else None))
    if bias is not None: out = out + bias.reshape(1, cout, *(1,) * n)
    return out.squeeze(0) if unbatched else out
  def conv1d(self: Tensor, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding=0, dtype=None) -> Tensor:
    return self.conv2d(weight, bias, groups, stride, dilation, padding, dtype)
  def conv3d(self: Tensor, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding=0, dtype=None) -> Tensor:
    return self.conv2d(weight, bias, groups, stride, dilation, padding, dtype)
  def conv_transpose2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding=0, output_padding=0) -> Tensor:
    """N-d transposed convolution: input (N, Cin, *spatial), weight (Cin, Cout/groups, *kernel), PyTorch semantics."""
    unbatched = self.ndim == weight.ndim - 1
    x = self.unsqueeze(0) if unbatched else self
    if x.ndim != weight.ndim or x.ndim < 3: raise TensorError(f"conv_transpose: input shape {self.shape} and weight shape {weight.shape} need matching ranks")
    cin_all, rcout, k_ = weight.shape[0], weight.shape[1], weight.shape[2:]
    n = len(k_)
    if x.shape[1] != cin_all or cin_all % groups: raise TensorError(f"conv_transpose: input shape {self.shape} does not match weight shape {weight.shape} with groups={groups}")
    s_, d_ = _tup(stride, n, "stride"), _tup(dilation, n, "dilation")
    p_, op_ = _tup(padding, n, "padding"), _tup(output_padding, n, "output_padding")
    # insert s-1 zeros between input pixels
    if any(s > 1 for s in s_):
      lead, i_ = x.shape[:2], x.shape[2:]
      x = x.reshape(*lead, *flatten((i, 1) for i in i_)).pad(((0, 0), (0, 0), *flatten(((0, 0), (0, s - 1)) for s in s_)))
      x = x.reshape(*lead, *(i * s for i, s in zip(i_, s_))).shrink(((0, lead[0]), (0, lead[1]), *((0, (i - 1) * s + 1) for i, s in zip(i_, s_))))
    # then a plain conv with the flipped kernel, in/out channels swapped per group
    w = weight.reshape(groups, cin_all // groups, rcout, *k_).transpose(1, 2).reshape(groups * rcout, cin_all // groups, *k_).flip(*range(2, 2 + n))
    pads = [(d * (k - 1) - p, d * (k - 1) - p + op) for k, d, p, op in zip(k_, d_, p_, op_)]
    flat = tuple(flatten(pads[::-1]))
    out = x.conv2d(w, bias, groups=groups, dilation=d_, padding=flat)
    return out.squeeze(0) if unbatched else out
  def gelu(self: Tensor, approximate: str = "tanh") -> Tensor:
    """GELU; tanh approximation by default (as tinygrad), approximate='none' for the exact erf form (torch's default)."""
    x = self._float()
    if approximate == "none": return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())
    return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())
  def quick_gelu(self: Tensor) -> Tensor: return self * (self * 1.702).sigmoid()
  def silu(self: Tensor) -> Tensor: return self * self.sigmoid()
  def swish(self: Tensor) -> Tensor: return self.silu()
  # torch's slope at 0 (and for NaN) is neg_slope: the positive side is x > 0 only
  def leaky_relu(self: Tensor, neg_slope: float = 0.01) -> Tensor: return (self > 0).where(self, self * neg_slope)
  def elu(self: Tensor, alpha: float = 1.0) -> Tensor: return _elu(self._float(), alpha, 1.0)
  def celu(self: Tensor, alpha: float = 1.0) -> Tensor: return _elu(self._float(), alpha, 1 / alpha)
  def selu(self: Tensor, alpha: float = 1.6732632423543772, gamma: float = 1.0507009873554805) -> Tensor:
    return gamma * self.elu(alpha)
  def softplus(self: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    x = self._float()
    bx = x * beta
    soft = (bx.maximum(0) + (-bx.abs()).exp().log1p()) * (1 / beta)
    return (bx > threshold).where(x, soft)
  def softsign(self: Tensor) -> Tensor: return self / (1 + self.abs())
  def relu6(self: Tensor) -> Tensor: return self.hardtanh(0, 6)
  def hardswish(self: Tensor) -> Tensor: return self * (self + 3).relu6() * (1 / 6)
  def hardsigmoid(self: Tensor, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
    y = alpha * self + beta
    return ((y > 0) & (y < 1)).where(y, y.clip(0, 1).detach())  # torch: gradient strictly inside, none at the corners or for NaN
  def hardtanh(self: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    # unlike clamp, torch passes the gradient only strictly inside (min_val, max_val) (and for NaN)
    return (self <= min_val).where(min_val, (self >= max_val).where(max_val, self))
  def mish(self: Tensor) -> Tensor: return self * self.softplus().tanh()
  def logsigmoid(self: Tensor) -> Tensor: return -(-self).softplus()
  # each the other's derivative: the composed one (through expm1's guards) was NaN where the value overflows to ±inf
  def sinh(self: Tensor) -> Tensor:
    x = self._float()
    big, half = _half_exp(x)
    small = (x.expm1() - (-x).expm1()) / 2  # expm1 keeps small arguments exact
    return with_derivative(big.where((x < 0).where(-half, half), small), x, lambda x: x.cosh())
  def cosh(self: Tensor) -> Tensor:
    x = self._float()
    big, half = _half_exp(x)
    return with_derivative(big.where(half, (x.exp() + (-x).exp()) / 2), x, lambda x: x.sinh())
  def softmin(self: Tensor, axis: int = -1, dtype: DType | str | None = None, *, dim: int | None = None) -> Tensor:
    return (-self).softmax(axis, dtype, dim=dim)
  def glu(self: Tensor, dim: int = -1) -> Tensor:
    a, b = self.chunk(2, dim)
    return a * b.sigmoid()
  def leakyrelu(self: Tensor, neg_slope: float = 0.01) -> Tensor:
    """Older tinygrad spelling of leaky_relu."""
    return self.leaky_relu(neg_slope)
  def dropout(self: Tensor, p: float = 0.5) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p); identity unless Tensor.training."""
    T = type(self)
    if not 0 <= p <= 1: raise TensorError(f"dropout probability must be in [0, 1], got {p}")
    if not T.training or p == 0: return self
    if p == 1: return self * 0
    keep = T.rand(*self.shape, device=self.device) >= p
    return keep.where(self * (1 / (1 - p)), 0).cast(self.dtype)
  def layernorm(self: Tensor, axis=-1, eps: float = 1e-5) -> Tensor:
    """Normalise to zero mean and unit (biased) variance over axis (int or tuple); no affine."""
    x = self._float()
    y = x - x.mean(axis, keepdim=True)
    return y * (y * y).mean(axis, keepdim=True).add(eps).rsqrt()
  def batchnorm(self: Tensor, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor, axis=1) -> Tensor:
    """(x - mean) * invstd * weight + bias, with the 1-d parameters laid along axis (int or tuple of axes)."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % self.ndim for a in axes)
    shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
    x = self - mean.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    x = x * (invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
    return x + bias.reshape(shape) if bias is not None else x
  def rms_norm(self: Tensor, axis=-1, eps: float = 1e-6) -> Tensor:
    x = self._float()
    return x * (x * x).mean(axis, keepdim=True).add(eps).rsqrt()
  def rmsnorm(self: Tensor, axis=-1, eps: float = 1e-6) -> Tensor:
    """tinygrad's spelling of rms_norm."""
    return self.rms_norm(axis, eps)
  def normalize(self: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
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
  def one_hot(self: Tensor, num_classes: int = -1) -> Tensor:
    """(..., ) integer classes -> (..., num_classes) of 0/1 (int32; torch gives int64)."""
    T = type(self)
    if num_classes == -1: num_classes = int(self.max().item()) + 1
    return (self.unsqueeze(-1) == T.arange(num_classes, device=self.device)).cast(dtypes.int32)
  @staticmethod
  def _reduce_loss(loss: Tensor, reduction: str, denom: Tensor | None = None) -> Tensor:
    if reduction == "none": return loss
    if reduction == "sum": return loss.sum()
    if reduction == "mean": return loss.sum() / denom if denom is not None else loss.mean()
    raise TensorError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
  def _class_mask(self: Tensor, Y: Tensor, axis: int) -> Tensor:
    """Boolean mask shaped like self: True where the index along axis equals Y (Y has self's shape without axis)."""
    T = type(self)
    C = self.shape[axis]
    return Y.unsqueeze(axis) == T.arange(C, device=self.device).reshape((C,) + (1,) * (self.ndim - axis - 1))
  def nll_loss(self: Tensor, Y: Tensor, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood: self is log-probabilities (N, C, ...) or (C,), Y class indices (N, ...) or ()."""
    axis = 1 if self.ndim >= 2 else 0
    return self._nll(Y, axis, weight, ignore_index, reduction, 0.0)
  def _nll(self: Tensor, Y: Tensor, axis: int, weight, ignore_index: int, reduction: str, label_smoothing: float) -> Tensor:
    C = self.shape[axis]
    if Y.shape != self.shape[:axis] + self.shape[axis + 1:]: raise TensorError(f"class-index target shape {Y.shape} does not match input shape {self.shape} without its class dim {axis}")
    _check_targets(Y, C, ignore_index)
    valid = Y != ignore_index
    if 0 <= ignore_index < C: Y = valid.where(Y, -1)  # an ignored target that is also a class index must pick nothing
    hit = self._class_mask(Y, axis)
    wt = weight.reshape((C,) + (1,) * (self.ndim - axis - 1)) if weight is not None else None
    logp = self if wt is None else self * wt
    loss = -hit.where(logp, 0).sum(axis)  # -w[y] * logp[y], 0 where ignored
    # 'mean' divides by the summed weight of the targets that are not ignored (their count without weights), as torch
    wy = hit.where(wt.expand(self.shape), 0).sum(axis) if wt is not None else valid.cast(self.dtype)
    if label_smoothing: loss = (1 - label_smoothing) * loss + label_smoothing * valid.where(-logp.sum(axis) / C, 0)
    # targets that were not checked (lazy, or new ones in a TinyJit replay): an out-of-range class gives NaN (fused, free)
    loss = (valid & ((Y < 0) | (Y >= C))).where(math.nan, loss)
    return NNMixin._reduce_loss(loss, reduction, wy.sum())
  def cross_entropy(self: Tensor, Y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0, weight: Tensor | None = None, ignore_index: int = -100) -> Tensor:
    """torch.nn.functional.cross_entropy on logits self (N, C, ...) or (C,): Y is class indices or class probabilities."""
    axis = 1 if self.ndim >= 2 else 0
    logp = self.log_softmax(axis)
    if Y.shape != self.shape: return logp._nll(Y, axis, weight, ignore_index, reduction, label_smoothing)
    C = self.shape[axis]
    Y = Y._float()
    if label_smoothing: Y = Y * (1 - label_smoothing) + label_smoothing / C
    if weight is not None: logp = logp * weight.reshape((C,) + (1,) * (self.ndim - axis - 1))
    loss = -(logp * Y).sum(axis)
    return NNMixin._reduce_loss(loss, reduction)
  def sparse_categorical_crossentropy(self: Tensor, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0,
                                      reduction: str = "mean") -> Tensor:
    """Cross entropy with logits self (..., C) (classes last, as tinygrad) and integer targets Y (...)."""
    return self.log_softmax(-1)._nll(Y, self.ndim - 1, None, ignore_index, reduction, label_smoothing)
  def binary_crossentropy(self: Tensor, Y: Tensor, reduction: str = "mean") -> Tensor:
    """BCE on probabilities self; the logs are clamped at -100 as in torch, and the gradients are torch's (_bce_vjp)."""
    x, y = self._float()._broadcasted(Y)
    loss = -(y * x.log().maximum(-100) + (1 - y) * (1 - x).log().maximum(-100))
    return NNMixin._reduce_loss(with_gradient(loss, (x, y), _bce_vjp), reduction)
  def binary_crossentropy_logits(self: Tensor, Y: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """BCE on logits, computed stably: (1-y)*x + (1+(pw-1)*y) * (log1p(exp(-|x|)) + max(-x, 0))."""
    x = self._float()
    sp = (-x.abs()).exp().log1p() + (-x).maximum(0)  # softplus(-x) = -log(sigmoid(x))
    lw = 1 if pos_weight is None else 1 + (pos_weight - 1) * Y
    return NNMixin._reduce_loss((1 - Y) * x + lw * sp, reduction)
  def mse_loss(self: Tensor, Y: Tensor, reduction: str = "mean") -> Tensor: return NNMixin._reduce_loss((self - Y).square(), reduction)
  def l1_loss(self: Tensor, Y: Tensor, reduction: str = "mean") -> Tensor: return NNMixin._reduce_loss((self - Y).abs(), reduction)
  def scaled_dot_product_attention(self: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """softmax(q @ k^T * scale + mask) @ v with self as the query (..., L, E). attn_mask: bool (True = attend) or additive float.
    enable_gqa: key/value with fewer heads (dim -3) than the query are repeated, each head for query_heads // kv_heads query heads."""
    T = type(self)
    if is_causal and attn_mask is not None: raise TensorError("scaled_dot_product_attention: pass either attn_mask or is_causal, not both")
    if enable_gqa and self.ndim >= 3 and key.shape[-3] != self.shape[-3]:
      hq, hk = self.shape[-3], key.shape[-3]
      if hk == 0 or hq % hk or value.shape[-3] != hk:
        raise TensorError(f"scaled_dot_product_attention: {hq} query heads need a whole multiple of the key/value heads "
                         f"(key {key.shape}, value {value.shape})")
      key, value = key.repeat_interleave(hq // hk, -3), value.repeat_interleave(hq // hk, -3)
    L, S = self.shape[-2], key.shape[-2]
    q = self._float()
    scores = (q @ key.transpose(-1, -2)) * (scale if scale is not None else 1 / math.sqrt(self.shape[-1]))
    if is_causal: attn_mask = T.arange(L, device=self.device).reshape(L, 1) >= T.arange(S, device=self.device).reshape(1, S)
    if attn_mask is not None:
      scores = attn_mask.where(scores, -math.inf) if attn_mask.dtype == dtypes.bool else scores + attn_mask
    p = _attention_probs(scores)
    if dropout_p: p = p.dropout(dropout_p)
    return p @ value

  # ---------------- layers as a list of callables
  def sequential(self: Tensor, ll: list[Callable[[Tensor], Tensor]]) -> Tensor:
    """Apply each callable of `ll` in turn, each to the previous one's output (tinygrad's nn.Sequential)."""
    x = self
    for f in ll: x = f(x)
    return x
