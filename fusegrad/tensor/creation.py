"""Creating tensors: from constants (full, zeros, ones, arange, linspace, eye, empty), from random numbers (rand, randn,
randint, the initializers, multinomial, bernoulli, randperm) and from memory (from_blob).

Tensor inherits CreationMixin; the constructors are classmethods, so `Tensor.zeros(2, 3)` builds a Tensor. Random
numbers are counter-based: a hash of (seed, element counter) computed on the device (engine/rng.py holds the counter)."""
from __future__ import annotations
import ctypes, math, operator
from typing import TYPE_CHECKING, Any
from fusegrad.dtype import DType, dtypes, to_dtype, truncate
from fusegrad.device import Buffer, canonicalize
from fusegrad.helpers import DTypeError, TensorError, prod
from fusegrad.uop.ops import Ops, UOp, check_size, smax, sym_node
from fusegrad import buffers
from fusegrad.engine import rng
from fusegrad.tensor.common import IDX, TensorMixin, _check_numel, _checked_dtype
from fusegrad.tensor.indexing import _sort_indices

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

def _int_bound(v: Any, name: str) -> int:
  # an integral float (randint(high=1e3)) is taken as before; a fraction would silently move the range
  if isinstance(v, float) and v.is_integer(): return int(v)
  try: return operator.index(v)  # ints, numpy ints
  except TypeError: raise TypeError(f"randint's {name} must be an int, got {v!r}") from None

