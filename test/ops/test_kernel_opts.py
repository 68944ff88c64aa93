"""Kernel optimizations, memory planning and TinyJit: optimized results equal NOOPT results on random shapes."""
import numpy as np, pytest
from hypothesis import given, settings, strategies as st
from fusegrad import Tensor, TinyJit, GlobalCounters, Context, Device
from fusegrad.nn import optim
from fusegrad.engine import realize as realize_mod

def run_both(fn, *arrays):
  outs = []
  for noopt in (0, 1):
    realize_mod._programs.clear()  # NOOPT is read at compile time
    with Context(NOOPT=noopt): outs.append(fn(*[Tensor(a) for a in arrays]).numpy())
  realize_mod._programs.clear()
  return outs

dims = st.integers(1, 37)

@settings(max_examples=25, deadline=None)
@given(m=dims, k=st.integers(1, 70), n=dims)
def test_matmul_opt_matches_noopt(m, k, n):
  rng = np.random.default_rng(m * 10007 + k * 101 + n)
  a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
  opt, ref = run_both(lambda x, y: x @ y, a, b)
  np.testing.assert_allclose(opt, ref, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(opt, a @ b, rtol=1e-4, atol=1e-4)

@settings(max_examples=20, deadline=None)
@given(r=dims, c=st.integers(1, 300), axis=st.sampled_from([0, 1, -1]))
def test_reduce_opt_matches_noopt(r, c, axis):
  a = np.random.default_rng(r * 1000 + c).standard_normal((r, c), dtype=np.float32)
  for fn in (lambda x: x.sum(axis), lambda x: x.max(axis), lambda x: (x * 2).exp().sum(axis) + 1, lambda x: x.softmax(axis)):
    opt, ref = run_both(fn, a)
    # NOOPT sums a row in order: up to 300 standard normals (|x| summing to ~250) round differently by ~3e-5
    np.testing.assert_allclose(opt, ref, rtol=1e-5, atol=1e-4)

@pytest.mark.parametrize("shape,w,stride,pad", [((2, 3, 9, 7), (5, 3, 3, 3), 1, 1), ((1, 2, 13, 11), (3, 2, 5, 3), 2, 2),
                                               ((3, 4, 6, 6), (2, 4, 1, 1), 1, 0), ((1, 1, 17, 5), (4, 1, 3, 2), 1, 0)])
def test_conv_opt_matches_noopt(shape, w, stride, pad):
  rng = np.random.default_rng(0)
  x, k = rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(w, dtype=np.float32)
  opt, ref = run_both(lambda a, b: a.conv2d(b, stride=stride, padding=pad), x, k)
  np.testing.assert_allclose(opt, ref, rtol=1e-4, atol=1e-4)

def test_threads_split_outer_loop_correctly():
  a = np.random.default_rng(1).standard_normal((7, 1000), dtype=np.float32)
  for n in (1, 2, 3):
    from fusegrad.runtime import ops_cpu
    ops_cpu.cpu_count.cache_clear(); ops_cpu.thread_pool.cache_clear()
    import os; os.environ["CPU_COUNT"] = str(n)
    from fusegrad.helpers import getenv; getenv.cache_clear()
    np.testing.assert_allclose((Tensor(a) * 3 + 1).sum(1).numpy(), (a * 3 + 1).sum(1), rtol=1e-5)
  del os.environ["CPU_COUNT"]; getenv.cache_clear(); ops_cpu.cpu_count.cache_clear(); ops_cpu.thread_pool.cache_clear()

def test_memory_planning_reuses_intermediates():
  x = Tensor.rand(128, 128).realize()
  GlobalCounters.reset()
  base = GlobalCounters.mem_used
  y = x
  for _ in range(8): y = ((y @ x) * 0.01).contiguous()
  y.realize()
  # 8 kernels, but at most the output and two live intermediates exist at once
  assert GlobalCounters.kernel_count == 8
  assert GlobalCounters.mem_peak - base <= 3 * 128 * 128 * 4

class TestJit:
  def test_replay_matches_eager(self):
    w0 = np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)
    def make():
      w = Tensor(w0.copy(), requires_grad=True)
      opt = optim.SGD([w], lr=0.01, momentum=0.9)
      @Tensor.train()
      def step(x: Tensor) -> Tensor:
        opt.zero_grad()
        loss = (x @ w).relu().square().sum() + (Tensor.rand(4, 3) * w).sum()
        loss.backward()
        opt.step()
        return loss
      return w, step
    Tensor.manual_seed(5); w1, eager = make()
    l1 = [eager(Tensor(np.full((5, 4), i, np.float32))).item() for i in range(5)]
    Tensor.manual_seed(5); w2, step = make()
    jitted = TinyJit(step)
    l2 = [jitted(Tensor(np.full((5, 4), i, np.float32))).item() for i in range(5)]
    np.testing.assert_allclose(l1, l2, rtol=1e-6)
    np.testing.assert_allclose(w1.numpy(), w2.numpy(), rtol=1e-6)
    assert jitted.cnt == 2 and jitted.captured

  def test_replay_launches_captured_kernels_only(self):
    f = TinyJit(lambda a, b: (a * b + 1).sum())
    for _ in range(3): f(Tensor.rand(10).realize(), Tensor.rand(10).realize())
    GlobalCounters.reset()
    a, b = Tensor([1.0] * 10), Tensor([2.0] * 10)
    assert f(a, b).item() == 30.0
    assert GlobalCounters.kernel_count == len(f.captured)

  def test_shape_change_raises(self):
    f = TinyJit(lambda a: (a + 1).realize())
    for _ in range(3): f(Tensor.rand(4).realize())
    with pytest.raises(ValueError, match="inputs changed"): f(Tensor.rand(5).realize())
    f.reset()
    assert f(Tensor.ones(5)).tolist() == [2.0] * 5

  def test_replay_reads_tensors_assigned_between_calls(self):
    lr = Tensor([1.0]).realize()
    f = TinyJit(lambda x: (x * lr).realize())
    outs = []
    for i in range(4):
      lr.assign(Tensor([float(i)])).realize()
      outs.append(f(Tensor([1.0, 2.0])).tolist())
    assert outs == [[0.0, 0.0], [1.0, 2.0], [2.0, 4.0], [3.0, 6.0]]

  def test_jit_disabled(self):
    calls = []
    def fn(a): calls.append(1); return (a * 2).realize()
    f = TinyJit(fn)
    with Context(JIT=0):
      for _ in range(3): f(Tensor.ones(2))
    assert len(calls) == 3 and f.captured is None

  def test_random_numbers_advance_in_replay(self):
    f = TinyJit(lambda a: (a + Tensor.rand(8)).realize())
    outs = [f(Tensor.zeros(8).realize()).tolist() for _ in range(4)]
    assert len({tuple(o) for o in outs}) == 4

  def test_bound_variable_does_not_recompile(self):
    from fusegrad import Variable
    realize_mod._programs.clear()
    v = Variable("pos", 0, 100)
    outs = [(Tensor.ones(4) * Tensor(v.bind(i)).cast(Tensor.ones(1).dtype)).tolist() for i in (3, 7)]
    assert outs == [[3.0] * 4, [7.0] * 4]
    assert len(realize_mod._programs) == 1

