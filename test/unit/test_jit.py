"""TinyJit (engine/jit.py) on the PYTHON device: run once, capture on the 2nd call, replay the captured kernels from the 3rd."""
import numpy as np
import pytest
from fusegrad import Tensor, TinyJit, GlobalCounters, Context, Variable, dtypes

def arr(*vals) -> Tensor: return Tensor(np.asarray(vals, np.float32)).realize()

class Counted:
  """A step function that records how often its Python body runs."""
  def __init__(self, fn): self.fn, self.calls = fn, 0
  def __call__(self, *args, **kwargs):
    self.calls += 1
    return self.fn(*args, **kwargs)

class TestCaptureReplay:
  def test_capture_on_second_call_replay_from_third(self):
    body = Counted(lambda a, b: (a * b + 1).sum(0).realize())
    f = TinyJit(body)
    assert f.cnt == 0 and f.captured is None
    kernels, cnts, captured = [], [], []
    for i in range(5):
      a, b = Tensor(np.full((3, 4), i, np.float32)).realize(), Tensor(np.ones((3, 4), np.float32)).realize()
      GlobalCounters.reset()
      out = f(a, b)
      kernels.append(GlobalCounters.kernel_count)
      cnts.append(f.cnt)
      captured.append(None if f.captured is None else len(f.captured))
      assert out.tolist() == [3.0 * (i + 1)] * 4
    assert body.calls == 2, "the function body ran after the capture"
    assert cnts == [1, 2, 2, 2, 2]
    assert captured == [None, 1, 1, 1, 1]
    assert kernels == [1, 1, 1, 1, 1]  # a replay launches exactly the captured kernels

  def test_replay_launches_every_captured_kernel_and_nothing_else(self):
    def step(x):
      h = (x * 2).contiguous()  # forces a kernel of its own
      return (h.sum() + h.max()).realize()
    f = TinyJit(step)
    for i in range(3): f(arr(i, 1.0, 2.0))
    assert len(f.captured) >= 2
    x = arr(5.0, -1.0, 3.0)
    GlobalCounters.reset()
    assert f(x).item() == 2 * 7.0 + 10.0
    assert GlobalCounters.kernel_count == len(f.captured)

  def test_replay_counts_its_kernels_like_a_run_and_prints_them_at_debug_2(self, capsys):
    def step(x): return ((x * 2).contiguous().sum() + 1).realize()
    f = TinyJit(step)
    GlobalCounters.reset()
    f(arr(1.0, 2.0))
    counted = (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem)
    for debug in (0, 2):  # a replay counts its kernels after the loop, or one by one as it prints them
      with Context(DEBUG=debug):
        f(arr(1.0, 2.0))  # capture, then replays
        capsys.readouterr()
        GlobalCounters.reset()
        assert f(arr(3.0, 4.0)).item() == 15.0
      assert (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem) == counted
      assert GlobalCounters.time_sum_s > 0
      assert capsys.readouterr().out.count("***") == (counted[0] if debug else 0)

  def test_a_kernel_of_unchanged_weights_is_skipped_until_they_change(self):
    w = arr(1.0, 2.0, 3.0)
    f = TinyJit(lambda x: (x * (w * 2).contiguous()).sum().realize())  # (w * 2) reads only w: a static kernel
    x = arr(1.0, 1.0, 1.0)
    for _ in range(3): assert f(x).item() == 12.0  # run, capture, first replay (runs every kernel)
    def replay() -> tuple[float, int]:
      GlobalCounters.reset()
      return f(x).item(), GlobalCounters.kernel_count
    assert replay() == (12.0, len(f.captured) - 1)
    w.assign(arr(3.0, 3.0, 3.0)).realize()  # written between calls (a copy): the replay must compute w * 2 again
    assert replay() == (18.0, len(f.captured))
    assert replay() == (18.0, len(f.captured) - 1)
    w[1] = 4.0  # written in place by a kernel
    w.realize()
    assert replay() == (20.0, len(f.captured))
    w.data()[0] = 5.0  # a write through a memoryview carries no stamp: the kernel always runs from now on
    assert replay() == (24.0, len(f.captured))
    w.data()[1] = 0.0
    assert replay() == (16.0, len(f.captured))
    assert f(arr(1.0, 0.0, 1.0)).item() == 16.0

  def test_a_static_kernels_output_gets_its_own_buffer_and_is_skipped(self):
    w = arr(1.0, 2.0, 3.0)
    def step(x):
      first = (x * (w * 2).contiguous()).sum().contiguous()  # (w * 2) is static and dead after this sum...
      y = (x * first).contiguous()  # ...so memory planning gives its buffer to y
      return (y * 3).sum().realize()
    f = TinyJit(step)
    x = arr(1.0, 1.0, 1.0)
    for _ in range(3): assert f(x).item() == 108.0
    outs = [si.bufs[0] for si, _ in f.captured]
    assert len(set(outs)) == len(outs), "the capture should keep the static result in a buffer of its own"
    GlobalCounters.reset()
    assert f(x).item() == 108.0
    assert GlobalCounters.kernel_count == len(f.captured) - 2  # (w * 2), and the sum reading it and the same x
    GlobalCounters.reset()
    assert f(arr(1.0, 0.0, 1.0)).item() == 2 * 8.0 * 3 and GlobalCounters.kernel_count == len(f.captured) - 1

  def test_a_static_kernels_shared_output_is_computed_again_after_another_kernel_wrote_it(self):
    w = arr(1.0, 2.0, 3.0)
    def step(x):
      wide = (w * 2).reshape(3, 1).expand(3, 2).contiguous()  # static, but larger than its input: not given its own buffer
      first = (x * wide).sum().contiguous()
      y = (x * first).contiguous()  # memory planning gives y the buffer of `wide`, and each replay writes it
      return (y * 3).sum().realize()
    f = TinyJit(step)
    x = Tensor(np.ones((3, 2), np.float32)).realize()
    for _ in range(5): assert f(x).item() == 24.0 * 6 * 3
    outs = [si.bufs[0] for si, _ in f.captured]
    assert len(set(outs)) < len(outs), "the case needs two kernels writing one buffer"

  def test_replay_with_new_data_gives_new_results(self):
    f = TinyJit(lambda a: (a * a - 1).realize())
    rng = np.random.default_rng(0)
    for _ in range(5):
      x = rng.integers(-8, 8, (2, 3)).astype(np.float32)
      np.testing.assert_array_equal(f(Tensor(x)).numpy(), x * x - 1)

  def test_returned_tensors_are_overwritten_by_the_next_call(self):
    # documented: a returned tensor views the captured output buffer, so read it before the next call
    f = TinyJit(lambda a: (a + 1).realize())
    for i in range(3): f(arr(float(i)))
    out3 = f(arr(10.0))
    assert out3.tolist() == [11.0]
    out4 = f(arr(20.0))
    assert out4.tolist() == [21.0] and out3.tolist() == [21.0]

  def test_tuple_of_outputs(self):
    f = TinyJit(lambda a: ((a + 1).realize(), (a * 3).sum().realize()))
    for i in range(4):
      p, s = f(arr(float(i), 2.0))
      assert p.tolist() == [i + 1.0, 3.0] and s.item() == 3 * (i + 2.0)

