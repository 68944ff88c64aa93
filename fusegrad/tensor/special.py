"""Special functions and two-argument math (erfc, erfinv, lgamma, digamma, hypot, xlogy, gcd, ...), as in torch.special.

The float functions are composed from elementwise ops, so every device runs them: float32 and float64 inputs compute in
their own dtype, ints in the default float, float16 and bfloat16 in float32 (rounded once at the end). Where a formula is
fitted (erfc, erfinv, lgamma, i0), the coefficients are Chebyshev series interpolated at Chebyshev points in 50-digit
arithmetic (mpmath) for fusegrad, kept to 1e-18 of the function's size; 32-bit and narrower dtypes drop the terms below
2^-30. The exact ones (frexp, ldexp with an integer exponent, nextafter) work on the bits through bitcast.

Tensor inherits SpecialMixin."""
from __future__ import annotations
import collections
import math
from typing import TYPE_CHECKING
from fusegrad.dtype import dtypes, least_upper_float
from fusegrad.gradient import with_derivative, with_gradient
from fusegrad.tensor.common import TensorMixin, is_tensor, promote_types
from fusegrad.tensor.elementwise import _fmath, _signbit
from fusegrad.uop.ops import broadcast_shape

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor  # noqa: F401

_FrexpRet = collections.namedtuple("frexp", ["mantissa", "exponent"])  # torch.return_types.frexp's fields

# ---------------- series
def _series(cs: tuple) -> tuple[tuple, tuple]:
  """(all the terms for float64, the terms above 2^-30 of the largest for 32-bit math)."""
  big = max(abs(c) for c in cs)
  return cs, cs[:max(i for i, c in enumerate(cs) if abs(c) > big * 2.0 ** -30) + 1]

def _terms(pair: tuple[tuple, tuple], x: Tensor) -> tuple: return pair[0] if x.dtype == dtypes.float64 else pair[1]

def _cheb(u: Tensor, cs: tuple) -> Tensor:
  """sum c_k T_k(u) by Clenshaw's recurrence (stable on [-1, 1], where the monomial form of these series cancels)."""
  u2 = u * 2
  b1, b2 = cs[-1], 0.0
  for c in reversed(cs[1:-1]): b1, b2 = u2 * b1 - b2 + c, b1
  return u * b1 - b2 + cs[0]

def _horner(x: Tensor, cs: tuple) -> Tensor:
  """sum c_k x^k."""
  acc = x * cs[-1] + cs[-2]
  for c in reversed(cs[:-2]): acc = acc * x + c
  return acc

def _ipow(x: Tensor, k: int) -> Tensor:
  """x^k for a Python int k >= 1 by squaring: exact to a few roundings, where pow's exp(k log x) loses digits."""
  out, sq = None, x
  while k:
    if k & 1: out = sq if out is None else out * sq
    k >>= 1
    if k: sq = sq * sq
  return out

# erfcx(x) (x + 1), erfcx(x) = exp(x^2) erfc(x), on [0.5, 27] (erfc underflows float64 beyond), in t = 3 / (3 + x) mapped
# onto [-1, 1]: the factor x + 1 keeps it within [0.56, 0.93], so the series does not cancel
_ERFCX_T0, _ERFCX_T1 = 3 / 3.5, 3 / 30
_ERFCX = _series((
  0.7313087437216687, 0.16983811598377538, 0.023961740498200275, -8.192765069657627e-05, -0.0011096780831069634,
  -0.0003279317560781382, -5.0960576821949926e-05, -3.103355997423048e-06, 4.2493256156288707e-07, 9.489675816644317e-08,
  -4.1062654253470055e-10, -1.8768045586868177e-09, -7.353893816414936e-11, 3.8737104663205455e-11, 2.3012114862519336e-12,
  -9.166322314616609e-13, -5.0350778661506216e-14, 2.4603861391054863e-14, 6.561771556511524e-16, -7.054137715995978e-16,
  1.4021480958914276e-17, 1.9956975204202566e-17, -1.6792565189689557e-18))
# erfinv(y) / y for y^2 in [0, 0.5625] (|y| <= 0.75) mapped onto [-1, 1]
_ERFINV_MID = _series((
  0.9744859196197088, 0.09767121365429762, 0.0106798426748877, 0.00145839261934236, 0.00022139561793534646,
  3.5754642695386944e-05, 6.013052435846527e-06, 1.0405605281919531e-06, 1.8393099988652242e-07, 3.3048595802566894e-08,
  6.015922964924221e-09, 1.1067505460742694e-09, 2.0540500062873634e-10, 3.8404854958353785e-11, 7.226135143013051e-12,
  1.3670906380006421e-12, 2.598708098538055e-13, 4.960649711523937e-14, 9.504612363589054e-15, 1.8271407438754928e-15,
  3.5229350975383005e-16, 6.810937482440025e-17, 1.319990081950303e-17, 2.5639064134405433e-18))
