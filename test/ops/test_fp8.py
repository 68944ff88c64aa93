"""The OCP fp8 dtypes, dtypes.fp8e4m3 (torch's float8_e4m3fn) and dtypes.fp8e5m2, on the CPU (C kernels) and the PYTHON
interpreter: every code decoded, the rounding of many floats (subnormals, ties, overflow, inf, NaN), casts from and to
every dtype against torch, arithmetic against torch computing in float32 and rounding to fp8, storage, promotion.

Where fusegrad differs from torch, on purpose (tinygrad's rule): a finite value past the largest finite one saturates
to it (torch: NaN for e4m3fn, inf for e5m2), and e4m3's NaN stands for infinity (it has none); float64 is rounded to fp8
from its own bits (torch rounds it to float32 first, which differs within 2**-29 of a tie)."""
import math, random, struct
import numpy as np
import pytest
import torch
from fusegrad import Tensor, dtypes
from fusegrad.dtype import DTYPES_DICT, float_to_fp8, fp8_to_float, least_upper_dtype, result_dtype, to_dtype, truncate

FP8 = [dtypes.fp8e4m3, dtypes.fp8e5m2]
TORCH_FP8 = {dtypes.fp8e4m3: torch.float8_e4m3fn, dtypes.fp8e5m2: torch.float8_e5m2}
MAXF = {dtypes.fp8e4m3: 448.0, dtypes.fp8e5m2: 57344.0}
DEVICES = ["CPU", "PYTHON"]
IDS = ["e4m3", "e5m2"]

def torch_decode(dt) -> list[float]: return torch.arange(256, dtype=torch.uint8).view(TORCH_FP8[dt]).float().tolist()
def torch_codes(x: torch.Tensor, dt) -> list[int]: return x.to(TORCH_FP8[dt]).view(torch.uint8).tolist()
def same(a: float, b: float) -> bool:
  """Equal floats, the sign of zero and of NaN included."""
  return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b) and math.copysign(1, a) == math.copysign(1, b))

def hard_values(dt, n: int = 4000, seed: int = 0) -> list[float]:
  """Random values over the range and far below it, every tie between neighbouring codes and the floats beside it."""
  rng = random.Random(seed)
  vals = [rng.uniform(-MAXF[dt], MAXF[dt]) for _ in range(n)] + [math.ldexp(rng.uniform(-1, 1), rng.randint(-24, 16)) for _ in range(n)]
  for c in range(255):
    v, w = fp8_to_float(c, dt), fp8_to_float(c + 1, dt)
    if math.isfinite(v) and math.isfinite(w) and c != 0x7f:
      mid = (v + w) / 2
      vals += [v, mid, math.nextafter(mid, 0), math.nextafter(mid, math.inf), -mid, np.float32(mid).item()]
  return vals

SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 1e300, -1e300, 5e-324, -5e-324, 1e-40, 448.0, 449.0, 464.0, 480.0,
            -500.0, 57344.0, 61439.0, 61440.0, 65536.0, -1e6, 2.0 ** -9, 2.0 ** -10, 2.0 ** -16, 2.0 ** -17, 3 * 2.0 ** -17]

# ------------------------------------------------------------------------ the Python conversions
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_decode_every_code_matches_torch(dt):
  want = torch_decode(dt)
  for c in range(256):
    assert same(fp8_to_float(c, dt), want[c]) or (math.isnan(want[c]) and math.isnan(fp8_to_float(c, dt))), (c, want[c])
    v = fp8_to_float(c, dt)
    if not math.isnan(v): assert float_to_fp8(v, dt) == c, hex(c)  # every value's code is its own
    else: assert float_to_fp8(v, dt) == (c & 0x80) | 0x7f  # NaN keeps its sign, canonical payload

def test_format_facts():
  e4, e5 = dtypes.fp8e4m3, dtypes.fp8e5m2
  assert (fp8_to_float(0x7e, e4), fp8_to_float(0x7b, e5)) == (448.0, 57344.0)
  assert math.isnan(fp8_to_float(0x7f, e4)) and math.isnan(fp8_to_float(0xff, e4)) and math.copysign(1, fp8_to_float(0xff, e4)) == -1
  assert fp8_to_float(0x78, e4) == 256.0 and fp8_to_float(0x01, e4) == 2.0 ** -9 and fp8_to_float(0x08, e4) == 2.0 ** -6
  assert fp8_to_float(0x7c, e5) == math.inf and fp8_to_float(0xfc, e5) == -math.inf and all(math.isnan(fp8_to_float(c, e5)) for c in (0x7d, 0x7e, 0x7f))
  assert fp8_to_float(0x01, e5) == 2.0 ** -16 and fp8_to_float(0x04, e5) == 2.0 ** -14 and fp8_to_float(0x80, e5) == 0.0
  with pytest.raises(ValueError): float_to_fp8(1.0, dtypes.float16)
  with pytest.raises(ValueError): fp8_to_float(1, dtypes.float32)