def test_compiled_kernels_are_cached_on_disk(tmp_path, monkeypatch):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  from fusegrad.runtime.ops_cpu import compile_c
  src = "void k(float* a) { a[0] = 1.0f; }"
  p1 = compile_c(src)
  assert p1.startswith(str(tmp_path)) and p1.endswith(".so")
  mtime = __import__("os").path.getmtime(p1)
  assert compile_c(src) == p1 and __import__("os").path.getmtime(p1) == mtime

def test_every_legal_action_matches_noopt():
  from fusegrad.codegen.opt import actions
  from fusegrad.codegen.search import lower_and_simplify
  from fusegrad.engine.realize import get_program
  from fusegrad.schedule import create_schedule
  rng = np.random.default_rng(3)
  tried = 0
  for a_shape, b_shape in [((6, 48), (48, 20)), ((5, 7), (7, 3)), ((3, 64), (64, 1)), ((41, 16), (16, 24))]:
    a, b = rng.standard_normal(a_shape, dtype=np.float32), rng.standard_normal(b_shape, dtype=np.float32)
    items, _ = create_schedule([(Tensor(a) @ Tensor(b)).uop])
    si = items[-1]
    opts = actions(lower_and_simplify(si.ast), Device[si.device].renderer)
    tried += len(opts)
    for opt in opts:
      prg = get_program(si.device, si.ast, opt)
      prg([buf.ensure_allocated()._mem for buf in si.bufs], [])
      np.testing.assert_allclose(np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32).reshape(a_shape[0], b_shape[1]), a @ b, rtol=1e-4, atol=1e-4, err_msg=str(opt))
  assert tried > 6  # VECTOR tiles for the first, LANES for the last

