"""Regression tests for results that were silently wrong (each failed before its fix)."""
import math, operator
import numpy as np
import pytest
import torch
from fusegrad import Tensor, dtypes

SPECIALS = [float("nan"), 0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), 3e38]

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("op", [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne])
def test_comparisons_follow_ieee(op, device):
  # `>=` was `not <`, so NaN >= 0 was True; 64 lanes exercise the SIMD path too
  rng = np.random.default_rng(0)
  a = rng.choice(SPECIALS, 64).astype(np.float32)
  b = rng.choice(SPECIALS, 64).astype(np.float32)
  fa, fb = Tensor(a, device=device), Tensor(b, device=device)
  want = op(torch.tensor(a), torch.tensor(b)).numpy()
  np.testing.assert_array_equal(op(fa, fb).numpy(), want)
  np.testing.assert_array_equal(op(fa, 0.0).numpy(), op(torch.tensor(a), 0.0).numpy())
  np.testing.assert_array_equal(op(0.0, fa).numpy(), op(0.0, torch.tensor(a)).numpy())
  np.testing.assert_array_equal(op(fa, fa).numpy(), op(torch.tensor(a), torch.tensor(a)).numpy())

def test_nan_comparison_methods():
  t = Tensor([float("nan")])
  assert [(t >= 0).item(), (t <= 0).item(), t.ge(0).item(), t.le(0).item(), (0 >= t).item(), (0 <= t).item()] == [False] * 6

@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16])
def test_16bit_reductions_accumulate_in_float32(dtype):
  x = Tensor.full((20000,), 10.0, dtype=dtype)
  assert x.mean().item() == 10.0 and x.mean().dtype == dtype
  assert Tensor.full((4, 5000), 0.1, dtype=dtype).sum(1).dtype == dtype
  tx = torch.full((4, 5000), 0.1, dtype=torch.float16 if dtype == dtypes.float16 else torch.bfloat16)
  np.testing.assert_allclose(Tensor.full((4, 5000), 0.1, dtype=dtype).sum(1).float().numpy(), tx.sum(1).float().numpy(), rtol=1e-2)
  np.testing.assert_allclose(Tensor.full((3, 7000), 0.5, dtype=dtype).mean(1).float().numpy(), [0.5] * 3)
  one = Tensor([1.001], dtype=dtype).float().item()  # 1.001 rounded to 16 bits
  np.testing.assert_allclose(Tensor.full((1000,), 1.001, dtype=dtype).prod().float().item(), one ** 1000, rtol=1e-2)

def test_python_ints_that_do_not_fit_int32_widen_or_raise():
  # Tensor([2**40, 3]) wrapped to [0, 3]; torch makes it int64 and raises on a value no dtype holds
  t = Tensor([2**40, 3])
  assert t.dtype == dtypes.int64 and t.tolist() == [2**40, 3] and Tensor(2**40).item() == 2**40
  assert Tensor([1, 2]).dtype == dtypes.int32 and Tensor([-1], dtype=dtypes.uint8).tolist() == [255]
  for vals, dt in [([255], dtypes.int8), ([2**40], dtypes.int32), ([2**63], dtypes.int64), ([2**64], None)]:
    with pytest.raises(RuntimeError, match="overflow|does not fit"): Tensor(vals, dtype=dt)

def test_parameters_assigned_equal_constants_keep_their_own_gradients():
  from fusegrad import nn
  a, b = nn.Linear(2, 3), nn.Linear(2, 3)
  a.bias.assign(Tensor.zeros(3))
  b.bias.assign(Tensor.zeros(3))
  a(Tensor.ones(1, 2)).sum().backward()
  assert a.bias.grad.tolist() == [1.0, 1.0, 1.0] and b.bias.grad is None

def test_backward_fills_every_float_tensor_unless_requires_grad_false():
  # tinygrad's semantics: requires_grad=None tensors get a gradient too
  x, w, skip = Tensor([1.0, 2.0]), Tensor([3.0]), Tensor([1.0], requires_grad=False)
  h = x * w * skip
  (h * h).sum().backward()
  assert x.grad.tolist() == [18.0, 36.0] and w.grad.tolist() == [30.0] and h.grad.tolist() == [6.0, 12.0] and skip.grad is None
  with pytest.raises(RuntimeError, match="no tensor in this graph"): Tensor.ones(3).sum().backward()