@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_encode_matches_torch_in_range(dt):
  """Every float32 in range (float32: torch rounds once there) gets torch's code: ties to even, subnormals."""
  x = torch.tensor([v for v in hard_values(dt) if abs(v) <= MAXF[dt]], dtype=torch.float32)
  want, got = torch_codes(x, dt), [float_to_fp8(v, dt) for v in x.tolist()]
  assert got == want, [(v, hex(g), hex(w)) for v, g, w in zip(x.tolist(), got, want) if g != w][:10]
  for src in (torch.float16, torch.bfloat16):  # and from the 16-bit floats
    y = x[x.abs() <= (65504 if src == torch.float16 else 1e38)].to(src)
    assert [float_to_fp8(v, dt) for v in y.tolist()] == torch_codes(y, dt)

@pytest.mark.parametrize("dt,x,code", [
  (dtypes.fp8e4m3, 449.0, 0x7e), (dtypes.fp8e4m3, 464.0, 0x7e), (dtypes.fp8e4m3, 1e30, 0x7e), (dtypes.fp8e4m3, -1e300, 0xfe),
  (dtypes.fp8e4m3, math.inf, 0x7f), (dtypes.fp8e4m3, -math.inf, 0xff), (dtypes.fp8e4m3, math.nan, 0x7f), (dtypes.fp8e4m3, -math.nan, 0xff),
  (dtypes.fp8e5m2, 61440.0, 0x7b), (dtypes.fp8e5m2, 1e30, 0x7b), (dtypes.fp8e5m2, -65536.0, 0xfb), (dtypes.fp8e5m2, math.inf, 0x7c),
  (dtypes.fp8e5m2, -math.inf, 0xfc), (dtypes.fp8e5m2, math.nan, 0x7f), (dtypes.fp8e5m2, -math.nan, 0xff),
  (dtypes.fp8e4m3, 2.0 ** -10, 0x00), (dtypes.fp8e4m3, 3 * 2.0 ** -10, 0x02), (dtypes.fp8e4m3, -2.0 ** -10 * 1.0001, 0x81),
  (dtypes.fp8e4m3, 2.0 ** -10 + 2.0 ** -40, 0x01),  # float64 rounds once (torch through float32: 0x00)
  (dtypes.fp8e5m2, 2.0 ** -17, 0x00), (dtypes.fp8e5m2, 5e-324, 0x00), (dtypes.fp8e5m2, -0.0, 0x80), (dtypes.fp8e4m3, 17.0, 0x58),
  (dtypes.fp8e4m3, 18.0, 0x59), (dtypes.fp8e4m3, 19.0, 0x5a), (dtypes.fp8e4m3, 0.0625 * 1.0625, 0x18), (dtypes.fp8e4m3, 0.0625 * 1.1875, 0x1a)])
def test_documented_rule(dt, x, code):
  assert float_to_fp8(x, dt) == code
  assert same(truncate(dt, x), fp8_to_float(code, dt))

# ------------------------------------------------------------------------ kernels: every code, many floats
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_kernel_decode_every_code(dt, device):
  codes = Tensor(np.arange(256, dtype=np.uint8), device=device).bitcast(dt)
  for out in (dtypes.float32, dtypes.float64):
    got = codes.cast(out).tolist()
    assert all(same(g, fp8_to_float(c, dt)) for c, g in enumerate(got)), [(hex(c), g) for c, g in enumerate(got) if not same(g, fp8_to_float(c, dt))]
  assert codes.tolist() == [fp8_to_float(c, dt) for c in range(256)] or all(same(a, fp8_to_float(c, dt)) for c, a in enumerate(codes.tolist()))
  np.testing.assert_array_equal(codes.numpy(), np.array(torch_decode(dt), np.float32))

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16], ids=str)
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_kernel_encode_matches_python(dt, src, device):
  """The C conversion functions (float and double) and the interpreter round exactly as float_to_fp8."""
  big = {dtypes.float16: 65504.0, dtypes.bfloat16: 3e38}.get(src, math.inf)
  vals = [v for v in hard_values(dt, 1500) + SPECIALS if not abs(v) > big or not math.isfinite(v)]
  x = Tensor(vals, dtype=src, device=device)
  got, xs = x.cast(dt).bitcast(dtypes.uint8).tolist(), x.tolist()
  want = [float_to_fp8(v, dt) for v in xs]
  assert got == want, [(v, hex(g), hex(w)) for v, g, w in zip(xs, got, want) if g != w][:10]

