import pytest
from fusegrad import Tensor, dtypes, Context
from fusegrad.schedule import create_schedule
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.spec import verify_kernel, verify_tensor_graph

F, I, B = dtypes.float32, dtypes.int32, dtypes.bool  # noqa: E741  (I is int32, beside F and B)
DEV = UOp(Ops.DEVICE, arg="PYTHON")
def sink(*u): return UOp(Ops.SINK, dtypes.void, tuple(u))
def buf(n: int, dt=F, i: int = 10**9): return UOp(Ops.BUFFER, dt, (DEV,), (i, n))
def tconst(v, dt=F, shape=(4,)):
  c = UOp(Ops.CONST, dt, (DEV,), v)
  return UOp(Ops.EXPAND, dt, (UOp(Ops.RESHAPE, dt, (c,), (1,) * len(shape)),), shape)
def mop(op, x, arg): return UOp(op, x.dtype.base, (x,), arg)
def glob(n: int, dt=F, i: int = 0): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), (), i)
def kconst(v, dt=F, shape=(4,)):
  return UOp(Ops.EXPAND, dt, (UOp(Ops.RESHAPE, dt, (UOp(Ops.CONST, dt, (), v),), (1,) * len(shape)),), shape)
def kernel(value, n=None, i=0):
  return sink(UOp(Ops.STORE, dtypes.void, (glob(n if n is not None else value.size, value.dtype, i), value)))
def bad_tensor(u, match):
  with pytest.raises(ValueError, match=match): verify_tensor_graph(sink(u))
def bad_kernel(ast, match):
  with pytest.raises(ValueError, match=match): verify_kernel(ast)

def sample_tensors():
  a = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
  b = Tensor([[1, 2, 3], [4, 5, 6]], dtype=dtypes.int32)
  return [a + 1, (a * b).sum(1), a.T @ a, a.softmax(-1), (a > 2).where(a, 0.0), a.pad(((1, 0), (0, 2))), a.flip(0)[:, 1:],
          a.reshape(3, 2).permute(1, 0).expand(2, 2, 3), b // 2, b % 3, a.max(), a.mean(0), Tensor.arange(6).reshape(2, 3) + b,
          a.cast(dtypes.int8), a.bitcast(dtypes.int32), (b << 1) ^ b, a.exp().log().sqrt(), Tensor.ones(3) * 2 + 1, a.half().float(),
          a.cat(a, dim=1), a.relu().sum(), b.max(1), a.min(0), a.argmax(1), a.std(), Tensor.eye(3), Tensor.rand(3)]

class TestValidGraphsPass:
  def test_tensor_graphs(self):
    for t in sample_tensors(): verify_tensor_graph(sink(t.uop))

  def test_scheduled_kernels(self):
    items, _ = create_schedule([t.uop for t in sample_tensors()])
    assert len(items) > 5
    for si in items: verify_kernel(si.ast)

  def test_realize_with_spec_on(self):
    # SPEC=1 makes realize verify every kernel before compiling it
    with Context(SPEC=1):
      vals = [t.tolist() for t in sample_tensors()]
    assert vals[0] == [[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]]

  def test_handmade_valid(self):
    x = mop(Ops.RESHAPE, buf(6), (2, 3))
    verify_tensor_graph(sink(UOp(Ops.ADD, F, (x, tconst(1.0, F, (2, 3))))))
    k = mop(Ops.RESHAPE, glob(6, F, 1), (2, 3))
    verify_kernel(kernel(UOp(Ops.MUL, F, (k, kconst(2.0, F, (2, 3))))))

