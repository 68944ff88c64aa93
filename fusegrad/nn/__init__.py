"""Neural-network layers with PyTorch attribute names and default initialisation, called like functions.

Parameters are plain Tensor attributes (`weight`, `bias`, `running_mean`, ...), so a torch state dict maps onto them by name."""
from __future__ import annotations
import math
from typing import Sequence
from fusegrad.tensor import Tensor
from fusegrad.dtype import dtypes
from fusegrad.helpers import prod

def _ntuple(x: int | Sequence[int], n: int) -> tuple[int, ...]: return (x,) * n if isinstance(x, int) else tuple(x)
def _uniform(shape: tuple[int, ...], bound: float) -> Tensor: return Tensor.uniform(*shape, low=-bound, high=bound)

class Linear:
  """y = x @ weight.T + bias; weight (out_features, in_features) and bias drawn from U(-1/sqrt(in), 1/sqrt(in)) as torch."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    self.in_features, self.out_features = in_features, out_features
    bound = 1 / math.sqrt(in_features) if in_features else 0.0
    self.weight = _uniform((out_features, in_features), bound)
    self.bias = _uniform((out_features,), bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.weight.transpose(), self.bias)

class _ConvNd:
  def __init__(self, n: int, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1, bias: bool = True,
               padding_mode: str = "zeros"):
    if in_channels % groups or out_channels % groups: raise ValueError(f"in_channels {in_channels} and out_channels {out_channels} must be divisible by groups {groups}")
    if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
      raise ValueError(f"padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got {padding_mode!r}")
    self.in_channels, self.out_channels, self.groups, self.padding_mode = in_channels, out_channels, groups, padding_mode
    self.kernel_size, self.stride, self.dilation = _ntuple(kernel_size, n), _ntuple(stride, n), _ntuple(dilation, n)
    self.padding = padding if isinstance(padding, str) else _ntuple(padding, n) if isinstance(padding, int) else tuple(padding)
    if isinstance(padding, str) and padding not in ("same", "valid"): raise ValueError(f"padding must be 'same', 'valid' or numbers, got {padding!r}")
    if padding == "same" and any(s != 1 for s in self.stride): raise ValueError(f"padding='same' needs stride 1, got stride {stride} (torch too)")
    fan_in = in_channels // groups * prod(self.kernel_size)
    bound = 1 / math.sqrt(fan_in) if fan_in else 0.0
    self.weight = _uniform((out_channels, in_channels // groups, *self.kernel_size), bound)
    self.bias = _uniform((out_channels,), bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    padding = self.padding
    if self.padding_mode != "zeros" and padding != "valid":  # the input padded in that mode, then a convolution without
      x, padding = x.pad(self._flat_padding(), mode=self.padding_mode), 0
    return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=padding)

  def _flat_padding(self) -> list[int]:
    """The padding as pad()'s flat list (before and after each dim, the last dim first)."""
    if self.padding == "same":  # torch's split of the kernel's span: the odd element after
      spans = [d * (k - 1) for k, d in zip(self.kernel_size, self.dilation)]
      return [v for t in reversed(spans) for v in (t // 2, t - t // 2)]
    if len(self.padding) == len(self.kernel_size): return [v for p in reversed(self.padding) for v in (p, p)]
    return list(self.padding)  # (already per side)

class Conv1d(_ConvNd):
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros"):
    super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode)
class Conv2d(_ConvNd):
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros"):
    super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode)
class Conv3d(_ConvNd):
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros"):
    super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode)

class _ConvTransposeNd:
  def __init__(self, n: int, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1, bias: bool = True, dilation=1):
    if in_channels % groups or out_channels % groups: raise ValueError(f"in_channels {in_channels} and out_channels {out_channels} must be divisible by groups {groups}")
    self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
    self.kernel_size, self.stride, self.dilation = _ntuple(kernel_size, n), _ntuple(stride, n), _ntuple(dilation, n)
    self.padding, self.output_padding = _ntuple(padding, n), _ntuple(output_padding, n)
    # torch computes fan_in from weight dim 1, which is out_channels // groups for a transposed conv
    fan_in = out_channels // groups * prod(self.kernel_size)
    bound = 1 / math.sqrt(fan_in) if fan_in else 0.0
    self.weight = _uniform((in_channels, out_channels // groups, *self.kernel_size), bound)
    self.bias = _uniform((out_channels,), bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding,
                              output_padding=self.output_padding)

class ConvTranspose1d(_ConvTransposeNd):
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1, bias: bool = True, dilation=1):
    super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias, dilation)
class ConvTranspose2d(_ConvTransposeNd):
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1, bias: bool = True, dilation=1):
    super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias, dilation)

def _filled(shape, value: float) -> Tensor:
  """A parameter that starts as a constant, as a node of its own (its buffer made when it is first computed): equal lazy
  constants are one node, which backward() gives no gradient (tinygrad's layers get one for their norm weights without
  an optimizer holding them)."""
  return Tensor.full(shape, value).contiguous_leaf_(realize=False)

