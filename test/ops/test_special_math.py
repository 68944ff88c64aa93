"""Special functions and two-argument math (fusegrad/tensor/special.py) against torch: values over wide grids with their
edge points (0, -0.0, ±inf, NaN, subnormals, poles, the largest floats), the accuracy of the fitted functions in ulps
against mpmath, gradients, dtypes (float16, bfloat16, float64, ints), 0-d and zero-size tensors and broadcasting.

Methods: erfc erfinv lgamma digamma polygamma mvlgamma i0 sinc logit xlogy hypot fmax fmin heaviside ldexp float_power
nextafter frexp gcd lcm hardshrink softshrink tanhshrink."""
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fusegrad import Tensor, dtypes
from .helpers import helper_test_op, FG2TORCH

inf, nan = math.inf, math.nan
f16, bf16, f32, f64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
NP = {f32: np.float32, f64: np.float64}

def _np(t: torch.Tensor) -> np.ndarray:
  t = t.detach()
  return (t.float() if t.dtype == torch.bfloat16 else t).numpy()

TORCH2FG = {v: k for k, v in FG2TORCH.items()}

def _fg(t: torch.Tensor) -> Tensor:
  """The same data as a fusegrad tensor of the same dtype."""
  return Tensor(_np(t), dtype=TORCH2FG[t.dtype])

def _check(got: Tensor, want: torch.Tensor, rtol: float, atol: float = 0.0, name: str = ""):
  """Same shape and dtype; values within rtol/atol (NaN where torch has NaN, infinities equal)."""
  assert got.shape == tuple(want.shape), (name, got.shape, tuple(want.shape))
  assert FG2TORCH[got.dtype] == want.dtype, (name, got.dtype, want.dtype)
  g, w = got.numpy().astype(np.float64), _np(want).astype(np.float64)
  np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)

def _grid(dt) -> np.ndarray:
  mags = np.geomspace(1e-30, 1e30, 61)
  edge = [0.0, -0.0, inf, -inf, nan, 1.0, 2.0, 0.5, -0.5, 3e38, -3e38, 1e-40, -1e-40]
  return np.concatenate([np.linspace(-30, 30, 601), mags, -mags, edge]).astype(NP[dt])

# name: (fusegrad, torch, x filter, (rtol, atol) for float32, (rtol, atol) for float64)
UNARY = {
  "erfc": (Tensor.erfc, torch.erfc, None, (2e-6, 3e-45), (1e-14, 1e-320)),
  "lgamma": (Tensor.lgamma, torch.lgamma, lambda x: x >= 0, (2e-6, 0), (1e-14, 0)),
  # x < 0: next to the zeros of lgamma the reflection keeps an absolute error of a few ulps of lgamma(1 - x)
  "lgamma_neg": (Tensor.lgamma, torch.lgamma, lambda x: x < 0, (2e-6, 1e-4), (1e-14, 1e-12)),
  # next to digamma's zeros both torch and fusegrad (recurrence and reflection) keep only an absolute error
  "digamma": (Tensor.digamma, torch.digamma, None, (2e-6, 1e-5), (1e-14, 2e-13)),
  # torch's trigamma takes sin(pi x) of a rounded pi x for x < 0 (off by up to 1e-4 there) and keeps only 4 terms of its
  # series (float64 to 1e-10): x < 0 and float64's digits are checked against mpmath (test_accuracy_ulps)
  "polygamma1": (lambda t: t.polygamma(1), lambda t: torch.polygamma(1, t), lambda x: ~(x < 0), (2e-6, 0), (1e-9, 0)),
  "polygamma2": (lambda t: t.polygamma(2), lambda t: torch.polygamma(2, t), lambda x: np.abs(x) < 1e6, (5e-6, 1e-6), (1e-13, 1e-14)),
  "polygamma3": (lambda t: t.polygamma(3), lambda t: torch.polygamma(3, t), lambda x: np.abs(x) < 1e6, (5e-6, 1e-6), (1e-13, 1e-14)),
  "i0": (Tensor.i0, torch.i0, lambda x: ~(np.abs(x) > 1000), (2e-6, 0), (1e-14, 0)),
  "sinc": (Tensor.sinc, torch.sinc, None, (1e-6, 1e-7), (1e-14, 1e-16)),
  "hardshrink": (Tensor.hardshrink, F.hardshrink, None, (0, 0), (0, 0)),
  "softshrink": (lambda t: t.softshrink(0.75), lambda t: F.softshrink(t, 0.75), None, (0, 0), (0, 0)),
  "tanhshrink": (Tensor.tanhshrink, F.tanhshrink, None, (1e-6, 1e-7), (1e-14, 1e-16)),
}

