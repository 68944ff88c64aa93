"""Edge values against PyTorch, forward and backward: gradients that must select (never 0 * inf) through maximum/minimum/clip
and max reductions, boundaries and ties, ±0, ±inf and NaN, values outside a function's domain, ignore_index and
out-of-range targets in losses, softmax-family ops over empty axes."""
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fusegrad import Tensor, dtypes
from .helpers import helper_test_op

inf, nan = math.inf, math.nan
f64 = dtypes.float64

# ======================================================================== maximum / minimum / clip: gradients select

@pytest.mark.parametrize("fn", [
  lambda a, b: a.minimum(b) ** 0.5,          # a < 0 chosen: the NaN upstream gradient must not reach b
  lambda a, b: a.maximum(b) ** 0.5,
  lambda a, b: a.maximum(b).log(),           # max == 0: an inf upstream gradient
  lambda a, b: a.minimum(b).reciprocal(),
  lambda a, b: a.maximum(b),                 # ties split 0.5/0.5, NaN passes to both
  lambda a, b: a.minimum(b),
], ids=["min_pow", "max_pow", "max_log", "min_recip", "max", "min"])
@pytest.mark.parametrize("dt", [dtypes.float32, f64])
def test_maximum_minimum_select(fn, dt):
  # (±0 ties are left out: torch returns the first argument's zero, fusegrad's MAX either one)
  a = [-1.0, 4.0, 0.0, 2.0, 0.0, nan, 1.0, inf, -2.0, 3.0]
  b = [4.0, -1.0, -2.0, 2.0, 0.0, 1.0, nan, 5.0, -5.0, 3.0]  # (not -inf: torch's (-inf)**0.5 is NaN, fusegrad's inf)
  helper_test_op(None, fn, vals=[a, b], dtype=dt)  # the same methods on torch tensors

CLAMPS = [dict(min=1.0), dict(max=1.0), dict(min=0.0, max=1.0), dict(min=1.0, max=1.0), dict(min=2.0, max=1.0), dict(min=-inf, max=inf)]

@pytest.mark.parametrize("kw", CLAMPS, ids=[str(k) for k in CLAMPS])
def test_clamp_boundary(kw):
  # torch.clamp passes the gradient at the bounds (x == min gets it), none to a NaN x
  x = [1.0, 0.0, 2.0, -1.0, 0.5, nan, inf, -inf, 1.0]
  helper_test_op(None, lambda x: torch.clamp(x, **kw), lambda x: x.clamp(**kw), vals=[x])
  helper_test_op(None, lambda x: torch.clamp(x, **kw), lambda x: x.clip(kw.get("min"), kw.get("max")), vals=[x], dtype=f64)

@pytest.mark.parametrize("kw", [dict(min=0.0), dict(max=0.0), dict(min=0.0, max=0.0)], ids=["min", "max", "both"])
def test_clamp_beside_maximum(kw):
  # clamp's gradient rule (x == bound gets it all) must not reach maximum/minimum of the same tensor and constant
  # (ties split 0.5/0.5): a clamp node built as max(x, c) was the same node as x.maximum(c) and took clamp's rule
  def both(x, lib):
    y = x
    if "min" in kw: y = y + x.maximum(kw["min"]) * 3 if lib == "fg" else y + torch.maximum(x, torch.tensor(kw["min"], dtype=x.dtype)) * 3
    if "max" in kw: y = y + x.minimum(kw["max"]) * 5 if lib == "fg" else y + torch.minimum(x, torch.tensor(kw["max"], dtype=x.dtype)) * 5
    return y + x.clamp(**kw) * 7
  x = [0.0, 1.0, -1.0, 0.0]
  helper_test_op(None, lambda x: both(x, "torch"), lambda x: both(x, "fg"), vals=[x])

