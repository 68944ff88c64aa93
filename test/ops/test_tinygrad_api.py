"""tinygrad API names and PyTorch spellings: isclose/allclose, max_unpool2d, rearrange, static-size nonzero and
masked_select, tensor-valued masked_fill, integer multinomial, reshape(None), contiguous_backward, grouped-query
attention, isinf flags, normalize, shrink_to/pad_to, clone(device=), from_blob, bitcast between sizes, the dim= keyword
of reductions, integer interpolate, Python scalar conversion, cpu/t/mT/unbind. Checked against torch forward and
backward where torch has the op, otherwise against tinygrad's documented behaviour."""
import ctypes, math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fusegrad import Tensor, dtypes
from .helpers import helper_test_op

INF, NAN = math.inf, math.nan

def raises_both(tfn, ffn, exc=(RuntimeError, ValueError, IndexError, TypeError)):
  with pytest.raises(exc): tfn()
  with pytest.raises(exc): ffn()

# ======================================================================== isclose / allclose
ISCLOSE = [
  ([1.0, 1e-9, 1e10, 1e10, 0.0], [1.0 + 1e-9, 0.0, 1.00001e10, 1.001e10, 1e-7], {}),
  ([INF, -INF, INF, NAN, NAN, 1.0], [INF, -INF, -INF, NAN, 1.0, INF], {}),
  ([INF, -INF, INF, NAN, NAN, 1.0], [INF, -INF, -INF, NAN, 1.0, INF], dict(equal_nan=True)),
  ([1.0, 2.0, 3.0], [1.1, 2.5, 3.0], dict(rtol=0.1, atol=0.0)),
  ([1.0, 2.0, 3.0], [1.1, 2.5, 3.0], dict(rtol=0.0, atol=0.2)),
]

@pytest.mark.parametrize("a,b,kw", ISCLOSE)
def test_isclose(a, b, kw):
  helper_test_op(None, lambda x, y: torch.isclose(x, y, **kw), lambda x, y: x.isclose(y, **kw), vals=[a, b], forward_only=True)
  assert Tensor(a).allclose(Tensor(b), **kw) == torch.allclose(torch.tensor(a), torch.tensor(b), **kw)

def test_isclose_broadcast_dtypes():
  helper_test_op([(3, 1), (4,)], lambda x, y: torch.isclose(x, y, atol=0.5), lambda x, y: x.isclose(y, atol=0.5), forward_only=True)
  helper_test_op(None, lambda x, y: torch.isclose(x, y), lambda x, y: x.isclose(y), vals=[[1, 2, 3], [1, 3, 3]], dtype=dtypes.int32)
  helper_test_op(None, lambda x, y: torch.isclose(x, y, rtol=0.3), lambda x, y: x.isclose(y, rtol=0.3), vals=[[1.0, 2.0], [1.2, 2.9]],
                 dtype=dtypes.float16, forward_only=True)
  assert Tensor([1.0, 2.0]).isclose(2.0).tolist() == [False, True]
  a = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
  assert Tensor(a).allclose(Tensor(a + 1e-7)) is True and Tensor(a).allclose(Tensor(a + 1e-3)) is False
  assert Tensor([NAN]).allclose(Tensor([NAN])) is False and Tensor([NAN]).allclose(Tensor([NAN]), equal_nan=True) is True

# ======================================================================== max_unpool2d
UNPOOL = [
  ((1, 1, 4, 4), dict(kernel_size=2)),
  ((2, 3, 6, 4), dict(kernel_size=2)),
  ((2, 2, 7, 7), dict(kernel_size=3, stride=2)),  # overlapping windows: one element can be picked twice
  ((1, 2, 7, 7), dict(kernel_size=3, stride=2, padding=1)),
  ((1, 2, 6, 6), dict(kernel_size=3, stride=2, padding=1, output_size=(6, 6))),
  ((1, 2, 5, 7), dict(kernel_size=(2, 3), stride=(1, 2))),
  ((2, 4, 6), dict(kernel_size=2)),  # no batch dim
]