@pytest.mark.parametrize("dt", [f32, f64])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_values(name, dt):
  fg, tf, keep, tol32, tol64 = UNARY[name]
  x = _grid(dt)
  if keep is not None: x = x[keep(x)]
  rtol, atol = tol32 if dt == f32 else tol64
  _check(fg(Tensor(x)), tf(torch.from_numpy(x)), rtol, atol, name)

UNIT = np.concatenate([np.linspace(-1, 1, 801), 1 - np.geomspace(1e-16, 0.25, 60), -1 + np.geomspace(1e-16, 0.25, 60),
                       np.geomspace(1e-38, 0.1, 40), -np.geomspace(1e-38, 0.1, 40), [0.0, -0.0, 1.0, -1.0, 1.5, -2.0, inf, -inf, nan, 0.75, -0.75]])

@pytest.mark.parametrize("dt", [f32, f64])
def test_erfinv_and_logit_values(dt):
  y = UNIT.astype(NP[dt])
  tol = 2e-6 if dt == f32 else 1e-14
  _check(Tensor(y).erfinv(), torch.erfinv(torch.from_numpy(y)), tol, 0, "erfinv")
  for eps in (None, 1e-6, 0.25, -1.0):  # a negative eps clamps nothing (torch)
    x = (y * 0.75 + 0.5).astype(NP[dt])  # [-0.25, 1.25] and the edges
    _check(Tensor(x).logit(eps), torch.logit(torch.from_numpy(x), eps), tol, 0, f"logit eps={eps}")

def test_erfc_tail_is_not_1_minus_erf():
  # 1 - erf(x) is 0 from x = 3.9 (float32) / 5.9 (float64) on; erfc keeps its relative accuracy into the subnormals
  for dt, top in ((f32, 9.1), (f64, 26.0)):
    x = np.linspace(0.5, top, 400).astype(NP[dt])
    _check(Tensor(x).erfc(), torch.erfc(torch.from_numpy(x)), 3e-6 if dt == f32 else 1e-14, 0, f"erfc {dt}")
    _check(Tensor(-x).erfc(), torch.erfc(torch.from_numpy(-x)), 1e-7 if dt == f32 else 1e-15, 0, f"erfc(-x) {dt}")

# ---------------------------------------------------------------- accuracy in ulps against mpmath

def _ulps(got: np.ndarray, true: np.ndarray, npdt) -> float:
  """The largest error in ulps of the true value where that is a finite normal number of npdt."""
  keep = np.isfinite(true.astype(npdt)) & (np.abs(true) >= np.finfo(npdt).tiny)
  got, true = got[keep].astype(np.float64), true[keep]
  return float(np.max(np.abs(got - true) / np.spacing(np.abs(true).astype(npdt)).astype(np.float64)))

@pytest.mark.parametrize("name", ["erfc", "erfinv", "lgamma", "digamma", "trigamma", "tetragamma", "i0"])
def test_accuracy_ulps(name):
  mpmath = pytest.importorskip("mpmath")
  mpmath.mp.dps = 30
  rng = np.random.default_rng(1)
  x = {"erfc": np.concatenate([rng.uniform(-6, 9, 120), rng.uniform(9, 26, 40)]),
       "erfinv": np.concatenate([rng.uniform(-1, 1, 120), 1 - np.exp(rng.uniform(-36, -1, 40))]),
       "lgamma": np.concatenate([rng.uniform(0, 12, 100), np.exp(rng.uniform(-20, 30, 60))]),
       "digamma": np.concatenate([rng.uniform(2, 12, 100), np.exp(rng.uniform(3, 30, 30)), -rng.uniform(0.05, 0.3, 20)]),
       "trigamma": np.concatenate([rng.uniform(0, 20, 100), -rng.uniform(0, 20, 60)]),
       "tetragamma": np.concatenate([rng.uniform(0, 20, 100), -rng.uniform(0, 20, 60)]),
       "i0": rng.uniform(-80, 80, 160)}[name]
  fg, ref = {"erfc": (Tensor.erfc, mpmath.erfc), "erfinv": (Tensor.erfinv, mpmath.erfinv), "lgamma": (Tensor.lgamma, mpmath.loggamma),
             "digamma": (Tensor.digamma, mpmath.digamma), "trigamma": (lambda t: t.polygamma(1), lambda v: mpmath.polygamma(1, v)),
             "tetragamma": (lambda t: t.polygamma(2), lambda v: mpmath.polygamma(2, v)), "i0": (Tensor.i0, lambda v: mpmath.besseli(0, v))}[name]
  # a few ulps in float32 and float64 (x < 0 of the polygammas: the reflection adds some next to the zeros of tetragamma)
  limit = {"trigamma": 8, "tetragamma": 8}.get(name, 7)
  for dt in (f32, f64):
    xa = x.astype(NP[dt])
    true = np.array([float(ref(mpmath.mpf(float(v)))) for v in xa])
    assert _ulps(fg(Tensor(xa)).numpy(), true, NP[dt]) <= limit, (name, dt)

