"""Type promotion against torch.result_type: tensor-tensor pairs, weak Python scalars, and the ops that promote."""
import itertools
import pytest
import torch
from fusegrad import Tensor, dtypes
from .helpers import DTYPE_NAMES, FG2TORCH, TORCH2FG, helper_test_op

ALL = [getattr(dtypes, n) for n in DTYPE_NAMES]

def torch_pair(a, b):
  """torch's result dtype for tensors of dtypes a and b (both with dims, so neither is 'weak'), or None if torch refuses."""
  try: return TORCH2FG[torch.result_type(torch.ones(1, dtype=FG2TORCH[a]), torch.ones(1, dtype=FG2TORCH[b]))]
  except RuntimeError: return None

SUPPORTED_PAIRS = [(a, b) for a, b in itertools.product(ALL, ALL) if torch_pair(a, b) is not None]

@pytest.mark.parametrize("a,b", SUPPORTED_PAIRS, ids=[f"{a.name}+{b.name}".replace(" ", "_") for a, b in SUPPORTED_PAIRS])
def test_tensor_pair(a, b):
  x, y = Tensor.ones(2, dtype=a), Tensor.ones(2, dtype=b)
  assert (x + y).dtype == torch_pair(a, b)
  assert (x * y).dtype == torch_pair(a, b)

def test_pairs_are_symmetric():
  for a, b in SUPPORTED_PAIRS:
    assert (Tensor.ones(1, dtype=a) + Tensor.ones(1, dtype=b)).dtype == (Tensor.ones(1, dtype=b) + Tensor.ones(1, dtype=a)).dtype, (a, b)

# pairs whose result differs from both inputs or mixes categories: check the values too, not just the dtype
VALUE_PAIRS = [(dtypes.int8, dtypes.uint8), (dtypes.uint8, dtypes.int16), (dtypes.bool, dtypes.int8), (dtypes.int32, dtypes.int64), (dtypes.int64, dtypes.float16),
               (dtypes.float16, dtypes.bfloat16), (dtypes.bfloat16, dtypes.int32), (dtypes.float32, dtypes.float64), (dtypes.uint8, dtypes.float32),
               (dtypes.bool, dtypes.float32), (dtypes.int16, dtypes.float64), (dtypes.int8, dtypes.int32)]

@pytest.mark.parametrize("a,b", VALUE_PAIRS, ids=[f"{a.name}+{b.name}".replace(" ", "_") for a, b in VALUE_PAIRS])
def test_tensor_pair_values(a, b):
  vals = [[0, 1, 100, 127, 3, 1], [1, 1, 100, 255 if dtypes.is_unsigned(b) else 127, 0, 1]]
  if a == dtypes.bool: vals[0] = [v % 2 for v in vals[0]]
  if b == dtypes.bool: vals[1] = [v % 2 for v in vals[1]]
  helper_test_op(None, lambda x, y: x + y, vals=vals, dtype=[a, b], forward_only=True, atol=1e-2, rtol=1e-2)

SCALARS = [True, 2, 2.5]

def expected_scalar(dt, s):
  want = TORCH2FG[torch.result_type(torch.ones(1, dtype=FG2TORCH[dt]), s)]
  # the one documented difference: fusegrad's default int is int32 where torch's is int64 (bool tensor + int scalar)
  if type(s) is int and dt == dtypes.bool and want == dtypes.int64: want = dtypes.default_int
  return want

@pytest.mark.parametrize("dt", ALL, ids=[d.name.replace(" ", "_") for d in ALL])
@pytest.mark.parametrize("s", SCALARS, ids=["bool", "int", "float"])
def test_weak_scalar(dt, s):
  x = Tensor.ones(3, dtype=dt)
  want = expected_scalar(dt, s)
  assert (x + s).dtype == want
  assert (s + x).dtype == want
  assert (x * s).dtype == want
  assert (s * x).dtype == want

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.float16, dtypes.bfloat16, dtypes.float64])
def test_weak_scalar_sub_div(dt):
  x = Tensor.ones(3, dtype=dt)
  assert (x - 1).dtype == dt and (1 - x).dtype == dt
  assert (x - 1.5).dtype == (dt if dtypes.is_float(dt) else dtypes.float32)
  assert (x / 2).dtype == (dt if dtypes.is_float(dt) else dtypes.float32)  # true division of ints is default float, as in torch
  assert (x ** 2).dtype == dt

