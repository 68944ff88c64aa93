"""tinygrad 0.14's keyword names and extra arguments, where they differ from PyTorch's: a tinygrad program that passes
them by name must run unchanged (reverse=, dtype=, min_=/max_=, pad_to's value=, realize's do_update_stats=,
sequential's ll=, the optimizers' device=/ns_coefficients=/pre_wd=, nn.state's fn=)."""
import os, pathlib
import numpy as np
import pytest
import torch
from fusegrad import Tensor, dtypes
from fusegrad.dtype import to_dtype
from fusegrad.nn import optim
from fusegrad.nn.state import safe_load, safe_load_metadata, safe_save, torch_load

def test_reverse_keyword_of_binary_ops():
  x, i = Tensor([-2.0, 0.5, 3.0]), Tensor([1, 2, 4])
  assert x.add(1, reverse=True).tolist() == [-1.0, 1.5, 4.0]
  assert x.add(1, alpha=2).tolist() == [0.0, 2.5, 5.0]  # torch's alpha stays keyword
  assert i.bitwise_and(6, reverse=True).tolist() == [0, 2, 4]
  assert i.bitwise_or(8, True).tolist() == [9, 10, 12]
  assert i.bitwise_xor(1, reverse=True).tolist() == [0, 3, 5]
  assert i.lshift(2, reverse=True).tolist() == [4, 8, 32]  # 2 << i
  assert i.rshift(64, reverse=True).tolist() == [32, 16, 4]  # 64 >> i
  assert i.lshift(1).tolist() == [2, 4, 8] and i.rshift(1).tolist() == [0, 1, 2]

def test_clamp_and_clip_take_both_spellings():
  x = Tensor([-2.0, 0.5, 3.0])
  t = torch.tensor([-2.0, 0.5, 3.0])
  for kw, tkw in [(dict(min_=0), dict(min=0)), (dict(max_=1), dict(max=1)), (dict(min=0, max=1), dict(min=0, max=1))]:
    assert x.clamp(**kw).tolist() == t.clamp(**tkw).tolist()
    assert x.clip(**kw).tolist() == t.clip(**tkw).tolist()
  with pytest.raises(TypeError, match="both min_= and min="): x.clip(min_=0, min=1)
  with pytest.raises(TypeError, match="both max_= and max="): x.clamp(max_=0, max=1)

@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.float32, "float64"])
def test_matmul_dtype(dtype):
  a = Tensor([[1, 2], [3, 4]], dtype=dtypes.int8)
  b = Tensor([[100, 1], [1, 100]], dtype=dtypes.int8)
  want = np.array([[102, 201], [304, 403]])  # int8 would wrap: 201 -> -55
  for out in (a.matmul(b, dtype=dtype), a.dot(b, dtype=dtype), b.matmul(a, reverse=True, dtype=dtype), a.linear(b, dtype=dtype)):
    assert out.dtype == to_dtype(dtype)
    np.testing.assert_array_equal(out.numpy(), want)
  assert a.linear(Tensor([1, 2], dtype=dtypes.int8), dtype=dtype).tolist() == [[1, 4], [3, 8]]

def test_matmul_dtype_float16_inputs_give_float32():
  rng = np.random.default_rng(0)
  an, bn = rng.standard_normal((3, 5)).astype(np.float16), rng.standard_normal((5, 2)).astype(np.float16)
  out = Tensor(an).matmul(Tensor(bn), dtype=dtypes.float32)
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), an.astype(np.float32) @ bn.astype(np.float32), rtol=1e-5, atol=1e-5)

def test_pad_to_value_softmin_dtype_realize_sequential():
  assert Tensor([1.0, 2.0]).pad_to(4, value=7).tolist() == [1.0, 2.0, 7.0, 7.0]
  assert Tensor([[1, 2]]).pad_to((2, None), value=-1).tolist() == [[1, 2], [-1, -1]]
  s = Tensor([1.0, 2.0, 3.0]).softmin(dtype=dtypes.float64)
  assert s.dtype == dtypes.float64
  np.testing.assert_allclose(s.numpy(), torch.nn.functional.softmin(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), 0).numpy())
  assert Tensor([1.0]).realize(do_update_stats=False).tolist() == [1.0]
  assert Tensor([1.0, 2.0]).sequential(ll=[lambda x: x * 2, Tensor.relu]).tolist() == [2.0, 4.0]