# ---------------------------------------------------------------- dtypes, shapes

HALF_OPS = {"erfc": (Tensor.erfc, torch.erfc, -5, 5), "erfinv": (Tensor.erfinv, torch.erfinv, -1, 1), "lgamma": (Tensor.lgamma, torch.lgamma, -5, 20),
            "digamma": (Tensor.digamma, torch.digamma, 0.1, 20), "polygamma": (lambda t: t.polygamma(2), lambda t: torch.polygamma(2, t), 0.2, 20),
            "i0": (Tensor.i0, torch.i0, -10, 10), "sinc": (Tensor.sinc, torch.sinc, -5, 5), "logit": (Tensor.logit, torch.logit, 0, 1),
            "hardshrink": (Tensor.hardshrink, F.hardshrink, -2, 2), "softshrink": (Tensor.softshrink, F.softshrink, -2, 2),
            "tanhshrink": (Tensor.tanhshrink, F.tanhshrink, -3, 3)}

@pytest.mark.parametrize("dt", [f16, bf16])
def test_half_dtypes_compute_in_float32(dt):
  # fusegrad computes these in float32 and rounds once, as torch does except in logit and polygamma (which round their
  # intermediates to the narrow dtype): the same up to a rounding or two of the narrow dtype
  rtol = 2.0 ** -10 if dt == f16 else 2.0 ** -7
  for name, (fg, tf, lo, hi) in HALF_OPS.items():
    x = torch.linspace(lo, hi, 97, dtype=FG2TORCH[dt])
    _check(fg(_fg(x)), tf(x), rtol, 1e-3 if dt == f16 else 1e-2, name)

@pytest.mark.parametrize("name", ["erfc", "lgamma", "digamma", "polygamma", "i0", "logit", "tanhshrink"])
def test_int_and_bool_inputs_give_float32(name):
  fg, tf = HALF_OPS[name][:2]
  for x in (torch.tensor([-3, 0, 1, 2, 7], dtype=torch.int32), torch.tensor([True, False])):
    if name == "tanhshrink" and x.dtype == torch.bool:
      with pytest.raises(RuntimeError): Tensor(x.numpy()).tanhshrink()
      continue
    _check(fg(Tensor(x.numpy())), tf(x), 2e-6, 1e-6, name)