@pytest.mark.parametrize("shape,kw", UNPOOL)
def test_max_unpool2d(shape, kw):
  k, s, p, o = kw["kernel_size"], kw.get("stride"), kw.get("padding", 0), kw.get("output_size")
  def tfn(x):
    out, idx = F.max_pool2d(x, k, s, p, return_indices=True)
    return F.max_unpool2d(out, idx, k, s, p, output_size=o)
  def ffn(x):
    out, idx = x.max_pool2d(k, s, padding=p, return_indices=True)
    return out.max_unpool2d(idx, k, s, padding=p, output_size=o)
  helper_test_op([shape], tfn, ffn)

def test_max_unpool2d_output_size():
  def tfn(x):
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    return F.max_unpool2d(out, idx, 2, output_size=(5, 5))
  def ffn(x):
    out, idx = x.max_pool2d(2, return_indices=True)
    return out.max_unpool2d(idx, 2, output_size=(1, 2, 5, 5))
  helper_test_op([(1, 2, 5, 5)], tfn, ffn)

def test_max_unpool2d_tinygrad_example():
  t = Tensor.arange(1, 17).reshape(1, 1, 4, 4)
  out, idx = t.max_pool2d(return_indices=True)
  assert out.max_unpool2d(idx).tolist() == [[[[0, 0, 0, 0], [0, 6, 0, 8], [0, 0, 0, 0], [0, 14, 0, 16]]]]

# ======================================================================== rearrange
REARRANGE = [
  ((2, 3, 12), "b c (h w) -> b h w c", dict(h=3)),
  ((2, 3, 12), "b c (h w) -> b h w c", dict(w=6)),
  ((2, 3, 4, 5), "b c h w -> b (c h w)", {}),
  ((2, 3, 4, 5), "b ... w -> w b ...", {}),
  ((2, 3, 4, 5), "b ... -> b (...)", {}),
  ((2, 3, 4, 5), "... h w -> ... (w h)", {}),
  ((6, 4), "(a b) c -> a (c b)", dict(a=2)),
  ((2, 1, 3), "a 1 b -> b a", {}),
  ((2, 3), "a b -> a 1 b ()", {}),
  ((2, 3, 4), "a b c -> c b a", {}),
  ((8,), "(a b c) -> c b a", dict(a=2, b=2)),
]

@pytest.mark.parametrize("shape,formula,sizes", REARRANGE)
def test_rearrange(shape, formula, sizes):
  einops = pytest.importorskip("einops")
  helper_test_op([shape], lambda x: einops.rearrange(x, formula, **sizes), lambda x: x.rearrange(formula, **sizes))

def test_rearrange_without_einops():
  x = Tensor.arange(24).reshape(2, 3, 4)
  assert x.rearrange("b c (h w) -> b h w c", h=2).tolist() == x.reshape(2, 3, 2, 2).permute(0, 2, 3, 1).tolist()
  assert Tensor([[1, 2], [3, 4]]).rearrange("batch channel -> (batch channel)").tolist() == [1, 2, 3, 4]
  assert Tensor.rearrange(x, "a b c -> (c a) b").shape == (8, 3)

@pytest.mark.parametrize("formula,sizes", [
  ("a b c -> a b", {}), ("a b -> a b c", {}), ("a b c d -> a b c d", {}), ("a (b c) -> a b c", {}), ("a b c -> a b c", dict(d=2)),
  ("a b c -> a b c", dict(a=5)), ("a (b c) d -> a b c d", dict(b=5)), ("(a ...) -> a", {}), ("a b c -> a b c ...", {}),
  ("a a c -> a c", {}), ("a b c", {}), ("a (b c -> a b c", {}), ("a b 2c -> a b 2c", {}),
])
def test_rearrange_errors(formula, sizes):
  with pytest.raises(ValueError): Tensor.ones(2, 3, 4).rearrange(formula, **sizes)

