"""PyTorch spellings added for programs written against torch: each against torch itself, on odd shapes and edge cases."""
import math
import numpy as np
import pytest
import torch
from fusegrad import Tensor, TinyJit, dtypes

def _same(got, want):
  if isinstance(want, (tuple, list)):
    assert len(got) == len(want)
    for g, w in zip(got, want): _same(g, w)
    return
  assert got.shape == tuple(want.shape), (got.shape, tuple(want.shape))
  np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, equal_nan=True)

X = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3) - 7

@pytest.mark.parametrize("arg,dim", [(3, 1), (2, 0), (5, 1), (7, -1), (1, 2), ([1, 3], 1), ([4, 1], 1), ([-2], 1), ([0, 0, 9], 1), ([], 0)])
def test_tensor_split(arg, dim):
  _same(Tensor(X).tensor_split(arg, dim), torch.from_numpy(X).tensor_split(arg, dim))

def test_hsplit_vsplit_and_their_errors():
  x = np.arange(24, dtype=np.float32).reshape(4, 6)
  for s in (2, 3, [1, 4]):
    _same(Tensor(x).hsplit(s), torch.from_numpy(x).hsplit(s))
    _same(Tensor(x).vsplit(s if s != 3 else 4), torch.from_numpy(x).vsplit(s if s != 3 else 4))
  _same(Tensor(x[0]).hsplit(3), torch.from_numpy(x[0]).hsplit(3))
  with pytest.raises(RuntimeError): Tensor(x).hsplit(4)
  with pytest.raises(RuntimeError): Tensor(x[0]).vsplit(2)

@pytest.mark.parametrize("n,dim", [(1, -1), (2, 1), (3, 0), (5, 1)])
def test_diff(n, dim):
  _same(Tensor(X).diff(n, dim), torch.from_numpy(X).diff(n, dim))
  pre, app = np.ones((2, 5, 3), np.float32), np.full((2, 5, 3), 2.0, np.float32)
  _same(Tensor(X).diff(n, dim, prepend=Tensor(pre), append=Tensor(app)),
        torch.from_numpy(X).diff(n, dim, prepend=torch.from_numpy(pre), append=torch.from_numpy(app)))
  b = X > 0
  _same(Tensor(b).diff(dim=dim), torch.from_numpy(b).diff(dim=dim))

def test_select_and_view_spellings():
  t, p = Tensor(X), torch.from_numpy(X)
  for dim, i in ((0, 1), (1, -1), (-1, 2)): _same(t.select(dim, i), p.select(dim, i))
  with pytest.raises(IndexError): t.select(1, 5)
  _same(Tensor.concat([t, t], 1), torch.concat([p, p], 1))
  _same(Tensor.concatenate([t, t], dim=0), torch.concatenate([p, p], 0))
  _same(Tensor([1.0, 2.0]).broadcast_to((3, 2)), torch.tensor([1.0, 2.0]).broadcast_to((3, 2)))
  _same(Tensor([1.0, 2.0]).expand_as(t[:, :, :2]), torch.tensor([1.0, 2.0]).expand_as(p[:, :, :2]))
  _same(t.view_as(t.reshape(6, 5)), p.view_as(p.reshape(6, 5)))

@pytest.mark.parametrize("dim", [None, 0, 1, (0, 2)])
def test_nan_reductions_and_counts(dim):
  x = X.copy()
  x[0, 1, :] = math.nan
  x[1, :, 2] = math.nan
  x[1, 3, 0] = 0
  t, p = Tensor(x), torch.from_numpy(x)
  kw = {} if dim is None else {"dim": dim}
  _same(t.nansum(**kw), p.nansum(**kw))
  _same(t.nanmean(**kw), p.nanmean(**kw))
  got, want = t.count_nonzero(**kw), p.count_nonzero(**kw)
  assert got.shape == tuple(want.shape) and got.tolist() == want.tolist()
  if dim is None or isinstance(dim, int):
    g, w = Tensor(X).aminmax(**kw), torch.from_numpy(X).aminmax(**kw)
    _same((g.min, g.max), (w.min, w.max))

@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("n,padding", [(1, 2), (2, 1), (2, (1, 2)), (2, "same"), (3, 1)])
def test_conv_padding_modes(mode, n, padding):
  from fusegrad import nn
  rng = np.random.default_rng(0)
  x = rng.standard_normal((2, 3) + (6,) * n).astype(np.float32)
  conv = [nn.Conv1d, nn.Conv2d, nn.Conv3d][n - 1](3, 4, 3, padding=padding, padding_mode=mode, dilation=2 if padding == "same" else 1)
  ref = [torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d][n - 1](3, 4, 3, padding=padding, padding_mode=mode, dilation=2 if padding == "same" else 1)
  with torch.no_grad():
    ref.weight.copy_(torch.from_numpy(conv.weight.numpy()))
    ref.bias.copy_(torch.from_numpy(conv.bias.numpy()))
  np.testing.assert_allclose(conv(Tensor(x)).numpy(), ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)