@pytest.mark.parametrize("shape", [(), (2, 0, 3)])
def test_zero_d_and_empty(shape):
  # every op here is elementwise: a zero-size tensor takes the same path through each, so a few of them stand for all
  x, x1 = np.full(shape, 0.25, np.float32), np.full(shape, 1.25, np.float32)
  for name, (fg, tf, _, _) in HALF_OPS.items():
    if shape == () or name in ("erfc", "lgamma", "polygamma", "i0"): _check(fg(Tensor(x)), tf(torch.from_numpy(x)), 2e-6, 0, name)
  binary = ("xlogy", "hypot", "fmax", "fmin", "nextafter", "float_power") if shape == () else ("xlogy", "nextafter")
  for name, fg, tf in [("mvlgamma", lambda t: (t + 2).mvlgamma(3), lambda t: (t + 2).mvlgamma(3))] + [(n, getattr(Tensor, n), getattr(torch, n))
                       for n in binary]:
    got = fg(Tensor(x), Tensor(x1)) if name != "mvlgamma" else fg(Tensor(x))
    want = tf(torch.from_numpy(x), torch.from_numpy(x1)) if name != "mvlgamma" else tf(torch.from_numpy(x))
    _check(got, want, 2e-6, 0, name)
  i, i6 = np.full(shape, 12, np.int32), np.full(shape, 18, np.int32)
  for n in ("gcd", "lcm"): _check(getattr(Tensor(i), n)(Tensor(i6)), getattr(torch, n)(torch.from_numpy(i), torch.from_numpy(i6)), 0, 0, n)
  m, e = Tensor(x).frexp()
  tm, te = torch.frexp(torch.from_numpy(x))
  _check(m, tm, 0, 0, "frexp mantissa")
  _check(e, te, 0, 0, "frexp exponent")
  _check(Tensor(x).ldexp(Tensor(i)), torch.ldexp(torch.from_numpy(x), torch.from_numpy(i)), 0, 0, "ldexp")
  _check(Tensor(x).heaviside(Tensor(x)), torch.heaviside(torch.from_numpy(x), torch.from_numpy(x)), 0, 0, "heaviside")

# ---------------------------------------------------------------- gradients

GRAD_OPS = [  # (torch, fusegrad, low, high)
  (torch.erfc, Tensor.erfc, -4, 4), (torch.erfinv, Tensor.erfinv, -0.99, 0.99), (torch.lgamma, Tensor.lgamma, 0.05, 15),
  (torch.digamma, Tensor.digamma, 0.05, 15), (lambda t: torch.polygamma(1, t), lambda t: t.polygamma(1), 0.1, 15),
  (lambda t: torch.polygamma(2, t), lambda t: t.polygamma(2), 0.2, 15), (torch.i0, Tensor.i0, -16, 16), (torch.sinc, Tensor.sinc, -3, 3),
  (torch.logit, Tensor.logit, 0.01, 0.99), (lambda t: torch.logit(t, 0.2), lambda t: t.logit(0.2), 0, 1),
  (lambda t: (t + 3).mvlgamma(4), lambda t: (t + 3).mvlgamma(4), -1, 5), (F.hardshrink, Tensor.hardshrink, -2, 2),
  (lambda t: F.softshrink(t, 1.0), lambda t: t.softshrink(1.0), -3, 3), (F.tanhshrink, Tensor.tanhshrink, -3, 3),
  (lambda t: torch.frexp(t)[0], lambda t: t.frexp()[0], -100, 100), (lambda t: torch.float_power(t, 3), lambda t: t.float_power(3), -3, 3),
]

@pytest.mark.parametrize("i,dt", [(i, f32) for i in range(len(GRAD_OPS))] + [(i, f64) for i in (0, 1, 2, 3, 5, 6)])
def test_gradients(i, dt):
  tf, fg, lo, hi = GRAD_OPS[i]
  tight = dt == f64  # (not trigamma in float64: torch's keeps 1e-10 there)
  helper_test_op([(5, 7)], tf, fg, low=lo, high=hi, dtype=dt, atol=1e-12 if tight else 1e-5, rtol=1e-12 if tight else 2e-5,
                 grad_atol=1e-10 if tight else 1e-4, grad_rtol=1e-9 if tight else 1e-4)

def test_gradients_at_edges():
  # lgamma, digamma at negative non-integers; erfinv at ±1 (inf); logit at 0, 1 and outside; sinc at 0; i0 at 0 and 12
  helper_test_op(None, torch.lgamma, Tensor.lgamma, vals=[[-0.5, -1.5, -2.25, -7.75, 1.0, 2.0]], dtype=f64, atol=1e-13, grad_atol=1e-11)
  helper_test_op(None, torch.digamma, Tensor.digamma, vals=[[-0.5, -1.5, -2.25, -7.75, 1.0, 2.0]], dtype=f64, atol=1e-13, grad_atol=1e-10)
  helper_test_op(None, torch.erfinv, Tensor.erfinv, vals=[[-1.0, 1.0, 0.0, -0.0, 0.999999]], dtype=f32, atol=1e-6, grad_atol=1e-4)
  for eps in (None, 0.1):
    helper_test_op(None, lambda t: torch.logit(t, eps), lambda t: t.logit(eps), vals=[[0.0, 1.0, -1.0, 2.0, 0.1, 0.9, 0.5]], dtype=f32)
  helper_test_op(None, torch.sinc, Tensor.sinc, vals=[[0.0, -0.0, 1e-3, 1.0, 2.5]], dtype=f32)
  helper_test_op(None, torch.i0, Tensor.i0, vals=[[0.0, -0.0, 12.0, -12.0, 11.99, 12.01, 30.0]], dtype=f64, rtol=1e-13, grad_rtol=1e-12)
  helper_test_op(None, torch.erfc, Tensor.erfc, vals=[[0.0, 0.5, -0.5, 0.49, 5.0, -5.0, 30.0]], dtype=f64, atol=0, rtol=1e-14, grad_rtol=1e-13)

