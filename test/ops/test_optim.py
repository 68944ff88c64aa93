"""Optimizer trajectories against torch.optim over several steps, and the kernel cost of a step."""
import numpy as np, pytest, torch
from fusegrad import Tensor, GlobalCounters, nn
from fusegrad.nn import optim

def trajectory(make_ours, make_torch, steps=6):
  rng = np.random.default_rng(0)
  w0, b0 = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
  xs = [rng.standard_normal((8, 5)).astype(np.float32) for _ in range(steps)]
  w, b = Tensor(w0.copy(), requires_grad=True), Tensor(b0.copy(), requires_grad=True)
  tw, tb = torch.tensor(w0.copy(), requires_grad=True), torch.tensor(b0.copy(), requires_grad=True)
  opt, topt = make_ours([w, b]), make_torch([tw, tb])
  with Tensor.train():
    for x in xs:
      opt.zero_grad(); ((Tensor(x) @ w + b).relu() - 0.3).square().mean().backward(); opt.step()
      topt.zero_grad(); ((torch.tensor(x) @ tw + tb).relu() - 0.3).square().mean().backward(); topt.step()
  np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("kw", [dict(lr=0.1), dict(lr=0.1, momentum=0.9), dict(lr=0.05, momentum=0.9, nesterov=True),
                                dict(lr=0.1, weight_decay=0.1), dict(lr=0.1, momentum=0.5, weight_decay=0.01)])
def test_sgd(kw):
  trajectory(lambda p: optim.SGD(p, **kw), lambda p: torch.optim.SGD(p, **kw))

@pytest.mark.parametrize("kw", [dict(lr=0.01), dict(lr=0.05, betas=(0.8, 0.99)), dict(lr=0.01, weight_decay=0.1), dict(lr=0.01, eps=1e-3)])
def test_adam(kw):
  trajectory(lambda p: optim.Adam(p, **kw), lambda p: torch.optim.Adam(p, **kw))

@pytest.mark.parametrize("kw", [dict(lr=0.01), dict(lr=0.05, weight_decay=0.1), dict(lr=0.01, betas=(0.5, 0.9), weight_decay=0.0)])
def test_adamw(kw):
  trajectory(lambda p: optim.AdamW(p, **kw), lambda p: torch.optim.AdamW(p, **kw))

@Tensor.train()
def test_lamb_matches_reference_math():
  rng = np.random.default_rng(1)
  w0, g0 = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
  w = Tensor(w0.copy(), requires_grad=True)
  opt = optim.LAMB([w], lr=0.01, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.01)
  m, v, p = np.zeros_like(w0), np.zeros_like(w0), w0.astype(np.float64)
  for t in range(1, 4):
    opt.zero_grad(); (w * Tensor(g0)).sum().backward(); opt.step()
    m = 0.9 * m + 0.1 * g0; v = 0.999 * v + 0.001 * g0 * g0
    up = (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-6) + 0.01 * p
    p = p - 0.01 * (np.linalg.norm(p) / np.linalg.norm(up)) * up
  np.testing.assert_allclose(w.numpy(), p, rtol=1e-5, atol=1e-6)

@Tensor.train()
def test_lr_is_a_tensor_and_can_change():
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = optim.SGD([w], lr=0.5)
  opt.lr.assign(Tensor([0.25])).realize()
  (w * 2).sum().backward(); opt.step()
  np.testing.assert_allclose(w.numpy(), [0.5, 1.5])

@Tensor.train()
def test_params_without_grad_are_skipped():
  a, b = Tensor([1.0], requires_grad=True), Tensor([1.0], requires_grad=True)
  opt = optim.SGD([a, b], lr=1.0)
  (a * 3).sum().backward(); opt.step()
  assert a.item() == -2.0 and b.item() == 1.0
  opt.zero_grad()
  with pytest.raises(RuntimeError, match="backward"): opt.step()

