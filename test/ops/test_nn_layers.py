"""nn layers against torch.nn modules holding the same weights: forward outputs, state-dict names, default init, train/eval."""
import math
import numpy as np
import pytest
import torch
from fusegrad import Tensor, nn, dtypes
from .helpers import BACKWARD

def load_from_torch(layer, tmod: torch.nn.Module):
  """Copy every torch parameter/buffer into the fusegrad attribute of the same name (shapes must agree)."""
  for k, v in tmod.state_dict().items():
    mine = getattr(layer, k)
    assert mine is not None, f"{type(layer).__name__} has no {k}"
    assert tuple(mine.shape) == tuple(v.shape), f"{k}: fusegrad {mine.shape} vs torch {tuple(v.shape)}"
    # reshape: Tensor(0-d numpy array) comes out with shape (1,) in the core at the moment
    setattr(layer, k, Tensor(v.detach().numpy().copy(), dtype=mine.dtype).reshape(tuple(v.shape)))

def state_keys(layer) -> set:
  return {k for k, v in vars(layer).items() if isinstance(v, Tensor)}

def check_layer(layer, tmod, shape, atol=1e-5, train=False, x=None, seed=0, grad=False, grad_atol=1e-4):
  """Run the fusegrad layer and the torch module on the same input and compare the outputs; with grad (and autograd
  available) also compare the gradients of the input and of every parameter for a random upstream gradient."""
  load_from_torch(layer, tmod)
  rng = np.random.default_rng(seed)
  x = rng.standard_normal(shape).astype(np.float32) if x is None else x
  grad = grad and BACKWARD
  tmod.train(train)
  tx = torch.from_numpy(x.copy()).requires_grad_(grad)
  with torch.set_grad_enabled(grad): want = tmod(tx)
  fx = Tensor(x, requires_grad=True if grad else None)
  params = {k: getattr(layer, k) for k, _ in tmod.named_parameters()}
  if grad:
    for p in params.values(): p.requires_grad_(True)
  with Tensor.train(train): got = layer(fx)
  assert got.shape == tuple(want.shape), f"shape {got.shape} != torch {tuple(want.shape)}"
  if grad:  # backward is built before the forward values are read (reading realizes got and drops its graph)
    g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    (want * torch.from_numpy(g)).sum().backward()
    with Tensor.train(train): (got * Tensor(g)).sum().backward()
  np.testing.assert_allclose(got.numpy(), want.detach().numpy(), atol=atol, rtol=1e-4)
  if grad:
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), atol=grad_atol, rtol=1e-3, err_msg="input gradient")
    for k, tp in tmod.named_parameters():
      np.testing.assert_allclose(params[k].grad.numpy(), tp.grad.numpy(), atol=grad_atol, rtol=1e-3, err_msg=f"gradient of {k}")
  return got, want

# ======================================================================== Linear / conv

@pytest.mark.parametrize("fin,fout,bias,shape", [(8, 5, True, (4, 8)), (3, 7, False, (2, 3, 3)), (16, 1, True, (1, 16))])
def test_linear(fin, fout, bias, shape):
  check_layer(nn.Linear(fin, fout, bias=bias), torch.nn.Linear(fin, fout, bias=bias), shape, grad=True)

CONV2D = [
  (dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 8, 8)),
  (dict(in_channels=4, out_channels=6, kernel_size=(3, 2), stride=2, padding=1, groups=2), (1, 4, 9, 7)),
  (dict(in_channels=2, out_channels=3, kernel_size=3, padding="same", dilation=2, bias=False), (2, 2, 7, 7)),
  (dict(in_channels=4, out_channels=4, kernel_size=3, padding=1, groups=4), (1, 4, 5, 6)),
]

@pytest.mark.parametrize("kw,shape", CONV2D)
def test_conv2d(kw, shape):
  check_layer(nn.Conv2d(**kw), torch.nn.Conv2d(**kw), shape, grad=True)

@pytest.mark.parametrize("kw,shape", [(dict(in_channels=3, out_channels=5, kernel_size=3, stride=2), (2, 3, 11)),
                                      (dict(in_channels=2, out_channels=4, kernel_size=4, padding="same"), (1, 2, 9))])