# ======================================================================== nonzero(size=) / masked_select(size=)
@pytest.mark.parametrize("size", [0, 2, 4, 7])
def test_nonzero_static(size):
  vals = [[0.0, 1.0, 0.0], [2.0, NAN, 0.0], [0.0, 0.0, -3.0]]
  for fill in (-1, 9):
    helper_test_op(None, lambda x, fill=fill: torch.nonzero_static(x, size=size, fill_value=fill).int(),
                   lambda x, fill=fill: x.nonzero(size=size, fill_value=fill), vals=[vals], forward_only=True)
  want = torch.nonzero_static(torch.tensor(vals), size=size).int()
  got = Tensor(vals).nonzero(as_tuple=True, size=size)
  assert len(got) == 2 and all(g.tolist() == want[:, d].tolist() for d, g in enumerate(got))

def test_nonzero_static_1d_bool_int():
  for vals, dt in (([True, False, True, True], dtypes.bool), ([0, 5, 0, -1, 2], dtypes.int32), ([], dtypes.float32)):
    helper_test_op(None, lambda x: torch.nonzero_static(x, size=3).int(), lambda x: x.nonzero(size=3), vals=[vals], dtype=dt, forward_only=True)

@pytest.mark.parametrize("size", [0, 3, 5, 9])
def test_masked_select_static(size):
  def tfn(x, m):
    sel = x.masked_select(m > 0)[:size]
    return F.pad(sel, (0, size - sel.shape[0]), value=-7.0)
  helper_test_op([(3, 3), (3,)], tfn, lambda x, m: x.masked_select(m > 0, size=size, fill_value=-7.0))

def test_masked_select_static_is_lazy():
  x, m = Tensor([1.0, 2.0, 3.0, 4.0]), Tensor([False, True, False, True])
  out = x.masked_select(m, size=3)
  assert out.shape == (3,) and out.tolist() == [2.0, 4.0, 0.0]

# ======================================================================== masked_fill with a tensor value
def test_masked_fill_tensor_value():
  helper_test_op([(3, 4), (3, 4), (4,)], lambda x, m, v: torch.where(m > 0, v, x), lambda x, m, v: x.masked_fill(m > 0, v))
  helper_test_op([(3, 4), (3, 1), ()], lambda x, m, v: x.masked_fill(m > 0, v), lambda x, m, v: x.masked_fill(m > 0, v))
  t = Tensor([1, 2, 3, 4, 5])
  assert t.masked_fill(Tensor([True, False, True, False, False]), Tensor([-1, -2, -3, -4, -5])).tolist() == [-1, 2, -3, 4, 5]
  assert Tensor([1, 2]).masked_fill(Tensor([True, False]), Tensor([2.7, 0.0])).dtype == dtypes.int32

# ======================================================================== multinomial on integer weights
def test_multinomial_int_weights():
  Tensor.manual_seed(1)
  w = Tensor([0, 2, 0, 5, 1])
  s = w.multinomial(200, replacement=True)
  assert s.shape == (200,) and s.dtype == dtypes.int32 and set(s.tolist()) <= {1, 3, 4}
  s = Tensor([[0, 1, 3], [4, 0, 0]]).multinomial(2, replacement=False)
  assert s.shape == (2, 2) and sorted(s.tolist()[0]) == [1, 2] and s.tolist()[1][0] == 0
  s = Tensor([True, False, True]).multinomial(2)
  assert sorted(s.tolist()) == [0, 2]