# erfinv(y) / w for |y| in (0.75, 1), w = sqrt(-log(1 - |y|)) in [sqrt(log 4), 6.1] mapped onto [-1, 1] (1 - |y| is exact
# there; erfinv(y) / w stays within [0.69, 0.97], so the series does not cancel)
_ERFINV_W0, _ERFINV_W1 = math.sqrt(math.log(4)), 6.1
_ERFINV_TAIL = _series((
  0.8852616509582564, 0.1178441477898397, -0.048870872742673536, 0.018301231167891605, -0.0063904531472477495,
  0.0021015641039457858, -0.0006503635863504198, 0.00018738705769933865, -4.8928996507691546e-05, 1.0793336303988203e-05,
  -1.5277513240189763e-06, -2.1621390320120235e-07, 3.10075661817241e-07, -1.7589159863338378e-07, 7.870308703723693e-08,
  -3.0988324575247454e-08, 1.1108733218554339e-08, -3.6558925478263595e-09, 1.094413873863823e-09, -2.8769892847796274e-10,
  5.940628186552764e-11, -4.735153073111565e-12, -4.076652096873856e-12, 3.3135379667244963e-12, -1.7248995346480394e-12,
  7.520065779869817e-13, -2.93380522112328e-13, 1.0467641179033312e-13, -3.4227863336587236e-14, 1.0097542574731207e-14,
  -2.5580826503414997e-15, 4.682779145237094e-16, 3.8251658611392684e-18, -6.170870577685987e-17, 4.1556273676274234e-17,
  -2.051835117666263e-17, 8.728991451677055e-18, -3.3536983584398143e-18, 1.1809945745130562e-18))
# lgamma(z) / ((z - 1)(z - 2)) on [1, 3] in u = z - 2: the roots are factored out, so lgamma keeps its relative accuracy
# next to 1 and 2, where z - 1 and z - 2 are exact
_LGAMMA = _series((
  0.44148902545501423, -0.11119580321752523, 0.01951044826068884, -0.003922461463025264, 0.0008478989895953857,
  -0.00019153855341365593, 4.454470184975607e-05, -1.05728743735943e-05, 2.5474336873408417e-06, -6.208535880776316e-07,
  1.5268677399071546e-07, -3.782637660291326e-08, 9.428100823624284e-09, -2.361999702184645e-09, 5.943541905817546e-10,
  -1.501312977072867e-10, 3.8050196458110534e-11, -9.672485299656325e-12, 2.465348198355661e-12, -6.298868140791711e-13,
  1.6128460030283787e-13, -4.137949206814042e-14, 1.0635701227757898e-14, -2.7382420786652826e-15, 7.060670507214892e-16,
  -1.8232177141662118e-16, 4.714169006756272e-17, -1.2204107319639856e-17, 3.1630451661790255e-18, -8.206746544166728e-19))
# i0(x) sqrt(x) exp(-x) for x >= 12, in t = 12 / x in (0, 1] mapped onto [-1, 1]; below 12 the power series (x^2/4)^k / k!^2
_I0_ASYM = _series((
  0.40109914003919295, 0.002184281640530744, 2.8102684899524735e-05, 7.070612167681894e-07, 2.7830365682215452e-08,
  1.5598382218683584e-09, 1.1945561968721535e-10, 1.2346559183543341e-11, 1.6908583551484585e-12, 2.8071016369174847e-13,
  4.57177719463602e-14, 3.9015503728337315e-15, -1.5137744964292534e-15, -9.641452327155876e-16, -2.6495014155351884e-16,
  -1.4720195919179442e-17, 1.964617203987006e-17, 7.877258987654543e-18, 3.6104530855712454e-19, -7.464592325125513e-19))
_I0_SPLIT = 12.0
# terms of sum q^k / k!^2 (q = x^2/4 <= 36) down to 1e-18 (float64) or 2^-30 (32-bit) of i0(12) ~ 18949
_I0_SERIES = tuple(tuple(1 / math.factorial(k) ** 2 for k in range(n)) for n in (
  next(k for k in range(100) if 36.0 ** k / math.factorial(k) ** 2 < tol * 18948.9) for tol in (1e-18, 2.0 ** -30)))