class BatchNorm:
  """Batch normalisation over dim 1 of (N, C, ...) inputs. Uses batch statistics (and updates running_mean/running_var in
  place with assign) while Tensor.training is True, the running statistics otherwise. momentum=None gives a cumulative
  average as in torch."""
  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True, momentum: float | None = 0.1):
    self.num_features, self.eps, self.affine, self.track_running_stats, self.momentum = sz, eps, affine, track_running_stats, momentum
    self.weight: Tensor | None = _filled(sz, 1.0) if affine else None
    self.bias: Tensor | None = _filled(sz, 0.0) if affine else None
    # buffers, not parameters: requires_grad=False keeps optimizers away from them
    self.running_mean: Tensor | None = Tensor.zeros(sz, requires_grad=False) if track_running_stats else None
    self.running_var: Tensor | None = Tensor.ones(sz, requires_grad=False) if track_running_stats else None
    self.num_batches_tracked: Tensor | None = Tensor.zeros((), dtype=dtypes.int64, requires_grad=False) if track_running_stats else None
  def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
    axes = tuple(i for i in range(x.ndim) if i != 1)
    return x.mean(axes), x.var(axes, correction=0)
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_features: raise ValueError(f"BatchNorm({self.num_features}) needs input (N, {self.num_features}, ...), got shape {x.shape}")
    use_batch = Tensor.training or self.running_mean is None
    if use_batch:
      mean, var = self.calc_stats(x)
      if Tensor.training and self.running_mean is not None and self.running_var is not None and self.num_batches_tracked is not None:
        # assign keeps the tensor objects (optimizers, TinyJit and state dicts hold them); the update stays lazy until realized
        n = x.numel() // x.shape[1]
        self.num_batches_tracked.assign((self.num_batches_tracked + 1).detach())
        m = self.momentum if self.momentum is not None else 1 / self.num_batches_tracked.cast(dtypes.float32)
        unbiased = var * (n / max(n - 1, 1)) if n > 1 else var * math.nan
        self.running_mean.assign(((1 - m) * self.running_mean + m * mean.detach()).detach())
        self.running_var.assign(((1 - m) * self.running_var + m * unbiased.detach()).detach())
    else: mean, var = self.running_mean, self.running_var
    assert mean is not None and var is not None
    return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())

BatchNorm1d = BatchNorm2d = BatchNorm3d = BatchNorm

class LayerNorm:
  """Normalise over the trailing normalized_shape dims, then weight * x + bias (elementwise affine)."""
  def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True):
    self.normalized_shape = _ntuple(normalized_shape, 1)
    self.axis, self.eps, self.elementwise_affine = tuple(-1 - i for i in range(len(self.normalized_shape))), eps, elementwise_affine
    self.weight: Tensor | None = _filled(self.normalized_shape, 1.0) if elementwise_affine else None
    self.bias: Tensor | None = _filled(self.normalized_shape, 0.0) if elementwise_affine and bias else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.shape[-len(self.normalized_shape):] != self.normalized_shape: raise ValueError(f"LayerNorm{self.normalized_shape} got input shape {x.shape}")
    x = x.layernorm(axis=self.axis, eps=self.eps)
    if self.weight is not None: x = x * self.weight
    return x + self.bias if self.bias is not None else x

class LayerNorm2d(LayerNorm):
  """LayerNorm over the channel dim of (N, C, H, W)."""
  def __call__(self, x: Tensor) -> Tensor: return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

def _channel_affine(x: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
  """x * weight + bias with one weight and bias per channel (dim 1); x unchanged without affine parameters."""
  if weight is None or bias is None: return x
  shape = (1, -1) + (1,) * (x.ndim - 2)
  return x * weight.reshape(shape) + bias.reshape(shape)

class GroupNorm:
  """Split the C channels of (N, C, ...) into num_groups groups and normalise each group; per-channel affine."""
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    if num_channels % num_groups: raise ValueError(f"num_channels {num_channels} must be divisible by num_groups {num_groups}")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight: Tensor | None = _filled(num_channels, 1.0) if affine else None
    self.bias: Tensor | None = _filled(num_channels, 0.0) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_channels: raise ValueError(f"GroupNorm({self.num_groups}, {self.num_channels}) got input shape {x.shape}")
    x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
    return _channel_affine(x, self.weight, self.bias)

class InstanceNorm:
  """Normalise each (sample, channel) over its spatial dims; per-channel affine (on by default, as tinygrad)."""
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
    self.num_features, self.eps = num_features, eps
    self.weight: Tensor | None = _filled(num_features, 1.0) if affine else None
    self.bias: Tensor | None = _filled(num_features, 0.0) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 3 or x.shape[1] != self.num_features: raise ValueError(f"InstanceNorm({self.num_features}) needs input (N, {self.num_features}, ...), got shape {x.shape}")
    x = x.reshape(x.shape[0], self.num_features, -1).layernorm(eps=self.eps).reshape(x.shape)
    return _channel_affine(x, self.weight, self.bias)

class InstanceNorm1d(InstanceNorm):
  """torch's defaults: no affine parameters unless asked."""
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = False): super().__init__(num_features, eps, affine)
InstanceNorm2d = InstanceNorm3d = InstanceNorm1d

