"""codegen/lowerer.py: lower_kernel turns a scheduled kernel AST into STOREs of scalar values over RANGEs, with movement ops
as index math. Kernels come from create_schedule; an independent evaluator below runs the lowered graph directly (no
linearizer, no renderer), and the PYTHON device runs the whole pipeline, both checked against numpy."""
import itertools, math
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from fusegrad import Tensor, dtypes
from fusegrad.schedule import create_schedule
from fusegrad.codegen.lowerer import lower_kernel
from fusegrad.engine.realize import run_schedule
from fusegrad.uop.ops import GroupOp, Ops, exec_alu

INDEX_OPS = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.NEG, Ops.RANGE, Ops.CONST}

def source(shape) -> tuple[Tensor, np.ndarray]:
  """A realized float32 input holding 1..n, so a padded 0 or a wrong index shows in the values."""
  a = np.arange(1, math.prod(shape) + 1, dtype=np.float32).reshape(shape)
  return Tensor(a).realize(), a

def kernels(t: Tensor):
  items, _ = create_schedule([t.uop])
  return items

def lowered(t: Tensor):
  """t's last kernel, lowered, and its schedule item; the kernels before it (if any) are run so its inputs exist."""
  items = kernels(t)
  run_schedule(items[:-1])
  return lower_kernel(items[-1].ast), items[-1]

def store_of(k):
  assert k.op is Ops.SINK and len(k.src) == 1 and k.src[0].op is Ops.STORE
  return k.src[0]

def output_ranges(k):
  """The store's loop variables, outermost first (the lowerer numbers ranges in creation order)."""
  return sorted((u for u in store_of(k).src[1].toposort() if u.op is Ops.RANGE), key=lambda r: r.arg)

def reduce_identity(op, dtype):
  return {Ops.ADD: 0, Ops.MUL: 1}.get(op, -math.inf if dtypes.is_float(dtype) else dtypes.min(dtype))

class Evaluator:
  """Evaluates a lowered kernel graph point by point: RANGEs take values from the environment, a REDUCE loops over its own
  ranges, a gated LOAD reads only where its gate holds (and must then be in bounds)."""
  def __init__(self, bufs: list[list], var_vals: dict | None = None): self.bufs, self.var_vals, self.loads = bufs, var_vals or {}, 0
  def ev(self, u, env: dict, memo: dict):
    if u in memo: return memo[u]
    if u.op is Ops.RANGE: v = env[u]
    elif u.op is Ops.CONST: v = u.arg
    elif u.op is Ops.DEFINE_VAR: v = self.var_vals[u.arg[0]]
    elif u.op is Ops.LOAD:
      if len(u.src) == 3 and not self.ev(u.src[2], env, memo): v = 0
      else:
        buf, i = self.bufs[u.src[0].arg], self.ev(u.src[1], env, memo)
        assert 0 <= i < len(buf), f"load at {i} out of bounds for a buffer of {len(buf)} with {env}"
        v, self.loads = buf[i], self.loads + 1
    elif u.op is Ops.REDUCE:
      v = reduce_identity(u.arg, u.dtype)
      for pt in itertools.product(*(range(r.src[0].arg) for r in u.src[1:])):
        v = exec_alu(u.arg, u.dtype, [v, self.ev(u.src[0], {**env, **dict(zip(u.src[1:], pt))}, {})])
    elif u.op is Ops.CAST: v = float(self.ev(u.src[0], env, memo)) if dtypes.is_float(u.dtype) else int(self.ev(u.src[0], env, memo))
    elif u.op in GroupOp.ALU: v = exec_alu(u.op, u.dtype, [self.ev(s, env, memo) for s in u.src])
    else: raise NotImplementedError(u.op)
    memo[u] = v
    return v
  def run(self, k, out_size: int) -> list:
    out = [None] * out_size
    st_ = store_of(k)
    rngs = output_ranges(k)
    for pt in itertools.product(*(range(r.src[0].arg) for r in rngs)):
      memo: dict = {}
      env = dict(zip(rngs, pt))
      i = self.ev(st_.src[1], env, memo)
      assert out[i] is None, f"store index {i} written twice"
      out[i] = self.ev(st_.src[2], env, memo)
    assert None not in out, "some output element was never stored"
    return out

def evaluate(t: Tensor, var_vals: dict | None = None) -> np.ndarray:
  """t's single kernel, lowered and evaluated by Evaluator on the kernel's input buffers."""
  k, si = lowered(t)
  bufs = [list(b.as_memoryview().cast(b.dtype.fmt)) if i else None for i, b in enumerate(si.bufs)]
  return np.array(Evaluator(bufs, var_vals).run(k, si.bufs[0].size), dtype=np.float64).reshape(t.shape)

# ---------------- structure

