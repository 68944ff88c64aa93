import math, struct
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from fusegrad import Tensor
from fusegrad.dtype import dtypes, least_upper_dtype, result_dtype, truncate, float_to_bf16, bf16_to_float, to_dtype, ALL_DTYPES

class TestPromotion:
  @pytest.mark.parametrize("ds,want", [
    ((dtypes.float32,), dtypes.float32),
    ((dtypes.bool, dtypes.int8), dtypes.int8),
    ((dtypes.bool, dtypes.float16), dtypes.float16),
    ((dtypes.int8, dtypes.uint8), dtypes.int16),
    ((dtypes.int16, dtypes.uint16), dtypes.int32),
    ((dtypes.int32, dtypes.uint32), dtypes.int64),
    ((dtypes.int64, dtypes.uint8), dtypes.int64),
    ((dtypes.uint8, dtypes.uint32), dtypes.uint32),
    ((dtypes.int8, dtypes.int64), dtypes.int64),
    ((dtypes.int64, dtypes.float16), dtypes.float16),
    ((dtypes.float16, dtypes.bfloat16), dtypes.float32),
    ((dtypes.float16, dtypes.float32), dtypes.float32),
    ((dtypes.bfloat16, dtypes.float64), dtypes.float64),
    ((dtypes.uint8, dtypes.int8, dtypes.float16), dtypes.float16),
  ])
  def test_least_upper_dtype(self, ds, want):
    assert least_upper_dtype(*ds) == want
    assert least_upper_dtype(*reversed(ds)) == want

  def test_least_upper_matches_numpy_for_ints(self):
    names = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64"]
    for a in names:
      for b in names:
        want = np.promote_types(a, b).name
        assert least_upper_dtype(to_dtype(a), to_dtype(b)) == to_dtype(want), (a, b)

  def test_least_upper_is_an_upper_bound(self):
    for a in ALL_DTYPES:
      for b in ALL_DTYPES:
        u = least_upper_dtype(a, b)
        assert least_upper_dtype(u, a) == u and least_upper_dtype(u, b) == u, (a, b, u)

  @pytest.mark.parametrize("dt,scalar,want", [
    (dtypes.int32, 1.0, dtypes.float32),
    (dtypes.int8, 1, dtypes.int8),
    (dtypes.uint8, 300, dtypes.uint8),
    (dtypes.float16, 1.0, dtypes.float16),
    (dtypes.float16, 1, dtypes.float16),
    (dtypes.bool, 1, dtypes.int32),
    (dtypes.bool, 1.5, dtypes.float32),
    (dtypes.bool, True, dtypes.bool),
    (dtypes.bfloat16, 2, dtypes.bfloat16),
    (dtypes.int64, 2.5, dtypes.float32),
  ])
  def test_result_dtype(self, dt, scalar, want):
    assert result_dtype(dt, scalar) == want

  def test_tensor_promotion(self):
    assert (Tensor([1, 2], dtype=dtypes.int8) + Tensor([1, 2], dtype=dtypes.uint8)).dtype == dtypes.int16
    assert (Tensor([1, 2], dtype=dtypes.int8) + 1).dtype == dtypes.int8
    assert (Tensor([1, 2]) * 1.5).dtype == dtypes.float32
    assert (Tensor([1.0], dtype=dtypes.float16) * 2.0).dtype == dtypes.float16
    assert (Tensor([True]) + 1).dtype == dtypes.int32
    assert (Tensor([1, 2]) < 2).dtype == dtypes.bool
    assert Tensor([1, 2]).sum().dtype == dtypes.int32 and Tensor([1, 2], dtype=dtypes.uint8).sum().dtype == dtypes.uint32

