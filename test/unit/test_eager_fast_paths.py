"""The operators of eager code take shortcuts (OpBuilder._fast_alu for a float tensor and a number or a tensor like it;
relu and clamp built straight from nodes). A shortcut must build the very node the general path builds (hash-consing
makes that an identity test) or, where it does not apply, hand over to the general path with its promotion, broadcasting
and errors intact."""
import math, operator
import pytest
from fusegrad import Tensor, dtypes

DEVICE = "PYTHON"
FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]
OTHERS = [dtypes.int32, dtypes.uint8, dtypes.int64, dtypes.bool]
SCALARS = [2, 0, -3, 2.5, 0.0, -0.0, math.nan, math.inf, -math.inf, 1e300, 2**40]

# operator -> the general path's method call building the same node
GENERAL = {
  operator.add: lambda t, x: t.add(x), operator.sub: lambda t, x: t.sub(x), operator.mul: lambda t, x: t.mul(x),
  operator.truediv: lambda t, x: t.div(x), operator.lt: lambda t, x: Tensor(t.uop < t._operand(x)),
  operator.gt: lambda t, x: Tensor(t.uop > t._operand(x)),
}
REFLECTED = {  # x op t, for a number x
  operator.add: lambda t, x: t.add(x), operator.sub: lambda t, x: t.sub(x, reverse=True),
  operator.mul: lambda t, x: t.mul(x, reverse=True), operator.truediv: lambda t, x: t.div(x, reverse=True),
}

def _lazy(dtype, shape=(3, 4)) -> Tensor:
  """A lazy tensor of dtype (an op's result, so its node has its facts set)."""
  return Tensor.ones(*shape, dtype=dtype, device=DEVICE) + 0 if dtype != dtypes.bool else Tensor.ones(*shape, dtype=dtype, device=DEVICE) | False

def _same_outcome(fast, general):
  """Both calls build one node, or both raise the same error type."""
  try: want = general()
  except Exception as e:
    with pytest.raises(type(e)): fast()
    return
  got = fast()
  assert got.uop is want.uop, f"{got.uop} is not {want.uop}"
  assert got.dtype == want.dtype and got.shape == want.shape

@pytest.mark.parametrize("dtype", FLOATS + OTHERS, ids=str)
@pytest.mark.parametrize("op", list(GENERAL), ids=lambda o: o.__name__)
def test_number_operand_builds_the_general_node(op, dtype):
  t = _lazy(dtype)
  for x in SCALARS + [True]:
    _same_outcome(lambda: op(t, x), lambda: GENERAL[op](t, x))
    if op in REFLECTED: _same_outcome(lambda: op(x, t), lambda: REFLECTED[op](t, x))

@pytest.mark.parametrize("dtype", FLOATS + OTHERS, ids=str)
@pytest.mark.parametrize("op", list(GENERAL), ids=lambda o: o.__name__)
def test_tensor_operand_builds_the_general_node(op, dtype):
  a, b = _lazy(dtype), _lazy(dtype) * 2
  for other in (b, a, _lazy(dtype, (4,)), _lazy(dtypes.float32), _lazy(dtypes.float64, (1, 4)), Tensor.ones(3, 4, device=DEVICE)):
    _same_outcome(lambda: op(a, other), lambda: GENERAL[op](a, other))

def test_other_devices_and_shapes_take_the_general_path():
  a = _lazy(dtypes.float32)
  with pytest.raises(RuntimeError, match="different devices"): a * (Tensor.ones(3, 4, device="NULL") + 0)
  with pytest.raises(Exception, match="broadcast"): a + _lazy(dtypes.float32, (2, 4))
  assert (a * 2).shape == (3, 4) and (a * _lazy(dtypes.float32, (1, 4))).shape == (3, 4)
  assert (a + [1.0, 2.0, 3.0, 4.0]).shape == (3, 4)

def test_results_match_python_arithmetic():
  vals = [-2.0, -0.0, 0.0, 1.5, math.inf, -math.inf, math.nan]
  t = Tensor(vals, device=DEVICE, dtype=dtypes.float64)
  for op in GENERAL:
    for x in (2, -0.5, 0.0, math.nan):
      got = op(t, x).tolist()
      for g, v in zip(got, vals):
        try: want = op(v, x)
        except ZeroDivisionError: want = math.copysign(math.inf, v) * math.copysign(1, x) if v == v and v != 0 else math.nan
        assert (g != g and want != want) or g == want, f"{op.__name__}({v}, {x}) = {g}, want {want}"

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_relu_and_clamp_keep_torch_semantics(dtype):
  vals = [-2.0, -0.0, 0.0, 0.5, 3.0, math.nan, -math.inf, math.inf]
  t = Tensor(vals, device=DEVICE, dtype=dtype)
  same = lambda a, b: all((x != x and y != y) or (x == y and math.copysign(1, x) == math.copysign(1, y)) for x, y in zip(a, b))  # noqa: E731
  assert same(t.relu().tolist(), [max(v, 0.0) if v == v and v != 0 else v for v in vals])
  assert same(t.clamp(min=-1.0).tolist(), [-1.0 if v < -1 else v for v in vals])
  assert same(t.clamp(max=1).tolist(), [1.0 if v > 1 else v for v in vals])
  assert same(t.clamp(-1, 1).tolist(), [-1.0 if v < -1 else 1.0 if v > 1 else v for v in vals])

def test_relu_and_clamp_gradients():
  x = Tensor([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0], device=DEVICE, requires_grad=True)
  (x.relu() * 1 + x.clamp(-1, 1) * 10 + x.clamp(min=0.5) * 100 + x.clamp(max=0.0) * 1000).sum().backward()
  # relu: none at 0; clamp: all of it at the bounds
  assert x.grad.tolist() == [1000, 1010, 1010, 111, 111, 101]

def _builders_view(u, shrinks, flips, strides, final):
  """indexing._view_nodes by the movement builders (with their checks): the path symbolic dims still take."""
  u = u.shrink(shrinks)
  if any(flips): u = u.flip([i for i, f in enumerate(flips) if f])
  if any(s != 1 for s in strides):
    u = u.pad(tuple((0, (-sh) % st if sh else 0) for sh, st in zip(u.shape, strides)))
    u = u.reshape([n for sh, st in zip(u.shape, strides) for n in (sh // st, st)])
    u = u.shrink([p for sh in u.shape[0::2] for p in ((0, sh), (0, 1))])
  return u.reshape(tuple(final))

def test_strided_and_flipped_slices_build_the_builders_nodes():
  # a slice with a step (or a negative one) makes its nodes without the movement builders' checks: the same nodes, for
  # empty dims, steps past the dim, negative starts and stops
  import random
  from fusegrad.tensor import indexing
  rng = random.Random(0)
  for _ in range(600):
    shape = tuple(rng.randint(0, 6) for _ in range(rng.randint(1, 4)))
    t = Tensor.empty(*shape, device=DEVICE)
    idx = tuple(slice(rng.choice([None, -7, -2, 0, 1, 3, 8]), rng.choice([None, -7, -1, 0, 2, 5, 9]), rng.choice([None, 1, 2, 3, -1, -2, 5])) for _ in shape)
    ix = indexing._parse_index(t, idx)
    assert indexing._view_nodes(t.uop, ix.shrinks, ix.flips, ix.strides, ix.final) is _builders_view(t.uop, ix.shrinks, ix.flips, ix.strides, ix.final), (shape, idx)
    assert t[idx].uop is _builders_view(t.uop, ix.shrinks, ix.flips, ix.strides, ix.final)
