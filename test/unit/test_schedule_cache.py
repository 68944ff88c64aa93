"""The schedule cache (schedule/cache.py): a graph realized again with new input buffers reuses the cached schedule,
and gives exactly what the uncached path gives (SCACHE=0)."""
import numpy as np
import pytest
from fusegrad import Tensor, TinyJit, Context, Variable, dtypes
from fusegrad import buffers, schedule as sched
from fusegrad.schedule import cache

@pytest.fixture(autouse=True)
def fresh_cache():
  cache._cache.clear()
  yield
  cache._cache.clear()

@pytest.fixture
def analyses(monkeypatch):
  """Counts runs of the scheduler's graph analysis (a cache hit skips it)."""
  calls = []
  real = sched.decide_buffers
  monkeypatch.setattr(sched, "decide_buffers", lambda *a: calls.append(1) or real(*a))
  return calls

def step(x: Tensor) -> Tensor:
  # a reduce read through an expand gives several kernels, an intermediate buffer and memory planning
  y = (x * 1.5 + 0.25).relu()
  return (y - y.max(axis=1, keepdim=True)).exp().sum(axis=1) + x.mean()

def data(i: int, shape=(3, 5), dtype=np.float32) -> np.ndarray:
  return (np.arange(np.prod(shape)).reshape(shape) * 0.37 - 2 + i).astype(dtype)

def schedule_shape(items: list) -> list:
  """Items with their buffers renamed by first use: equal when two schedules alias buffers the same way."""
  names: dict = {}
  return [(si.ast, si.device, si.var_vals, tuple(names.setdefault(b, len(names)) for b in si.bufs),
           tuple((b.size, b.dtype) for b in si.bufs)) for si in items]

def test_hit_matches_uncached_and_skips_analysis(analyses):
  xs = [Tensor(data(i)).realize() for i in range(4)]
  want = []
  with Context(SCACHE=0):
    for x in xs: want.append(step(x).numpy())
  analyses.clear()
  got = [step(x).numpy() for x in xs]
  assert len(analyses) == 1  # the first call fills the cache, the other three hit
  for g, w in zip(got, want): np.testing.assert_array_equal(g, w)

def test_hit_builds_the_same_schedule():
  x0, x1 = Tensor(data(0)).realize(), Tensor(data(1)).realize()
  sched.create_schedule([step(x0).uop])  # fill
  hit, hit_views = sched.create_schedule([(t := step(x1)).uop])
  with Context(SCACHE=0): miss, miss_views = sched.create_schedule([t.uop])
  assert schedule_shape(hit) == schedule_shape(miss) and len(hit) > 1
  assert buffers.buffer_of(buffers.buffer_view(x1.uop)) in hit[0].bufs  # this call's input, not the cached one's
  (hv,), (mv,) = hit_views.values(), miss_views.values()
  assert (hv.shape, hv.dtype) == (mv.shape, mv.dtype) and buffers.buffer_of(hv.base) is hit[-1].bufs[0]

def test_new_outputs_every_call():
  x = Tensor(data(0)).realize()
  a, b = step(x).realize(), step(x).realize()
  assert buffers.buffer_view(a.uop) is not buffers.buffer_view(b.uop)
  np.testing.assert_array_equal(a.numpy(), b.numpy())

@pytest.mark.parametrize("other", [dict(shape=(5, 3)), dict(dtype=np.int32), dict(shape=(3, 6))])
def test_other_shape_or_dtype_misses(analyses, other):
  step(Tensor(data(0)).realize()).realize()
  y = step(Tensor(data(1, **other)).realize()).realize()
  assert len(analyses) == 2
  with Context(SCACHE=0): want = step(Tensor(data(1, **other)).realize()).numpy()
  np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)

def test_same_buffer_twice_is_a_different_graph(analyses):
  a, b = Tensor(data(0)).realize(), Tensor(data(1)).realize()
  np.testing.assert_allclose((a * b + a).numpy(), data(0) * data(1) + data(0), rtol=1e-6)
  np.testing.assert_allclose((a * a + a).numpy(), data(0) * data(0) + data(0), rtol=1e-6)
  assert len(analyses) == 2

def test_signed_zero_constants_stay_apart():
  x = Tensor(data(0)[0] + 10).realize()
  assert (1 / (x * 0.0)).numpy().min() == np.inf
  assert (1 / (x * -0.0)).numpy().max() == -np.inf

def test_cache_off_switch():
  with Context(SCACHE=0): step(Tensor(data(0)).realize()).realize()
  assert not cache._cache
  step(Tensor(data(0)).realize()).realize()
  assert cache._cache

def test_realize_several_targets(analyses):
  def both(x):
    h = (x + 1).sum(axis=0)
    return h * 2, (h - 1).exp()
  got = []
  for i in range(3):
    p, q = both(Tensor(data(i)).realize())
    Tensor.realize_all(p, q)
    got.append((p.numpy(), q.numpy()))
  assert len(analyses) == 1
  for i, (p, q) in enumerate(got):
    h = (data(i) + 1).sum(axis=0)
    np.testing.assert_allclose(p, h * 2, rtol=1e-5)
    np.testing.assert_allclose(q, np.exp(h - 1), rtol=1e-5)