def test_documented_cases():
  assert Tensor([1, 2]).dtype == dtypes.int32
  assert Tensor([1.0, 2]).dtype == dtypes.float32
  assert Tensor([True]).dtype == dtypes.bool
  assert (Tensor([1, 2], dtype=dtypes.int32) + 1.5).dtype == dtypes.float32
  assert (Tensor([1, 2], dtype=dtypes.float16) * 2).dtype == dtypes.float16
  assert (Tensor([1, 2], dtype=dtypes.float16) * 2.5).dtype == dtypes.float16
  assert (Tensor([True, False]) + 1).dtype == dtypes.int32
  assert (Tensor([True, False]) + True).dtype == dtypes.bool
  assert (Tensor([1], dtype=dtypes.int8) + True).dtype == dtypes.int8
  assert (Tensor([1], dtype=dtypes.uint8) + 1000).dtype == dtypes.uint8

def test_weak_scalar_values():
  helper_test_op(None, lambda x: x + 1.5, vals=[[1, -2, 3]], dtype=dtypes.int32)
  helper_test_op(None, lambda x: x * 2, vals=[[1.5, -2.25, 60000.0]], dtype=dtypes.float16)
  helper_test_op(None, lambda x: x + 1, vals=[[True, False]], dtype=dtypes.bool, check_dtype=False)
  assert (Tensor([True, False]) + 1).tolist() == [2, 1]
  helper_test_op(None, lambda x: x + 300, vals=[[1, 200]], dtype=dtypes.uint8)  # the scalar wraps into uint8 like torch
  helper_test_op(None, lambda x: 2.5 * x, vals=[[1, 2]], dtype=dtypes.bfloat16)

@pytest.mark.parametrize("a,b", [(dtypes.int8, dtypes.float16), (dtypes.int32, dtypes.int64), (dtypes.uint8, dtypes.int8), (dtypes.bool, dtypes.int16)])
def test_other_binary_ops_promote(a, b):
  x, y = Tensor.ones(2, dtype=a), Tensor.ones(2, dtype=b)
  want = torch_pair(a, b)
  assert x.maximum(y).dtype == want and x.minimum(y).dtype == want
  assert (x < y).dtype == dtypes.bool and (x == y).dtype == dtypes.bool
  if want != dtypes.bool: assert (x - y).dtype == want
  tdiv = TORCH2FG[(torch.ones(2, dtype=FG2TORCH[a]) / torch.ones(2, dtype=FG2TORCH[b])).dtype]
  assert (x / y).dtype == tdiv

@pytest.mark.parametrize("a,b", [(dtypes.int8, dtypes.int32), (dtypes.uint8, dtypes.int8), (dtypes.int16, dtypes.float16)])
def test_bitwise_and_cat_promote(a, b):
  x, y = Tensor.ones(2, dtype=a), Tensor.ones(2, dtype=b)
  want = torch_pair(a, b)
  if not dtypes.is_float(want): assert (x & y).dtype == want and (x ^ y).dtype == want
  assert x.cat(y).dtype == TORCH2FG[torch.cat([torch.ones(2, dtype=FG2TORCH[a]), torch.ones(2, dtype=FG2TORCH[b])]).dtype]

def test_where_promotes():
  c = Tensor([True, False])
  i8, i32, f32 = Tensor([1, 2], dtype=dtypes.int8), Tensor([1, 2], dtype=dtypes.int32), Tensor([1.0, 2.0])
  tc = torch.tensor([True, False])
  ti8, ti32 = torch.tensor([1, 2], dtype=torch.int8), torch.tensor([1, 2], dtype=torch.int32)
  assert c.where(i8, i32).dtype == TORCH2FG[torch.where(tc, ti8, ti32).dtype]
  assert c.where(i32, f32).dtype == dtypes.float32
  assert c.where(i8, 2).dtype == TORCH2FG[torch.where(tc, ti8, 2).dtype]
  assert c.where(i8, 2.5).dtype == TORCH2FG[torch.where(tc, ti8, 2.5).dtype]
  assert c.where(1.5, i8).dtype == TORCH2FG[torch.where(tc, 1.5, ti8).dtype]

def test_matmul_promotes():
  assert (Tensor.ones(2, 2, dtype=dtypes.float16) @ Tensor.ones(2, 2, dtype=dtypes.float32)).dtype == dtypes.float32
  assert (Tensor.ones(2, 2, dtype=dtypes.int8) @ Tensor.ones(2, 2, dtype=dtypes.float16)).dtype == dtypes.float16

def test_unary_float_ops_on_ints():
  for dt in (dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.int64):
    x = Tensor.ones(2, dtype=dt)
    for fn in ("exp", "log", "sqrt", "sin", "sigmoid", "tanh", "reciprocal"):
      assert getattr(x, fn)().dtype == TORCH2FG[getattr(torch.ones(2, dtype=FG2TORCH[dt]), fn)().dtype], (dt, fn)
    assert x.mean().dtype == dtypes.float32