class CreationMixin(TensorMixin):
  # ---------------- building the graph of a new tensor (UOps; no Tensor yet)
  @staticmethod
  def _from_bytes(raw: bytes, dtype: DType, device: str, shape: tuple[int, ...]) -> UOp:
    size = prod(shape)
    buf = Buffer(device, size, dtype, raw)
    return UOp(Ops.RESHAPE, dtype, (buffers.new_buffer_uop(device, size, dtype, buf),), shape) if shape != (size,) else buffers.new_buffer_uop(device, size, dtype, buf)
  @staticmethod
  def _const(value: Any, dtype: DType, device: str, shape: tuple[int, ...]) -> UOp:
    c = UOp(Ops.CONST, dtype, (UOp.device_node(device),), truncate(dtype, value))
    if not shape: return c
    return sym_node(Ops.EXPAND, UOp(Ops.RESHAPE, dtype, (c,), (1,) * len(shape)), tuple(shape))

  # ---------------- creation
  @classmethod
  def empty(cls: type[Tensor], *shape, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    shape = cls._shape_arg(shape)
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    device = canonicalize(device)
    u = buffers.new_buffer_uop(device, prod(smax(s) for s in shape), dtype)
    return cls(sym_node(Ops.RESHAPE, u, shape) if shape != u.shape else u, **kwargs)
  @staticmethod
  def _shape_arg(shape: tuple) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)): shape = tuple(shape[0])
    for s in shape:
      if isinstance(s, UOp): check_size(s)  # a symbolic size: bound Variables (see uop.ops.Sym)
      elif not isinstance(s, int) or isinstance(s, bool): raise TypeError(f"shape entries must be ints, got {shape!r}")
      elif s < 0: raise TensorError(f"negative dimension {s} in shape {shape}")
    _check_numel(tuple(smax(s) for s in shape))
    return tuple(shape)
  @classmethod
  def full(cls: type[Tensor], shape: tuple[int, ...] | int, fill_value: Any, device: str | None = None, dtype: DType | str | None = None,
           **kwargs) -> Tensor:
    shape = cls._shape_arg((shape,) if isinstance(shape, (int, UOp)) else tuple(shape))
    dtype = _checked_dtype([fill_value], to_dtype(dtype) if dtype is not None else None)
    return cls(cls._const(fill_value, dtype, canonicalize(device), shape), **kwargs)
  @classmethod
  def zeros(cls: type[Tensor], *shape, **kwargs) -> Tensor: return cls.full(cls._shape_arg(shape), 0.0 if "dtype" not in kwargs else 0, **kwargs)
  @classmethod
  def ones(cls: type[Tensor], *shape, **kwargs) -> Tensor: return cls.full(cls._shape_arg(shape), 1.0 if "dtype" not in kwargs else 1, **kwargs)
  def full_like(self: Tensor, fill_value: Any, **kwargs) -> Tensor:
    return type(self).full(self.shape, fill_value, dtype=kwargs.pop("dtype", self.dtype), device=kwargs.pop("device", self.device), **kwargs)
  def zeros_like(self: Tensor, **kwargs) -> Tensor: return self.full_like(0, **kwargs)
  def ones_like(self: Tensor, **kwargs) -> Tensor: return self.full_like(1, **kwargs)
  def empty_like(self: Tensor, **kwargs) -> Tensor: return type(self).empty(self.shape, dtype=kwargs.pop("dtype", self.dtype), device=kwargs.pop("device", self.device), **kwargs)
  @classmethod
  def arange(cls: type[Tensor], start, stop=None, step=1, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    if stop is None: start, stop = 0, start
    if isinstance(stop, UOp) or isinstance(start, UOp):  # arange(n) for a symbolic n: the values up to its storage
      if isinstance(start, UOp) or start != 0 or step != 1: raise TypeError("arange with a symbolic size takes only stop: arange(n)")
      check_size(stop)
      return cls(sym_node(Ops.RESHAPE, cls.arange(stop.vmax, device=device, dtype=dtype).uop, (stop,)), **kwargs)
    if step == 0: raise TensorError("arange step must be nonzero")
    n = max(0, math.ceil((stop - start) / step))
    ends = [start, start + (n - 1) * step] if n else [start]
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float if any(isinstance(x, float) for x in (start, stop, step)) else None
    dtype = _checked_dtype(ends, dtype) if dtype is None or dtypes.is_int(dtype) else dtype
    iota = cls(UOp(Ops.IOTA, dtypes.int32 if n < 2**31 else dtypes.int64, (UOp(Ops.DEVICE, arg=canonicalize(device)),), n))
    if type(start) is int and start == 0 and type(step) is int and step == 1: return cls(iota.uop.cast(dtype), **kwargs)  # arange(n): the index itself
    out = (iota.cast(dtype) * step + start) if dtypes.is_int(dtype) or isinstance(step, float) or isinstance(start, float) else (iota * step + start).cast(dtype)
    return cls(out.cast(dtype).uop, **kwargs)
  @classmethod
  def linspace(cls: type[Tensor], start, stop, steps: int, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    if steps < 0: raise TensorError(f"linspace needs steps >= 0, got {steps}")
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if dtype == dtypes.bool: raise DTypeError("linspace does not take dtype bool (torch neither)")
    if steps == 1: return cls.full((1,), start, device=device, dtype=dtype, **kwargs)
    i = cls.arange(steps, device=device, dtype=dtypes.float32 if dtype != dtypes.float64 else dtypes.float64)
    step = (stop - start) / max(steps - 1, 1)
    # fill from both ends so the last value is exactly stop, as torch does
    half = steps // 2
    out = (i < half).where(start + step * i, stop - step * (steps - 1 - i))
    return cls(out.cast(dtype).uop, **kwargs)
  @classmethod
  def logspace(cls: type[Tensor], start, stop, steps: int, base: float = 10.0, device: str | None = None, dtype: DType | str | None = None,
               **kwargs) -> Tensor:
    """base ** linspace(start, stop, steps), as torch.logspace."""
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    x = cls.linspace(start, stop, steps, device=device, dtype=dtypes.float64 if dtype == dtypes.float64 else dtypes.float32)
    return cls((base ** x).cast(dtype).uop, **kwargs)
  @classmethod
  def eye(cls: type[Tensor], n: int, m: int | None = None, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    m = n if m is None else m
    if n < 0 or m < 0: raise TensorError(f"eye needs non-negative sizes, got {n}, {m}")
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    r = cls.arange(n, device=device).reshape(n, 1)
    c = cls.arange(m, device=device).reshape(1, m)
    return cls((r == c).cast(dtype).uop, **kwargs)

  # ---------------- random (counter-based: a hash of (seed, element counter), computed on the device)
  @staticmethod
  def manual_seed(seed: int = 0): rng.manual_seed(seed)
  @classmethod
  def _random_bits(cls: type[Tensor], shape: tuple[int, ...], device: str | None) -> Tensor:
    n = prod(shape)
    # (checked before the generator advances: a symbolic count left its counter an expression, and every later draw raised)
    if not isinstance(n, int): raise TypeError(f"random numbers need a shape of ints, got {shape}: draw the largest shape and shrink it")
    offset = rng.advance(n)
    ctr = UOp(Ops.IOTA, dtypes.int32 if n < 2**31 else dtypes.int64, (UOp(Ops.DEVICE, arg=canonicalize(device)),), n).cast(dtypes.uint32)
    # the low bits of the offset are a bound variable, so every call reuses the same compiled kernel
    ctr = ctr + rng.offset_var(offset).cast(dtypes.uint32)._broadcast_to(ctr.shape)
    # built on nodes (Tensor's ops build the same ones): a Tensor per op was a third of building a dropout mask
    def mix(x: UOp) -> UOp:  # "lowbias32" integer hash
      x = x ^ (x._bitwise(Ops.SHR, 16)); x = x * 0x7feb352d; x = x ^ (x._bitwise(Ops.SHR, 15)); x = x * 0x846ca68b
      return x ^ (x._bitwise(Ops.SHR, 16))
    key = (rng.seed() * 0x9E3779B9 + (offset >> 31) * 0x85EBCA6B) & 0xffffffff
    return cls(mix(mix(ctr ^ key) + 0x68E31DA4 ^ key).reshape(shape))
  @classmethod
  def rand(cls: type[Tensor], *shape, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    shape = cls._shape_arg(shape)
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dtype): raise DTypeError(f"rand needs a float dtype, got {dtype}")
    if dtype == dtypes.float64:  # 53 bits from two words (the first the high one): every double k * 2**-53 in [0, 1)
      w = cls._random_bits((2, *shape), device).cast(dtypes.uint64)
      return cls((((w[0] << 21) | (w[1] >> 11)).cast(dtypes.float64) * 2.0 ** -53).uop, **kwargs)
    bits = min(dtypes.finfo(dtype)[1] + 1, 24)  # values k * 2**-bits are exact in dtype, so the result stays < 1
    x = (cls._random_bits(shape, device) >> (32 - bits)).cast(dtypes.float32) * (2.0 ** -bits)
    return cls(x.cast(dtype).uop, **kwargs)
  def rand_like(self: Tensor, **kwargs) -> Tensor: return type(self).rand(self.shape, device=kwargs.pop("device", self.device), dtype=kwargs.pop("dtype", self.dtype), **kwargs)
  @classmethod
  def randn(cls: type[Tensor], *shape, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    shape = cls._shape_arg(shape)
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    u = cls.rand(2, *shape, device=device, dtype=dtypes.float32)
    x = (1 - u[0]).log().mul(-2).sqrt() * (u[1] * (2 * math.pi)).cos()  # Box-Muller; 1-u is in (0, 1]
    return cls(x.cast(dtype).uop, **kwargs)
  def randn_like(self: Tensor, **kwargs) -> Tensor: return type(self).randn(self.shape, device=kwargs.pop("device", self.device), dtype=kwargs.pop("dtype", self.dtype), **kwargs)
  @classmethod
  def randint(cls: type[Tensor], *shape, low: int = 0, high: int = 10, device: str | None = None, dtype: DType | str | None = None,
              **kwargs) -> Tensor:
    low, high = _int_bound(low, "low"), _int_bound(high, "high")
    if high <= low: raise TensorError(f"randint needs low < high, got low={low}, high={high}")
    if high - low > 2**64: raise TensorError(f"randint's range high - low must be at most 2**64, got {high - low}")
    dtype = to_dtype(dtype) if dtype is not None else dtypes.int32
    # low + k wraps in uint64; a negative low needs the int64 view of it, a high above 2**63 (uint64) the unsigned one
    x = cls._random_below(cls._shape_arg(shape), high - low, device) + (low & 0xffffffffffffffff)
    return cls((x.bitcast(dtypes.int64) if low < 0 else x).cast(dtype).uop, **kwargs)
  @classmethod
  def _random_below(cls: type[Tensor], shape: tuple[int, ...], r: int, device: str | None) -> Tensor:
    """uint64 integers uniform on [0, r), 1 <= r <= 2**64: floor(U * r / 2**(32k)) for U of k random words. Each outcome
    gets floor or ceil of 2**(32k) / r of the U's, a relative bias under r / 2**(32k): k = 2 (3 past 2**32) keeps it
    under 2**-32, where scaling a float (24 bits) left gaps and 32 bits alone would favour some values up to 2x."""
    k = 2 if r <= 2**32 else 3
    words = cls._random_bits((k, *shape), device).cast(dtypes.uint64)
    r1, r0 = r >> 32, r & 0xffffffff
    c = None  # floor(U' * r / 2**(32i)) for U' the i lowest words: below r, so below 2**64
    for i in reversed(range(k)):  # the lowest word first, so the first word drawn is the high one
      # (w * r + c) >> 32 without a 96-bit product: r and c split in 32-bit halves, each partial product fits 64 bits
      w = words[i]
      t = w * r0 if c is None else w * r0 + (c & 0xffffffff)
      c = t >> 32 if c is None else (t >> 32) + (c >> 32)
      if r1: c = c + w * r1
    return c
  @classmethod
  def uniform(cls: type[Tensor], *shape, low: float = 0.0, high: float = 1.0, dtype: DType | str | None = None, **kwargs) -> Tensor:
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    # float64 asks rand for its 53 bits; the other dtypes compute in float32, as before
    return ((high - low) * cls.rand(*shape, dtype=dtypes.float64 if dtype == dtypes.float64 else None, **kwargs) + low).cast(dtype)
  @classmethod
  def normal(cls: type[Tensor], *shape, mean: float = 0.0, std: float = 1.0, dtype: DType | str | None = None, **kwargs) -> Tensor:
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return (std * cls.randn(*shape, **kwargs) + mean).cast(dtype)
  @classmethod
  def scaled_uniform(cls: type[Tensor], *shape, **kwargs) -> Tensor:
    return cls.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(prod(cls._shape_arg(shape)) ** -0.5)
  @classmethod
  def glorot_uniform(cls: type[Tensor], *shape, **kwargs) -> Tensor:
    s = cls._shape_arg(shape)
    bound = (6 / (s[0] + prod(s[1:]))) ** 0.5
    return cls.uniform(*s, low=-bound, high=bound, **kwargs)
  xavier_uniform = glorot_uniform  # (torch's name for it)
  @classmethod
  def kaiming_uniform(cls: type[Tensor], *shape, a: float = 0.01, **kwargs) -> Tensor:
    s = cls._shape_arg(shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(s[1:]))
    return cls.uniform(*s, low=-bound, high=bound, **kwargs)
  @classmethod
  def kaiming_normal(cls: type[Tensor], *shape, a: float = 0.01, **kwargs) -> Tensor:
    s = cls._shape_arg(shape)
    std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(s[1:]))
    return cls.normal(*s, mean=0.0, std=std, **kwargs)
  def multinomial(self: Tensor, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """Sample indices from the (unnormalized) weights in each row of a 1-d or 2-d tensor; integer weights work as in
    tinygrad (torch takes only floats). With replacement: inverse-CDF sampling; without: the num_samples smallest
    exponential race times Exp(1)/p (distinct indices)."""
    T = type(self)
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
  def bernoulli(self: Tensor, p: float | None = None) -> Tensor:
    """0/1 samples (in self's dtype): each element is 1 with probability self (or the scalar p, with self's shape)."""
    T = type(self)
    if p is not None and not 0 <= p <= 1: raise RuntimeError(f"bernoulli(): p must be in [0, 1], got {p}")
    probs = self.detach() if p is None else T.full(self.shape, float(p), device=self.device)
    return (T.rand(self.shape, device=self.device) < probs).cast(self.dtype if dtypes.is_float(self.dtype) or p is not None else dtypes.default_float)
  @classmethod
  def randperm(cls: type[Tensor], n: int, device: str | None = None, dtype=None, **kwargs) -> Tensor:
    """A random permutation of 0..n-1: the order that sorts n random 32-bit keys (ties broken by position)."""
    if n < 0: raise RuntimeError(f"randperm(): n must be non-negative, got {n}")
    dt = to_dtype(dtype) if dtype is not None else IDX
    if n == 0: return cls.zeros(0, dtype=dt, device=device, **kwargs)
    keys = cls._random_bits((n,), device)
    return cls(_sort_indices(keys, False).cast(dt).uop, **kwargs)

  # ---------------- from memory
  @classmethod
  def from_url(cls: type[Tensor], url: str, gunzip: bool = False, **kwargs) -> Tensor:
    """tinygrad's: the bytes of the file at url (uint8, or kwargs' dtype) as a DISK tensor, from helpers.fetch, which
    downloads nothing: the file must be local or already in fetch's cache. gunzip=True decompresses it first."""
    from fusegrad.helpers import fetch
    return cls(fetch(url, gunzip=gunzip), **kwargs)
  @classmethod
  def from_uop(cls: type[Tensor], y: UOp, **kwargs) -> Tensor:
    """tinygrad's: a tensor of a scalar node: a bound Variable, a constant, or sums, differences and products of them."""
    kwargs = {**kwargs, "requires_grad": False}
    if y.op is Ops.BIND: return cls(y, **kwargs)
    if y.op is Ops.CONST: return cls(y.arg, **{"dtype": y.dtype, **kwargs})
    if y.op in (Ops.ADD, Ops.SUB, Ops.MUL):
      a, b = (cls.from_uop(s, **kwargs) for s in y.src)
      return a + b if y.op is Ops.ADD else a - b if y.op is Ops.SUB else a * b
    raise TensorError(f"from_uop: a {y.op.name} node is not a bound Variable, a constant, or a sum, difference or product of them")
  @classmethod
  def from_blob(cls: type[Tensor], ptr, shape, **kwargs) -> Tensor:
    """A tensor holding a copy of the memory at ptr (an int address, a ctypes pointer, or an object with
    __array_interface__ such as a numpy array): shape and dtype (default float32) say how much. tinygrad aliases the
    memory instead; fusegrad copies it, so the pointer need not outlive the call."""
    dtype = to_dtype(kwargs.pop("dtype", None) or dtypes.default_float)
    device = canonicalize(kwargs.pop("device", None))
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if hasattr(ptr, "__array_interface__"): addr = ptr.__array_interface__["data"][0]
    elif isinstance(ptr, int): addr = ptr
    else: addr = ctypes.cast(ptr, ctypes.c_void_p).value
    nbytes = prod(shape) * dtype.itemsize
    if nbytes and not addr: raise TensorError("from_blob: null pointer")
    return cls(cls._from_bytes(ctypes.string_at(addr, nbytes) if nbytes else b"", dtype, device, shape), **kwargs)
