import gc, math, pickle, weakref
from fusegrad.dtype import dtypes
from fusegrad.uop.ops import Ops, UOp, UOpMeta

def c(v, dt=dtypes.int32): return UOp.const(dt, v)
def rng(n: int, i: int = 0): return UOp(Ops.RANGE, dtypes.int32, (c(n),), i)

class TestHashCons:
  def test_same_node_is_same_object(self):
    a = UOp(Ops.ADD, dtypes.int32, (c(1), c(2)))
    b = UOp(Ops.ADD, dtypes.int32, (c(1), c(2)))
    assert a is b and a == b and hash(a) == hash(b)

  def test_operator_builders_share_nodes(self):
    x = rng(8)
    assert (x + 1) is (x + 1)
    assert (x * 4 + 3) is (x * 4 + 3)
    assert (x + 1) is not (x + 2)

  def test_different_op_dtype_arg_src_are_distinct(self):
    base = UOp(Ops.ADD, dtypes.int32, (c(1), c(2)))
    assert UOp(Ops.MUL, dtypes.int32, (c(1), c(2))) is not base
    assert UOp(Ops.ADD, dtypes.int64, (c(1), c(2))) is not base
    assert UOp(Ops.ADD, dtypes.int32, (c(2), c(1))) is not base
    assert UOp(Ops.ADD, dtypes.int32, (c(1), c(2)), 0) is not base

  def test_int_float_bool_consts_distinct(self):
    one_i = UOp(Ops.CONST, dtypes.int32, (), 1)
    one_f = UOp(Ops.CONST, dtypes.int32, (), 1.0)
    one_b = UOp(Ops.CONST, dtypes.int32, (), True)
    assert len({id(one_i), id(one_f), id(one_b)}) == 3
    assert type(one_i.arg) is int and type(one_f.arg) is float and type(one_b.arg) is bool

  def test_signed_zero_distinct(self):
    pz, nz = UOp(Ops.CONST, dtypes.float32, (), 0.0), UOp(Ops.CONST, dtypes.float32, (), -0.0)
    assert pz is not nz
    assert math.copysign(1, pz.arg) == 1 and math.copysign(1, nz.arg) == -1
    assert c(-0.0, dtypes.float32) is nz and c(0.0, dtypes.float32) is pz

  def test_nan_const_is_shared(self):
    # nan != nan, but the node for the same bits is still one object
    assert c(math.nan, dtypes.float32) is c(math.nan, dtypes.float32)

  def test_tuple_args_with_floats_distinct(self):
    assert UOp(Ops.CONST, dtypes.float32, (), (1, 2.0)) is not UOp(Ops.CONST, dtypes.float32, (), (1, 2))
    assert UOp(Ops.RESHAPE, dtypes.float32, (c(1.0, dtypes.float32),), (1, 1)) is UOp(Ops.RESHAPE, dtypes.float32, (c(1.0, dtypes.float32),), (1, 1))

  def test_const_truncates_to_dtype(self):
    assert c(256, dtypes.uint8).arg == 0
    assert c(True, dtypes.int32).arg == 1 and type(c(True, dtypes.int32).arg) is int
    assert type(c(1, dtypes.float32).arg) is float
    assert c(1, dtypes.float32) is c(1.0, dtypes.float32)

  def test_replace(self):
    a = rng(4) + 1
    b = a.replace(op=Ops.MUL)
    assert b.op is Ops.MUL and b.src == a.src and b is (rng(4) * 1)
    assert a.replace() is a

  def test_pickle_roundtrip_is_same_node(self):
    a = rng(4) * 3 + 2
    assert pickle.loads(pickle.dumps(a)) is a