class TestInputChecks:
  def _captured(self, fn):
    f = TinyJit(fn)
    for _ in range(3): f(Tensor.ones(4).contiguous().realize())
    assert f.cnt == 2
    return f

  def test_shape_change_raises(self):
    f = self._captured(lambda a: (a * 2).realize())
    with pytest.raises(ValueError, match=r"\(5,\)"): f(Tensor.ones(5).contiguous().realize())

  def test_dtype_change_raises(self):
    f = self._captured(lambda a: (a * 2).realize())
    with pytest.raises(ValueError, match="int"): f(Tensor([1, 2, 3, 4], dtype=dtypes.int32).realize())

  def test_reset_captures_again_with_the_new_shape(self):
    body = Counted(lambda a: (a * 2).realize())
    f = self._captured(body)
    f.reset()
    assert f.cnt == 0 and f.captured is None
    for i in range(3): assert f(arr(1.0, 2.0, float(i))).tolist() == [2.0, 4.0, 2.0 * i]
    assert f.cnt == 2 and body.calls == 4

class TestNonTensorArguments:
  def test_a_different_python_value_is_a_new_capture(self):
    body = Counted(lambda x, k: (x * k).realize())
    f = TinyJit(body)
    x = arr(1.0, 2.0)
    for _ in range(3): assert f(x, 2).tolist() == [2.0, 4.0]
    assert body.calls == 2
    for _ in range(3): assert f(x, 3).tolist() == [3.0, 6.0]  # not the kernels captured for k=2
    assert body.calls == 4
    assert f(x, 2).tolist() == [2.0, 4.0] and body.calls == 4  # the k=2 capture is still there

  def test_int_and_float_of_equal_value_are_different_captures(self):
    body = Counted(lambda x, k: (x + k).realize())
    f = TinyJit(body)
    for _ in range(3): f(arr(1.0), 1)
    f(arr(1.0), 1.0)
    assert body.calls == 3

  def test_keyword_argument_selects_a_capture(self):
    f = TinyJit(lambda x, mode="add": (x + 1 if mode == "add" else x * 10).realize())
    for _ in range(3): assert f(arr(2.0), mode="add").item() == 3.0
    for _ in range(3): assert f(arr(2.0), mode="mul").item() == 20.0

  def test_unhashable_argument_raises_naming_it(self):
    f = TinyJit(lambda x, scales, cfg=None: (x * len(scales)).realize())
    with pytest.raises(TypeError, match="argument scales is a set"): f(arr(1.0), {1.0, 2.0})
    with pytest.raises(TypeError, match=r"argument cfg\['w'\] is a bytearray"): f(arr(1.0), (1, 2), cfg={"w": bytearray(2)})
    assert f(arr(1.0), [1, 2, 3]).item() == 3.0  # lists and dicts of plain values are keyed by value
    assert f.cnt == 1

  def test_bound_variable_replays_with_new_values(self):
    body = Counted(lambda x, v: (x + Tensor(v).float()).realize())
    f = TinyJit(body)
    i = Variable("i", 0, 10)
    x = arr(1.0, 2.0)
    outs = [f(x, i.bind(n)).tolist() for n in (3, 5, 0, 10, 7)]
    assert outs == [[1.0 + n, 2.0 + n] for n in (3, 5, 0, 10, 7)]
    assert body.calls == 2 and f.cnt == 2, "a new bound value must be passed to the kernels, not captured again"

  def test_bound_variable_selects_an_element(self):
    # the value decides which element is read: a replay that kept the captured value would pick the old one
    data = Tensor(np.arange(12, dtype=np.float32) * 3).realize()
    f = TinyJit(lambda x, p: ((Tensor.arange(12) == Tensor(p)).where(data, 0.0).sum() + x).realize())
    p = Variable("p", 0, 11)
    for n in (0, 4, 11, 2, 7):
      assert f(arr(0.5), p.bind(n)).item() == 3.0 * n + 0.5
    assert f.cnt == 2