# Bernoulli numbers B_2 .. B_20
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330)
# Stirling: lgamma(a) = (a - 1/2) log a - a + log(2 pi)/2 + sum B_2k / (2k (2k - 1) a^(2k-1)), used for a >= 10
_STIRLING = _series(tuple(b / (2 * k * (2 * k - 1)) for k, b in enumerate(_BERNOULLI[:8], 1)))
# digamma(y) = log y - 1/(2y) - sum B_2k / (2k y^2k), used for y >= 10
_DIGAMMA = _series(tuple(b / (2 * k) for k, b in enumerate(_BERNOULLI[:8], 1)))
_HALF_LOG_2PI, _LOG_PI = 0.5 * math.log(2 * math.pi), math.log(math.pi)

# ---------------- building blocks (on a float32 or float64 tensor)
def _sinpi(x: Tensor) -> Tensor:
  """sin(pi x), reduced exactly first (x - 2 round(x/2) is exact), so it is 0 at every integer and right for large x."""
  r = x - (x * 0.5).round() * 2  # in [-1, 1]
  s = (r < 0).where(-1.0, r.full_like(1.0))
  r = (r.abs() > 0.5).where(s - r, r)  # sin(pi r) = sin(pi (±1 - r)); exact (Sterbenz)
  return (r * math.pi).sin()

def _cospi(x: Tensor) -> Tensor:
  """cos(pi x) = sin(pi (1/2 - |r|)): exact 0 at half-integers, where cos of a rounded pi x is not."""
  r = x - (x * 0.5).round() * 2
  return ((0.5 - r.abs()) * math.pi).sin()

def _reflect(x: Tensor) -> tuple[Tensor, Tensor]:
  """(x < 0, the argument the positive-side formulas take: 1 - x for x < 0, else x)."""
  neg = x < 0
  return neg, neg.where(1 - x, x)

_FINFO = {dtypes.float32: (23, 127, dtypes.int32), dtypes.float64: (52, 1023, dtypes.int64)}  # mantissa bits, bias, same-size int

def _pow2(k: Tensor, dt) -> Tensor:
  """2^k exactly, as dt, for an int tensor k in [min subnormal exponent, max exponent + 1] (the top gives inf)."""
  mb, bias, ity = _FINFO[dt]
  k = k.cast(ity)
  normal = (k.clip(1 - bias, bias + 1) + bias) << mb
  sub = 1 << (k + (bias - 1 + mb)).clip(0, mb - 1)
  return (k >= 1 - bias).where(normal, sub).bitcast(dt)

def _frexp(x: Tensor) -> tuple[Tensor, Tensor]:
  """(m, e) with x = m 2^e, 0.5 <= |m| < 1 (m = x, e = 0 for 0, inf and NaN); e int32. m is x times exact powers of 2,
  so its gradient is 2^-e, torch's."""
  mb, bias, ity = _FINFO[x.dtype]
  mask = (1 << (8 * x.dtype.itemsize - 1 - mb)) - 1
  xd = x.detach()
  def field(t: Tensor) -> Tensor: return (t.bitcast(ity) >> mb) & mask
  sub = field(xd) == 0  # zero or subnormal: scaled by 2^64 (exact) to read its exponent
  e = field(sub.where(xd * 2.0 ** 64, xd)) - (bias - 1) - sub.where(64, 0).cast(ity)
  e = ((xd == 0) | xd.isinf() | xd.isnan()).where(0, e).cast(dtypes.int32)
  h = (-e) >> 1  # 2^-e in two halves: each a normal number even for the exponents of subnormals
  return x * _pow2(h, x.dtype) * _pow2(-e - h, x.dtype), e

def _ldexp_exact(x: Tensor, e: Tensor) -> Tensor:
  """x 2^e rounded once, for an int32 e (the caller clamps it where every result has saturated): x = m 2^k exactly, then
  m 2^(p - q) (exact, |p - q| <= 4) times 2^q, q the exponent of the result clamped to the subnormal and infinite range,
  so the one inexact step is the last."""
  mb, bias, _ = _FINFO[x.dtype]
  m, k = _frexp(x.detach())
  p = (k + e).clip(1 - bias - mb - 4, bias + 3)
  q = (p - 1).clip(1 - bias - mb, bias + 1)
  out = m * _pow2(p - q, x.dtype) * _pow2(q, x.dtype)
  return ((x == 0) | x.isinf() | x.isnan()).where(x, out)