def test_two_threads_training_get_the_single_thread_answers():
  # a tensor was registered globally before it had a value (AttributeError in the other thread), and train/no_grad
  # modes were process-wide, so one thread leaving `with Tensor.train()` switched the other's off
  import threading
  from fusegrad import nn
  from fusegrad.nn.optim import SGD
  def train(seed, out):
    rng = np.random.default_rng(seed)
    X, Y = Tensor(rng.standard_normal((32, 8)).astype(np.float32)), Tensor(rng.standard_normal((32, 1)).astype(np.float32))
    l1, l2 = nn.Linear(8, 16), nn.Linear(16, 1)
    for p, shape in ((l1.weight, (16, 8)), (l2.weight, (1, 16))): p.assign(Tensor(rng.standard_normal(shape).astype(np.float32) * 0.1))
    l1.bias.assign(Tensor.zeros(16))
    l2.bias.assign(Tensor.zeros(1))
    opt = SGD([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.05)
    with Tensor.train():
      for _ in range(15):
        opt.zero_grad()
        loss = ((l2(l1(X).relu()) - Y) ** 2).mean()
        loss.backward()
        opt.step()
        out.append(loss.item())
  ref = {s: [] for s in (0, 1)}
  for s in ref: train(s, ref[s])
  for _ in range(3):
    got, errors = {s: [] for s in (0, 1)}, []
    def run(s):
      try: train(s, got[s])
      except Exception as e: errors.append(e)
    threads = [threading.Thread(target=run, args=(s,)) for s in got]
    for t in threads: t.start()
    for t in threads: t.join()
    assert not errors and got == ref

@pytest.mark.parametrize("make", [lambda: Tensor.empty(2**60, 2**60), lambda: Tensor.ones(2**60, 2**60).sum(), lambda: Tensor.rand(2**31, 2**33),
                                  lambda: Tensor.ones(1, 1).expand(2**62, 2**62), lambda: Tensor.ones(2**62).pad(((0, 2**62),))])
def test_shapes_past_64_bit_indexing_raise_clearly(make):
  # 2**120 elements raised a ctypes OverflowError, and a sum over them returned 0.0
  with pytest.raises(RuntimeError, match="64-bit indexing"): make()

def test_tensor_from_a_path_is_a_disk_tensor(tmp_path):
  p = tmp_path / "x.bin"
  p.write_bytes(bytes(range(8)))
  t = Tensor(p)
  assert t.device.startswith("DISK:") and t.shape == (8,) and t.dtype == dtypes.uint8 and t[2:4].to("CPU").tolist() == [2, 3]
  np.testing.assert_array_equal(Tensor(p, dtype=dtypes.float16).to("CPU").numpy(), np.arange(8, dtype=np.uint8).view(np.float16))
  with pytest.raises(FileNotFoundError): Tensor(tmp_path / "missing")
  (tmp_path / "odd").write_bytes(b"abc")
  with pytest.raises(RuntimeError, match="whole number"): Tensor(tmp_path / "odd", dtype=dtypes.float16)

def test_names_tinygrad_programs_import():
  from fusegrad.tensor import cast  # typing.cast, as tinygrad.tensor re-exports it
  from fusegrad.function import function
  assert callable(cast) and callable(function)

@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp", "var_mean", "std_mean"])
def test_dim_keyword_on_row_functions(name):
  x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
  got, want = getattr(Tensor(x), name)(dim=0), getattr(torch, name)(torch.tensor(x), dim=0)
  for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
    np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)

def test_is_param_takes_a_flag():
  assert Tensor.ones(2).is_param_().requires_grad is True and Tensor.ones(2).is_param_(False).is_param is False

def test_torch_spellings_softmin_dim_and_flip_dims():
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  np.testing.assert_allclose(Tensor(x).softmin(dim=0).numpy(), torch.nn.functional.softmin(torch.tensor(x), dim=0).numpy(), rtol=1e-6)
  np.testing.assert_array_equal(Tensor(x).flip(dims=(0, 1)).numpy(), torch.tensor(x).flip(dims=(0, 1)).numpy())
  with pytest.raises(TypeError): Tensor(x).flip()

def test_function_module_does_not_shadow_the_decorator():
  import sys
  import fusegrad.function  # noqa: F401
  from fusegrad import function
  assert callable(function) and function is sys.modules["fusegrad.function"].function

