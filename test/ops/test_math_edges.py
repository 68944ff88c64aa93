"""Math at the edges of its range against PyTorch, values and gradients: expm1 over its whole float range, inverse
trig/hyperbolic gradients at 0 and ±1, float floor division from the exact remainder (Python's and torch's), integer
pow done exactly in the integer dtype (wrapping), and x ** ±0.5 as sqrt / 1/sqrt on every kernel length."""
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fusegrad import Tensor, dtypes
from .helpers import helper_test_op, FG2NP, FG2TORCH

inf, nan = math.inf, math.nan
f32, f64 = dtypes.float32, dtypes.float64

def _same(got: np.ndarray, want: np.ndarray, rtol: float = 0.0):
  """Equal values with equal signs of zero (and NaN where torch has NaN)."""
  got, want = got.astype(np.float64), want.astype(np.float64)
  np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)
  zero = want == 0
  np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg="sign of zero")

# ======================================================================== expm1

EXPM1_X = [-1000.0, -710.0, -100.0, -88.0, -87.5, -87.0, -50.0, -20.0, -1.0, -0.7, -0.6931, -0.5, -0.3, -1e-3, -1e-8, -1e-30,
           -0.0, 0.0, 1e-30, 1e-8, 1e-3, 0.3, 0.5, 0.6931, 0.7, 1.0, 20.0, 50.0, 84.0, 85.0, 86.5, 88.0, 88.5, 88.7, 88.73,
           100.0, 700.0, 709.7, 710.0, inf, -inf, nan]

@pytest.mark.parametrize("dt", [f32, f64])
def test_expm1_range(dt):
  # the quotient trick overflowed above 84 (float32) and took the log of a denormal below -87. The gradient is exp(x);
  # torch's expm1(x) + 1 is 0 (and rounded) where exp(x) is tiny: an absolute tolerance far below any float32 gradient
  helper_test_op(None, torch.expm1, lambda x: x.expm1(), vals=[EXPM1_X], dtype=dt, atol=0, rtol=2e-7 if dt == f32 else 1e-15,
                 grad_atol=1e-8 if dt == f32 else 1e-15, grad_rtol=2e-7 if dt == f32 else 1e-15)

@pytest.mark.parametrize("dt", [f32, f64])
def test_expm1_small_exact(dt):
  # near 0, exp(x) - 1 alone would keep exp's rounding error; the result must stay accurate to a few ulps
  x = np.concatenate([np.geomspace(1e-12, 0.69, 300), -np.geomspace(1e-12, 0.69, 300)])
  helper_test_op(None, torch.expm1, lambda x: x.expm1(), vals=[x], dtype=dt, atol=0, rtol=3e-7 if dt == f32 else 5e-16, forward_only=True)

def test_expm1_half_and_int():
  helper_test_op(None, torch.expm1, lambda x: x.expm1(), vals=[[-20.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 10.0, 11.0, 12.0]], dtype=dtypes.float16,
                 atol=0, rtol=1e-3, forward_only=True)
  helper_test_op(None, torch.expm1, lambda x: x.expm1(), vals=[[-100, -1, 0, 1, 50]], dtype=dtypes.int32, rtol=1e-6, forward_only=True)

@pytest.mark.parametrize("dt", [f32, f64])
@pytest.mark.parametrize("name", ["elu", "selu", "celu", "sinh"])
def test_expm1_users_far_out(name, dt):
  # their gradients went through expm1's quotient: -inf/NaN at large |x|
  x = [-100.0, -90.0, -88.5, -20.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 20.0, 84.5, 86.0, 88.0]
  tf = {"elu": F.elu, "selu": F.selu, "celu": F.celu, "sinh": torch.sinh}[name]
  helper_test_op(None, tf, lambda x: getattr(x, name)(), vals=[x], dtype=dt, atol=1e-30, rtol=1e-5, grad_atol=1e-30, grad_rtol=1e-5)

# ======================================================================== inverse trig / hyperbolic gradients