# ---------------- the functions (x float32 or float64)
def _erfc(x: Tensor) -> Tensor:
  """1 - erf(x) for |x| < 0.5; elsewhere exp(-x^2) erfcx(|x|) (2 minus that for x < 0), which keeps its relative accuracy
  into the subnormals where 1 - erf(x) is 0. exp(-x^2) is exp(-h^2) exp(-(x - h)(x + h)) with h = |x| to 6 fraction
  bits, so h^2 is exact and the rounding of x^2 (relative error x^2 eps in the result) never happens."""
  a = x.abs()
  small = a < 0.5
  b = small.where(1.0, a).minimum(30.0)  # erfc(30) is 0 in every dtype; NaN stays NaN
  t = 3 / (b + 3)
  r = _cheb((t - _ERFCX_T1) * (2 / (_ERFCX_T0 - _ERFCX_T1)) - 1, _terms(_ERFCX, x))
  h = (b * 64).floor() * (1 / 64)
  tail = (-h * h).exp() * (((h - b) * (b + h)).exp() * r / (b + 1))
  y = small.where(1 - x.erf(), (x < 0).where(2 - tail, tail))
  return with_derivative(y, x, lambda x: (-x * x).exp() * (-2 / math.sqrt(math.pi)))

def _erfinv_value(y: Tensor) -> Tensor:
  """y P(y^2) for |y| <= 0.75, w Q(w) with w = sqrt(-log(1 - |y|)) above (the fits); odd, ±inf at ±1, NaN beyond."""
  a = y.abs()
  mid = a <= 0.75
  am = mid.where(a, 0.0)
  vmid = a * _cheb(am * am * (2 / 0.5625) - 1, _terms(_ERFINV_MID, y))
  at = (mid | (a >= 1)).where(0.875, a)
  w = (-(1 - at).log()).sqrt()
  vtail = w * _cheb((w - (_ERFINV_W0 + _ERFINV_W1) / 2) * (2 / (_ERFINV_W1 - _ERFINV_W0)), _terms(_ERFINV_TAIL, y))
  v = (a == 1).where(math.inf, (a > 1).where(math.nan, mid.where(vmid, vtail)))
  return _signbit(y).where(-v, v)  # (-0.0 keeps its sign)

def _erfinv(y: Tensor) -> Tensor:
  return with_derivative(_erfinv_value(y), y, lambda y: _erfinv_value(y).square().exp() * (math.sqrt(math.pi) / 2))

def _lgamma_value(x: Tensor) -> Tensor:
  """a = x (or 1 - x for x < 0, by the reflection formula) in [0, 1): lgamma(a + 1) - log a; [1, 3): the fit;
  [3, 10): shifted down into [2, 3) (a - j exact) plus log of the product of the shifts; from 10: Stirling's series."""
  neg, a = _reflect(x)
  small, below = a < 1, a < 10
  ac = below.where(a, 9.5)
  k = (ac.floor() - 2).maximum(0)
  z = small.where(a + 1, ac - k)
  core = small.where(a, z - 1) * small.where(a - 1, z - 2) * _cheb(z - 2, _terms(_LGAMMA, x))
  prod = (k >= 1).where(ac - 1, 1.0)
  for j in range(2, 8): prod = prod * (k >= j).where(ac - j, 1.0)
  mid = small.where(core - a.log(), core + prod.log())
  big = a.maximum(10.0)
  ib = 1 / big
  stirling = (big - 0.5) * (big.log() - 1) + (_HALF_LOG_2PI - 0.5) + ib * _horner(ib * ib, _terms(_STIRLING, x))
  pos = below.where(mid, stirling)  # (NaN takes Stirling's branch, which keeps it)
  s = _sinpi(x).abs()
  refl = (s == 0).where(math.inf, (_LOG_PI - s.log()) - pos)  # poles at the non-positive integers
  return (x == -math.inf).where(math.inf, neg.where(refl, pos))

def _lgamma(x: Tensor) -> Tensor: return with_derivative(_lgamma_value(x), x, _digamma_value)