def test_reduce_group_loop_is_placed_under_every_members_loops():
  # a padded sum's two accumulators (one a constant 0 that needs no outer loop) shared a reduce loop placed by the
  # constant member alone: an index was emitted before its loop opened, in ~7 of 10 processes (the hash seed decided)
  import subprocess, sys, os
  code = ("import numpy as np; from fusegrad import Tensor; "
          "print(Tensor(np.ones((1,1,2,2), np.float32)).pad(((1,0),(0,1),(0,0),(0,0))).sum(axis=2).numpy().tolist())")
  for seed in range(6):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": str(seed)})
    assert out.stdout.strip() == "[[[0.0, 0.0], [0.0, 0.0]], [[2.0, 2.0], [0.0, 0.0]]]", (seed, out.stderr[-500:])

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_empty_results_do_not_crash(device):
  # these raised KeyError in codegen/linearize.py, or in the PYTHON device's reduction over an empty axis
  assert Tensor.ones(2, 3, 4, device=device).sum(2)[2:].T.numpy().shape == (3, 0)
  assert (Tensor.ones(8, 8, device=device) @ Tensor.ones(8, 0, device=device)).numpy().shape == (8, 0)
  assert Tensor.ones(3, 0, device=device).sum(1).tolist() == [0.0, 0.0, 0.0]
  assert Tensor.ones(3, 0, device=device).softmax(1).shape == (3, 0) and Tensor.ones(3, 0, device=device).log_softmax(1).numpy().shape == (3, 0)

def test_full_and_arange_follow_the_int_rules():
  assert Tensor.full((2,), 2**40).tolist() == [2**40, 2**40] and Tensor.full((2,), 2**40).dtype == dtypes.int64
  assert Tensor.arange(2**40, 2**40 + 3).tolist() == [2**40, 2**40 + 1, 2**40 + 2] and Tensor.arange(5).dtype == dtypes.int32
  with pytest.raises(RuntimeError, match="overflow"): Tensor.full((2,), 300, dtype=dtypes.uint8)

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_out_of_range_index_tensors_read_zero_and_write_nothing(device):
  # an index tensor out of [-n, n) read another element (x[0, 3] of a (2, 3) tensor was x[1, 0], -3 on a size-2 dim
  # wrapped twice) and a write through one landed on element 0; in range, negatives still count from the end
  x = Tensor.arange(6, device=device).reshape(2, 3)
  assert x[Tensor([0, 1, 1], device=device), Tensor([3, -4, -1], device=device)].tolist() == [0, 0, 5]
  assert x[Tensor([-3, 2, -2, 1], device=device)].tolist() == [[0, 0, 0], [0, 0, 0], [0, 1, 2], [3, 4, 5]]
  assert x[:, Tensor([3, -4, -3], device=device)].tolist() == [[0, 0, 0], [0, 0, 3]]
  for idx in ([5], [-3], [2, -5]):
    y = Tensor.zeros(2, 3, device=device).contiguous()
    y[Tensor(idx, device=device)] = 1.0
    assert y.tolist() == [[0.0] * 3] * 2, idx
  y = Tensor.zeros(4, device=device).contiguous()
  y[Tensor([1, 9, -1, -5], device=device)] = Tensor([5.0, 6.0, 7.0, 8.0], device=device)
  assert y.tolist() == [0.0, 5.0, 0.0, 7.0]
  y = Tensor.zeros(2, 3, device=device).contiguous()
  y[Tensor([0, 1], device=device), Tensor([3, -1], device=device)] = 4.0
  assert y.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 4.0]]

@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.bool, dtypes.float16])
def test_pad_value_takes_the_tensors_dtype(dtype):
  # a float value made an int tensor's pad float32 (torch.nn.functional.pad keeps the dtype, the value converted)
  vals = [1, 2**31 - 1] if dtype == dtypes.int32 else [1, 2**53 + 1] if dtype == dtypes.int64 else [1, 0]
  tdt = {dtypes.int32: torch.int32, dtypes.int64: torch.int64, dtypes.uint8: torch.uint8, dtypes.bool: torch.bool, dtypes.float16: torch.float16}[dtype]
  for value in (2.7, -2.7, 3, 0.5):
    if dtype == dtypes.uint8 and value < 0: continue
    got = Tensor(vals, dtype=dtype).pad((1, 2), value=value)
    want = torch.nn.functional.pad(torch.tensor(vals, dtype=tdt), (1, 2), value=value)
    assert got.dtype == dtype and got.tolist() == want.tolist(), (value, got.tolist(), want.tolist())

