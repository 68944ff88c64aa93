"""Slices at a bound Variable: x[:, pos:pos+n] reads and writes n positions whose start is a value, so the shape is
fixed and one TinyJit capture serves every position (the KV cache of a decoder)."""
import numpy as np
import pytest
from fusegrad import Tensor, TinyJit, Variable

POS = Variable("pos", 0, 6)
DATA = np.arange(48, dtype=np.float32).reshape(2, 8, 3)

@pytest.mark.parametrize("p,off,n", [(0, 0, 2), (3, 0, 2), (6, 0, 2), (2, 1, 1), (4, 0, 0)])
def test_read_matches_the_plain_slice(p, off, n):
  v = POS.bind(p)
  got = Tensor(DATA)[:, v + off:v + off + n] if off else Tensor(DATA)[:, v:v + n]
  np.testing.assert_array_equal(got.numpy(), DATA[:, p + off:p + off + n])
  np.testing.assert_array_equal(Tensor(DATA)[..., v:v + 1, :].numpy(), DATA[:, p:p + 1])

def test_setitem_and_assign_write_into_the_base():
  cache = Tensor(DATA).contiguous().realize()
  view = cache[:, 1:3]  # a view taken before the write sees it, as with any in-place write
  v = POS.bind(1)
  cache[:, v:v + 2] = Tensor.ones(2, 2, 3)
  want = DATA.copy()
  want[:, 1:3] = 1
  np.testing.assert_array_equal(cache.numpy(), want)
  np.testing.assert_array_equal(view.numpy(), want[:, 1:3])
  part = cache[:, POS.bind(5):POS.bind(5) + 2]
  part.assign(Tensor.full((2, 2, 3), 7.0)).realize()
  want[:, 5:7] = 7
  np.testing.assert_array_equal(cache.numpy(), want)
  np.testing.assert_array_equal(part.numpy(), want[:, 5:7])

def test_one_capture_serves_every_position():
  cache = Tensor.zeros(1, 8, 2).contiguous().realize()
  calls = []
  @TinyJit
  def step(x, p):
    calls.append(p)
    cache[:, p:p + 1].assign(x).realize()
    return cache[:, p:p + 1].sum().realize()
  for i in range(7): assert step(Tensor([[[float(i + 1), 1.0]]]), POS.bind(i)).item() == i + 2
  assert len(calls) == 2, "a new position must replay the capture, not capture again"
  np.testing.assert_array_equal(cache.numpy()[0], [[i + 1, 1] for i in range(7)] + [[0, 0]])

def test_shrink_at_a_variable_is_the_same_slice():
  cache = Tensor.zeros(2, 8, 3).contiguous().realize()
  v = POS.bind(4)
  cache.shrink((None, (v, v + 2), None)).assign(Tensor.ones(2, 2, 3)).realize()
  want = np.zeros((2, 8, 3), np.float32)
  want[:, 4:6] = 1
  np.testing.assert_array_equal(cache.numpy(), want)
  np.testing.assert_array_equal(Tensor(DATA).shrink(((0, 2), (v, v + 1), (0, 3))).numpy(), DATA[:, 4:5])

def test_gradient_flows_through_the_read():
  x = Tensor(DATA, requires_grad=True)
  x[:, POS.bind(2):POS.bind(2) + 2].sum().backward()
  want = np.zeros_like(DATA)
  want[:, 2:4] = 1
  np.testing.assert_array_equal(x.grad.numpy(), want)

def test_bad_variable_slices_raise_clearly():
  x, v = Tensor(DATA), POS.bind(2)
  with pytest.raises(IndexError, match="can leave"): x[:, v:v + 3]          # pos up to 6: 6 + 3 > 8
  with pytest.raises(TypeError, match="start:start"): x[:, v:v + 2:2]       # a step
  with pytest.raises(TypeError, match="start:start"): x[:, v:5]             # a length that depends on the value
  with pytest.raises(TypeError, match="start:start"): x[:, v:Variable("q", 0, 6).bind(3)]
  with pytest.raises(TypeError, match="only slices"): x[[0, 1], v:v + 1]    # advanced indexing in another dim
  np.testing.assert_array_equal(x[1, v:v + 2].numpy(), DATA[1, 2:4])         # an int in another dim is applied first

def test_values_computed_before_the_write_keep_the_old_contents():
  cache = Tensor(DATA).contiguous().realize()
  doubled, view = cache * 2, cache[:, 2:4]  # a lazy value (computed now, as torch would) and a view (aliases the data)
  cache[:, POS.bind(2):POS.bind(2) + 2] = Tensor.zeros(2, 2, 3)
  np.testing.assert_array_equal(doubled.numpy(), DATA * 2)
  np.testing.assert_array_equal(view.numpy(), np.zeros((2, 2, 3)))
  np.testing.assert_array_equal((cache * 1).numpy()[:, 2:4], np.zeros((2, 2, 3)))  # no stale cached result

def test_jit_replays_write_the_same_buffer():
  cache = Tensor.zeros(1, 8, 2).contiguous().realize()
  buf = cache._buffer()
  step = TinyJit(lambda x, p: (cache[:, p:p + 1].assign(x), cache.sum().realize())[1])
  total = 0.0
  for i in range(7):
    total += i + 2
    assert step(Tensor([[[float(i + 1), 1.0]]]), POS.bind(i)).item() == total
    assert cache._buffer() is buf  # written in place: no second buffer swapped in and out

def test_value_read_from_the_written_buffer():
  cache = Tensor(DATA).contiguous().realize()
  cache[:, POS.bind(2):POS.bind(2) + 2] = cache[:, POS.bind(3):POS.bind(3) + 2] * 10  # an overlapping shift
  want = DATA.copy()
  want[:, 2:4] = DATA[:, 3:5] * 10
  np.testing.assert_array_equal(cache.numpy(), want)
