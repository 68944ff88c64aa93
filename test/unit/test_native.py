"""The native core (fusegrad/native/core.c) against the Python functions it stands in for: the same nodes, keys, tensors
and errors (skipped where it is not built: test_native_build.py says whether it must be)."""
import gc, math, sys, weakref
from collections import namedtuple
import pytest
from fusegrad import Tensor, Variable, dtypes, native
from fusegrad.schedule import cache
from fusegrad.tensor import elementwise, tensor as tensor_module
from fusegrad.uop import ops
from fusegrad.uop.ops import Ops, UOp

core = native.core
pytestmark = pytest.mark.skipif(core is None, reason=f"the native core is not built here: {native.why_not}")

def python_version(owner, name):
  fn = native.python_versions[(owner, name)]
  return fn.__func__ if isinstance(fn, staticmethod) else fn

Point = namedtuple("Point", "x y")
ARGS = [None, (), (1, 2, 3), (1, 2.0), (True, 1), ((1, 2), (3,)), 1.0, -0.0, 0.0, math.nan, math.inf, True, False, 1, 0, 2**70,
        "name", ("a", 1), Point(1, 2), Point(1.0, 2), (None,), ((0, 4), (1, 3))]

@pytest.mark.parametrize("arg", ARGS, ids=repr)
def test_arg_key_matches_python(arg):
  assert core.arg_key(arg) == ops._arg_key(arg)

def test_arg_key_keeps_numpy_floats_as_floats():
  np = pytest.importorskip("numpy")
  assert core.arg_key(np.float64(2.5)) == ops._arg_key(np.float64(2.5)) == (float, ops.struct.pack("d", 2.5))
  assert core.arg_key(np.int64(3)) == ops._arg_key(np.int64(3))

def test_nodes_are_hash_consed_by_exact_arg():
  c = UOp(Ops.DEVICE, arg="PYTHON")
  assert UOp(Ops.CONST, dtypes.float32, (c,), 1.0) is UOp(Ops.CONST, dtypes.float32, (c,), 1.0)
  assert UOp(Ops.CONST, dtypes.float32, (c,), 0.0) is not UOp(Ops.CONST, dtypes.float32, (c,), -0.0)
  assert UOp(Ops.CONST, dtypes.int32, (c,), 1) is not UOp(Ops.CONST, dtypes.int32, (c,), True)
  assert UOp(Ops.CONST, dtypes.float32, (c,), math.nan) is UOp(Ops.CONST, dtypes.float32, (c,), math.nan)

def test_node_constructor_takes_keywords_and_defaults():
  u = UOp(Ops.DEVICE, arg="PYTHON")
  assert (u.op, u.dtype, u.src, u.arg) == (Ops.DEVICE, dtypes.void, (), "PYTHON")
  assert UOp(op=Ops.DEVICE, arg="PYTHON") is u is UOp(Ops.DEVICE, dtypes.void, (), "PYTHON") is UOp(Ops.DEVICE, src=(), arg="PYTHON")
  assert UOp.__reduce__(u)[1] == (Ops.DEVICE, dtypes.void, (), "PYTHON")

@pytest.mark.parametrize("call", [lambda: UOp(), lambda: UOp(Ops.DEVICE, bad=1), lambda: UOp(Ops.DEVICE, dtypes.void, (), None, 5),
                                  lambda: UOp(Ops.DEVICE, op=Ops.DEVICE), lambda: UOp(Ops.SINK, dtypes.void, [UOp(Ops.DEVICE, arg='PYTHON')])])
def test_node_constructor_errors_are_type_errors(call):
  with pytest.raises(TypeError): call()

def test_dead_nodes_leave_the_cache():
  u = UOp(Ops.DEVICE, arg="native test device")
  key = next(k for k, r in ops.UOpMeta.ucache.refs.items() if r() is u)
  del u
  gc.collect()
  assert key not in ops.UOpMeta.ucache.refs

def test_tensors_are_filed_and_unfiled_in_the_registry():
  x = Tensor([1.0, 2.0]) * 2  # (made by the core's fast path)
  assert type(x) is Tensor and tensor_module._lazy[id(x)]() is x and x._ref.group is tensor_module._lazy
  key = id(x)
  del x
  gc.collect()
  assert key not in tensor_module._lazy

def test_tensor_constructor_keeps_its_general_path():
  x = Tensor([1.0, 2.0]).realize()
  assert Tensor(x.uop).uop is x.uop and Tensor(x.uop)._ref.group is not tensor_module._lazy  # a buffer's holders
  assert Tensor(data=[3]).tolist() == [3] and Tensor().shape == (0,)
  # a node with another dtype asked for is cast (the dtype was ignored)
  assert Tensor(x.uop, dtype=dtypes.int32).tolist() == [1, 2] and Tensor(x.uop, dtype=x.dtype).uop is x.uop
  class Sub(Tensor): pass
  s = Sub([1.0]) + 1
  assert type(s) is Sub and s.tolist() == [2.0]
  with pytest.raises(TypeError): Tensor(object())

