"""Tensor.randint draws integers from the generator's 32-bit words (not from a 24-bit float), so wide ranges reach every
value without bias; rand/uniform in float64 get 53 random bits. Statistical checks use fixed seeds and bounds of a few
sigma, so they are deterministic."""
import numpy as np
import pytest
from fusegrad import Tensor, dtypes
from fusegrad.helpers import TensorError

I32_MIN, I32_MAX, I64_MIN, I64_MAX = -2**31, 2**31 - 1, -2**63, 2**63 - 1

def draw(n, low, high, seed=0, **kw):
  Tensor.manual_seed(seed)
  return Tensor.randint(n, low=low, high=high, **kw).numpy()

def uniform_counts_ok(counts, sigmas=5.0) -> bool:
  # each bin is ~ Binomial(n, 1/m): within a few sigma of n/m
  n, m = counts.sum(), len(counts)
  p = 1 / m
  return bool(np.all(np.abs(counts - n * p) <= sigmas * np.sqrt(n * p * (1 - p))))

def reference(seed, n, low, high):
  """The values randint should give: floor(U * r / 2**(32k)) + low for U the k words the generator gives (first word high)."""
  r = high - low
  k = 2 if r <= 2**32 else 3
  Tensor.manual_seed(seed)
  words = Tensor._random_bits((k, n), None).numpy().astype(object)
  out = []
  for j in range(n):
    u = 0
    for i in range(k): u = (u << 32) | int(words[i][j])
    out.append((u * r >> (32 * k)) + low)
  return out

# ---------------- exact values against the reduction written in Python ints
@pytest.mark.parametrize("low,high,dt", [(0, 10, None), (-3, 2, None), (5, 6, None), (I32_MIN, I32_MAX, None), (0, 3 * 2**22, None),
                                         (I32_MIN, 2**31, dtypes.int64), (0, 2**40, dtypes.int64), (-2**40, 2**50, dtypes.int64),
                                         (I64_MIN, I64_MAX, dtypes.int64), (I64_MIN, 2**63, dtypes.int64), (0, 2**64, dtypes.uint64),
                                         (2**63, 2**64 - 5, dtypes.uint64), (0, 2**32, dtypes.uint32)])
def test_matches_reference(low, high, dt):
  got = draw(257, low, high, seed=3, dtype=dt)
  assert [int(v) for v in got] == reference(3, 257, low, high)

# ---------------- the reported bug: wide ranges had only 2**24 outcomes
def test_full_int32_range_low_bits_uniform():
  x = draw(20000, I32_MIN, I32_MAX).astype(np.int64)
  assert (x % 256 == 0).mean() < 0.01  # was 1.0: every value a multiple of 256
  assert uniform_counts_ok(np.bincount(x & 0xff, minlength=256), 5.5)
  assert uniform_counts_ok(np.bincount(x & 1, minlength=2))
  assert x.min() < I32_MIN + 2**26 and x.max() > I32_MAX - 2**26  # both ends reached
  assert (x < 0).mean() == pytest.approx(0.5, abs=0.02)

def test_residues_mod_small_primes():
  y = draw(100000, 0, 3 * 2**22)
  assert y.min() >= 0 and y.max() < 3 * 2**22
  for p in (2, 3, 5, 7, 11, 13):
    assert uniform_counts_ok(np.bincount(y % p, minlength=p)), p  # mod 3 was [0.332 0.376 0.292]

def test_int64_wide_range_low_bits():
  z = draw(20000, 0, 2**40, dtype=dtypes.int64)
  assert z.dtype == np.int64 and z.min() >= 0 and z.max() < 2**40
  assert (z % 65536 == 0).mean() < 0.01  # was 1.0
  assert uniform_counts_ok(np.bincount(z & 0xff, minlength=256), 5.5)
  for p in (3, 7):
    assert uniform_counts_ok(np.bincount(z % p, minlength=p))
  assert z.max() > 2**40 - 2**34 and z.min() < 2**34

