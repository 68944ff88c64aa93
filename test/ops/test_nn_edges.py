"""Edge cases of the nn functions against PyTorch, values and gradients: probabilities of exactly 0 or 1 in
binary_crossentropy, interpolate with a scale_factor whose output size is not a whole multiple, attention rows that
attend to nothing, and activation gradients at their kinks and where the value overflows."""
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fusegrad import Tensor, dtypes
from .helpers import helper_test_op

# ======================================================================== binary_crossentropy at 0 and 1

BCE_X = (0.0, 1.0, 1e-30, 0.5, 1 - 1e-7)
BCE_Y = (0.0, 1.0, 0.3)
# every probability against every target, as two flat vectors
BCE_XS = np.array([x for x in BCE_X for _ in BCE_Y], dtype=np.float32)
BCE_YS = np.array([y for _ in BCE_X for y in BCE_Y], dtype=np.float32)

@pytest.mark.parametrize("red", ["mean", "sum", "none"])
def test_bce_exact_probabilities(red):
  helper_test_op(None, lambda x: F.binary_cross_entropy(x, torch.tensor(BCE_YS), reduction=red),
                 lambda x: x.binary_crossentropy(Tensor(BCE_YS), reduction=red), vals=[BCE_XS], atol=1e-5)

@pytest.mark.parametrize("red", ["mean", "sum", "none"])
def test_bce_exact_probabilities_target_grad(red):
  # torch differentiates the target too: -logit(x), ±inf where x is exactly 0 or 1
  helper_test_op(None, lambda x, y: F.binary_cross_entropy(x, y, reduction=red), lambda x, y: x.binary_crossentropy(y, reduction=red),
                 vals=[BCE_XS, BCE_YS], atol=1e-5)

def test_bce_saturated_sigmoid():
  y = np.array([1.0, 1.0, 0.0], dtype=np.float32)
  helper_test_op(None, lambda x: F.binary_cross_entropy(torch.sigmoid(x), torch.tensor(y)),
                 lambda x: x.sigmoid().binary_crossentropy(Tensor(y)), vals=[[20.0, 0.5, -120.0]], atol=1e-5)

def test_bce_broadcast_target():
  # a target that broadcasts against the input gets its gradient summed back to its own shape
  helper_test_op([(3, 4), (4,)], lambda x, y: F.binary_cross_entropy(torch.sigmoid(x), y.expand(3, 4), reduction="sum"),
                 lambda x, y: x.sigmoid().binary_crossentropy(y, reduction="sum"), low=0.05, high=0.95, atol=1e-5)

# ======================================================================== interpolate with scale_factor

def _interp_cases():
  rng = np.random.default_rng(11)
  cases = [((1, 1, 5), 1.7, "nearest", None), ((1, 1, 20), 1.04, "nearest", None), ((1, 1, 9), 2.1, "nearest", None),
           ((1, 1, 20), 1.04, "nearest-exact", None), ((1, 1, 20), 1.04, "linear", False), ((1, 1, 7), 0.45, "linear", False)]
  for _ in range(36):
    nd = int(rng.integers(1, 4))
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 3)), *(int(rng.integers(1, 9 if nd < 3 else 6)) for _ in range(nd)))
    sf = tuple(round(float(rng.uniform(0.6, 3.2)), int(rng.integers(1, 4))) for _ in range(nd))
    sf = tuple(max(f, 1 / s + 0.01) for f, s in zip(sf, shape[2:]))  # at least one output pixel per dim
    mode = ("nearest", "nearest-exact", "linear")[int(rng.integers(0, 3))]
    cases.append((shape, sf if rng.random() < 0.6 else sf[0], mode, bool(rng.random() < 0.4) if mode == "linear" else None))
  return cases

def _torch_nearest_grad_differs(xs, sf, mode) -> bool:
  """torch 2.13's nearest backward keeps shortcuts for an output of the input's size or twice it (identity, i >> 1) that
  its forward no longer takes with a scale factor: there its gradient is not the adjoint of its own forward."""
  sfs = sf if isinstance(sf, tuple) else (sf,) * (len(xs) - 2)
  return mode == "nearest" and any(math.floor(i * f) in (i, 2 * i) and np.float32(1 / f) != np.float32(i) / np.float32(math.floor(i * f))
                                   for i, f in zip(xs[2:], sfs))