@pytest.mark.parametrize("device", DEVICES)
def test_constant_casts_fold_as_kernels(device):
  for dt in FP8:
    for v in SPECIALS[:10] + [500.0, 0.3, -2.0 ** -10, 70000.0]:
      folded = Tensor.full((2,), v, device=device, dtype=dtypes.float64).cast(dt).bitcast(dtypes.uint8).tolist()  # a constant: folded by truncate
      run = Tensor([v, v], device=device, dtype=dtypes.float64).cast(dt).bitcast(dtypes.uint8).tolist()
      assert folded == run == [float_to_fp8(v, dt)] * 2, (dt, v, folded, run)

# ------------------------------------------------------------------------ casts from and to every dtype, vs torch
INT_SRC = {dtypes.bool: (0, 1), dtypes.int8: (-128, 127), dtypes.uint8: (0, 255), dtypes.int16: (-600, 600), dtypes.uint16: (0, 600),
           dtypes.int32: (-600, 600), dtypes.uint32: (0, 600), dtypes.int64: (-600, 600), dtypes.uint64: (0, 600)}
TORCH_DT = {dtypes.bool: torch.bool, dtypes.int8: torch.int8, dtypes.uint8: torch.uint8, dtypes.int16: torch.int16, dtypes.uint16: torch.uint16,
            dtypes.int32: torch.int32, dtypes.uint32: torch.uint32, dtypes.int64: torch.int64, dtypes.uint64: torch.uint64,
            dtypes.float16: torch.float16, dtypes.bfloat16: torch.bfloat16, dtypes.float32: torch.float32, dtypes.float64: torch.float64}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", list(INT_SRC), ids=str)
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_cast_int_to_fp8(dt, src, device):
  lo, hi = INT_SRC[src]
  vals = list(range(lo, hi + 1))
  got = Tensor(vals, dtype=src, device=device).cast(dt).bitcast(dtypes.uint8).tolist()
  want = torch_codes(torch.tensor(vals, dtype=torch.float32), dt)  # (exact in float32: torch's int -> fp8 goes through it)
  if dt == dtypes.fp8e4m3: want = [0x7e if v > 448 else 0xfe if v < -448 else w for v, w in zip(vals, want)]  # saturation (torch: NaN)
  assert got == want
  big = Tensor([10**6, -10**6] if not dtypes.is_unsigned(src) else [10**6], dtype=dtypes.int64, device=device).cast(src) if src.itemsize >= 4 else None
  if big is not None: assert big.cast(dt).tolist() == [MAXF[dt], -MAXF[dt]][:big.numel()]  # saturates (torch e5m2: inf)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64], ids=str)
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_cast_float_to_fp8_vs_torch(dt, src, device):
  g = torch.Generator().manual_seed(1)
  t = torch.cat([torch.randn(3000, generator=g, dtype=torch.float64) * s for s in (1e-4, 1e-2, 1.0, 30.0, 300.0)])
  t = t[t.abs() <= MAXF[dt]].to(TORCH_DT[src])
  got = Tensor(t.float().numpy() if src == dtypes.bfloat16 else t.numpy(), device=device).cast(src).cast(dt).bitcast(dtypes.uint8).tolist()
  assert got == torch_codes(t, dt)
  # past the range: saturation where torch gives NaN (e4m3fn) or inf (e5m2), and e4m3's infinity is NaN
  over = torch.tensor([MAXF[dt] * 1.07, -MAXF[dt] * 1.07, math.inf, -math.inf, math.nan], dtype=torch.float32).to(TORCH_DT[src])
  got = Tensor(over.float().numpy(), device=device).cast(src).cast(dt).bitcast(dtypes.uint8).tolist()
  inf = 0x7f if dt == dtypes.fp8e4m3 else 0x7c
  assert got == [0x7e if dt == dtypes.fp8e4m3 else 0x7b, 0xfe if dt == dtypes.fp8e4m3 else 0xfb, inf, 0x80 | inf, 0x7f]

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dst", list(TORCH_DT), ids=str)
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_cast_fp8_to_every_dtype_vs_torch(dt, dst, device):
  codes = torch.arange(256, dtype=torch.uint8)
  vals = torch.tensor(torch_decode(dt))
  if dtypes.is_int(dst):  # only values that fit (C and torch leave the others undefined)
    info = torch.iinfo(TORCH_DT[dst]) if dst not in (dtypes.uint32, dtypes.uint64) else None
    lo, hi = (info.min, info.max) if info else (0, 2**32 - 1)
    keep = vals.isfinite() & (vals.trunc() >= lo) & (vals.trunc() <= hi)
    codes, vals = codes[keep], vals[keep]
  ours = Tensor(codes.numpy(), device=device).bitcast(dt).cast(dst)
  assert ours.dtype == dst
  want = vals.to(TORCH_FP8[dt]).to(TORCH_DT[dst]) if dst not in (dtypes.uint16, dtypes.uint32, dtypes.uint64) else vals.trunc().to(torch.int64)
  got = ours.tolist()
  exp = want.float().tolist() if dst == dtypes.bfloat16 else want.tolist()
  assert len(got) == len(exp) and all(g == e or (isinstance(g, float) and same(g, e)) or (g != g and e != e) for g, e in zip(got, exp)), \
    [(hex(c), g, e) for c, g, e in zip(codes.tolist(), got, exp) if not (g == e or (g != g and e != e))][:10]