@pytest.mark.parametrize("dtype,tdt", [(dtypes.float16, torch.float16), (dtypes.bfloat16, torch.bfloat16)])
def test_16bit_var_and_std_are_computed_wide(dtype, tdt):
  # the squares overflowed float16 on the way: std of [60000, -60000, 1] was inf (torch: 60000)
  vals = [[60000.0, -60000.0, 1.0], [1.0, 2.0, 4.0]]
  t, p = Tensor(vals, dtype=dtype), torch.tensor(vals, dtype=tdt)
  for fn in ("std", "var"):
    for kw in ({}, {"axis": 1}, {"axis": 0, "correction": 0}):
      got = getattr(t, fn)(**kw)
      want = getattr(p, fn)(**{"dim" if k == "axis" else k: v for k, v in kw.items()})
      assert got.dtype == dtype
      np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2)

ZERO_D_OPS = {  # torch takes dim 0 or -1 on a 0-d tensor; these raised IndexError (tuple index out of range)
  "max": lambda t, d: t.max(d) if isinstance(t, Tensor) else t.amax(d), "min": lambda t, d: t.min(d) if isinstance(t, Tensor) else t.amin(d),
  "amax": lambda t, d: t.amax(d, keepdim=True), "amin": lambda t, d: t.amin(d),
  "argmax": lambda t, d: t.argmax(d), "argmin": lambda t, d: t.argmin(d, keepdim=True), "mean": lambda t, d: t.mean(d),
  "var": lambda t, d: t.var(d, correction=0), "std": lambda t, d: t.std(d, correction=0), "sum": lambda t, d: t.sum(d),
  "flip": lambda t, d: t.flip(d), "transpose": lambda t, d: t.transpose(d, 0), "movedim": lambda t, d: t.movedim(d, -1),
  "max_dim": lambda t, d: t.max(dim=d)[0], "argmax_dim": lambda t, d: t.max(dim=d)[1], "min_dim": lambda t, d: t.min(dim=d)[1],
  "gather": lambda t, d: t.gather(d, (Tensor if isinstance(t, Tensor) else torch.tensor)(0)),
  "scatter": lambda t, d: t.scatter(d, (Tensor if isinstance(t, Tensor) else torch.tensor)(0), (Tensor if isinstance(t, Tensor) else torch.tensor)(5.0)),
}

@pytest.mark.parametrize("name", list(ZERO_D_OPS))
@pytest.mark.parametrize("dim", [0, -1])
def test_zero_d_tensors_take_dim_0_and_minus_1(name, dim):
  got, want = ZERO_D_OPS[name](Tensor(3.0), dim), ZERO_D_OPS[name](torch.tensor(3.0), dim)
  assert got.shape == tuple(want.shape) and got.item() == want.item()
  with pytest.raises(IndexError): ZERO_D_OPS[name](Tensor(3.0), 1)

@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_mode_padding_with_a_negative_side(mode):
  # reflect with one side cropping raised (it cropped before mirroring, torch mirrors about the input's own ends)
  x = np.arange(2 * 5 * 6, dtype=np.float32).reshape(1, 2, 5, 6)
  for pads in [(-2, 3, 0, 0), (3, -1, 1, -2), (-1, -1, 2, 2), (2, 0, -3, 1), (-2, 1, -1, 3)]:
    try: want = torch.nn.functional.pad(torch.from_numpy(x), pads, mode=mode).numpy()
    except RuntimeError:
      with pytest.raises(Exception): Tensor(x).pad(pads, mode=mode).numpy()
      continue
    np.testing.assert_array_equal(Tensor(x).pad(pads, mode=mode).numpy(), want, err_msg=f"{mode} {pads}")