def _shifted(a: Tensor, n: int, top: float) -> tuple[Tensor, Tensor]:
  """(sum over j of 1/(a + j)^(n+1) for the a + j below top, a plus their count (>= top)): the recurrence
  psi^(n)(a) = psi^(n)(a + 1) + (-1)^(n+1) n! / a^(n+1) moves a to where the asymptotic series holds. The j = 0 term
  takes a itself: -0.0 + 0 would lose the sign that makes digamma(-0.0) = +inf."""
  acc, count = None, None
  for j in range(int(top)):
    aj = a if j == 0 else a + j
    use = aj < top
    term = use.where(_ipow(1 / aj, n + 1), 0.0)
    acc, count = (term, use.cast(a.dtype)) if acc is None else (acc + term, count + use.cast(a.dtype))
  return acc, a + count

def _digamma_value(x: Tensor) -> Tensor:
  neg, a = _reflect(x)
  acc, y = _shifted(a, 0, 10.0)
  iy = 1 / y
  pos = y.log() - 0.5 * iy - iy * iy * _horner(iy * iy, _terms(_DIGAMMA, x)) - acc
  refl = pos - math.pi * _cospi(x) / _sinpi(x)
  return (neg & (x == x.floor())).where(math.nan, neg.where(refl, pos))  # NaN at the negative integers (torch)

def _cot_poly(n: int) -> list[int]:
  """Coefficients (by power of c) of P_n, where d^n/dx^n (pi cot(pi x)) = pi^(n+1) P_n(cot(pi x)): P_0 = c,
  P_(k+1) = -(1 + c^2) P_k'(c). Each P_n's coefficients share one sign, so Horner's sum does not cancel."""
  p = [0, 1]
  for _ in range(n):
    d = [i * c for i, c in enumerate(p)][1:]
    p = [-(d[i] if i < len(d) else 0) - (d[i - 2] if 0 <= i - 2 < len(d) else 0) for i in range(len(d) + 2)]
  return p

def _polygamma_value(n: int, x: Tensor) -> Tensor:
  """psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x): shifted up to n + 10, then the Euler-Maclaurin series of the Hurwitz
  zeta; x < 0 by the reflection psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x))."""
  if n == 0: return _digamma_value(x)
  neg, a = _reflect(x)
  acc, y = _shifted(a, n, float(n + 10))
  iy = 1 / y
  rising = [math.prod(range(n + 1, n + 2 * k)) for k in range(1, 11)]  # (n + 1)(n + 2) ... (n + 2k - 1)
  series = _terms(_series(tuple(b / math.factorial(2 * k) * r for k, (b, r) in enumerate(zip(_BERNOULLI, rising), 1))), x)
  tail = _ipow(iy, n) * (1 / n + iy * (0.5 + iy * _horner(iy * iy, series)))
  sign = -1.0 if n % 2 == 0 else 1.0  # (-1)^(n+1)
  pos = (acc + tail) * (sign * math.factorial(n))
  c = _cospi(x) / _sinpi(x)
  pc = _horner(c, tuple(float(v) for v in _cot_poly(n)))
  out = neg.where(-sign * pos - math.pi ** (n + 1) * pc, pos)
  pole = (x <= 0) & (x == x.floor()) & x.isinf().logical_not()
  out = pole.where(sign * math.inf, out)
  if n >= 2: out = (x == math.inf).where(math.nan, (x == -math.inf).where(sign * math.inf, out))  # torch's values at +-inf
  return out

def _polygamma(n: int, x: Tensor) -> Tensor:
  return with_derivative(_polygamma_value(n, x), x, lambda x: _polygamma_value(n + 1, x))

def _i0(x: Tensor) -> Tensor:
  """The power series up to 12, exp(x) S(12 / x) / sqrt(x) beyond (overflowing with exp(x), as torch's, and NaN at
  +-inf as torch's). Each branch sees a safe argument, so the composed gradient (torch's i1) has no NaN from the other."""
  a = x.abs()
  small = a <= _I0_SPLIT
  s = small.where(a, 0.0)
  series = _horner(s * s * 0.25, _I0_SERIES[0 if x.dtype == dtypes.float64 else 1])
  b = small.where(_I0_SPLIT, a)
  asym = b.exp() * _cheb((_I0_SPLIT * 2) / b - 1, _terms(_I0_ASYM, x)) / b.sqrt()
  return small.where(series, asym)

def _float_pair(self: Tensor, other) -> tuple[Tensor, Tensor]:
  """self and other promoted and broadcast as a binary op does, ints and bools then in the default float."""
  a, b = self._broadcasted(other)
  if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
  return a, b