@pytest.mark.parametrize("device", DEVICES)
def test_cast_between_fp8s(device):
  for a, b in ((dtypes.fp8e4m3, dtypes.fp8e5m2), (dtypes.fp8e5m2, dtypes.fp8e4m3)):
    keep = [c for c in range(256) if math.isfinite(fp8_to_float(c, a)) and abs(fp8_to_float(c, a)) <= MAXF[b]]
    got = Tensor(np.array(keep, np.uint8), device=device).bitcast(a).cast(b).bitcast(dtypes.uint8).tolist()
    assert got == torch.tensor(keep, dtype=torch.uint8).view(TORCH_FP8[a]).to(TORCH_FP8[b]).view(torch.uint8).tolist()
  # e5m2's 57344 and inf into e4m3: saturated and NaN
  assert Tensor([57344.0, -math.inf], device=device, dtype=dtypes.fp8e5m2).cast(dtypes.fp8e4m3).bitcast(dtypes.uint8).tolist() == [0x7e, 0xff]

# ------------------------------------------------------------------------ bitcast, storage, creation, reading out
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_bitcast(dt, device):
  codes = np.arange(256, dtype=np.uint8)
  # the interpreter holds fp8 values as floats: the non-canonical NaN payloads of e5m2 become 0x7f (as a bfloat16 NaN does)
  canon = [c if not (math.isnan(fp8_to_float(c, dt)) and device == "PYTHON") else (c & 0x80) | 0x7f for c in range(256)]
  assert Tensor(codes, device=device).bitcast(dt).bitcast(dtypes.uint8).tolist() == canon
  assert Tensor(codes.view(np.int8), device=device).bitcast(dt).bitcast(dtypes.int8).tolist() == np.array(canon, np.uint8).view(np.int8).tolist()
  x = Tensor([1.0, -2.0, 0.5], dtype=dt, device=device)
  assert x.bitcast(dtypes.uint8).tolist() == [float_to_fp8(v, dt) for v in (1.0, -2.0, 0.5)]
  with pytest.raises(Exception): x.bitcast(dtypes.float16)  # sizes differ on the last dim of 3

@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_creation_and_readout(dt):
  vals = [[1.0, 0.3, -2.5], [1e9, -1e9, 2.0 ** -12]]
  t = Tensor(vals, dtype=dt)
  assert t.dtype == dt and t.shape == (2, 3) and t.uop.dtype.itemsize == 1
  want = [[truncate(dt, v) for v in row] for row in vals]
  assert t.tolist() == want and t[0, 1].item() == truncate(dt, 0.3)
  np.testing.assert_array_equal(t.numpy(), np.array(want, np.float32))
  assert t.numpy().dtype == np.float32 and Tensor(np.array(vals, np.float32), dtype=dt).tolist() == want
  assert Tensor(vals, dtype=dt.name).dtype == dt and Tensor(vals, dtype=TORCH_FP8[dt]).dtype == dt
  assert Tensor([1, 2, 1000], dtype=dt).tolist() == [1.0, 2.0, truncate(dt, 1000)] and Tensor([True, False], dtype=dt).tolist() == [1.0, 0.0]
  assert Tensor.ones(3, dtype=dt).tolist() == [1.0] * 3 and Tensor.full((2,), 0.3, dtype=dt).tolist() == [truncate(dt, 0.3)] * 2
  assert Tensor.zeros(2, dtype=dt).tolist() == [0.0, 0.0] and Tensor.arange(4, dtype=dt).tolist() == [0.0, 1.0, 2.0, 3.0]
  assert Tensor(2.0, dtype=dt).item() == 2.0 and math.isnan(Tensor([math.nan], dtype=dt).item())
  with pytest.raises(TypeError): t.data()  # memoryview has no fp8 format
  assert np.array_equal(np.asarray(t), t.numpy())