def test_clamp_inf_upstream():
  # clamp(x, 0, 1).log() at x < 0: the inf from log'(0) must not reach x, which was clamped away
  helper_test_op(None, lambda x: x.clamp(0, 1).log(), lambda x: x.clip(0, 1).log(), vals=[[-1.0, 0.0, 0.5, 1.0, 2.0]])
  helper_test_op(None, lambda x: x.clamp(min=0).sqrt(), lambda x: x.clamp(min=0).sqrt(), vals=[[-1.0, 0.0, 4.0]])
  helper_test_op(None, lambda x: (1 - x.clamp(max=1)).sqrt(), lambda x: (1 - x.clamp(max=1)).sqrt(), vals=[[2.0, 1.0, 0.0]])

def test_clamp_tensor_bounds():
  # gradients of x, min and max as torch.clamp gives them, including min == max and min > max
  x = [0.0, 1.0, 2.0, 3.0, -1.0, 0.5, 5.0, 1.0, nan]
  lo = [0.0, 1.5, 1.0, 0.0, 0.0, 0.5, 6.0, 1.0, 0.0]
  hi = [1.0, 1.5, 2.0, 2.0, -2.0, 0.4, 4.0, 1.0, 1.0]
  helper_test_op(None, lambda x, lo, hi: torch.clamp(x, lo, hi), lambda x, lo, hi: x.clip(lo, hi), vals=[x, lo, hi])
  helper_test_op(None, lambda x, lo: torch.clamp(x, min=lo), lambda x, lo: x.clamp(min=lo), vals=[x, lo])
  helper_test_op(None, lambda x, hi: torch.clamp(x, max=hi), lambda x, hi: x.clamp(max=hi), vals=[x, hi])

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32, f64])
@pytest.mark.parametrize("kw", [*CLAMPS, dict(min=True), dict(max=3)], ids=str)  # (a NaN bound gives NaN: test_silent_wrong)
def test_clamp_of_a_float_builds_the_comparison_nodes(kw, dt):
  # a float tensor's number bounds are built straight into CMPLT and WHERE: the very nodes of x < min ? min : x
  x = Tensor([0.5, 2.0], dtype=dt).uop
  want = x if kw.get("min") is None else (x < kw["min"]).where(kw["min"], x)
  if kw.get("max") is not None: want = (want > kw["max"]).where(kw["max"], want)
  assert Tensor(x).clamp(**kw).uop is want

def test_clamp_dtypes():
  helper_test_op(None, lambda x: torch.clamp(x, min=0.5), lambda x: x.clamp(min=0.5), vals=[[1, 2, 0]], dtype=dtypes.int32, forward_only=True)
  helper_test_op(None, lambda x: torch.clamp(x, 0, 1), lambda x: x.clip(0, 1), vals=[[1, 2, -3]], dtype=dtypes.int32, forward_only=True)
  helper_test_op(None, lambda x: torch.clamp(x, 0, 1), lambda x: x.clip(0, 1), vals=[[0.5, 2, -3]], dtype=dtypes.float16, forward_only=True)

@pytest.mark.parametrize("name", ["hardtanh", "relu6", "hardsigmoid"])
def test_hard_activations_boundary(name):
  # unlike clamp, these pass the gradient only strictly inside their range
  x = [-3.0, 3.0, 0.0, 6.0, -1.0, 1.0, 2.0, -5.0, 7.0]
  helper_test_op(None, getattr(F, name), lambda x: getattr(x, name)(), vals=[x])

def test_relu_at_zero():
  helper_test_op(None, lambda x: x.relu(), vals=[[0.0, -0.0, 1.0, -1.0]])
  helper_test_op(None, lambda x: x.relu().log(), vals=[[0.0, -1.0, 1.0]])  # inf upstream at 0 must not reach x

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float16, dtypes.int8, dtypes.int64])
def test_relu_is_two_nodes_with_torchs_gradient(dt):
  # where(x < 0, 0, x): half the nodes of (x < 0) | (x == 0) (eager code builds a relu per layer per step); torch's
  # gradient, none where x <= 0, is the node's own rule (the where's own would pass the gradient at 0)
  u = Tensor([-2, 0, 3, 1], dtype=dt).uop
  assert u.relu() is (u < (-0.0 if dtypes.is_float(dt) else 0)).where(0, u)
  assert Tensor([True, False]).relu().tolist() == [True, False]