class TestMalformedTensorGraph:
  def test_elementwise_shape_mismatch(self):
    bad_tensor(UOp(Ops.ADD, F, (buf(4), buf(5))), r"ADD.*different shapes.*\(4,\).*\(5,\)")

  def test_alu_dtype_mismatch(self):
    bad_tensor(UOp(Ops.ADD, F, (buf(4), buf(4, I))), r"ADD.*mismatched dtypes")
    bad_tensor(UOp(Ops.MUL, I, (buf(4), buf(4))), r"MUL.*result dtype")
    bad_tensor(UOp(Ops.NEG, I, (buf(4),)), r"NEG")

  def test_comparison_returns_bool(self):
    verify_tensor_graph(sink(UOp(Ops.CMPLT, B, (buf(4), buf(4)))))
    bad_tensor(UOp(Ops.CMPLT, F, (buf(4), buf(4))), r"CMPLT.*bool")
    bad_tensor(UOp(Ops.CMPNE, B, (buf(4), buf(4, I))), r"CMPNE.*mismatched dtypes")

  def test_where(self):
    cond = UOp(Ops.CMPLT, B, (buf(4), buf(4)))
    verify_tensor_graph(sink(UOp(Ops.WHERE, F, (cond, buf(4), buf(4)))))
    bad_tensor(UOp(Ops.WHERE, F, (buf(4), buf(4), buf(4))), r"WHERE.*condition must be bool")
    bad_tensor(UOp(Ops.WHERE, F, (cond, buf(4), buf(4, I))), r"WHERE.*branches")
    bad_tensor(UOp(Ops.WHERE, F, (cond, buf(4), buf(5))), r"WHERE.*different shapes")

  def test_float_op_on_int(self):
    bad_tensor(UOp(Ops.EXP2, I, (buf(4, I),)), r"EXP2.*float")
    bad_tensor(UOp(Ops.XOR, F, (buf(4), buf(4))), r"XOR.*int or bool")

  def test_wrong_arity(self):
    bad_tensor(UOp(Ops.ADD, F, (buf(4),)), r"ADD.*2 source")

  def test_bitcast_size(self):
    verify_tensor_graph(sink(UOp(Ops.BITCAST, I, (buf(4),))))
    bad_tensor(UOp(Ops.BITCAST, dtypes.int16, (buf(4),)), r"BITCAST.*item size")

  def test_reshape_changes_count(self):
    bad_tensor(mop(Ops.RESHAPE, buf(6), (4, 2)), r"RESHAPE.*element count.*\(6,\).*\(4, 2\)")

  def test_permute_not_permutation(self):
    x = mop(Ops.RESHAPE, buf(6), (2, 3))
    bad_tensor(mop(Ops.PERMUTE, x, (0, 0)), r"PERMUTE.*not a permutation")
    bad_tensor(mop(Ops.PERMUTE, x, (0, 1, 2)), r"PERMUTE")

  def test_expand_non_one_dim(self):
    x = mop(Ops.RESHAPE, buf(6), (2, 3))
    verify_tensor_graph(sink(mop(Ops.EXPAND, mop(Ops.RESHAPE, x, (2, 1, 3)), (2, 5, 3))))
    bad_tensor(mop(Ops.EXPAND, x, (4, 3)), r"EXPAND.*size 1")
    bad_tensor(mop(Ops.EXPAND, x, (2, 3, 1)), r"EXPAND.*one entry per dim")

  def test_pad_and_shrink_arg_length(self):
    x = mop(Ops.RESHAPE, buf(6), (2, 3))
    bad_tensor(mop(Ops.PAD, x, ((1, 1),)), r"PAD.*one entry per dim")
    bad_tensor(mop(Ops.PAD, x, ((1, 1), (-1, 0))), r"PAD.*non-negative")
    bad_tensor(mop(Ops.SHRINK, x, ((0, 1),)), r"SHRINK.*one entry per dim")
    bad_tensor(mop(Ops.SHRINK, x, ((0, 1), (2, 4))), r"SHRINK.*start, end")
    bad_tensor(mop(Ops.SHRINK, x, ((1, 0), (0, 3))), r"SHRINK")

  def test_flip_arg(self):
    x = mop(Ops.RESHAPE, buf(6), (2, 3))
    verify_tensor_graph(sink(mop(Ops.FLIP, x, (True, False))))
    bad_tensor(mop(Ops.FLIP, x, (True,)), r"FLIP")

  def test_movement_changes_dtype(self):
    bad_tensor(UOp(Ops.RESHAPE, I, (buf(6),), (2, 3)), r"RESHAPE.*dtype")

  def test_reduce_axis(self):
    x = mop(Ops.RESHAPE, buf(6), (2, 3))
    verify_tensor_graph(sink(UOp(Ops.REDUCE_AXIS, F, (x,), (Ops.ADD, (0, 1)))))
    bad_tensor(UOp(Ops.REDUCE_AXIS, F, (x,), (Ops.ADD, (2,))), r"REDUCE_AXIS.*out of range")
    bad_tensor(UOp(Ops.REDUCE_AXIS, F, (x,), (Ops.ADD, (-1,))), r"REDUCE_AXIS.*out of range")
    bad_tensor(UOp(Ops.REDUCE_AXIS, F, (x,), (Ops.SUB, (0,))), r"REDUCE_AXIS.*not a reduce op")
    bad_tensor(UOp(Ops.REDUCE_AXIS, I, (x,), (Ops.ADD, (0,))), r"REDUCE_AXIS.*dtype")

  def test_const_value_must_match_dtype(self):
    bad_tensor(tconst(1.5, I), r"CONST.*not a dtypes.int value")
    bad_tensor(tconst(1, F), r"CONST.*not a dtypes.float value")
    bad_tensor(tconst(300, dtypes.uint8), r"CONST")

  def test_kernel_ops_not_in_tensor_graph(self):
    bad_tensor(UOp(Ops.STORE, dtypes.void, (glob(4), buf(4))), r"DEFINE_GLOBAL.*kernel-level")
    bad_tensor(UOp(Ops.STORE, dtypes.void, (buf(4), buf(4))), r"STORE.*kernel-level")
    bad_tensor(UOp(Ops.ADD, F, (glob(4), buf(4))), r"DEFINE_GLOBAL.*kernel-level")

  def test_bind(self):
    from fusegrad import Variable
    v = Variable("spec_v", 0, 10)
    verify_tensor_graph(sink(v.bind(3)))
    bad_tensor(UOp(Ops.BIND, I, (v, UOp.const(I, 11))), r"BIND.*outside the bounds")
    bad_tensor(UOp(Ops.BIND, I, (UOp.const(I, 1), UOp.const(I, 1))), r"BIND.*DEFINE_VAR")
    bad_kernel(sink(UOp(Ops.STORE, dtypes.void, (glob(1, I), mop(Ops.RESHAPE, v.bind(3), (1,))))), r"BIND.*tensor-level")

  def test_gather(self):
    x = mop(Ops.RESHAPE, buf(6), (2, 3))
    idx = mop(Ops.RESHAPE, buf(4, I, 10**9 + 5), (2, 2))
    verify_tensor_graph(sink(UOp(Ops.GATHER, F, (x, idx), 1)))
    bad_tensor(UOp(Ops.GATHER, F, (x, idx), 0), r"GATHER.*index shape")
    bad_tensor(UOp(Ops.GATHER, F, (x, idx), 2), r"GATHER.*out of range")
    bad_tensor(UOp(Ops.GATHER, F, (x, mop(Ops.RESHAPE, buf(4), (2, 2))), 1), r"GATHER.*integer")

  def test_nested_sink(self):
    bad_tensor(sink(buf(4)), r"SINK.*root")

  def test_mixed_devices(self):
    other = UOp(Ops.BUFFER, F, (UOp(Ops.DEVICE, arg="NULL"),), (10**9 + 1, 4))
    bad_tensor(UOp(Ops.ADD, F, (buf(4), other)), r"mixes devices")

  def test_error_names_the_problem_node_deep_inside(self):
    x = mop(Ops.RESHAPE, buf(6), (2, 3))
    bad = mop(Ops.PERMUTE, x, (1, 1))
    good_on_top = UOp(Ops.EXP2, F, (UOp(Ops.ADD, F, (bad, bad)),))
    bad_tensor(good_on_top, r"^invalid tensor graph: PERMUTE")