@pytest.mark.parametrize("device", DEVICES)
def test_zero_size(device):
  for dt in FP8:
    z = Tensor([], dtype=dt, device=device)
    assert z.shape == (0,) and z.tolist() == [] and z.numpy().shape == (0,) and z.numpy().dtype == np.float32
    assert z.sum().item() == 0.0 and z.sum().dtype == dt and (z + 1).shape == (0,) and z.cast(dtypes.float32).tolist() == []
    assert Tensor.empty(0, 3, dtype=dt, device=device).numpy().shape == (0, 3)

def test_safetensors_round_trip(tmp_path):
  from fusegrad.nn.state import safe_save, safe_load
  from safetensors.torch import save_file, load_file
  e4 = Tensor([[1.0, -0.3], [448.0, math.nan]], dtype=dtypes.fp8e4m3)
  e5 = Tensor([57344.0, -math.inf, 2.0 ** -16], dtype=dtypes.fp8e5m2)
  safe_save({"e4": e4, "e5": e5}, tmp_path / "a.safetensors")
  back = safe_load(tmp_path / "a.safetensors")
  assert back["e4"].dtype == dtypes.fp8e4m3 and back["e5"].dtype == dtypes.fp8e5m2 and back["e4"].shape == (2, 2)
  assert back["e4"].bitcast(dtypes.uint8).tolist() == e4.bitcast(dtypes.uint8).tolist() and back["e5"].tolist() == e5.tolist()
  theirs = load_file(str(tmp_path / "a.safetensors"))  # the safetensors package reads what we wrote
  assert theirs["e4"].dtype == torch.float8_e4m3fn and theirs["e4"].view(torch.uint8).flatten().tolist() == e4.bitcast(dtypes.uint8).flatten().tolist()
  assert theirs["e5"].dtype == torch.float8_e5m2 and theirs["e5"].float().tolist() == e5.tolist()
  ref = {"w": torch.randn(4, 5).to(torch.float8_e4m3fn), "v": torch.randn(7).to(torch.float8_e5m2)}
  save_file(ref, str(tmp_path / "b.safetensors"))
  ours = safe_load(tmp_path / "b.safetensors")
  for k, v in ref.items():
    assert ours[k].dtype == to_dtype(v.dtype) and ours[k].bitcast(dtypes.uint8).tolist() == v.view(torch.uint8).tolist()
    np.testing.assert_array_equal(ours[k].numpy(), v.float().numpy())

def test_torch_checkpoint(tmp_path):
  from fusegrad.nn.state import torch_load
  ref = {"w": torch.randn(3, 4).to(torch.float8_e4m3fn), "v": torch.randn(5).to(torch.float8_e5m2)}
  torch.save(ref, tmp_path / "m.pt")
  ours = torch_load(tmp_path / "m.pt")
  for k, v in ref.items():
    assert ours[k].dtype == to_dtype(v.dtype) and ours[k].bitcast(dtypes.uint8).tolist() == v.view(torch.uint8).tolist()

# ------------------------------------------------------------------------ dtype facts and promotion
def test_dtype_facts():
  e4, e5 = dtypes.fp8e4m3, dtypes.fp8e5m2
  assert dtypes.fp8s == (e4, e5) and all(d in dtypes.floats and d in dtypes.all and dtypes.is_float(d) for d in (e4, e5))
  assert not dtypes.is_int(e4) and not dtypes.is_unsigned(e5) and (e4.itemsize, e5.itemsize) == (1, 1) and e4.bitsize == 8
  assert dtypes.finfo(e4) == (4, 3) and dtypes.finfo(e5) == (5, 2)
  assert (e4.min, e4.max, e5.min, e5.max) == (-448.0, 448.0, -math.inf, math.inf)  # (E4M3 has no infinity: its extremes are finite)
  assert (e4.name, e5.name, repr(e4), repr(e5)) == ("float8_e4m3", "float8_e5m2", "dtypes.fp8e4m3", "dtypes.fp8e5m2")
  assert DTYPES_DICT["float8_e4m3"] is e4 and dtypes.fields()["float8_e5m2"] is e5 and DTYPES_DICT["fp8e4m3"] is e4
  assert to_dtype("float8_e4m3") is e4 and to_dtype("float8_e4m3fn") is e4 and to_dtype("float8_e5m2") is e5 and to_dtype("fp8e5m2") is e5
  assert to_dtype(torch.float8_e4m3fn) is e4 and to_dtype(torch.float8_e5m2) is e5
  import pickle
  assert pickle.loads(pickle.dumps(e4)) is e4 and e4.ptr(3).base is e4

