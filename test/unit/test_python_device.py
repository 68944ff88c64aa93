"""The PYTHON device (a pure-Python interpreter of the kernel) gives the exact values C would."""
import math
import numpy as np
import pytest
from fusegrad import Tensor, Device, dtypes

A = [[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]]
B = [[0.5, 1.0, -1.5], [2.0, -0.5, 4.0]]
f32 = np.float32

def eq(t: Tensor, want, dtype=None):
  got = t.numpy()
  want = np.asarray(want, dtype=dtype if dtype is not None else got.dtype)
  assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
  np.testing.assert_array_equal(got, want)

def close(t: Tensor, want, tol=1e-6):
  np.testing.assert_allclose(t.numpy(), np.asarray(want, dtype=np.float32), rtol=tol, atol=tol)

def test_runs_on_python_device():
  assert Device.DEFAULT == "PYTHON"
  t = Tensor([1.0, 2.0]) + 1
  assert t.device == "PYTHON" and t.tolist() == [2.0, 3.0]

class TestElementwise:
  def test_float_arith_is_float32_exact(self):
    a, b = Tensor(A), Tensor(B)
    na, nb = np.array(A, f32), np.array(B, f32)
    eq(a + b, na + nb); eq(a - b, na - nb); eq(a * b, na * nb); eq(a / b, na / nb)
    eq(-a, -na); eq(a.abs(), np.abs(na)); eq(a.maximum(b), np.maximum(na, nb)); eq(a.minimum(b), np.minimum(na, nb))
    eq(a * 2 + 0.5, na * f32(2) + f32(0.5))

  def test_rounding_per_op(self):
    # every result is rounded to float32, as C does with float variables
    x = Tensor([0.1], dtype=dtypes.float32) + 0.2
    assert x.item() == float(f32(0.1) + f32(0.2))
    y = Tensor([1e8], dtype=dtypes.float32) + 1.0 - 1e8
    assert y.item() == 0.0

  def test_transcendentals(self):
    x = Tensor([0.25, 1.0, 2.0, 9.0])
    nx = np.array([0.25, 1.0, 2.0, 9.0], f32)
    close(x.exp(), np.exp(nx)); close(x.log(), np.log(nx)); close(x.sqrt(), np.sqrt(nx))
    close(x.sin(), np.sin(nx)); close(x.cos(), np.cos(nx)); close(x.exp2(), np.exp2(nx)); close(x.log2(), np.log2(nx))
    close(x.reciprocal(), 1 / nx); close(x.tanh(), np.tanh(nx)); close(x ** 1.5, nx ** 1.5, tol=1e-5)
    close(x.sigmoid(), 1 / (1 + np.exp(-nx)))

  def test_specials(self):
    assert (Tensor([1.0]) / 0).item() == math.inf and (Tensor([-1.0]) / 0).item() == -math.inf
    assert math.isnan((Tensor([0.0]) / 0).item())
    assert Tensor([0.0]).log().item() == -math.inf and math.isnan(Tensor([-1.0]).sqrt().item())
    assert Tensor([1000.0]).exp().item() == math.inf and Tensor([-1000.0]).exp().item() == 0.0
    assert math.isnan(Tensor([math.nan]).maximum(1.0).item())

  def test_int_arith_and_python_division(self):
    a = Tensor([7, -7, 7, -7, 0])
    b = Tensor([2, 2, -2, -2, 3])
    na, nb = np.array([7, -7, 7, -7, 0]), np.array([2, 2, -2, -2, 3])
    assert (a // b).tolist() == (na // nb).tolist()        # floor division, as torch and numpy
    assert (a % b).tolist() == (na % nb).tolist()          # remainder takes the divisor's sign
    assert a.div(b, rounding_mode="trunc").tolist() == [3, -3, -3, 3, 0]
    assert (a * b - 1).tolist() == (na * nb - 1).tolist()
    assert (a / b).dtype == dtypes.float32 and (a / b).tolist() == [3.5, -3.5, -3.5, 3.5, 0.0]

  def test_int_wraparound(self):
    assert (Tensor([2**31 - 1], dtype=dtypes.int32) + 1).tolist() == [-2**31]
    assert (Tensor([250], dtype=dtypes.uint8) + 10).tolist() == [4]
    assert (Tensor([100], dtype=dtypes.int8) * 2).tolist() == [-56]
    assert (Tensor([0], dtype=dtypes.uint32) - 1).tolist() == [2**32 - 1]

  def test_bitwise(self):
    a, b = Tensor([12, 10, -1]), Tensor([10, 6, 5])
    assert (a & b).tolist() == [8, 2, 5] and (a | b).tolist() == [14, 14, -1] and (a ^ b).tolist() == [6, 12, -6]
    assert (Tensor([1, 3]) << 2).tolist() == [4, 12] and (Tensor([16, -16]) >> 2).tolist() == [4, -4]
    assert (~Tensor([0, 5])).tolist() == [-1, -6]

  def test_comparisons_and_logic(self):
    a, b = Tensor(A), Tensor(B)
    na, nb = np.array(A, f32), np.array(B, f32)
    eq(a < b, na < nb); eq(a <= b, na <= nb); eq(a > b, na > nb); eq(a >= 0, na >= 0); eq(a == -2, na == -2); eq(a != 3, na != 3)
    eq((a > 0).logical_and(b > 0), (na > 0) & (nb > 0)); eq((a > 0) | (b > 0), (na > 0) | (nb > 0))
    eq((a > 0).logical_not(), ~(na > 0))
    nan = Tensor([math.nan, 1.0])
    assert (nan == nan).tolist() == [False, True] and (nan != nan).tolist() == [True, False]

  def test_where(self):
    a, b = Tensor(A), Tensor(B)
    na, nb = np.array(A, f32), np.array(B, f32)
    eq((a > 0).where(a, b), np.where(na > 0, na, nb))
    eq((a > 0).where(a, 0.0), np.where(na > 0, na, f32(0)))
    eq((a > 0).where(1.0, -1.0), np.where(na > 0, f32(1), f32(-1)))
    eq(Tensor([True, False]).reshape(2, 1).where(a, b), np.where(np.array([[True], [False]]), na, nb))  # broadcast condition
    eq(Tensor([1, 0, 2]).where(Tensor([1, 2, 3]), Tensor([4, 5, 6])), [1, 5, 3])  # non-bool condition

class TestCast:
  def test_float_to_int_truncates(self):
    assert Tensor([1.7, -1.7, 2.5, -0.5, 0.0]).cast(dtypes.int32).tolist() == [1, -1, 2, 0, 0]
    assert Tensor([1.7, -1.7]).cast(dtypes.int64).tolist() == [1, -1]

  def test_int_narrowing_wraps(self):
    assert Tensor([300, -129, 255]).cast(dtypes.int8).tolist() == [44, 127, -1]
    assert Tensor([300, 256, -1]).cast(dtypes.uint8).tolist() == [44, 0, 255]
    assert Tensor([2**40 + 5], dtype=dtypes.int64).cast(dtypes.int32).tolist() == [5]

  def test_to_and_from_bool(self):
    assert Tensor([0.0, 0.5, -2.0]).cast(dtypes.bool).tolist() == [False, True, True]
    assert Tensor([0, 3, -1]).cast(dtypes.bool).tolist() == [False, True, True]
    assert Tensor([True, False]).cast(dtypes.float32).tolist() == [1.0, 0.0]
    assert Tensor([True, False]).cast(dtypes.int32).tolist() == [1, 0]

  def test_int_to_float(self):
    assert Tensor([3, -4]).cast(dtypes.float32).tolist() == [3.0, -4.0]
    assert Tensor([2**24 + 1]).cast(dtypes.float32).tolist() == [float(f32(2**24 + 1))]
    assert Tensor([2**24 + 1]).cast(dtypes.float64).tolist() == [float(2**24 + 1)]

  def test_half_rounding_fused(self):
    h = Tensor([0.1, 65504.0, 1e5]).cast(dtypes.float16)
    assert h.dtype == dtypes.float16
    with np.errstate(over="ignore"):
      assert h.float().tolist() == [float(np.float16(v)) for v in (0.1, 65504.0, 1e5)]

  def test_half_buffers(self):
    # a float16 buffer read and written by a kernel, and read back with tolist()
    x = Tensor([1.0, 2.0], dtype=dtypes.float16)
    assert x.tolist() == [1.0, 2.0]
    assert (x / 3).tolist() == [float(np.float16(1) / np.float16(3)), float(np.float16(2) / np.float16(3))]
    assert Tensor([0.1, 3.0]).half().numpy().tolist() == [float(np.float16(0.1)), 3.0]

  def test_bfloat16(self):
    bf = Tensor([1.0, 3.14159, -2.5]).cast(dtypes.bfloat16)
    assert bf.float().tolist() == [1.0, 3.140625, -2.5]
    assert (bf * 2).float().tolist() == [2.0, 6.28125, -5.0]

  def test_bitcast(self):
    assert Tensor([1.0, -2.0]).bitcast(dtypes.int32).tolist() == [0x3f800000, -0x40000000]
    assert Tensor([0x3f800000]).bitcast(dtypes.float32).tolist() == [1.0]
    assert Tensor([-1], dtype=dtypes.int16).bitcast(dtypes.uint16).tolist() == [65535]

class TestReduce:
  def test_sum(self):
    a, na = Tensor(A), np.array(A, f32)
    eq(a.sum(), na.sum()); eq(a.sum(0), na.sum(0)); eq(a.sum(1), na.sum(1)); eq(a.sum(1, keepdim=True), na.sum(1, keepdims=True))
    eq(a.sum((0, 1)), na.sum()); eq(a.sum(-1), na.sum(-1))

  def test_max_min_prod_mean(self):
    a, na = Tensor(A), np.array(A, f32)
    eq(a.max(), na.max()); eq(a.max(0), na.max(0)); eq(a.min(1), na.min(1)); eq(a.prod(1), na.prod(1))
    eq(a.mean(0), na.mean(0)); close(a.mean(), na.mean())
    i = Tensor([[3, -7, 2], [0, 9, -1]])
    assert i.max(1).tolist() == [3, 9] and i.min().item() == -7 and i.sum().item() == 6 and i.sum().dtype == dtypes.int32

  def test_argmax_argmin(self):
    a = Tensor([[1.0, 5.0, 5.0], [-1.0, -3.0, -3.0]])
    assert a.argmax(1).tolist() == [1, 0] and a.argmin(1).tolist() == [0, 1] and a.argmax().item() == 1

  def test_bool_reduce(self):
    b = Tensor([[True, False], [True, True]])
    assert b.sum().item() == 3 and b.any(1).tolist() == [True, True] and b.all(1).tolist() == [False, True]

  def test_empty_reduce_gives_identity(self):
    assert Tensor.zeros(0).sum().item() == 0.0
    assert Tensor.zeros(2, 0).sum(1).tolist() == [0.0, 0.0]
    assert Tensor.ones(0).prod().item() == 1.0

  def test_softmax_and_var(self):
    a, na = Tensor(A), np.array(A, np.float64)
    e = np.exp(na - na.max(1, keepdims=True))
    close(a.softmax(1), e / e.sum(1, keepdims=True))
    close(a.var(), na.var(ddof=1), tol=1e-5)
    close(a.log_softmax(1), np.log(e / e.sum(1, keepdims=True)), tol=1e-5)

class TestMatmul:
  def test_small_matmul_exact(self):
    a = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = Tensor([[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]])
    assert (a @ b).tolist() == [[58.0, 64.0], [139.0, 154.0]]
    assert (b @ a).tolist() == [[39.0, 54.0, 69.0], [49.0, 68.0, 87.0], [59.0, 82.0, 105.0]]

  def test_vector_forms(self):
    a = Tensor([[1.0, 2.0], [3.0, 4.0]])
    v = Tensor([5.0, 6.0])
    assert (a @ v).tolist() == [17.0, 39.0] and (v @ a).tolist() == [23.0, 34.0]

  def test_vector_dot_vector(self):
    v = Tensor([5.0, 6.0])
    assert (v @ v).item() == 61.0 and v.dot(Tensor([1.0, -1.0])).tolist() == -1.0

  def test_int_matmul(self):
    a = Tensor([[1, 2], [3, 4]])
    assert (a @ a).tolist() == [[7, 10], [15, 22]] and (a @ a).dtype == dtypes.int32

  def test_random_matmul_vs_numpy(self):
    rs = np.random.RandomState(0)
    x, y = rs.randn(3, 5).astype(f32), rs.randn(5, 4).astype(f32)
    close(Tensor(x) @ Tensor(y), x @ y, tol=1e-5)
    bx, by = rs.randn(2, 3, 4).astype(f32), rs.randn(4, 2).astype(f32)
    close(Tensor(bx) @ Tensor(by), bx @ by, tol=1e-5)

  def test_linear(self):
    x, w, bias = Tensor([[1.0, 2.0]]), Tensor([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]]), Tensor([0.5, 0.5, 0.5])
    assert x.linear(w, bias).tolist() == [[5.5, 2.5, -0.5]]

