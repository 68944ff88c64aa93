"""TinyJit's capture and replay tests (test/unit/test_jit.py, which run on the PYTHON device) on the CPU device, whose
replays call compiled kernels through launchers that keep their ctypes arguments bound and rewrite only swapped buffers."""
from unit.test_jit import *  # noqa: F401,F403  (pytest collects the imported test classes here, on the default device)
from fusegrad import Device, Tensor, TinyJit

def test_these_run_on_the_cpu():
  assert Device.DEFAULT == "CPU"  # the PYTHON device's fixture lives in test/unit/conftest.py and does not reach here

# ======================================================================== silent wrong answers found by tinygrad's test_jit.py
def test_keyword_tensors_in_another_order():
  """The capture keyed keyword arguments sorted but bound them in call order: f(a=x, b=y) after f(b=y, a=x) swapped x and y."""
  @TinyJit
  def f(first, second): return (first / second).realize()
  a, b = Tensor([1.0, 2.0]), Tensor([4.0, 8.0])
  for _ in range(3): f(second=b, first=a)
  assert f(first=a, second=b).tolist() == [0.25, 0.25]
  assert f(second=a, first=b).tolist() == [4.0, 4.0]

def test_setitem_of_an_argument_is_replayed():
  """A write the call leaves pending (nothing returned, nothing realized) was made outside the capture: replays skipped it."""
  @TinyJit
  def g(t: Tensor, v: Tensor) -> None: t[1:3] = v
  for i in range(5):
    t = Tensor.zeros(4).contiguous().realize()
    g(t, Tensor([float(i + 1)] * 2))
    assert t.tolist() == [0.0, i + 1, i + 1, 0.0]

def test_nested_tinyjit():
  """An inner TinyJit replaying its own kernels inside the outer one's capture hid them from it: the outer replays returned
  the capture's values."""
  @TinyJit
  def inner(t: Tensor) -> Tensor: return t + 1
  @TinyJit
  def outer(t: Tensor) -> Tensor: return inner(t) * 3
  assert [outer(Tensor([i])).item() for i in range(6)] == [3, 6, 9, 12, 15, 18]

def test_assign_of_another_argument_is_replayed():
  """x.assign(a) makes x hold a's buffer: the replays copied the capture's a into x, not each call's."""
  @TinyJit
  def f(x: Tensor, a: Tensor) -> None:
    x.assign(a)
    x.realize()
  @TinyJit
  def g(x: Tensor, a: Tensor) -> None: x.assign(a)
  for fn in (f, g):
    x, seen = Tensor([0]).realize(), []
    for i in range(1, 6):
      fn(x, x.full_like(i).contiguous())
      seen.append(x.item())
    assert seen == [1, 2, 3, 4, 5]