class TestLifetime:
  def test_unreferenced_graph_is_freed(self):
    # constants no other test uses, so nothing else holds these nodes
    x = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("lifetime_x", 0, 10))
    y = (x * 7919 + 104729) // 1299709
    refs = [weakref.ref(u) for u in y.toposort()]
    _ = y.vmin, y.vmax, y.device  # cached properties must not keep anything alive
    del x, y
    assert all(r() is None for r in refs), "hash-consed nodes outlived their last reference (without gc)"

  def test_cache_does_not_grow(self):
    gc.collect()
    before = len(UOpMeta.ucache)
    for i in range(200): _ = (rng(1000 + i) + i) * 2
    del _
    gc.collect()
    assert len(UOpMeta.ucache) <= before + 2

  def test_rebuild_after_free_is_equal(self):
    a = rng(5, 77) + 3
    old_id = id(a)
    del a
    b = rng(5, 77) + 3
    assert b.op is Ops.ADD and b.src[1].arg == 3
    del old_id

class TestGraphWalk:
  def test_toposort_sources_first_and_unique(self):
    x = rng(8)
    a = x + 1
    b = a * a
    s = b + a
    order = s.toposort()
    assert order[-1] is s
    assert len(order) == len(set(map(id, order)))
    pos = {id(u): i for i, u in enumerate(order)}
    for u in order:
      for src in u.src: assert pos[id(src)] < pos[id(u)]
    assert set(map(id, order)) == {id(u) for u in (x, x.src[0], c(1), a, b, s)}

  def test_toposort_stop(self):
    x = rng(8)
    a = x + 1
    s = a * 2
    order = s.toposort(stop=lambda u: u is a)
    assert a in order and x not in order

  def test_toposort_deep_chain(self):
    x = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("deep", 0, 1))
    y = x
    for i in range(5000): y = UOp(Ops.NEG, dtypes.int32, (y,))
    order = y.toposort()
    assert len(order) == 5001 and order[0] is x and order[-1] is y

  def test_substitute(self):
    x, z = rng(8, 0), rng(4, 1)
    a = x * 2 + 1
    shared = c(5)
    e = a * shared + x
    out = e.substitute({x: z})
    assert out is (z * 2 + 1) * shared + z
    assert e.substitute({}) is e
    assert e.substitute({a: shared}) is shared * shared + x

  def test_substitute_keeps_unrelated_nodes(self):
    x, y, z = rng(8, 0), rng(8, 1), rng(8, 2)
    e = (x + 1) * (y + 1)
    out = e.substitute({x: z})
    assert out.src[1] is (y + 1) and out.src[0] is (z + 1)

  def test_scalar_shapes(self):
    # a Variable (DEFINE_VAR) is a scalar like a CONST
    from fusegrad import Variable
    assert c(3).shape == () and Variable("scalar_v", 0, 10).shape == ()

  def test_permutes_compose_and_cancel(self):
    # a channels-last buffer viewed channels first and then channels last again is the buffer: its contiguous() is free
    x = UOp(Ops.BUFFER, dtypes.float32, (UOp(Ops.DEVICE, arg="PYTHON"),), (654321, 120)).reshape((2, 3, 4, 5))
    assert x.permute((0, 2, 3, 1)).permute((0, 3, 1, 2)) is x
    assert x.permute((1, 0, 2, 3)).permute((0, 2, 1, 3)) is x.permute((1, 2, 0, 3))
    c = x.permute((0, 2, 3, 1)).contiguous()
    assert c.op is Ops.CONTIGUOUS and c.contiguous() is c and c.reshape((2, 60)).contiguous().op is Ops.RESHAPE

  def test_device_and_shape(self):
    dev = UOp(Ops.DEVICE, arg="PYTHON")
    buf = UOp(Ops.BUFFER, dtypes.float32, (dev,), (123456, 6))
    r = UOp(Ops.RESHAPE, dtypes.float32, (buf,), (2, 3))
    p = UOp(Ops.PERMUTE, dtypes.float32, (r,), (1, 0))
    pad = UOp(Ops.PAD, dtypes.float32, (p,), ((1, 0), (0, 2)))
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (pad,), (Ops.ADD, (1,)))
    assert buf.shape == (6,) and r.shape == (2, 3) and p.shape == (3, 2) and pad.shape == (4, 4) and red.shape == (4, 1)
    assert red.device == "PYTHON" and red.base is red and p.base is buf