def test_conv1d(kw, shape):
  check_layer(nn.Conv1d(**kw), torch.nn.Conv1d(**kw), shape)

@pytest.mark.parametrize("kw,shape", [(dict(in_channels=3, out_channels=2, kernel_size=3), (1, 3, 4, 4)),
                                      (dict(in_channels=4, out_channels=6, kernel_size=4, stride=2, padding=1, groups=2), (2, 4, 3, 5)),
                                      (dict(in_channels=2, out_channels=3, kernel_size=3, stride=2, padding=1, output_padding=1, bias=False), (1, 2, 4, 4))])
def test_conv_transpose2d(kw, shape):
  check_layer(nn.ConvTranspose2d(**kw), torch.nn.ConvTranspose2d(**kw), shape, grad=True)

def test_conv_transpose1d():
  kw = dict(in_channels=2, out_channels=3, kernel_size=3, stride=2)
  check_layer(nn.ConvTranspose1d(**kw), torch.nn.ConvTranspose1d(**kw), (2, 2, 5))

# ======================================================================== normalisation

@pytest.mark.parametrize("train", [False, True])
def test_batchnorm2d(train):
  tmod = torch.nn.BatchNorm2d(4)
  with torch.no_grad():  # non-trivial parameters and running stats
    tmod.weight.uniform_(0.5, 1.5); tmod.bias.uniform_(-1, 1); tmod.running_mean.uniform_(-1, 1); tmod.running_var.uniform_(0.5, 2)
  check_layer(nn.BatchNorm2d(4), tmod, (3, 4, 5, 5), train=train, grad=True)

