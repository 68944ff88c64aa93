"""8- and 16-bit ints read as float32 inside vector loops (quantized weights): one widening vector load per vector
instead of a load per lane, and a block's scale read once for all the lanes that share it. Run on the host ISA here and
under CPU_ISA=avx2 by test_cpu_isa.py."""
import re
import numpy as np
import pytest
from fusegrad import Tensor, GlobalCounters, dtypes
from fusegrad.codegen.program import _render
from fusegrad.schedule import create_schedule

EXTREMES = {np.int8: [-128, 127, 0, -1], np.uint8: [0, 255, 128, 1], np.int16: [-32768, 32767, 0, -1]}

def kernel_source(t: Tensor) -> str: return _render("CPU", create_schedule([t.uop])[0][-1].ast, None).src

@pytest.mark.parametrize("np_dtype,name", [(np.int8, "i8"), (np.uint8, "u8"), (np.int16, "i16")])
@pytest.mark.parametrize("n", [16, 24, 40, 64])
def test_small_int_to_float_loads(np_dtype, name, n):
  rng = np.random.default_rng(n)
  info = np.iinfo(np_dtype)
  a = rng.integers(info.min, info.max, (3, n), endpoint=True).astype(np_dtype)
  a[0, :4] = EXTREMES[np_dtype]
  s = rng.standard_normal((3, 1), dtype=np.float32)
  x = Tensor(a).realize()
  out = x.cast(dtypes.float32) * Tensor(s) + 1
  np.testing.assert_array_equal(out.numpy(), a.astype(np.float32) * s + 1)
  red = (x.cast(dtypes.float32) * 0.5).sum(1)
  np.testing.assert_allclose(red.numpy(), (a.astype(np.float32) * 0.5).sum(1), rtol=1e-6)
  assert re.search(rf"ld{name}_f32x\d+\(data1", kernel_source((x.cast(dtypes.float32) * 0.25).sum(1)))

@pytest.mark.parametrize("out_dim,in_dim,block", [(24, 96, 32), (8, 256, 16), (40, 64, 32)])
def test_block_scaled_matvec(out_dim, in_dim, block):
  # codes (out, in) int8 times one scale per block of `block` inputs: every lane of a vector that shares a block reads
  # the same scale; a vector that spans two blocks must not
  rng = np.random.default_rng(in_dim)
  codes = rng.integers(-128, 128, (out_dim, in_dim)).astype(np.int8)
  scales = (rng.random((out_dim, in_dim // block)) * 0.1).astype(np.float16)
  w = (codes.astype(np.float32).reshape(out_dim, -1, block) * scales.astype(np.float32)[..., None]).reshape(out_dim, in_dim)
  c, sc = Tensor(codes).realize(), Tensor(scales).realize()
  wt = (c.reshape(out_dim, -1, block).cast(dtypes.float32) * sc.cast(dtypes.float32).unsqueeze(-1)).reshape(out_dim, in_dim)
  for rows in (1, 5):
    x = rng.standard_normal((rows, in_dim), dtype=np.float32)
    GlobalCounters.reset()
    got = (Tensor(x) @ wt.T).numpy()
    assert GlobalCounters.kernel_count == 1
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-5, atol=1e-4)

@pytest.mark.parametrize("p", [0, 2, 5])
def test_index_with_a_lane_term_beside_a_division_is_gathered(p):
  # tiling a row then regrouping it reads (x + lane) // 24 * 8 + lane: the quotient is the same in each vector's lanes
  # but the index is not, so it must not become one broadcast load (it once did: every lane read lane 0's value)
  from fusegrad import Variable
  cn = np.arange(12 * 2 * 8, dtype=np.float32).reshape(1, 12, 2, 8)
  pos = Variable("pos", 0, 11).bind(p)
  got = Tensor(cn)[:, 0:pos + 1].repeat((1, 1, 1, 3)).reshape(1, pos + 1, 6, 8)
  np.testing.assert_array_equal(got.numpy(), np.tile(cn[:, :p + 1], (1, 1, 1, 3)).reshape(1, p + 1, 6, 8))
  flat = Tensor(cn[0, :p + 1]).repeat((1, 1, 3)).pad(((0, 3), None, None))[:p + 1].reshape(p + 1, 6, 8)
  np.testing.assert_array_equal(flat.numpy(), np.tile(cn[0, :p + 1], (1, 1, 3)).reshape(p + 1, 6, 8))

@pytest.mark.parametrize("n", [64, 24, 6])
def test_vector_rounding(n):
  # floor, ceil, trunc and round (half to even) as one vector instruction: ties, -0.0, huge values, NaN and infinities
  vals = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 1e10, -3.7, 3.7, np.nan, np.inf, -np.inf, 0.49999997, 8388609.0, -1.2], np.float32)
  x = np.resize(vals, n)
  t = Tensor(x)
  for name, ref in [("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc), ("round", np.round)]:
    got, want = getattr(t * 1, name)().numpy(), ref(x)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want)), name
  assert re.search(r"round_f32x\d+\(", kernel_source((Tensor(vals) * 1).floor()))