class TestMovementValues:
  def test_movement(self):
    a, na = Tensor(A), np.array(A, f32)
    eq(a.T, na.T); eq(a.reshape(3, 2), na.reshape(3, 2)); eq(a.flip(1), na[:, ::-1]); eq(a.flip((0, 1)), na[::-1, ::-1])
    eq(a.pad(((1, 0), (2, 1))), np.pad(na, ((1, 0), (2, 1)))); eq(a.shrink(((1, 2), (0, 2))), na[1:2, 0:2])
    eq(a.reshape(2, 1, 3).expand(2, 2, 3), np.broadcast_to(na.reshape(2, 1, 3), (2, 2, 3)))
    eq(a.pad(((0, 0), (1, 1)), value=7.0), np.pad(na, ((0, 0), (1, 1)), constant_values=7))
    eq(a.permute(1, 0).reshape(6), na.T.reshape(6))

  def test_getitem(self):
    x = Tensor.arange(24).reshape(2, 3, 4)
    nx = np.arange(24).reshape(2, 3, 4)
    assert x[1].tolist() == nx[1].tolist() and x[:, 1:, ::2].tolist() == nx[:, 1:, ::2].tolist()
    assert x[..., -1].tolist() == nx[..., -1].tolist() and x[::-1, :, 1].tolist() == nx[::-1, :, 1].tolist()
    assert x[0, None, 2].tolist() == nx[0, None, 2].tolist() and x[1, 2, 3].item() == 23

  def test_cat_stack_creation(self):
    a, b = Tensor([[1, 2]]), Tensor([[3, 4]])
    assert a.cat(b).tolist() == [[1, 2], [3, 4]] and a.cat(b, dim=1).tolist() == [[1, 2, 3, 4]]
    assert Tensor.stack(Tensor([1, 2]), Tensor([3, 4]), dim=1).tolist() == [[1, 3], [2, 4]]
    assert Tensor.arange(5).tolist() == [0, 1, 2, 3, 4] and Tensor.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert Tensor.eye(3).tolist() == np.eye(3).tolist() and Tensor.full((2,), 3.5).tolist() == [3.5, 3.5]
    assert Tensor.zeros(2, 2, dtype=dtypes.int32).tolist() == [[0, 0], [0, 0]]

  def test_rand_is_deterministic_and_in_range(self):
    Tensor.manual_seed(42)
    r1 = Tensor.rand(64).numpy()
    Tensor.manual_seed(42)
    r2 = Tensor.rand(64).numpy()
    assert (r1 == r2).all() and (r1 >= 0).all() and (r1 < 1).all() and len(set(r1.tolist())) > 50

def test_device_arg_and_copy_to_null():
  t = Tensor([1.0, 2.0], device="PYTHON")
  assert t.device == "PYTHON"
  with pytest.raises(RuntimeError, match="different devices"): _ = t + Tensor([1.0, 2.0], device="NULL")