@pytest.mark.parametrize("m,n", [(6, 40), (9, 34), (40, 6), (1, 24), (12, 12)])
def test_lanes_matmul_streams_its_larger_operand_once(m, n):
  # x @ w.T (both contiguous along k: LANES) loops over the larger operand's rows outside, so the smaller one is reread
  # from cache (_larger_operand_outside); every legal LANES action matches numpy either way round
  from fusegrad.codegen.opt import actions, apply_opt, output_ranges
  from fusegrad.codegen.search import lower_and_simplify
  from fusegrad.engine.realize import get_program
  from fusegrad.schedule import create_schedule
  rng = np.random.default_rng(m * n)
  x, w = rng.standard_normal((m, 64), dtype=np.float32), rng.standard_normal((n, 64), dtype=np.float32)
  si = create_schedule([(Tensor(x) @ Tensor(w).T).uop])[0][-1]
  ast = lower_and_simplify(si.ast)
  opts = [o for o in actions(ast, Device[si.device].renderer) if o.kind == "LANES"]
  assert opts
  def sizes(d): return {-(-d // u) for u in (1, 2, 3, 4)}
  for opt in opts:
    outer = output_ranges(apply_opt(ast, opt))[0].src[0].arg
    if not sizes(m) & sizes(n): assert outer in sizes(max(m, n)), opt  # the larger side's loop (maybe upcast) is outermost
    prg = get_program(si.device, si.ast, opt)
    prg([buf.ensure_allocated()._mem for buf in si.bufs], [])
    np.testing.assert_allclose(np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32).reshape(m, n), x @ w.T, rtol=1e-4, atol=1e-4, err_msg=str(opt))

@pytest.mark.parametrize("k", [8, 64, 576])
def test_lanes_are_combined_by_a_shuffle_tree(k):
  # a LANES accumulator's lanes are summed pairwise (hsum_f32x<w>: the vector plus itself rotated by half, a quarter,
  # ... one lane), not by one dependent scalar add a lane (SmolLM2's MLP matmuls 156 -> 211 GFLOP/s). Sums of small
  # ints are exact in any order; inf and NaN lanes propagate
  rng = np.random.default_rng(k)
  x, w = rng.integers(-8, 8, (12, k)).astype(np.float32), rng.integers(-8, 8, (20, k)).astype(np.float32)
  x[3, k - 1], x[5, 0], x[5, 1] = np.inf, np.nan, 1.0
  src = _kernel_src(Tensor(x) @ Tensor(w).T)
  if Device["CPU"].renderer.simd_width: assert "hsum_f32x" in src.split("void ")[-1]
  with np.errstate(invalid="ignore"): want = x @ w.T
  np.testing.assert_array_equal((Tensor(x) @ Tensor(w).T).numpy(), want)
  np.testing.assert_array_equal((Tensor(x) * Tensor(w[0])).sum(1).numpy(), (x * w[0]).sum(1))  # a plain row sum too
  # a row's max (softmax's shift) is a tree too (hmax_f32x<w>): a NaN in any lane wins, -inf rows stay -inf
  r = rng.standard_normal((6, k)).astype(np.float32)
  r[1, k // 2], r[2, :], r[3, 0], r[4, k - 1] = np.nan, -np.inf, np.inf, np.nan
  np.testing.assert_array_equal(Tensor(r).max(1).numpy(), r.max(1))
  if Device["CPU"].renderer.simd_width and k >= 16: assert "hmax_f32x" in _kernel_src(Tensor(r).max(1)).split("void ")[-1]

def test_beam_search_caches_its_choice(tmp_path, monkeypatch):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  from fusegrad.codegen import search
  from fusegrad.engine import realize
  a, b = np.ones((16, 32), np.float32), np.ones((32, 24), np.float32)
  realize._beam_choices.clear()
  with Context(BEAM=2):
    out = (Tensor(a) @ Tensor(b)).numpy()
  np.testing.assert_allclose(out, a @ b)
  (key, opt), = [(k, v) for k, v in realize._beam_choices.items()]
  assert search.cached_opt(search.ast_key(*key)) == opt
  # a second process would find it on disk: no timing happens
  monkeypatch.setattr(search, "_time", lambda *args: (_ for _ in ()).throw(AssertionError("searched again")))
  realize._beam_choices.clear()
  with Context(BEAM=2): (Tensor(a) @ Tensor(b) + 0).numpy()

def _kernel_src(t: Tensor) -> str:
  from fusegrad.engine.realize import get_program
  from fusegrad.schedule import create_schedule
  si = create_schedule([t.uop])[0][-1]
  return get_program(si.device, si.ast).spec.src

@pytest.mark.parametrize("fn,shapes", [
  (lambda a, b: a @ b, [(64, 96), (96, 512)]),                     # staged, 4 rows x 64 columns
  (lambda a, b: a @ b.T, [(40, 33), (1024, 33)]),                  # the staged operand is a transposed view
  (lambda a, b: (a @ b).relu() + 1, [(3, 32, 17), (3, 17, 640)]),  # batched, with an elementwise epilogue
  (lambda a, b: a @ b, [(36, 50), (50, 520)]),                     # 520 = 8 x 65: tile 65 is no vector multiple
])
def test_staged_vector_matmul_matches_noopt(fn, shapes):
  rng = np.random.default_rng(7)
  arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
  opt, ref = run_both(fn, *arrays)
  np.testing.assert_allclose(opt, ref, rtol=1e-4, atol=1e-4)

def _opt_vs_noopt(fn, shapes, opt):
  from fusegrad.engine.realize import get_program
  from fusegrad.schedule import create_schedule
  rng = np.random.default_rng(11)
  arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
  _, ref = run_both(fn, *arrays)
  si = create_schedule([fn(*[Tensor(a) for a in arrays]).uop])[0][-1]
  get_program(si.device, si.ast, opt)([b.ensure_allocated()._mem for b in si.bufs], [])
  got = np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32)[:ref.size].reshape(ref.shape)
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=str(opt))

@pytest.mark.parametrize("rows", [2, 4, 7, 13, 64])
@pytest.mark.parametrize("opt", ["VECTOR 8 5", "VECTOR 8 5 stage", "VECTOR 16 3 stage", "VECTOR 8 6"])
@pytest.mark.parametrize("fn,shapes", [
  (lambda a, b: a @ b, [(0, 20), (20, 48)]),                                   # rows: a's
  (lambda a, b, c: (a @ b + c).relu(), [(0, 20), (20, 48), (48,)]),              # with a bias and ReLU epilogue
  (lambda a, b: a.T @ b, [(20, 0), (20, 48)]),                                 # a transposed view
  (lambda a, b: a @ b, [(2, 0, 9), (2, 9, 16)]),                               # batched: rows inside the batch
])
def test_register_tile_rows_need_not_divide(rows, opt, fn, shapes):
  # a tile of n rows over a row count n does not divide: the last group's spare copies recompute and rewrite the last row
  from fusegrad.codegen.opt import Opt
  kind, tile, up, *stage = opt.split()
  shapes = [tuple(rows if d == 0 else d for d in s) for s in shapes]
  _opt_vs_noopt(fn, shapes, Opt(kind, int(tile), int(up), bool(stage)))