@pytest.mark.parametrize("a,b,want", [
  (dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16), (dtypes.fp8e4m3, dtypes.float16, dtypes.float16),
  (dtypes.fp8e5m2, dtypes.bfloat16, dtypes.bfloat16), (dtypes.fp8e4m3, dtypes.float32, dtypes.float32),
  (dtypes.fp8e5m2, dtypes.float64, dtypes.float64), (dtypes.fp8e4m3, dtypes.int64, dtypes.fp8e4m3),
  (dtypes.fp8e5m2, dtypes.uint8, dtypes.fp8e5m2), (dtypes.fp8e4m3, dtypes.bool, dtypes.fp8e4m3), (dtypes.fp8e4m3, dtypes.fp8e4m3, dtypes.fp8e4m3)])
def test_promotion(a, b, want):
  assert least_upper_dtype(a, b) == want and least_upper_dtype(b, a) == want
  assert (Tensor([1.0], dtype=a) + Tensor([2.0], dtype=b)).dtype == want
  # the two fp8s meet at float16 and at bfloat16 (float16 first); with bfloat16 there, it is the answer (tinygrad's lattice)
  assert least_upper_dtype(dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.bfloat16) == dtypes.bfloat16
  assert least_upper_dtype(dtypes.fp8e4m3, dtypes.float16, dtypes.bfloat16) == dtypes.float32

def test_promotion_is_a_lattice():
  from fusegrad.dtype import ALL_DTYPES
  for a in ALL_DTYPES:
    for b in ALL_DTYPES:
      u = least_upper_dtype(a, b)
      assert least_upper_dtype(u, a) == u and least_upper_dtype(u, b) == u, (a, b, u)

def test_scalar_promotion():
  for dt in FP8:
    assert result_dtype(dt, 1.5) == dt and result_dtype(dt, 2) == dt and result_dtype(dt, True) == dt
    x = Tensor([1.0, 2.0], dtype=dt)
    assert (x * 2.5).dtype == dt and (x + 1).dtype == dt and (x < 1).dtype == dtypes.bool and (x / 3).dtype == dt
    assert (Tensor([1, 2]) + x).dtype == dt and x.sum().dtype == dt and x.mean().dtype == dt
    assert (x * 300).tolist() == [truncate(dt, 300.0), truncate(dt, 600.0)]

# ------------------------------------------------------------------------ arithmetic vs torch (float32 math, rounded to fp8)
def fp8_pair(dt, shape, seed, scale=4.0):
  g = torch.Generator().manual_seed(seed)
  t = (torch.randn(shape, generator=g) * scale).to(TORCH_FP8[dt])
  return t, Tensor(t.view(torch.uint8).numpy()).bitcast(dt)

def check(ours: Tensor, want: torch.Tensor, dt):
  if want.dtype in TORCH_FP8.values():
    assert ours.dtype == dt, ours.dtype
    got, exp = np.atleast_1d(ours.bitcast(dtypes.uint8).numpy()), np.atleast_1d(want.view(torch.uint8).numpy())
    bad = np.nonzero(got != exp)
    assert not bad[0].size, (got[bad][:8], exp[bad][:8], ours.numpy()[bad][:8], want.float().numpy()[bad][:8])
  else: np.testing.assert_array_equal(ours.numpy(), want.numpy())

def r(x: torch.Tensor, dt): return x.to(TORCH_FP8[dt])

OPS2 = {"add": (lambda a, b: a + b), "sub": (lambda a, b: a - b), "mul": (lambda a, b: a * b), "div": (lambda a, b: a / b),
        "max": (lambda a, b: a.maximum(b)), "min": (lambda a, b: a.minimum(b))}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(OPS2))
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_binary(dt, op, device):
  (ta, a), (tb, b) = fp8_pair(dt, (5, 16), 1), fp8_pair(dt, (5, 16), 2)
  f = OPS2[op]
  check(f(a.to(device), b.to(device)), r(f(ta.float(), tb.float()), dt), dt)
  if op not in ("max", "min"): check(f(a.to(device), 0.75), r(f(ta.float(), 0.75), dt), dt)