class TestTruncate:
  @pytest.mark.parametrize("dt,x,want", [
    (dtypes.int8, 127, 127), (dtypes.int8, 128, -128), (dtypes.int8, -129, 127), (dtypes.int8, 255, -1),
    (dtypes.uint8, -1, 255), (dtypes.uint8, 256, 0), (dtypes.uint8, 300, 44),
    (dtypes.int16, 2**15, -2**15), (dtypes.uint16, 2**16 + 5, 5),
    (dtypes.int32, 2**31, -2**31), (dtypes.int32, 2**32 + 7, 7), (dtypes.uint32, -1, 2**32 - 1),
    (dtypes.int64, 2**63, -2**63), (dtypes.uint64, -1, 2**64 - 1),
    (dtypes.int32, 3.9, 3), (dtypes.int32, -3.9, -3),
  ])
  def test_int_wraparound(self, dt, x, want):
    out = truncate(dt, x)
    assert out == want and type(out) is int

  def test_bool(self):
    assert truncate(dtypes.bool, 2) is True and truncate(dtypes.bool, 0) is False and truncate(dtypes.bool, 0.5) is True

  def test_float_rounding(self):
    assert truncate(dtypes.float32, 0.1) == float(np.float32(0.1))
    assert truncate(dtypes.float64, 0.1) == 0.1
    assert truncate(dtypes.float16, 0.1) == float(np.float16(0.1))
    assert truncate(dtypes.float16, 65520.0) == math.inf and truncate(dtypes.float16, -1e6) == -math.inf
    assert truncate(dtypes.float32, 1e39) == math.inf
    assert truncate(dtypes.float32, 1) == 1.0 and type(truncate(dtypes.float32, 1)) is float
    assert math.isnan(truncate(dtypes.float16, math.nan))

  @settings(max_examples=200, deadline=None)
  @given(st.integers(-2**70, 2**70), st.sampled_from(["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]))
  def test_int_wraps_like_numpy(self, x, name):
    want = int(np.array(x & (2**64 - 1), dtype=np.uint64).astype(name))
    assert truncate(to_dtype(name), x) == want

  @settings(max_examples=200, deadline=None)
  @given(st.floats(allow_nan=False, width=64))
  def test_float16_matches_numpy(self, x):
    with np.errstate(over="ignore"):
      assert truncate(dtypes.float16, x) == float(np.float16(x))

class TestBFloat16:
  @pytest.mark.parametrize("x,bits", [
    (1.0, 0x3f80), (-2.0, 0xc000), (0.0, 0x0000), (-0.0, 0x8000), (math.inf, 0x7f80), (-math.inf, 0xff80),
    (1.0 + 2**-8, 0x3f80),          # exactly halfway between 1.0 and the next bf16: ties to even (down)
    (1.0 + 3 * 2**-8, 0x3f82),      # halfway between 0x3f81 and 0x3f82: ties to even (up)
    (1.0 + 2**-8 + 2**-20, 0x3f81), # just above halfway rounds up
    ((2 - 2**-8 + 2**-20) * 2.0**127, 0x7f80),  # past halfway above the largest bf16 (3.3895e38): inf
    ((2 - 2**-8 - 2**-20) * 2.0**127, 0x7f7f),  # just below halfway: the largest bf16
  ])
  def test_float_to_bf16(self, x, bits):
    assert float_to_bf16(x) == bits

  def test_nan_stays_nan(self):
    assert math.isnan(bf16_to_float(float_to_bf16(math.nan)))
    assert (float_to_bf16(math.nan) & 0x7f80) == 0x7f80 and (float_to_bf16(math.nan) & 0x7f) != 0

  def test_exact_values_roundtrip(self):
    for b in (0x3f80, 0x4049, 0xc2f7, 0x0001, 0x7f7f, 0x8080):
      assert float_to_bf16(bf16_to_float(b)) == b

  @settings(max_examples=300, deadline=None)
  @given(st.integers(0, 2**32 - 1))
  def test_round_to_nearest_even(self, f32bits):
    x = struct.unpack("f", struct.pack("I", f32bits))[0]
    if math.isnan(x): return
    lo = f32bits >> 16
    cand = [lo, lo + 1] if (lo & 0x7fff) != 0x7f80 else [lo]
    vals = [struct.unpack("f", struct.pack("I", c << 16))[0] if (c & 0x7fff) <= 0x7f80 else math.inf for c in cand]
    if len(cand) == 1: want = lo
    else:
      d0, d1 = abs(x - vals[0]), abs(vals[1] - x) if math.isfinite(vals[1]) else (math.inf if (f32bits & 0xffff) < 0x8000 else 0)
      want = cand[0] if d0 < d1 else cand[1] if d1 < d0 else cand[0] if cand[0] % 2 == 0 else cand[1]
    assert float_to_bf16(x) == want & 0xffff, f"{x!r} ({f32bits:#010x})"

  def test_tensor_bfloat16_cast(self):
    t = Tensor([1.0 + 2**-8, 1.0 + 3 * 2**-8, -3.5]).cast(dtypes.bfloat16)
    assert t.dtype == dtypes.bfloat16
    assert t.float().tolist() == [1.0, 1.0 + 2**-6, -3.5]

class TestDTypeBasics:
  def test_names_and_sizes(self):
    assert to_dtype("float32") == dtypes.float32 and to_dtype("half") == dtypes.float16
    assert to_dtype(np.dtype("int64")) == dtypes.int64
    assert dtypes.float32.itemsize == 4 and dtypes.bfloat16.itemsize == 2 and dtypes.bool.itemsize == 1
    assert dtypes.min(dtypes.int8) == -128 and dtypes.max(dtypes.uint16) == 65535
    with pytest.raises(TypeError, match="unknown dtype"): to_dtype("float7")

  def test_predicates(self):
    assert dtypes.is_float(dtypes.bfloat16) and not dtypes.is_float(dtypes.int8)
    assert dtypes.is_int(dtypes.uint64) and not dtypes.is_int(dtypes.bool)
    assert dtypes.is_unsigned(dtypes.uint8) and not dtypes.is_unsigned(dtypes.int8)
    assert dtypes.is_float(dtypes.float32.ptr(4)) and dtypes.float32.ptr(4).base == dtypes.float32

  def test_from_py(self):
    assert dtypes.from_py(True) == dtypes.bool and dtypes.from_py(3) == dtypes.int32 and dtypes.from_py(3.0) == dtypes.float32
    assert dtypes.from_py([1, 2.0]) == dtypes.float32 and dtypes.from_py([True, 1]) == dtypes.int32