def _check_nearest_adjoint(xs, sf, mode):
  """The gradient of a nearest resize sends each output's gradient to the input pixel torch's forward read."""
  n = int(np.prod(xs))
  src = F.interpolate(torch.arange(n, dtype=torch.float64).reshape(xs), scale_factor=sf, mode=mode).long().numpy()
  g = np.random.default_rng(2).standard_normal(src.shape).astype(np.float32)
  want = np.zeros(n, dtype=np.float64)
  np.add.at(want, src.ravel(), g.ravel())
  x = Tensor(np.zeros(xs, dtype=np.float32), requires_grad=True)
  (x.interpolate(scale_factor=sf, mode=mode) * Tensor(g)).sum().backward()
  np.testing.assert_allclose(x.grad.numpy().ravel(), want, atol=1e-5)

@pytest.mark.parametrize("xs,sf,mode,ac", _interp_cases())
def test_interpolate_scale_factor(xs, sf, mode, ac):
  tmode = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(xs) - 2] if mode == "linear" else mode
  kw = {} if ac is None else {"align_corners": ac}
  helper_test_op([xs], lambda x: F.interpolate(x, scale_factor=sf, mode=tmode, **kw),
                 lambda x: x.interpolate(scale_factor=sf, mode=mode, **kw), atol=1e-5, forward_only=_torch_nearest_grad_differs(xs, sf, mode))
  if mode != "linear": _check_nearest_adjoint(xs, sf, mode)

@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear"])
def test_interpolate_recompute_scale_factor(mode):
  helper_test_op([(1, 2, 5, 7)], lambda x: F.interpolate(x, scale_factor=(1.7, 1.3), mode="bilinear" if mode == "linear" else mode,
                                                         recompute_scale_factor=True),
                 lambda x: x.interpolate(scale_factor=(1.7, 1.3), mode=mode, recompute_scale_factor=True), atol=1e-5)

def test_interpolate_1d_nearest_example():
  x = np.arange(5, dtype=np.float32).reshape(1, 1, 5)
  np.testing.assert_array_equal(Tensor(x).interpolate(scale_factor=1.7, mode="nearest").numpy().ravel(), [0, 0, 1, 1, 2, 2, 3, 4])

def test_interpolate_recompute_needs_scale_factor():
  with pytest.raises(Exception, match="recompute_scale_factor"):
    Tensor.ones(1, 1, 4).interpolate(size=6, mode="nearest", recompute_scale_factor=True)

# ======================================================================== attention rows that attend to nothing

def _qkv(qs, ks, seed=0):
  rng = np.random.default_rng(seed)
  return [rng.standard_normal(s).astype(np.float32) for s in (qs, ks, ks)]

def test_sdpa_bool_mask_dead_row_example():
  q = np.ones((1, 2, 4), dtype=np.float32)
  m = np.array([[True, False], [False, False]])
  helper_test_op(None, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(m)),
                 lambda q, k, v: q.scaled_dot_product_attention(k, v, attn_mask=Tensor(m)), vals=[q, q, q], atol=1e-6)

def test_sdpa_bool_mask_dead_rows():
  m = np.random.default_rng(5).random((5, 7)) > 0.4
  m[1], m[4] = False, False
  helper_test_op(None, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(m)),
                 lambda q, k, v: q.scaled_dot_product_attention(k, v, attn_mask=Tensor(m)), vals=_qkv((2, 5, 8), (2, 7, 8)), atol=1e-5)

def test_sdpa_float_mask_dead_rows():
  # the mask takes a gradient too: zero on a dead row, as torch
  m = np.random.default_rng(6).standard_normal((5, 6)).astype(np.float32)
  m[2] = -np.inf
  m[3, ::2] = -np.inf
  helper_test_op(None, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                 lambda q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m), vals=[*_qkv((2, 2, 5, 8), (2, 2, 6, 8)), m], atol=1e-5)