# ---------------------------------------------------------------- two-argument ops

BINARY = {
  "xlogy": (Tensor.xlogy, torch.xlogy), "hypot": (Tensor.hypot, torch.hypot), "fmax": (Tensor.fmax, torch.fmax),
  "fmin": (Tensor.fmin, torch.fmin), "float_power": (Tensor.float_power, torch.float_power),
}

@pytest.mark.parametrize("shapes", [[(3, 1), (1, 4)], [(), (2, 3)]])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_broadcast_and_gradients(name, shapes):
  fg, tf = BINARY[name]
  helper_test_op(shapes, tf, fg, low=0.1, high=3, atol=1e-6, rtol=1e-5)

def test_binary_edges():
  # xlogy: NaN wherever y is NaN, even where x == 0; x's gradient log(y), 0 where x == 0 and y <= 0 (torch's). hypot: no
  # overflow or underflow, inf beside NaN, NaN gradients at the origin. fmax/fmin: ties give self the gradient, NaN the other
  x = [0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 3.0, -1.0, inf, -0.0, nan, 2.0, 0.0, 3e38, 1e-45, 0.0, 1.0]
  y = [nan, 0.0, inf, nan, 0.0, -1.0, -1.0, 2.0, 1.0, 0.0, 1.0, 2.0, 0.5, 3e38, 1e-45, -2.0, 1.0]
  for name in ("xlogy", "hypot", "fmax", "fmin", "float_power"):
    helper_test_op(None, BINARY[name][1], BINARY[name][0], vals=[x, y], atol=1e-6, rtol=1e-6)

@pytest.mark.parametrize("dts", [(dtypes.uint8, dtypes.int16), (dtypes.int64, f32), (f16, f32), (bf16, bf16), (dtypes.bool, dtypes.bool)])
def test_binary_dtypes(dts):
  rng = np.random.default_rng(3)
  a, b = rng.uniform(0.5, 4, (2, 5)), rng.uniform(0.5, 4, (2, 5))
  def both(d, v):
    t = torch.from_numpy(v > 2 if d == dtypes.bool else v).to(FG2TORCH[d])
    return _fg(t), t
  (fa, ta), (fb, tb) = both(dts[0], a), both(dts[1], b)
  half = f16 in dts or bf16 in dts
  for name, (fg, tf) in BINARY.items():
    if name == "hypot" and not any(dtypes.is_float(d) for d in dts):
      with pytest.raises(RuntimeError): fa.hypot(fb)
      continue
    _check(fg(fa, fb), tf(ta, tb), 1e-2 if half else 1e-6, 0, f"{name} {dts}")
  if any(dtypes.is_float(d) for d in dts):
    _check(fa.nextafter(fb), torch.nextafter(ta, tb), 0, 0, "nextafter")
  else:
    with pytest.raises(RuntimeError): fa.nextafter(fb)

def test_scalar_operands():
  x = np.array([0.0, 0.5, 2.0, 7.0], np.float32)
  t = torch.from_numpy(x)
  _check(Tensor(x).xlogy(3.0), torch.xlogy(t, 3.0), 1e-6)
  _check(Tensor(x).hypot(2.0), torch.hypot(t, torch.tensor(2.0)), 1e-6)
  _check(Tensor(x).fmax(1.0), torch.fmax(t, torch.tensor(1.0)), 0)
  _check(Tensor(x).fmin(nan), torch.fmin(t, torch.tensor(nan)), 0)
  _check(Tensor(x).float_power(2), torch.float_power(t, 2), 1e-15)
  _check(Tensor(x).ldexp(3), torch.ldexp(t, torch.tensor(3)), 0)
  _check(Tensor(x).nextafter(1.0), torch.nextafter(t, torch.tensor(1.0)), 0)