@Tensor.train()
def test_step_kernel_count():
  # Linear -> ReLU -> sum, its backward and an SGD step: backward fuses with the forward's shapes, so the whole
  # step is a handful of kernels, not one per op
  Tensor.manual_seed(0)
  layer = nn.Linear(16, 8)
  opt = optim.SGD([layer.weight, layer.bias], lr=0.1)
  x = Tensor.rand(4, 16).realize()
  for p in (layer.weight, layer.bias): p.realize()
  GlobalCounters.reset()
  opt.zero_grad(); layer(x).relu().sum().backward(); opt.step()
  # weight update (fused matmul of grad), bias update, and the shared relu-mask/forward
  assert GlobalCounters.kernel_count <= 4, GlobalCounters.kernel_count

@pytest.mark.parametrize("make", [lambda ps: optim.Adam(ps, lr=1e-2), lambda ps: optim.SGD(ps, lr=1e-2, momentum=0.9)])
def test_an_eager_step_schedules_every_update_together(make, monkeypatch):
  # an optimizer holds no view of a parameter when it assigns the update: a view alive makes the write in place at
  # once, which realized each parameter's update on its own (an eager Adam step of 20 weights: 20 schedules, 2x slower)
  import fusegrad.tensor.tensor as tt
  Tensor.manual_seed(0)
  layers = [nn.Linear(8, 8) for _ in range(3)]
  opt = make([p for layer in layers for p in (layer.weight, layer.bias)])
  x = Tensor.rand(4, 8).realize()
  for _ in range(2):
    with Tensor.train():
      opt.zero_grad(); x.sequential(layers).square().mean().backward()
      realizes = []
      real = tt.Tensor._realize_all
      monkeypatch.setattr(tt.Tensor, "_realize_all", staticmethod(lambda *ts: realizes.append(len(ts)) or real(*ts)))
      opt.step()
      monkeypatch.undo()
    assert len(realizes) == 1, realizes

def test_backward_of_linear_relu_sum_fuses():
  Tensor.manual_seed(0)
  w = Tensor.rand(16, 8, requires_grad=True)
  x = Tensor.rand(4, 16).realize()
  GlobalCounters.reset()
  (x @ w).relu().sum().backward()
  w.grad.realize()
  # the forward matmul (needed for the relu mask) and the gradient matmul: 2 kernels
  assert GlobalCounters.kernel_count == 2, GlobalCounters.kernel_count

def test_training_flag_and_no_grad():
  from fusegrad import Context
  assert not Tensor.training
  with Tensor.train():
    assert Tensor.training
    with Tensor.test(): assert not Tensor.training
  with Context(TRAINING=1): assert Tensor.training
  assert not Tensor.training
  x = Tensor([1.0, 2.0], requires_grad=True)
  with Tensor.inference_mode():
    with pytest.raises(RuntimeError, match="no_grad"): (x * 2).sum().backward()
  (x * 2).sum().backward()
  assert x.grad.tolist() == [2.0, 2.0]
  # dropout only acts in training mode
  y = Tensor.ones(1000)
  assert y.dropout(0.5).tolist() == y.tolist()
  with Tensor.train(): assert 300 < (y.dropout(0.5) == 0).sum().item() < 700

def test_equal_leaves_get_their_own_gradients():
  a, b = Tensor.ones(2, requires_grad=True), Tensor.ones(2, requires_grad=True)
  (a * 2 + b * 3).sum().backward()
  assert a.grad.tolist() == [2.0, 2.0] and b.grad.tolist() == [3.0, 3.0]
  # two layers with the same lazy init are separate parameters once an optimizer owns them
  l1, l2 = nn.LayerNorm(3), nn.LayerNorm(3)
  optim.SGD([l1.weight, l2.weight], lr=1.0)
  x = Tensor([[1.0, 2.0, 4.0]])
  (l1(x).sum() * 2 + l2(x).square().sum()).backward()
  assert l1.weight.grad.tolist() != l2.weight.grad.tolist()

def test_data_view_survives_later_allocations():
  mv = (Tensor([1.0, 2.0]) + 1).data()
  (Tensor([5.0, 6.0]) * 10).realize()
  assert mv.tolist() == [2.0, 3.0]

def test_inference_mode_decorator():
  x = Tensor([1.0], requires_grad=True)
  @Tensor.inference_mode()
  def f(): (x * 2).sum().backward()
  with pytest.raises(RuntimeError, match="no_grad"): f()