UNARY = {"neg": (lambda x: -x, lambda x: -x), "relu": (lambda x: x.relu(), lambda x: x.relu()), "exp": (lambda x: x.exp(), lambda x: x.exp()),
         "abs": (lambda x: x.abs(), lambda x: x.abs()), "sqrt": (lambda x: x.abs().sqrt(), lambda x: x.abs().sqrt()),
         "log": (lambda x: x.abs().log(), lambda x: x.abs().log()), "sigmoid": (lambda x: x.sigmoid(), lambda x: x.sigmoid()),
         "square": (lambda x: x * x, lambda x: x * x)}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(UNARY))
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_unary(dt, op, device):
  ta, a = fp8_pair(dt, (4, 20), 3, scale=2.0)
  ours, theirs = UNARY[op]
  if op in ("sigmoid", "log", "exp"):  # torch rounds its own float32 result; ours may be one float32 ulp off next to a tie
    got, want = ours(a.to(device)), r(theirs(ta.float()), dt).float().numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=2 ** -3 if dt == dtypes.fp8e4m3 else 2 ** -2)
    assert got.dtype == dt
  else: check(ours(a.to(device)), r(theirs(ta.float()), dt), dt)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_where_and_comparisons(dt, device):
  (ta, a), (tb, b) = fp8_pair(dt, (3, 10), 4), fp8_pair(dt, (3, 10), 5)
  a, b = a.to(device), b.to(device)
  for f in (lambda x, y: x < y, lambda x, y: x == y, lambda x, y: x != y, lambda x, y: x >= y):
    check(f(a, b), f(ta.float(), tb.float()), dt)
  check((a > 0).where(a, b), torch.where(ta.float() > 0, ta.float(), tb.float()).to(TORCH_FP8[dt]), dt)
  check((a > 0).where(a, 0.3), r(torch.where(ta.float() > 0, ta.float(), torch.tensor(0.3).to(TORCH_FP8[dt]).float()), dt), dt)
  n = Tensor([math.nan, 1.0], dtype=dt, device=device)
  assert n.isnan().tolist() == [True, False] and (n == n).tolist() == [False, True]

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_reductions(dt, device):
  ta, a = fp8_pair(dt, (6, 40), 6, scale=2.0)
  a = a.to(device)
  # sums of fp8 values (few bits each) are exact in float32 in any order: equal to torch's bit for bit
  check(a.sum(), r(ta.float().sum(), dt), dt)
  check(a.sum(1), r(ta.float().sum(1), dt), dt)
  check(a.sum(0), r(ta.float().sum(0), dt), dt)
  check(a.max(1), ta.float().max(1).values.to(TORCH_FP8[dt]), dt)
  check(a.min(0), ta.float().min(0).values.to(TORCH_FP8[dt]), dt)
  np.testing.assert_allclose(a.mean(1).numpy(), r(ta.float().mean(1), dt).float().numpy(), rtol=0.13)
  assert a.sum(dtype=dtypes.float32).dtype == dtypes.float32
  np.testing.assert_array_equal(a.sum(1, dtype=dtypes.float32).numpy(), ta.float().sum(1).numpy())
  big = Tensor.full((3000,), 100.0, dtype=dt, device=device).sum()  # accumulated in float32: no overflow midway
  assert big.item() == truncate(dt, 300000.0)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_matmul(dt, device):
  (ta, a), (tb, b) = fp8_pair(dt, (8, 24), 7, 1.0), fp8_pair(dt, (24, 5), 8, 1.0)
  want = r(ta.float() @ tb.float(), dt)
  got = a.to(device) @ b.to(device)
  assert got.dtype == dt
  # (products of two fp8 have 8 significant bits: every partial sum is exact in float32 here, so any order rounds alike)
  check(got, want, dt)
  check(a.to(device).cast(dtypes.float32) @ b.to(device).cast(dtypes.float32), ta.float() @ tb.float(), dt)