def test_optimizers_take_device():
  w = Tensor([1.0, -2.0], requires_grad=True)
  for make in (optim.SGD, optim.Adam, optim.AdamW, optim.LAMB, optim.LARS):
    opt = make([w], device=w.device)
    assert opt.device == w.device
  with pytest.raises(ValueError, match="device="):
    optim.Adam([w], device="PYTHON")

def test_lars_positional_order_and_pre_wd():
  """tinygrad 0.14's LARS(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic, pre_wd, tcoef):
  with pre_wd=False the decay is added after the step, scaled by lr (decoupled), and the momentum never sees it."""
  w0, g = np.array([1.0, -2.0, 0.5], np.float32), np.array([0.3, 0.1, -0.2], np.float32)
  for pre_wd in (True, False):
    w = Tensor(w0.copy(), requires_grad=True)
    opt = optim.LARS([w], 0.1, 0.9, 0.01, 0, None, False, False, pre_wd, 0.0)
    with Tensor.train():
      for _ in range(2):
        opt.zero_grad(); (w * Tensor(g)).sum().backward(); opt.step()
    p, b = w0.astype(np.float64), np.zeros(3)
    for _ in range(2):
      gg = g + 0.01 * p if pre_wd else g.astype(np.float64)
      b = 0.9 * b + gg
      p = p - 0.1 * b - (0 if pre_wd else 0.01 * 0.1 * p)
    np.testing.assert_allclose(w.numpy(), p, rtol=1e-5, atol=1e-6)

def test_muon_takes_ns_keywords():
  w = Tensor(np.eye(3, dtype=np.float32) * 2, requires_grad=True)
  opt = optim.Muon([w], lr=0.1, ns_steps=3, ns_coefficients=(2.0, -1.5, 0.5), weight_decay=0.0)
  assert opt.ns_steps == 3 and opt.ns_coefficients == (2.0, -1.5, 0.5)

def test_state_fn_keywords(tmp_path):
  path = str(tmp_path / "a.safetensors")
  safe_save({"a": Tensor([1.0, 2.0])}, fn=path)
  assert safe_load(fn=path)["a"].tolist() == [1.0, 2.0]
  assert safe_load(pathlib.Path(path))["a"].tolist() == [1.0, 2.0]
  assert safe_load_metadata(fn=path)[2]["a"]["shape"] == [2]

