"""NN functions on Tensor (conv, pooling, interpolation, activations, normalisation, losses, attention) against PyTorch.

Every case goes through helpers.helper_test_op: shapes in, a torch function and a fusegrad function, so the forward pass is
compared and, once autograd is on (helpers.BACKWARD), the gradients of the float inputs too. forward_only marks cases whose
gradient is not defined the same way (integer targets, ...)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fusegrad import Tensor, dtypes
from .helpers import helper_test_op

i64 = dtypes.int64

# ======================================================================== convolution

CONV2D = [
  # x shape, w shape, kwargs
  ((2, 3, 8, 8), (4, 3, 3, 3), dict()),
  ((2, 3, 9, 9), (4, 3, 3, 3), dict(stride=2, padding=1)),
  ((1, 2, 7, 6), (3, 2, 3, 3), dict(padding="same")),
  ((1, 2, 7, 6), (3, 2, 4, 2), dict(padding="same")),  # even kernel: torch puts the extra pixel after
  ((1, 2, 9, 8), (3, 2, 3, 3), dict(padding="same", dilation=2)),
  ((2, 2, 6, 7), (3, 2, 3, 2), dict(padding="valid")),
  ((1, 3, 10, 10), (2, 3, 3, 3), dict(dilation=2)),
  ((2, 4, 6, 6), (6, 2, 3, 3), dict(groups=2, padding=1)),
  ((1, 4, 7, 7), (4, 1, 3, 3), dict(groups=4, stride=2, padding=1)),  # depthwise
  ((2, 3, 7, 5), (2, 3, 2, 3), dict(stride=(2, 1), padding=(1, 0))),
  ((1, 1, 5, 5), (1, 1, 1, 1), dict()),
  ((2, 3, 9, 10), (4, 3, 2, 2), dict(stride=3)),  # non-overlapping windows, k < s
  ((1, 2, 9, 9), (2, 2, 3, 3), dict(stride=3)),  # k == s
  ((1, 2, 11, 8), (3, 2, 5, 3), dict(stride=(3, 2), dilation=(2, 1), padding=(2, 1))),
  ((1, 6, 5, 5), (4, 3, 2, 2), dict(groups=2, stride=2, dilation=2, padding=2)),
]

@pytest.mark.parametrize("xs,ws,kw", CONV2D)
def test_conv2d(xs, ws, kw):
  helper_test_op([xs, ws, (ws[0],)], lambda x, w, b: F.conv2d(x, w, b, **kw),
                 lambda x, w, b: x.conv2d(w, b, groups=kw.get("groups", 1), stride=kw.get("stride", 1), dilation=kw.get("dilation", 1),
                                          padding=kw.get("padding", 0)), atol=1e-5)

def test_conv2d_no_bias_batch1():
  helper_test_op([(1, 3, 6, 6), (5, 3, 3, 3)], lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: x.conv2d(w, padding=1), atol=1e-5)

def test_conv2d_tinygrad_flat_padding():
  # tinygrad's flat (left, right, top, bottom) padding is F.pad's order
  helper_test_op([(1, 2, 6, 5), (3, 2, 3, 3)], lambda x, w: F.conv2d(F.pad(x, (1, 2, 0, 1)), w),
                 lambda x, w: x.conv2d(w, padding=(1, 2, 0, 1)), atol=1e-5)

def test_conv2d_unbatched():
  helper_test_op([(3, 6, 6), (4, 3, 3, 3)], lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: x.conv2d(w, padding=1), atol=1e-5)

@pytest.mark.parametrize("xs,ws,kw", [
  ((2, 3, 11), (4, 3, 3), dict()),
  ((1, 2, 10), (3, 2, 4), dict(padding="same")),
  ((2, 4, 13), (4, 2, 3), dict(stride=2, dilation=2, groups=2, padding=1)),
])
def test_conv1d(xs, ws, kw):
  helper_test_op([xs, ws, (ws[0],)], lambda x, w, b: F.conv1d(x, w, b, **kw),
                 lambda x, w, b: x.conv2d(w, b, groups=kw.get("groups", 1), stride=kw.get("stride", 1), dilation=kw.get("dilation", 1),
                                          padding=kw.get("padding", 0)), atol=1e-5)

def test_conv3d():
  helper_test_op([(1, 2, 5, 4, 6), (3, 2, 2, 3, 3), (3,)], lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1)),
                 lambda x, w, b: x.conv2d(w, b, stride=(1, 2, 1), padding=(1, 0, 1)), atol=1e-5)

CONVT = [
  ((2, 3, 5, 5), (3, 4, 3, 3), dict()),
  ((1, 2, 4, 5), (2, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
  ((1, 4, 4, 4), (4, 2, 3, 2), dict(groups=2, dilation=2, padding=(1, 0))),
  ((2, 2, 3, 3), (2, 2, 4, 4), dict(stride=2, padding=1)),  # the usual 2x upsampling
  ((1, 3, 4, 3), (3, 2, 2, 3), dict(stride=(3, 2), output_padding=(1, 0))),
  ((1, 8, 4, 5), (8, 16, 3, 3), dict(stride=2, padding=1, output_padding=1)),  # 16 output channels: read in place
]

@pytest.mark.parametrize("xs,ws,kw", CONVT)
def test_conv_transpose2d(xs, ws, kw):
  cout = ws[1] * kw.get("groups", 1)
  helper_test_op([xs, ws, (cout,)], lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), lambda x, w, b: x.conv_transpose2d(w, b, **kw), atol=1e-5)

def test_conv_transpose1d():
  helper_test_op([(2, 3, 6), (3, 2, 3)], lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1),
                 lambda x, w: x.conv_transpose2d(w, stride=2, padding=1, output_padding=1), atol=1e-5)

def test_conv2d_bad_shapes():
  with pytest.raises(ValueError): Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(4, 2, 3, 3))
  with pytest.raises(ValueError): Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(4, 3, 3, 3), stride=2, padding="same")

# ======================================================================== pooling

MAXPOOL = [
  ((2, 3, 8, 8), dict(kernel_size=2)),
  ((1, 2, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
  ((1, 2, 9, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),
  ((1, 2, 10, 10), dict(kernel_size=(3, 2), stride=(2, 1), dilation=(2, 1))),
  ((1, 1, 8, 8), dict(kernel_size=2, stride=3, padding=1, ceil_mode=True)),
  ((1, 1, 7, 7), dict(kernel_size=3, stride=1, padding=1)),
]

@pytest.mark.parametrize("xs,kw", MAXPOOL)
def test_max_pool2d(xs, kw):
  helper_test_op([xs], lambda x: F.max_pool2d(x, **kw), lambda x: x.max_pool2d(**kw), atol=1e-6)

def test_max_pool1d():
  helper_test_op([(2, 3, 11)], lambda x: F.max_pool1d(x, 3, 2, 1), lambda x: x.max_pool2d((3,), 2, padding=1))

def test_max_pool2d_return_indices():
  # the indices are int32, as every fusegrad index result (and tinygrad's); torch's are int64
  helper_test_op([(2, 2, 7, 6)], lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
                 lambda x: (lambda v, i: (v, i.long()))(*x.max_pool2d(3, 2, padding=1, return_indices=True)), forward_only=True)
  assert Tensor.ones(1, 1, 4, 4).max_pool2d(2, return_indices=True)[1].dtype == dtypes.int32

AVGPOOL = [
  ((2, 3, 8, 8), dict(kernel_size=2)),
  ((1, 2, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
  ((1, 2, 9, 7), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
  ((1, 2, 8, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),
  ((1, 1, 8, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
  ((1, 1, 8, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
  ((1, 2, 6, 9), dict(kernel_size=(2, 4), stride=(1, 3))),
]

@pytest.mark.parametrize("xs,kw", AVGPOOL)
def test_avg_pool2d(xs, kw):
  helper_test_op([xs], lambda x: F.avg_pool2d(x, **kw), lambda x: x.avg_pool2d(**kw), atol=1e-6)

@pytest.mark.parametrize("xs,out", [((2, 3, 8, 6), (4, 3)), ((1, 2, 7, 5), (3, 2)), ((1, 2, 6, 6), 1), ((1, 2, 5, 7), (None, 4))])
def test_adaptive_avg_pool2d(xs, out):
  helper_test_op([xs], lambda x: F.adaptive_avg_pool2d(x, out), lambda x: x.adaptive_avg_pool2d(out), atol=1e-6)

@pytest.mark.parametrize("xs,out", [((2, 3, 8, 6), (2, 3)), ((1, 2, 7, 5), (3, 2))])
def test_adaptive_max_pool2d(xs, out):
  helper_test_op([xs], lambda x: F.adaptive_max_pool2d(x, out), lambda x: x.adaptive_max_pool2d(out))

# ======================================================================== interpolation

INTERP = [
  ((1, 2, 4, 5), (8, 10), "nearest", None),
  ((1, 2, 7, 6), (3, 4), "nearest", None),
  ((1, 2, 5, 6), (7, 9), "nearest-exact", None),
  ((2, 1, 4, 5), (7, 3), "bilinear", False),
  ((2, 1, 4, 5), (7, 3), "bilinear", True),
  ((1, 2, 6), (11,), "linear", False),
  ((1, 2, 9), (4,), "linear", True),
]

@pytest.mark.parametrize("xs,size,mode,ac", INTERP)
def test_interpolate(xs, size, mode, ac):
  helper_test_op([xs], lambda x: F.interpolate(x, size=size, mode=mode, align_corners=ac),
                 lambda x: x.interpolate(size, mode=mode, align_corners=bool(ac)), atol=1e-5)

# ======================================================================== activations

ACTS = [
  ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), lambda x: x.gelu()),
  ("gelu_erf", F.gelu, lambda x: x.gelu(approximate="none")),
  ("quick_gelu", lambda x: x * torch.sigmoid(1.702 * x), lambda x: x.quick_gelu()),
  ("silu", F.silu, lambda x: x.silu()),
  ("swish", F.silu, lambda x: x.swish()),
  ("leaky_relu", F.leaky_relu, lambda x: x.leaky_relu()),
  ("leaky_relu_0.2", lambda x: F.leaky_relu(x, 0.2), lambda x: x.leaky_relu(0.2)),
  ("elu", F.elu, lambda x: x.elu()),
  ("elu_0.5", lambda x: F.elu(x, 0.5), lambda x: x.elu(0.5)),
  ("celu", lambda x: F.celu(x, 1.5), lambda x: x.celu(1.5)),
  ("selu", F.selu, lambda x: x.selu()),
  ("softplus", F.softplus, lambda x: x.softplus()),
  ("softplus_beta", lambda x: F.softplus(x, beta=2.5, threshold=4), lambda x: x.softplus(2.5, 4)),
  ("softsign", F.softsign, lambda x: x.softsign()),
  ("hardswish", F.hardswish, lambda x: x.hardswish()),
  ("hardsigmoid", F.hardsigmoid, lambda x: x.hardsigmoid()),
  ("hardtanh", lambda x: F.hardtanh(x, -0.5, 1.5), lambda x: x.hardtanh(-0.5, 1.5)),
  ("mish", F.mish, lambda x: x.mish()),
  ("relu6", F.relu6, lambda x: x.relu6()),
  ("logsigmoid", F.logsigmoid, lambda x: x.logsigmoid()),
  ("glu", F.glu, lambda x: x.glu()),
  ("softmin", lambda x: F.softmin(x, -1), lambda x: x.softmin(-1)),
]

@pytest.mark.parametrize("name,tf,ff", ACTS, ids=[a[0] for a in ACTS])
def test_activation(name, tf, ff):
  helper_test_op([(4, 6, 10)], tf, ff, atol=1e-5, low=-8, high=8)

def test_softplus_extremes():
  helper_test_op(None, F.softplus, lambda x: x.softplus(), vals=[[-100.0, -30.0, -1.0, 0.0, 1.0, 19.0, 21.0, 100.0]], atol=1e-6)

# ======================================================================== dropout

def test_dropout_eval_is_identity():
  x = Tensor.rand(50, 40)
  assert Tensor.training is False
  np.testing.assert_array_equal(x.dropout(0.5).numpy(), x.numpy())

@pytest.mark.parametrize("p", [0.25, 0.5, 0.9])
def test_dropout_train(p):
  Tensor.manual_seed(3)
  x = Tensor.ones(100, 100)
  with Tensor.train():
    y = x.dropout(p).numpy()
  kept = y != 0
  assert abs(kept.mean() - (1 - p)) < 0.03
  np.testing.assert_allclose(y[kept], 1 / (1 - p), rtol=1e-6)

def test_dropout_edges():
  with Tensor.train():
    assert (Tensor.ones(10).dropout(1.0).numpy() == 0).all()
    assert (Tensor.ones(10).dropout(0.0).numpy() == 1).all()
  with pytest.raises(ValueError): Tensor.ones(3).dropout(1.5)

# ======================================================================== normalisation

@pytest.mark.parametrize("shape,axis", [((4, 10), -1), ((2, 3, 8), -1), ((2, 3, 4, 5), (-1, -2))])
def test_layernorm(shape, axis):
  ns = shape[-1:] if isinstance(axis, int) else shape[-len(axis):]
  helper_test_op([shape], lambda x: F.layer_norm(x, ns, eps=1e-5), lambda x: x.layernorm(axis=axis, eps=1e-5), atol=1e-5)

def test_batchnorm_functional():
  def tf(x, w, b, m, v):
    def r(t): return t.reshape(1, -1, 1, 1)
    return (x - r(m)) / torch.sqrt(r(v.abs() + 0.1) + 1e-5) * r(w) + r(b)
  def ff(x, w, b, m, v): return x.batchnorm(w, b, m, (v.abs() + 0.1 + 1e-5).rsqrt())
  helper_test_op([(2, 4, 3, 3), (4,), (4,), (4,), (4,)], tf, ff, atol=1e-5)

def test_rms_norm():
  helper_test_op([(3, 4, 8)], lambda x: F.rms_norm(x, (8,), eps=1e-6), lambda x: x.rms_norm(-1, 1e-6), atol=1e-5)

@pytest.mark.parametrize("n", [5, -1])
def test_one_hot(n):
  helper_test_op(None, lambda y: F.one_hot(y, n), lambda y: y.one_hot(n), vals=[[[0, 3, 1], [4, 2, 0]]], dtype=i64, check_dtype=False, forward_only=True)

# ======================================================================== losses

@pytest.mark.parametrize("shape,red,ls", [((5, 7), "mean", 0.0), ((5, 7), "sum", 0.0), ((5, 7), "none", 0.0), ((6, 4), "mean", 0.1),
                                          ((3, 5, 4), "mean", 0.0), ((3, 5, 4), "none", 0.2)])
def test_cross_entropy_indices(shape, red, ls):
  y = np.random.default_rng(1).integers(0, shape[1], size=(shape[0],) + shape[2:])
  helper_test_op([shape], lambda x: F.cross_entropy(x, torch.tensor(y), reduction=red, label_smoothing=ls),
                 lambda x: x.cross_entropy(Tensor(y), reduction=red, label_smoothing=ls), atol=1e-5)

@pytest.mark.parametrize("ls", [0.0, 0.15])
def test_cross_entropy_ignore_index_weight(ls):
  y = np.array([0, 2, -100, 3, 1, 2])
  w = np.array([0.5, 1.0, 2.0, 1.5], dtype=np.float32)
  helper_test_op([(6, 4)], lambda x: F.cross_entropy(x, torch.tensor(y), weight=torch.tensor(w), label_smoothing=ls),
                 lambda x: x.cross_entropy(Tensor(y), weight=Tensor(w), label_smoothing=ls), atol=1e-5)

@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_cross_entropy_probs(ls):
  p = np.random.default_rng(2).random((4, 6)).astype(np.float32)
  p /= p.sum(1, keepdims=True)
  helper_test_op([(4, 6)], lambda x: F.cross_entropy(x, torch.tensor(p), label_smoothing=ls),
                 lambda x: x.cross_entropy(Tensor(p), label_smoothing=ls), atol=1e-5)

def test_cross_entropy_1d():
  helper_test_op([(5,)], lambda x: F.cross_entropy(x, torch.tensor(3)), lambda x: x.cross_entropy(Tensor(3)), atol=1e-5)

@pytest.mark.parametrize("ls,red", [(0.0, "mean"), (0.1, "mean"), (0.0, "sum")])
def test_sparse_categorical_crossentropy(ls, red):
  y = np.array([[1, -1, 3], [0, 2, 2]])
  helper_test_op([(2, 3, 5)], lambda x: F.cross_entropy(x.permute(0, 2, 1), torch.tensor(y), ignore_index=-1, label_smoothing=ls, reduction=red),
                 lambda x: x.sparse_categorical_crossentropy(Tensor(y), label_smoothing=ls, reduction=red), atol=1e-5)

def test_nll_loss():
  y = np.array([2, 0, 1, -100])
  helper_test_op([(4, 3)], lambda x: F.nll_loss(F.log_softmax(x, 1), torch.tensor(y)), lambda x: x.log_softmax(1).nll_loss(Tensor(y)), atol=1e-5)

@pytest.mark.parametrize("red", ["mean", "none"])
def test_binary_crossentropy(red):
  y = (np.random.default_rng(3).random((4, 5)) > 0.5).astype(np.float32)
  helper_test_op([(4, 5)], lambda x: F.binary_cross_entropy(torch.sigmoid(x), torch.tensor(y), reduction=red),
                 lambda x: x.sigmoid().binary_crossentropy(Tensor(y), reduction=red), atol=1e-5)

@pytest.mark.parametrize("pos_weight", [False, True])
def test_binary_crossentropy_logits(pos_weight):
  rng = np.random.default_rng(4)
  y = rng.random((4, 5)).astype(np.float32)
  pw = rng.random(5).astype(np.float32) * 2 if pos_weight else None
  helper_test_op([(4, 5)], lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor(y), pos_weight=None if pw is None else torch.tensor(pw)),
                 lambda x: x.binary_crossentropy_logits(Tensor(y), pos_weight=None if pw is None else Tensor(pw)), atol=1e-5, low=-30, high=30)

# ======================================================================== attention

@pytest.mark.parametrize("qs,ks,causal", [((2, 3, 5, 8), (2, 3, 7, 8), False), ((2, 4, 6, 8), (2, 4, 6, 8), True), ((1, 5, 4), (1, 9, 4), True)])
def test_sdpa(qs, ks, causal):
  vs = ks[:-1] + (6,)
  helper_test_op([qs, ks, vs], lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                 lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=causal), atol=1e-5)

def test_sdpa_bool_mask():
  m = np.random.default_rng(5).random((5, 7)) > 0.3
  m[:, 0] = True  # every row attends somewhere
  helper_test_op([(2, 5, 8), (2, 7, 8), (2, 7, 8)], lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(m)),
                 lambda q, k, v: q.scaled_dot_product_attention(k, v, attn_mask=Tensor(m)), atol=1e-5)

def test_sdpa_float_mask():
  helper_test_op([(2, 2, 5, 8), (2, 2, 6, 8), (2, 2, 6, 8), (5, 6)], lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                 lambda q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m), atol=1e-5)
