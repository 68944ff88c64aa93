"""Elementwise math: casting and bitcasting, unary functions, arithmetic with broadcasting and PyTorch's type
promotion, comparisons, bitwise and logical ops, the Python operators (in-place ones included), and the float
functions composed from them (atan, asinh, logaddexp, copysign, isclose ...).

Tensor inherits ElementwiseMixin."""
from __future__ import annotations
import math
from functools import partial
from typing import TYPE_CHECKING, Any
from fusegrad import buffers
from fusegrad.dtype import LOW_FLOATS, DType, dtypes, result_dtype, to_dtype, truncate, category
from fusegrad.gradient import with_derivative
from fusegrad.helpers import DTypeError, TensorError
from fusegrad.uop.ops import _FLOAT_DTYPES, DERIVATIVE, Ops, UOp, _elementwise, promote_types, wide_dtype
from fusegrad.tensor.common import TensorMixin, is_tensor, _checked_dtype, _shrink_dim

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

def _fmath(x: Tensor, fn) -> Tensor:
  """Run fn in the tensor's float dtype; ints become the default float; half types compute in float32 and round back."""
  dt = x.dtype if dtypes.is_float(x.dtype) else dtypes.default_float
  if dt in LOW_FLOATS: return fn(x.cast(dtypes.float32)).cast(dt)
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

def _expm1(x: Tensor) -> Tensor:
  """exp(x) - 1 on a float tensor, with the derivative exp(x) as its own rule (torch's expm1(x) + 1, unrounded): the
  quotient's own is NaN where u == 1, and the unselected branch's 0 * inf would leak into the gradient."""
  # |x| < ln 2: (u - 1) * x / log(u), u = exp(x), cancels the rounding of u, and u - 1 is exact there (u in (0.5, 2),
  # Sterbenz). Elsewhere exp(x) - 1 loses at most a bit (u / |u - 1| <= 2) and stays right where the quotient did not:
  # (u - 1) * x overflowed for 84 < x < 88.7 (float32) and log(u) of a denormal u was off below -87
  u = x.exp()
  small, one = x.abs() < _LN2, u == 1
  safe = (small & one.logical_not()).where(u, 2.0)
  near = one.where(x, (safe - 1) * x / safe.log())  # u == 1: x itself (-0.0 included)
  return with_derivative(small.where(near, u - 1), x, lambda x: x.exp())

def _signbit(x: Tensor) -> Tensor:
  """True for negative values including -0.0 (1/-0.0 is -inf)."""
  return (x < 0) | ((x == 0) & ((1 / (x == 0).where(x, 1)) < 0))

def _bound(tinygrad_kw, torch_kw, name: str):
  """clip's bound given under tinygrad's name (min_), torch's (min) or neither; both is ambiguous."""
  if torch_kw is None: return tinygrad_kw
  if tinygrad_kw is not None: raise TypeError(f"clip got both {name}_= and {name}=; pass one")
  return torch_kw

def _clamp_vjp(lo, hi, g: UOp, x: UOp, needs) -> tuple:
  """torch.clamp's gradient for constant bounds: g where lo <= x <= hi (bounds included), none elsewhere."""
  inside = x >= lo if hi is None else x <= hi if lo is None else (x >= lo) & (x <= hi)
  return (inside.where(g, 0),)

def _fast_binary(self: Tensor, op: Ops, x, reverse: bool = False) -> Tensor | None:
  """self op x through OpBuilder._fast_alu when x is a Python number or a tensor of self's class (eager code's commonest
  operands), else None. (fusegrad.native replaces it with its C version.)"""
  if type(x) is type(self): x = x._uop
  return None if (u := self._uop._fast_alu(op, x, reverse)) is None else type(self)(u)