class TestState:
  def test_optimizer_like_assign_updates_each_replay(self):
    w = arr(10.0, 20.0)
    body = Counted(lambda x: w.assign(w - x).realize())
    f = TinyJit(body)
    seen = []
    for i in range(6):
      f(arr(1.0, float(i)))
      seen.append(w.tolist())
    want, cur = [], [10.0, 20.0]
    for i in range(6):
      cur = [cur[0] - 1.0, cur[1] - i]
      want.append(cur)
    assert seen == want and body.calls == 2

  def test_state_and_returned_loss(self):
    w = arr(1.0, 2.0, 3.0)
    def step(x):
      loss = (w * x).sum()
      w.assign(w * 0.5)
      Tensor.realize_all(loss, w)
      return loss
    f = TinyJit(step)
    got = [f(arr(1.0, 1.0, 1.0)).item() for _ in range(5)]
    assert got == [6.0 * 0.5 ** i for i in range(5)]
    assert w.tolist() == [0.5 ** 5, 2 * 0.5 ** 5, 3 * 0.5 ** 5]

  def test_sgd_momentum_step_matches_eager(self):
    # parameters and momentum buffers get new buffers each step: the replay must read the latest and write the other
    from fusegrad.nn import optim
    w0 = np.array([[0.5, -1.0], [1.5, 0.25], [-0.75, 1.0]], np.float32)
    def make():
      w = Tensor(w0.copy(), requires_grad=True)
      opt = optim.SGD([w], lr=0.05, momentum=0.9)
      @Tensor.train()
      def step(x):
        opt.zero_grad()
        loss = (x @ w).square().sum()
        loss.backward()
        opt.step()
        return loss
      return w, step
    xs = [Tensor(np.full((2, 3), 0.5 * (i + 1), np.float32)) for i in range(5)]
    w1, eager = make()
    l1 = [eager(x).item() for x in xs]
    w2, step = make()
    f = TinyJit(step)
    l2 = [f(x).item() for x in xs]
    assert f.cnt == 2
    np.testing.assert_allclose(l2, l1, rtol=1e-6)
    np.testing.assert_allclose(w2.numpy(), w1.numpy(), rtol=1e-6)
    assert not np.allclose(w2.numpy(), w0), "the step did not update the parameters"

  def test_input_written_in_place_reaches_the_callers_tensor(self):
    def step(a):
      a += 1
      return (a * 2).realize()
    f = TinyJit(step)
    for i in range(5):
      a = arr(float(i), 10.0)
      out = f(a)
      assert a.tolist() == [i + 1.0, 11.0] and out.tolist() == [2 * (i + 1.0), 22.0]
    assert f.cnt == 2

  def test_write_through_a_view_updates_the_base(self):
    cache = Tensor.zeros(5).contiguous().realize()
    def step(v):
      cache[1:3].assign(v).realize()
      return cache.sum().realize()
    f = TinyJit(step)
    for i in range(5):
      out = f(arr(float(i), 2.0 * i))
      assert cache.tolist() == [0.0, float(i), 2.0 * i, 0.0, 0.0]
      assert out.item() == 3.0 * i
    assert f.cnt == 2

  def test_tensor_assigned_between_calls_is_read_by_the_replay(self):
    scale = arr(1.0)
    f = TinyJit(lambda x: (x * scale).realize())
    got = []
    for i in range(5):
      scale.assign(arr(float(i))).realize()
      got.append(f(arr(1.0, -2.0)).tolist())
    assert got == [[i, -2.0 * i] for i in range(5)]