def test_python_device_float_remainder_of_infinity():
  # math.fmod raises for an infinite dividend (C's fmod gives NaN): % and // crashed on the PYTHON device
  for device in ("PYTHON", "CPU"):
    a = Tensor([math.inf, -math.inf, 5.0, -1.0], device=device)
    b = Tensor([2.0, 3.0, math.inf, math.inf], device=device)
    np.testing.assert_array_equal((a % b).numpy(), torch.tensor([math.inf, -math.inf, 5.0, -1.0]).remainder(torch.tensor([2.0, 3.0, math.inf, math.inf])).numpy())
    np.testing.assert_array_equal((a // b).numpy(), torch.tensor([math.inf, -math.inf, 5.0, -1.0]).div(torch.tensor([2.0, 3.0, math.inf, math.inf]), rounding_mode="floor").numpy())

@pytest.mark.parametrize("dtype,tdt", [(dtypes.int32, torch.int32), (dtypes.int8, torch.int8), (dtypes.uint8, torch.uint8), (dtypes.int64, torch.int64)])
def test_shifts_by_negative_or_too_wide_counts(dtype, tdt):
  # C leaves them undefined (x86 took the count modulo the width: x >> 32 was x, x << -1 was x << 31); torch gives 0, or
  # -1 shifting a negative right
  vals = [4, 3, 1, 0] if dtype == dtypes.uint8 else [4, 3, -8, -1]
  bits = 8 * dtype.itemsize
  for s in (-1, 1, bits - 1, bits, bits + 1, 100):
    if dtype == dtypes.uint8 and s < 0: continue
    a, p = Tensor(vals, dtype=dtype), torch.tensor(vals, dtype=tdt)
    assert (a << s).tolist() == (p << s).tolist() and (a >> s).tolist() == (p >> s).tolist(), s
    cnt = [s, 1, 0, s]
    assert (a >> Tensor(cnt, dtype=dtype)).tolist() == (p >> torch.tensor(cnt, dtype=tdt)).tolist(), s

@pytest.mark.parametrize("dtype,tdt", [(dtypes.float16, torch.float16), (dtypes.bfloat16, torch.bfloat16)])
def test_16bit_matmul_multiplies_and_adds_in_float32(dtype, tdt):
  # each product was rounded to 16 bits (300 * 300 overflowed float16 to inf, and inf - inf is NaN); torch rounds once
  assert (Tensor([[300.0, 300.0]], dtype=dtype) @ Tensor([[300.0], [-300.0]], dtype=dtype)).tolist() == [[0.0]]
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((3, 8, 64)).astype(np.float32), rng.standard_normal((64, 8)).astype(np.float32)
  pa, pb = torch.from_numpy(a).to(tdt), torch.from_numpy(b).to(tdt)
  got = Tensor(a).cast(dtype) @ Tensor(b).cast(dtype)
  assert got.dtype == dtype
  np.testing.assert_array_equal(got.float().numpy(), (pa @ pb).float().numpy())
  np.testing.assert_array_equal(Tensor.einsum("bik,kj->bij", Tensor(a).cast(dtype), Tensor(b).cast(dtype)).float().numpy(),
                                torch.einsum("bik,kj->bij", pa, pb).float().numpy())

@pytest.mark.parametrize("dtype,tdt", [(dtypes.float16, torch.float16), (dtypes.bfloat16, torch.bfloat16)])
def test_16bit_cumsum_and_cumprod_carry_in_float32(dtype, tdt):
  # the blocked scan rounded each block's carried prefix to 16 bits: the last of [2048, 0.5 x 31, -2048] summed to 16
  for vals, op in (([2048.0] + [0.5] * 31 + [-2048.0], "cumsum"), ([1.5] * 20 + [1 / 1.5] * 20, "cumprod"), (list(np.linspace(-3, 3, 100)), "cumsum")):
    got, want = getattr(Tensor(vals, dtype=dtype), op)(0), getattr(torch.tensor(vals, dtype=tdt), op)(0)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2, atol=1e-2 if op == "cumsum" else 0)
    assert got.float().numpy()[-1] == want.float().numpy()[-1]

def test_lerp_switches_form_at_half_weight():
  # start + w * (end - start) lost end at w = 1 (1e8 -> 1 gave 0); torch computes end - (end - start) * (1 - w) for |w| >= 0.5
  # (torch fuses the multiply-add, so the last bit may differ)
  s, e = torch.tensor([1e8, -3.0, 0.1]), torch.tensor([1.0, 7.0, 1e-8])
  assert Tensor(s.numpy()).lerp(Tensor(e.numpy()), 1.0).tolist() == e.tolist()
  for w in (1.0, 0.9999999, 0.5, 0.49, -0.7, 2.0):
    np.testing.assert_allclose(Tensor(s.numpy()).lerp(Tensor(e.numpy()), w).numpy(), torch.lerp(s, e, w).numpy(), rtol=2e-7, err_msg=str(w))
  wt = torch.tensor([1.0, 0.25, -0.6])
  np.testing.assert_allclose(Tensor(s.numpy()).lerp(Tensor(e.numpy()), Tensor(wt.numpy())).numpy(), torch.lerp(s, e, wt).numpy(), rtol=2e-7)

def test_clamp_with_a_nan_bound_is_nan():
  x = torch.tensor([1.0, -2.0, math.inf])
  for kw in ({"min": math.nan}, {"max": math.nan}, {"min": 0.0, "max": math.nan}, {"min": math.nan, "max": 1.0}):
    np.testing.assert_array_equal(Tensor(x.numpy()).clamp(**kw).numpy(), x.clamp(**kw).numpy(), err_msg=str(kw))

def test_numpy_inputs_keep_their_dtype_and_byte_order():
  # a big-endian array was read as native bytes ([1, 256] came out [16777216, 65536]); np.float64(2.5) became float32
  assert Tensor(np.array([1, 256], dtype=">i4")).tolist() == [1, 256]
  assert Tensor(np.array([1.5, -2.0], dtype=">f8")).tolist() == [1.5, -2.0]
  assert Tensor(np.float64(0.1)).dtype == dtypes.float64 and Tensor(np.float64(0.1)).item() == 0.1
  assert Tensor([np.float64(0.1), np.float64(0.2)]).dtype == dtypes.float64
  assert Tensor([np.int8(3), np.int8(4)]).dtype == dtypes.int8 and Tensor([np.float16(1.0)]).dtype == dtypes.float16
  assert Tensor([np.int8(3), 4]).dtype == dtypes.int32  # mixed with Python numbers: the usual inference
  assert Tensor(np.float64(2.5), dtype=dtypes.float32).dtype == dtypes.float32

def test_mode_counts_nan_as_a_value():
  # NaN never equalled itself: mode([nan, nan, 1]) was (1, 2) and mode([nan, nan]) (0.0, -1), a value not in the input
  for vals, want in (([math.nan, math.nan, 1.0], math.nan), ([math.nan, math.nan], math.nan), ([3.0, math.nan, 3.0, math.nan], 3.0),
                     ([1.0, 2.0, 2.0, 1.0], 1.0), ([5.0], 5.0)):
    v, i = Tensor(vals).mode()
    assert (v.item() == want or (v.item() != v.item() and want != want)) and 0 <= i.item() < len(vals), vals
    assert vals[i.item()] == v.item() or (vals[i.item()] != vals[i.item()] and want != want), vals
    tv = torch.tensor(vals).mode().values.item()
    assert (tv == want) or (tv != tv and want != want)
  v, i = Tensor([[1, 1, 2], [3, 2, 2]], dtype=dtypes.int32).mode(1)
  assert v.tolist() == [1, 2] and i.tolist() == [1, 2]

def test_std_gradient_of_a_constant_row_is_zero():
  # sqrt's gradient at a zero variance is inf (times 0: NaN); torch gives 0, so one constant feature poisoned the step
  x = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]], np.float32)
  t, p = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
  (t.std(1).sum() + t.std_mean(1)[0].sum()).backward()
  (p.std(1).sum() + torch.std_mean(p, 1)[0].sum()).backward()
  np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)

