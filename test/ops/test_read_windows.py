"""A kernel that reads a box of a realized tensor (`x[i]`, `x[a:b]`, `x[:, j]`, `x[a:b, c:d]`) takes it as an input
buffer of its own (a Window: a pointer to its first element, read with the buffer's strides), not as constant offsets
in its code: a loop over the rows of a dataset or the columns of a matrix compiles one kernel, not one per position,
and its schedule is cached once for every position."""
import random
import numpy as np
import pytest
from fusegrad import Context, Tensor, TinyJit, dtypes
from .test_setitem_in_place import _launches

def test_a_loop_over_rows_compiles_one_kernel():
  xn = np.arange(6 * 5, dtype=np.float32).reshape(6, 5)
  x = Tensor(xn).realize()
  with _launches() as launched:
    got = [(x[i] * 2 + 1).numpy() for i in (0, 3, 5, -1, 3)]
  for g, i in zip(got, (0, 3, 5, -1, 3)): np.testing.assert_array_equal(g, xn[i] * 2 + 1)
  assert len({ast for ast, _, _ in launched}) == 1, "each row compiled its own kernel"
  assert launched[-1][2], "reading the same row again is a schedule cache hit"

def _random_index(rng: random.Random, shape: tuple) -> tuple:
  """ints and step-1 slices: some select a contiguous range (a window), some do not."""
  idx = []
  for size in shape:
    k = rng.random()
    if k < 0.4: idx.append(rng.randrange(size))
    elif k < 0.8:
      a = rng.randrange(size)
      idx.append(slice(a, rng.randrange(a + 1, size + 1)))
    else: idx.append(slice(None))
  return tuple(idx)

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16, np.uint8])
@pytest.mark.parametrize("shape", [(9,), (4, 7), (3, 4, 5), (2, 1, 3, 4)])
def test_random_ranges_match_numpy(shape, dtype):
  rng = random.Random(hash((shape, dtype.__name__)) % 1000)
  xn = (np.arange(int(np.prod(shape))) % 50).astype(dtype).reshape(shape)
  x = Tensor(xn).realize()
  for _ in range(12):
    i, j = _random_index(rng, shape), _random_index(rng, shape)
    np.testing.assert_array_equal((x[i] + 1).numpy(), xn[i] + 1, err_msg=f"x[{i}] + 1")
    if xn[i].shape == xn[j].shape:  # two ranges (or the same one twice) in one kernel
      np.testing.assert_array_equal((x[i] * x[j]).numpy(), xn[i] * xn[j], err_msg=f"x[{i}] * x[{j}]")

def test_a_cached_schedule_reads_the_new_inputs_range():
  a, b = np.arange(20, dtype=np.float32).reshape(4, 5), -np.arange(20, dtype=np.float32).reshape(4, 5)
  for xn in (a, b, a):
    np.testing.assert_array_equal((Tensor(xn).realize()[2:4] * 3).numpy(), xn[2:4] * 3)

def test_writes_and_reads_of_ranges_in_program_order():
  xn = np.arange(12, dtype=np.float32).reshape(3, 4)
  x = Tensor(xn.copy()).contiguous().realize()
  before = x[1] * 10
  before.realize()
  x[1] = Tensor([7.0, 7.0, 7.0, 7.0])
  after = x[1] * 10
  np.testing.assert_array_equal(before.numpy(), xn[1] * 10)
  np.testing.assert_array_equal(after.numpy(), np.full(4, 70.0))

def test_a_jit_replay_reads_its_new_input():
  step = TinyJit(lambda x: (x[1:3] * 2).realize())
  for k in range(4):
    xn = np.arange(12, dtype=np.float32).reshape(4, 3) + k
    np.testing.assert_array_equal(step(Tensor(xn).realize()).numpy(), xn[1:3] * 2)

def test_the_python_device_reads_ranges():
  xn = np.arange(12, dtype=np.float32).reshape(3, 4)
  x = Tensor(xn, device="PYTHON").realize()
  np.testing.assert_array_equal((x[2] + x[0]).numpy(), xn[2] + xn[0])