def _hypot_value(x: Tensor, y: Tensor) -> Tensor:
  ax, ay = x.abs(), y.abs()
  big, small = ax.maximum(ay), ax.minimum(ay)
  r = small / (big == 0).where(1.0, big)
  return (ax.isinf() | ay.isinf()).where(math.inf, big * (1 + r * r).sqrt())  # inf even beside NaN (C's hypot)

def _euclid_steps(dt) -> int:
  """Steps of Euclid's algorithm that finish every pair of dt: consecutive Fibonacci numbers are the worst case."""
  f0, f1, k = 1, 1, 2
  while f1 <= 2 ** (8 * dt.itemsize): f0, f1, k = f1, f0 + f1, k + 1
  return k + 1

def _gcd(a: Tensor, b: Tensor) -> Tensor:
  """torch's gcd: Euclid's loop on |a| and |b| with C's remainder, in the dtype (|INT_MIN| stays negative, as torch's),
  unrolled to the dtype's worst case. Divisors of 0 and -1 are replaced by 1 (the remainder is 0 either way)."""
  a, b = a.abs(), b.abs()
  signed = not dtypes.is_unsigned(a.dtype)
  for _ in range(_euclid_steps(a.dtype)):
    nz = a != 0
    safe = (nz & (a != -1)) if signed else nz
    a, b = nz.where(b.fmod(safe.where(a, 1)), a), nz.where(a, b)
  return b

def _int_pair(self: Tensor, other, name: str) -> tuple[Tensor, Tensor]:
  a, b = self._broadcasted(other)
  if not dtypes.is_int(a.dtype) or a.dtype == dtypes.bool:
    raise NotImplementedError(f"{name} needs integer tensors, got {a.dtype} (torch: \"{name}_cpu\" not implemented)")
  return a, b

def _float_only(x: Tensor, name: str) -> None:
  if not dtypes.is_float(x.dtype): raise NotImplementedError(f"{name} needs a float tensor, got {x.dtype} (torch: \"{name}_cpu\" not implemented)")