class TestModes:
  def test_jit_disabled_runs_the_function_every_time(self):
    body = Counted(lambda a: (a * 2).realize())
    f = TinyJit(body)
    with Context(JIT=0):
      for i in range(4): assert f(arr(float(i))).item() == 2.0 * i
    assert body.calls == 4 and f.cnt == 0 and f.captured is None

  def test_method_keeps_a_capture_per_instance(self):
    class Scale:
      def __init__(self, k): self.k, self.calls = k, 0
      @TinyJit
      def __call__(self, x):
        self.calls += 1
        return (x * self.k).realize()
    a, b = Scale(2.0), Scale(5.0)
    for i in range(4):
      assert a(arr(float(i))).item() == 2.0 * i
      assert b(arr(float(i))).item() == 5.0 * i
    assert a.calls == 2 and b.calls == 2

  def test_rng_advances_across_replays(self):
    f = TinyJit(lambda a: (a + Tensor.rand(6)).realize())
    outs = [tuple(f(Tensor.zeros(6).contiguous().realize()).tolist()) for _ in range(5)]
    assert len(set(outs)) == 5, "a replay repeated an earlier call's random numbers"
    assert all(0.0 <= v < 1.0 for o in outs for v in o)
    assert f.cnt == 2

  def test_rng_replay_matches_eager_sequence(self):
    def step(a): return (a + Tensor.rand(4)).realize()
    Tensor.manual_seed(7)
    eager = [step(Tensor.zeros(4).contiguous().realize()).tolist() for _ in range(4)]
    Tensor.manual_seed(7)
    f = TinyJit(step)
    jitted = [f(Tensor.zeros(4).contiguous().realize()).tolist() for _ in range(4)]
    assert jitted == eager