class TestStructure:
  def test_ranges_for_output_and_reduce_dims(self):
    x, _ = source((2, 3, 4))
    k, _ = lowered(x.sum((0, 2)))
    assert [r.src[0].arg for r in output_ranges(k)] == [3]
    reduces = [u for u in k.toposort() if u.op is Ops.REDUCE]
    assert len(reduces) == 1 and reduces[0].arg is Ops.ADD
    assert sorted(r.src[0].arg for r in reduces[0].src[1:]) == [2, 4]
    assert all(r.op is Ops.RANGE for r in reduces[0].src[1:])
    assert not set(reduces[0].src[1:]) & set(output_ranges(k)), "a reduce loops over an output range"

  def test_size_one_dims_get_no_range(self):
    x, _ = source((3, 1, 4))
    k, _ = lowered(x * 2)
    assert [r.src[0].arg for r in output_ranges(k)] == [3, 4]
    assert all(r.src[0].arg > 1 for r in k.toposort() if r.op is Ops.RANGE)

  def test_reduce_over_size_one_axis_is_no_reduce(self):
    x, a = source((3, 1))
    k, _ = lowered(x.sum(1) + 1)
    assert not [u for u in k.toposort() if u.op is Ops.REDUCE]
    np.testing.assert_array_equal(evaluate(x.sum(1) + 1), a.sum(1) + 1)

  def test_reduce_over_empty_axis_is_the_identity(self):
    x = Tensor(np.zeros((2, 0, 3), np.float32)).realize()
    for fn, want in ((lambda t: t.sum(1), 0.0), (lambda t: t.prod(1), 1.0)):
      assert evaluate(fn(x)).tolist() == [[want] * 3] * 2
      assert fn(x).tolist() == [[want] * 3] * 2  # the whole pipeline: no load may run, the loop is empty

  def test_loads_are_index_expressions_over_ranges(self):
    x, _ = source((4, 6))
    y, _ = source((6,))
    k, _ = lowered((x.flip(0).permute(1, 0) * y.reshape(6, 1)).sum(0))
    loads = [u for u in k.toposort() if u.op is Ops.LOAD]
    assert len(loads) == 2
    rngs = {u for u in k.toposort() if u.op is Ops.RANGE}
    for ld in loads:
      assert ld.src[0].op is Ops.DEFINE_GLOBAL and ld.src[1].dtype == dtypes.int64
      idx_nodes = ld.src[1].toposort()
      assert {u.op for u in idx_nodes} <= INDEX_OPS, f"non-index op in a load index: {({u.op for u in idx_nodes} - INDEX_OPS)}"
      assert {u for u in idx_nodes if u.op is Ops.RANGE} <= rngs

  def test_same_read_is_one_load(self):
    x, a = source((5,))
    k, _ = lowered(x * x + x)
    assert len([u for u in k.toposort() if u.op is Ops.LOAD]) == 1
    np.testing.assert_array_equal(evaluate(x * x + x), a * a + a)

  def test_split_reshape_needs_no_division(self):
    x, a = source((6, 4))
    k, _ = lowered(x.reshape(2, 3, 4) + 1)
    assert not [u for u in k.toposort() if u.op in (Ops.IDIV, Ops.MOD)], "splitting a dim needs no div/mod"
    np.testing.assert_array_equal(evaluate(x.reshape(2, 3, 4) + 1), a.reshape(2, 3, 4) + 1)
    k, _ = lowered(x.permute(1, 0).reshape(3, 8) + 1)  # a transposed read regrouped: here div/mod is needed
    assert [u for u in k.toposort() if u.op in (Ops.IDIV, Ops.MOD)]
    np.testing.assert_array_equal(evaluate(x.permute(1, 0).reshape(3, 8) + 1), a.T.reshape(3, 8) + 1)

# ---------------- index math of single movement ops

def load_index(t: Tensor):
  """(output ranges, the single LOAD) of t's lowered kernel."""
  k, _ = lowered(t)
  loads = [u for u in k.toposort() if u.op is Ops.LOAD]
  assert len(loads) == 1
  return output_ranges(k), loads[0]