def test_relu_and_clamp_at_zero_keep_their_own_gradients():
  # where(x < 0, 0, x) is also clamp(min=0)'s value, but its gradient at 0 is all of it (relu's is none): one node for
  # both would give one of them the other's rule
  vals = [0.0, -1.0, 2.0]
  x, tx = Tensor(vals, requires_grad=True), torch.tensor(vals, requires_grad=True)
  (x.relu() * 2 + x.clamp(min=0) * 3).sum().backward()
  (torch.relu(tx) * 2 + torch.clamp(tx, min=0) * 3).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())

def test_relu_of_nan_and_negative_zero_as_torch():
  vals = [float("nan"), 0.0, -0.0, -1.0, 2.0]
  x, tx = Tensor(vals, requires_grad=True), torch.tensor(vals, requires_grad=True)
  y, ty = x.relu(), torch.relu(tx)
  y.sum().backward()
  ty.sum().backward()
  np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
  np.testing.assert_array_equal(np.signbit(y.numpy()), np.signbit(ty.detach().numpy()))  # relu(-0.0) is -0.0
  np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())  # 1 at NaN, 0 at 0 and -0.0

# ======================================================================== max / min reductions

def test_max_reduce_inf_upstream():
  # log(max) with max == 0 sends inf upstream: only the chosen element may see it
  helper_test_op(None, lambda x: torch.max(x, 1).values.log(), lambda x: x.max(1).log(), vals=[[[0.0, -1.0, -2.0], [-3.0, 0.0, -1.0]]])
  helper_test_op(None, lambda x: torch.min(x, 0).values.reciprocal(), lambda x: x.min(0).reciprocal(), vals=[[[0.0, 1.0], [2.0, 0.0]]])
  # ties with an inf upstream: split between the tied elements, none elsewhere (torch.max() without dim)
  helper_test_op(None, lambda x: x.max().log(), lambda x: x.max().log(), vals=[[0.0, -1.0, 0.0, -2.0]])
  helper_test_op(None, lambda x: (-x.min()).sqrt(), lambda x: (-x.min()).sqrt(), vals=[[0.0, 1.0, 0.0]])

def test_max_reduce_ties_and_nan():
  helper_test_op(None, lambda x: x.amax(1), lambda x: x.max(1), vals=[[[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]])
  helper_test_op(None, lambda x: x.amin((0, 1)), lambda x: x.min((0, 1)), vals=[[[1.0, 3.0], [1.0, 2.0]]])
  # a NaN max: the gradient goes to the NaN element(s), as torch.max() does
  helper_test_op(None, lambda x: x.max(), lambda x: x.max(), vals=[[1.0, nan, 2.0, nan]])
  helper_test_op(None, lambda x: torch.max(x, 1).values, lambda x: x.max(1), vals=[[[1.0, nan, 2.0], [3.0, 1.0, nan]]])

def test_max_reduce_two_pass_ties():
  # a long reduction into one output runs in two passes: ties in different groups still split evenly
  x = np.zeros(1 << 17, dtype=np.float32)
  x[[0, 1, 5, (1 << 17) - 1]] = 5.0
  helper_test_op(None, lambda x: x.max(), lambda x: x.max(), vals=[x])
  helper_test_op(None, lambda x: x.min(), lambda x: x.min(), vals=[-x])

# ======================================================================== copysign, sigmoid, acosh, atanh

def test_copysign_zero_sign():
  a = Tensor([1.0, 0.0, -0.0, 0.0, -0.0, 2.0, -2.0])
  b = Tensor([-0.0, -1.0, -1.0, 1.0, 0.0, -0.0, 0.0])
  want = torch.copysign(torch.tensor(a.tolist()), torch.tensor(b.tolist())).numpy()
  got = a.copysign(b).numpy()
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(np.signbit(got), np.signbit(want))

@pytest.mark.parametrize("dt", [dtypes.float32, f64])
def test_copysign_grad(dt):
  a = [1.0, 0.0, -0.0, 2.0, -2.0, 3.0, nan, inf]
  b = [-1.0, -1.0, 1.0, -0.0, 0.0, nan, 1.0, -1.0]
  helper_test_op(None, torch.copysign, lambda a, b: a.copysign(b), vals=[a, b], dtype=dt)
  helper_test_op(None, lambda a: torch.copysign(a, -1.0), lambda a: a.copysign(-1.0), vals=[a], dtype=dt)

def test_copysign_dtypes():
  helper_test_op(None, torch.copysign, lambda a, b: a.copysign(b), vals=[[1, -2, 0], [-1, 1, -1]], dtype=dtypes.int32, forward_only=True)
  helper_test_op(None, lambda a: torch.copysign(a, -1.0), lambda a: a.copysign(-1.0), vals=[[1.0, 0.0]], dtype=dtypes.float16, forward_only=True)

@pytest.mark.parametrize("dt", [dtypes.float32, f64])
def test_sigmoid_extremes(dt):
  x = [100.0, -100.0, inf, -inf, nan, 0.0, 88.0, -88.0, 89.0, -89.0, 750.0, -750.0]
  helper_test_op(None, torch.sigmoid, lambda x: x.sigmoid(), vals=[x], dtype=dt, atol=1e-45)

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16])
def test_sigmoid_extremes_half(dt):
  helper_test_op(None, torch.sigmoid, lambda x: x.sigmoid(), vals=[[100.0, -100.0, inf, -inf, nan, 0.0, 12.0, -12.0, -20.0]], dtype=dt, atol=1e-3,
                 forward_only=True)