class ElementwiseMixin(TensorMixin):
  # ---------------- building blocks: the nodes come from UOp's builders (OpBuilder, uop/ops.py), which the derivative
  # rules use too; Tensor turns its arguments into what they take and wraps the result
  def _wrap(self: Tensor, u: UOp) -> Tensor:
    """u as a tensor of self's class; self itself when the op changed nothing (u is self's node), as torch's no-ops."""
    return self if u is self.uop else type(self)(u)
  def _operand(self: Tensor, x: Any) -> UOp | bool | int | float:
    """x as OpBuilder takes an operand of self: a Python number as it is (a weak scalar), a Tensor as its node (on
    self's device), a numpy or torch scalar as its number, other data (lists, arrays) as a tensor on self's device."""
    if isinstance(x, (bool, int, float)): return x
    if is_tensor(x):
      if x.device != self.device and None not in (x.device, self.device):
        raise RuntimeError(f"tensors are on different devices: {self.device} and {x.device}; move one with .to()")
      return x.uop
    if hasattr(x, "item") and getattr(x, "ndim", 1) == 0 and isinstance(v := x.item(), (bool, int, float)): return v
    t = type(self)(x, device=self.device)
    return t.uop.cast(result_dtype(self.dtype, 0.0))  # data promotes as a float scalar would
  def _to_tensor(self: Tensor, x: Any, dtype: DType | None = None) -> Tensor:
    if is_tensor(x): return x
    if not isinstance(x, (bool, int, float)):
      if hasattr(x, "item") and getattr(x, "ndim", 1) == 0: x = x.item()
      else: return type(self)(x, device=self.device)
    return type(self)(UOp.tensor_const(x, dtype or result_dtype(self.dtype, x), self.device, ()))
  def _broadcasted(self: Tensor, y: Any, reverse: bool = False) -> tuple[Tensor, Tensor]:
    """(self, y) promoted to one dtype and broadcast to one shape, as the binary ops pair them; reverse: (y, self)."""
    a, b = self.uop._broadcasted(self._operand(y), reverse)
    return type(self)(a), type(self)(b)

  # ---------------- casting
  def cast(self: Tensor, dtype: DType | str) -> Tensor:
    return self._wrap(self.uop.cast(to_dtype(dtype)))
  def bitcast(self: Tensor, dtype: DType | str) -> Tensor:
    dtype = to_dtype(dtype)
    if dtype.itemsize != self.dtype.itemsize: return self._bitcast_resize(dtype)
    return self if self.dtype == dtype else type(self)(UOp(Ops.BITCAST, dtype, (self.uop,)))
  def float(self: Tensor) -> Tensor: return self.cast(dtypes.float32)
  def half(self: Tensor) -> Tensor: return self.cast(dtypes.float16)
  def double(self: Tensor) -> Tensor: return self.cast(dtypes.float64)
  def bfloat16(self: Tensor) -> Tensor: return self.cast(dtypes.bfloat16)
  def int(self: Tensor) -> Tensor: return self.cast(dtypes.int32)
  def long(self: Tensor) -> Tensor: return self.cast(dtypes.int64)
  def short(self: Tensor) -> Tensor: return self.cast(dtypes.int16)
  def char(self: Tensor) -> Tensor: return self.cast(dtypes.int8)
  def byte(self: Tensor) -> Tensor: return self.cast(dtypes.uint8)
  def bool(self: Tensor) -> Tensor: return self.cast(dtypes.bool)
  def type(self: Tensor, dtype) -> Tensor: return self.cast(dtype)
  def _bitcast_resize(self: Tensor, dtype) -> Tensor:
    """Bitcast to a dtype of another size (little-endian, as tinygrad and numpy's view): the last dim is regrouped,
    e.g. (..., 4n) uint8 -> (..., n) float32, or (..., n) int32 -> (..., 4n) uint8. Composed from shifts, masks and
    same-size bitcasts."""
    dt = to_dtype(dtype)
    ns, os_ = dt.itemsize, self.dtype.itemsize
    if ns == os_: return self.bitcast(dt)
    if self.ndim == 0 or (self.shape[-1] * os_) % ns:
      raise TensorError(f"bitcast {self.dtype} -> {dt}: the last dim of {self.shape} must hold whole {dt} elements")
    shape = self.shape[:-1] + (self.shape[-1] * os_ // ns,)
    if self.device.startswith("DISK") and (view := buffers.buffer_view(self.uop)) is not None:  # a file's bytes: a view of them
      return type(self)(buffers.view_uop(bytes_ := buffers.buffer_of(view), 0, bytes_.nbytes // ns, dt)).reshape(shape)
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
    out = type(self).stack(*lanes, dim=-1).reshape(shape)
    return out if dt == uint[ns] else out.bitcast(dt)

  # ---------------- elementwise
  def _float(self: Tensor) -> Tensor: return self._wrap(self.uop._float())
  def neg(self: Tensor) -> Tensor: return type(self)(self.uop.neg())
  def exp(self: Tensor) -> Tensor: return type(self)(self.uop.exp())
  def exp2(self: Tensor) -> Tensor: return type(self)(self.uop.exp2())
  def log(self: Tensor) -> Tensor: return type(self)(self.uop.log())
  def log2(self: Tensor) -> Tensor: return type(self)(self.uop.log2())
  def log10(self: Tensor) -> Tensor: return self.log2() * (1 / math.log2(10))
  def log1p(self: Tensor) -> Tensor:
    # log(u) * x / (u - 1) with u = 1 + x rounded cancels the rounding of u, so tiny x keep full precision
    x = self._float()
    u = x + 1
    one = u == 1
    return (x == math.inf).where(x, one.where(x, u.log() * (x / one.where(1, u - 1))))
  def expm1(self: Tensor) -> Tensor: return _fmath(self, _expm1)
  def sin(self: Tensor) -> Tensor: return type(self)(self.uop.sin())
  def cos(self: Tensor) -> Tensor: return type(self)(self.uop.cos())
  def tan(self: Tensor) -> Tensor: return type(self)(self.uop.tan())
  def sqrt(self: Tensor) -> Tensor: return type(self)(self.uop.sqrt())
  def rsqrt(self: Tensor) -> Tensor: return self.sqrt().reciprocal()
  def reciprocal(self: Tensor) -> Tensor: return type(self)(self.uop.reciprocal())
  def tanh(self: Tensor) -> Tensor: return type(self)(self.uop.tanh())
  def erf(self: Tensor) -> Tensor: return type(self)(self.uop.erf())
  def abs(self: Tensor) -> Tensor: return self._wrap(self.uop.abs())
  def trunc(self: Tensor) -> Tensor: return self._wrap(self.uop.trunc())
  def floor(self: Tensor) -> Tensor: return self._wrap(self.uop.floor())
  def ceil(self: Tensor) -> Tensor: return self._wrap(self.uop.ceil())
  def round(self: Tensor, decimals: int = 0) -> Tensor:
    """Half to even; with decimals, at that many places after the point (negative: before it), as torch computes it."""
    if not decimals: return self._wrap(self.uop.round())
    if not dtypes.is_float(self.dtype): raise DTypeError(f"round(decimals={decimals}) needs a float tensor, got {self.dtype} (torch too)")
    scale = 10.0 ** abs(decimals)
    return (self * scale).round() / scale if decimals > 0 else (self / scale).round() * scale
  def square(self: Tensor) -> Tensor: return type(self)(self.uop.square())
  def sign(self: Tensor) -> Tensor: return self._wrap(self.uop.sign())
  def relu(self: Tensor) -> Tensor: return type(self)(self.uop.relu())
  def sigmoid(self: Tensor) -> Tensor: return type(self)(self.uop.sigmoid())
  def logical_not(self: Tensor) -> Tensor: return type(self)(self.uop.logical_not())
  def isnan(self: Tensor) -> Tensor: return self != self
  def isinf(self: Tensor, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    if not dtypes.is_float(self.dtype) or not (detect_positive or detect_negative): return self.full_like(False, dtype=dtypes.bool)
    if detect_positive and detect_negative: return self.abs() == math.inf
    return self == (math.inf if detect_positive else -math.inf)
  def isfinite(self: Tensor) -> Tensor: return (self.isinf() | self.isnan()).logical_not()
  def _scaled(self: Tensor, x, alpha) -> Tensor:
    """x * alpha for add/sub's alpha=, as torch: alpha takes the result's dtype (bool: truth), and a float alpha with
    integer operands raises."""
    x = self._to_tensor(x)
    dt = promote_types(self, x)
    if not dtypes.is_float(dt) and isinstance(alpha, float):
      raise RuntimeError(f"alpha={alpha}: for integral input tensors, alpha must not be a floating point number")
    return x * bool(alpha) if dt == dtypes.bool else x * alpha
  def add(self: Tensor, x, reverse: bool = False, alpha=None) -> Tensor:
    # (reverse: tinygrad's signature; addition commutes, bool's "or" too. torch's alpha is keyword-only: a number in its
    # place was taken for alpha before reverse existed, so it is refused rather than ignored)
    if not isinstance(reverse, bool): raise TypeError(f"add(x, reverse): reverse must be a bool, got {reverse!r}; pass torch's alpha by keyword")
    if alpha is not None: x = self._scaled(x, alpha)
    return type(self)(self.uop.add(self._operand(x)))
  def sub(self: Tensor, x, reverse: bool = False, alpha=None) -> Tensor:
    if alpha is not None: x = self._scaled(x, alpha)
    return type(self)(self.uop.sub(self._operand(x), reverse))
  def mul(self: Tensor, x, reverse: bool = False) -> Tensor: return type(self)(self.uop.mul(self._operand(x), reverse))
  def div(self: Tensor, x, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    return type(self)(self.uop.div(self._operand(x), reverse, rounding_mode))
  def idiv(self: Tensor, x, reverse: bool = False) -> Tensor:
    """tinygrad's integer division: rounds toward zero (C's). `//` and floor_divide round down, as Python's and torch's."""
    if (out := self.div(x, reverse, rounding_mode="trunc")).dtype == dtypes.bool: raise DTypeError("integer division of bool tensors is not supported")
    return out
  def mod(self: Tensor, x, reverse: bool = False) -> Tensor: return type(self)(self.uop.mod(self._operand(x), reverse))
  def fmod(self: Tensor, x) -> Tensor: return type(self)(self.uop.fmod(self._operand(x)))
  def pow(self: Tensor, x, reverse: bool = False) -> Tensor: return type(self)(self.uop.pow(self._operand(x), reverse))
  def maximum(self: Tensor, x) -> Tensor: return type(self)(self.uop.maximum(self._operand(x)))
  def minimum(self: Tensor, x) -> Tensor: return type(self)(self.uop.minimum(self._operand(x)))
  def where(self: Tensor, x, y) -> Tensor:
    # the values pair up as a binary op's operands (one converts the other); two Python numbers make a tensor of the first
    if not is_tensor(x) and not is_tensor(y): x = type(self)(x, device=self.device)
    x, y = (x.uop, x._operand(y)) if is_tensor(x) else (y._operand(x), y.uop)
    return type(self)(self.uop.where(x, y))
  def clip(self: Tensor, min_=None, max_=None, *, min=None, max=None) -> Tensor:
    """Bound the values (NaN passes through). Bounds are numbers or tensors, positional or by tinygrad's keywords (min_=,
    max_=) or torch's (min=, max=)."""
    min_, max_ = _bound(min_, min, "min"), _bound(max_, max, "max")
    if min_ is None and max_ is None: raise TensorError("clip needs at least one of min or max")
    if not is_tensor(min_) and not is_tensor(max_):
      # constant bounds: torch.clamp's value, x < lo ? lo : x (NaN and -0.0 pass through), then the same against hi, and
      # its gradient, x's where lo <= x <= hi. Built with where, not maximum/minimum: x.maximum(lo) builds max(x, lo) too,
      # and that shared node would take this gradient rule in place of maximum's (ties split 0.5/0.5)
      if min_ is not None: min_ = self._operand(min_)  # (numpy scalars as numbers)
      if max_ is not None: max_ = self._operand(max_)
      if dtypes.is_int(self.dtype): _checked_dtype([b for b in (min_, max_) if type(b) is int], self.dtype)  # raises as torch: no wrap
      if any(b is not None and b != b for b in (min_, max_)) and dtypes.is_float(self.dtype):  # a NaN bound: NaN, as torch
        return self * 0 + math.nan  # (and a zero gradient, as torch's)
      x = self.uop  # built on nodes, gradient rule included: this runs for every clamp of an eager program
      if (dtype := x.dtype) in _FLOAT_DTYPES and x.vshape is (shape := x.shape):
        # a float tensor keeps its dtype: the nodes below, with each bound's constant made once
        out, device = x, x.device
        if min_ is not None:
          lo = UOp.tensor_const(min_, dtype, device, shape)
          out = _elementwise(Ops.WHERE, dtype, (_elementwise(Ops.CMPLT, dtypes.bool, (out, lo), shape, device), lo, out), shape, device)
        if max_ is not None:
          hi = UOp.tensor_const(max_, dtype, device, shape)
          out = _elementwise(Ops.WHERE, dtype, (_elementwise(Ops.CMPLT, dtypes.bool, (hi, out), shape, device), hi, out), shape, device)
      else:
        out = x if min_ is None else (x < min_).where(min_, x)
        if max_ is not None: out = (out > max_).where(max_, out)
      if out.dtype in _FLOAT_DTYPES: out.__dict__[DERIVATIVE] = ((x,), partial(_clamp_vjp, min_, max_))
      return type(self)(out)
    ref = self if min_ is None else self.maximum(min_)
    ref = ref if max_ is None else ref.minimum(max_)  # the value (NaN stays NaN), in the promoted dtype and broadcast shape
    if not dtypes.is_float(ref.dtype): return ref
    # the gradient is torch.clamp's, selected with where so an inf/NaN upstream gradient never reaches an input that was not
    # chosen: x where min_ <= x <= max_ (bounds included), max_ where x > max_ or max_ < min_, min_ where x < min_ < max_
    x, out = self.cast(ref.dtype)._broadcast_to(ref.shape), ref.detach()
    lo = None if min_ is None else x._broadcasted(min_)[1]
    hi = None if max_ is None else x._broadcasted(max_)[1]
    if hi is None: return (x >= lo).where(x, (x < lo).where(lo, out))
    if lo is None: return (x <= hi).where(x, (x > hi).where(hi, out))
    return ((x >= lo) & (x <= hi)).where(x, ((x > hi) | ((hi < lo) & (x == x))).where(hi, ((x < lo) & (lo < hi)).where(lo, out)))
  clamp = clip
  def lerp(self: Tensor, end, weight) -> Tensor:
    """torch's two forms: from self for |weight| < 0.5, from end otherwise (so weight 1 gives end exactly)."""
    diff = end - self
    if not is_tensor(weight):  # the weight and 1 - weight rounded as torch's kernel does, in its float32 (or float64) math
      math_dt = wide_dtype(diff.dtype) if dtypes.is_float(diff.dtype) else dtypes.default_float
      w = truncate(math_dt, weight)
      return self + diff * w if abs(w) < 0.5 else end - diff * truncate(math_dt, 1 - w)
    return (weight.abs() < 0.5).where(self + diff * weight, end - diff * (1 - weight))
  def __lt__(self: Tensor, x) -> Tensor:
    return t if (t := _fast_binary(self, Ops.CMPLT, x)) is not None else type(self)(self.uop.__lt__(self._operand(x)))
  def __gt__(self: Tensor, x) -> Tensor:
    return t if (t := _fast_binary(self, Ops.CMPLT, x, True)) is not None else type(self)(self.uop.__gt__(self._operand(x)))
  def __le__(self: Tensor, x) -> Tensor: return type(self)(self.uop.__le__(self._operand(x)))
  def __ge__(self: Tensor, x) -> Tensor: return type(self)(self.uop.__ge__(self._operand(x)))
  def __eq__(self: Tensor, x) -> Tensor: return type(self)(self.uop.eq(self._operand(x)))  # type: ignore[override]
  def __ne__(self: Tensor, x) -> Tensor: return type(self)(self.uop.ne(self._operand(x)))  # type: ignore[override]
  def eq(self: Tensor, x) -> Tensor: return self == x
  def ne(self: Tensor, x) -> Tensor: return self != x
  def lt(self: Tensor, x) -> Tensor: return self < x
  def le(self: Tensor, x) -> Tensor: return self <= x
  def gt(self: Tensor, x) -> Tensor: return self > x
  def ge(self: Tensor, x) -> Tensor: return self >= x
  def _bitwise(self: Tensor, op: Ops, x, reverse: bool = False) -> Tensor: return type(self)(self.uop._bitwise(op, self._operand(x), reverse))
  def bitwise_and(self: Tensor, x, reverse: bool = False) -> Tensor: return self._bitwise(Ops.AND, x, reverse)
  def bitwise_or(self: Tensor, x, reverse: bool = False) -> Tensor: return self._bitwise(Ops.OR, x, reverse)
  def bitwise_xor(self: Tensor, x, reverse: bool = False) -> Tensor: return self._bitwise(Ops.XOR, x, reverse)
  def bitwise_not(self: Tensor) -> Tensor:
    if dtypes.is_float(self.dtype): raise DTypeError(f"bitwise not needs integer or bool tensors, got {self.dtype}")
    return self.logical_not() if self.dtype == dtypes.bool else self ^ -1 if not dtypes.is_unsigned(self.dtype) else self ^ dtypes.max(self.dtype)
  def lshift(self: Tensor, x, reverse: bool = False) -> Tensor: return self._bitwise(Ops.SHL, x, reverse)
  def rshift(self: Tensor, x, reverse: bool = False) -> Tensor: return self._bitwise(Ops.SHR, x, reverse)
  bitwise_left_shift, bitwise_right_shift = lshift, rshift
  # more torch spellings
  def floor_divide(self: Tensor, x) -> Tensor: return self // x
  def remainder(self: Tensor, x) -> Tensor: return self.mod(x)
  def true_divide(self: Tensor, x) -> Tensor: return self.div(x)
  def clamp_min(self: Tensor, min) -> Tensor: return self.clip(min, None)
  def clamp_max(self: Tensor, max) -> Tensor: return self.clip(None, max)
  def logical_and(self: Tensor, x) -> Tensor: return self.bool() & self._to_tensor(x).bool()
  def logical_or(self: Tensor, x) -> Tensor: return self.bool() | self._to_tensor(x).bool()
  def logical_xor(self: Tensor, x) -> Tensor: return self.bool() ^ self._to_tensor(x).bool()
  # tinygrad spells the bitwise-not dunder and a few aliases differently; keep both spellings available
  xor = bitwise_xor
  __neg__ = neg
  def __add__(self: Tensor, x): return t if (t := _fast_binary(self, Ops.ADD, x)) is not None else self.add(x)
  def __radd__(self: Tensor, x): return t if (t := _fast_binary(self, Ops.ADD, x)) is not None else self.add(x)
  def __sub__(self: Tensor, x): return t if (t := _fast_binary(self, Ops.SUB, x)) is not None else self.sub(x)
  def __rsub__(self: Tensor, x): return t if (t := _fast_binary(self, Ops.SUB, x, True)) is not None else self.sub(x, reverse=True)
  def __mul__(self: Tensor, x): return t if (t := _fast_binary(self, Ops.MUL, x)) is not None else self.mul(x)
  def __rmul__(self: Tensor, x): return t if (t := _fast_binary(self, Ops.MUL, x, True)) is not None else self.mul(x, reverse=True)
  def __truediv__(self: Tensor, x): return t if (t := _fast_binary(self, Ops.FDIV, x)) is not None else self.div(x)
  def __rtruediv__(self: Tensor, x): return t if (t := _fast_binary(self, Ops.FDIV, x, True)) is not None else self.div(x, reverse=True)
  def __floordiv__(self: Tensor, x): return type(self)(self.uop.idiv(self._operand(x)))
  def __rfloordiv__(self: Tensor, x): return type(self)(self.uop.idiv(self._operand(x), True))
  def __mod__(self: Tensor, x): return self.mod(x)
  def __rmod__(self: Tensor, x): return self.mod(x, reverse=True)
  def __pow__(self: Tensor, x): return self.pow(x)
  def __rpow__(self: Tensor, x): return self.pow(x, reverse=True)
  def __matmul__(self: Tensor, x): return self.matmul(x)
  def __rmatmul__(self: Tensor, x): return self._to_tensor(x).matmul(self)
  def __and__(self: Tensor, x): return self._bitwise(Ops.AND, x)
  def __rand__(self: Tensor, x): return self._bitwise(Ops.AND, x, True)
  def __or__(self: Tensor, x): return self._bitwise(Ops.OR, x)
  def __ror__(self: Tensor, x): return self._bitwise(Ops.OR, x, True)
  def __xor__(self: Tensor, x): return self._bitwise(Ops.XOR, x)
  def __rxor__(self: Tensor, x): return self._bitwise(Ops.XOR, x, True)
  def __lshift__(self: Tensor, x): return self._bitwise(Ops.SHL, x)
  def __rshift__(self: Tensor, x): return self._bitwise(Ops.SHR, x)
  def __rlshift__(self: Tensor, x): return self._bitwise(Ops.SHL, x, True)
  def __rrshift__(self: Tensor, x): return self._bitwise(Ops.SHR, x, True)
  def __invert__(self: Tensor): return self.bitwise_not()
  # in place, as in torch and tinygrad: the tensor (and views of it) keep their identity and see the new value
  def __iadd__(self: Tensor, x): return self._inplace(self.add(x))
  def __isub__(self: Tensor, x): return self._inplace(self.sub(x))
  def __imul__(self: Tensor, x): return self._inplace(self.mul(x))
  def __itruediv__(self: Tensor, x): return self._inplace(self.div(x))
  def __ifloordiv__(self: Tensor, x): return self._inplace(self // x)
  def __imod__(self: Tensor, x): return self._inplace(self.mod(x))
  def __ipow__(self: Tensor, x): return self._inplace(self.pow(x))
  def __iand__(self: Tensor, x): return self._inplace(self.bitwise_and(x))
  def __ior__(self: Tensor, x): return self._inplace(self.bitwise_or(x))
  def __ixor__(self: Tensor, x): return self._inplace(self.bitwise_xor(x))
  def __ilshift__(self: Tensor, x): return self._inplace(self.lshift(x))
  def __irshift__(self: Tensor, x): return self._inplace(self.rshift(x))
  def __imatmul__(self: Tensor, x): return self._inplace(self.matmul(x))
  def _inplace(self: Tensor, result: Tensor) -> Tensor:
    """torch's rules for `t op= x`: the result must fit t's dtype without changing kind (int /= 2 raises, not truncates),
    and a leaf that requires grad is not modified in place outside no_grad."""
    if category(result.dtype) > category(self.dtype):
      raise RuntimeError(f"result type {result.dtype} can't be cast to the desired output type {self.dtype} of an in-place operation")
    if self._requires_grad and not type(self).no_grad:
      raise RuntimeError("a leaf tensor that requires grad cannot be modified in place; use assign(), or `with Tensor.inference_mode():`")
    return self.assign(result)
  def __abs__(self: Tensor): return self.abs()

  # ---------------- inverse trig, hyperbolic and other float math
  # inverse trig and hyperbolic functions: float results (ints become the default float), half types computed in float32
  def atan(self: Tensor) -> Tensor: return _fmath(self, _atan)
  arctan = atan
  # asin/acos take torch's derivatives ±rsqrt(1 - x*x): the graph's own is NaN at ±1 (where torch's is ±inf)
  def asin(self: Tensor) -> Tensor:
    return _fmath(self, lambda x: with_derivative(_atan(x / ((1 - x) * (1 + x)).sqrt()), x, lambda x: (1 - x * x).rsqrt()))
  arcsin = asin
  def acos(self: Tensor) -> Tensor:
    return _fmath(self, lambda x: with_derivative(2 * _atan(((1 - x) / (1 + x)).sqrt()), x, lambda x: -(1 - x * x).rsqrt()))
  arccos = acos
  def atan2(self: Tensor, other) -> Tensor:
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
  def asinh(self: Tensor) -> Tensor:
    def f(x: Tensor) -> Tensor:
      s = _sgn(x)
      a = x * s
      big = a > 2.0 ** 28
      sa = big.where(1, a)
      small = _log1p(sa + sa * sa / (1 + (1 + sa * sa).sqrt()))
      # torch's derivative rsqrt(1 + x*x): the graph's own is NaN at 0 (the sign constant meets |x|'s kink)
      return with_derivative(s * big.where(a.log() + _LN2, small), x, lambda x: (1 + x * x).rsqrt())
    return _fmath(self, f)
  arcsinh = asinh
  def acosh(self: Tensor) -> Tensor:
    def f(x: Tensor) -> Tensor:
      big = x > 2.0 ** 28
      sx = big.where(2, x)
      t = sx - 1
      # torch's derivative rsqrt(x*x - 1) (inf at ±1, finite below -1 where the value is NaN): the graph's own one is NaN at 1
      return with_derivative(big.where(x.log() + _LN2, _log1p(t + (t * (sx + 1)).sqrt())), x, lambda x: (x * x - 1).rsqrt())
    return _fmath(self, f)
  arccosh = acosh
  def atanh(self: Tensor) -> Tensor:
    # torch's derivative 1/(1 - x*x): ±inf at ±1 and finite outside [-1, 1], where the graph's own one is NaN
    return _fmath(self, lambda x: with_derivative(0.5 * (_log1p(x) - _log1p(-x)), x, lambda x: 1 / (1 - x * x)))
  arctanh = atanh
  def logaddexp(self: Tensor, other) -> Tensor:
    """log(exp(self) + exp(other)) without overflow: max + log1p(exp(-|a - b|))."""
    a, b = self._broadcasted(other)
    def f(a: Tensor) -> Tensor:
      bb = b.cast(a.dtype)
      d = a - bb
      d = d.isnan().where(0, d)  # inf - inf: both equal
      return a.maximum(bb) + _log1p((-d.abs()).exp())
    return _fmath(a, f)
  def logaddexp2(self: Tensor, other) -> Tensor:
    a, b = self._broadcasted(other)
    return _fmath(a, lambda x: (x * _LN2).logaddexp(b.cast(x.dtype) * _LN2) * (1 / _LN2))
  def copysign(self: Tensor, other) -> Tensor:
    """|self| with the sign bit of other (so -0.0 counts as negative); float result."""
    a, b = self._broadcasted(other)
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    mag = _signbit(a).where(-a, a)  # |a| with a +0.0 for -0.0 (a * sign(a) kept -0.0, so copysign(-0.0, -1) gave +0.0)
    # torch's derivative: result / a, 0 where a == 0 (so NaN for NaN and inf a); other gets none. The closure must not hold
    # the result (it would keep its own registry key alive): it rebuilds it, the same hash-consed node, from the nodes of
    # b and mag (Tensors would stay in the live-tensor registry for as long as the graph lives: see nn.py's _conv_vjp)
    b_node, mag_node = b.uop, mag.uop
    def dydx(a: Tensor) -> Tensor:
      out = _signbit(type(a)(b_node)).where(-type(a)(mag_node), type(a)(mag_node))
      return (a == 0).where(0, out.detach() / a)
    return with_derivative(_signbit(b).where(-mag, mag), a, dydx)
  def signbit(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype): return self < 0 if self.dtype != dtypes.bool else self.full_like(False)
    return _signbit(self)
  def frac(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype): raise DTypeError(f"frac() needs a float tensor, got {self.dtype}")
    return self - self.trunc()
  def isposinf(self: Tensor) -> Tensor: return self == math.inf if dtypes.is_float(self.dtype) else self.full_like(False, dtype=dtypes.bool)
  def isneginf(self: Tensor) -> Tensor: return self == -math.inf if dtypes.is_float(self.dtype) else self.full_like(False, dtype=dtypes.bool)
  def nan_to_num(self: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """NaN -> nan, +inf -> posinf (default: the dtype's largest finite value), -inf -> neginf (default: its lowest)."""
    if not dtypes.is_float(self.dtype): return self
    big = {dtypes.fp8e4m3: 448.0, dtypes.fp8e5m2: 57344.0, dtypes.float16: 65504.0, dtypes.bfloat16: 3.3895313892515355e38, dtypes.float32: 3.4028234663852886e38, dtypes.float64: 1.7976931348623157e308}[self.dtype]
    x = self.isnan().where(self.full_like(nan), self)
    x = (self == math.inf).where(self.full_like(big if posinf is None else posinf), x)
    return (self == -math.inf).where(self.full_like(-big if neginf is None else neginf), x)

  # ---------------- closeness
  def isclose(self: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """|self - other| <= atol + rtol * |other| elementwise (torch.isclose): infinities are close only to an equal
    infinity, NaN only to NaN and only with equal_nan. Ints and bools compare in float64. Bool result, no gradient."""
    a, b = self._broadcasted(other)
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.float64), b.cast(dtypes.float64)
    a, b = a.detach(), b.detach()
    close = (a == b) | (a.isfinite() & b.isfinite() & ((a - b).abs() <= atol + rtol * b.abs()))
    return close | (a.isnan() & b.isnan()) if equal_nan else close
  def allclose(self: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """True when every element is close (isclose); a Python bool, as torch.allclose (realizes)."""
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())