class TestIndexMath:
  def test_flip_maps_i_to_n_minus_1_minus_i(self):
    x, _ = source((7,))
    (r,), ld = load_index(x.flip(0))
    assert [Evaluator([]).ev(ld.src[1], {r: i}, {}) for i in range(7)] == [6 - i for i in range(7)]

  def test_flip_one_axis_of_two(self):
    x, _ = source((3, 5))
    (r0, r1), ld = load_index(x.flip(1))
    for i, j in itertools.product(range(3), range(5)):
      assert Evaluator([]).ev(ld.src[1], {r0: i, r1: j}, {}) == i * 5 + (4 - j)

  def test_pad_gates_the_load(self):
    x, _ = source((3, 4))
    (r0, r1), ld = load_index(x.pad(((1, 2), (0, 3))))
    assert len(ld.src) == 3, "a padded read has no validity condition"
    for i, j in itertools.product(range(6), range(7)):
      valid = Evaluator([]).ev(ld.src[2], {r0: i, r1: j}, {})
      assert valid == (1 <= i < 4 and j < 4), (i, j)
      if valid: assert Evaluator([]).ev(ld.src[1], {r0: i, r1: j}, {}) == (i - 1) * 4 + j

  def test_pad_selects_zero_outside(self):
    # a padded value is selected against 0 outside the source; a padded load needs no select (its gate gives 0 there)
    x, _ = source((2,))
    k, _ = lowered((x + 1).pad(((1, 1),)))
    wheres = [u for u in k.toposort() if u.op is Ops.WHERE]
    assert len(wheres) == 1 and wheres[0].src[2].op is Ops.CONST and wheres[0].src[2].arg == 0
    k, _ = lowered(x.pad(((1, 1),)).pad(((2, 0),)))
    assert not any(u.op is Ops.WHERE for u in k.toposort()) and [len(u.src) for u in k.toposort() if u.op is Ops.LOAD] == [3]

  def test_unpadded_read_has_no_gate(self):
    x, _ = source((3, 4))
    _, ld = load_index(x.shrink(((1, 3), (0, 4))).flip(0).permute(1, 0))
    assert len(ld.src) == 2

  def test_shrink_adds_an_offset(self):
    x, _ = source((5, 6))
    (r0, r1), ld = load_index(x.T.shrink(((2, 6), (1, 4))).T)  # (a shrink of a buffer itself is a window: below)
    for i, j in itertools.product(range(3), range(4)):
      assert Evaluator([]).ev(ld.src[1], {r0: i, r1: j}, {}) == (i + 1) * 6 + (j + 2)

  def test_a_box_of_an_input_is_read_from_its_first_element(self):
    from fusegrad.schedule.kernel import Window
    x, _ = source((5, 6))
    (r0, r1), ld = load_index(x.shrink(((1, 4), (2, 6))))
    for i, j in itertools.product(range(3), range(4)):
      assert Evaluator([]).ev(ld.src[1], {r0: i, r1: j}, {}) == i * 6 + j
    win = kernels(x.shrink(((1, 4), (2, 6))) * 1.0)[0].bufs[1]
    assert type(win) is Window and (win.start, win.size) == (8, 2 * 6 + 3 + 1)

  def test_expand_drops_the_range(self):
    x, _ = source((3, 1))
    (r0, r1), ld = load_index(x.expand(3, 4) * 1.0)
    assert r1 not in ld.src[1].toposort() and r0 in ld.src[1].toposort()

  def test_bound_variable_stays_a_variable(self):
    from fusegrad import Variable
    x, a = source((4,))
    v = Variable("v", 0, 9)
    t = x * Tensor(v.bind(3)).float()
    k, si = lowered(t)
    assert [u.arg[0] for u in k.toposort() if u.op is Ops.DEFINE_VAR] == ["v"]
    np.testing.assert_array_equal(evaluate(t, {"v": 7}), a * 7)

# ---------------- movement chains: evaluator and PYTHON device vs numpy

def np_pool(a, k, stride):
  w = np.lib.stride_tricks.sliding_window_view(a, k, axis=-1)
  return w[..., ::stride, :]

