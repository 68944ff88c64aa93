"""Every Tensor op against PyTorch (forward; backward too once fusegrad has autograd, see helpers.BACKWARD)."""
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fusegrad import Tensor, dtypes, Device
from .helpers import helper_test_op, FG2TORCH, FG2NP

f16, bf16, f32, f64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
i8, u8, i16, i32, i64 = dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.int64
HALF_TOL = dict(atol=1e-3, rtol=1e-2)
BF16_TOL = dict(atol=1e-2, rtol=2e-2)
INF, NAN = math.inf, math.nan

def torch_getitem(x: torch.Tensor, idx):
  """x[idx] for torch, which has no negative slice steps: flip those dims and slice the flipped dim forwards."""
  idx = idx if isinstance(idx, tuple) else (idx,)
  n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
  if Ellipsis in idx:
    k = idx.index(Ellipsis)
    idx = idx[:k] + (slice(None),) * (x.ndim - n_real) + idx[k + 1:]
  out, flips, dim = [], [], 0
  for i in idx:
    if i is None: out.append(None); continue
    if isinstance(i, slice) and i.step is not None and i.step < 0:
      n = x.shape[dim]
      r = range(*i.indices(n))
      flips.append(dim)
      out.append(slice(n - 1 - r[0], n - r[-1], -i.step) if len(r) else slice(0, 0))
    else: out.append(i)
    dim += 1
  return (x.flip(flips) if flips else x)[tuple(out)]

# ======================================================================== creation

class TestCreation:
  @pytest.mark.parametrize("data,dtype,shape", [
    ([1.0, 2.5, -3.0], dtypes.float32, (3,)),
    ([[1, 2, 3], [4, 5, 6]], dtypes.int32, (2, 3)),
    ([True, False, True], dtypes.bool, (3,)),
    ([1, 2.5], dtypes.float32, (2,)),
    ([True, 2], dtypes.int32, (2,)),
    (((1.0, 2.0), (3.0, 4.0)), dtypes.float32, (2, 2)),
    ([[[1], [2]], [[3], [4]]], dtypes.int32, (2, 2, 1)),
    ([], dtypes.float32, (0,)),
    (3, dtypes.int32, ()),
    (2.5, dtypes.float32, ()),
    (True, dtypes.bool, ()),
  ])
  def test_from_python(self, data, dtype, shape):
    t = Tensor(data)
    assert t.shape == shape and t.dtype == dtype
    assert t.tolist() == (data if not isinstance(data, tuple) else [list(r) for r in data])

  @pytest.mark.parametrize("dt", ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"])
  def test_from_numpy(self, dt):
    arr = (np.arange(12).reshape(3, 4) % 5 - (0 if dt.startswith("u") or dt == "bool" else 2)).astype(dt)
    t = Tensor(arr)
    assert t.shape == (3, 4) and t.dtype == getattr(dtypes, dt)
    np.testing.assert_array_equal(t.numpy(), arr)
    assert t.numpy().dtype == arr.dtype

  def test_from_numpy_noncontiguous(self):
    arr = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, ::-3].T
    np.testing.assert_array_equal(Tensor(arr).numpy(), arr)

  def test_from_numpy_scalar(self):
    t = Tensor(np.array(1.5))  # a 0-d array keeps its shape and dtype
    assert t.shape == () and t.dtype == dtypes.float64 and t.item() == 1.5
    t = Tensor(np.int16(-3))
    assert t.shape == () and t.item() == -3

  def test_from_list_with_dtype(self):
    t = Tensor([1, 2, 255], dtype=dtypes.uint8)
    assert t.dtype == dtypes.uint8 and t.tolist() == [1, 2, 255]
    with pytest.raises(RuntimeError, match="overflow"): Tensor([1, 2, 300], dtype=dtypes.uint8)  # as torch: no silent wrap
    assert Tensor([1.7, -2.7], dtype="int32").tolist() == [1, -2]
    assert Tensor([0.1], dtype=dtypes.float64).item() == 0.1

  def test_from_bytes(self):
    t = Tensor(b"\x00\x01\xff")
    assert t.dtype == dtypes.uint8 and t.shape == (3,) and t.tolist() == [0, 1, 255]

  def test_from_tensor(self):
    a = Tensor([1, 2])
    b = Tensor(a, dtype=dtypes.float32)
    assert b.dtype == dtypes.float32 and b.tolist() == [1.0, 2.0]

  def test_bfloat16_from_list(self):
    t = Tensor([1.0, 3.140625, -0.5], dtype=dtypes.bfloat16)
    assert t.dtype == dtypes.bfloat16
    np.testing.assert_array_equal(t.numpy(), torch.tensor([1.0, 3.140625, -0.5], dtype=torch.bfloat16).float().numpy())

  def test_constant_requires_grad_is_its_own_leaf(self):
    # two equal constants must stay two tensors: the gradient of one must not collect the other's uses
    a = Tensor.ones(2, 3, requires_grad=True)
    (a * Tensor.ones(2, 3)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones((2, 3)))

  def test_ragged_raises(self):
    with pytest.raises(Exception): Tensor([[1, 2], [3]])

  @pytest.mark.parametrize("fn", ["zeros", "ones", "empty"])
  @pytest.mark.parametrize("shape", [(3, 4), (0,), (), (2, 0, 3)])
  def test_constant_shapes(self, fn, shape):
    t = getattr(Tensor, fn)(*shape) if shape else getattr(Tensor, fn)()
    assert t.shape == shape and t.dtype == dtypes.float32
    if fn != "empty": np.testing.assert_array_equal(t.numpy(), getattr(torch, fn)(shape).numpy())
    else: assert t.numpy().shape == shape

  @pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int32, dtypes.bool, dtypes.float16, dtypes.bfloat16, dtypes.float64])
  def test_zeros_ones_dtype(self, dt):
    z, o = Tensor.zeros(2, 3, dtype=dt), Tensor.ones((2, 3), dtype=dt)
    assert z.dtype == dt and o.dtype == dt
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(o.numpy(), np.ones((2, 3)))

  @pytest.mark.parametrize("fill,dtype", [(3, dtypes.int32), (2.5, dtypes.float32), (True, dtypes.bool), (-7, None)])
  def test_full(self, fill, dtype):
    t = Tensor.full((2, 3), fill)
    ref = torch.full((2, 3), fill)
    if dtype is not None: assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), ref.numpy())

  def test_full_explicit_dtype(self):
    t = Tensor.full((4,), 1.9, dtype=dtypes.int8)
    assert t.dtype == dtypes.int8 and t.tolist() == [1, 1, 1, 1]
    assert Tensor.full(3, 0.5, dtype=dtypes.float16).tolist() == [0.5] * 3

  @pytest.mark.parametrize("args", [(10,), (2, 10), (2, 11, 3), (10, 2, -2), (0,), (5, 5), (-3, 4), (10, -10, -3)])
  def test_arange_int(self, args):
    t = Tensor.arange(*args)
    assert t.dtype == dtypes.int32  # fusegrad's default int
    np.testing.assert_array_equal(t.numpy(), torch.arange(*args).numpy())

  @pytest.mark.parametrize("args", [(0.0, 1.0, 0.1), (5.5,), (-1, 1, 0.25), (1, 0, -0.3)])
  def test_arange_float(self, args):
    t = Tensor.arange(*args)
    assert t.dtype == dtypes.float32
    np.testing.assert_allclose(t.numpy(), torch.arange(*args).numpy(), atol=1e-6)

  @pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int8, dtypes.int64, dtypes.float16])
  def test_arange_dtype(self, dt):
    t = Tensor.arange(3, 15, 2, dtype=dt)
    assert t.dtype == dt
    np.testing.assert_array_equal(t.numpy(), torch.arange(3, 15, 2, dtype=FG2TORCH[dt]).numpy())

  @pytest.mark.parametrize("args", [(0, 1, 5), (-3, 7, 11), (1, 1, 3), (2, -2, 9), (0, 10, 1), (0, 10, 0), (0.5, 1.5, 64)])
  def test_linspace(self, args):
    t = Tensor.linspace(*args)
    assert t.dtype == dtypes.float32 and t.shape == (args[2],)
    np.testing.assert_allclose(t.numpy(), torch.linspace(*args).numpy(), atol=1e-6, rtol=1e-6)

  def test_linspace_int_dtype(self):
    np.testing.assert_array_equal(Tensor.linspace(0, 10, 6, dtype=dtypes.int32).numpy(), torch.linspace(0, 10, 6, dtype=torch.int32).numpy())

  @pytest.mark.parametrize("args", [(3,), (1,), (0,), (2, 4), (4, 2)])
  def test_eye(self, args):
    t = Tensor.eye(*args)
    assert t.dtype == dtypes.float32
    np.testing.assert_array_equal(t.numpy(), torch.eye(*args).numpy())

  def test_eye_dtype(self):
    t = Tensor.eye(3, dtype=dtypes.bool)
    assert t.dtype == dtypes.bool and t.numpy().tolist() == torch.eye(3, dtype=torch.bool).tolist()

  @pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int8, dtypes.bool, dtypes.float16])
  def test_like(self, dt):
    base = Tensor.ones(2, 5, dtype=dt)
    for fn, val in (("zeros_like", 0), ("ones_like", 1)):
      t = getattr(base, fn)()
      assert t.shape == (2, 5) and t.dtype == dt
      np.testing.assert_array_equal(t.numpy(), np.full((2, 5), val))
    f = base.full_like(1)
    assert f.dtype == dt and f.shape == (2, 5)
    e = base.empty_like()
    assert e.dtype == dt and e.shape == (2, 5)

  def test_like_dtype_override(self):
    t = Tensor.ones(3, dtype=dtypes.int32).zeros_like(dtype=dtypes.float16)
    assert t.dtype == dtypes.float16 and t.tolist() == [0, 0, 0]
    assert Tensor.ones(2, 2).full_like(7, dtype=dtypes.int8).tolist() == [[7, 7], [7, 7]]

# ======================================================================== random