@pytest.mark.parametrize("rows", [20, 300])
def test_staged_tile_loop_stays_inside_a_batch_whose_rows_share_the_block(rows):
  # the shared operand's block is filled once per image when an image's rows already share it STAGE_SHARED times (the
  # threads then split the batch); with few rows the tile loop moves outside the batch, so the block is filled once
  from fusegrad.codegen.opt import STAGE_SHARED, Opt, _analyze, _block_outside, _stage_block, _upcast_range, output_ranges
  from fusegrad.codegen.search import lower_and_simplify
  from fusegrad.schedule import create_schedule
  assert 20 < STAGE_SHARED <= 300
  k = lower_and_simplify(create_schedule([(Tensor.empty(3, rows, 17) @ Tensor.empty(17, 64)).uop])[0][-1].ast)
  j = _analyze(k)[1]
  i = _upcast_range(k, j)
  batch = output_ranges(k)[0]
  assert _block_outside(k, j, i, _stage_block(k, j, i)) is (i if rows >= STAGE_SHARED else batch)
  _opt_vs_noopt(lambda a, b: a @ b, [(3, rows, 17), (17, 64)], Opt("VECTOR", 16, 4, True))

def test_a_conv_tile_of_part_of_its_channels_is_staged_where_a_batch_splits_the_threads():
  # 32 of 64 output channels (AVX2's 3 rows x 4 vectors) read the weights at a stride: staged contiguous, with the tile
  # loop inside the batch loop (batch 8, 56x56: 12.0 -> 10.2 ms under CPU_ISA=avx2 with 5 x 2 tiles). Batch 1 would
  # leave the 2 tiles as the outermost loop, which the threads split, and a narrower tile of one vector loads too much:
  # not staged
  from types import SimpleNamespace
  from fusegrad.codegen.opt import choose
  from fusegrad.codegen.search import lower_and_simplify
  from fusegrad.schedule import create_schedule
  avx2 = SimpleNamespace(simd_width=8, vector_registers=16)
  def opt(batch, c=64, size=56):
    conv = Tensor.empty(batch, c, size, size).conv2d(Tensor.empty(c, c, 3, 3), padding=1)
    items = create_schedule([conv.uop])[0]
    return choose(lower_and_simplify(max(items, key=lambda si: len(si.ast.toposort())).ast), avx2)
  assert (opt(8).arg, opt(8).upcast, opt(8).stage) == (32, 3, True) and not opt(1).stage
  # batch 1 with 128 channels: 8 tiles of two vectors, with the 5 rows their registers allow, staged (1.6 -> 1.35 ms)
  assert (opt(1, 128, 28).arg, opt(1, 128, 28).upcast, opt(1, 128, 28).stage) == (16, 5, True)