@pytest.mark.parametrize("device", DEVICES)
def test_mixed_dtypes(device):
  (ta, a), (tb, b) = fp8_pair(dtypes.fp8e4m3, (12,), 9), fp8_pair(dtypes.fp8e5m2, (12,), 10)
  a, b = a.to(device), b.to(device)
  s = a + b
  assert s.dtype == dtypes.float16
  np.testing.assert_array_equal(s.numpy(), (ta.half() + tb.half()).numpy())
  f = a * Tensor(np.linspace(-1, 1, 12, dtype=np.float32), device=device)
  assert f.dtype == dtypes.float32
  np.testing.assert_array_equal(f.numpy(), ta.float().numpy() * np.linspace(-1, 1, 12, dtype=np.float32))
  h = a + Tensor(np.ones(12, np.float16), device=device)
  assert h.dtype == dtypes.float16 and np.array_equal(h.numpy(), (ta.half() + 1).numpy())

@pytest.mark.parametrize("dt", FP8, ids=IDS)
def test_special_values_in_math(dt):
  x = Tensor([math.inf, -math.inf, math.nan, 1.0], dtype=dt)
  y = x.nan_to_num()
  assert y.dtype == dt and y.tolist()[:3] == ([0.0, 0.0, 0.0] if dt == dtypes.fp8e4m3 else [57344.0, -57344.0, 0.0])
  assert (Tensor([300.0], dtype=dt) * 300).item() == MAXF[dt]  # float32 product, saturated when rounded
  nx = Tensor([1.0, 0.0, -2.0], dtype=dt).nextafter(Tensor([2.0, 1.0, -3.0], dtype=dt))
  assert nx.tolist() == [fp8_to_float(float_to_fp8(1.0, dt) + 1, dt), fp8_to_float(1, dt), fp8_to_float(float_to_fp8(-2.0, dt) + 1, dt)]

def test_cpu_kernels_stay_scalar():
  """The SIMD renderer has no fp8 vectors: a loop with fp8 values is plain C (kinds() refuses it)."""
  from fusegrad.codegen.program import _render
  from fusegrad.schedule import create_schedule
  a = Tensor(np.arange(64, dtype=np.uint8)).bitcast(dtypes.fp8e4m3).realize()
  b = Tensor.ones(64).contiguous().realize()
  for out in (a * 2, a.cast(dtypes.float32) + b, (b * 3).cast(dtypes.fp8e5m2), a.sum()):
    src = _render("CPU", create_schedule([out.uop])[0][-1].ast, None).src
    assert "fp8e" in src and "f32x" not in src, src
  assert "fp8e" not in _render("CPU", create_schedule([(b * 2).uop])[0][-1].ast, None).src  # others do not get the functions

def test_cuda_renders_fp8():
  """The CUDA renderer uses the same conversions as device functions; compiled with NVRTC where it exists."""
  from fusegrad.codegen.linearize import linearize
  from fusegrad.codegen.lowerer import lower_kernel
  from fusegrad.renderer.cuda import CUDARenderer
  from fusegrad.schedule import create_schedule
  rdr = CUDARenderer("CUDA")
  a = Tensor(np.arange(64, dtype=np.uint8)).bitcast(dtypes.fp8e4m3).realize()
  srcs = [rdr.render(linearize(lower_kernel(create_schedule([out.uop])[0][-1].ast), rdr)).src
          for out in (a * 2, a.cast(dtypes.float16), a.cast(dtypes.float64).cast(dtypes.fp8e5m2), a.sum())]
  assert all("__device__ inline unsigned char f32_to_fp8e4m3" in s for s in srcs)
  from fusegrad.runtime import ops_cuda
  try: ops_cuda.nvrtc_compile('extern "C" __global__ void probe(float* a) { a[0] = 1.0f; }')
  except RuntimeError: pytest.skip("no NVRTC here")
  for s in srcs: ops_cuda.nvrtc_compile(s)

def test_e4m3_identities_are_finite():
  """E4M3 has no infinity: a -inf identity or pad value became NaN (cummax gave 0s, a padded max_pool NaN borders)."""
  x = Tensor([-3.0, -1.0, -2.0]).cast(dtypes.fp8e4m3)
  assert x.cummax(0).values.tolist() == [-3.0, -1.0, -1.0] and x.cummax(0).indices.tolist() == [0, 1, 1]
  assert x.max().item() == -1.0 and (-x).min().item() == 1.0
  p = Tensor([[[[-3.0, -1.0], [-2.0, -4.0]]]]).cast(dtypes.fp8e4m3).max_pool2d(2, 1, padding=1)
  assert p.tolist() == [[[[-3.0, -1.0, -1.0], [-2.0, -1.0, -1.0], [-2.0, -2.0, -4.0]]]]