def test_torch_load_takes_a_disk_tensor(tmp_path):
  path = os.path.join(tmp_path, "m.pt")
  torch.save({"w": torch.arange(6.0).reshape(2, 3)}, path)
  want = [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
  assert torch_load(fn=path)["w"].tolist() == want
  assert torch_load(Tensor(pathlib.Path(path)))["w"].tolist() == want
  with pytest.raises(ValueError, match="DISK tensor of a whole file"): torch_load(Tensor([1, 2, 3]))
  with pytest.raises(ValueError, match="DISK tensor of a whole file"): torch_load(Tensor(pathlib.Path(path))[4:])

# ======================================================================== requires_grad propagates to op results
def test_requires_grad_propagates_like_torch():
  a, c = Tensor([1.0, 2.0], requires_grad=True), Tensor([1.0, 2.0])
  ta = torch.tensor([1.0, 2.0], requires_grad=True)
  cases = [(a * 2, ta * 2), ((a * 2).sum(), (ta * 2).sum()), (a[1:], ta[1:]), ((a * 3).detach(), (ta * 3).detach()),
           (a.reshape(2, 1) + c.reshape(1, 2), ta.reshape(2, 1) + torch.ones(1, 2))]
  for x, tx in cases:
    assert bool(x.requires_grad) == tx.requires_grad and x.is_leaf == tx.is_leaf
  assert a.requires_grad is True and a.is_leaf
  # tinygrad's None (not False) for results of tensors without the flag; a leaf that says False stays False
  assert (c * 2).requires_grad is None and (c * 2).is_leaf
  f = Tensor([1.0], requires_grad=False)
  assert f.requires_grad is False and f.is_leaf and (f * 2).requires_grad is None

def test_in_place_on_a_result_that_requires_grad():
  """torch allows it (only a leaf is refused); the gradient flows through the new value."""
  a = Tensor([1.0, 2.0], requires_grad=True)
  b = a * 2
  assert b.requires_grad and not b.is_leaf
  b += 1
  b.sum().backward()
  assert a.grad.tolist() == [2.0, 2.0]
  with pytest.raises(RuntimeError, match="leaf"): a += 1

# ======================================================================== smaller things tinygrad's own tests use
def test_older_tinygrad_imports_and_context_switches():
  from fusegrad.tensor import Device, Tensor as T2, dtypes as d2  # noqa: F401  (from tinygrad.tensor import Tensor, dtypes, Device)
  from fusegrad import Context
  with Context(TRANSCENDENTAL=2, IGNORE_OOB=0): assert abs(Tensor([1.0]).exp().item() - 2.718281828) < 1e-6

def test_conv_padding_strings_are_checked():
  from fusegrad import nn
  with pytest.raises(ValueError, match="stride 1"): nn.Conv2d(3, 4, 3, stride=2, padding="same")
  with pytest.raises(ValueError, match="not_same"): nn.Conv2d(3, 4, 3, padding="not_same")
  assert nn.Conv2d(3, 4, 3, padding="same")(Tensor.ones(1, 3, 5, 5)).shape == (1, 4, 5, 5)

def test_a_list_of_numpy_rows():
  assert Tensor([np.array([1, 2, 3])] * 3).tolist() == torch.tensor(np.array([[1, 2, 3]] * 3)).tolist()
  assert Tensor([np.array([1.5, 2.0]), [3, 4]]).tolist() == [[1.5, 2.0], [3.0, 4.0]]

def test_tensor_of_a_path_on_a_device(tmp_path):
  """Tensor(Path, device=...) ignored the device: the tensor stayed on DISK."""
  import pathlib
  p = tmp_path / "b.bin"
  p.write_bytes(bytes(range(8)))
  t = Tensor(pathlib.Path(p), device="CPU")
  assert t.device == "CPU" and t.tolist() == list(range(8))
  assert Tensor(pathlib.Path(p)).device.startswith("DISK")
  assert Tensor(pathlib.Path(p), device="CPU", dtype=dtypes.uint16).tolist() == [256, 770, 1284, 1798]

def test_jit_error_and_more_context_switches():
  from fusegrad import Context, TinyJit
  from fusegrad.engine.jit import JitError
  @TinyJit
  def f(x): return (x * 2).realize()
  for _ in range(3): f(Tensor.ones(4).contiguous().realize())
  with pytest.raises(JitError, match="inputs changed"): f(Tensor.ones(5).contiguous().realize())
  assert issubclass(JitError, ValueError)
  with Context(SPLIT_REDUCEOP=0, USE_ATOMICS=1): assert Tensor.ones(8).sum().item() == 8

# ======================================================================== review follow-ups
def test_review_follow_ups():
  from fusegrad import GlobalCounters, Variable, nn
  from fusegrad.nn import optim
  i = Variable("i", 1, 10).bind(3)
  assert Tensor.rand(10, 1 << 16)[:i].var(axis=1).shape[0].val == 3  # a symbolic dim beside the reduced one raised
  with pytest.raises(TypeError, match="bool"): Tensor([True, False]).idiv(Tensor([True, True]))
  with pytest.raises(TypeError, match="alpha by keyword"): Tensor([1.0, 2.0]).add(Tensor([1.0, 1.0]), 3)
  with pytest.raises(TypeError, match="ns_steps"): optim.LARS([Tensor([1.0], requires_grad=True)], 0.1, 0.9, 1e-4, True)
  a = Tensor([1.0, 2.0], requires_grad=True)
  with Tensor.inference_mode(): assert (a * 2).requires_grad is False
  assert (a * 2).requires_grad is True
  GlobalCounters.reset()
  layers = [nn.LayerNorm(k + 3) for k in range(5)]
  assert GlobalCounters.kernel_count == 0 and len(layers) == 5  # a layer's constant weights run no kernel when it is built
