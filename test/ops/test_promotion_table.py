"""The whole type-promotion table against torch.result_type, exhaustively: every pair of dtypes, every dtype with a weak
Python scalar (bool/int/float), for each op that promotes; plus integer wraparound, float16/bfloat16 behaviour and
float->int conversion.

Documented differences from torch (asserted here, so a change is noticed):
- fusegrad's default int is int32 (torch: int64): Python int lists/scalars make int32 tensors, and a bool tensor with an
  int scalar gives int32; sums/cumsums of small ints accumulate in int32.
- torch defines no promotion between uint16/uint32/uint64 and other integer dtypes; fusegrad picks the smallest signed
  type holding both (int64 for uint64 with a signed type), which is numpy's rule except uint64+signed (numpy: float64).
"""
import itertools, math
import numpy as np
import pytest
import torch
from fusegrad import Tensor, dtypes
from .helpers import DTYPE_NAMES, FG2TORCH, TORCH2FG, helper_test_op

ALL = [getattr(dtypes, n) for n in DTYPE_NAMES]
IDS = [d.name.replace(" ", "_") for d in ALL]
# torch has no arithmetic kernels for uint16/32/64 on CPU: their promotion is still defined (result_type), values are not
TORCH_ARITH = [d for d in ALL if d not in (dtypes.uint16, dtypes.uint32, dtypes.uint64)]

def t_ones(dt, shape=(2,)): return torch.ones(shape, dtype=FG2TORCH[dt])

def torch_result(a, b):
  """torch's promotion, or for the uint16/32/64 pairs torch leaves undefined, fusegrad's documented numpy-like rule."""
  try: return TORCH2FG[torch.result_type(t_ones(a), t_ones(b))]
  except RuntimeError:
    if dtypes.bool in (a, b): return b if a == dtypes.bool else a
    if (a == dtypes.uint64 and not dtypes.is_unsigned(b)) or (b == dtypes.uint64 and not dtypes.is_unsigned(a)): return dtypes.int64
    return getattr(dtypes, np.result_type(np.dtype(a.name if a.fmt is None else a.fmt), np.dtype(b.fmt)).name)

def torch_scalar_result(dt, s):
  want = TORCH2FG[torch.result_type(t_ones(dt), s)]
  if type(s) is int and want == dtypes.int64 and dt != dtypes.int64: want = dtypes.default_int  # int32 default int
  return want

def true_div_dtype(d): return d if dtypes.is_float(d) else dtypes.default_float

