"""Elementwise math: casting and bitcasting, unary functions, arithmetic with broadcasting and PyTorch's type
promotion, comparisons, bitwise and logical ops, the Python operators (in-place ones included), and the float
functions composed from them (atan, asinh, logaddexp, copysign, isclose ...).

Tensor inherits ElementwiseMixin."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Any
from fusegrad.dtype import DType, dtypes, result_dtype, to_dtype, category
from fusegrad.gradient import with_derivative
from fusegrad.helpers import TensorError
from fusegrad.uop.ops import GroupOp, Ops, UOp, broadcast_shape
from fusegrad.tensor.common import TensorMixin, is_tensor, _shrink_dim, promote_types

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

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

def _signbit(x: Tensor) -> Tensor:
  """True for negative values including -0.0 (1/-0.0 is -inf)."""
  return (x < 0) | ((x == 0) & ((1 / (x == 0).where(x, 1)) < 0))

class ElementwiseMixin(TensorMixin):
  # ---------------- building blocks
  def _alu(self: Tensor, op: Ops, *others: Tensor) -> Tensor:
    dt = dtypes.bool if op in GroupOp.Comparison else (others[0].dtype if op is Ops.WHERE else self.dtype)
    return type(self)(UOp(op, dt, (self.uop, *[o.uop for o in others])))
  def _to_tensor(self: Tensor, x: Any, dtype: DType | None = None) -> Tensor:
    if is_tensor(x): return x
    if not isinstance(x, (bool, int, float)):
      if hasattr(x, "item") and getattr(x, "ndim", 1) == 0: x = x.item()
      else: return type(self)(x, device=self.device)
    return type(self)(type(self)._const(x, dtype or result_dtype(self.dtype, x), self.device, ()))
  def _scalar(self: Tensor, value: bool | int | float, dtype: DType) -> Tensor:
    """A Python scalar as a constant of self's shape and device: the view _broadcast_to makes of a 0-d constant."""
    return type(self)(UOp.tensor_const(value, dtype, self.device, self.shape))
  def _broadcasted(self: Tensor, y: Any, reverse: bool = False, match_dtype: bool = True) -> tuple[Tensor, Tensor]:
    x: Tensor = self
    if isinstance(y, (bool, int, float)):
      # fast path, same result as the general one below: the constant's dtype comes from result_dtype, and promoting a
      # tensor with a constant of that dtype gives that dtype again; x's shape is already the broadcast shape
      dt = result_dtype(x.dtype, y)
      if match_dtype: x = x.cast(dt)
      c = x._scalar(y, dt)
      return (c, x) if reverse else (x, c)
    if is_tensor(y) and y.shape == x.shape and y.device == x.device and (y.dtype is x.dtype or not match_dtype):
      return (y, x) if reverse else (x, y)  # fast path: nothing to promote or broadcast
    if not is_tensor(y):
      y = x._to_tensor(y)
      if match_dtype and y.dtype != (dt := result_dtype(x.dtype, y.uop.arg if y.uop.op is Ops.CONST else 0.0)): y = y.cast(dt)
    if x.device != y.device and None not in (x.device, y.device): raise RuntimeError(f"tensors are on different devices: {x.device} and {y.device}; move one with .to()")
    if reverse: x, y = y, x
    if match_dtype:
      out = promote_types(x, y)
      x, y = x.cast(out), y.cast(out)
    shape = broadcast_shape(x.shape, y.shape)
    return x._broadcast_to(shape), y._broadcast_to(shape)

  # ---------------- casting
  def cast(self: Tensor, dtype: DType | str) -> Tensor:
    dtype = to_dtype(dtype)
    return self if self.dtype == dtype else type(self)(UOp(Ops.CAST, dtype, (self.uop,)))
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
    out = type(self).stack(*lanes, dim=-1).reshape(self.shape[:-1] + (self.shape[-1] * r,))
    return out if dt == uint[ns] else out.bitcast(dt)

  # ---------------- elementwise
  def _float(self: Tensor) -> Tensor: return self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)
  def _unary(self: Tensor, op: Ops) -> Tensor: return self._float()._alu(op)
  def neg(self: Tensor) -> Tensor:
    if self.dtype == dtypes.bool: raise TypeError("negation of a bool tensor is not supported; use logical_not()")
    return self._alu(Ops.NEG)
  def exp(self: Tensor) -> Tensor: return self._unary(Ops.EXP)
  def exp2(self: Tensor) -> Tensor: return self._unary(Ops.EXP2)
  def log(self: Tensor) -> Tensor: return self._unary(Ops.LOG)
  def log2(self: Tensor) -> Tensor: return self._unary(Ops.LOG2)
  def log10(self: Tensor) -> Tensor: return self.log2() * (1 / math.log2(10))
  def log1p(self: Tensor) -> Tensor:
    # log(u) * x / (u - 1) with u = 1 + x rounded cancels the rounding of u, so tiny x keep full precision
    x = self._float()
    u = x + 1
    one = u == 1
    return (x == math.inf).where(x, one.where(x, u.log() * (x / one.where(1, u - 1))))
  def expm1(self: Tensor) -> Tensor:
    # the same trick for exp: (u - 1) * x / log(u) with u = exp(x)
    x = self._float()
    u = x.exp()
    one, zero, inf = u == 1, u == 0, u == math.inf
    safe = (one | zero | inf).where(2.0, u)
    return one.where(x, zero.where(-1.0, inf.where(math.inf, (safe - 1) * x / safe.log())))
  def sin(self: Tensor) -> Tensor: return self._unary(Ops.SIN)
  def cos(self: Tensor) -> Tensor: return self._unary(Ops.COS)
  def tan(self: Tensor) -> Tensor: return self._unary(Ops.TAN)
  def sqrt(self: Tensor) -> Tensor: return self._unary(Ops.SQRT)
  def rsqrt(self: Tensor) -> Tensor: return self.sqrt().reciprocal()
  def reciprocal(self: Tensor) -> Tensor: return self._unary(Ops.RECIP)
  def tanh(self: Tensor) -> Tensor: return self._unary(Ops.TANH)
  def erf(self: Tensor) -> Tensor: return self._unary(Ops.ERF)
  def abs(self: Tensor) -> Tensor: return self._alu(Ops.ABS) if self.dtype != dtypes.bool and not dtypes.is_unsigned(self.dtype) else self
  def trunc(self: Tensor) -> Tensor: return self._alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self
  def floor(self: Tensor) -> Tensor: return self._alu(Ops.FLOOR) if dtypes.is_float(self.dtype) else self
  def ceil(self: Tensor) -> Tensor: return self._alu(Ops.CEIL) if dtypes.is_float(self.dtype) else self
  def round(self: Tensor) -> Tensor: return self._alu(Ops.RINT) if dtypes.is_float(self.dtype) else self
  def square(self: Tensor) -> Tensor: return self * self
  def sign(self: Tensor) -> Tensor:
    if self.dtype == dtypes.bool: return self
    return (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)  # sign(nan) is 0, as in torch
  def relu(self: Tensor) -> Tensor: return ((self < 0) | (self == 0)).where(0, self)
  def sigmoid(self: Tensor) -> Tensor: return self._unary(Ops.SIGMOID)
  def logical_not(self: Tensor) -> Tensor: return self.ne(True) if self.dtype == dtypes.bool else self == 0
  def isnan(self: Tensor) -> Tensor: return self != self
  def isinf(self: Tensor, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    if not dtypes.is_float(self.dtype) or not (detect_positive or detect_negative): return self.full_like(False, dtype=dtypes.bool)
    if detect_positive and detect_negative: return self.abs() == math.inf
    return self == (math.inf if detect_positive else -math.inf)
  def isfinite(self: Tensor) -> Tensor: return (self.isinf() | self.isnan()).logical_not()
  def add(self: Tensor, x, alpha=None) -> Tensor:
    if alpha is not None: x = self._to_tensor(x) * alpha
    a, b = self._broadcasted(x)
    return a._alu(Ops.OR, b) if a.dtype == dtypes.bool else a._alu(Ops.ADD, b)
  def sub(self: Tensor, x, reverse: bool = False, alpha=None) -> Tensor:
    if alpha is not None: x = self._to_tensor(x) * alpha
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: raise TypeError("subtraction of bool tensors is not supported; use logical_xor() or ^")
    return a._alu(Ops.SUB, b)
  def mul(self: Tensor, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._alu(Ops.AND, b) if a.dtype == dtypes.bool else a._alu(Ops.MUL, b)
  def div(self: Tensor, x, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if rounding_mode == "trunc":
      return a._alu(Ops.IDIV, b) if dtypes.is_int(a.dtype) else a._alu(Ops.FDIV, b).trunc()
    if rounding_mode == "floor": return a._floordiv(b)
    if rounding_mode is not None: raise TensorError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    return a._alu(Ops.FDIV, b)
  def _floordiv(self: Tensor, b: Tensor) -> Tensor:
    if dtypes.is_float(self.dtype): return self._alu(Ops.FDIV, b).floor()
    if self.dtype == dtypes.bool: raise TypeError("floor division of bool tensors is not supported")
    q = self._alu(Ops.IDIV, b)
    if dtypes.is_unsigned(self.dtype): return q
    # C truncates toward zero; floor division rounds down when the signs differ and there is a remainder
    fix = (self._alu(Ops.MOD, b) != 0) & ((self < 0) != (b < 0))
    return q - fix.cast(self.dtype)
  def idiv(self: Tensor, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._floordiv(b)
  def mod(self: Tensor, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: raise TypeError("remainder of bool tensors is not supported")
    r = a._alu(Ops.MOD, b)
    if dtypes.is_unsigned(a.dtype): return r
    return ((r != 0) & ((r < 0) != (b < 0))).where(r + b, r)  # Python/PyTorch sign: the divisor's
  def fmod(self: Tensor, x) -> Tensor:
    a, b = self._broadcasted(x)
    return a._alu(Ops.MOD, b)
  def pow(self: Tensor, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: return a | b.logical_not()  # x**0 is 1 and x**1 is x
    if not dtypes.is_float(a.dtype):
      return a.cast(dtypes.float64)._alu(Ops.POW, b.cast(dtypes.float64)).cast(a.dtype)
    return a._alu(Ops.POW, b)
  def maximum(self: Tensor, x) -> Tensor:
    a, b = self._broadcasted(x)
    return a._alu(Ops.OR, b) if a.dtype == dtypes.bool else a._alu(Ops.MAX, b)
  def minimum(self: Tensor, x) -> Tensor:
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a._alu(Ops.AND, b)
    # floats: -max(-a, -b) keeps NaN propagation and splits the gradient of ties as torch does;
    # ints select instead (negation overflows at the minimum value and wraps for unsigned)
    if dtypes.is_float(a.dtype): return -((-a)._alu(Ops.MAX, -b))
    return (a < b).where(a, b)
  def where(self: Tensor, x, y) -> Tensor:
    cond = self if self.dtype == dtypes.bool else self.ne(0)
    if not is_tensor(x) and not is_tensor(y):
      xt = type(self)(x, device=self.device)
      x, y = xt._broadcasted(y)
    elif not is_tensor(x): x, y = y._broadcasted(x, reverse=True)
    else: x, y = x._broadcasted(y)
    shape = x.shape if cond.shape == x.shape else broadcast_shape(cond.shape, x.shape)  # equal shapes: nothing to broadcast
    return cond._broadcast_to(shape)._alu(Ops.WHERE, x._broadcast_to(shape), y._broadcast_to(shape))
  def clip(self: Tensor, min_=None, max_=None) -> Tensor:
    if min_ is None and max_ is None: raise TensorError("clip needs at least one of min_ or max_")
    ref = self if min_ is None else self.maximum(min_)
    ref = ref if max_ is None else ref.minimum(max_)  # the value (NaN stays NaN), in the promoted dtype and broadcast shape
    if not dtypes.is_float(ref.dtype): return ref
    if not is_tensor(min_) and not is_tensor(max_):
      # constant bounds: the value is max/min (one op each) and the gradient torch.clamp's, x's where lo <= x <= hi
      from fusegrad.gradient import with_gradient
      inside = lambda x: (x >= min_ if max_ is None else x <= max_ if min_ is None else (x >= min_) & (x <= max_))  # noqa: E731
      return with_gradient(ref, self, lambda g, x: inside(x).where(g, 0))
    # the gradient is torch.clamp's, selected with where so an inf/NaN upstream gradient never reaches an input that was not
    # chosen: x where min_ <= x <= max_ (bounds included), max_ where x > max_ or max_ < min_, min_ where x < min_ < max_
    x, out = self.cast(ref.dtype)._broadcast_to(ref.shape), ref.detach()
    lo = None if min_ is None else x._broadcasted(min_)[1]
    hi = None if max_ is None else x._broadcasted(max_)[1]
    if hi is None: return (x >= lo).where(x, (x < lo).where(lo, out))
    if lo is None: return (x <= hi).where(x, (x > hi).where(hi, out))
    return ((x >= lo) & (x <= hi)).where(x, ((x > hi) | ((hi < lo) & (x == x))).where(hi, ((x < lo) & (lo < hi)).where(lo, out)))
  def clamp(self: Tensor, min=None, max=None) -> Tensor: return self.clip(min, max)
  def lerp(self: Tensor, end, weight) -> Tensor: return self + (end - self) * weight
  def _cmp(self: Tensor, op: Ops, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._alu(op, b)
  def __lt__(self: Tensor, x) -> Tensor: return self._cmp(Ops.CMPLT, x)
  def __gt__(self: Tensor, x) -> Tensor: return self._cmp(Ops.CMPLT, x, True)
  # not `not >`: every comparison with NaN is False (IEEE, as torch)
  def __le__(self: Tensor, x) -> Tensor: return self._cmp(Ops.CMPLT, x) | self._cmp(Ops.CMPEQ, x)
  def __ge__(self: Tensor, x) -> Tensor: return self._cmp(Ops.CMPLT, x, True) | self._cmp(Ops.CMPEQ, x)
  def __eq__(self: Tensor, x) -> Tensor: return self._cmp(Ops.CMPEQ, x)  # type: ignore[override]
  def __ne__(self: Tensor, x) -> Tensor: return self._cmp(Ops.CMPNE, x)  # type: ignore[override]
  def eq(self: Tensor, x) -> Tensor: return self == x
  def ne(self: Tensor, x) -> Tensor: return self != x
  def lt(self: Tensor, x) -> Tensor: return self < x
  def le(self: Tensor, x) -> Tensor: return self <= x
  def gt(self: Tensor, x) -> Tensor: return self > x
  def ge(self: Tensor, x) -> Tensor: return self >= x
  def _bitwise(self: Tensor, op: Ops, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype): raise TypeError(f"bitwise {op.name.lower()} needs integer or bool tensors, got {a.dtype}")
    return a._alu(op, b)
  def bitwise_and(self: Tensor, x) -> Tensor: return self._bitwise(Ops.AND, x)
  def bitwise_or(self: Tensor, x) -> Tensor: return self._bitwise(Ops.OR, x)
  def bitwise_xor(self: Tensor, x) -> Tensor: return self._bitwise(Ops.XOR, x)
  def bitwise_not(self: Tensor) -> Tensor:
    if dtypes.is_float(self.dtype): raise TypeError(f"bitwise not needs integer or bool tensors, got {self.dtype}")
    return self.logical_not() if self.dtype == dtypes.bool else self ^ -1 if not dtypes.is_unsigned(self.dtype) else self ^ dtypes.max(self.dtype)
  def lshift(self: Tensor, x) -> Tensor: return self._bitwise(Ops.SHL, x)
  def rshift(self: Tensor, x) -> Tensor: return self._bitwise(Ops.SHR, x)
  def logical_and(self: Tensor, x) -> Tensor: return self.bool() & self._to_tensor(x).bool()
  def logical_or(self: Tensor, x) -> Tensor: return self.bool() | self._to_tensor(x).bool()
  def logical_xor(self: Tensor, x) -> Tensor: return self.bool() ^ self._to_tensor(x).bool()
  # tinygrad spells the bitwise-not dunder and a few aliases differently; keep both spellings available
  xor = bitwise_xor
  __neg__ = neg
  def __add__(self: Tensor, x): return self.add(x)
  def __radd__(self: Tensor, x): return self.add(x)
  def __sub__(self: Tensor, x): return self.sub(x)
  def __rsub__(self: Tensor, x): return self.sub(x, reverse=True)
  def __mul__(self: Tensor, x): return self.mul(x)
  def __rmul__(self: Tensor, x): return self.mul(x, reverse=True)
  def __truediv__(self: Tensor, x): return self.div(x)
  def __rtruediv__(self: Tensor, x): return self.div(x, reverse=True)
  def __floordiv__(self: Tensor, x): return self.idiv(x)
  def __rfloordiv__(self: Tensor, x): return self.idiv(x, reverse=True)
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
  def __invert__(self: Tensor): return self.bitwise_not()
  # in place, as in torch and tinygrad: the tensor (and views of it) keep their identity and see the new value
  def __iadd__(self: Tensor, x): return self._inplace(self.add(x))
  def __isub__(self: Tensor, x): return self._inplace(self.sub(x))
  def __imul__(self: Tensor, x): return self._inplace(self.mul(x))
  def __itruediv__(self: Tensor, x): return self._inplace(self.div(x))
  def __ifloordiv__(self: Tensor, x): return self._inplace(self.idiv(x))
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
    if self.requires_grad and not type(self).no_grad:
      raise RuntimeError("a leaf tensor that requires grad cannot be modified in place; use assign(), or `with Tensor.inference_mode():`")
    return self.assign(result)
  def __abs__(self: Tensor): return self.abs()

  # ---------------- inverse trig, hyperbolic and other float math
  # inverse trig and hyperbolic functions: float results (ints become the default float), half types computed in float32
  def atan(self: Tensor) -> Tensor: return _fmath(self, _atan)
  arctan = atan
  def asin(self: Tensor) -> Tensor: return _fmath(self, lambda x: _atan(x / ((1 - x) * (1 + x)).sqrt()))
  arcsin = asin
  def acos(self: Tensor) -> Tensor: return _fmath(self, lambda x: 2 * _atan(((1 - x) / (1 + x)).sqrt()))
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
      return s * big.where(a.log() + _LN2, small)
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
    # the result (it would keep its own registry key alive): it rebuilds it, the same hash-consed node
    return with_derivative(_signbit(b).where(-mag, mag), a, lambda a: (a == 0).where(0, _signbit(b).where(-mag, mag).detach() / a))
  def signbit(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype): return self < 0 if self.dtype != dtypes.bool else self.full_like(False)
    return _signbit(self)
  def frac(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype): raise TypeError(f"frac() needs a float tensor, got {self.dtype}")
    return self - self.trunc()
  def isposinf(self: Tensor) -> Tensor: return self == math.inf if dtypes.is_float(self.dtype) else self.full_like(False, dtype=dtypes.bool)
  def isneginf(self: Tensor) -> Tensor: return self == -math.inf if dtypes.is_float(self.dtype) else self.full_like(False, dtype=dtypes.bool)
  def nan_to_num(self: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """NaN -> nan, +inf -> posinf (default: the dtype's largest finite value), -inf -> neginf (default: its lowest)."""
    if not dtypes.is_float(self.dtype): return self
    big = {dtypes.float16: 65504.0, dtypes.bfloat16: 3.3895313892515355e38, dtypes.float32: 3.4028234663852886e38, dtypes.float64: 1.7976931348623157e308}[self.dtype]
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