# ======================================================================== reshape(None), shrink_to, pad_to, pad2d
def test_reshape_none():
  x = Tensor.arange(24).reshape(2, 3, 4)
  assert x.reshape(None, 12).shape == (2, 12) and x.reshape(None, None, 2, 2).shape == (2, 3, 2, 2)
  assert x.reshape((None, -1, 2)).shape == (2, 6, 2) and x.reshape(None, 3, 4).tolist() == x.tolist()
  helper_test_op([(2, 3, 4)], lambda x: x.reshape(2, 2, 6), lambda x: x.reshape(None, 2, 6))
  with pytest.raises(ValueError): x.reshape(2, 3, 4, None)
  with pytest.raises(ValueError): x.reshape(None, 5)

def test_shrink_to_pad_to():
  x = Tensor.arange(12).reshape(3, 4)
  assert x.shrink_to(2, None).tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]] and x.shrink_to((None, 1)).tolist() == [[0], [4], [8]]
  assert x.pad_to(4, None).tolist()[3] == [0, 0, 0, 0] and x.pad_to((None, 6)).shape == (3, 6)
  helper_test_op([(3, 4)], lambda x: F.pad(x, (0, 2, 0, 1)), lambda x: x.pad_to(4, 6))
  helper_test_op([(3, 4)], lambda x: x[:2, :3], lambda x: x.shrink_to(2, 3))
  for bad in (lambda: x.pad_to(2, 4), lambda: x.pad_to(3), lambda: x.shrink_to(5, 4), lambda: x.shrink_to(3)): pytest.raises(ValueError, bad)

def test_pad2d():
  helper_test_op([(2, 3, 4)], lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), lambda x: x.pad2d((1, 2, 0, 1), value=0.5))
  helper_test_op([(2, 3, 4)], lambda x: x[:, 1:, :3], lambda x: x.pad2d((0, -1, -1, 0)))

# ======================================================================== contiguous_backward, clone(device=), cpu
def test_contiguous_backward():
  helper_test_op([(3, 4)], lambda x: (x * 2).contiguous().sum(1), lambda x: (x * 2).contiguous_backward().sum(1))

def test_clone_device():
  x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
  for dev in (None, "CPU", "PYTHON"):
    c = x.clone(device=dev) if dev else x.clone()
    assert c.device == Tensor(0, device=dev).device and c.tolist() == x.tolist()
  (x.clone(device="CPU") * 3).sum().backward()
  assert x.grad.tolist() == [[3.0, 3.0], [3.0, 3.0]]
  assert Tensor([1, 2], device="PYTHON").cpu().device == "CPU"

# ======================================================================== scaled_dot_product_attention(enable_gqa=True)
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_gqa(causal):
  helper_test_op([(2, 8, 5, 4), (2, 2, 6, 4), (2, 2, 6, 3)],
                 lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True),
                 lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=causal, enable_gqa=True), atol=1e-5)

def test_sdpa_gqa_mask_and_errors():
  helper_test_op([(1, 6, 3, 4), (1, 3, 3, 4), (1, 3, 3, 4), (3, 3)],
                 lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True),
                 lambda q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m, enable_gqa=True), atol=1e-5)
  q, k = Tensor.ones(1, 6, 3, 4), Tensor.ones(1, 4, 3, 4)
  raises_both(lambda: F.scaled_dot_product_attention(torch.ones(1, 6, 3, 4), torch.ones(1, 4, 3, 4), torch.ones(1, 4, 3, 4), enable_gqa=True),
              lambda: q.scaled_dot_product_attention(k, k, enable_gqa=True))

# ======================================================================== isinf flags
def test_isinf_flags():
  vals = [[1.0, INF, -INF, NAN, 0.0]]
  helper_test_op(None, lambda x: x.isinf(), lambda x: x.isinf(), vals=vals)
  helper_test_op(None, torch.isposinf, lambda x: x.isinf(detect_negative=False), vals=vals)
  helper_test_op(None, torch.isneginf, lambda x: x.isinf(detect_positive=False), vals=vals)
  assert Tensor(vals).isinf(False, False).tolist() == [[False] * 5] and Tensor([1, 2]).isinf().tolist() == [False, False]