# ------------------------------------------------------------------------ tensor x tensor: the full table
@pytest.mark.parametrize("a", ALL, ids=IDS)
def test_table_row(a):
  """One row of the table: a with every dtype, for the ops that promote (arithmetic, min/max, where, cat, comparisons)."""
  for b in ALL:
    want = torch_result(a, b)
    x, y = Tensor.ones(2, dtype=a), Tensor.ones(2, dtype=b)
    assert want is not None
    assert (x + y).dtype == want, (a, b, "add")
    assert (x * y).dtype == want, (a, b, "mul")
    if want != dtypes.bool: assert (x - y).dtype == want, (a, b, "sub")
    assert x.maximum(y).dtype == want and x.minimum(y).dtype == want, (a, b, "max/min")
    assert Tensor([True, False]).where(x, y).dtype == want, (a, b, "where")
    assert x.cat(y).dtype == want, (a, b, "cat")
    assert (x / y).dtype == true_div_dtype(want), (a, b, "truediv")
    for cmp in ((x < y), (x == y), (x != y), (x >= y)): assert cmp.dtype == dtypes.bool, (a, b, "cmp")
    if not dtypes.is_float(want): assert (x & y).dtype == want and (x | y).dtype == want and (x ^ y).dtype == want, (a, b, "bitwise")
    if want not in (dtypes.bool,): assert (x // y).dtype == want, (a, b, "floordiv")

def test_table_matches_torch_result_type_exactly():
  """The table itself, printed as one comparison (readable failure: every wrong cell at once)."""
  wrong = [(a.name, b.name, (Tensor.ones(1, dtype=a) + Tensor.ones(1, dtype=b)).dtype.name, torch_result(a, b).name)
           for a, b in itertools.product(ALL, ALL) if (Tensor.ones(1, dtype=a) + Tensor.ones(1, dtype=b)).dtype != torch_result(a, b)]
  assert not wrong, wrong

@pytest.mark.parametrize("a,b", [(a, b) for a, b in itertools.combinations(TORCH_ARITH, 2)],
                         ids=[f"{a.name}+{b.name}".replace(" ", "_") for a, b in itertools.combinations(TORCH_ARITH, 2)])
def test_pair_values(a, b):
  """Mixed-dtype arithmetic computes in the promoted dtype (values, not only the dtype)."""
  va = [1, 0, 1, 1] if a == dtypes.bool else [3, 100, 1, 7]
  vb = [1, 1, 0, 1] if b == dtypes.bool else [2, 27, 5, 120]
  helper_test_op(None, lambda x, y: x + y, vals=[va, vb], dtype=[a, b], forward_only=True, atol=1e-2, rtol=1e-2)
  helper_test_op(None, lambda x, y: x * y, vals=[va, vb], dtype=[a, b], forward_only=True, atol=0.5, rtol=1e-2)

# ------------------------------------------------------------------------ tensor x weak Python scalar
SCALARS = [True, False, 3, -2, 0, 2.5, -0.5]

@pytest.mark.parametrize("dt", ALL, ids=IDS)
@pytest.mark.parametrize("s", SCALARS, ids=[repr(s) for s in SCALARS])
def test_weak_scalar(dt, s):
  x = Tensor.ones(3, dtype=dt)
  want = torch_scalar_result(dt, s)
  assert (x + s).dtype == want and (s + x).dtype == want
  assert (x * s).dtype == want and (s * x).dtype == want
  if want != dtypes.bool: assert (x - s).dtype == want and (s - x).dtype == want
  assert x.maximum(s).dtype == want and x.minimum(s).dtype == want
  assert (x / s).dtype == true_div_dtype(want) and (s / x).dtype == true_div_dtype(want)
  assert (x < s).dtype == dtypes.bool and (s == x).dtype == dtypes.bool
  if want != dtypes.bool and s != 0: assert (x // s).dtype == want
  if not dtypes.is_float(want): assert (x & s).dtype == want and (x | s).dtype == want
  if dt != dtypes.bool:  # bool ** scalar: see test_bool_pow
    if type(s) is int and s < 0 and not dtypes.is_float(want):
      with pytest.raises(RuntimeError, match="negative integer powers"): x ** s  # as torch
    else: assert (x ** s).dtype == want

@pytest.mark.parametrize("dt", TORCH_ARITH, ids=[d.name.replace(" ", "_") for d in TORCH_ARITH])
def test_weak_scalar_values(dt):
  vals = [[True, False, True]] if dt == dtypes.bool else [[1, 5, 100]]
  tol = dict(atol=0.5, rtol=1e-2)
  for s in (True, 3, 2.5):
    cd = not (type(s) is int and dt == dtypes.bool)  # bool + int: int32 here, int64 in torch
    helper_test_op(None, lambda x: x + s, vals=vals, dtype=dt, forward_only=True, check_dtype=cd, **tol)
    helper_test_op(None, lambda x: x / s, vals=vals, dtype=dt, forward_only=True, **tol)

@pytest.mark.parametrize("dt", ALL, ids=IDS)
def test_where_with_scalars(dt):
  c = Tensor([True, False, True])
  x = Tensor.ones(3, dtype=dt)
  tc, tx = torch.tensor([True, False, True]), t_ones(dt, (3,))
  for s in (True, 2, 2.5):
    want = TORCH2FG[torch.where(tc, tx, s).dtype]
    if type(s) is int and want == dtypes.int64 and dt != dtypes.int64: want = dtypes.int32
    assert c.where(x, s).dtype == want and c.where(s, x).dtype == want, (dt, s)

def test_scalar_with_scalar_where():
  assert Tensor([True]).where(1, 2).dtype == dtypes.int32
  assert Tensor([True]).where(1.0, 2).dtype == dtypes.float32
  assert Tensor([True]).where(True, False).dtype == dtypes.bool

# ------------------------------------------------------------------------ documented differences
def test_default_int_is_int32():
  assert Tensor([1, 2]).dtype == dtypes.int32 and torch.tensor([1, 2]).dtype == torch.int64
  assert Tensor(3).dtype == dtypes.int32
  assert (Tensor([True]) + 1).dtype == dtypes.int32
  assert Tensor.arange(3).dtype == dtypes.int32
  assert Tensor([1, 2], dtype=dtypes.int8).sum().dtype == dtypes.int32  # torch: int64
  assert Tensor([1, 2], dtype=dtypes.int64).sum().dtype == dtypes.int64
  assert Tensor([1.5]).argmax().dtype == dtypes.int32  # torch: int64

@pytest.mark.parametrize("a", ALL, ids=IDS)
def test_zero_dim_tensor_promotion(a):
  """A 0-d tensor only raises the category (like a scalar, but with its own dtype), as in torch."""
  for b in ALL:
    try: want = TORCH2FG[torch.result_type(t_ones(a), torch.ones((), dtype=FG2TORCH[b]))]
    except RuntimeError: continue
    x, z = Tensor.ones(2, dtype=a), Tensor.ones((), dtype=b)
    assert (x + z).dtype == want and (z + x).dtype == want, (a, b)
    assert (Tensor.ones((), dtype=a) + z).dtype == torch_result(a, b), (a, b, "both 0-d")

def test_bool_pow():
  x = Tensor([True, False])
  assert (x ** True).dtype == dtypes.bool and (x ** Tensor([True, True])).dtype == dtypes.bool
  assert x.pow(False).tolist() == [True, True] and x.pow(True).tolist() == [True, False]

# ------------------------------------------------------------------------ integer wraparound
WRAP = [(dtypes.int8, 127, 1), (dtypes.int8, -128, -1), (dtypes.uint8, 255, 1), (dtypes.uint8, 0, -1), (dtypes.int16, 32767, 1),
        (dtypes.uint16, 65535, 1), (dtypes.int32, 2**31 - 1, 1), (dtypes.uint32, 2**32 - 1, 1), (dtypes.int64, 2**63 - 1, 1), (dtypes.uint64, 2**64 - 1, 1)]

@pytest.mark.parametrize("dt,v,d", WRAP, ids=[f"{dt.name}{v:+d}{d:+d}".replace(" ", "_") for dt, v, d in WRAP])
def test_add_wraps(dt, v, d):
  bits = dt.itemsize * 8
  def wrap(x):
    x &= (1 << bits) - 1
    return x - (1 << bits) if not dtypes.is_unsigned(dt) and x >= 1 << (bits - 1) else x
  assert (Tensor([v], dtype=dt) + Tensor([d], dtype=dt) if not dtypes.is_unsigned(dt) or d >= 0 else Tensor([v], dtype=dt) - Tensor([1], dtype=dt)).tolist() == [wrap(v + d)]

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.int64], ids=["int8", "uint8", "int16", "int32", "int64"])
def test_mul_and_neg_wrap_like_torch(dt):
  hi = dtypes.max(dt)
  vals = [[hi, hi // 2 + 1, 3, hi - 1]]
  helper_test_op(None, lambda x: x * x, vals=vals, dtype=dt, forward_only=True)
  helper_test_op(None, lambda x: x * 3, vals=vals, dtype=dt, forward_only=True)
  helper_test_op(None, lambda x: x + x, vals=vals, dtype=dt, forward_only=True)
  if not dtypes.is_unsigned(dt): helper_test_op(None, lambda x: -x, vals=[[dtypes.min(dt), 1, hi]], dtype=dt, forward_only=True)

def test_int_cast_wraps():
  helper_test_op(None, lambda x: x.to(torch.int8), lambda x: x.cast(dtypes.int8), vals=[[127, 128, 255, 256, -129, 1000]], dtype=dtypes.int32, forward_only=True)
  helper_test_op(None, lambda x: x.to(torch.uint8), lambda x: x.cast(dtypes.uint8), vals=[[-1, 256, 300, -200]], dtype=dtypes.int64, forward_only=True)
  helper_test_op(None, lambda x: x.to(torch.int32), lambda x: x.cast(dtypes.int32), vals=[[2**31, 2**40 + 5, -2**31 - 1]], dtype=dtypes.int64, forward_only=True)

def test_python_scalar_wraps_into_tensor_dtype():
  helper_test_op(None, lambda x: x + 300, vals=[[1, 200]], dtype=dtypes.uint8, forward_only=True)
  helper_test_op(None, lambda x: x * 1000, vals=[[1, -3]], dtype=dtypes.int8, forward_only=True)
  assert Tensor([250], dtype=dtypes.uint8).add(10).tolist() == [4]

# ------------------------------------------------------------------------ float16 / bfloat16
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=["half", "bfloat16"])
def test_half_overflow_rounding_and_accumulation(dt):
  big = 65504.0 if dt == dtypes.float16 else 3.3895313892515355e38
  helper_test_op(None, lambda x: x * 2, vals=[[big, -big, 1.0]], dtype=dt, forward_only=True)  # overflows to inf
  helper_test_op(None, lambda x: x + 1, vals=[[2048.0, 256.0, 0.1, 1e-3]], dtype=dt, forward_only=True, atol=0, rtol=0)  # rounds to nearest even
  helper_test_op(None, lambda x: x.sum(), vals=[[1.0] * 3000], dtype=dt, forward_only=True, atol=0, rtol=0)  # accumulates in float32 like torch
  helper_test_op(None, lambda x: x.mean(), vals=[[0.1] * 1000], dtype=dt, forward_only=True, atol=1e-3, rtol=1e-2)
  helper_test_op(None, lambda x: x / 3, vals=[[1.0, 2.0, 10.0]], dtype=dt, forward_only=True, atol=0, rtol=0)
  helper_test_op(None, lambda x: x.float(), vals=[[1.0009765625, 1.00390625, 3.14159]], dtype=dt, forward_only=True, atol=0, rtol=0)

def test_half_subnormals_and_specials():
  helper_test_op(None, lambda x: x * 1, vals=[[6e-8, 1e-5, -6e-8, 65519.0, 65520.0]], dtype=dtypes.float16, forward_only=True, atol=0, rtol=0)
  helper_test_op(None, lambda x: x.to(torch.float16), lambda x: x.cast(dtypes.float16),
                 vals=[[1e-8, 3e-8, 65519.0, 65520.0, 1e6, -1e6, math.nan, math.inf, 1.00048828125]], forward_only=True, atol=0, rtol=0)
  helper_test_op(None, lambda x: x.to(torch.bfloat16), lambda x: x.cast(dtypes.bfloat16),
                 vals=[[1.00390625, 1.01171875, 3e38, 3.4e38, 1e-40, math.nan, -math.inf, 1.0 + 2**-8 + 2**-9]], forward_only=True, atol=0, rtol=0)

@pytest.mark.parametrize("a,b", [(dtypes.float16, dtypes.bfloat16), (dtypes.bfloat16, dtypes.float16), (dtypes.float16, dtypes.int64), (dtypes.bfloat16, dtypes.uint8)])
def test_half_mixed(a, b):
  helper_test_op(None, lambda x, y: x + y, vals=[[1.5, 2.25, 100.0], [2, 3, 4]], dtype=[a, b], forward_only=True, atol=1e-2)

# ------------------------------------------------------------------------ float -> int conversion
@pytest.mark.parametrize("dst", [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.bool], ids=["int8", "uint8", "int16", "int32", "int64", "bool"])
@pytest.mark.parametrize("src", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64], ids=["half", "bf16", "float", "double"])
def test_float_to_int_truncates(src, dst):
  vals = [[2.7, -2.7, 0.5, -0.5, 99.9, -99.9, 0.0, -0.0, 1.0]] if dst not in (dtypes.uint8,) else [[2.7, 0.5, 99.9, 0.0, 254.9, 1.0]]
  helper_test_op(None, lambda x: x.to(FG2TORCH[dst]), lambda x: x.cast(dst), vals=vals, dtype=src, forward_only=True)

