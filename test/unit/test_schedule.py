"""Fusion decisions, checked by counting kernels (GlobalCounters), not by timing."""
import numpy as np
from fusegrad import Tensor, GlobalCounters, Device
from fusegrad.schedule import create_schedule
from fusegrad.codegen.lowerer import lower_kernel
from fusegrad.codegen.linearize import linearize
from fusegrad.uop.ops import GroupOp, Ops

A = [[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]]
B = [[0.5, 1.0, -1.5], [2.0, -0.5, 1.0]]
C = [[2.0, 0.0, 1.0], [1.0, 3.0, -1.0]]

def inputs(*arrs):
  out = [Tensor(a).realize() for a in arrs]
  return out[0] if len(out) == 1 else out

def count(*ts: Tensor) -> int:
  """Kernels launched to realize ts (inputs must already be realized)."""
  GlobalCounters.reset()
  Tensor.realize_all(*ts)
  return GlobalCounters.kernel_count

def close(t: Tensor, want, tol=1e-5): np.testing.assert_allclose(t.numpy(), np.asarray(want, dtype=np.float32), rtol=tol, atol=tol)

class TestFusion:
  def test_elementwise_relu_sum_is_one_kernel(self):
    a, b, c = inputs(A, B, C)
    out = (a + b * c).relu().sum()
    assert count(out) == 1
    na, nb, nc = map(np.array, (A, B, C))
    close(out, np.maximum(na + nb * nc, 0).sum())

  def test_matmul_is_one_kernel(self):
    a, m = inputs(A, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out = a @ m
    assert count(out) == 1
    close(out, np.array(A) @ np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))

  def test_batched_matmul_is_one_kernel(self):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
    y = np.arange(16, dtype=np.float32).reshape(2, 4, 2) / 10
    tx, ty = inputs(x, y)
    out = tx @ ty
    assert count(out) == 1
    close(out, x @ y)

  def test_softmax_over_rows_is_one_kernel(self):
    x = inputs(A)
    out = x.softmax(-1)
    assert count(out) == 1
    e = np.exp(np.array(A) - np.max(A, axis=-1, keepdims=True))
    close(out, e / e.sum(-1, keepdims=True))

  def test_elementwise_chain_is_one_kernel(self):
    a, b = inputs(A, B)
    out = a
    for i in range(12): out = (out * b + i).maximum(a) - 0.5
    out = out.exp2().sqrt() / (b.abs() + 1)
    assert count(out) == 1

  def test_unary_chain_on_int_is_one_kernel(self):
    x = inputs([[1, 2, 3], [4, 5, 6]])
    out = ((x * 3 + 1) // 2) % 5 - x
    assert count(out) == 1
    n = np.array([[1, 2, 3], [4, 5, 6]])
    assert out.tolist() == (((n * 3 + 1) // 2) % 5 - n).tolist()

  def test_mean_is_one_kernel(self):
    x = inputs(A)
    out = x.mean()
    assert count(out) == 1
    close(out, np.mean(A))

  def test_sum_of_sum(self):
    x = inputs(A)
    out = x.sum(0).sum(0)
    assert count(out) == 1
    close(out, np.sum(A))

  def test_reduce_then_elementwise_is_one_kernel(self):
    x = inputs(A)
    out = (x.sum(1) * 2 + 1).exp2()
    assert count(out) == 1
    close(out, np.exp2(np.sum(A, 1) * 2 + 1))

  def test_two_targets_two_kernels(self):
    x = inputs(A)
    s, m = x.sum(), x.max()
    assert count(s, m) == 2
    close(s, np.sum(A)); close(m, np.max(A))

class TestMovementOps:
  def test_transpose_plus_one_is_one_kernel(self):
    a = inputs(A)
    out = a.T + 1
    assert count(out) == 1
    close(out, np.array(A).T + 1)

  def test_movement_chain_fuses(self):
    a = inputs(A)
    out = a.reshape(3, 2).permute(1, 0).reshape(2, 1, 3).expand(2, 4, 3).pad(((0, 0), (1, 1), (2, 0))).shrink(((0, 2), (1, 5), (1, 5))).flip(2) * 2
    assert count(out) == 1
    n = np.array(A).reshape(3, 2).T.reshape(2, 1, 3)
    n = np.pad(np.broadcast_to(n, (2, 4, 3)), ((0, 0), (1, 1), (2, 0)))[:, 1:5, 1:5][:, :, ::-1] * 2
    close(out, n)

  def test_each_movement_op_alone_plus_one(self):
    a = inputs(A)
    for t in (a.reshape(3, 2), a.permute(1, 0), a.reshape(2, 1, 3).expand(2, 4, 3), a.pad(((1, 0), (0, 2))),
              a.shrink(((0, 1), (1, 3))), a.flip(0), a[:, ::2], a[::-1, 1:]):
      assert count(t + 1) == 1

  def test_reshape_of_realized_needs_no_kernel(self):
    a = inputs(A)
    assert count(a.reshape(6)) == 0
    assert count(a.reshape(3, 2).reshape(1, 6)) == 0
    assert a.reshape(6).tolist() == [1.0, -2.0, 3.0, -4.0, 5.0, -6.0]

  def test_cat_is_one_kernel(self):
    a, b = inputs(A, B)
    out = a.cat(b, dim=1)
    assert count(out) == 1
    close(out, np.concatenate([A, B], axis=1))

class TestRealized:
  def test_realized_tensor_not_recomputed(self):
    a = inputs(A)
    b = (a + 1).realize()
    out = b * 2
    items, _ = create_schedule([out.uop])
    assert len(items) == 1
    ops = {u.op for u in items[0].ast.toposort()}
    assert Ops.ADD not in ops and Ops.MUL in ops, "b's own computation was fused again instead of reading its buffer"
    assert count(out) == 1
    close(out, (np.array(A) + 1) * 2)

  def test_realize_twice_is_free(self):
    a = inputs(A)
    b = (a * 3).sum(1)
    assert count(b) == 1
    assert count(b) == 0
    close(b, np.sum(np.array(A) * 3, 1))

  def test_same_expression_built_twice(self):
    # hash-consing makes both tensors the same graph: once one is realized, the other must not recompute it
    a = inputs(A)
    t1, t2 = a.sum(0), a.sum(0)
    assert count(t1) == 1
    assert count(t2) == 0
    assert t2.tolist() == [-3.0, 3.0, -3.0]
    u1, u2 = (a @ a.T), (a @ a.T)
    assert count(u1) == 1 and count(u2) == 0
    close(u2, np.array(A) @ np.array(A).T)

  def test_contiguous_forces_a_buffer(self):
    a = inputs(A)
    out = (a + 1).contiguous() * 2
    assert count(out) == 2
    close(out, (np.array(A) + 1) * 2)

  def test_reshape_of_contiguous_is_its_buffer(self):
    a = inputs(A)
    flat = (a + 1).contiguous().reshape(6)
    assert count(flat) == 1  # the reshape views the contiguous buffer: no copy kernel
    close(flat, (np.array(A) + 1).reshape(6))

  def test_equal_reshaped_contiguous_targets_stay_independent(self):
    a = inputs(A)
    flat, square = (a + 1).contiguous().reshape(6), (a + 1).contiguous().reshape(3, 2)  # one node under both reshapes
    Tensor.realize_all(flat, square)
    flat[0] = 100.0
    close(flat, [100.0, *(np.array(A) + 1).reshape(6)[1:]])
    close(square, (np.array(A) + 1).reshape(3, 2))

  def test_permuted_reduction_matches_numpy(self):
    # a reduction stored transposed, one kernel: odd sizes, tails of vectors
    x = np.random.default_rng(0).standard_normal((3, 5, 11, 7), dtype=np.float32)
    t = inputs(x)
    for axis, perm in ((3, (2, 0, 1)), (1, (0, 2, 1)), (2, (1, 0, 2))):
      out = t.sum(axis).permute(perm).contiguous()
      assert count(out) == 1
      close(out, x.sum(axis).transpose(perm), 1e-4)

class TestMaterialize:
  def test_reduce_read_through_expand_gets_a_buffer(self):
    # summed over the outer axis, s would be recomputed for every row: it gets a buffer
    a = inputs(A)
    s = a.sum(0, keepdim=True)
    out = (a - s) * (a + s)
    assert count(out) == 2
    n = np.array(A); ns = n.sum(0, keepdims=True)
    close(out, (n - ns) * (n + ns))

  def test_per_row_reduce_is_computed_above_the_row_loop(self):
    a = inputs(A)
    s = a.sum(1, keepdim=True)
    out = (a - s) * (a + s)
    assert count(out) == 1
    n = np.array(A); ns = n.sum(1, keepdims=True)
    close(out, (n - ns) * (n + ns))

  def test_reduce_used_twice_in_one_kernel_is_computed_once(self):
    a = inputs(A)
    s = (a * a).sum()
    out = s.sqrt() + s.exp2()
    items, _ = create_schedule([out.uop])
    assert len(items) <= 2
    assert sum(1 for si in items for u in lower_kernel(si.ast).toposort() if u.op is Ops.REDUCE) == 1
    assert count(out) == len(items)
    ns = float(np.sum(np.array(A) ** 2))
    close(out, np.sqrt(ns) + np.exp2(ns), tol=1e-4)

  def _two_targets(self, s):
    t1, t2 = s + 1, s * 2
    items, _ = create_schedule([t1.uop, t2.uop])
    reduces = sum(1 for si in items for u in si.ast.toposort() if u.op is Ops.REDUCE_AXIS)
    return len(items), reduces

  def test_reduce_used_by_two_targets_gets_its_own_buffer_keepdim(self):
    a = inputs(A)
    assert self._two_targets(a.sum(1, keepdim=True)) == (3, 1)

  def test_reduce_used_by_two_targets_gets_its_own_buffer(self):
    # same as above without keepdim (the reduce sits under a RESHAPE): it must still be computed once, not once per target
    a = inputs(A)
    assert self._two_targets(a.sum(1)) == (3, 1)

  def test_matmul_used_by_two_targets_is_computed_once(self):
    a, w = inputs(A, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    h = a @ w
    r, e = h.relu(), h * 3
    assert count(r, e) == 3
    close(e, (np.array(A) @ np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])) * 3)

  def test_layernorm_like(self):
    a = inputs(A)
    m = a.mean(-1, keepdim=True)
    out = (a - m) / ((a - m).square().mean(-1, keepdim=True) + 1e-5).sqrt()
    assert count(out) == 1
    n = np.array(A); nm = n.mean(-1, keepdims=True)
    close(out, (n - nm) / np.sqrt(((n - nm) ** 2).mean(-1, keepdims=True) + 1e-5), tol=1e-4)

class TestConstants:
  def test_constants_fold(self):
    out = Tensor.ones(4) * 2 + 1
    assert count(out) == 1
    assert out.tolist() == [3.0, 3.0, 3.0, 3.0]

  def test_folded_kernel_has_no_alu(self):
    out = Tensor.ones(5) * 3 + 2
    items, _ = create_schedule([out.uop])
    assert len(items) == 1
    prog = linearize(lower_kernel(items[0].ast), Device[items[0].device].renderer)
    assert not [u for u in prog if u.op in GroupOp.ALU], "constant arithmetic survived to the kernel"

  def test_full_and_arange(self):
    out = Tensor.full((2, 3), 7) + Tensor.arange(3)
    assert count(out) == 1
    assert out.tolist() == [[7, 8, 9], [7, 8, 9]]

class TestNullDevice:
  def test_null_counts_kernels(self):
    a = Tensor.empty(4, 4, device="NULL")
    b = Tensor.empty(4, 4, device="NULL")
    assert count(((a @ b) + 1).relu()) == 1
    assert count((a + b).sum(0, keepdim=True) - a) == 2
    assert count((a + b).sum(1, keepdim=True) - a) == 1

class TestLifetime:
  def test_schedule_leaves_no_reference_cycles(self):
    # the lazy graph (and through it the BUFFERs of intermediates) must be freed as soon as nothing uses it,
    # not at the next cyclic garbage collection
    import gc, weakref
    a = inputs([1.0, 2.0, 3.0])
    gc.collect()
    gc.disable()
    try:
      t = (a * 31 + 17).sum()
      lazy = weakref.ref(t.uop)
      create_schedule([t.uop])
      del t
      assert lazy() is None, "create_schedule left a reference cycle holding the lazy graph"
    finally: gc.enable()

  def test_realized_graph_is_freed(self):
    import gc, weakref
    a = inputs([1.0, 2.0, 3.0])
    gc.collect()
    gc.disable()
    try:
      t = (a * 37 + 19).sum()
      lazy = weakref.ref(t.uop)
      t.realize()
      assert t.item() == 37 * 6 + 19 * 3
      del t
      assert lazy() is None, "realize left a reference cycle holding the lazy graph"
    finally: gc.enable()

class TestNestedReduces:
  """A matmul or conv fused into the loop of another reduce was a kernel the optimizer could not tile (1 GFLOP/s)."""
  def test_matmul_into_sum_is_its_own_kernel(self):
    a, b = inputs(np.ones((4, 8), np.float32), np.ones((8, 5), np.float32))
    out = ((a @ b).relu() + 1).sum()
    assert count(out) == 2
    close(out, 4 * 5 * 9)
    assert count((a @ b).sum(1)) == 2

  def test_conv_into_maxpool_is_its_own_kernel(self):
    x, w = inputs(np.ones((1, 1, 6, 6), np.float32), np.ones((2, 1, 3, 3), np.float32))
    out = x.conv2d(w).relu().max_pool2d(2)
    assert count(out) == 2
    close(out, np.full((1, 2, 2, 2), 9.0))

def test_permuted_store_loops_in_the_values_order():
  # permuted_contiguous: one kernel whose loops follow the value (a reduce over rows here, outputs along its columns) and
  # whose stores walk the permuted buffer; the same numbers on CPU (vector lanes stored one by one), NOOPT and PYTHON
  from fusegrad import Context
  from fusegrad.engine import realize as realize_mod
  xn = np.arange(2 * 5 * 12, dtype=np.float32).reshape(2, 5, 12) / 7
  want = (xn * 2 + 1).sum(1).T
  outs = []
  for device, noopt in (("CPU", 0), ("CPU", 1), ("PYTHON", 0)):
    realize_mod._programs.clear()  # NOOPT is read at compile time
    with Context(NOOPT=noopt):
      x = Tensor(xn, device=device).realize()
      t = Tensor(((x * 2 + 1).sum(1)).uop.permuted_contiguous((1, 0)))
      items = create_schedule([t.uop])[0]
      assert len(items) == 1 and items[0].ast.src[0].src[2].op is Ops.PERMUTE
      outs.append(t.numpy())
  realize_mod._programs.clear()
  for got in outs: np.testing.assert_allclose(got, want, rtol=1e-6)