def test_conv_padding_mode_errors():
  from fusegrad import nn
  with pytest.raises(ValueError, match="padding_mode"): nn.Conv2d(3, 4, 3, padding_mode="mirror")

def test_torch_call_forms_that_crashed():
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  t, p = Tensor(x), torch.from_numpy(x)
  _same(t.narrow(1, Tensor(1), 2), p.narrow(1, torch.tensor(1), 2))
  _same(Tensor.cat(Tensor.zeros(0), t, Tensor.zeros(0)), torch.cat([torch.zeros(0), p, torch.zeros(0)]))
  _same(Tensor.cat(Tensor.zeros(0), Tensor.ones(2)), torch.cat([torch.zeros(0), torch.ones(2)]))
  _same(Tensor.zeros(0, 2).chunk(3, 0), torch.zeros(0, 2).chunk(3, 0))
  _same(t.permute(dims=(1, 0)), p.permute(dims=(1, 0)))
  _same(t.permute(1, 0), p.permute(1, 0))
  with pytest.raises(TypeError): t.permute((1, 0), dims=(1, 0))
  _same(t.repeat_interleave(2, 1, output_size=6), p.repeat_interleave(2, 1, output_size=6))
  with pytest.raises(RuntimeError, match="output_size"): t.repeat_interleave(2, output_size=5)

def test_elementwise_torch_spellings():
  a = np.array([-7.5, -2.0, 0.0, 3.25, 7.0], np.float32)
  t, p = Tensor(a), torch.from_numpy(a)
  for x in (2, -3.0, Tensor([1.5, -2.0, 4.0, 2.0, -1.0])):
    px = torch.from_numpy(x.numpy()) if isinstance(x, Tensor) else x
    _same(t.floor_divide(x), p.floor_divide(px))
    _same(t.remainder(x), p.remainder(px))
    _same(t.true_divide(x), p.true_divide(px))
  _same(t.clamp_min(-1.0), p.clamp_min(-1.0))
  _same(t.clamp_max(1), p.clamp_max(1))
  i = np.array([1, 3, -8, 100], np.int32)
  ti, pi = Tensor(i), torch.from_numpy(i)
  _same(ti.bitwise_left_shift(2), pi.bitwise_left_shift(2))
  _same(ti.bitwise_right_shift(Tensor([1, 2, 3, 4], dtype=ti.dtype)), pi.bitwise_right_shift(torch.tensor([1, 2, 3, 4], dtype=torch.int32)))
  _same(1 << Tensor([1, 2, 30], dtype=ti.dtype), 1 << torch.tensor([1, 2, 30], dtype=torch.int32))
  _same(256 >> Tensor([1, 2, 9], dtype=ti.dtype), 256 >> torch.tensor([1, 2, 9], dtype=torch.int32))

@pytest.mark.parametrize("decimals", [0, 1, 2, -1, -2])
def test_round_decimals(decimals):
  x = np.array([1.234, -2.55, 0.125, 1234.5, 1250.0, -0.05, 7.0], np.float32)
  _same(Tensor(x).round(decimals=decimals), torch.from_numpy(x).round(decimals=decimals))
  if decimals: pytest.raises(TypeError, Tensor([1, 2]).round, decimals=decimals)

@pytest.mark.parametrize("p", [None, "fro", 1, 2, 3, 0.5, 0, math.inf, -math.inf])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), (-1, True), ((0, 2), False)])
def test_norm(p, dim, keepdim):
  x = np.array([[[1.5, -2.0, 0.0], [3.0, 0.0, -4.0]], [[0.0, 0.0, 0.0], [-1.0, 2.5, 0.5]]], np.float32)
  if p == "fro" and dim is not None and not isinstance(dim, tuple): dim = (dim,)
  t, pt = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
  got, want = t.norm(p, dim, keepdim), pt.norm(p, dim, keepdim)
  _same(got, want.detach())
  if p not in (0,):  # (torch's gradient of the 0-norm is 0; ours has none)
    got.sum().backward(); want.sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), pt.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"p={p} dim={dim}")

def test_norm_gradient_at_zero_is_zero():
  z = Tensor.zeros(3, requires_grad=True)
  z.norm().backward()
  assert z.grad.tolist() == [0.0, 0.0, 0.0]
  with pytest.raises(NotImplementedError): Tensor.ones(2, 2).norm("nuc")