@pytest.mark.parametrize("x", [2, 2.5, 0, -0.0, math.nan, True, "a"], ids=repr)
@pytest.mark.parametrize("op", [Ops.ADD, Ops.MUL, Ops.CMPLT, Ops.FDIV])
def test_fast_binary_matches_python(op, x):
  t = Tensor.ones(2, 3) + 0
  for reverse in (False, True):
    want = python_version(elementwise, "_fast_binary")(t, op, x, reverse)
    got = core.fast_binary(t, op, x, reverse)
    assert (got is None) == (want is None)
    if got is not None: assert got.uop is want.uop and type(got) is type(want)

@pytest.mark.parametrize("other", [lambda: Tensor.ones(2, 3) + 1, lambda: Tensor.ones(3) + 1, lambda: Tensor.ones(2, 3, dtype=dtypes.float16) + 1,
                                   lambda: Tensor.ones(2, 3, dtype=dtypes.int32) + 1])
def test_fast_binary_of_tensors_matches_python(other):
  t, o = Tensor.ones(2, 3) + 0, other()
  want = python_version(elementwise, "_fast_binary")(t, Ops.ADD, o)
  got = core.fast_binary(t, Ops.ADD, o)
  assert (got is None) == (want is None) and (got is None or got.uop is want.uop)

def test_tensor_const_matches_python():
  for v in (1.5, 0.0, -0.0, math.nan, 3, True):
    want = python_version(ops.OpBuilder, "tensor_const")(v, dtypes.float32, "PYTHON", (2, 2))
    assert core.tensor_const(v, dtypes.float32, "PYTHON", (2, 2)) is want

def _graphs():
  """Graphs of the kinds the schedule cache keys: elementwise chains with constants, reductions, windows of an input,
  bound variables, realized nodes, a device copy."""
  a = Tensor.arange(12, dtype=dtypes.float32).reshape(3, 4).realize()
  b = Tensor.ones(3, 4).contiguous().realize()
  yield ((a * 1.01 + 0.0).relu() - -0.0).clamp(min=-1.0)
  yield (a + b).sum(axis=1) * a.max()
  yield a[1:3, 2:4] * 2 + a[0:2, 0:2]
  v = Variable("n", 1, 3).bind(2)
  yield a[:v].sum() + 1
  r = (a * 3).realize()
  yield r + a
  yield a.to("PYTHON:1") + 1

@pytest.mark.parametrize("i", range(6))
def test_walk_matches_python(i):
  t = list(_graphs())[i]
  sink = UOp(Ops.SINK, dtypes.void, (t.uop,))
  walks = []
  for walk in (python_version(cache, "_walk"), core.walk):
    w = cache.Walk.__new__(cache.Walk)
    w.order, w.ins, w.in_uops, w.binds, w.saw_realized, w.windows = [], {}, {}, {}, False, {}
    key = [cache.EXPAND_COST_LIMIT, True]
    ok = walk(w, sink, key)
    walks.append((ok, key, w.order, w.binds, w.windows, w.ins))
  assert walks[0] == walks[1]

def test_weakref_callbacks_survive_a_rebuilt_key():
  """A dead node's callback must not drop the entry of a newer node built under the same key meanwhile."""
  u = UOp(Ops.DEVICE, arg="native rebuilt")
  r = weakref.ref(u)
  del u
  gc.collect()
  assert r() is None
  v = UOp(Ops.DEVICE, arg="native rebuilt")
  assert UOp(Ops.DEVICE, arg="native rebuilt") is v

DUNDERS = ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__lt__", "__gt__"]

@pytest.mark.parametrize("name", DUNDERS)
@pytest.mark.parametrize("x", [3, 0.5, -0.0, math.nan, True, [1.0, 2.0, 3.0], lambda: Tensor.ones(3) + 1, lambda: Tensor.ones(2, 3, dtype=dtypes.int32) + 1],
                         ids=["int", "float", "-0.0", "nan", "bool", "list", "row", "int tensor"])
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16, dtypes.int32], ids=str)
def test_dunders_match_python(name, x, dtype):
  t = Tensor.ones(2, 3, dtype=dtype) + 0
  x = x() if callable(x) else x
  assert type(vars(Tensor)[name]).__name__ == "method_descriptor"
  want, got = native.python_versions[(Tensor, name)](t, x), getattr(Tensor, name)(t, x)
  if isinstance(x, list): assert got.tolist() == want.tolist() and got.dtype == want.dtype  # (each call makes a new tensor of x)
  else: assert got.uop is want.uop and type(got) is type(want)

@pytest.mark.parametrize("bounds", [((-1.0,), {}), ((None, 2),), ((), {"min": 0}), ((), {"max_": 0.5}), ((1, 0),), ((math.nan,), {}),
                                    ((), {"min": 1, "min_": 2}), ((), {}), ((None, None),), ((), {"bad": 1})], ids=repr)
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.bfloat16, dtypes.int32], ids=str)
def test_clip_matches_python(bounds, dtype):
  args, kw = (bounds[0], bounds[1]) if len(bounds) == 2 else (bounds[0], {})
  t = Tensor.ones(2, 3, dtype=dtype) + 0
  python_clip = native.python_versions[(Tensor, "clip")]
  try: want = python_clip(t, *args, **kw)
  except Exception as e:
    with pytest.raises(type(e)): t.clip(*args, **kw)
    return
  got = t.clip(*args, **kw)
  assert got.uop is want.uop and got.uop.__dict__.get(ops.DERIVATIVE, (None,))[0] == want.uop.__dict__.get(ops.DERIVATIVE, (None,))[0]