class TestRandom:
  def test_rand(self):
    Tensor.manual_seed(1)
    t = Tensor.rand(64, 64)
    a = t.numpy()
    assert t.shape == (64, 64) and t.dtype == dtypes.float32
    assert a.min() >= 0 and a.max() < 1
    assert abs(a.mean() - 0.5) < 0.02 and abs(a.std() - (1 / 12) ** 0.5) < 0.02
    assert len(np.unique(a)) > 4000

  @pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float64])
  def test_rand_dtype(self, dt):
    t = Tensor.rand(32, 16, dtype=dt)
    a = t.numpy()
    assert t.dtype == dt and a.min() >= 0 and a.max() < 1 and abs(a.mean() - 0.5) < 0.05

  def test_rand_stream_is_stable(self):
    # a seed gives the same numbers from release to release
    Tensor.manual_seed(5)
    np.testing.assert_allclose(Tensor.rand(6).numpy(), [0.79928231, 0.41003066, 0.36180568, 0.45768708, 0.84672713, 0.45374888], rtol=1e-7)
    assert Tensor.randint(5, low=0, high=1000).tolist() == [641, 151, 724, 380, 644]

  def test_rand_scalar_and_empty(self):
    assert Tensor.rand().shape == () and 0 <= Tensor.rand().item() < 1
    assert Tensor.rand(0, 3).numpy().shape == (0, 3)

  def test_randn(self):
    Tensor.manual_seed(2)
    a = Tensor.randn(64, 64).numpy()
    assert a.dtype == np.float32 and np.isfinite(a).all()
    assert abs(a.mean()) < 0.05 and abs(a.std() - 1) < 0.05
    assert 0.6 < (np.abs(a) < 1).mean() < 0.76  # ~68% within one sigma

  def test_randint(self):
    t = Tensor.randint(40, 50, low=-3, high=7)
    a = t.numpy()
    assert t.dtype == dtypes.int32 and t.shape == (40, 50)
    assert a.min() == -3 and a.max() == 6
    assert set(np.unique(a).tolist()) == set(range(-3, 7))

  def test_randint_dtype(self):
    t = Tensor.randint(100, high=3, dtype=dtypes.int8)
    assert t.dtype == dtypes.int8 and set(t.numpy().tolist()) <= {0, 1, 2}

  def test_uniform(self):
    a = Tensor.uniform(64, 64, low=-3.0, high=5.0).numpy()
    assert a.min() >= -3 and a.max() < 5 and abs(a.mean() - 1) < 0.1

  def test_normal(self):
    a = Tensor.normal(64, 64, mean=3.0, std=0.5).numpy()
    assert abs(a.mean() - 3) < 0.03 and abs(a.std() - 0.5) < 0.03

  @pytest.mark.parametrize("fn", ["rand", "randn", "uniform", "normal"])
  def test_manual_seed_reproducible(self, fn):
    Tensor.manual_seed(1234)
    a = getattr(Tensor, fn)(5, 7).numpy()
    b = getattr(Tensor, fn)(5, 7).numpy()
    Tensor.manual_seed(1234)
    c = getattr(Tensor, fn)(5, 7).numpy()
    Tensor.manual_seed(4321)
    d = getattr(Tensor, fn)(5, 7).numpy()
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b) and not np.array_equal(a, d)

  def test_rand_like(self):
    x = Tensor.ones(3, 4, dtype=dtypes.float16)
    r, n = x.rand_like(), x.randn_like()
    assert r.shape == n.shape == (3, 4) and r.dtype == n.dtype == dtypes.float16
    assert ((r.numpy() >= 0) & (r.numpy() < 1)).all()

  def test_rand_int_dtype_raises(self):
    with pytest.raises(Exception): Tensor.rand(3, dtype=dtypes.int32).realize()

# ======================================================================== unary

UNARY = {
  "neg": (lambda x: -x, -2, 2),
  "exp": (lambda x: x.exp(), -10, 10),
  "exp2": (lambda x: x.exp2(), -10, 10),
  "log": (lambda x: x.log(), 1e-3, 100),
  "log2": (lambda x: x.log2(), 1e-3, 100),
  "sin": (lambda x: x.sin(), -5, 5),
  "cos": (lambda x: x.cos(), -5, 5),
  "tan": (lambda x: x.tan(), -1.5, 1.5),
  "sqrt": (lambda x: x.sqrt(), 0, 100),
  "rsqrt": (lambda x: x.rsqrt(), 1e-2, 100),
  "reciprocal": (lambda x: x.reciprocal(), 0.1, 10),
  "tanh": (lambda x: x.tanh(), -5, 5),
  "sigmoid": (lambda x: x.sigmoid(), -10, 10),
  "relu": (lambda x: x.relu(), -2, 2),
  "abs": (lambda x: x.abs(), -2, 2),
  "sign": (lambda x: x.sign(), -2, 2),
  "floor": (lambda x: x.floor(), -5, 5),
  "ceil": (lambda x: x.ceil(), -5, 5),
  "round": (lambda x: x.round(), -5, 5),
  "trunc": (lambda x: x.trunc(), -5, 5),
  "square": (lambda x: x.square(), -3, 3),
  "erf": (lambda x: x.erf(), -3, 3),
}

class TestUnary:
  @pytest.mark.parametrize("name", list(UNARY))
  def test_float32(self, name):
    fn, lo, hi = UNARY[name]
    helper_test_op([(17, 29)], fn, low=lo, high=hi, atol=1e-6, rtol=1e-6 if name not in ("tan",) else 1e-5)

  @pytest.mark.parametrize("name", list(UNARY))
  def test_float16(self, name):
    fn, lo, hi = UNARY[name]
    helper_test_op([(8, 9)], fn, low=lo, high=min(hi, 10), dtype=f16, **HALF_TOL)

  @pytest.mark.parametrize("name", ["exp", "log", "sin", "sqrt", "sigmoid", "relu", "floor", "neg"])
  def test_bfloat16(self, name):
    fn, lo, hi = UNARY[name]
    helper_test_op([(8, 9)], fn, low=lo, high=min(hi, 10), dtype=bf16, **BF16_TOL)

  @pytest.mark.parametrize("name", ["exp", "log", "sin", "tanh", "erf", "sqrt", "sigmoid"])
  def test_float64(self, name):
    fn, lo, hi = UNARY[name]
    helper_test_op([(6, 7)], fn, low=lo, high=hi, dtype=f64, atol=1e-12, rtol=1e-12)

  @pytest.mark.parametrize("name", ["exp", "sin", "sqrt", "relu", "neg", "sigmoid"])
  def test_noncontiguous(self, name):
    fn, lo, hi = UNARY[name]
    helper_test_op([(7, 11)], lambda x: fn(x.T), low=lo, high=hi, rtol=1e-6)
    helper_test_op([(12, 10)], lambda x: fn(torch_getitem(x, (slice(1, 10, 3), slice(None, None, -2)))), lambda x: fn(x[1:10:3, ::-2]), low=lo, high=hi, rtol=1e-6)

  @pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "sigmoid", "erf", "reciprocal"])
  def test_int_input_promotes_to_float(self, name):
    # torch computes these in the default float dtype for integer inputs, as fusegrad does
    fn, lo, hi = UNARY[name]
    helper_test_op([(5, 6)], fn, low=1, high=20, dtype=i32, forward_only=True)

  @pytest.mark.parametrize("name", ["neg", "abs", "sign", "square", "relu"])
  @pytest.mark.parametrize("dt", [i8, i32, i64])
  def test_int_preserving(self, name, dt):
    fn, lo, hi = UNARY[name]
    helper_test_op([(5, 6)], fn, low=-50, high=50, dtype=dt)

  @pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc"])
  def test_rounding_on_int(self, name):
    helper_test_op([(4, 5)], UNARY[name][0], low=-100, high=100, dtype=i32)

  def test_round_half_to_even(self):
    helper_test_op(None, lambda x: x.round(), vals=[[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -0.0]])

  def test_sin_large_args(self):
    helper_test_op([(64,)], lambda x: x.sin(), low=-1000, high=1000, atol=1e-5, rtol=1e-5)
    helper_test_op([(64,)], lambda x: x.cos(), low=-1000, high=1000, atol=1e-5, rtol=1e-5)

  def test_exp_large(self):
    helper_test_op([(64,)], lambda x: x.exp(), low=-100, high=100, rtol=1e-6)

  def test_sigmoid_extreme(self):
    helper_test_op(None, lambda x: x.sigmoid(), vals=[[-1000., -100., -20., 0., 20., 100., 1000.]])

  def test_tanh_extreme(self):
    helper_test_op(None, lambda x: x.tanh(), vals=[[-1000., -50., -1e-8, 0., 1e-8, 50., 1000.]])

  @pytest.mark.parametrize("name,v", [
    ("exp", [INF, -INF, NAN, 88.8, -104.]), ("exp2", [INF, -INF, NAN, 128., -150.]),
    ("log", [INF, 0., -0., -1., NAN, 1e-45]), ("log2", [INF, 0., -1., NAN]),
    ("sqrt", [INF, 0., -0., -1., NAN]), ("rsqrt", [INF, 0., -1.]), ("reciprocal", [0., -0., INF, -INF, NAN]),
    ("sin", [INF, NAN, 0.]), ("tanh", [INF, -INF, NAN]), ("sigmoid", [INF, -INF, NAN]),
    ("relu", [NAN, INF, -INF, -0.]), ("abs", [NAN, -INF, -0.]), ("sign", [NAN, INF, -INF, 0., -0.]),
    ("floor", [NAN, INF, -INF, -0.5]), ("ceil", [NAN, INF, -0.5]), ("round", [NAN, INF, -0.5]), ("trunc", [NAN, -INF, -0.7]),
    ("erf", [INF, -INF, NAN, 0.]), ("neg", [INF, NAN, 0.]), ("square", [INF, NAN, -INF]),
  ])
  def test_special_values(self, name, v):
    helper_test_op(None, UNARY[name][0], vals=[v], forward_only=True)

  def test_zero_size(self):
    helper_test_op([(0, 4)], lambda x: x.exp())
    helper_test_op([(3, 0)], lambda x: x.relu() + 1)

  def test_scalar_tensor(self):
    helper_test_op([()], lambda x: x.exp().sin())

  def test_chain(self):
    helper_test_op([(16, 16)], lambda x: (x.sin() * x.exp()).tanh().sqrt(), low=0.1, high=1)

  def test_bool_not(self):
    helper_test_op([(4, 4)], lambda x: ~x, dtype=dtypes.bool)
    helper_test_op([(4, 4)], lambda x: x.logical_not(), dtype=dtypes.bool)

# ======================================================================== integer wraparound