@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, math.inf, 3.0])
def test_cdist(p):
  rng = np.random.default_rng(1)
  a, b = rng.standard_normal((2, 4, 3)).astype(np.float32), rng.standard_normal((2, 5, 3)).astype(np.float32)
  b[0, 1] = a[0, 2]  # a zero distance
  np.testing.assert_allclose(Tensor(a).cdist(Tensor(b), p).numpy(), torch.cdist(torch.from_numpy(a), torch.from_numpy(b), p).numpy(), rtol=1e-5, atol=1e-5)

def test_kron_logspace_isin():
  a, b = np.array([[1, 2], [3, 4]], np.int32), np.array([[0, 1, 2]], np.int32)
  _same(Tensor(a).kron(Tensor(b)), torch.kron(torch.from_numpy(a), torch.from_numpy(b)))
  _same(Tensor(a[0]).kron(Tensor(b)), torch.kron(torch.from_numpy(a[0]), torch.from_numpy(b)))
  for base in (10.0, 2.0):
    np.testing.assert_allclose(Tensor.logspace(-1, 2, 7, base=base).numpy(), torch.logspace(-1, 2, 7, base=base).numpy(), rtol=1e-6)
  x = torch.tensor([1.0, 2.0, 3.0, math.nan, 2.0])
  for test in ([2.0, math.nan], [9.0], []):
    for invert in (False, True):
      got = Tensor(x.numpy()).isin(Tensor(np.array(test, np.float32)), invert=invert).tolist()
      assert got == torch.isin(x, torch.tensor(test), invert=invert).tolist(), (test, invert)

@pytest.mark.parametrize("right", [False, True])
def test_bucketize_and_searchsorted(right):
  bounds = torch.tensor([1.0, 3.0, 5.0, 7.0])
  v = torch.tensor([[0.0, 1.0, 5.0], [6.9, 7.0, 9.0]])
  got = Tensor(v.numpy()).bucketize(Tensor(bounds.numpy()), right=right)
  assert got.dtype == dtypes.int64 and got.tolist() == torch.bucketize(v, bounds, right=right).tolist()
  seq = torch.tensor([[1, 3, 5], [2, 4, 6]])
  vals = torch.tensor([[3, 6], [1, 7]])
  got = Tensor(seq.numpy()).searchsorted(Tensor(vals.numpy()), right=right, out_int32=True)
  assert got.dtype == dtypes.int32 and got.tolist() == torch.searchsorted(seq, vals, right=right).tolist()
  assert Tensor(seq.numpy()).searchsorted(Tensor(vals.numpy()), side="right" if right else "left").tolist() == torch.searchsorted(seq, vals, right=right).tolist()

def test_histc():
  x = torch.tensor([1.0, 2.0, 1.0, 4.0, 2.5, 9.0, -1.0])
  for kw in ({"bins": 4, "min": 0, "max": 4}, {"bins": 3}, {"bins": 5, "min": 1, "max": 2.5}):
    assert Tensor(x.numpy()).histc(**kw).tolist() == torch.histc(x, **kw).tolist(), kw
  assert Tensor([2.0, 2.0]).histc(bins=4).tolist() == torch.histc(torch.tensor([2.0, 2.0]), bins=4).tolist()

# ======================================================================== (values, indices) results readable by name, as torch.return_types
NAMED = [("sort", lambda t: t.sort(1)), ("sort", lambda t: t.sort(descending=True)), ("topk", lambda t: t.topk(2)),
         ("median", lambda t: t.median(1)), ("kthvalue", lambda t: t.kthvalue(2, 1)), ("mode", lambda t: t.mode(1)),
         ("cummax", lambda t: t.cummax(1)), ("cummin", lambda t: t.cummin(1)), ("max", lambda t: t.max(dim=1)), ("min", lambda t: t.min(dim=0))]

@pytest.mark.parametrize("name,fn", NAMED)
def test_value_index_pairs_are_named(name, fn):
  xn = np.array([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 4.0, 5.0]], np.float32)
  got, want = fn(Tensor(xn)), fn(torch.tensor(xn))
  assert type(got).__name__ == name and got._fields == ("values", "indices")
  np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
  np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
  v, i = got  # still a pair
  assert v is got.values and i is got.indices

def test_tinyjit_returns_a_named_tuple():
  @TinyJit
  def f(a: Tensor): return (a * 2).max(dim=1)
  for k in range(3):
    r = f(Tensor([[1.0, 2.0 + k], [4.0, 3.0]]))
  assert type(r).__name__ == "max" and r.values.tolist() == [8.0, 8.0] and r.indices.tolist() == [1, 0]