@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16, dtypes.int32, dtypes.bool], ids=str)
def test_relu_matches_python(dtype):
  t = Tensor.ones(2, 3, dtype=dtype) + 0 if dtype != dtypes.bool else Tensor.ones(2, 3, dtype=dtype)
  want = native.python_versions[(Tensor, "relu")](t)
  assert t.relu().uop is want.uop is python_version(UOp, "relu")(t.uop)

def test_the_kernel_launcher_matches_python():
  """The C _run_task against ctypes' on a one-thread and an all-threads kernel of the CPU device, with a variable."""
  from fusegrad.runtime import ops_cpu
  from fusegrad.engine import realize
  try: from fusegrad.device import Device; Device["CPU"]
  except Exception as e: pytest.skip(f"no CPU device here: {e}")
  v = Variable("k", 1, 10).bind(3)
  for n in (16, 1 << 20):
    outs = []
    for run in (python_version(ops_cpu, "_run_task"), core.run_task):
      prev, ops_cpu._run_task = ops_cpu._run_task, run
      try:
        realize._programs.clear()
        x = Tensor.arange(n, device="CPU").float()
        outs.append(((x * 2 + 1).tolist()[-3:], x[:v].sum().item(), x.reshape(-1, 16).sum(1).tolist()[-1]))
      finally: ops_cpu._run_task = prev
    assert outs[0] == outs[1]

def test_bad_launch_arguments_raise():
  class Prg: task_addr, parallel, params = 0, False, (0,)
  with pytest.raises(ValueError): core.run_task(Prg(), [(None, 0, 4)], [])

def test_a_kernel_of_more_buffers_than_the_c_launcher_takes_runs_through_ctypes():
  try: xs = [Tensor.full((2,), float(i), device="CPU").contiguous().realize() for i in range(300)]
  except Exception as e: pytest.skip(f"no CPU device here: {e}")
  assert Tensor.cat(*xs).sum().item() == 2 * sum(range(300))

@pytest.mark.parametrize("call", [lambda: core.unregister(weakref.ref(Tensor([1.0]))), lambda: ops.UOpMeta.ucache.forget("str"),
                                  lambda: core.walk(cache.Walk.__new__(cache.Walk), UOp(Ops.SINK), ())])
def test_bad_callback_and_walk_arguments_raise(call):
  with pytest.raises((TypeError, AttributeError)): call()

def test_deeply_nested_args_raise_recursion_error_as_python():
  arg = ()
  for _ in range(2 * sys.getrecursionlimit()): arg = (arg, 1.0)
  with pytest.raises(RecursionError): core.arg_key(arg)

@pytest.mark.parametrize("shape", [(), (2, 3), (0, 4), (2, -1), (True, 2), (2.0,), [3, 4], (2**70,), (-2**70,)], ids=repr)
def test_plain_sizes_matches_python(shape):
  assert core.plain_sizes(shape) == python_version(ops, "_plain_sizes")(shape)

def test_movement_matches_python():
  x = (Tensor.ones(2, 3) + 1).uop
  for op, shape, arg in [(Ops.RESHAPE, (3, 2), None), (Ops.PERMUTE, (3, 2), (1, 0)), (Ops.EXPAND, (4, 2, 3), None)]:
    src = x if op is not Ops.EXPAND else core.movement(Ops.RESHAPE, x, (1, 2, 3))
    got, want = core.movement(op, src, shape, arg), python_version(ops, "_movement")(op, src, shape, arg)
    assert got is want and got.shape == shape and got.device == x.device and got.tensor_level

INDEXES = [0, -1, 3, -4, 4, -5, (1, 2), (slice(None),), (slice(1, 3),), (slice(-2, None),), (slice(5, 1),), (slice(None, None, 1),),
           (Ellipsis, 2), (None, 0), (slice(None), None, 1), (0, Ellipsis, None), (Ellipsis, Ellipsis), (slice(None, None, 2),),
           (slice(None, None, -1),), (True,), (1.0,), ([0, 1],), (0, 1, 2, 0), (slice(0, 2), slice(1, 2), slice(None)), (2**70,),
           (slice(2**70),), (slice(None, None, 2**70),), Ellipsis, None, ()]

@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_plain_view_matches_python(index):
  from fusegrad.tensor import indexing
  u = (Tensor.ones(4, 3, 2) + 0).uop
  try: want = python_version(indexing, "_plain_view")(u, index)
  except Exception as e:
    with pytest.raises(type(e)): core.plain_view(u, index)
    return
  assert core.plain_view(u, index) is want