def test_sdpa_broadcast_mask_dead_batch():
  # a key-padding mask (B, 1, 1, S): the second batch attends to nothing at all
  m = np.ones((2, 1, 1, 6), dtype=bool)
  m[0, ..., 4:], m[1] = False, False
  helper_test_op(None, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(m)),
                 lambda q, k, v: q.scaled_dot_product_attention(k, v, attn_mask=Tensor(m)), vals=_qkv((2, 3, 4, 8), (2, 3, 6, 8)), atol=1e-5)

@pytest.mark.parametrize("qs,ks", [((2, 3, 5, 8), (2, 3, 5, 8)), ((1, 7, 4), (1, 3, 4)), ((1, 3, 4), (1, 7, 4))])
def test_sdpa_causal_still_matches(qs, ks):
  helper_test_op(None, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                 lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True), vals=_qkv(qs, ks), atol=1e-5)

def test_sdpa_dead_row_gradient_is_finite():
  q = Tensor(_qkv((1, 3, 4), (1, 3, 4))[0], requires_grad=True)
  m = Tensor(np.array([[True, True, False], [False, False, False], [True, False, False]]))
  q.scaled_dot_product_attention(q, q, attn_mask=m).sum().backward()
  assert np.isfinite(q.grad.numpy()).all()

# ======================================================================== activations at their kinks and overflow

EDGE_X = [0.0, -0.0, 1.0, -1.0, 1e-3, -1e-3, 20.0, -20.0, -50.0, 89.0, -89.0, 100.0, -100.0, math.inf, -math.inf, math.nan]

ACTS = [
  ("elu", F.elu, lambda x: x.elu()),
  ("elu_0.5", lambda x: F.elu(x, 0.5), lambda x: x.elu(0.5)),
  ("selu", F.selu, lambda x: x.selu()),
  ("celu", F.celu, lambda x: x.celu()),
  ("celu_1.5", lambda x: F.celu(x, 1.5), lambda x: x.celu(1.5)),
  ("leaky_relu", F.leaky_relu, lambda x: x.leaky_relu()),
  ("leaky_relu_0.2", lambda x: F.leaky_relu(x, 0.2), lambda x: x.leaky_relu(0.2)),
  ("sinh", torch.sinh, lambda x: x.sinh()),
  ("cosh", torch.cosh, lambda x: x.cosh()),
]

@pytest.mark.parametrize("name,tf,ff", ACTS, ids=[a[0] for a in ACTS])
def test_activation_edges(name, tf, ff):
  helper_test_op(None, tf, ff, vals=[EDGE_X], atol=1e-6)
  # the sign of a zero result too (allclose does not see it)
  got, want = ff(Tensor(np.array(EDGE_X, dtype=np.float32))).numpy(), tf(torch.tensor(EDGE_X)).numpy()
  zero = want == 0
  np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg=f"{name}: sign of zero results")

@pytest.mark.parametrize("name,tf,ff", ACTS, ids=[a[0] for a in ACTS])
def test_activation_random(name, tf, ff):
  helper_test_op([(4, 9)], tf, ff, low=-4, high=4, atol=1e-5)

# ======================================================================== uint8 bilinear: torch's fixed-point result, to the bit
@pytest.mark.parametrize("size", [(7, 7), (15, 13), (20, 20), (10, 23), (3, 31), (10, 5), (10, 10)])
@pytest.mark.parametrize("ac", [False, True])
def test_interpolate_uint8_bilinear_matches_torch(size, ac):
  x = np.random.default_rng(0).integers(0, 256, (2, 3, 10, 10)).astype(np.uint8)
  got = Tensor(x).interpolate(size=size, mode="bilinear", align_corners=ac)
  want = F.interpolate(torch.tensor(x), size=size, mode="bilinear", align_corners=ac).numpy()
  assert got.dtype == dtypes.uint8
  np.testing.assert_array_equal(got.numpy(), want)