class TestIntOverflow:
  @pytest.mark.parametrize("dt,v", [(i8, [127, -128, 100]), (u8, [255, 0, 200]), (i16, [32767, -32768, 20000]),
                                     (i32, [2**31 - 1, -2**31, 2**30]), (i64, [2**63 - 1, -2**63, 2**62])])
  def test_add_wraps(self, dt, v):
    helper_test_op(None, lambda a, b: a + b, vals=[v, v], dtype=dt)

  @pytest.mark.parametrize("dt,v", [(i8, [100, -100, 77]), (u8, [200, 17, 255]), (i32, [2**20 + 3, -2**25, 65537]), (i64, [2**40 + 7, -2**33, 3**30])])
  def test_mul_wraps(self, dt, v):
    helper_test_op(None, lambda a, b: a * b, vals=[v, v], dtype=dt)

  def test_uint8_sub_wraps(self):
    helper_test_op(None, lambda a, b: a - b, vals=[[0, 1, 5], [1, 200, 5]], dtype=u8)

  def test_neg_abs_int_min(self):
    helper_test_op(None, lambda a: -a, vals=[[-128, 127, 0]], dtype=i8)
    helper_test_op(None, lambda a: a.abs(), vals=[[-128, 127, -1]], dtype=i8)
    helper_test_op(None, lambda a: a.abs(), vals=[[-2**31, 2**31 - 1]], dtype=i32)

  def test_scalar_wraps(self):
    helper_test_op(None, lambda a: a + 100, vals=[[100, -100, 27]], dtype=i8)
    helper_test_op(None, lambda a: a * 3, vals=[[2**31 - 1, 2**30]], dtype=i32)

  def test_int64_exact(self):
    helper_test_op(None, lambda a, b: a - b, vals=[[2**62 + 1, -2**62], [1, 2**62]], dtype=i64)

# ======================================================================== binary

BINARY = {
  "add": (lambda a, b: a + b), "sub": (lambda a, b: a - b), "mul": (lambda a, b: a * b), "div": (lambda a, b: a / b),
  "maximum": (lambda a, b: a.maximum(b)), "minimum": (lambda a, b: a.minimum(b)),
  "lt": (lambda a, b: a < b), "le": (lambda a, b: a <= b), "gt": (lambda a, b: a > b), "ge": (lambda a, b: a >= b),
  "eq": (lambda a, b: a == b), "ne": (lambda a, b: a != b),
}