def test_gradients_through_a_range_of_a_realized_tensor():
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), requires_grad=True).realize()
  (x[1] * Tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 0, 0], [1, 2, 3, 4], [0, 0, 0, 0]])

def test_a_bitcast_buffer_keeps_its_own_dtype():
  x = Tensor(np.arange(8, dtype=np.int32)).realize()
  np.testing.assert_array_equal(x.bitcast(dtypes.float32)[2:4].bitcast(dtypes.int32).numpy(), [2, 3])

@pytest.mark.parametrize("where", ["NOOPT", "PYTHON"])
def test_windows_match_noopt_and_the_python_device(where):
  # the window kernels against the unoptimized kernels and the interpreter, on odd shapes
  rng = random.Random(7)
  for shape in [(5, 3), (3, 1, 7), (2, 3, 5)]:
    xn = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 7
    x = Tensor(xn, device="PYTHON" if where == "PYTHON" else None).realize()
    with Context(NOOPT=int(where == "NOOPT")):
      for _ in range(6):
        i, j = _random_index(rng, shape), _random_index(rng, shape)
        got = (x[i] * 3 + x[j] if xn[i].shape == xn[j].shape else x[i] * 3).numpy()
        np.testing.assert_array_equal(got, xn[i] * 3 + xn[j] if xn[i].shape == xn[j].shape else xn[i] * 3, err_msg=f"{where} x[{i}], x[{j}]")

def _one_kernel_then_hits(launched) -> None:
  assert len({ast for ast, _, _ in launched}) == 1, "each position compiled its own kernel"
  assert all(hit for _, _, hit in launched[1:]), "a read at a new position missed the schedule cache"

def test_a_loop_over_columns_compiles_one_kernel_and_hits_the_schedule_cache():
  xn = np.arange(6 * 5, dtype=np.float32).reshape(6, 5)
  x = Tensor(xn).realize()
  with _launches() as launched:
    got = [(x[:, j] * 2 + 1).numpy() for j in (0, 3, 4, -2, 1)]
  for g, j in zip(got, (0, 3, 4, -2, 1)): np.testing.assert_array_equal(g, xn[:, j] * 2 + 1)
  _one_kernel_then_hits(launched)

def test_rows_and_boxes_at_new_positions_hit_the_schedule_cache():
  xn = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
  x = Tensor(xn).realize()
  for index in (lambda j: (j,), lambda j: (slice(1, 3), j, slice(1, 4)), lambda j: (slice(None), slice(j, j + 2))):
    with _launches() as launched:
      got = [(x[index(j)] - 1).numpy() for j in (0, 2, 1, 3)]
    for g, j in zip(got, (0, 2, 1, 3)): np.testing.assert_array_equal(g, xn[index(j)] - 1)
    _one_kernel_then_hits(launched)

def test_a_realized_result_is_read_by_position_too():
  xn = np.arange(20, dtype=np.float32).reshape(4, 5)
  x = (Tensor(xn) * 2).realize()  # a realized node, not a bare buffer
  with _launches() as launched:
    got = [(x[:, j] + x[1:3, j].sum()).numpy() for j in range(4)]
  for g, j in zip(got, range(4)): np.testing.assert_array_equal(g, xn[:, j] * 2 + (xn[1:3, j] * 2).sum())
  assert len({ast for ast, _, _ in launched}) <= 2 and launched[-1][2]

def test_two_reads_that_were_one_window_and_then_are_two():
  # equal ranges share one input of the kernel: the cached schedule must not make them one when they differ
  xn = np.arange(12, dtype=np.float32)
  x = Tensor(xn).realize()
  for i, j in ((1, 1), (1, 2), (2, 2), (0, 2)):
    got = (x.reshape(3, 4)[i] * 10 + x[4 * j:4 * j + 4]).numpy()
    np.testing.assert_array_equal(got, xn.reshape(3, 4)[i] * 10 + xn[4 * j:4 * j + 4], err_msg=f"{i}, {j}")
    got = (x.reshape(3, 4)[:, i] * 10 + x.reshape(3, 4)[:, j]).numpy()
    np.testing.assert_array_equal(got, xn.reshape(3, 4)[:, i] * 10 + xn.reshape(3, 4)[:, j], err_msg=f"columns {i}, {j}")