def test_long_float_sums_are_split_into_short_partials():
  # each SIMD accumulator added thousands of values: a float32 sum of 1e7 0.1s was 999850 (torch's pairwise 999999.6),
  # and var of 1e6 + N(0, 1) samples squared the mean's error (401 for 1)
  x = Tensor(np.full(10_000_000, 0.1, np.float32))
  assert abs(x.sum().item() - 1e6) < 2 and abs(x.mean().item() - 0.1) < 2e-7
  rng = np.random.default_rng(0)
  y = (1e6 + rng.standard_normal(4_000_000)).astype(np.float32)
  assert abs(Tensor(y).var().item() - torch.from_numpy(y).var().item()) < 0.2  # (the mean, ~1e-7 off, squared)
  z = rng.random(3 * 2**16).astype(np.float32)
  assert abs(Tensor(z).sum().item() - z.astype(np.float64).sum()) < 1e-2

# ======================================================================== an int clamp bound outside the dtype raises (torch), never wraps
@pytest.mark.parametrize("dtype,tdtype,kw", [(dtypes.uint8, torch.uint8, dict(max=300)), (dtypes.uint8, torch.uint8, dict(min=-256)),
                                             (dtypes.int8, torch.int8, dict(max=255)), (dtypes.int16, torch.int16, dict(min=-40000)),
                                             (dtypes.int32, torch.int32, dict(min=0, max=2**31))])