class TestBinary:
  @pytest.mark.parametrize("name", list(BINARY))
  def test_float32(self, name):
    helper_test_op([(13, 17), (13, 17)], BINARY[name])

  @pytest.mark.parametrize("name", list(BINARY))
  @pytest.mark.parametrize("shapes", [[(5, 1), (1, 6)], [(2, 3, 4), (4,)], [(3, 1, 2), (1, 4, 1)], [(), (3, 3)], [(0, 3), (1, 3)]], ids=["outer", "trailing", "3d", "scalar", "zero"])
  def test_broadcast(self, name, shapes):
    helper_test_op(shapes, BINARY[name])

  @pytest.mark.parametrize("name", list(BINARY))
  @pytest.mark.parametrize("dt", [i8, u8, i32, i64, f16, f64])
  def test_dtypes(self, name, dt):
    nonzero = name == "div"
    helper_test_op(None, BINARY[name], dtype=dt, **(HALF_TOL if dt == f16 else {}),
                   vals=[[[3, -7, 0, 5], [12, 1, -1, 9]] if dt != u8 else [[3, 7, 0, 5], [12, 1, 200, 9]],
                         [[2, 7, 1, -5], [5, 1, 4, 8]] if dt != u8 else [[2, 7, 1, 5], [5, 1, 4, 8]] if nonzero else [[2, 7, 0, 5], [5, 1, 4, 8]]])

  @pytest.mark.parametrize("name", ["add", "mul", "maximum", "minimum", "eq", "ne", "lt"])
  def test_bool(self, name):
    helper_test_op([(6, 6), (6, 6)], BINARY[name], dtype=dtypes.bool)

  @pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "lt", "eq"])
  def test_bfloat16(self, name):
    helper_test_op([(5, 5), (5, 5)], BINARY[name], dtype=bf16, **BF16_TOL)

  @pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum", "lt", "ge", "eq"])
  @pytest.mark.parametrize("scalar", [2, -1.5, 0.0])
  def test_scalar_rhs(self, name, scalar):
    if name == "div" and scalar == 0.0: scalar = 0.5
    tfn = (lambda a: BINARY[name](a, torch.tensor(scalar))) if name in ("maximum", "minimum") else (lambda a: BINARY[name](a, scalar))
    helper_test_op([(4, 5)], tfn, lambda a: BINARY[name](a, scalar))

  @pytest.mark.parametrize("op", [lambda a: 2 + a, lambda a: 2 - a, lambda a: 3 * a, lambda a: 1.5 / a, lambda a: 2 ** a, lambda a: 7 % a,
                                  lambda a: 5 // a, lambda a: 2 < a, lambda a: 0.5 == a], ids=["radd", "rsub", "rmul", "rdiv", "rpow", "rmod", "rfloordiv", "rlt", "req"])
  def test_scalar_lhs(self, request, op):
    no_grad = any(k in request.node.name for k in ("rmod", "rfloordiv"))  # torch has no derivative for the divisor
    helper_test_op([(4, 5)], op, low=0.5, high=3, forward_only=no_grad)

  @pytest.mark.parametrize("op", [lambda a: a + 3, lambda a: a * -2, lambda a: a - 100, lambda a: a // 3, lambda a: a % 3, lambda a: 10 - a])
  def test_int_scalar_keeps_dtype(self, op):
    helper_test_op([(4, 5)], op, dtype=i16, low=-50, high=50)
    helper_test_op([(4, 5)], op, dtype=i32, low=-50, high=50)

  def test_int_div_gives_float(self):
    helper_test_op(None, lambda a, b: a / b, vals=[[7, -7, 1, 0], [2, 2, 3, 5]], dtype=i32)
    helper_test_op(None, lambda a: a / 2, vals=[[7, -7, 1, 0]], dtype=i32)

  def test_noncontiguous(self):
    helper_test_op([(6, 7), (7, 6)], lambda a, b: a.T * b + a.T)
    helper_test_op([(8, 8), (4, 4)], lambda a, b: a[::2, 1::2] - b.flip(0))
    helper_test_op([(8, 8), (4, 4)], lambda a, b: torch_getitem(a, (slice(None, None, -2), slice(1, None, 2))) * b, lambda a, b: a[::-2, 1::2] * b)

  def test_same_tensor_twice(self):
    helper_test_op([(5, 5)], lambda a: a * a + a / (a.abs() + 1))

  def test_div_special(self):
    helper_test_op(None, lambda a, b: a / b, vals=[[1., -1., 0., INF, NAN, 1.], [0., 0., 0., INF, 1., -0.]], forward_only=True)

  @pytest.mark.parametrize("name", ["add", "mul", "maximum", "minimum", "lt", "eq", "ne"])
  def test_nan_inf(self, name):
    helper_test_op(None, BINARY[name], vals=[[NAN, 1., NAN, INF, -INF, INF, 2.], [1., NAN, NAN, -INF, -INF, 1., INF]], forward_only=True)

class TestFloorDivMod:
  @pytest.mark.parametrize("dt", [i8, i16, i32, i64])
  def test_floordiv_int(self, dt):
    helper_test_op(None, lambda a, b: a // b, dtype=dt, vals=[[7, -7, 7, -7, 0, 6, -6, 1], [2, 2, -2, -2, 3, 3, 3, -5]])

  @pytest.mark.parametrize("dt", [i8, i32, i64])
  def test_mod_int(self, dt):
    helper_test_op(None, lambda a, b: a % b, dtype=dt, vals=[[7, -7, 7, -7, 0, 6, -6, 1], [2, 2, -2, -2, 3, 3, 3, -5]])

  def test_uint8_floordiv_mod(self):
    helper_test_op(None, lambda a, b: a // b, dtype=u8, vals=[[255, 7, 0, 100], [2, 7, 3, 9]])
    helper_test_op(None, lambda a, b: a % b, dtype=u8, vals=[[255, 7, 0, 100], [2, 7, 3, 9]])

  def test_floordiv_float(self):
    helper_test_op(None, lambda a, b: a // b, vals=[[7.5, -7.5, 7.5, -7.5, 0.1, -0.1], [2., 2., -2., -2., 0.3, 0.3]], forward_only=True)

  def test_mod_float(self):
    helper_test_op(None, lambda a, b: a % b, vals=[[7.5, -7.5, 7.5, -7.5, 5.0, -3.25], [2., 2., -2., -2., 2.5, 1.0]], forward_only=True)

  def test_mod_random(self):
    helper_test_op([(8, 8), (8, 8)], lambda a, b: a % b, low=0.5, high=5, forward_only=True, atol=1e-5)

  def test_floordiv_scalar_int(self):
    helper_test_op([(20,)], lambda a: a // 3, dtype=i32, low=-20, high=20)
    helper_test_op([(20,)], lambda a: a % -3, dtype=i32, low=-20, high=20)

class TestPow:
  def test_float_float(self):
    helper_test_op([(8, 8), (8, 8)], lambda a, b: a ** b, low=0.1, high=3, atol=1e-5, rtol=1e-5)

  @pytest.mark.parametrize("e", [0, 1, 2, 3, -1, -2, 0.5, 1.5, -0.5])
  def test_scalar_exponent(self, e):
    helper_test_op([(6, 6)], lambda a: a ** e, low=0.2, high=3, rtol=1e-5)

  def test_negative_base_integer_exponent(self):
    helper_test_op(None, lambda a, b: a ** b, vals=[[-2., -3., -0.5, -1., 0., 0.], [2., 3., -2., 7., 0., 2.]], forward_only=True)

  def test_negative_base_fractional_exponent_nan(self):
    helper_test_op(None, lambda a: a ** 0.5, vals=[[-4., -1., 4.]], forward_only=True)

  def test_rpow(self):
    helper_test_op([(10,)], lambda a: 2.0 ** a, low=-5, high=5, rtol=1e-6)
    helper_test_op([(10,)], lambda a: 0.5 ** a, low=-5, high=5, rtol=1e-6)

  def test_int_pow(self):
    helper_test_op(None, lambda a, b: a ** b, vals=[[2, 3, -2, 5, 0, 7], [3, 0, 3, 2, 4, 1]], dtype=i32)
    helper_test_op(None, lambda a: a ** 2, vals=[[2, -3, 46340]], dtype=i32)

  def test_pow_half(self):
    helper_test_op([(5, 5)], lambda a: a ** 2.5, low=0.1, high=3, dtype=f16, **HALF_TOL)

class TestBitwise:
  @pytest.mark.parametrize("op", [lambda a, b: a & b, lambda a, b: a | b, lambda a, b: a ^ b], ids=["and", "or", "xor"])
  @pytest.mark.parametrize("dt", [dtypes.bool, i8, u8, i16, i32, i64])
  def test_binary(self, op, dt):
    helper_test_op([(5, 7), (5, 7)], op, dtype=dt, low=-100, high=100)

  @pytest.mark.parametrize("dt", [dtypes.bool, i8, u8, i32, i64])
  def test_invert(self, dt):
    helper_test_op([(5, 7)], lambda a: ~a, dtype=dt, low=-100, high=100)

  @pytest.mark.parametrize("dt", [u8, i32, i64])
  def test_shifts_tensor(self, dt):
    helper_test_op(None, lambda a, b: a << b, dtype=dt, vals=[[1, 3, 5, 100], [0, 1, 3, 2]])
    helper_test_op(None, lambda a, b: a >> b, dtype=dt, vals=[[1, 3, 255, 100], [0, 1, 3, 2]])

  def test_shift_scalar(self):
    helper_test_op([(10,)], lambda a: a << 3, dtype=i32, low=-100, high=100)
    helper_test_op([(10,)], lambda a: a >> 2, dtype=i32, low=-100, high=100)  # arithmetic shift for negatives

  def test_scalar_operand(self):
    helper_test_op([(10,)], lambda a: a & 6, dtype=i32, low=-20, high=20)
    helper_test_op([(10,)], lambda a: a ^ -1, dtype=i8, low=-20, high=20)
    helper_test_op([(10,)], lambda a: 3 | a, dtype=u8, low=0, high=20)

  def test_float_raises(self):
    with pytest.raises(Exception): (Tensor([1.0]) & Tensor([2.0])).realize()
    with pytest.raises(Exception): (~Tensor([1.0])).realize()

class TestWhereClip:
  def test_where(self):
    helper_test_op([(5, 6), (5, 6), (5, 6)], lambda c, x, y: c.where(x, y) if isinstance(c, Tensor) else torch.where(c, x, y),
                   dtype=[dtypes.bool, f32, f32])

  def test_where_broadcast(self):
    helper_test_op([(5, 1), (1, 6), ()], lambda c, x, y: torch.where(c, x, y), lambda c, x, y: c.where(x, y), dtype=[dtypes.bool, f32, f32])

  def test_where_scalars(self):
    helper_test_op([(4, 4)], lambda x: torch.where(x > 0, x, 0.5), lambda x: (x > 0).where(x, 0.5))
    helper_test_op([(4, 4)], lambda x: torch.where(x > 0, 2.0, x), lambda x: (x > 0).where(2.0, x))
    helper_test_op([(4, 4)], lambda x: torch.where(x > 0, 1.0, -1.0), lambda x: (x > 0).where(1.0, -1.0))

  def test_where_int_cond(self):
    helper_test_op([(4, 4), (4, 4), (4, 4)], lambda c, x, y: torch.where(c != 0, x, y), lambda c, x, y: c.where(x, y), dtype=[i32, f32, f32], low=-1, high=2)

  def test_where_int_values(self):
    helper_test_op([(4, 4), (4, 4), (4, 4)], lambda c, x, y: torch.where(c, x, y), lambda c, x, y: c.where(x, y), dtype=[dtypes.bool, i32, i32], low=-50, high=50)

  def test_where_promotes(self):
    helper_test_op([(4, 4), (4, 4), (4, 4)], lambda c, x, y: torch.where(c, x, y), lambda c, x, y: c.where(x, y), dtype=[dtypes.bool, i32, f32])

  def test_where_nan(self):
    helper_test_op(None, lambda c, x: torch.where(c, x, NAN), lambda c, x: c.where(x, NAN), vals=[[True, False], [1., 2.]], dtype=[dtypes.bool, f32], forward_only=True)

  @pytest.mark.parametrize("lo,hi", [(-0.5, 0.5), (None, 0.3), (-0.3, None), (1.0, 1.0)])
  def test_clip(self, lo, hi):
    helper_test_op([(8, 8)], lambda x: x.clip(lo, hi))

  def test_clip_int(self):
    helper_test_op([(20,)], lambda x: x.clip(-5, 5), dtype=i32, low=-20, high=20)
    helper_test_op([(20,)], lambda x: x.clip(3, 200), dtype=u8, low=0, high=255)

  def test_clip_nan(self):
    helper_test_op(None, lambda x: x.clip(-1, 1), vals=[[NAN, INF, -INF, 0.5]], forward_only=True)

  def test_clamp_alias(self):
    helper_test_op([(8,)], lambda x: x.clamp(-1, 1))

  def test_clip_tensor_bounds(self):
    helper_test_op([(6, 6), (6, 6), (6, 6)], lambda x, a, b: x.clip(a, a + b.abs()), lambda x, a, b: x.clip(a, a + b.abs()))

# ======================================================================== reductions

class TestReduce:
  @pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (-1, -3)])
  @pytest.mark.parametrize("keepdim", [False, True])
  def test_sum(self, axis, keepdim):
    helper_test_op([(4, 5, 6)], lambda x: x.sum(axis, keepdim=keepdim), atol=1e-5)

  @pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
  def test_prod(self, axis):
    if axis is None: helper_test_op([(3, 4, 5)], lambda x: x.prod(), low=0.5, high=1.5, rtol=1e-5)
    elif isinstance(axis, int): helper_test_op([(3, 4, 5)], lambda x: x.prod(axis), low=0.5, high=1.5, rtol=1e-5)
    else: helper_test_op([(3, 4, 5)], lambda x: x.prod(0).prod(1), lambda x: x.prod(axis), low=0.5, high=1.5, rtol=1e-5)

  def test_prod_keepdim(self):
    helper_test_op([(3, 4)], lambda x: x.prod(1, keepdim=True), low=-2, high=2)

  @pytest.mark.parametrize("op", ["max", "min"])
  @pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
  @pytest.mark.parametrize("keepdim", [False, True])
  def test_max_min(self, op, axis, keepdim):
    tfn = torch.amax if op == "max" else torch.amin
    helper_test_op([(4, 5, 6)], lambda x: tfn(x, dim=axis, keepdim=keepdim), lambda x: getattr(x, op)(axis, keepdim=keepdim))

  @pytest.mark.parametrize("op", ["amax", "amin"])
  @pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), ()])
  def test_amax_amin(self, op, dim):  # torch's names: dim=None or () is every dim; ties split the gradient evenly
    helper_test_op([(3, 4, 5)], lambda x: getattr(torch, op)(x, dim=dim) + getattr(torch, op)(x, dim=dim, keepdim=True).sum(),
                   lambda x: getattr(x, op)(dim) + getattr(x, op)(dim, keepdim=True).sum())

  @pytest.mark.parametrize("op", ["max", "min"])
  @pytest.mark.parametrize("dt", [dtypes.bool, i8, u8, i32, i64, f16, bf16, f64])
  def test_max_min_dtypes(self, op, dt):
    tfn = torch.amax if op == "max" else torch.amin
    helper_test_op([(5, 7)], lambda x: tfn(x, 1), lambda x: getattr(x, op)(1), dtype=dt, low=-100, high=100)
    helper_test_op([(5, 7)], lambda x: tfn(x, (0, 1)), lambda x: getattr(x, op)(), dtype=dt, low=-100, high=100)

  def test_max_min_int_extremes(self):
    helper_test_op(None, lambda x: torch.amax(x, 0), lambda x: x.max(0), vals=[[-2**31, -2**31 + 1]], dtype=i32)
    helper_test_op(None, lambda x: torch.amin(x, 0), lambda x: x.min(0), vals=[[2**31 - 1, -2**31]], dtype=i32)
    helper_test_op(None, lambda x: torch.amin(x, 0), lambda x: x.min(0), vals=[[255, 0, 3]], dtype=u8)
    helper_test_op(None, lambda x: torch.amax(x, 0), lambda x: x.max(0), vals=[[-128, -128]], dtype=i8)

  def test_max_nan(self):
    helper_test_op(None, lambda x: torch.amax(x, 1), lambda x: x.max(1), vals=[[[1., NAN, 3.], [NAN, -INF, 0.], [-INF, -INF, -INF]]], forward_only=True)
    helper_test_op(None, lambda x: torch.amin(x, 1), lambda x: x.min(1), vals=[[[1., NAN, 3.], [INF, INF, INF]]], forward_only=True)

  @pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
  @pytest.mark.parametrize("keepdim", [False, True])
  def test_mean(self, axis, keepdim):
    helper_test_op([(6, 7)], lambda x: x.mean(axis, keepdim=keepdim))

  def test_mean_int(self):
    helper_test_op([(6, 7)], lambda x: x.float().mean(), lambda x: x.mean(), dtype=i32, low=-100, high=100, check_dtype=True)

  @pytest.mark.parametrize("op", ["var", "std"])
  @pytest.mark.parametrize("axis,keepdim,correction", [(None, False, 1), (0, False, 1), (-1, True, 1), ((0, 2), False, 0), (1, False, 0), (1, True, 2)])
  def test_var_std(self, op, axis, keepdim, correction):
    helper_test_op([(4, 5, 6)], lambda x: getattr(x, op)(axis, keepdim=keepdim, correction=correction), rtol=1e-5)

  def test_var_single_element(self):
    helper_test_op([(3, 1)], lambda x: x.var(1), forward_only=True)  # n - correction == 0 -> nan (torch) / inf
    helper_test_op([(3, 1)], lambda x: x.var(1, correction=0))

  @pytest.mark.parametrize("dt", [i8, u8, i16, i32, dtypes.bool])
  def test_sum_int(self, dt):
    # torch accumulates small ints into int64, fusegrad into int32 (tinygrad convention): compare values
    helper_test_op([(6, 7)], lambda x: x.sum(1), dtype=dt, low=-100, high=100, check_dtype=False)
    helper_test_op([(6, 7)], lambda x: x.sum(), dtype=dt, low=-100, high=100, check_dtype=False)

  def test_sum_int_dtype(self):
    assert Tensor([1, 2], dtype=dtypes.int32).sum().dtype == dtypes.int32
    assert Tensor([True, False]).sum().dtype == dtypes.int32
    assert Tensor([1, 2], dtype=dtypes.int64).sum().dtype == dtypes.int64
    assert Tensor([1.0], dtype=dtypes.float16).sum().dtype == dtypes.float16

  def test_sum_dtype_arg(self):
    helper_test_op([(4, 5)], lambda x: x.sum(1, dtype=torch.float64), lambda x: x.sum(1, dtype=dtypes.float64))
    helper_test_op([(4, 5)], lambda x: x.sum(0, dtype=torch.int64), lambda x: x.sum(0, dtype=dtypes.int64), dtype=i8, low=-100, high=100)

  def test_sum_int64_large(self):
    helper_test_op(None, lambda x: x.sum(), vals=[[2**40, 2**41, -3]], dtype=i64)

  def test_sum_half(self):
    helper_test_op([(8, 16)], lambda x: x.sum(1), dtype=f16, **HALF_TOL)
    helper_test_op([(8, 16)], lambda x: x.mean(0), dtype=bf16, **BF16_TOL)

  def test_sum_float64(self):
    helper_test_op([(8, 16)], lambda x: x.sum(), dtype=f64, atol=1e-12)

  def test_sum_large_row(self):
    helper_test_op([(3, 4096)], lambda x: x.sum(1), atol=1e-3, rtol=1e-5)

  def test_prod_int(self):
    helper_test_op([(3, 5)], lambda x: x.prod(1), dtype=i32, low=-3, high=4, check_dtype=False)

  @pytest.mark.parametrize("op", ["sum", "mean", "prod"])
  @pytest.mark.parametrize("shape,axis", [((0,), None), ((0, 3), 0), ((0, 3), 1), ((2, 0), 1), ((2, 0), None)])
  def test_zero_size(self, op, shape, axis):
    tfn = (lambda x: getattr(x, op)(axis)) if axis is not None else (lambda x: getattr(x, op)())
    helper_test_op([shape], tfn, lambda x: getattr(x, op)(axis), forward_only=True)

  def test_size_one_dims(self):
    helper_test_op([(1, 5, 1)], lambda x: x.sum(0))
    helper_test_op([(1, 5, 1)], lambda x: torch.amax(x, 2, keepdim=True), lambda x: x.max(2, keepdim=True))
    helper_test_op([(1, 1)], lambda x: x.mean())

  def test_scalar_tensor(self):
    helper_test_op([()], lambda x: x.sum())
    helper_test_op([()], lambda x: x.sum(0), lambda x: x.sum(0))

  def test_noncontiguous(self):
    helper_test_op([(5, 7)], lambda x: x.T.sum(1))
    helper_test_op([(5, 8)], lambda x: torch.amax(x[:, ::2].T, 0), lambda x: x[:, ::2].T.max(0))
    helper_test_op([(6, 6)], lambda x: x.flip(1)[1:5].mean(0))

  def test_reduce_then_elementwise(self):
    helper_test_op([(8, 9)], lambda x: (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + 1e-5), rtol=1e-5)
    helper_test_op([(8, 9)], lambda x: x.sum(0) + x.sum(1, keepdim=True), atol=1e-5)

  def test_expanded_reduce(self):
    helper_test_op([(1, 5)], lambda x: x.expand(4, 5).sum(0))
    helper_test_op([(4, 1)], lambda x: x.expand(4, 6).sum())

class TestArg:
  @pytest.mark.parametrize("op", ["argmax", "argmin"])
  @pytest.mark.parametrize("axis,keepdim", [(None, False), (0, False), (1, False), (-1, True), (2, False)])
  def test_float(self, op, axis, keepdim):
    helper_test_op([(4, 5, 6)], lambda x: getattr(x, op)(axis, keepdim=keepdim), check_dtype=False)

  def test_dtype_int32(self):
    assert Tensor([[1.0, 3.0]]).argmax(1).dtype == dtypes.int32
    assert Tensor([[1.0, 3.0]]).argmin().dtype == dtypes.int32

  @pytest.mark.parametrize("op", ["argmax", "argmin"])
  def test_ties_first(self, op):
    helper_test_op(None, lambda x: getattr(x, op)(1), vals=[[[1., 1., 1.], [3., 0., 3.], [0., 3., 0.]]], check_dtype=False)
    helper_test_op(None, lambda x: getattr(x, op)(), vals=[[2, 5, 5, 2]], dtype=i32, check_dtype=False)

  @pytest.mark.parametrize("op", ["argmax", "argmin"])
  @pytest.mark.parametrize("dt", [dtypes.bool, i8, u8, i32, f16])
  def test_dtypes(self, op, dt):
    tfn = (lambda x: getattr(x.to(torch.uint8), op)(0)) if dt == dtypes.bool else (lambda x: getattr(x, op)(0))  # torch has no bool argmax
    helper_test_op([(6, 5)], tfn, lambda x: getattr(x, op)(0), dtype=dt, low=-100, high=100, check_dtype=False)

  def test_nan(self):
    helper_test_op(None, lambda x: x.argmax(1), vals=[[[1., NAN, 3.], [2., 1., NAN]]], check_dtype=False)
    helper_test_op(None, lambda x: x.argmin(1), vals=[[[1., NAN, -3.], [-INF, 1., 5.]]], check_dtype=False)

  def test_noncontiguous(self):
    helper_test_op([(5, 7)], lambda x: x.T.argmax(1), check_dtype=False)
    helper_test_op([(5, 7)], lambda x: x.flip(1).argmin(1), check_dtype=False)

  def test_int_extremes(self):
    helper_test_op(None, lambda x: x.argmin(), vals=[[0, -2**31, 5]], dtype=i32, check_dtype=False)
    helper_test_op(None, lambda x: x.argmax(), vals=[[0, 255, 5]], dtype=u8, check_dtype=False)

class TestAnyAll:
  @pytest.mark.parametrize("op", ["any", "all"])
  @pytest.mark.parametrize("axis,keepdim", [(None, False), (0, False), (1, True), (-1, False)])
  def test_bool(self, op, axis, keepdim):
    if axis is None: helper_test_op([(4, 5)], lambda x: getattr(x, op)(), dtype=dtypes.bool)
    else: helper_test_op([(4, 5)], lambda x: getattr(x, op)(axis, keepdim=keepdim), dtype=dtypes.bool)

  @pytest.mark.parametrize("op", ["any", "all"])
  @pytest.mark.parametrize("dt", [f32, i32, u8])
  def test_nonbool(self, op, dt):
    # torch keeps uint8 for any/all of uint8 (a legacy rule); fusegrad always returns bool
    helper_test_op(None, lambda x: getattr(x, op)(1), vals=[[[0, 0, 0], [0, 2, 0], [1, 1, 3]]], dtype=dt, check_dtype=dt != u8)

  def test_nan_is_true(self):
    helper_test_op(None, lambda x: x.all(), vals=[[NAN, 1.]])
    helper_test_op(None, lambda x: x.any(), vals=[[NAN, 0.]])

  @pytest.mark.parametrize("op", ["any", "all"])
  def test_empty(self, op):
    helper_test_op([(0,)], lambda x: getattr(x, op)(), dtype=dtypes.bool)
    helper_test_op([(3, 0)], lambda x: getattr(x, op)(1), dtype=dtypes.bool)

# ======================================================================== movement

class TestMovement:
  @pytest.mark.parametrize("src,dst", [((4, 6), (24,)), ((4, 6), (3, 8)), ((4, 6), (-1, 4)), ((4, 6), (2, -1, 3)), ((24,), (2, 3, 4)),
                                       ((2, 3, 4), (4, 1, 6)), ((1,), ()), ((), (1, 1)), ((0, 4), (4, 0)), ((0, 4), (-1, 2))])
  def test_reshape(self, src, dst):
    helper_test_op([src], lambda x: x.reshape(dst))

  def test_reshape_varargs(self):
    helper_test_op([(4, 6)], lambda x: x.reshape(2, 12))
    helper_test_op([(4, 6)], lambda x: x.view(3, 8))

  def test_reshape_noncontiguous(self):
    helper_test_op([(4, 6)], lambda x: x.T.reshape(-1))
    helper_test_op([(4, 6)], lambda x: x.T.reshape(3, 8) + 1)
    helper_test_op([(2, 3, 4)], lambda x: x.permute(2, 0, 1).reshape(4, 6).flip(0).reshape(24))

  @pytest.mark.parametrize("src,dst", [((1, 4), (3, 4)), ((4, 1), (4, 5)), ((3,), (2, 3)), ((1, 1), (2, 3)), ((2, 1, 3), (2, 4, 3)), ((4, 1), (-1, 6)), ((), (3, 2)), ((1, 3), (0, 3))])
  def test_expand(self, src, dst):
    helper_test_op([src], lambda x: x.expand(dst))

  @pytest.mark.parametrize("order", [(1, 0, 2), (2, 0, 1), (2, 1, 0), (0, 1, 2), (-1, 0, 1)])
  def test_permute(self, order):
    helper_test_op([(2, 3, 4)], lambda x: x.permute(order))

  def test_permute_varargs(self):
    helper_test_op([(2, 3, 4)], lambda x: x.permute(1, 2, 0))

  @pytest.mark.parametrize("d0,d1", [(0, 1), (1, 2), (-1, 0), (2, 2)])
  def test_transpose(self, d0, d1):
    helper_test_op([(2, 3, 4)], lambda x: x.transpose(d0, d1))

  def test_T(self):
    helper_test_op([(3, 5)], lambda x: x.T)
    helper_test_op([(7,)], lambda x: x.T)

  @pytest.mark.parametrize("axis", [0, 1, -1, (0, 2), (0, 1, 2), ()])
  def test_flip(self, axis):
    helper_test_op([(2, 3, 4)], lambda x: x.flip(axis))

  def test_flip_twice(self):
    helper_test_op([(5, 6)], lambda x: x.flip(0).flip(1).flip(0))

  @pytest.mark.parametrize("pad", [(1, 2), (0, 0, 2, 1), (1, 1, 1, 1), (3, 0, 0, 2, 1, 1), (-1, 2), (0, -2, 1, 0)])
  def test_pad(self, pad):
    helper_test_op([(3, 4, 5)], lambda x: F.pad(x, pad), lambda x: x.pad(pad))

  def test_pad_value(self):
    helper_test_op([(3, 4)], lambda x: F.pad(x, (1, 2, 0, 1), value=-3.5), lambda x: x.pad((1, 2, 0, 1), value=-3.5))
    helper_test_op([(3, 4)], lambda x: F.pad(x, (1, 1), value=7), lambda x: x.pad((1, 1), value=7), dtype=i32, low=-10, high=10)

  def test_pad_pairs(self):
    helper_test_op([(3, 4)], lambda x: F.pad(x, (2, 0, 1, 3)), lambda x: x.pad(((1, 3), (2, 0))))
    helper_test_op([(3, 4)], lambda x: F.pad(x, (1, 1)), lambda x: x.pad((None, (1, 1))))

  def test_pad_then_reduce(self):
    helper_test_op([(4, 4)], lambda x: F.pad(x, (1, 1, 1, 1), value=-INF).amax(1), lambda x: x.pad((1, 1, 1, 1), value=-INF).max(1), forward_only=True)

  @pytest.mark.parametrize("arg", [((1, 3), (0, 4)), ((0, 1), (2, 3)), ((0, 0), (0, 4)), (None, (1, 4)), ((2, 4), None)])
  def test_shrink(self, arg):
    sl = tuple(slice(*a) if a is not None else slice(None) for a in arg)
    helper_test_op([(4, 4)], lambda x: x[sl], lambda x: x.shrink(arg))

  @pytest.mark.parametrize("sizes,dim", [(2, 0), (3, 1), ([1, 4, 2], 1), ([5, 0, 2], -1), (7, 1), (10, 0)])
  def test_split(self, sizes, dim):
    helper_test_op([(4, 7)], lambda x: x.split(sizes, dim))

  @pytest.mark.parametrize("chunks,dim", [(2, 0), (3, 1), (4, 1), (7, 1), (8, 1), (1, 0)])
  def test_chunk(self, chunks, dim):
    helper_test_op([(4, 7)], lambda x: x.chunk(chunks, dim))

  @pytest.mark.parametrize("shape,dim", [((1, 3, 1), None), ((1, 3, 1), 0), ((1, 3, 1), -1), ((1, 3, 1), 1), ((1,), None), ((), None), ((2, 1, 1, 3), (1, 2))])
  def test_squeeze(self, shape, dim):
    helper_test_op([shape], (lambda x: x.squeeze()) if dim is None else (lambda x: x.squeeze(dim)))

  @pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
  def test_unsqueeze(self, dim):
    helper_test_op([(2, 3)], lambda x: x.unsqueeze(dim))

  def test_unsqueeze_scalar(self):
    helper_test_op([()], lambda x: x.unsqueeze(0))

  @pytest.mark.parametrize("start,end", [(0, -1), (1, -1), (0, 1), (1, 2), (-2, -1), (2, 2)])
  def test_flatten(self, start, end):
    helper_test_op([(2, 3, 4)], lambda x: x.flatten(start, end))

  def test_flatten_scalar(self):
    helper_test_op([()], lambda x: x.flatten())

  @pytest.mark.parametrize("shape,reps", [((3,), (2,)), ((2, 3), (2, 2)), ((2, 3), (1, 3)), ((2,), (3, 2)), ((2, 1), (2, 2, 3)), ((2, 3), (0, 1))])
  def test_repeat(self, shape, reps):
    helper_test_op([shape], lambda x: x.repeat(reps))

  def test_int_and_bool_movement(self):
    helper_test_op([(3, 4)], lambda x: x.T.flip(0).reshape(2, 6), dtype=i64, low=-2**40, high=2**40)
    helper_test_op([(3, 4)], lambda x: F.pad(x.permute(1, 0), (1, 1)), lambda x: x.permute(1, 0).pad((1, 1)), dtype=dtypes.bool)
    helper_test_op([(3, 4)], lambda x: x.expand(2, 3, 4).flip(2), dtype=f16)

class TestCatStack:
  @pytest.mark.parametrize("dim", [0, 1, -1, 2, -3])
  def test_cat(self, dim):
    shapes = [tuple(3 if i == dim % 3 else 2 for i in range(3)), tuple(1 if i == dim % 3 else 2 for i in range(3))]
    helper_test_op(shapes, lambda a, b: torch.cat([a, b], dim), lambda a, b: a.cat(b, dim=dim))

  def test_cat_three(self):
    helper_test_op([(2, 3), (4, 3), (1, 3)], lambda a, b, c: torch.cat([a, b, c]), lambda a, b, c: Tensor.cat(a, b, c))

  def test_cat_empty_piece(self):
    helper_test_op([(2, 3), (0, 3)], lambda a, b: torch.cat([a, b]), lambda a, b: a.cat(b))

  def test_cat_int(self):
    helper_test_op([(2, 3), (2, 3)], lambda a, b: torch.cat([a, b], 1), lambda a, b: a.cat(b, dim=1), dtype=i32, low=-100, high=100)

  def test_cat_mixed_dtype(self):
    helper_test_op([(2, 3), (2, 3)], lambda a, b: torch.cat([a, b]), lambda a, b: a.cat(b), dtype=[i32, f32])

  def test_cat_noncontiguous(self):
    helper_test_op([(3, 2), (2, 3)], lambda a, b: torch.cat([a.T, b.flip(1)]), lambda a, b: a.T.cat(b.flip(1)))

  @pytest.mark.parametrize("dim", [0, 1, 2, -1])
  def test_stack(self, dim):
    helper_test_op([(2, 3), (2, 3), (2, 3)], lambda a, b, c: torch.stack([a, b, c], dim), lambda a, b, c: a.stack(b, c, dim=dim))

  def test_stack_scalars(self):
    helper_test_op([(), ()], lambda a, b: torch.stack([a, b]), lambda a, b: Tensor.stack(a, b))

class TestGetitem:
  @pytest.mark.parametrize("idx", [
    0, -1, 3, (1, 2), (-1, -1, -1), slice(None), slice(1, 3), slice(-3, None), slice(None, None, 2), slice(None, None, -1),
    slice(3, 0, -2), slice(None, None, 3), slice(1, None, 4), slice(10, 20), slice(-100, 100), slice(3, 1),
    (slice(None), 1), (Ellipsis, 0), (0, Ellipsis), (None, 1), (None, Ellipsis, None), (1, None, slice(None, None, -2)),
    (slice(None, None, -1), slice(None, None, -1), slice(None, None, -1)), (slice(4, None, -3), slice(None), 2),
    (Ellipsis,), (slice(1, 2), slice(1, 2), slice(1, 2)), (0, 0, 0), (slice(None, None, 5), slice(None, None, 2), slice(None, None, -4)),
  ], ids=repr)
  def test_basic(self, idx):
    helper_test_op([(5, 4, 6)], lambda x: torch_getitem(x, idx), lambda x: x[idx])

  def test_numpy_int_index(self):
    helper_test_op([(5, 4)], lambda x: x[np.int64(2)])

  def test_chained(self):
    helper_test_op([(6, 8)], lambda x: torch_getitem(x[1:], (slice(None), slice(None, None, -1)))[::2, 1:-1:3], lambda x: x[1:][:, ::-1][::2, 1:-1:3])

  def test_on_transposed(self):
    helper_test_op([(6, 8)], lambda x: torch_getitem(x.T, (slice(None, None, -3), 1)), lambda x: x.T[::-3, 1])

  def test_then_compute(self):
    helper_test_op([(6, 8)], lambda x: x[::2] * x[1::2])

  def test_scalar_tensor(self):
    helper_test_op([()], lambda x: x[None])
    helper_test_op([()], lambda x: x[...])

  def test_int_dtype(self):
    helper_test_op([(5, 5)], lambda x: torch_getitem(x, (slice(None, None, -2), slice(1, 4))), lambda x: x[::-2, 1:4], dtype=u8, low=0, high=255)

  @pytest.mark.parametrize("idx", [5, -6, (0, 0, 0, 0)], ids=repr)
  def test_out_of_range(self, idx):
    with pytest.raises(Exception): Tensor.ones(5, 4, 6)[idx].realize()

# ======================================================================== matmul

class TestMatmul:
  @pytest.mark.parametrize("sa,sb", [((7,), (7,)), ((3, 7), (7,)), ((7,), (7, 4)), ((3, 7), (7, 4)), ((1, 1), (1, 1)), ((64, 64), (64, 64)),
                                     ((2, 3, 5), (2, 5, 4)), ((2, 3, 5), (5, 4)), ((5,), (2, 5, 3)), ((2, 1, 3, 4), (5, 4, 6)), ((2, 3, 4), (4,)),
                                     ((3, 1), (1, 5)), ((33, 17), (17, 9))])
  def test_matmul(self, sa, sb):
    helper_test_op([sa, sb], lambda a, b: a @ b, atol=1e-5, rtol=1e-5)

  def test_matmul_method_and_dot(self):
    helper_test_op([(3, 4), (4, 5)], lambda a, b: a.matmul(b), atol=1e-5)
    helper_test_op([(6,), (6,)], lambda a, b: a.dot(b), atol=1e-5)
    helper_test_op([(3, 4), (4, 5)], lambda a, b: a.matmul(b), lambda a, b: a.dot(b), atol=1e-5)

  def test_zero_inner(self):
    helper_test_op([(3, 0), (0, 4)], lambda a, b: a @ b)

  def test_zero_outer(self):
    helper_test_op([(0, 3), (3, 4)], lambda a, b: a @ b)

  def test_noncontiguous(self):
    helper_test_op([(5, 3), (4, 5)], lambda a, b: a.T @ b.T, atol=1e-5)
    helper_test_op([(8, 6), (6, 8)], lambda a, b: a[::2].flip(1) @ b[:, 1::2], lambda a, b: a[::2, ::-1] @ b[:, 1::2], atol=1e-5)
    helper_test_op([(4,), (4,)], lambda a, b: a.reshape(4, 1) @ b.reshape(1, 4))

  @pytest.mark.parametrize("dt", [i32, i64, i8])
  def test_int(self, dt):
    helper_test_op([(3, 4), (4, 5)], lambda a, b: a @ b, dtype=dt, low=-10, high=10)

  def test_float16(self):
    helper_test_op([(8, 16), (16, 8)], lambda a, b: a @ b, dtype=f16, atol=1e-2, rtol=1e-2)

  def test_bfloat16(self):
    helper_test_op([(8, 16), (16, 8)], lambda a, b: a @ b, dtype=bf16, atol=5e-2, rtol=5e-2)

  def test_float64(self):
    helper_test_op([(8, 16), (16, 8)], lambda a, b: a @ b, dtype=f64, atol=1e-12)

  def test_mixed_dtype(self):
    helper_test_op([(3, 4), (4, 5)], lambda a, b: a.float() @ b, lambda a, b: a @ b, dtype=[f16, f32], atol=1e-3)

  def test_chain_with_elementwise(self):
    helper_test_op([(4, 8), (8, 8), (8,)], lambda x, w, b: ((x @ w) + b).relu() @ w.T, atol=1e-5)

# ======================================================================== softmax family

class TestSoftmax:
  @pytest.mark.parametrize("axis", [-1, 0, 1])
  def test_softmax(self, axis):
    helper_test_op([(6, 7)], lambda x: x.softmax(axis), atol=1e-7)

  @pytest.mark.parametrize("axis", [-1, 0])
  def test_log_softmax(self, axis):
    helper_test_op([(6, 7)], lambda x: x.log_softmax(axis), atol=1e-6)

  def test_softmax_3d(self):
    helper_test_op([(2, 3, 5)], lambda x: x.softmax(1))
    helper_test_op([(2, 3, 5)], lambda x: x.log_softmax(-1))

  def test_softmax_large_values(self):
    helper_test_op([(4, 8)], lambda x: x.softmax(-1), low=-1000, high=1000, forward_only=True)
    helper_test_op([(4, 8)], lambda x: x.log_softmax(-1), low=-1000, high=1000, atol=1e-4, forward_only=True)

  def test_softmax_inf(self):
    helper_test_op(None, lambda x: x.softmax(-1), vals=[[[-INF, 0., 1.], [-INF, -INF, 2.]]], forward_only=True)

  def test_softmax_int_input(self):
    helper_test_op([(3, 4)], lambda x: x.float().softmax(-1), lambda x: x.softmax(-1), dtype=i32, low=-5, high=5, forward_only=True)

  def test_softmax_half(self):
    helper_test_op([(4, 8)], lambda x: x.softmax(-1), dtype=f16, **HALF_TOL)

  def test_softmax_dtype_arg(self):
    helper_test_op([(4, 8)], lambda x: x.softmax(-1, dtype=torch.float64), lambda x: x.softmax(-1, dtype=dtypes.float64), dtype=f32)

  @pytest.mark.parametrize("axis,keepdim", [(None, False), (0, False), (1, False), (-1, True), ((0, 1), False)])
  def test_logsumexp(self, axis, keepdim):
    helper_test_op([(5, 6)], lambda x: x.logsumexp(axis if axis is not None else (0, 1), keepdim=keepdim), lambda x: x.logsumexp(axis, keepdim=keepdim), atol=1e-6)

  def test_logsumexp_extreme(self):
    helper_test_op(None, lambda x: x.logsumexp(1), vals=[[[1000., 1000.], [-1000., -1000.], [-INF, -INF], [INF, 1.]]], forward_only=True)

# ======================================================================== casting

CAST_VALS = [0.0, 1.0, -1.0, 2.7, -2.7, 0.5, -0.5, 100.25, -100.25, 127.0]

class TestCast:
  @pytest.mark.parametrize("dst", [dtypes.bool, i8, i16, i32, i64, f16, bf16, f64])
  def test_from_float32(self, dst):
    helper_test_op(None, lambda x: x.to(FG2TORCH[dst]), lambda x: x.cast(dst), vals=[CAST_VALS], forward_only=True)

  @pytest.mark.parametrize("dst", [dtypes.bool, i8, u8, i16, i64, f16, bf16, f32, f64])
  def test_from_int32(self, dst):
    helper_test_op(None, lambda x: x.to(FG2TORCH[dst]), lambda x: x.cast(dst), vals=[[0, 1, -1, 127, 128, 255, 256, -129, 70000, -70000]], dtype=i32)

  @pytest.mark.parametrize("dst", [i8, u8, i32, f16, f32])
  def test_from_bool(self, dst):
    helper_test_op(None, lambda x: x.to(FG2TORCH[dst]), lambda x: x.cast(dst), vals=[[True, False, True]], dtype=dtypes.bool)

  @pytest.mark.parametrize("src", [u8, i8, f16, bf16, f64, i64])
  def test_to_float32(self, src):
    helper_test_op(None, lambda x: x.float(), vals=[[0, 1, 3, 100, 127]], dtype=src)

  def test_float_to_uint8(self):
    helper_test_op(None, lambda x: x.to(torch.uint8), lambda x: x.cast(u8), vals=[[0., 1.9, 100.5, 255.]], forward_only=True)

  def test_float32_to_half_rounding(self):
    helper_test_op(None, lambda x: x.half(), vals=[[1.0004883, 65504., 70000., 1e-8, -3.3333333, 6.1e-5]], forward_only=True)

  def test_float32_to_bf16_rounding(self):
    helper_test_op(None, lambda x: x.bfloat16(), vals=[[1.00390625, 1.01171875, 3.3333333, 1e30, -1e-30]], forward_only=True)

  def test_nan_inf_to_half(self):
    helper_test_op(None, lambda x: x.half(), vals=[[NAN, INF, -INF]], forward_only=True)
    helper_test_op(None, lambda x: x.bool(), vals=[[NAN, INF, -0.0]], forward_only=True)

  def test_int64_to_int32_wraps(self):
    helper_test_op(None, lambda x: x.int(), vals=[[2**32 + 5, -2**31 - 1, 2**40]], dtype=i64)

  def test_cast_methods(self):
    for m in ["float", "half", "double", "int", "long", "short", "char", "byte", "bool", "bfloat16"]:
      helper_test_op(None, lambda x: getattr(x, m)(), vals=[[1.5, -2.0, 0.0]], forward_only=True)

  def test_cast_noncontiguous(self):
    helper_test_op([(4, 5)], lambda x: x.T.half(), forward_only=True, **HALF_TOL)
    helper_test_op([(4, 5)], lambda x: x.flip(0)[:, ::2].to(torch.int32), lambda x: x[::-1, ::2].cast(i32), low=-50, high=50, forward_only=True)

  def test_cast_then_compute(self):
    helper_test_op([(8,)], lambda x: x.to(torch.int8) * 3, lambda x: x.cast(i8) * 3, low=-60, high=60, forward_only=True)

  def test_cast_by_name(self):
    assert Tensor([1.5]).cast("float16").dtype == dtypes.float16
    assert Tensor([1.5]).cast(torch.int32).dtype == dtypes.int32

  def test_bad_dtype_raises(self):
    with pytest.raises(Exception, match="complex"): Tensor([1.0]).cast("complex64")
    with pytest.raises(Exception): Tensor.zeros(3, dtype="notadtype")

class TestBitcast:
  @pytest.mark.parametrize("src,dst", [(f32, i32), (i32, f32), (f32, dtypes.uint32), (f16, i16), (i16, f16), (f16, dtypes.uint16), (bf16, i16),
                                       (f64, i64), (i64, f64), (i8, u8), (u8, i8), (i16, dtypes.uint16)])
  def test_bitcast(self, src, dst):
    helper_test_op(None, lambda x: x.view(FG2TORCH[dst]), lambda x: x.bitcast(dst), vals=[[0, 1, -1, 3, 100, -100] if dtypes.is_int(src) and not dtypes.is_unsigned(src) else [0, 1, 2, 3, 100, 200]], dtype=src, forward_only=True)

  def test_bitcast_special_floats(self):
    helper_test_op(None, lambda x: x.view(torch.int32), lambda x: x.bitcast(i32), vals=[[INF, -INF, -0.0, 1e-45]], forward_only=True)

  def test_bitcast_noncontiguous(self):
    helper_test_op([(4, 6)], lambda x: x.T.view(torch.int32), lambda x: x.T.bitcast(i32), forward_only=True)

  def test_bitcast_size_mismatch_raises(self):
    # a size-changing bitcast works on the last dim (as torch's view(dtype)) when that dim holds whole elements
    assert Tensor([1.0]).bitcast(dtypes.float16).shape == (2,)
    with pytest.raises(ValueError): Tensor([1, 2, 3], dtype=dtypes.uint8).bitcast(dtypes.float16)

# ======================================================================== data out and properties

class TestDataOut:
  def test_properties(self):
    t = Tensor.ones(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.dtype == dtypes.float32 and t.ndim == 3 and t.numel() == 24
    assert t.device == Device.DEFAULT
    assert Tensor(1.0).ndim == 0 and Tensor(1.0).numel() == 1 and Tensor.ones(3, 0).numel() == 0
    assert len(Tensor.ones(5, 2)) == 5

  def test_device_string(self):
    assert Tensor([1], device="CPU").device == "CPU"
    assert Tensor([1], device="cpu").device == "CPU"

  def test_realize_returns_self(self):
    t = Tensor([1.0, 2.0]) + 1
    assert t.realize() is t
    assert t.tolist() == [2.0, 3.0]
    assert (t * 2).realize().tolist() == [4.0, 6.0]

  def test_realize_twice(self):
    t = Tensor.arange(6).reshape(2, 3) * 2
    t.realize(); t.realize()
    assert t.tolist() == [[0, 2, 4], [6, 8, 10]]

  def test_realize_multiple(self):
    a, b = Tensor([1, 2]) + 1, Tensor([3]) * 2
    a.realize(b)
    assert a.tolist() == [2, 3] and b.tolist() == [6]

  @pytest.mark.parametrize("dt", [dtypes.bool, i8, u8, i32, i64, f16, bf16, f32, f64])
  def test_numpy(self, dt):
    t = Tensor([[1, 0, 3], [4, 5, 6]], dtype=dt)
    a = t.numpy()
    assert a.shape == (2, 3) and a.dtype == (np.float32 if dt == bf16 else FG2NP[dt])
    np.testing.assert_array_equal(a, np.array([[1, 0, 3], [4, 5, 6]]).astype(a.dtype))

  def test_numpy_of_view(self):
    np.testing.assert_array_equal(Tensor.arange(6).reshape(2, 3).T.numpy(), np.arange(6).reshape(2, 3).T)
    np.testing.assert_array_equal(Tensor.arange(6)[::-2].numpy(), np.arange(6)[::-2])

  def test_numpy_writable_copy(self):
    t = Tensor([1.0, 2.0]).realize()
    a = t.numpy(); a[0] = 100
    assert t.tolist() == [1.0, 2.0]

  @pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 0), (1, 1, 2)])
  def test_tolist(self, shape):
    ref = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
    assert Tensor(ref.numpy()).tolist() == ref.tolist()

  def test_tolist_types(self):
    assert Tensor([True, False]).tolist() == [True, False] and isinstance(Tensor([True]).tolist()[0], bool)
    assert isinstance(Tensor([3]).tolist()[0], int) and isinstance(Tensor([3.0]).tolist()[0], float)
    assert Tensor([1.5], dtype=dtypes.bfloat16).tolist() == [1.5]

  @pytest.mark.parametrize("val,dt,typ", [(3, i32, int), (2.5, f32, float), (True, dtypes.bool, bool), (-7, i8, int), (0.5, f16, float), (2**40, i64, int)])
  def test_item(self, val, dt, typ):
    it = Tensor([[val]], dtype=dt).item()
    assert it == val and type(it) is typ

  def test_item_after_compute(self):
    assert Tensor([1.0, 2.0, 3.0]).sum().item() == 6.0
    assert (Tensor.arange(10).max() == 9).item() is True

  def test_item_raises(self):
    with pytest.raises(Exception, match=r"\(2,\)|2"): Tensor([1, 2]).item()

  def test_data(self):
    d = Tensor([[1.0, 2.0], [3.0, 4.0]]).data()
    assert isinstance(d, memoryview) and d.shape == (2, 2) and d.tolist() == [[1.0, 2.0], [3.0, 4.0]] and d.format == "f"
    assert Tensor([1, 2, 3], dtype=dtypes.int16).data().tolist() == [1, 2, 3]
    assert Tensor.arange(6).reshape(2, 3).T.data().tolist() == [[0, 3], [1, 4], [2, 5]]

  def test_bool_of_tensor(self):
    assert bool(Tensor([1.0])) is True and bool(Tensor(0)) is False
    with pytest.raises(Exception): bool(Tensor([1, 2]))

  def test_iter(self):
    assert [t.tolist() for t in Tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]

  def test_clone_contiguous_detach(self):
    helper_test_op([(3, 4)], lambda x: x.T.contiguous())
    helper_test_op([(3, 4)], lambda x: x.clone() * 2)
    helper_test_op([(3, 4)], lambda x: x.detach() + 1, forward_only=True)

  def test_backward_after_item(self):
    # the common torch pattern `print(loss.item()); loss.backward()`: reading a value must not cut the graph
    x, tx = Tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0], requires_grad=True)
    y, ty = (x * x).sum(), (tx * tx).sum()
    assert y.item() == ty.item()
    y.backward(); ty.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())

  def test_backward_after_item_with_requires_grad_set_as_an_attribute(self):
    # tinygrad programs write `w.requires_grad = True`; realize keeps the graph to every live tensor that requires a
    # gradient (tracked as the attribute is set, not by walking every live tensor), and drops it once none does
    from fusegrad import buffers
    from fusegrad.tensor import tensor as tensor_mod
    w = Tensor([1.0, 2.0])
    w.requires_grad = True
    y = (w * w).sum()
    assert y.item() == 5.0
    y.backward()
    assert w.grad.tolist() == [2.0, 4.0]
    w.requires_grad = False
    z = (w * 3).sum()
    z.realize()
    assert buffers.buffer_view(z.uop) is not None  # no tensor of its graph needs a gradient: z is its buffer now
    before = len(tensor_mod._grad_tensors)
    leaves = [Tensor([float(i)], requires_grad=True) for i in range(50)]
    assert len(tensor_mod._grad_tensors) == before + 50
    del leaves
    assert len(tensor_mod._grad_tensors) == before

  def test_pickle_and_deepcopy_carry_the_values(self):
    # the graph's nodes used to be pickled without their buffers' data: the copy crashed when read
    import copy, pickle
    from fusegrad import nn
    for t in [Tensor([[1.0, 2.0], [3.0, 4.0]]) * 2, Tensor.arange(6, dtype=dtypes.int8).reshape(2, 3).permute(1, 0), Tensor(3.5),
              Tensor.empty(0, 3), Tensor([1.5, -2.0], dtype=dtypes.float16), Tensor([True, False])]:
      for u in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert (u.shape, u.dtype, u.device, u.tolist()) == (t.shape, t.dtype, t.device, t.tolist())
    u = pickle.loads(pickle.dumps(Tensor([1.0, 2.0], requires_grad=True)))
    y = (u * u).sum()
    assert y.item() == 5.0
    y.backward()
    assert u.requires_grad and u.grad.tolist() == [2.0, 4.0]
    layer = nn.Linear(2, 2)
    twin = copy.deepcopy(layer)  # a copy of a model is independent of it
    assert twin.weight.tolist() == layer.weight.tolist()
    twin.weight.assign(Tensor.zeros(2, 2)).realize()
    assert layer.weight.abs().sum().item() > 0

  def test_to_same_device(self):
    t = Tensor([1, 2])
    assert t.to(t.device) is t

  def test_to_python_device(self):
    t = (Tensor([1.0, 2.0]) * 3).to("PYTHON")
    assert t.device == "PYTHON" and t.tolist() == [3.0, 6.0]
    assert (t + 1).to("CPU").tolist() == [4.0, 7.0]