def test_nibbles_of_bytes_as_float_math():
  # the 4-bit packed weights' expansion: low b - 16*floor(b/16), high floor(b/16), on rows regrouped by // and %
  b = np.arange(256, dtype=np.uint8).reshape(8, 2, 16)
  q = Tensor(b).cast(dtypes.float32)
  hi = (q * 0.0625).floor()
  sel = Tensor.arange(2).float().reshape(2, 1)
  both = ((q - hi * 16).unsqueeze(-2) * (1 - sel) + hi.unsqueeze(-2) * sel).reshape(8, 2 * 2 * 16)
  want = np.stack([b & 15, b >> 4], -2).reshape(8, 64).astype(np.float32)
  np.testing.assert_array_equal(both.numpy(), want)
  np.testing.assert_array_equal((both * 2).sum(1).numpy(), want.sum(1) * 2)

@pytest.mark.parametrize("mod,div,off", [(32, 16, 0), (64, 16, 16), (32, 16, 8), (24, 16, 0), (32, 8, 0), (48, 16, 0), (32, 32, 0)])
def test_a_remainder_inside_a_quotient(mod, div, off):
  # a 4-bit weight's nibble is ((i % 32) // 16): within one vector i % 32 runs on by 1 from a multiple of the width, so
  # the quotient is one value for all lanes (one vector conversion, not a division per lane); an offset or modulus
  # that is no multiple of the width can wrap inside a vector, and is computed lane by lane
  def nibble_select(): return (((Tensor.arange(256) + off) % mod) // div).float() * 1.5
  if (mod, div, off) == (32, 16, 0): assert "__builtin_convertvector" in (src := kernel_source(nibble_select())) and "(float)(" not in src
  np.testing.assert_array_equal(nibble_select().numpy(), (((np.arange(256) + off) % mod) // div).astype(np.float32) * 1.5)

@pytest.mark.parametrize("dtype,np_dtype", [(dtypes.int8, np.int8), (dtypes.uint8, np.uint8), (dtypes.int16, np.int16)])
@pytest.mark.parametrize("off", [0, 100, 120, 250])
def test_a_narrowing_int_cast_that_wraps_inside_a_vector(dtype, np_dtype, off):
  # (i + off) cast to int8 wraps at 127 -> -128 inside a vector: it is no constant step from lane to lane, and its
  # float conversion and comparisons must come out lane by lane, as numpy's
  i = Tensor.arange(256) + off
  want = (np.arange(256) + off).astype(np_dtype)
  np.testing.assert_array_equal((i.cast(dtype).float() * 1.5).numpy(), want.astype(np.float32) * 1.5)
  np.testing.assert_array_equal((i.cast(dtype) < 5).numpy(), want < 5)

@pytest.mark.parametrize("n", [64, 24, 6])
def test_float16_stores(n):
  # float32 vectors stored as float16 in one conversion (vcvtps2ph): round to nearest even, overflow to inf,
  # subnormals, -0.0 and NaN as C's (_Float16) cast gives them
  vals = np.array([0.1, -2.5, 65504, 65520, 1e6, -1e6, 6e-8, 3e-8, 1e-9, -0.0, np.nan, np.inf, -np.inf, 1.00048828125, 1.0009765625, 1 / 3], np.float32)
  x = np.resize(vals, n)
  with np.errstate(over="ignore"): want = x.astype(np.float16)
  got = (Tensor(x) * 1).cast(dtypes.float16).numpy()
  finite = ~np.isnan(want)
  np.testing.assert_array_equal(got.view(np.uint16)[finite], want.view(np.uint16)[finite])
  assert np.isnan(got[~finite]).all()
  from fusegrad import Device
  if Device["CPU"].renderer.half_loads: assert re.search(r"sth_f32x\d+\(", kernel_source((Tensor(vals) * 1).cast(dtypes.float16)))