def test_one_tensor_in_two_argument_slots_while_capturing_raises():
  # the replay used one buffer for both slots: f(x, y) gave x*2 + x (15 for 13) after a capture with f(a, a)
  @TinyJit
  def f(x, y): return (x * 2 + y).realize()
  a = Tensor([1.0], device="PYTHON").realize()
  with pytest.raises(ValueError, match="two arguments"):
    for _ in range(3): f(a, a)
  @TinyJit
  def g(x, y): return (x * 2 + y).realize()
  for _ in range(3): g(Tensor([1.0], device="PYTHON").realize(), Tensor([2.0], device="PYTHON").realize())
  x = Tensor([4.0], device="PYTHON").realize()
  assert g(x, Tensor([5.0], device="PYTHON").realize()).item() == 13.0 and g(x, x).item() == 12.0

def test_returned_inputs_and_their_views_follow_each_call():
  # a returned input (or a view of one) is no kernel's output: replays kept returning the capture call's values
  @TinyJit
  def f(x, y): return y, (x + y).realize(), x[1:], x.reshape(3, 1)
  for k in range(5):
    x, y = Tensor([k, k + 1.0, k + 2.0], device="PYTHON").realize(), Tensor([10.0 * k] * 3, device="PYTHON").realize()
    a, s, v, r = f(x, y)
    assert a.tolist() == [10.0 * k] * 3 and s.tolist() == [11.0 * k, 11.0 * k + 1, 11.0 * k + 2], k
    assert v.tolist() == [k + 1.0, k + 2.0] and r.tolist() == [[k], [k + 1.0], [k + 2.0]], k

def test_an_output_fed_back_as_the_next_input_is_read_before_it_is_rewritten():
  # x = step(x): from the first replay on, the input is the buffer the step writes its result into. A kernel read it in
  # place after another kernel (or itself, at another element) had written this call's result there
  @TinyJit
  def flip_twice(x): return (x.flip(0) * 2).realize()
  @TinyJit
  def with_sum(x): return (x * 2).contiguous().realize(), (x * 0 + x.sum()).realize()
  xn = np.arange(40, dtype=np.float32)
  x, y, ref_x, ref_y = Tensor(xn), Tensor(xn), xn, xn
  for _ in range(5):
    x, (y, s) = flip_twice(x), with_sum(y)
    ref_x, sums, ref_y = ref_x[::-1] * 2, ref_y.sum(), ref_y * 2
    assert np.array_equal(x.numpy(), ref_x) and np.array_equal(y.numpy(), ref_y) and np.array_equal(s.numpy(), np.full(40, sums, np.float32))

def test_a_returned_parameter_is_read_before_its_update_by_the_other_updates():
  # W is returned and updated; X's update reads W's value from before the step. The replay read W's result buffer,
  # already holding the new W (silently wrong from the first replay on)
  def run(jit: bool):
    W, X = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0], requires_grad=True)
    def step():
      W.grad = X.grad = None
      (X * W).sum().backward()  # X.grad = W, W.grad = X
      X.assign(X.detach() - 0.1 * X.grad)
      W.assign(W.detach() - 0.1 * W.grad)
      return Tensor.realize(W, X)
    fn = TinyJit(step) if jit else step
    return [(fn(), (W.tolist(), X.tolist()))[1] for _ in range(5)]
  assert run(True) == run(False)