def test_int64_full_range():
  z = draw(20000, I64_MIN, I64_MAX, dtype=dtypes.int64).astype(object)
  assert min(z) >= I64_MIN and max(z) < I64_MAX
  assert (np.array([v < 0 for v in z])).mean() == pytest.approx(0.5, abs=0.02)
  assert uniform_counts_ok(np.bincount([v & 0xff for v in z], minlength=256), 5.5)
  assert uniform_counts_ok(np.bincount([v % 3 for v in z], minlength=3))

def test_range_not_a_power_of_two_near_2_32():
  # 32 bits alone would give the values below 2**32 - r twice the weight of the rest: here the lowest third of the range
  r = 3 * 2**30
  x = draw(30000, 0, r, dtype=dtypes.int64)
  assert x.min() >= 0 and x.max() < r
  assert uniform_counts_ok(np.bincount(x // 2**30, minlength=3))

# ---------------- bounds
@pytest.mark.parametrize("low,high", [(5, 6), (-3, 2), (0, 2), (-1, 0), (I32_MAX - 1, I32_MAX), (I32_MIN, I32_MIN + 3)])
def test_tiny_ranges_hit_every_value(low, high):
  x = draw(3000, low, high)
  assert set(np.unique(x).tolist()) == set(range(low, high))
  assert uniform_counts_ok(np.bincount(x.astype(np.int64) - low, minlength=high - low))

def test_default_arguments_and_bounds():
  x = draw(5000, 0, 10)
  assert x.dtype == np.int32 and set(np.unique(x).tolist()) == set(range(10))
  Tensor.manual_seed(1)
  assert set(np.unique(Tensor.randint(2000).numpy()).tolist()) == set(range(10))  # low=0, high=10 by default
  assert set(np.unique(Tensor.randint(2000, high=3).numpy()).tolist()) == {0, 1, 2}

def test_bad_bounds():
  with pytest.raises(TensorError): Tensor.randint(3, low=5, high=5)
  with pytest.raises(TensorError): Tensor.randint(3, low=5, high=2)
  with pytest.raises(TensorError): Tensor.randint(3, low=-1, high=2**64, dtype=dtypes.int64)
  with pytest.raises(TypeError): Tensor.randint(3, low=0, high=2.5)
  assert Tensor.randint(3, low=np.int64(2), high=3.0).tolist() == [2, 2, 2]

# ---------------- dtypes and shapes
@pytest.mark.parametrize("dt,low,high", [(dtypes.int8, -128, 128), (dtypes.uint8, 0, 256), (dtypes.int16, -5, 5), (dtypes.int32, -7, 9),
                                         (dtypes.int64, -7, 9), (dtypes.uint32, 0, 2**32), (dtypes.float32, -4, 4), (dtypes.float64, 0, 2**40)])
def test_dtypes(dt, low, high):
  t = Tensor.randint(4000, low=low, high=high, dtype=dt)
  a = t.numpy()
  assert t.dtype == dt and a.min() >= low and a.max() < high and np.all(a == np.floor(a))
  if high - low <= 256: assert len(np.unique(a)) == high - low

def test_string_dtype():
  assert Tensor.randint(4, high=5, dtype="int64").dtype == dtypes.int64

@pytest.mark.parametrize("args,shape", [((), ()), ((0,), (0,)), ((3, 4), (3, 4)), (((2, 5),), (2, 5)), (([2, 1, 3],), (2, 1, 3))])
def test_shapes(args, shape):
  t = Tensor.randint(*args, low=-2, high=9)
  a = t.numpy()
  assert t.shape == shape and a.shape == shape and (a.size == 0 or (a.min() >= -2 and a.max() < 9))

def test_kwargs_pass_through():
  assert Tensor.randint(3, high=4, requires_grad=False).requires_grad is False

# ---------------- reproducibility, devices
@pytest.mark.parametrize("low,high,dt", [(0, 100, None), (I32_MIN, I32_MAX, None), (-2**40, 2**50, dtypes.int64)])
def test_reproducible(low, high, dt):
  a, b, c = draw(300, low, high, seed=42, dtype=dt), draw(300, low, high, seed=42, dtype=dt), draw(300, low, high, seed=43, dtype=dt)
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)

def test_consecutive_draws_differ():
  Tensor.manual_seed(7)
  a, b = Tensor.randint(200, low=0, high=2**30).numpy(), Tensor.randint(200, low=0, high=2**30).numpy()
  assert not np.array_equal(a, b)

def test_small_ranges_keep_their_stream():
  # the first word drawn is the high one, so small ranges give the values the float scaling gave (up to ~r / 2**24 of them)
  Tensor.manual_seed(5)
  Tensor.rand(6)
  assert Tensor.randint(5, low=0, high=1000).tolist() == [641, 151, 724, 380, 644]

@pytest.mark.parametrize("low,high,dt", [(0, 1000, None), (I32_MIN, I32_MAX, None), (-2**40, 2**50, dtypes.int64), (0, 2**64, dtypes.uint64)])
def test_cpu_and_python_devices_agree(low, high, dt):
  vals = {}
  for dev in ("CPU", "PYTHON"):
    Tensor.manual_seed(9)
    vals[dev] = Tensor.randint(2, 33, low=low, high=high, dtype=dt, device=dev).numpy()
  np.testing.assert_array_equal(vals["CPU"], vals["PYTHON"])

# ---------------- float64 rand / uniform: 53 random bits
def test_rand_float64_has_53_bits():
  Tensor.manual_seed(0)
  f = Tensor.rand(20000, dtype=dtypes.float64).numpy()
  assert f.dtype == np.float64 and f.min() >= 0 and f.max() < 1
  assert ((f * 2**24) % 1 == 0).mean() < 0.01  # was 1.0: every value a multiple of 2**-24
  low_bits = (f * 2**53).astype(np.uint64) & 0xff
  assert uniform_counts_ok(np.bincount(low_bits.astype(np.int64), minlength=256), 5.5)
  assert abs(f.mean() - 0.5) < 0.01

def test_uniform_float64_fine_grained():
  Tensor.manual_seed(1)
  u = Tensor.uniform(20000, low=-1.0, high=3.0, dtype=dtypes.float64).numpy()
  assert u.dtype == np.float64 and u.min() >= -1 and u.max() < 3
  assert (((u + 1) * 2**22) % 1 == 0).mean() < 0.01

def test_rand_float64_devices_agree_and_reproducible():
  vals = {}
  for dev in ("CPU", "PYTHON"):
    Tensor.manual_seed(4)
    vals[dev] = Tensor.rand(3, 7, dtype=dtypes.float64, device=dev).numpy()
  np.testing.assert_array_equal(vals["CPU"], vals["PYTHON"])
  assert vals["CPU"].shape == (3, 7)

def test_rand_float32_unchanged():
  Tensor.manual_seed(5)
  np.testing.assert_allclose(Tensor.rand(6).numpy(), [0.79928231, 0.41003066, 0.36180568, 0.45768708, 0.84672713, 0.45374888], rtol=1e-7)

def test_a_symbolic_shape_refused_before_the_generator_moves():
  """A draw of a symbolic shape left the counter an expression: every later draw raised too."""
  from fusegrad import Variable
  with pytest.raises(TypeError, match="shape of ints"): Tensor.rand(2, Variable("i", 1, 10).bind(3))
  Tensor.manual_seed(5)
  a = Tensor.rand(3).tolist()
  Tensor.manual_seed(5)
  with pytest.raises(TypeError): Tensor.randn(Variable("j", 1, 4).bind(2))
  assert Tensor.rand(3).tolist() == a