@pytest.mark.parametrize("dt", [f32, f64])
def test_asinh_grad_at_zero(dt):
  x = [0.0, -0.0, 1e-20, -1e-3, 0.5, -2.0, 1e10, -1e30, 3e38, inf, -inf, nan]
  helper_test_op(None, torch.asinh, lambda x: x.asinh(), vals=[x], dtype=dt, atol=1e-30, rtol=1e-6, grad_atol=1e-30, grad_rtol=1e-6)

@pytest.mark.parametrize("dt", [f32, f64])
@pytest.mark.parametrize("name", ["asin", "acos"])
def test_asin_acos_grad_at_one(name, dt):
  # torch: rsqrt(1 - x*x), +inf at ±1 for asin (-inf for acos), NaN outside [-1, 1]
  x = [1.0, -1.0, 0.0, -0.0, 0.5, -0.999, 0.999999, 1.5, -2.0, inf, nan]
  helper_test_op(None, getattr(torch, name), lambda x: getattr(x, name)(), vals=[x], dtype=dt, atol=1e-6, rtol=1e-5, grad_atol=1e-6,
                 grad_rtol=1e-5)

# ======================================================================== float floor division

def _floordiv_operands(dt) -> tuple[np.ndarray, np.ndarray]:
  """Random dividends and divisors of both signs and many scales, and every pairing of the special values."""
  rng = np.random.default_rng(7)
  n = 4000
  a = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
  b = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)
  a[::7] = np.round(a[::7])  # exact multiples and integer quotients
  b[::11] = np.round(b[::11] * 3) / 10  # 0.1, -0.3, 0.0 ...
  sp = [0.0, -0.0, 1.0, -1.0, 0.1, -0.3, 5.0, 1e-30, -1e30, inf, -inf, nan]
  sa, sb = np.meshgrid(sp, sp)
  return np.concatenate([a, sa.ravel()]).astype(FG2NP[dt]), np.concatenate([b, sb.ravel()]).astype(FG2NP[dt])