def test_clamp_int_bound_overflow_raises(dtype, tdtype, kw):
  with pytest.raises(RuntimeError, match="without overflow"): torch.tensor([1, 2], dtype=tdtype).clamp(**kw)
  with pytest.raises(RuntimeError, match="without overflow"): Tensor([1, 2], dtype=dtype).clamp(**kw)

@pytest.mark.parametrize("dtype,tdtype,kw", [(dtypes.uint8, torch.uint8, dict(min=-1)), (dtypes.uint8, torch.uint8, dict(min=-255, max=255)),
                                             (dtypes.int8, torch.int8, dict(min=-128, max=127)), (dtypes.uint8, torch.uint8, dict(max=2.5))])
def test_clamp_int_bound_in_range_matches_torch(dtype, tdtype, kw):
  want = torch.tensor([1, 2, 100], dtype=tdtype).clamp(**kw)
  got = Tensor([1, 2, 100], dtype=dtype).clamp(**kw)
  assert got.tolist() == want.tolist() and got.numpy().dtype == want.numpy().dtype

def test_uint8_from_minus_256_raises():
  with pytest.raises(RuntimeError, match="without overflow"): Tensor([-256], dtype=dtypes.uint8)
  assert Tensor([-255], dtype=dtypes.uint8).tolist() == [1]

# ======================================================================== matmul and its gradients with a zero-size dim (crashed in codegen)
@pytest.mark.parametrize("sa,sb", [((2, 2), (2, 0)), ((0, 2), (2, 3)), ((2, 0), (0, 3)), ((3, 0, 2), (2, 4)), ((2, 3), (3, 0))])
def test_matmul_zero_size_forward_and_backward(sa, sb):
  rng = np.random.default_rng(0)
  an, bn = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
  a, b = Tensor(an, requires_grad=True), Tensor(bn, requires_grad=True)
  ta, tb = torch.tensor(an, requires_grad=True), torch.tensor(bn, requires_grad=True)
  out, tout = a @ b, ta @ tb
  (out.sum() * 2).backward(); (tout.sum() * 2).backward()
  np.testing.assert_allclose(out.numpy(), tout.detach().numpy())
  np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
  np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy())

# ======================================================================== replicate padding that crops more than the input keeps (torch pads, then crops)
@pytest.mark.parametrize("pads", [(3, -5, 1, -5), (2, -1, 0, 0), (-1, 2, -2, 3), (-2, -1, 1, 1), (4, -4, 0, 0)])
@pytest.mark.parametrize("mode", ["replicate", "reflect"])
def test_mode_padding_with_mixed_signs(pads, mode):
  x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
  want = torch.nn.functional.pad(torch.tensor(x), pads, mode=mode).numpy()
  np.testing.assert_array_equal(Tensor(x).pad(pads, mode=mode).numpy(), want)

def test_equal_lazy_values_made_to_require_grad_keep_their_own_gradients():
  # equal lazy values are one node, so b and c below shared one gradient (7 each; torch: 2 and 5) when requires_grad
  # was set after construction (requires_grad=True at construction and requires_grad_() already gave a unique leaf)
  a = Tensor.zeros(3)
  b, c = a.clone(), a.clone()
  b.requires_grad = True
  c.requires_grad = True
  (b * 2 + c * 5).sum().backward()
  assert b.grad.tolist() == [2.0] * 3 and c.grad.tolist() == [5.0] * 3 and a.grad is None
  x, y = Tensor.ones(2), Tensor.ones(2)
  x.requires_grad = y.requires_grad = True
  (x * 3 - y).sum().backward()
  assert x.grad.tolist() == [3.0, 3.0] and y.grad.tolist() == [-1.0, -1.0] and x.is_leaf and y.is_leaf
  # a result that already requires grad through its inputs keeps its graph: the gradient reaches the input
  w = Tensor([1.0, 2.0], requires_grad=True)
  h = w * 2
  h.requires_grad = True
  h.sum().backward()
  assert w.grad.tolist() == [2.0, 2.0]