@pytest.mark.parametrize("dt", [dtypes.float32, f64])
def test_acosh_domain(dt):
  # NaN below 1, inf derivative at ±1, torch's derivative rsqrt(x*x - 1) everywhere (finite below -1)
  x = [0.5, 1.0, -1.0, -2.0, 0.0, 2.0, 1.0 + 1e-6, 10.0, 1e30, inf, -inf, nan]
  helper_test_op(None, torch.acosh, lambda x: x.acosh(), vals=[x], dtype=dt)

@pytest.mark.parametrize("dt", [dtypes.float32, f64])
def test_atanh_domain(dt):
  # ±inf at ±1, NaN outside [-1, 1], torch's derivative 1/(1 - x*x) everywhere
  x = [1.0, -1.0, 2.0, -2.0, 0.5, -0.999, 0.0, -0.0, 1e-8, inf, -inf, nan]
  helper_test_op(None, torch.atanh, lambda x: x.atanh(), vals=[x], dtype=dt)

def test_acosh_atanh_half():
  for dt in (dtypes.float16, dtypes.bfloat16):
    helper_test_op(None, torch.acosh, lambda x: x.acosh(), vals=[[0.5, 1.0, 2.0, -1.0]], dtype=dt, atol=1e-2, forward_only=True)
    helper_test_op(None, torch.atanh, lambda x: x.atanh(), vals=[[1.0, -1.0, 2.0, 0.5]], dtype=dt, atol=1e-2, forward_only=True)

# ======================================================================== losses: ignore_index

Y6 = np.array([0, 2, 1, 3, 1, 2])
W4 = np.array([0.5, 1.0, 2.0, 1.5], dtype=np.float32)