# ======================================================================== normalize
@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (INF, 1), (2.0, (0, 1))])
def test_normalize(p, dim):
  helper_test_op([(3, 4, 2)], lambda x: F.normalize(x, p=p, dim=dim), lambda x: x.normalize(p=p, dim=dim), atol=1e-6)

def test_normalize_zero_rows_and_p0():
  helper_test_op(None, lambda x: F.normalize(x, dim=1), lambda x: x.normalize(), vals=[[[0.0, 0.0], [3.0, 4.0]]])
  helper_test_op(None, lambda x: F.normalize(x, p=0, dim=1), lambda x: x.normalize(p=0), vals=[[[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]]],
                 forward_only=True)
  helper_test_op(None, lambda x: F.normalize(x.float(), dim=0), lambda x: x.normalize(dim=0), vals=[[1, 2, 2]], dtype=dtypes.int32)

# ======================================================================== from_blob
def test_from_blob():
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  t = Tensor.from_blob(a.ctypes.data, (3, 4))
  assert t.dtype == dtypes.float32 and t.tolist() == a.tolist()
  a[0, 0] = 99  # a copy: later writes to the source do not show
  assert t[0, 0].item() == 0
  h = np.array([1.5, -2.0, 0.25], dtype=np.float16)
  assert Tensor.from_blob(h, (3,), dtype=dtypes.float16).tolist() == [1.5, -2.0, 0.25]
  buf = (ctypes.c_int32 * 4)(1, -2, 3, 4)
  t = Tensor.from_blob(ctypes.cast(buf, ctypes.POINTER(ctypes.c_int32)), (2, 2), dtype=dtypes.int32, device="PYTHON")
  assert t.tolist() == [[1, -2], [3, 4]] and t.device == "PYTHON"
  assert Tensor.from_blob(ctypes.addressof(buf), 3, dtype="int32").tolist() == [1, -2, 3]
  assert Tensor.from_blob(0, (0, 3)).shape == (0, 3)
  with pytest.raises(ValueError): Tensor.from_blob(0, (2,))

# ======================================================================== bitcast between sizes
def _np_view(a: np.ndarray, dt) -> np.ndarray: return a.view(dt)

BITCAST = [
  (np.array([[1.5, -2.25], [3e-5, -0.0]], np.float32).view(np.uint8), dtypes.float32, np.float32),
  (np.array([1.5, -2.25, 65504.0, 6e-8], np.float16).view(np.uint8), dtypes.float16, np.float16),
  (np.array([[1.5, -2.25e300]], np.float64).view(np.uint8), dtypes.float64, np.float64),
  (np.array([-1, 258, 2**31 - 1], np.int32), dtypes.uint8, np.uint8),
  (np.array([-1, 258, -(2**31)], np.int32), dtypes.int16, np.int16),
  (np.array([[1.5, -2.0, 3.25, 0.1]], np.float32), dtypes.uint16, np.uint16),
  (np.array([1, 255, 128, 7, 0, 9, 200, 3], np.uint8), dtypes.int32, np.int32),
  (np.array([-1, 2, -3, 4], np.int8), dtypes.int16, np.int16),
  (np.array([2**63 + 5, 12345678901], np.uint64), dtypes.uint16, np.uint16),
  (np.array([[1, 2], [3, 4]], np.int16), dtypes.int32, np.int32),
]

@pytest.mark.parametrize("arr,dt,npdt", BITCAST)
def test_bitcast_resize(arr, dt, npdt):
  out = Tensor(arr)._bitcast_resize(dt)
  want = _np_view(arr, npdt)
  assert out.dtype == dt and out.shape == want.shape
  np.testing.assert_array_equal(out.numpy(), want)