def test_realized_intermediate_is_read_not_recomputed():
  # b's graph still holds a's old node, which the realized map swaps for a's buffer
  for i in range(3):
    x = Tensor(data(i)).realize()
    a = (x + 1).sum(axis=1)
    b = a * 2 + x.sum(axis=1)
    a.realize()
    np.testing.assert_allclose(b.numpy(), (data(i) + 1).sum(axis=1) * 2 + data(i).sum(axis=1), rtol=1e-5)

def test_realized_nodes_sharing_a_buffer():
  """Two realized nodes are keyed by their buffers: p * q with two buffers must not reuse a schedule for two nodes
  that were realized into the same buffer (they merge into one node once swapped for it)."""
  x = Tensor(data(0)).realize()
  p, q = x + 2, x + 3
  old_p, old_q = p.uop, q.uop
  p.realize(); q.realize()
  np.testing.assert_allclose((Tensor(old_p) * Tensor(old_q)).numpy(), (data(0) + 2) * (data(0) + 3), rtol=1e-6)
  a = x + 1
  old_a = a.uop
  a.realize()
  s1, s2 = Tensor(old_a) + 1, a + 1  # different nodes, the same once old_a is swapped for a's buffer: one kernel
  old_s1, old_s2 = s1.uop, s2.uop
  assert old_s1 is not old_s2
  Tensor.realize_all(s1, s2)
  assert buffers.buffer_view(old_s1) is buffers.buffer_view(old_s2)
  np.testing.assert_allclose((Tensor(old_s1) * Tensor(old_s2)).numpy(), (data(0) + 2) ** 2, rtol=1e-6)

def test_assign_loop_matches_numpy(analyses):
  w, want = Tensor(np.zeros((3, 5), np.float32)).realize(), np.zeros((3, 5), np.float32)
  for i in range(4):
    w.assign(w * 0.5 + Tensor(data(i)).realize()).realize()
    want = want * 0.5 + data(i)
  np.testing.assert_allclose(w.numpy(), want, rtol=1e-6)
  assert len(analyses) == 1

def test_setitem_in_place_and_views():
  base = Tensor(np.zeros(6, np.float32)).realize()
  view = base.reshape(2, 3)
  for i in range(3):
    base[1:4] = Tensor(np.full(3, i + 1, np.float32)).realize()
    assert view.numpy().tolist() == [[0, i + 1, i + 1], [i + 1, 0, 0]]
    np.testing.assert_allclose((view * 2).sum().numpy(), 6 * (i + 1))

def test_random_numbers_match_uncached():
  def draws():
    Tensor.manual_seed(7)
    return [(Tensor.rand(4, 3) * 2 + Tensor.randn(4, 3)).numpy() for _ in range(4)]
  with Context(SCACHE=0): want = draws()
  got = draws()
  for g, w in zip(got, want): np.testing.assert_array_equal(g, w)
  assert len({g.tobytes() for g in got}) == 4  # the offset advances per call, it is not baked into the cached schedule

def test_bound_variable_values_per_call(analyses):
  v = Variable("scache_v", 0, 100)
  outs = [(Tensor(data(0)).realize() + Tensor(v.bind(i)).cast(dtypes.float32)).numpy() for i in (3, 9, 40)]
  for i, o in zip((3, 9, 40), outs): np.testing.assert_allclose(o, data(0) + i)
  assert len(analyses) == 1

def test_two_bindings_of_one_variable():
  v = Variable("scache_w", 0, 100)
  def f(i, j): return (Tensor(v.bind(i)) * 10 + Tensor(v.bind(j))).item()
  # equal values are one BIND node, different ones two: different graphs, and both stay right when cached
  assert [f(1, 2), f(3, 4), f(5, 5), f(6, 6), f(7, 8)] == [12, 34, 55, 66, 78]

def test_tinyjit_captures_cached_schedule():
  w = Tensor(data(0)).realize()
  jit = TinyJit(lambda x: step(x * w).realize())
  for i in range(5):
    x = Tensor(data(i)).realize()
    with Context(SCACHE=0): want = step(x * w).numpy()
    np.testing.assert_array_equal(jit(x).numpy(), want)
  assert jit.captured is not None

def test_a_permuted_contiguous_realizes_as_a_view_of_its_buffer(analyses):
  # x.contiguous().permute(...) realized is the contiguous buffer seen through the permute (no copy into the new
  # order), from the uncached path and from the cache alike; reading it or writing into it sees the permuted values
  for i in range(3):
    x = data(i, (2, 3, 4))
    before = len(analyses)
    t = (Tensor(x) * 2).contiguous().permute(2, 0, 1).realize()
    assert len(analyses) - before == (i == 0)  # later calls hit the cache
    assert t.uop.op.name == "PERMUTE" and buffers.buffer_view(t.uop.src[0]) is not None
    np.testing.assert_array_equal(t.numpy(), (x * 2).transpose(2, 0, 1))
    t[1, 0] = -1.0
    want = (x * 2).transpose(2, 0, 1).copy()
    want[1, 0] = -1.0
    np.testing.assert_array_equal(t.numpy(), want)
    np.testing.assert_array_equal((t + 1).numpy(), want + 1)

def test_tinyjit_keeps_plain_buffers_for_permuted_targets():
  step = TinyJit(lambda x: (x * 2).contiguous().permute(1, 0).realize())
  for i in range(4):
    x = data(i, (3, 5))
    out = step(Tensor(x))
    assert buffers.buffer_view(out.uop) is not None  # a replay hands back the captured buffer
    np.testing.assert_array_equal(out.numpy(), (x * 2).T)