# ---------------------------------------------------------------- bits: nextafter, frexp, ldexp

EDGE = [0.0, -0.0, 1.0, -1.0, inf, -inf, nan, 1e-45, -1e-45, 1e-40, 3.4028234663852886e38, 1.5, 0.1, 65504.0, 6e-8, 2.0 ** -133, 1e-300, 5e-324]

@pytest.mark.parametrize("dt", [f16, bf16, f32, f64])
def test_nextafter(dt):
  a = np.array(EDGE * 3, np.float64)
  b = np.array([1.0] * len(EDGE) + [-1.0] * len(EDGE) + EDGE[1:] + EDGE[:1])
  ta, tb = torch.from_numpy(a).to(FG2TORCH[dt]), torch.from_numpy(b).to(FG2TORCH[dt])
  got = _fg(ta).nextafter(_fg(tb))
  _check(got, torch.nextafter(ta, tb), 0, 0, f"nextafter {dt}")
  assert not got.requires_grad

@pytest.mark.parametrize("dt", [f16, bf16, f32, f64])
def test_frexp(dt):
  x = torch.tensor(EDGE + [-v for v in EDGE] + [3.0, 1e38, 2.0 ** -126, 2.0 ** -149, 1e-310, 0.75], dtype=torch.float64).to(FG2TORCH[dt])
  m, e = _fg(x).frexp()
  tm, te = torch.frexp(x)
  assert type(m.frexp()).__name__ == "frexp" and Tensor([1.0]).frexp().exponent.dtype == dtypes.int32
  _check(m, tm, 0, 0, "mantissa")
  _check(e, te, 0, 0, "exponent")
  assert np.array_equal(np.signbit(m.numpy().astype(np.float64)), np.signbit(_np(tm).astype(np.float64)))
  with pytest.raises(RuntimeError): Tensor([1, 2]).frexp()

@pytest.mark.parametrize("dt", [f16, bf16, f32, f64])
def test_ldexp_int_exponent_is_exact(dt):
  # torch's ldexp with an integer exponent scales exactly and rounds once (subnormal results, overflow to inf, 0 * 2^1000 = 0)
  x = torch.tensor([1e-30, 3.0, 0.0, -0.0, inf, nan, 1.5, 1e-45, -2.5, 3e38, 1e-40, 1.0, 1e-300, 5e-324, 0.75, -0.7],
                   dtype=torch.float64).to(FG2TORCH[dt])
  e = torch.tensor([200, -150, 1000, 5, -3, 7, -149, 149, 127, -300, 60, -1075, 1100, 1074, -1074, -1076])
  for edt in ((torch.int16, torch.int32, torch.int64) if dt == f32 else (torch.int32,)):
    _check(_fg(x).ldexp(_fg(e.to(edt))), torch.ldexp(x, e.to(edt)), 0, 0, f"ldexp {dt} {edt}")
  rng = np.random.default_rng(5)
  xs, es = torch.from_numpy(rng.standard_normal(500)).to(FG2TORCH[dt]), torch.from_numpy(rng.integers(-170, 170, 500))
  _check(_fg(xs).ldexp(_fg(es)), torch.ldexp(xs, es), 0, 0, f"ldexp random {dt}")

@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")  # (torch's, for a 0-d input)
def test_ldexp_dtypes_and_float_exponent():
  t = torch.tensor
  for x, e in [(t([3]), t([2])), (t([3], dtype=torch.int32), t([2.5], dtype=torch.float16)), (t([3.0]), t([2], dtype=torch.uint8)),
               (t([1e-3], dtype=torch.float16), t([20.0], dtype=torch.float16)), (t([1e-3], dtype=torch.float16), t([20])),
               (t([1e-30]), t([200.0])), (t([0.0]), t([200.0])), (t(3.0), t([2, 3])), (t([3.0]), t(2)), (t(3.0, dtype=torch.float64), t([2]))]:
    _check(_fg(x).ldexp(_fg(e)), torch.ldexp(x, e), 1e-6, 0, f"ldexp {x.dtype} {e.dtype}")
  with pytest.raises(RuntimeError): Tensor([1.0]).ldexp(Tensor([True]))