def test_bitcast_resize_bf16_and_errors():
  b = np.array([0x3fc0, 0xc010], np.uint16).view(np.uint8)
  assert Tensor(b)._bitcast_resize(dtypes.bfloat16).tolist() == [1.5, -2.25]
  with pytest.raises(ValueError): Tensor([1, 2, 3], dtype=dtypes.uint8)._bitcast_resize(dtypes.float32)
  with pytest.raises(ValueError): Tensor(1, dtype=dtypes.int32)._bitcast_resize(dtypes.uint8)

def test_bitcast_dispatch():
  assert Tensor(np.array([1.5], np.float32).view(np.uint8)).bitcast(dtypes.float32).tolist() == [1.5]

# ======================================================================== dim= keyword (PyTorch spelling of axis)
DIM = [
  ("sum", dict(dim=1)), ("sum", dict(dim=(0, 2), keepdim=True)), ("prod", dict(dim=0)), ("mean", dict(dim=-1)), ("mean", dict(dim=(1, 2))),
  ("var", dict(dim=1)), ("std", dict(dim=0, keepdim=True)), ("var", dict(dim=1, unbiased=False)), ("cumsum", dict(dim=1)),
  ("argmax", dict(dim=2)), ("argmin", dict(dim=0, keepdim=True)), ("any", dict(dim=1)), ("all", dict(dim=-1)),
]

@pytest.mark.parametrize("name,kw", DIM)
def test_dim_keyword(name, kw):
  def ffn(x):
    if name in ("any", "all"): x = x > 0
    return getattr(x, name)(**kw)
  def tfn(x):
    if name in ("any", "all"): x = x > 0
    out = getattr(x, name)(**kw)
    return out.int() if name in ("argmax", "argmin") else out
  helper_test_op([(2, 3, 4)], tfn, ffn, low=0.5 if name == "prod" else -2)

@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_dim_returns_values_indices(name):
  for kw in (dict(dim=1), dict(dim=0, keepdim=True), dict(dim=-1)):
    helper_test_op([(3, 4, 5)], lambda x, kw=kw: (getattr(x, name)(**kw).values, getattr(x, name)(**kw).indices.int()),
                   lambda x, kw=kw: (getattr(x, name)(**kw).values, getattr(x, name)(**kw).indices))
  r = getattr(Tensor([[1, 5, 2], [7, 0, 7]]), name)(dim=1)
  assert r.values.tolist() == ([5, 7] if name == "max" else [1, 0]) and r.indices.tolist() == ([1, 0] if name == "max" else [0, 1])
  assert getattr(Tensor([[1.0, 5.0]]), name)(1).shape == (1,)  # tinygrad's positional axis keeps giving the values only

def test_dim_and_axis_conflict():
  with pytest.raises(TypeError): Tensor.ones(2, 3).sum(0, dim=1)
  assert Tensor.ones(2, 3).sum(1, dim=1).tolist() == [3.0, 3.0]
  assert Tensor([1, 2, 4]).mean(dtype=dtypes.float64).dtype == dtypes.float64

# ======================================================================== interpolate keeps integer dtypes
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("size", [(6, 5), (3, 2), (9, 11)])
def test_interpolate_nearest_uint8(mode, size):
  helper_test_op([(2, 3, 4, 5)], lambda x: F.interpolate(x, size=size, mode=mode), lambda x: x.interpolate(size=size, mode=mode),
                 dtype=dtypes.uint8, low=0, high=255, forward_only=True)

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int32, dtypes.int64, dtypes.bool])
def test_interpolate_nearest_other_ints(dt):
  rng = np.random.default_rng(0)
  a = rng.integers(-100, 100, (1, 2, 3, 4)) if dt != dtypes.bool else rng.random((1, 2, 3, 4)) < 0.5
  out = Tensor(a, dtype=dt).interpolate(size=(5, 7), mode="nearest")
  want = F.interpolate(torch.tensor(a, dtype=torch.float32), size=(5, 7), mode="nearest").numpy()
  assert out.dtype == dt
  np.testing.assert_array_equal(out.numpy().astype(np.float32), want)