@pytest.mark.parametrize("red", ["mean", "sum", "none"])
@pytest.mark.parametrize("ls", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ii", [1, 0, -100, 5])
def test_cross_entropy_ignore_index(ii, weighted, ls, red):
  # torch's 'mean' divides by the summed weight of the targets that are not ignored; ignore_index may be a class index
  w = dict(weight=torch.tensor(W4)) if weighted else {}
  fw = dict(weight=Tensor(W4)) if weighted else {}
  helper_test_op([(6, 4)], lambda x: F.cross_entropy(x, torch.tensor(Y6), ignore_index=ii, label_smoothing=ls, reduction=red, **w),
                 lambda x: x.cross_entropy(Tensor(Y6), ignore_index=ii, label_smoothing=ls, reduction=red, **fw), atol=1e-5)

@pytest.mark.parametrize("red", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_ignore_index(weighted, red):
  w = dict(weight=torch.tensor(W4)) if weighted else {}
  fw = dict(weight=Tensor(W4)) if weighted else {}
  helper_test_op([(6, 4)], lambda x: F.nll_loss(F.log_softmax(x, 1), torch.tensor(Y6), ignore_index=2, reduction=red, **w),
                 lambda x: x.log_softmax(1).nll_loss(Tensor(Y6), ignore_index=2, reduction=red, **fw), atol=1e-5)

def test_cross_entropy_ignore_index_spatial():
  y = np.array([[0, 1, 2], [2, 2, 0]])
  helper_test_op([(2, 3, 3)], lambda x: F.cross_entropy(x, torch.tensor(y), ignore_index=2, weight=torch.tensor(W4[:3]), label_smoothing=0.2),
                 lambda x: x.cross_entropy(Tensor(y), ignore_index=2, weight=Tensor(W4[:3]), label_smoothing=0.2), atol=1e-5)

@pytest.mark.parametrize("red", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_cross_entropy_all_ignored(red, weighted, ls):
  # nothing left: 'mean' is 0/0 = NaN in torch (and its gradient NaN), 'sum' 0
  y = np.array([1, 1, 1])
  w = dict(weight=torch.tensor(W4)) if weighted else {}
  fw = dict(weight=Tensor(W4)) if weighted else {}
  helper_test_op([(3, 4)], lambda x: F.cross_entropy(x, torch.tensor(y), ignore_index=1, reduction=red, label_smoothing=ls, **w),
                 lambda x: x.cross_entropy(Tensor(y), ignore_index=1, reduction=red, label_smoothing=ls, **fw), atol=1e-5)

@pytest.mark.parametrize("red", ["mean", "sum", "none"])
@pytest.mark.parametrize("ls", [0.0, 0.1])
@pytest.mark.parametrize("ii", [-1, 0, 3])
def test_sparse_categorical_crossentropy_ignore_index(ii, ls, red):
  # tinygrad's signature (classes last, ignore_index=-1 by default); torch's cross_entropy with the class dim moved
  y = np.array([[1, ii, 3], [0, 3, 2], [ii, 3, 4]])
  helper_test_op([(3, 3, 5)], lambda x: F.cross_entropy(x.permute(0, 2, 1), torch.tensor(y), ignore_index=ii, label_smoothing=ls, reduction=red),
                 lambda x: x.sparse_categorical_crossentropy(Tensor(y), ignore_index=ii, label_smoothing=ls, reduction=red), atol=1e-5)

# ======================================================================== losses: out-of-range targets

@pytest.mark.parametrize("y", [[0, 5, 1], [0, -2, 1], [0, 1, 100]])
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss", "sparse_categorical_crossentropy"])
def test_loss_target_out_of_range_raises(y, loss):
  x = Tensor(np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32))
  with pytest.raises(IndexError):
    F.cross_entropy(torch.tensor(x.numpy()), torch.tensor(y))  # the reference: torch raises too
  with pytest.raises(IndexError, match="out of bounds"):
    getattr(x, loss)(Tensor(np.array(y))).numpy()

def test_loss_target_out_of_range_scalar_and_int32():
  with pytest.raises(IndexError): Tensor([0.1, 0.2, 0.3]).cross_entropy(Tensor(3)).numpy()
  with pytest.raises(IndexError): Tensor.zeros(2, 3).cross_entropy(Tensor([0, 3], dtype=dtypes.int32)).numpy()
  with pytest.raises(IndexError): Tensor.zeros(2, 3).cross_entropy(Tensor.full((2,), -7, dtype=dtypes.int32)).numpy()

def test_loss_target_in_range_ok():
  # ignore_index outside [0, C) is allowed where the other targets are valid
  x = Tensor.zeros(3, 4)
  assert np.isclose(x.cross_entropy(Tensor(np.array([0, -100, 3]))).item(), math.log(4))
  assert np.isclose(x.sparse_categorical_crossentropy(Tensor(np.array([0, -1, 3]))).item(), math.log(4))
  assert np.isclose(x.cross_entropy(Tensor(np.array([0, 7, 3])), ignore_index=7).item(), math.log(4))

def test_loss_target_check_rereads_changed_targets():
  # valid targets are remembered by their bytes: a write into the same buffer, or fewer classes, is checked again
  x = Tensor.zeros(3, 4)
  y = Tensor(np.array([0, 1, 2])).realize()
  assert np.isclose(x.cross_entropy(y).item(), math.log(4))
  assert np.isclose(x.cross_entropy(y).item(), math.log(4))
  y.assign(Tensor(np.array([0, 4, 2]))).realize()
  with pytest.raises(IndexError, match="target class 4"): x.cross_entropy(y).item()
  with pytest.raises(IndexError, match="target class 2"): Tensor.zeros(3, 2).cross_entropy(Tensor(np.array([0, 1, 2]))).item()
  assert np.isclose(Tensor.zeros(3, 2).cross_entropy(Tensor(np.array([0, 1, 2])), ignore_index=2).item(), math.log(2))

def test_loss_target_out_of_range_lazy_is_nan():
  # targets not realized yet are not read back (that would add a kernel and a wait per step): the loss is NaN instead
  x = Tensor.zeros(3, 4)
  y = Tensor(np.array([0, 5, 1])) + 0
  out = x.cross_entropy(y, reduction="none").numpy()
  assert np.isnan(out[1]) and np.allclose(out[[0, 2]], math.log(4))
  assert np.isnan(x.cross_entropy(y).item())
  assert np.isclose(x.cross_entropy(Tensor(np.array([0, -100, 1])) + 0).item(), math.log(4))

# ======================================================================== softmax family over empty axes

EMPTY = [((3, 0), 1), ((3, 0), 0), ((0, 3), 1), ((0, 3), 0), ((0,), 0), ((2, 0, 3), -1), ((2, 0, 3), 1)]

@pytest.mark.parametrize("shape,axis", EMPTY, ids=[f"{s}-{a}" for s, a in EMPTY])
def test_softmax_empty(shape, axis):
  helper_test_op([shape], lambda x: torch.softmax(x, axis), lambda x: x.softmax(axis))
  helper_test_op([shape], lambda x: torch.log_softmax(x, axis), lambda x: x.log_softmax(axis))
  helper_test_op([shape], lambda x: torch.logsumexp(x, axis), lambda x: x.logsumexp(axis))  # -inf over an empty axis
  helper_test_op([shape], lambda x: torch.logsumexp(x, axis, keepdim=True), lambda x: x.logsumexp(axis, keepdim=True))

def test_logsumexp_empty_multi_axis():
  helper_test_op([(2, 0, 3)], lambda x: torch.logsumexp(x, (1, 2)), lambda x: x.logsumexp((1, 2)))
  helper_test_op([(2, 0, 3)], lambda x: torch.logsumexp(x, (0, 2)), lambda x: x.logsumexp((0, 2)))
  helper_test_op([(0, 3)], lambda x: torch.logsumexp(x, (0, 1)), lambda x: x.logsumexp())

def test_softmax_scalar_and_inf_rows():
  helper_test_op([()], lambda x: torch.softmax(x, 0), lambda x: x.softmax(0))
  helper_test_op([()], lambda x: torch.logsumexp(x, 0), lambda x: x.logsumexp(0))
  rows = [[-inf, -inf, -inf], [inf, 1.0, 0.0], [-inf, 0.0, 1.0]]
  helper_test_op(None, lambda x: torch.logsumexp(x, 1), lambda x: x.logsumexp(1), vals=[rows])
  helper_test_op(None, lambda x: torch.softmax(x, 1), lambda x: x.softmax(1), vals=[rows])
  helper_test_op(None, lambda x: torch.log_softmax(x, 1), lambda x: x.log_softmax(1), vals=[rows])

def test_logsumexp_int_dtype():
  helper_test_op(None, lambda x: torch.logsumexp(x, 0), lambda x: x.logsumexp(0), vals=[[1, 2, 3]], dtype=dtypes.int32, forward_only=True)