def test_ldexp_gradient():
  # x's gradient is 2^e (torch computes 2^e in the integer dtype, which gives 0 for e < 0: fusegrad gives 2^e there too)
  helper_test_op(None, lambda x, e: torch.ldexp(x, e.long()), lambda x, e: x.ldexp(e.cast(dtypes.int64)), vals=[[1.0, -2.0, 0.0, 3.5], [0, 3, 5, 10]], dtype=[f32, f32])
  x = Tensor([1.0, 3.0], requires_grad=True)
  x.ldexp(Tensor([-2, -3])).sum().backward()
  assert x.grad.numpy().tolist() == [0.25, 0.125]
  helper_test_op([(3, 4), (3, 4)], torch.ldexp, Tensor.ldexp, low=-3, high=3)  # float exponent: both get gradients

# ---------------------------------------------------------------- integers: gcd, lcm

INT_TYPES = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.int64]

@pytest.mark.parametrize("dt", INT_TYPES)
def test_gcd_lcm(dt):
  info = torch.iinfo(FG2TORCH[dt])
  rng = np.random.default_rng(7)
  a = rng.integers(info.min, info.max, 400, dtype=np.int64, endpoint=True)
  b = rng.integers(info.min, info.max, 400, dtype=np.int64, endpoint=True)
  small = rng.integers(max(info.min, -60), 60, (2, 400))
  fib = [0, 1]
  while fib[-1] <= info.max: fib.append(fib[-1] + fib[-2])
  edge_a = [0, 0, info.min, info.min, info.max, 1, info.min, fib[-2], fib[-3], 12, -4 if info.min < 0 else 4]
  edge_b = [0, 5, 0, info.min, info.min, info.max, 6, fib[-3], fib[-2], info.min, -6 if info.min < 0 else 6]
  a = np.concatenate([a, small[0], edge_a]).astype(np.int64)
  b = np.concatenate([b, small[1], edge_b]).astype(np.int64)
  if dt != dtypes.int8 and dt != dtypes.int16 and info.min < 0:  # torch's lcm of INT_MIN and -1 divides INT_MIN by -1 (SIGFPE)
    bad = torch.gcd(torch.from_numpy(a).to(FG2TORCH[dt]), torch.from_numpy(b).to(FG2TORCH[dt])) == -1
    a, b = a[~bad.numpy()], b[~bad.numpy()]
  ta, tb = torch.from_numpy(a).to(FG2TORCH[dt]), torch.from_numpy(b).to(FG2TORCH[dt])
  fa, fb = _fg(ta), _fg(tb)
  _check(fa.gcd(fb), torch.gcd(ta, tb), 0, 0, "gcd")
  _check(fa.lcm(fb), torch.lcm(ta, tb), 0, 0, "lcm")

def test_gcd_lcm_broadcast_unsupported_dtypes_and_unsigned():
  a, b = np.array([[12], [-18], [0]], np.int32), np.array([8, -27, 0, 1], np.int64)
  _check(Tensor(a).gcd(Tensor(b)), torch.gcd(torch.from_numpy(a), torch.from_numpy(b)), 0, 0, "gcd broadcast")
  _check(Tensor(a).lcm(Tensor(b)), torch.lcm(torch.from_numpy(a), torch.from_numpy(b)), 0, 0, "lcm broadcast")
  for bad in (Tensor([1.0]), Tensor([True]), Tensor([1.0], dtype=f16)):
    with pytest.raises(RuntimeError): bad.gcd(bad)
    with pytest.raises(RuntimeError): bad.lcm(bad)
  # uint32 (torch has no kernel): against Python's math.gcd
  rng = np.random.default_rng(9)
  u, v = rng.integers(0, 2 ** 32, 300, dtype=np.uint64).astype(np.uint32), rng.integers(0, 2 ** 32, 300, dtype=np.uint64).astype(np.uint32)
  got = Tensor(u).gcd(Tensor(v)).numpy()
  assert got.dtype == np.uint32 and [int(g) for g in got] == [math.gcd(int(p), int(q)) for p, q in zip(u, v)]
  assert Tensor([4], dtype=dtypes.uint32).lcm(Tensor([6], dtype=dtypes.uint32)).numpy().tolist() == [12]

# ---------------------------------------------------------------- the rest