@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_bilinear_uint8(align_corners):
  a = np.random.default_rng(1).integers(0, 256, (2, 3, 5, 7)).astype(np.uint8)
  want = F.interpolate(torch.tensor(a), size=(9, 4), mode="bilinear", align_corners=align_corners).numpy()
  out = Tensor(a).interpolate(size=(9, 4), mode="bilinear", align_corners=align_corners)
  assert out.dtype == dtypes.uint8
  # torch's uint8 kernel uses fixed-point weights, so a value can round the other way
  assert np.abs(out.numpy().astype(int) - want.astype(int)).max() <= 1
  assert Tensor([[[0, 10]]], dtype=dtypes.int32).interpolate(size=(3,), mode="linear", align_corners=True).tolist() == [[[0, 5, 10]]]

# ======================================================================== Python scalars, cpu, t, mT, unbind
def test_python_scalars():
  assert float(Tensor([2.5])) == 2.5 and int(Tensor([[7]])) == 7 and int(Tensor(-3.7)) == -3 and float(Tensor(True)) == 1.0
  assert bool(Tensor([1])) is True and bool(Tensor(0.0)) is False
  assert math.isnan(float(Tensor(NAN))) and isinstance(int(Tensor(3, dtype=dtypes.uint8)), int)
  for f in (float, int, bool):
    with pytest.raises((ValueError, RuntimeError)): f(Tensor([1, 2]))

def test_t_mT():
  helper_test_op([(3, 4)], lambda x: x.t(), lambda x: x.t())
  helper_test_op([(4,)], lambda x: x.t(), lambda x: x.t())
  helper_test_op([()], lambda x: x.t(), lambda x: x.t())
  helper_test_op([(2, 3, 4)], lambda x: x.mT, lambda x: x.mT)
  raises_both(lambda: torch.ones(2, 3, 4).t(), lambda: Tensor.ones(2, 3, 4).t())
  raises_both(lambda: torch.ones(3).mT, lambda: Tensor.ones(3).mT)

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unbind(dim):
  helper_test_op([(2, 3, 4)], lambda x: x.unbind(dim), lambda x: x.unbind(dim))
  assert Tensor.ones(0, 3).unbind(0) == () and len(Tensor.ones(2, 3).unbind(dim=1)) == 3

# ======================================================================== tinygrad names: leakyrelu, rmsnorm, newton_schulz
def test_leakyrelu_rmsnorm():
  helper_test_op([(3, 4)], lambda x: F.leaky_relu(x, 0.2), lambda x: x.leakyrelu(0.2))
  helper_test_op([(3, 4)], lambda x: F.rms_norm(x, (4,), eps=1e-6), lambda x: x.rmsnorm(), atol=1e-5)

def _np_newton_schulz(g: np.ndarray, steps: int, params, eps=1e-7) -> np.ndarray:
  g = g / (np.sqrt((g * g).sum()) + eps)
  for _ in range(steps):
    a = g @ g.T
    g = sum(c * np.linalg.matrix_power(a, i) @ g for i, c in enumerate(params))
  return g

@pytest.mark.parametrize("shape", [(4, 6), (6, 4)])
def test_newton_schulz(shape):
  x = np.random.default_rng(3).standard_normal(shape).astype(np.float64)
  params = (3.4445, -4.7750, 2.0315)
  want = _np_newton_schulz(x, 5, params) if shape[0] <= shape[1] else _np_newton_schulz(x.T, 5, params).T
  np.testing.assert_allclose(Tensor(x).newton_schulz(5, params).numpy(), want, atol=1e-9)
  # the cubic iteration converges to the orthogonal polar factor U V^T
  u, _, vt = np.linalg.svd(x, full_matrices=False)
  np.testing.assert_allclose(Tensor(x).newton_schulz(40, (1.5, -0.5)).numpy(), u @ vt, atol=1e-6)
  with pytest.raises(ValueError): Tensor.ones(3).newton_schulz(1, (1.0,))