def test_float_to_int_large_values():
  helper_test_op(None, lambda x: x.to(torch.int64), lambda x: x.cast(dtypes.int64), vals=[[1e10, -1e15, 2.0**62, 123456789.9]], dtype=dtypes.float64, forward_only=True)
  helper_test_op(None, lambda x: x.to(torch.int32), lambda x: x.cast(dtypes.int32), vals=[[16777217.0, -2147483520.0, 2147483520.0]], dtype=dtypes.float32, forward_only=True)

def test_int_to_float_rounds():
  helper_test_op(None, lambda x: x.float(), vals=[[16777217, 16777219, -16777217, 2**31 - 1]], dtype=dtypes.int32, forward_only=True, atol=0, rtol=0)
  helper_test_op(None, lambda x: x.double(), vals=[[2**53 + 1, -(2**53) - 1, 2**63 - 1]], dtype=dtypes.int64, forward_only=True, atol=0, rtol=0)
  helper_test_op(None, lambda x: x.half(), vals=[[2049, 2051, 65519, 70000]], dtype=dtypes.int32, forward_only=True, atol=0, rtol=0)

def test_float_to_bool():
  helper_test_op(None, lambda x: x.bool(), vals=[[0.0, -0.0, 0.1, math.nan, math.inf, -1e-30]], forward_only=True)