def test_heaviside():
  x = np.array([-1.0, 0.0, 2.0, nan, -0.0, inf, -inf], np.float32)
  for v in (np.array([0.5], np.float32), np.array([nan, 3, 4, 5, 6, 7, 8], np.float32)):
    _check(Tensor(x).heaviside(Tensor(v)), torch.heaviside(torch.from_numpy(x), torch.from_numpy(v)), 0, 0)
  for d in (dtypes.int32, dtypes.bool, f16, dtypes.uint8):
    xs, vs = torch.tensor([-3, 0, 5, 0]).to(FG2TORCH[d]), torch.tensor([7]).to(FG2TORCH[d])
    _check(_fg(xs).heaviside(_fg(vs)), torch.heaviside(xs, vs), 0, 0, str(d))
  with pytest.raises(RuntimeError): Tensor([1.0]).heaviside(Tensor([1]))
  g = Tensor([1.0, 0.0], requires_grad=True).heaviside(Tensor([0.5]))
  assert not g.requires_grad  # piecewise constant, no gradient (torch: not implemented)

def test_float_power_dtypes():
  for x, e in [(torch.tensor([2, 3]), torch.tensor([2, -1])), (torch.tensor([2.0, -3.0]), 0.5), (torch.tensor([2.0], dtype=torch.float16), 2),
               (torch.tensor([-2.0, 4.0]), torch.tensor([3], dtype=torch.int32)), (torch.tensor([True]), torch.tensor([True]))]:
    _check(_fg(x).float_power(_fg(e) if isinstance(e, torch.Tensor) else e), torch.float_power(x, e), 1e-15, 0, "float_power")

def test_polygamma_edges_and_errors():
  x = np.array([inf, -inf, nan, 0.0, -0.0, -1.0, -2.0, 1e-30, -1e30, 1e30, -1.5, -0.5, 1.0], np.float32)
  for n in (0, 2, 3, 4):  # torch's values at the poles and at ±inf
    _check(Tensor(x).polygamma(n), torch.polygamma(n, torch.from_numpy(x)), 1e-5, 0, f"polygamma({n})")
  keep = np.array([True, True, True, True, True, False, False, True, False, True, True, True, True])  # torch's trigamma: sin(pi x) of a rounded pi x at -1, -2
  _check(Tensor(x[keep]).polygamma(1), torch.polygamma(1, torch.from_numpy(x[keep])), 1e-5, 0, "polygamma(1)")
  assert Tensor([-1.0, -2.0]).polygamma(1).numpy().tolist() == [inf, inf]  # the pole (torch: 1.3e15 from the rounded pi)
  _check(Tensor(x).digamma(), torch.digamma(torch.from_numpy(x)), 1e-5, 0, "digamma")
  with pytest.raises(RuntimeError): Tensor([1.0]).polygamma(-1)
  with pytest.raises(TypeError): Tensor([1.0]).polygamma(1.5)
  with pytest.raises(NotImplementedError): Tensor([1.0]).polygamma(161)
  helper_test_op(None, lambda t: torch.polygamma(3, t), lambda t: t.polygamma(3), vals=[[-0.5, -1.25, 0.3, 4.0]], dtype=f64, rtol=1e-12, grad_rtol=1e-11)

def test_mvlgamma_domain():
  x = np.array([[2.5, 3.0], [7.25, 1.6]], np.float32)
  for p in (1, 3):
    _check(Tensor(x).mvlgamma(p), torch.mvlgamma(torch.from_numpy(x), p), 2e-6, 0, f"mvlgamma p={p}")
  _check(Tensor([nan]).mvlgamma(2), torch.mvlgamma(torch.tensor([nan]), 2), 0, 0, "nan passes the domain check (torch)")
  _check(Tensor([3, 4]).mvlgamma(2), torch.mvlgamma(torch.tensor([3, 4]), 2), 2e-6, 0, "int input")
  with pytest.raises(RuntimeError): Tensor([0.4, 3.0]).mvlgamma(2)
  with pytest.raises(RuntimeError): Tensor([3.0]).mvlgamma(0)

def test_shrink_errors():
  for op in (Tensor.hardshrink, Tensor.softshrink):
    with pytest.raises(RuntimeError): op(Tensor([1, 2]))
  with pytest.raises(RuntimeError): Tensor([1.0]).softshrink(-1.0)
  _check(Tensor([1.0, -2.0]).hardshrink(-1.0), F.hardshrink(torch.tensor([1.0, -2.0]), -1.0), 0, 0, "negative lambd")