def test_batchnorm_running_stats_update():
  tmod, bn = torch.nn.BatchNorm2d(3, momentum=0.3), nn.BatchNorm2d(3, momentum=0.3)
  load_from_torch(bn, tmod)
  rng = np.random.default_rng(7)
  tmod.train()
  rm, rv, nbt = bn.running_mean, bn.running_var, bn.num_batches_tracked
  for step in range(3):
    x = (rng.standard_normal((4, 3, 3, 3)) * (step + 1) + step).astype(np.float32)
    with torch.no_grad(): tmod(torch.from_numpy(x))
    with Tensor.train(): bn(Tensor(x)).realize()
  np.testing.assert_allclose(bn.running_mean.numpy(), tmod.running_mean.numpy(), atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(bn.running_var.numpy(), tmod.running_var.numpy(), atol=1e-5, rtol=1e-5)
  assert bn.num_batches_tracked.item() == tmod.num_batches_tracked.item() == 3
  assert bn.running_mean is rm and bn.running_var is rv and bn.num_batches_tracked is nbt, "running stats must be updated in place"
  # eval mode then uses the running statistics
  check_layer(bn, tmod, (2, 3, 4, 4), train=False)

def test_batchnorm_cumulative_momentum():
  tmod, bn = torch.nn.BatchNorm1d(3, momentum=None), nn.BatchNorm1d(3, momentum=None)
  load_from_torch(bn, tmod)
  rng = np.random.default_rng(8)
  tmod.train()
  for _ in range(3):
    x = rng.standard_normal((6, 3)).astype(np.float32)
    with torch.no_grad(): tmod(torch.from_numpy(x))
    with Tensor.train(): bn(Tensor(x)).realize()
  np.testing.assert_allclose(bn.running_mean.numpy(), tmod.running_mean.numpy(), atol=1e-5)
  np.testing.assert_allclose(bn.running_var.numpy(), tmod.running_var.numpy(), atol=1e-5)

@pytest.mark.parametrize("shape,train", [((5, 4), True), ((3, 4, 6), True), ((3, 4, 6), False)])
def test_batchnorm1d(shape, train):
  check_layer(nn.BatchNorm1d(4), torch.nn.BatchNorm1d(4), shape, train=train)

def test_batchnorm_no_affine_no_stats():
  bn = nn.BatchNorm2d(3, affine=False, track_running_stats=False)
  assert bn.weight is None and bn.running_mean is None
  check_layer(bn, torch.nn.BatchNorm2d(3, affine=False, track_running_stats=False), (2, 3, 4, 4), train=False)

@pytest.mark.parametrize("ns,shape", [(8, (2, 3, 8)), ((3, 4), (2, 3, 4)), (5, (5,))])
def test_layernorm(ns, shape):
  tmod = torch.nn.LayerNorm(ns)
  with torch.no_grad(): tmod.weight.uniform_(0.5, 1.5); tmod.bias.uniform_(-1, 1)
  check_layer(nn.LayerNorm(ns), tmod, shape, grad=True)

def test_layernorm_no_affine():
  check_layer(nn.LayerNorm(6, elementwise_affine=False), torch.nn.LayerNorm(6, elementwise_affine=False), (3, 6))

@pytest.mark.parametrize("g,c,shape", [(2, 4, (2, 4, 3, 3)), (3, 6, (1, 6, 5)), (1, 3, (2, 3, 2, 2))])
def test_groupnorm(g, c, shape):
  tmod = torch.nn.GroupNorm(g, c)
  with torch.no_grad(): tmod.weight.uniform_(0.5, 1.5); tmod.bias.uniform_(-1, 1)
  check_layer(nn.GroupNorm(g, c), tmod, shape, grad=True)

def test_instancenorm():
  tmod = torch.nn.InstanceNorm2d(3, affine=True)
  with torch.no_grad(): tmod.weight.uniform_(0.5, 1.5); tmod.bias.uniform_(-1, 1)
  check_layer(nn.InstanceNorm(3), tmod, (2, 3, 4, 5))
  check_layer(nn.InstanceNorm1d(3), torch.nn.InstanceNorm1d(3), (2, 3, 7))

@pytest.mark.parametrize("dim,shape", [(8, (2, 3, 8)), ((2, 4), (3, 2, 4))])
def test_rmsnorm(dim, shape):
  tmod = torch.nn.RMSNorm(dim, eps=1e-6)
  with torch.no_grad(): tmod.weight.uniform_(0.5, 1.5)
  check_layer(nn.RMSNorm(dim, eps=1e-6), tmod, shape, grad=True)

# ======================================================================== embedding

@pytest.mark.parametrize("shape", [(5,), (2, 3), ()])
def test_embedding(shape):
  tmod, emb = torch.nn.Embedding(10, 4), nn.Embedding(10, 4)
  load_from_torch(emb, tmod)
  rng = np.random.default_rng(9)
  idx = rng.integers(0, 10, size=shape)
  want = tmod(torch.from_numpy(idx))
  got = emb(Tensor(idx.astype(np.int32)).reshape(shape))
  if BACKWARD:  # repeated indices must accumulate
    g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    (want * torch.from_numpy(g)).sum().backward()
    emb.weight.requires_grad_(True)
    (got * Tensor(g)).sum().backward()
  np.testing.assert_array_equal(got.numpy(), want.detach().numpy())
  if BACKWARD: np.testing.assert_allclose(emb.weight.grad.numpy(), tmod.weight.grad.numpy(), atol=1e-5)

def test_embedding_rejects_float():
  with pytest.raises(TypeError): nn.Embedding(4, 2)(Tensor([0.0, 1.0]))

# ======================================================================== names and initialisation

@pytest.mark.parametrize("make_fg,make_t", [
  (lambda: nn.Linear(3, 4), lambda: torch.nn.Linear(3, 4)),
  (lambda: nn.Conv2d(2, 4, 3), lambda: torch.nn.Conv2d(2, 4, 3)),
  (lambda: nn.ConvTranspose2d(2, 4, 3, groups=2), lambda: torch.nn.ConvTranspose2d(2, 4, 3, groups=2)),
  (lambda: nn.BatchNorm2d(3), lambda: torch.nn.BatchNorm2d(3)),
  (lambda: nn.LayerNorm(5), lambda: torch.nn.LayerNorm(5)),
  (lambda: nn.GroupNorm(2, 4), lambda: torch.nn.GroupNorm(2, 4)),
  (lambda: nn.RMSNorm(5), lambda: torch.nn.RMSNorm(5)),
  (lambda: nn.Embedding(6, 3), lambda: torch.nn.Embedding(6, 3)),
])
def test_state_names_and_shapes(make_fg, make_t):
  fg, t = make_fg(), make_t()
  sd = t.state_dict()
  assert state_keys(fg) == set(sd), f"{state_keys(fg)} != {set(sd)}"
  for k, v in sd.items(): assert getattr(fg, k).shape == tuple(v.shape), k

@pytest.mark.parametrize("make,fan_in", [(lambda: nn.Linear(50, 40), 50), (lambda: nn.Conv2d(6, 20, 3, groups=2), 27),
                                         (lambda: nn.Conv1d(4, 30, 5), 20), (lambda: nn.ConvTranspose2d(10, 12, 3, groups=2), 54)])
def test_default_init_bounds(make, fan_in):
  Tensor.manual_seed(0)
  layer = make()
  bound = 1 / math.sqrt(fan_in)
  for name in ("weight", "bias"):
    v = getattr(layer, name).numpy()
    assert np.abs(v).max() <= bound + 1e-7, name
    if v.size >= 200: assert np.abs(v).max() > 0.8 * bound and abs(v.mean()) < 0.1 * bound, name  # spread over the range

def test_norm_init():
  bn = nn.BatchNorm2d(4)
  assert (bn.weight.numpy() == 1).all() and (bn.bias.numpy() == 0).all()
  assert (bn.running_mean.numpy() == 0).all() and (bn.running_var.numpy() == 1).all()
  assert bn.num_batches_tracked.dtype == dtypes.int64 and bn.num_batches_tracked.item() == 0
  assert bn.running_mean.requires_grad is False and bn.running_var.requires_grad is False, "buffers are not parameters"
  assert (nn.LayerNorm(3).weight.numpy() == 1).all() and (nn.GroupNorm(1, 3).bias.numpy() == 0).all()

# ======================================================================== a small network end to end

def test_small_cnn_matches_torch():
  class FG:
    def __init__(self):
      self.c1, self.bn, self.c2, self.fc = nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Conv2d(4, 8, 3, stride=2), nn.Linear(8 * 3 * 3, 5)
    def __call__(self, x):
      x = self.bn(self.c1(x)).relu().max_pool2d(2)
      return self.fc(self.c2(x).gelu(approximate="none").flatten(1)).log_softmax(-1)
  tm = torch.nn.ModuleDict(dict(c1=torch.nn.Conv2d(1, 4, 3, padding=1), bn=torch.nn.BatchNorm2d(4), c2=torch.nn.Conv2d(4, 8, 3, stride=2),
                                fc=torch.nn.Linear(72, 5))).eval()
  fg = FG()
  for name in ("c1", "bn", "c2", "fc"): load_from_torch(getattr(fg, name), tm[name])
  x = np.random.default_rng(10).standard_normal((2, 1, 16, 16)).astype(np.float32)
  with torch.no_grad():
    t = torch.from_numpy(x)
    t = torch.nn.functional.max_pool2d(torch.relu(tm["bn"](tm["c1"](t))), 2)
    want = torch.log_softmax(tm["fc"](torch.nn.functional.gelu(tm["c2"](t)).flatten(1)), -1).numpy()
  np.testing.assert_allclose(fg(Tensor(x)).numpy(), want, atol=1e-5)

# ======================================================================== parameters that start as constants get gradients without an optimizer
@pytest.mark.parametrize("make,shape", [(lambda: nn.RMSNorm(4), (2, 4)), (lambda: nn.LayerNorm(4), (2, 4)), (lambda: nn.BatchNorm(4), (2, 4, 3)),
                                        (lambda: nn.GroupNorm(2, 4), (2, 4, 3)), (lambda: nn.InstanceNorm(4, affine=True), (2, 4, 3))])
def test_constant_initialised_parameters_get_gradients(make, shape):
  a, b = make(), make()  # two layers: their equal constants must not be one node sharing one gradient
  x = Tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
  with Tensor.train(): (a(x) * 2 + b(x)).square().sum().backward()
  assert a.weight.grad is not None and b.weight.grad is not None and a.weight.grad is not b.weight.grad
  assert not np.allclose(a.weight.grad.numpy(), b.weight.grad.numpy())