def test_register_tile_rows_clamp_only_where_safe():
  from fusegrad.codegen.opt import Budget, Opt, _clamped_rows_ok, _rows, apply_opt, choose
  from fusegrad.codegen.search import lower_and_simplify
  from fusegrad.schedule import create_schedule
  from fusegrad.uop.ops import Ops
  def kernel(m):
    return lower_and_simplify(create_schedule([(Tensor.rand(m, 8).realize() @ Tensor.rand(8, 8).realize()).uop])[0][-1].ast)
  k = kernel(8)
  out, a = sorted((u for u in k.toposort() if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)[:2]
  inplace = k.substitute({a: out})  # reads the buffer it writes: a spare copy would read the first copy's result
  assert _clamped_rows_ok(k) and not _clamped_rows_ok(inplace)
  with pytest.raises(ValueError, match="does not apply"): apply_opt(inplace, Opt("VECTOR", 8, 5))
  rows = next(u for u in k.toposort() if u.op is Ops.RANGE and u.src[0].arg == 8 and u.arg == 0)
  assert _rows(k, rows, 5) == 4 and _rows(inplace, rows, 3) == 4  # 2 spare rows of 10 are too many; clamping is unsafe
  k41 = kernel(41)
  assert _rows(k41, next(u for u in k41.toposort() if u.op is Ops.RANGE and u.src[0].arg == 41), 5) == 5  # 4 spare of 45
  # the register tile's rows by target: 4 x 4 vectors on AVX-512, 5 x 2 on AVX2 (and SSE), 4 x 3 for 3-vector tiles
  assert Budget(16, 64, 36, 20, 32).rows(64) == 4 and Budget(8, 24, 18, 16, 16).rows(16) == 5 and Budget(8, 24, 18, 16, 16).rows(24) == 4
  assert choose(kernel(1024), Device["CPU"].renderer).upcast == Budget.of(Device["CPU"].renderer).rows(choose(kernel(1024), Device["CPU"].renderer).arg)

def test_heuristic_emits_simd_vectors_and_stage():
  src = _kernel_src(Tensor.rand(64, 96).realize() @ Tensor.rand(96, 512).realize())
  assert "stage0[" in src and f"f32x{min(Device['CPU'].renderer.simd_width, 16)}" in src and "f32x" in src.split("void ")[-1]
  # a conv computes 4 output channels per weight-broadcast step (rows = output channels, vector = output x)
  src = _kernel_src(Tensor.rand(1, 8, 16, 16).realize().conv2d(Tensor.rand(8, 8, 3, 3).realize(), padding=1))
  assert "f32x" in src.split("void ")[-1]

def test_vector_max_keeps_nan_and_inf():
  a = np.random.default_rng(0).standard_normal((64, 32, 64), dtype=np.float32)
  a[3, 5, 7], a[10, 0, 63], a[20, 31, 0] = np.nan, np.inf, -np.inf
  for fn in (lambda x: x.max(1), lambda x: x.max(2), lambda x: x.min(1)):
    opt, ref = run_both(fn, a)
    np.testing.assert_array_equal(opt, ref)
  assert np.isnan(run_both(lambda x: x.max(1), a)[0][3, 7])

def test_vector_loop_with_strided_and_broadcast_loads():
  # the vector axis j walks z with step 1, y with step 3 (a gather) and broadcasts x
  rng = np.random.default_rng(1)
  x, y, z = (rng.standard_normal(s, dtype=np.float32) for s in ((32, 48), (48, 64, 3), (48, 64)))
  def fn(x, y, z): return (x.reshape(32, 48, 1) * y[:, :, 1].reshape(1, 48, 64) + z.reshape(1, 48, 64)).sum(1)
  assert "+3]" in _kernel_src(fn(*(Tensor(t) for t in (x, y, z))))
  opt, ref = run_both(fn, x, y, z)
  np.testing.assert_allclose(opt, ref, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("fn,npfn", [
  (lambda x: x.softmax(-1), lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
  (lambda x: x.exp().sum(-1), lambda x: np.exp(x).sum(-1)),
  (lambda x: (x.sin() * x.cos() + x.abs().log()).sum(-1), lambda x: (np.sin(x) * np.cos(x) + np.log(np.abs(x))).sum(-1)),
  (lambda x: x.sigmoid().max(-1), lambda x: (1 / (1 + np.exp(-x))).max(-1)),
])
def test_vector_lanes_and_vector_math(fn, npfn):
  # contiguous reductions: LANES of 16 run as SIMD vectors (glibc's vector exp/log/sin/cos where it links), then the
  # lanes are folded into the scalar result one by one
  from fusegrad.engine.realize import get_program
  from fusegrad.runtime import ops_cpu
  from fusegrad.schedule import create_schedule
  x = np.random.default_rng(4).standard_normal((96, 1024), dtype=np.float32)
  reduces = [get_program(si.device, si.ast).spec.src.split("void ")[-1] for si in create_schedule([fn(Tensor(x)).uop])[0]]
  reduces = [s for s in reduces if s.startswith("r_")]
  assert reduces and all("f32x16 " in s or "f32x8 " in s or "f32x4 " in s for s in reduces)
  if ops_cpu.vector_math(ops_cpu.find_compiler()): assert any("_ZGV" in s or "exp_f32x" in s for s in reduces)
  opt, ref = run_both(fn, x)
  np.testing.assert_allclose(opt, ref, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(opt, npfn(x.astype(np.float64)), rtol=1e-4, atol=1e-4)

def test_vector_exp_is_exact_enough_over_its_whole_range():
  # libmvec's expf has a slow path for results that are not normal floats; the kernels shift such lanes into range
  # (renderer/cvector.py EXP): subnormal results, overflow, +-inf and NaN must come out as the scalar expf gives them,
  # mixed in one vector with ordinary lanes
  from fusegrad.runtime import ops_cpu
  special = [-np.inf, np.inf, np.nan, -87.5, -90, -100, -103.9, -104, -110, -150, 87.2, 87.5, 88.5, 88.72, 88.73, 100, 150]
  x = np.concatenate([np.linspace(-120, 95, 4096, dtype=np.float32), np.array(special * 3, np.float32)])
  x = np.concatenate([x, np.zeros(-len(x) % 64, np.float32)]).reshape(-1, 64)
  src = _kernel_src(Tensor(x).exp())
  if ops_cpu.vector_math(ops_cpu.find_compiler()): assert "exp_f32x" in src
  want = np.exp(x.astype(np.float64))
  # sigmoid is 1 / (1 + e^-x): below -88.7 e^-x overflows and the subnormal result is 0, as in the scalar code
  checks = [(got, want, 1.5e-45) for got in run_both(lambda t: t.exp(), x)] + [(Tensor(x).sigmoid().numpy(), 1 / (1 + 1 / want), 1.2e-38)]
  for got, want, atol in checks:
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), want > 3.4028235e38)
    ok = ~np.isnan(want) & (want <= 3.4028235e38)
    np.testing.assert_allclose(got[ok], want[ok], rtol=4e-7, atol=atol)  # subnormal exp results: within their last bit

def test_vector_exp_is_within_an_ulp_and_a_quarter_in_normal_range():
  # the kernels' own e^x (renderer/cvector.py EXP: a Taylor series after range reduction, 2^k in the exponent bits):
  # within 1.22 ulp of e^x for every float in [-87, 87] (0.94 with FMA); here 2^20 of them, among them the points
  # where the rounding of x / ln 2 switches to the next k, and x's next to them
  rng = np.random.default_rng(3)
  edges = ((np.arange(-125, 126) + 0.5) * np.log(2)).astype(np.float32)
  x = np.concatenate([rng.uniform(-87, 87, (1 << 20) - 3 * len(edges)).astype(np.float32), edges,
                      np.nextafter(edges, np.float32(np.inf)), np.nextafter(edges, np.float32(-np.inf))]).reshape(-1, 256)
  want = np.exp(x.astype(np.float64))
  ulp = np.spacing(want.astype(np.float32)).astype(np.float64)
  for got in run_both(lambda t: t.exp(), x):
    assert np.max(np.abs(got - want) / ulp) <= 1.25

def test_int_index_math_is_64_bit_and_int_values_still_wrap():
  # kernels index with 64-bit integers (vectorizable under -fwrapv); int32 tensor math wraps like torch
  a = Tensor([2**31 - 1, -2**31], dtype="int32")
  assert (a + 1).tolist() == [-2**31, -2**31 + 1] and (a * 2).tolist() == [-2, 0]

def _all_srcs(t: Tensor) -> str:
  from fusegrad.engine.realize import get_program
  from fusegrad.schedule import create_schedule
  return "\n".join(get_program(si.device, si.ast).spec.src.split("void ")[-1] for si in create_schedule([t.uop])[0])

# innermost loops with a division in an index, compares, selects, bool->float and int->float casts and gated (padded)
# loads run as vectors lane by lane where needed; sizes cover widths 16, 8, 4, 2 and an odd size (scalar)
@pytest.mark.parametrize("n", [32, 24, 12, 14, 7])
@pytest.mark.parametrize("name,fn", [
  ("upsample-where", lambda x, y, i: (x > 0).where(x, y.reshape(-1, 1, y.shape[-1]).expand(y.shape[0], 2, y.shape[-1]).reshape(x.shape))),
  ("maxpool-backward-like", lambda x, y, i: (x == x.max(-1, keepdim=True)).float() * y + (x < 0) * 2.0),
  ("int-to-float", lambda x, y, i: x * i.float() + (i > 1).float()),
  ("padded-shift", lambda x, y, i: x.pad(((0, 0), (1, 1)))[:, :-2] + x.pad(((0, 0), (2, 0)))[:, :-2] * y),
  ("sqrt-pow-per-lane", lambda x, y, i: (x.abs() + 1).sqrt() + (y.abs() + 0.5) ** 1.5 - x.relu()),
])
def test_inner_vector_loops_match_noopt(name, fn, n):
  rng = np.random.default_rng(n)
  x, y = rng.standard_normal((6, n), dtype=np.float32), rng.standard_normal((6 if name != "upsample-where" else 3, n), dtype=np.float32)
  x[0, 0] = np.nan
  i = rng.integers(-3, 4, (6, n)).astype(np.int32)
  opt, ref = run_both(fn, x, y, i)
  np.testing.assert_allclose(opt, ref, rtol=1e-6, atol=1e-6)
  if n % 2 == 0: assert "f32x" in _all_srcs(fn(Tensor(x), Tensor(y), Tensor(i)))

def test_noopt_renders_plain_scalar_c():
  x = Tensor.rand(64, 64).realize()
  with Context(NOOPT=1):
    realize_mod._programs.clear()
    assert "f32x" not in _all_srcs(x @ x)
  realize_mod._programs.clear()

@pytest.mark.parametrize("n", [32, 8, 6])
def test_vector_loop_gathers_a_divided_index(n):
  # out[:, j] = x[:, j] * y[:, j // 2]: the second load's index is no constant step per lane, so it is gathered
  rng = np.random.default_rng(2)
  x, y = rng.standard_normal((5, n), dtype=np.float32), rng.standard_normal((5, n // 2), dtype=np.float32)
  def fn(a, b): return a * b.reshape(5, n // 2, 1).expand(5, n // 2, 2).reshape(5, n)
  src = _all_srcs(fn(Tensor(x), Tensor(y)))
  assert "f32x" in src and "/2" in src.replace(" ", "").replace("(2ll)", "2")
  opt, ref = run_both(fn, x, y)
  np.testing.assert_array_equal(opt, ref)
  np.testing.assert_array_equal(opt, x * np.repeat(y, 2, axis=1))

def test_recomputed_values_round_alike_across_kernels():
  # max-pool's backward recomputes relu(x*a+b) in another kernel and compares it with the pooled max: every kernel must
  # round it alike (no FMA contraction of elementwise math), or ties are missed and the gradient divides by zero
  rng = np.random.default_rng(5)
  x, a, b = rng.standard_normal((8, 16, 28, 28), dtype=np.float32), rng.standard_normal((1, 16, 1, 1), dtype=np.float32), rng.standard_normal((1, 16, 1, 1), dtype=np.float32)
  def grad(x, a, b):
    x.requires_grad = True
    ((x * a + b).relu().max_pool2d() * 3).sum().backward()
    return x.grad
  opt, ref = run_both(grad, x, a, b)
  assert np.isfinite(opt).all()
  np.testing.assert_allclose(opt, ref, rtol=1e-6, atol=1e-6)

def test_contiguous_loops_merge_and_gated_ones_do_not():
  from fusegrad.codegen.opt import output_ranges
  from fusegrad.codegen.search import lower_and_simplify
  from fusegrad.schedule import create_schedule
  rng = np.random.default_rng(6)
  x = rng.standard_normal((4, 6, 14, 14), dtype=np.float32)
  def loops(t):
    k = lower_and_simplify(create_schedule([t.uop])[0][-1].ast)
    return [r.src[0].arg for r in output_ranges(k)], sorted(r.src[0].arg for u in k.toposort() if u.op.name == "REDUCE" for r in u.src[1:])
  assert loops(Tensor(x) + 1) == ([4 * 6 * 14 * 14], [])                          # one flat loop
  assert loops(Tensor(x).sum((2, 3))) == ([24], [196])                           # the reduced (14, 14) is one loop
  assert loops(Tensor(x).permute(0, 1, 3, 2) * 2)[0] != [4 * 6 * 14 * 14]        # a transposed read: no full merge
  outs, _ = loops(Tensor(x).pad(((0, 0), (0, 0), (1, 1), (1, 1))) * 2)           # the pad gates y and x: kept apart
  assert outs[-2:] == [16, 16]
  for fn in (lambda t: t + 1, lambda t: t.sum((2, 3)), lambda t: t.permute(0, 1, 3, 2) * 2, lambda t: t.pad(((0, 0), (0, 0), (1, 1), (1, 1))) * 2,
             lambda t: t.max_pool2d() + t.mean((2, 3), keepdim=True)[:, :, :, :1]):
    opt, ref = run_both(fn, x)
    np.testing.assert_allclose(opt, ref, rtol=1e-5, atol=1e-5)

def test_tiles_split_into_the_widest_vectors_that_fit():
  from fusegrad.renderer.cvector import tile_widths
  assert tile_widths(14, 16) == (8, 4, 2) and tile_widths(56, 16) == (16, 16, 16, 8) and tile_widths(64, 8) == (8,) * 8
  assert tile_widths(7, 16) == () and tile_widths(10, 4) == (4, 4, 2)
  # a 14-wide conv output row and a staged 10-wide tile run as mixed-width vectors and match scalar C (12 output channels:
  # not a multiple of 8, so the conv stays channels first, vectorized along its rows)
  rng = np.random.default_rng(8)
  x, w = rng.standard_normal((4, 8, 14, 14), dtype=np.float32), rng.standard_normal((12, 8, 3, 3), dtype=np.float32)
  # (with 4 lanes, plain SSE, 14 has no tile of whole or half vectors: the tile is 7 and runs as scalar C; with 8 or
  # 16, AVX2 or AVX-512, its last vector is partly used, with the lanes past the tile masked)
  src, width = _all_srcs(Tensor(x).conv2d(Tensor(w), padding=1)), Device["CPU"].renderer.simd_width
  if width >= 8: assert f"mst_f32x{width}" in src and "f32x2" not in src
  opt, ref = run_both(lambda a, b: a.conv2d(b, padding=1).relu().sum((2, 3)), x, w)
  np.testing.assert_allclose(opt, ref, rtol=1e-4, atol=1e-4)

def test_long_reduction_into_few_outputs_runs_in_two_passes():
  # 64 partial results per output in a kernel the threads split, then a short second reduction
  rng = np.random.default_rng(9)
  a = rng.standard_normal((4, 1 << 16), dtype=np.float32)
  a[2, 5] = np.nan
  GlobalCounters.reset()
  got = Tensor(a).sum(1).numpy()
  assert GlobalCounters.kernel_count == 2
  np.testing.assert_allclose(got, a.astype(np.float64).sum(1), rtol=1e-4, equal_nan=True)
  t = Tensor(a[[0, 1, 3]])
  np.testing.assert_array_equal(t.max().numpy(), a[[0, 1, 3]].max())
  np.testing.assert_allclose(t.mean(axis=(0, 1), keepdim=True).numpy(), a[[0, 1, 3]].mean(keepdims=True), rtol=1e-4)
  np.testing.assert_allclose(Tensor(a[0]).exp().sum().numpy(), np.exp(a[0].astype(np.float64)).sum(), rtol=1e-4)
  x = Tensor(a[[0, 1]], requires_grad=True)
  (x.sum() * 2).backward()
  np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 1 << 16), 2, np.float32))
  GlobalCounters.reset()
  Tensor(a).sum(0).realize()  # many outputs: one pass
  assert GlobalCounters.kernel_count == 1

@pytest.mark.parametrize("channels,width,regs,tile", [(32, 16, 32, 16), (64, 16, 32, 32), (16, 16, 32, 16), (32, 8, 16, 16)])
def test_a_reduction_into_the_vector_axis_alone_leaves_tiles_for_the_threads(channels, width, regs, tile):
  # batchnorm's per-channel sums of a channels-last buffer: threads split the tile loop, and AVX-512's one 32-lane tile
  # of 32 channels ran on one core; two tiles of 16 share them (one vector's worth stays whole)
  from types import SimpleNamespace
  from fusegrad.codegen.opt import choose
  from fusegrad.codegen.search import lower_and_simplify
  from fusegrad.schedule import create_schedule
  a = np.random.default_rng(3).standard_normal((300, channels), dtype=np.float32)
  si = create_schedule([Tensor(a).sum(0).uop])[0][-1]
  opt = choose(lower_and_simplify(si.ast), SimpleNamespace(simd_width=width, vector_registers=regs))
  assert (opt.kind, opt.arg) == ("VECTOR", tile), opt
  np.testing.assert_allclose(Tensor(a).sum(0).numpy(), a.sum(0), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(Tensor(a).permute(1, 0).contiguous().permute(1, 0).var(0).numpy(), a.var(0, ddof=1), rtol=1e-4)

def test_every_legal_action_of_a_conv_backward_matches_noopt():
  # every kernel of a conv's forward and backward (weight gradients get LANES with two register-tiling loops), each
  # legal action against the scalar program on the same inputs
  from fusegrad.codegen.opt import actions
  from fusegrad.codegen.search import lower_and_simplify
  from fusegrad.engine.realize import get_program
  from fusegrad.schedule import create_schedule
  rng = np.random.default_rng(10)
  x = Tensor(rng.standard_normal((2, 4, 8, 8), dtype=np.float32))
  w = Tensor(rng.standard_normal((8, 4, 3, 3), dtype=np.float32), requires_grad=True)
  x.requires_grad = True
  (x.conv2d(w, padding=1).relu() * Tensor(rng.standard_normal((2, 8, 8, 8), dtype=np.float32))).sum().backward()
  items, _ = create_schedule([w.grad.uop, x.grad.uop])
  tried, two_loops = 0, 0
  for si in items:
    if si.ast.src[0].op.name == "COPY": continue
    mems = [b.ensure_allocated()._mem for b in si.bufs]
    with Context(NOOPT=1): get_program(si.device, si.ast)(mems, [])
    want = bytes(si.bufs[0].as_memoryview())
    for opt in actions(lower_and_simplify(si.ast), Device[si.device].renderer):
      get_program(si.device, si.ast, opt)(mems, [])
      np.testing.assert_allclose(np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32), np.frombuffer(want, np.float32), rtol=1e-4, atol=1e-4, err_msg=str(opt))
      tried += 1
      two_loops += opt.upcast2 > 1
  assert tried > 20 and two_loops > 0

@pytest.mark.parametrize("shape,perm,tiled", [((48, 32), (1, 0), True), ((3, 16, 40), (0, 2, 1), True), ((8, 5, 24), (2, 1, 0), True),
                                              ((16, 16, 2), (1, 0, 2), False), ((7, 13), (1, 0), False), ((32, 8, 16), (1, 2, 0), True),
                                              ((114, 64), (1, 0), True), ((301, 16), (1, 0), False)])
def test_transposes_walk_blocks_and_match_noopt(shape, perm, tiled):
  # a kernel that reads its input across the rows it writes gets TILE (blocks of one vector's width) where the rows
  # divide by it and the columns do too or are at most TILE_WHOLE_ROW (one block: 114); every legal block size gives
  # numpy's answer, also with math fused into the copy
  from fusegrad.codegen.opt import actions, choose
  from fusegrad.codegen.search import lower_and_simplify
  from fusegrad.engine.realize import get_program
  from fusegrad.schedule import create_schedule
  a = np.random.default_rng(11).standard_normal(shape, dtype=np.float32)
  want = np.sqrt(np.abs(a.transpose(perm))) * 2
  opt, ref = run_both(lambda x: (x.permute(*perm).abs().sqrt() * 2).contiguous(), a)
  np.testing.assert_allclose(opt, want, rtol=1e-6)
  np.testing.assert_allclose(ref, want, rtol=1e-6)
  si = create_schedule([(Tensor(a).permute(*perm) * 2).contiguous().uop])[0][-1]
  k = lower_and_simplify(si.ast)
  tiles = [o for o in actions(k, Device[si.device].renderer) if o.kind == "TILE"]
  assert bool(tiles) == tiled, tiles  # (16, 16, 2): the innermost loop is contiguous both ways; (7, 13): no block divides
  if tiles: assert choose(k, Device[si.device].renderer).kind == "TILE"
  for o in tiles:
    get_program(si.device, si.ast, o)([b.ensure_allocated()._mem for b in si.bufs], [])
    got = np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32).reshape(want.shape)
    np.testing.assert_array_equal(got, a.transpose(perm) * 2, err_msg=str(o))

def test_a_padded_transpose_takes_its_rows_whole():
  # ResNet-18's max-pool input: 64 channels of a channels-last buffer read into padded 114-wide rows, which no tile
  # divides; untiled each row's cache lines were loaded again for every channel (1.5 -> 0.47 ms on an AVX-512 Xeon)
  from fusegrad.codegen.opt import choose
  from fusegrad.codegen.search import lower_and_simplify
  from fusegrad.schedule import create_schedule
  a = np.random.default_rng(12).standard_normal((2, 9, 11, 16), dtype=np.float32)
  def fn(x): return x.permute(0, 3, 1, 2).pad(((0, 0), (0, 0), (1, 1), (1, 2))).relu().contiguous()
  si = create_schedule([fn(Tensor(a)).uop])[0][-1]
  assert choose(lower_and_simplify(si.ast), Device[si.device].renderer).kind == "TILE"
  want = np.pad(np.maximum(a.transpose(0, 3, 1, 2), 0), ((0, 0), (0, 0), (1, 1), (1, 2)))
  for got in run_both(fn, a): np.testing.assert_array_equal(got, want)

def test_tiles_prefer_whole_vectors_then_even_ones():
  # an odd tile leaves one lane over and runs as scalar C: 114 columns (ResNet's padded 112) are tiled by 38, not 57
  from fusegrad.codegen.opt import _tile
  assert _tile(114, 64) == 38 and _tile(56, 64) == 56 and _tile(112, 64) == 56 and _tile(57, 64) == 57 and _tile(7, 64) == 7

@pytest.mark.parametrize("isa_facts", [(16, 32), (8, 16), (4, 16)])
def test_each_accumulator_update_follows_its_value(isa_facts):
  # with 16 registers a register tile's products are added as soon as they are computed, so each operand is live only
  # for its own FMAs (all loads first, then all FMAs, made gcc spill an AVX2 conv weight gradient's 3 x 4 tile); with
  # 32 the updates come after all the loads
  from fusegrad.codegen.linearize import linearize
  from fusegrad.codegen.lowerer import lower_kernel
  from fusegrad.schedule import create_schedule
  from fusegrad.uop.ops import Ops
  target = Device["CPU"].renderer
  width, registers = isa_facts
  target = type(target).__new__(type(target))
  target.__dict__.update(Device["CPU"].renderer.__dict__, simd_width=width, vector_registers=registers)
  x, w = Tensor.empty(8, 32, 20, 20), Tensor.empty(32, 32, 3, 3, requires_grad=True)
  (x.conv2d(w, padding=1).square().sum()).backward()
  for t in (Tensor.empty(64, 96) @ Tensor.empty(96, 128), w.grad):
    ast = [si.ast for si in create_schedule([t.uop])[0] if any(u.op is Ops.REDUCE_AXIS for u in si.ast.toposort())][-1]
    uops = linearize(lower_kernel(ast), target)
    updates = [i for i, u in enumerate(uops) if u.op is Ops.ACC_UPDATE]
    assert len(updates) >= 3 and all(uops[i - 1] is uops[i].src[1] for i in updates) == (registers < 32)