@pytest.mark.parametrize("dt", [f32, f64])
def test_floordiv_float_torch(dt):
  a, b = _floordiv_operands(dt)
  ta, tb = torch.from_numpy(a), torch.from_numpy(b)
  fa, fb = Tensor(a, dtype=dt), Tensor(b, dtype=dt)
  _same((fa // fb).numpy(), (ta // tb).numpy())
  _same(fa.div(fb, rounding_mode="floor").numpy(), torch.div(ta, tb, rounding_mode="floor").numpy())
  # the quotient and the remainder belong together: (a // b) * b + a % b as torch's. (torch's vectorized float32 % is
  # NaN where a / b overflows, its scalar one is not: those pairs are left out)
  with np.errstate(divide="ignore", invalid="ignore"): ok = ~(np.abs(a.astype(np.float64) / b) > 1e30)
  _same((fa % fb).numpy()[ok], (ta % tb).numpy()[ok])
  _same(((fa // fb) * fb + fa % fb).numpy()[ok], ((ta // tb) * tb + ta % tb).numpy()[ok])

def test_floordiv_float_examples():
  helper_test_op(None, lambda a: a // 0.1, vals=[[1.0, 2.0, -0.3, 0.7, -1.0]], forward_only=True, atol=0, rtol=0)
  helper_test_op(None, lambda a, b: a // b, vals=[[inf, -1.0, 5.0, -0.0, 0.0, 1.0, -1.0], [2.0, inf, -inf, 3.0, -3.0, 0.0, 0.0]],
                 forward_only=True, atol=0, rtol=0)
  helper_test_op(None, lambda a: 7.5 // a, vals=[[0.1, -0.1, 2.5, -2.0, 0.0]], forward_only=True, atol=0, rtol=0)
  helper_test_op(None, lambda a, b: torch.div(a, b, rounding_mode="floor"), lambda a, b: a.div(b, rounding_mode="floor"),
                 vals=[[1.0, -0.3, 6.0], [0.1, 0.1, -0.0]], dtype=f64, forward_only=True, atol=0, rtol=0)
  helper_test_op(None, lambda a, b: a // b, vals=[[1.0, 2.0, -0.3, 100.0], [0.1, 0.1, 0.1, -7.0]], dtype=dtypes.float16, forward_only=True)

def test_floordiv_float_signed_zero():
  a, b = [0.5, -0.5, 0.0, -0.0, 0.0, -0.0, 1e-30], [3.0, -3.0, 5.0, 5.0, -5.0, -5.0, 1e30]
  for ta, tb, fa, fb in [(torch.tensor(a), torch.tensor(b), Tensor(a), Tensor(b))]:
    _same((fa // fb).numpy(), (ta // tb).numpy())

def test_floordiv_float_gradient_is_zero():
  # torch's div(rounding_mode='floor') passes a zero gradient to both operands, also where b == 0
  helper_test_op(None, lambda a, b: torch.div(a, b, rounding_mode="floor"), lambda a, b: a.div(b, rounding_mode="floor"),
                 vals=[[1.0, -0.3, 6.0, 2.0], [0.1, 0.1, -4.0, 0.0]])

# ======================================================================== integer pow

I8, U8, I16, I32, I64 = dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.int64
INT_DTS = [I8, U8, I16, I32, I64]

def test_int_pow_examples():
  helper_test_op(None, lambda a: a ** 2, vals=[[3037000499, -3037000499, 2**32 + 1]], dtype=I64)
  helper_test_op(None, lambda a: a ** 27, vals=[[5, -5, 3, 7]], dtype=I64)
  helper_test_op(None, lambda a: a ** 19, vals=[[7, 46341, -3, 2]], dtype=I32)
  helper_test_op(None, lambda a: 3 ** a, vals=[[39, 40, 0, 1, 63, 64]], dtype=I64)
  helper_test_op(None, lambda a, b: a ** b, vals=[[3, 5, 7, -3, 2, 2, 0, 0, 1, -1, -1], [39, 27, 40, 41, 63, 64, 0, 5, 2**62, 2**62 + 1, 2**63 - 1]],
                 dtype=I64)

@pytest.mark.parametrize("dt", INT_DTS)
def test_int_pow_python_exponent(dt):
  info = np.iinfo(FG2NP[dt])
  base = [0, 1, 2, 3, 7, 11, 127, int(info.max), int(info.max) - 1] + ([255, 254, 128] if dt == U8 else [-1, -2, -3, -127, int(info.min)])
  for e in [0, 1, 2, 3, 7, 8, 13, 19, 31, 32, 63, 64, 65, 100, 127, 255, 2**15 - 1, 2**31 - 1, 2**40 + 3, 2**62, 2**63 - 1]:
    if e <= info.max: helper_test_op(None, lambda a: a ** e, vals=[base], dtype=dt)  # (torch rejects an exponent out of the dtype)

@pytest.mark.parametrize("dt", INT_DTS)
def test_int_pow_huge_python_exponent(dt):
  # past torch (which rejects exponents its dtype cannot hold): still the wrapped exact value
  info, n = np.iinfo(FG2NP[dt]), 8 * FG2NP[dt].itemsize
  base = [0, 1, 2, 3, 5, 6, 7, 11, 12, 127] + ([255, 254] if dt == U8 else [-1, -2, -3, int(info.min)])
  for e in [int(info.max) + 1, 2**64, 2**64 + 1, 3**50, 10**30 + 7]:
    want = [(pow(b, e, 2**n) + 2**(n - 1)) % 2**n - 2**(n - 1) if info.min < 0 else pow(b, e, 2**n) for b in base]
    assert (Tensor(base, dtype=dt) ** e).tolist() == want, e

@pytest.mark.parametrize("dt", INT_DTS)
def test_int_pow_tensor_exponent(dt):
  rng = np.random.default_rng(3)
  info = np.iinfo(FG2NP[dt])
  base = rng.integers(max(info.min, -50), min(info.max, 50), 200, endpoint=True)
  exp = rng.integers(0, 70, 200)
  base[:12] = [0, 1, -1, 2, -2, 0, 1, -1, 3, 3, info.max, info.min][:12] if dt != U8 else [0, 1, 255, 2, 254, 0, 1, 255, 3, 3, 255, 0]
  exp[:12] = [0, info.max, info.max, info.max, info.max, 0, 0, info.max - 1, info.max, info.max - 1, 3, 3]
  helper_test_op(None, lambda a, b: a ** b, vals=[base.astype(info.dtype), exp.astype(info.dtype)], dtype=dt)

@pytest.mark.parametrize("dt", [I8, I16, I32, I64])
def test_int_pow_negative_exponents(dt):
  # torch: 1 ** -e is 1, (-1) ** -e is ±1 by parity, every other base (0 included) gives 0
  base = [1, -1, -1, 2, -2, 0, 3, 1, -1, 5]
  exp = [-1, -1, -2, -1, -1, -1, -2, -127, -127, -128]
  helper_test_op(None, lambda a, b: a ** b, vals=[base, exp], dtype=dt)
  helper_test_op(None, lambda a: torch.pow(2, a), lambda a: 2 ** a, vals=[[-1, -2, 0, 3]], dtype=dt)
  helper_test_op(None, lambda a: torch.pow(-1, a), lambda a: (-1) ** a, vals=[[-1, -2, -3, 0, 3]], dtype=dt)

def test_int_pow_negative_python_exponent_raises():
  with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
    torch.tensor([2]) ** -1
  with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
    Tensor([2]) ** -1
  with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
    Tensor([2], dtype=U8).pow(-2)

def test_int_pow_other_kinds():
  # a float exponent makes a float result (no integer pow); the integer path keeps the dtype
  helper_test_op(None, lambda a: a ** 2.0, vals=[[3, -3, 46341]], dtype=I32)
  helper_test_op(None, lambda a: a ** 0.5, vals=[[4, 2, 0]], dtype=I64, rtol=1e-6)
  helper_test_op(None, lambda a, b: a ** b, vals=[[3, 5], [2.0, 0.5]], dtype=[I32, f32], rtol=1e-6)
  assert (Tensor([True, False]) ** 2).tolist() == [True, False]
  assert (Tensor([2, 3], dtype=I16) ** 15).dtype == I16

# ======================================================================== float pow with special exponents

SPECIAL = [nan, inf, -inf, -0.0, 0.0, -2.0, -0.5, 3.0, 0.25, 1.0, -1.0, 4.0, 1e-30, -1e30]

@pytest.mark.parametrize("dt", [f32, f64])
@pytest.mark.parametrize("e", [0.5, -0.5, 2, -1, 1, 0, 3, -2, 2.0, 1.5])
def test_pow_special_values_every_length(e, dt):
  # lengths 1..17 take the scalar and the vector paths of a kernel: all must agree with torch (sqrt(-0.0) is -0.0)
  for n in range(1, 18):
    for shift in (0, 5, 9):
      v = [SPECIAL[(i + shift) % len(SPECIAL)] for i in range(n)]
      got, want = (Tensor(v, dtype=dt) ** e).numpy(), (torch.tensor(v, dtype=FG2TORCH[dt]) ** e).numpy()
      _same(got, want, rtol=1e-6 if dt == f32 else 1e-15)

@pytest.mark.parametrize("dt", [f32, f64])
@pytest.mark.parametrize("e", [0.5, -0.5, 2, -1, 3, -2, 1.5])
def test_pow_special_values_gradient(e, dt):
  x = [-0.0, 0.0, inf, -inf, 4.0, -1.0, 0.25, nan]
  helper_test_op(None, lambda x: x ** e, vals=[x], dtype=dt, atol=1e-30, rtol=1e-6, grad_atol=1e-30, grad_rtol=1e-6)

def test_pow_half_exponents_as_sqrt():
  # graph level, so every kernel, device and dtype computes torch's sqrt / 1 / sqrt
  x = Tensor([4.0, -0.0, -inf])
  assert (x ** 0.5).uop is x.sqrt().uop
  for dt in (dtypes.float16, dtypes.bfloat16):  # (torch's float16 kernel calls pow: +0.0 and inf there, as C's pow)
    helper_test_op(None, lambda x: x ** 0.5, vals=[[4.0, -0.0, -inf, 0.0]], dtype=dt, forward_only=True)
    helper_test_op(None, lambda x: x ** -0.5, vals=[[4.0, -0.0, -inf, 0.0]], dtype=dt, forward_only=True)
  helper_test_op(None, lambda x: x.pow(0.5), vals=[[4, 0, 9]], dtype=I32, rtol=1e-6, forward_only=True)