CHAINS = {
  "flip": ((5,), lambda t: t.flip(0), lambda a: a[::-1]),
  "flip_both": ((3, 4), lambda t: t.flip((0, 1)), lambda a: a[::-1, ::-1]),
  "pad": ((3, 4), lambda t: t.pad(((1, 2), (0, 3))), lambda a: np.pad(a, ((1, 2), (0, 3)))),
  "shrink": ((5, 6), lambda t: t.shrink(((1, 4), (2, 6))), lambda a: a[1:4, 2:6]),
  "expand": ((3, 1), lambda t: t.expand(3, 4), lambda a: np.broadcast_to(a, (3, 4))),
  "permute_reshape": ((3, 4), lambda t: t.permute(1, 0).reshape(2, 6), lambda a: a.T.reshape(2, 6)),
  "reshape_merge_split": ((2, 3, 4), lambda t: t.reshape(6, 4).reshape(3, 8), lambda a: a.reshape(3, 8)),
  "reshape_with_ones": ((6,), lambda t: t.reshape(1, 2, 1, 3, 1).permute(3, 1, 0, 2, 4).reshape(6), lambda a: a.reshape(2, 3).T.reshape(6)),
  "pad_then_flip": ((4,), lambda t: t.pad(((2, 1),)).flip(0), lambda a: np.pad(a, (2, 1))[::-1]),
  "flip_then_pad": ((4,), lambda t: t.flip(0).pad(((2, 1),)), lambda a: np.pad(a[::-1], (2, 1))),
  "pad_then_shrink_into_pad": ((3, 3), lambda t: t.pad(((2, 2), (1, 1))).shrink(((1, 6), (0, 4))),
                               lambda a: np.pad(a, ((2, 2), (1, 1)))[1:6, 0:4]),
  "nested_pads": ((2, 2), lambda t: t.pad(((1, 0), (0, 1))).flip(1).pad(((0, 2), (1, 1))),
                  lambda a: np.pad(np.pad(a, ((1, 0), (0, 1)))[:, ::-1], ((0, 2), (1, 1)))),
  "expand_reshape_flip": ((3, 1), lambda t: t.expand(3, 4).reshape(2, 6).flip(1), lambda a: np.broadcast_to(a, (3, 4)).reshape(2, 6)[:, ::-1]),
  "negative_step_slice": ((9,), lambda t: t[::-2], lambda a: a[::-2]),
  "strided_2d_slice": ((5, 7), lambda t: t[1::2, ::-3], lambda a: a[1::2, ::-3]),
  "window": ((2, 9), lambda t: t._pool((3,), stride=2), lambda a: np_pool(a, 3, 2)),
  "window_of_flip_pad": ((7,), lambda t: t.flip(0).pad(((1, 1),))._pool((2,), stride=3), lambda a: np_pool(np.pad(a[::-1], 1), 2, 3)),
  "sum_of_flip": ((4, 5), lambda t: t.flip(1).sum(1), lambda a: a[:, ::-1].sum(1)),
  "max_of_padded": ((3, 4), lambda t: (t - 20).pad(((0, 0), (1, 2))).max(1), lambda a: np.pad(a - 20, ((0, 0), (1, 2))).max(1)),
  "sum_of_permuted_shrink": ((4, 5, 3), lambda t: t.permute(2, 0, 1).shrink(((0, 3), (1, 3), (0, 5))).sum((1, 2)),
                             lambda a: a.transpose(2, 0, 1)[:, 1:3, :].sum((1, 2))),
  "expanded_sum": ((3, 1), lambda t: t.expand(3, 5).sum(0), lambda a: np.broadcast_to(a, (3, 5)).sum(0)),
}

@pytest.mark.parametrize("name", list(CHAINS))
def test_chain_matches_numpy(name):
  shape, fn, npfn = CHAINS[name]
  x, a = source(shape)
  want = npfn(a)
  np.testing.assert_array_equal(evaluate(fn(x) + 0.5), want + 0.5)  # the lowered graph itself
  np.testing.assert_array_equal(fn(x).numpy(), want)                 # the whole pipeline on PYTHON

# ---------------- random movement chains

MOVES = ("flip", "pad", "shrink", "permute", "reshape", "expand")

def apply_move(data, t: Tensor, a: np.ndarray):
  move, s = data.draw(st.sampled_from(MOVES)), a.shape
  if move == "flip":
    ax = tuple(i for i in range(a.ndim) if data.draw(st.booleans())) or (0,)
    return t.flip(ax), np.flip(a, ax)
  if move == "pad":
    p = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in s)
    return t.pad(p), np.pad(a, p)
  if move == "shrink":
    arg = []
    for n in s:
      b = data.draw(st.integers(0, n - 1))
      arg.append((b, data.draw(st.integers(b + 1, n))))
    return t.shrink(tuple(arg)), a[tuple(slice(b, e) for b, e in arg)]
  if move == "permute":
    p = tuple(data.draw(st.permutations(range(a.ndim))))
    return t.permute(p), a.transpose(p)
  if move == "reshape":
    n = a.size
    cands = [(n,)] + [(d, n // d) for d in range(2, n) if n % d == 0] + [(1,) + s, s + (1,)]
    new = data.draw(st.sampled_from([c for c in cands if len(c) <= 4]))
    return t.reshape(new), a.reshape(new)
  new = s + (data.draw(st.integers(2, 3)),)
  return t.reshape(s + (1,)).expand(new), np.broadcast_to(a.reshape(s + (1,)), new)

@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_movement_chain(data):
  shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3), label="shape"))
  x, a = source(shape)
  t = x
  for _ in range(data.draw(st.integers(1, 4))):
    if t.numel() > 300: break
    t, a = apply_move(data, t, a)
  red = data.draw(st.sampled_from([None, "sum", "max"]))
  if red is not None:
    ax = data.draw(st.integers(0, a.ndim - 1))
    if a.shape[ax] == 0 or t.numel() == 0: return  # an empty reduce: test_reduce_over_empty_axis_is_the_identity
    t, a = getattr(t, red)(ax), a.sum(ax) if red == "sum" else a.max(ax)
  if t.numel() == 0: return
  np.testing.assert_array_equal(evaluate(t * 2.0), a * 2.0)