# ======================================================================== errors

class TestErrors:
  def test_broadcast_mismatch(self):
    with pytest.raises(Exception, match=r"\(3, ?4\)[\s\S]*\(5,?\)|\(5,?\)[\s\S]*\(3, ?4\)"): Tensor.ones(3, 4) + Tensor.ones(5)

  def test_broadcast_mismatch_where(self):
    with pytest.raises(Exception): Tensor.ones(3, dtype=dtypes.bool).where(Tensor.ones(4), Tensor.ones(3))

  @pytest.mark.parametrize("sa,sb", [((3, 4), (5, 6)), ((4,), (5,)), ((2, 3, 4), (3, 4, 5)), ((3, 4), (3,))])
  def test_matmul_mismatch(self, sa, sb):
    with pytest.raises(Exception, match=r"\(|shape"): Tensor.ones(*sa) @ Tensor.ones(*sb)

  def test_matmul_batch_mismatch(self):
    with pytest.raises(Exception): Tensor.ones(2, 3, 4) @ Tensor.ones(3, 4, 5)

  def test_matmul_scalar(self):
    with pytest.raises(Exception): Tensor(2.0) @ Tensor.ones(3)

  @pytest.mark.parametrize("shape", [(5, 5), (-1, 7), (-1, -1), (2, -2), (0, -1)])
  def test_reshape_bad(self, shape):
    with pytest.raises(Exception, match=r"\(4, ?6\)|-1|size|dimension"): Tensor.ones(4, 6).reshape(shape)

  @pytest.mark.parametrize("fn", [lambda t: t.sum(3), lambda t: t.sum(-4), lambda t: t.max(5), lambda t: t.mean((0, 0)), lambda t: t.argmax(3),
                                  lambda t: t.softmax(3), lambda t: t.transpose(0, 3), lambda t: t.flip(3), lambda t: t.unsqueeze(5),
                                  lambda t: t.squeeze(4), lambda t: t.permute(0, 1), lambda t: t.permute(0, 0, 1), lambda t: t.cat(t, dim=3),
                                  lambda t: t.split(2, dim=3), lambda t: t.flatten(4)],
                           ids=["sum", "sum_neg", "max", "dup_axis", "argmax", "softmax", "transpose", "flip", "unsqueeze", "squeeze",
                                "permute_short", "permute_dup", "cat", "split", "flatten"])
  def test_bad_axis(self, fn):
    with pytest.raises(Exception): fn(Tensor.ones(2, 3, 4))

  def test_bad_axis_message(self):
    with pytest.raises(Exception, match="3"): Tensor.ones(2, 3, 4).sum(3)

  def test_expand_bad(self):
    with pytest.raises(Exception, match=r"\(2, ?3\)|\(4, ?3\)"): Tensor.ones(2, 3).expand(4, 3)

  def test_cat_mismatch(self):
    with pytest.raises(Exception, match=r"\(2, ?3\)"): Tensor.ones(2, 3).cat(Tensor.ones(2, 4), dim=0)

  def test_stack_mismatch(self):
    with pytest.raises(Exception): Tensor.ones(2, 3).stack(Tensor.ones(3, 2))

  def test_split_bad_sizes(self):
    with pytest.raises(Exception): Tensor.ones(5).split([2, 2])

  def test_pad_bad(self):
    with pytest.raises(Exception): Tensor.ones(2, 3).pad((1, 1, 1))
    with pytest.raises(Exception): Tensor.ones(2, 3).pad((-4, 0))

  def test_bad_dtype(self):
    with pytest.raises(Exception): Tensor([1.0], dtype="float128")
    with pytest.raises(Exception): Tensor.ones(2, dtype="foo")
    with pytest.raises(Exception): Tensor.arange(3, dtype="int3")

  def test_bad_data(self):
    with pytest.raises(Exception): Tensor(["a", "b"])
    with pytest.raises(Exception): Tensor({1: 2})
    with pytest.raises(Exception): Tensor(np.array([object()]))

  def test_negative_shape(self):
    with pytest.raises(Exception, match="-2"): Tensor.zeros(3, -2)

  def test_bool_arith_raises(self):
    with pytest.raises(Exception): -Tensor([True])
    with pytest.raises(Exception): Tensor([True]) - Tensor([False])

  def test_max_empty_raises(self):
    with pytest.raises(Exception): Tensor.ones(0, 3).max(0)
    with pytest.raises(Exception): Tensor.ones(0).argmax()

  def test_slice_step_zero(self):
    with pytest.raises(Exception): Tensor.ones(4)[::0]

  def test_too_many_indices(self):
    with pytest.raises(Exception, match="2|too many"): Tensor.ones(2, 2)[0, 0, 0]

  def test_device_mismatch(self):
    with pytest.raises(Exception, match="PYTHON|CPU"): Tensor([1.0], device="CPU") + Tensor([1.0], device="PYTHON")

def test_cat_stack_accept_torch_style_sequences():
  a, b = Tensor([1.0, 2.0]), Tensor([3.0, 4.0])
  assert Tensor.cat([a, b]).tolist() == Tensor.cat(a, b).tolist() == [1.0, 2.0, 3.0, 4.0]
  assert Tensor.stack((a, b), 1).tolist() == Tensor.stack(a, b, dim=1).tolist() == [[1.0, 3.0], [2.0, 4.0]]
  with pytest.raises(ValueError): Tensor.cat([])