class SpecialMixin(TensorMixin):
  # ---------------- error function, gamma function and relatives: float results, half types computed in float32
  def erfc(self: Tensor) -> Tensor: return _fmath(self, _erfc)
  def erfinv(self: Tensor) -> Tensor: return _fmath(self, _erfinv)
  def lgamma(self: Tensor) -> Tensor: return _fmath(self, _lgamma)
  def digamma(self: Tensor) -> Tensor: return _fmath(self, lambda x: with_derivative(_digamma_value(x), x, lambda x: _polygamma_value(1, x)))
  def polygamma(self: Tensor, n: int) -> Tensor:
    """The n-th derivative of digamma (n = 0 is digamma)."""
    if isinstance(n, bool) or not isinstance(n, int): raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0: raise RuntimeError("polygamma(n, x) does not support negative n.")
    if n > 160: raise NotImplementedError(f"polygamma(n={n}) is supported up to n = 160 (its coefficients overflow float64 beyond)")
    return _fmath(self, lambda x: _polygamma(n, x))
  def mvlgamma(self: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma: sum of lgamma(x - i/2) for i < p, plus p(p - 1)/4 log(pi). Like torch, it checks the
    domain (x > (p - 1)/2), which reads the data."""
    if p < 1: raise RuntimeError("p has to be greater than or equal to 1")
    x = self._float()
    if x.numel() and (x <= (p - 1) / 2).any().item(): raise RuntimeError("All elements must be greater than (p-1)/2")
    out = None
    for i in range(p): out = (x - i / 2).lgamma() if out is None else out + (x - i / 2).lgamma()
    return out + p * (p - 1) / 4 * _LOG_PI
  def i0(self: Tensor) -> Tensor: return _fmath(self, _i0)
  def sinc(self: Tensor) -> Tensor:
    """sin(pi x) / (pi x), 1 at 0, computed as torch does (so sinc(1) is sin of the rounded pi, not 0)."""
    def f(x: Tensor) -> Tensor:
      zero = x == 0
      px = x * math.pi
      y = zero.where(1.0, px.sin() / zero.where(1.0, px))
      # torch's gradient (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 at 0
      return with_gradient(y, x, lambda g, x: g * (x == 0).where(0.0, ((x * math.pi) * (x * math.pi).cos() - (x * math.pi).sin()) / ((x * math.pi) * x)))
    return _fmath(self, f)
  def logit(self: Tensor, eps: float | None = None) -> Tensor:
    """log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given (and >= 0, as torch)."""
    clamp = eps is not None and eps >= 0
    def f(x: Tensor) -> Tensor:
      lo, hi = (eps, 1 - eps) if clamp else (0.0, 1.0)
      xc = (x < lo).where(lo, (x > hi).where(hi, x)) if clamp else x  # (NaN passes, as torch's)
      # torch's gradient 1/(x(1 - x)): 0 outside [eps, 1 - eps] when clamped, NaN outside [0, 1] otherwise
      return with_gradient((xc / (1 - xc)).log(), x, lambda g, x: ((x < lo) | (x > hi)).where(0.0 if clamp else math.nan, g / (x * (1 - x))))
    return _fmath(self, f)

  # ---------------- two-argument float math: promotion as torch's (ints and bools in the default float)
  def xlogy(self: Tensor, other) -> Tensor:
    """x log(y), 0 where x == 0, NaN wherever y is NaN (torch: even where x == 0)."""
    x, y = _float_pair(self, other)
    def f(x: Tensor) -> Tensor:
      yy = y.cast(x.dtype)
      out = yy.isnan().where(math.nan, (x == 0).where(0.0, x * yy.log()))
      def vjp(g: Tensor, x: Tensor, y: Tensor, needs) -> tuple:  # torch's: log(y) (0 where x == 0 and y <= 0), and x / y
        gx = g * ((x == 0) & (y <= 0)).where(0.0, y.log()) if needs[0] else None
        return gx, (g * x / y if needs[1] else None)
      return with_gradient(out, (x, yy), vjp)
    return _fmath(x, f)
  def hypot(self: Tensor, other) -> Tensor:
    """sqrt(x^2 + y^2) without overflow or underflow: max * sqrt(1 + (min/max)^2); inf if either is inf."""
    x, y = self._broadcasted(other)
    _float_only(x, "hypot")
    def f(x: Tensor) -> Tensor:
      yy = y.cast(x.dtype)
      def vjp(g: Tensor, x: Tensor, y: Tensor, needs) -> tuple:  # torch's x / hypot and y / hypot (NaN at the origin)
        h = _hypot_value(x, y)
        return (g * x / h if needs[0] else None), (g * y / h if needs[1] else None)
      return with_gradient(_hypot_value(x, yy), (x, yy), vjp)
    return _fmath(x, f)
  def fmax(self: Tensor, other) -> Tensor:
    """The larger of the two, ignoring a NaN (NaN only where both are); ties give self (and its gradient), as torch."""
    a, b = self._broadcasted(other)
    return ((a >= b) | b.isnan()).where(a, b)
  def fmin(self: Tensor, other) -> Tensor:
    a, b = self._broadcasted(other)
    return ((a <= b) | b.isnan()).where(a, b)
  def heaviside(self: Tensor, values) -> Tensor:
    """0 where x < 0, values where x == 0, 1 where x > 0 (NaN gives 0); values must have x's dtype (torch). No gradient."""
    if not is_tensor(values): values = self.full_like(values, dtype=self.dtype)
    if values.dtype != self.dtype: raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    x, v = self._broadcasted(values)
    return (x == 0).where(v, (x > 0).cast(x.dtype)).detach()
  def ldexp(self: Tensor, other) -> Tensor:
    """self * 2^other. An integer exponent scales exactly (one rounding, as C's ldexp and torch's kernel); a float one
    multiplies by 2.0 ** other computed in its dtype, as torch does (so 2^200 is inf in float32 there)."""
    e = other if is_tensor(other) else type(self)(other, device=self.device)
    if e.dtype == dtypes.bool: raise NotImplementedError("ldexp: a bool exponent is not supported (torch: \"ldexp_cpu_exp\" not implemented for 'Bool')")
    if dtypes.is_float(e.dtype): return self * (2.0 ** e)
    out_dt = least_upper_float(promote_types(self, e))
    shape = broadcast_shape(self.shape, e.shape)
    x = self.cast(out_dt).broadcast_to(shape)
    mb, bias, _ = _FINFO[dtypes.float64 if out_dt == dtypes.float64 else dtypes.float32]
    lim = 2 * (bias + mb) + 16  # beyond it every result saturates; the narrow ints fit int32 as they are
    if dtypes.is_unsigned(e.dtype): e = e.minimum(lim)
    elif e.dtype.itemsize > 2: e = e.clip(-lim, lim)
    ei = e.cast(dtypes.int32).broadcast_to(shape)
    e_node = ei.uop  # (the node, not the Tensor: see copysign)
    def f(x: Tensor) -> Tensor:
      return with_derivative(_ldexp_exact(x, ei), x, lambda x: _ldexp_exact(x.full_like(1.0), type(x)(e_node)))
    return _fmath(x, f)
  def float_power(self: Tensor, exponent) -> Tensor:
    """pow computed in float64, whatever the dtypes (torch)."""
    e = exponent.cast(dtypes.float64) if is_tensor(exponent) else exponent
    return self.cast(dtypes.float64).pow(e)
  def nextafter(self: Tensor, other) -> Tensor:
    """The next representable value after self toward other: one step of the bits (as an integer of the same size),
    the smallest subnormal with other's sign from 0, other itself where they are equal. No gradient."""
    a, b = self._broadcasted(other)
    _float_only(a, "nextafter")
    a, b = a.detach(), b.detach()
    ity = {1: dtypes.int8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[a.dtype.itemsize]
    tiny = {dtypes.fp8e4m3: 2.0 ** -9, dtypes.fp8e5m2: 2.0 ** -16, dtypes.float16: 2.0 ** -24, dtypes.bfloat16: 2.0 ** -133, dtypes.float32: 2.0 ** -149, dtypes.float64: 2.0 ** -1074}[a.dtype]
    bits = a.bitcast(ity)
    away = (b > a) == (a > 0)  # away from zero: the magnitude bits go up by one, in either sign
    out = (bits + away.where(1, -1).cast(ity)).bitcast(a.dtype)
    out = (a == 0).where(_signbit(b).where(a.full_like(-tiny), a.full_like(tiny)), out)  # (two numbers would make float32)
    return (a.isnan() | b.isnan()).where(math.nan, (a == b).where(b, out))
  def frexp(self: Tensor) -> tuple[Tensor, Tensor]:
    """(mantissa, exponent) with self = mantissa * 2^exponent, 0.5 <= |mantissa| < 1 and an int32 exponent (0 for 0,
    inf and NaN, whose mantissa is self); exact, from the bits. Gradient 2^-exponent, as torch's."""
    if not dtypes.is_float(self.dtype): raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    x = self if self.dtype in _FINFO else self.cast(dtypes.float32)  # half types: exact in float32
    m, e = _frexp(x)
    return _FrexpRet(m.cast(self.dtype), e)

  # ---------------- integer math: int dtypes only, as torch
  def gcd(self: Tensor, other) -> Tensor:
    """Greatest common divisor, non-negative except where torch's is (|INT_MIN|); gcd(0, 0) = 0."""
    return _gcd(*_int_pair(self, other, "gcd"))
  def lcm(self: Tensor, other) -> Tensor:
    """|a / gcd * b| (0 where gcd is 0), wrapping as torch's: 8- and 16-bit ints compute in int32 (C's promotion) and
    round back, wider ones wrap in their dtype."""
    a, b = _int_pair(self, other, "lcm")
    wide = dtypes.int32 if a.dtype.itemsize < 4 and not dtypes.is_unsigned(a.dtype) else a.dtype
    g, aw, bw = _gcd(a, b).cast(wide), a.cast(wide), b.cast(wide)
    if dtypes.is_unsigned(wide): q = aw.div((g == 0).where(1, g), rounding_mode="trunc")
    else: q = (g == -1).where(-aw, aw.div(((g == 0) | (g == -1)).where(1, g), rounding_mode="trunc"))  # (INT_MIN / -1 traps in C)
    return (g == 0).where(0, (q * bw).abs()).cast(a.dtype)

  # ---------------- shrinkage activations
  def hardshrink(self: Tensor, lambd: float = 0.5) -> Tensor:
    """0 on [-lambd, lambd], x elsewhere (NaN passes); gradient 1 outside the band."""
    _float_only(self, "hardshrink")
    return ((self >= -lambd) & (self <= lambd)).where(0.0, self)
  def softshrink(self: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, 0 between (NaN passes)."""
    _float_only(self, "softshrink")
    if lambd < 0: raise RuntimeError(f"lambda must be in range [0, inf) for softshrink, but found {lambd}")
    return (self > lambd).where(self - lambd, (self < -lambd).where(self + lambd, self * 0))
  def tanhshrink(self: Tensor) -> Tensor:
    """x - tanh(x), as torch computes it (ints in the default float; bool raises, as torch's subtraction does)."""
    if self.dtype == dtypes.bool: raise RuntimeError("tanhshrink: subtraction with a bool tensor is not supported (torch)")
    x = self._float()
    return x - x.tanh()