class TestMalformedKernel:
  def test_permuted_store_names_each_dim_once(self):
    v = mop(Ops.RESHAPE, glob(6, F, 1), (2, 3))
    def permuted(order): return sink(UOp(Ops.STORE, dtypes.void, (glob(6), v, UOp(Ops.PERMUTE, dtypes.void, (), order))))
    verify_kernel(permuted((1, 0)))
    bad_kernel(permuted((0, 0)), r"permutes a \(2, 3\) value by \(0, 0\)")
    bad_kernel(permuted((1, 0, 2)), r"permutes")

  def test_root_must_be_sink_of_stores(self):
    v = mop(Ops.RESHAPE, glob(6, F, 1), (2, 3))
    bad_kernel(UOp(Ops.STORE, dtypes.void, (glob(6), v)), r"root must be a SINK")
    bad_kernel(sink(v), r"STORE")
    bad_kernel(sink(), r"no sources")

  def test_store_outside_sink(self):
    v = glob(4, F, 1)
    st = UOp(Ops.STORE, dtypes.void, (glob(4, F, 2), v))
    inner = UOp(Ops.STORE, dtypes.void, (glob(4), UOp(Ops.ADD, F, (v, v))))
    nested = UOp(Ops.SINK, dtypes.void, (inner, UOp(Ops.STORE, dtypes.void, (glob(4, F, 3), UOp(Ops.CAST, F, (st,))))))
    bad_kernel(nested, r"STORE.*direct source of the kernel's SINK")

  def test_store_size_and_dtype(self):
    v = mop(Ops.RESHAPE, glob(6, F, 1), (2, 3))
    bad_kernel(kernel(v, n=5), r"STORE.*6 elements.*buffer of 5")
    bad_kernel(sink(UOp(Ops.STORE, dtypes.void, (glob(6, I), v))), r"STORE.*float")
    bad_kernel(sink(UOp(Ops.STORE, dtypes.void, (v, v))), r"STORE.*DEFINE_GLOBAL")

  def test_two_stores_same_buffer(self):
    v = glob(4, F, 1)
    st = UOp(Ops.STORE, dtypes.void, (glob(4), v))
    st2 = UOp(Ops.STORE, dtypes.void, (glob(4), UOp(Ops.NEG, F, (v,))))
    bad_kernel(sink(st, st2), r"same buffer")

  def test_tensor_ops_not_in_kernel(self):
    bad_kernel(kernel(UOp(Ops.BUFFER, F, (), (10**9, 4))), r"BUFFER.*tensor-level")
    bad_kernel(kernel(buf(4)), r"DEVICE.*tensor-level")
    bad_kernel(kernel(tconst(1.0)), r"DEVICE.*tensor-level")

  def test_lowered_ops_not_in_kernel(self):
    r = UOp(Ops.RANGE, I, (UOp.const(I, 4),), 0)
    bad_kernel(sink(UOp(Ops.STORE, dtypes.void, (glob(4, I), UOp(Ops.ADD, I, (r, r))))), r"RANGE.*lowered")

  def test_define_global_needs_pointer(self):
    g = UOp(Ops.DEFINE_GLOBAL, F, (), 1)
    bad_kernel(sink(UOp(Ops.STORE, dtypes.void, (glob(1), UOp(Ops.NEG, F, (g,))))), r"DEFINE_GLOBAL.*pointer")

  def test_same_checks_as_tensor_level(self):
    g = mop(Ops.RESHAPE, glob(6, F, 1), (2, 3))
    bad_kernel(kernel(UOp(Ops.ADD, F, (g, kconst(1.0, F, (3, 2))))), r"ADD.*different shapes")
    bad_kernel(kernel(UOp(Ops.ADD, F, (g, kconst(1, I, (2, 3))))), r"ADD.*mismatched dtypes")
    bad_kernel(kernel(UOp(Ops.WHERE, F, (g, g, g))), r"WHERE.*bool")
    bad_kernel(kernel(mop(Ops.RESHAPE, g, (5,)), n=6), r"RESHAPE.*element count")
    bad_kernel(kernel(mop(Ops.PERMUTE, g, (1, 2)), n=6), r"PERMUTE")
    bad_kernel(kernel(mop(Ops.EXPAND, g, (4, 3))), r"EXPAND")
    bad_kernel(kernel(mop(Ops.PAD, g, ((0, 1),)), n=6), r"PAD")
    bad_kernel(kernel(mop(Ops.SHRINK, g, ((0, 1), (0, 1), (0, 1))), n=3), r"SHRINK")
    bad_kernel(kernel(UOp(Ops.REDUCE_AXIS, F, (g,), (Ops.MAX, (0, 5)))), r"REDUCE_AXIS.*out of range")

  def test_kernel_const_has_no_device(self):
    verify_kernel(kernel(kconst(1.0)))
    bad_kernel(kernel(tconst(1.0)), r"DEVICE.*tensor-level")
    bad_tensor(UOp(Ops.EXPAND, F, (UOp(Ops.RESHAPE, F, (UOp(Ops.CONST, F, (buf(1),), 1.0),), (1,)),), (4,)), r"CONST.*DEVICE")

  def test_spec_flag_catches_bad_kernel_in_realize(self):
    # realize verifies the kernel before lowering when SPEC is set
    from fusegrad.engine.realize import get_program
    g = mop(Ops.RESHAPE, glob(6, F, 1), (2, 3))
    with Context(SPEC=1):
      with pytest.raises(ValueError, match="PERMUTE"): get_program("PYTHON", kernel(mop(Ops.PERMUTE, g, (0, 0))))