class RMSNorm:
  """x / sqrt(mean(x^2 over the trailing dims) + eps) * weight."""
  def __init__(self, dim: int | Sequence[int], eps: float = 1e-6, elementwise_affine: bool = True):
    self.normalized_shape = _ntuple(dim, 1)
    self.eps = eps
    self.weight: Tensor | None = _filled(self.normalized_shape, 1.0) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    x = x.rms_norm(tuple(-1 - i for i in range(len(self.normalized_shape))), self.eps)
    return x * self.weight if self.weight is not None else x

class Embedding:
  """Lookup rows of weight (vocab_size, embed_size) by integer index. The weight starts as tinygrad's does, Glorot
  uniform U(-b, b) with b = sqrt(6 / (vocab_size + embed_size)) (torch draws N(0, 1); load a torch state dict to match)."""
  def __init__(self, vocab_size: int, embed_size: int):
    if vocab_size <= 0 or embed_size <= 0: raise ValueError(f"Embedding needs positive sizes, got vocab_size={vocab_size}, embed_size={embed_size}")
    self.vocab_sz, self.embed_sz = vocab_size, embed_size
    self.weight = Tensor.glorot_uniform(vocab_size, embed_size)
  def __call__(self, idx: Tensor) -> Tensor:
    if dtypes.is_float(idx.dtype): raise TypeError(f"Embedding indices must be integers, got {idx.dtype}")
    if hasattr(Tensor, "gather"):  # an indexed load: O(tokens * embed_size)
      flat = idx.reshape(-1, 1).expand(idx.numel(), self.embed_sz)
      return self.weight.gather(0, flat).reshape(*idx.shape, self.embed_sz)
    hit = idx.unsqueeze(-1) == Tensor.arange(self.vocab_sz, device=idx.device)  # one-hot select: O(tokens * vocab * embed_size)
    return hit.unsqueeze(-1).where(self.weight, 0).sum(-2)

class LSTMCell:
  """One LSTM step (tinygrad's nn.LSTMCell): gates = x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh, split
  into input, forget, cell and output gates in that order (torch's layout, so torch weights load by name).
  Weights start U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) and biases at zero, as in tinygrad (torch draws the biases
  from the same uniform). Call with x (batch, input_size) and hc=(h, c), each (batch, hidden_size), or hc=None for zeros;
  returns the new (h, c). An unbatched x (input_size,) with 1-D h and c also works, as in torch."""
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    if input_size <= 0 or hidden_size <= 0: raise ValueError(f"LSTMCell needs positive sizes, got input_size={input_size}, hidden_size={hidden_size}")
    self.input_size, self.hidden_size = input_size, hidden_size
    bound = 1.0 / math.sqrt(hidden_size)
    self.weight_ih = _uniform((hidden_size * 4, input_size), bound)
    self.weight_hh = _uniform((hidden_size * 4, hidden_size), bound)
    self.bias_ih: Tensor | None = _filled(hidden_size * 4, 0.0) if bias else None
    self.bias_hh: Tensor | None = _filled(hidden_size * 4, 0.0) if bias else None
  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    if x.ndim == 1:  # unbatched: run as a batch of one
      h, c = self(x.unsqueeze(0), None if hc is None else (hc[0].unsqueeze(0), hc[1].unsqueeze(0)))
      return h.squeeze(0), c.squeeze(0)
    if x.ndim != 2 or x.shape[1] != self.input_size:
      raise ValueError(f"LSTMCell({self.input_size}, {self.hidden_size}) needs x of shape (batch, {self.input_size}), got {x.shape}")
    if hc is None: hc = (Tensor.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device),) * 2
    want = (x.shape[0], self.hidden_size)
    if len(hc) != 2 or hc[0].shape != want or hc[1].shape != want:
      raise ValueError(f"LSTMCell hc must be (h, c), each of shape {want}, got {[tuple(t.shape) for t in hc]}")
    gates = x.linear(self.weight_ih.T, self.bias_ih) + hc[0].linear(self.weight_hh.T, self.bias_hh)
    i, f, g, o = gates.chunk(4, dim=1)
    c = f.sigmoid() * hc[1] + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    # contiguous: a recurrent loop reads h and c many steps later; materialising them keeps each step's graph small
    return h.contiguous(), c.contiguous()

__all__ = ["Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "BatchNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "LayerNorm", "LayerNorm2d", "GroupNorm", "InstanceNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "RMSNorm", "Embedding",
           "LSTMCell"]

from fusegrad.nn import optim, state  # noqa: E402, F401  (tinygrad exposes these as attributes of nn)

def __getattr__(name: str):
  # nn.datasets too, imported on first use (as `from fusegrad.nn.datasets import mnist` does)
  if name == "datasets":
    import importlib
    return importlib.import_module("fusegrad.nn.datasets")
  raise AttributeError(f"module 'fusegrad.nn' has no attribute {name!r}")
