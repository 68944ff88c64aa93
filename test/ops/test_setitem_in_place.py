"""`x[index] = v` with ints and step-1 slices into a tensor that holds a buffer writes only the indexed box, in place,
with one compiled kernel for every position (the box's start is a launch value): filling a matrix row by row costs
one compile, not one per row, and each write is O(box), not O(tensor)."""
import contextlib, random
import numpy as np
import pytest
import torch
from fusegrad import Context, Tensor, TinyJit, Variable
from fusegrad.schedule import cache as schedule_cache
from fusegrad.uop.ops import Ops
from fusegrad.tensor import tensor as tensor_module

POS = Variable("pos", 0, 2)

@contextlib.contextmanager
def _launches():
  """Records the kernels launched inside the block, as (ast, elements stored, whether the schedule cache served it)."""
  launched, hit, run, lookup = [], [], tensor_module.run_schedule, schedule_cache.lookup
  def record(items):
    launched.extend((si.ast, si.ast.src[0].src[1].size, hit[-1]) for si in items)
    run(items)
  def record_lookup(w):
    hit.append((tpl := lookup(w)) is not None)
    return tpl
  tensor_module.run_schedule, schedule_cache.lookup = record, record_lookup
  try: yield launched
  finally: tensor_module.run_schedule, schedule_cache.lookup = run, lookup

def test_row_writes_share_one_kernel_and_store_only_the_row():
  x = Tensor.zeros(64, 128).contiguous().realize()
  buf = x._buffer()
  with _launches() as launched:
    for i in (0, 5, 63, -1):
      x[i] = Tensor(np.full(128, i, np.float32))  # (a constant value would be part of the kernel)
      x.realize()
  assert len({ast for ast, _, _ in launched}) == 1, "each row compiled its own kernel"
  assert [stored for _, stored, _ in launched] == [128] * 4
  assert [hit for _, _, hit in launched][1:] == [True] * 3, "the later writes are schedule cache hits"
  assert x._buffer() is buf
  want = np.zeros((64, 128), np.float32)
  want[5], want[63] = 5, -1
  np.testing.assert_array_equal(x.numpy(), want)

def test_a_kv_cache_step_stores_only_its_positions():
  cache = Tensor.zeros(2, 50, 3).contiguous().realize()
  buf = cache._buffer()
  with _launches() as launched:
    cache[:, POS.bind(1):POS.bind(1) + 2] = Tensor.ones(2, 2, 3)
    cache.realize()
  assert launched[-1][1] == 2 * 2 * 3 and cache._buffer() is buf
  want = np.zeros((2, 50, 3), np.float32)
  want[:, 1:3] = 1
  np.testing.assert_array_equal(cache.numpy(), want)

def _random_box(rng: random.Random, shape: tuple) -> tuple:
  """A basic index of ints, step-1 slices (any bounds, out of range ones clamp), None and ... for shape."""
  idx: list = []
  for size in shape:
    k = rng.random()
    if k < 0.3 and size: idx.append(rng.randrange(-size, size))
    elif k < 0.8: idx.append(slice(rng.choice([None, *range(-size - 1, size + 2)]), rng.choice([None, *range(-size - 1, size + 2)])))
    else: idx.append(slice(None))
    if rng.random() < 0.15: idx.append(None)
  if idx and rng.random() < 0.3: idx[rng.randrange(len(idx))] = Ellipsis
  while idx and idx[-1] == slice(None) and rng.random() < 0.5: idx.pop()
  return tuple(idx)

@pytest.mark.parametrize("shape", [(7,), (4, 5), (3, 4, 5), (2, 3, 1, 4), (0, 3), (5, 0)])
def test_random_boxes_match_numpy(shape):
  rng = random.Random(hash(shape) % 1000)
  want = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
  x = Tensor(want.copy()).contiguous().realize()
  for step in range(25):
    idx = _random_box(rng, shape)
    region = want[idx].shape
    for value in (float(step), np.full(region[-1:], step + 0.5, np.float32), np.full(region, -step, np.float32)):
      want[idx] = value
      x[idx] = value if isinstance(value, float) else Tensor(value)
    np.testing.assert_array_equal(x.numpy(), want, err_msg=f"x[{idx}] = ...")

def test_an_int_tensor_takes_a_float_value_cast():
  x = Tensor([[1, 2, 3], [4, 5, 6]]).contiguous().realize()
  x[1, 1:] = 7.9
  np.testing.assert_array_equal(x.numpy(), [[1, 2, 3], [4, 7, 7]])

def test_views_see_the_write_and_lazy_values_keep_the_old_contents():
  data = np.arange(24, dtype=np.float32).reshape(4, 6)
  x = Tensor(data).contiguous().realize()
  before, doubled = x[1], x * 2
  x[1, 2:4] = 0.0
  after = x[1]
  want = data.copy()
  want[1, 2:4] = 0
  np.testing.assert_array_equal(before.numpy(), want[1])
  np.testing.assert_array_equal(after.numpy(), want[1])
  np.testing.assert_array_equal(doubled.numpy(), data * 2)
  np.testing.assert_array_equal((x + 0).numpy(), want)  # no stale cached result

def test_a_value_read_from_the_written_tensor():
  data = np.arange(10, dtype=np.float32)
  x = Tensor(data).contiguous().realize()
  x[1:] = x[:-1] * 10  # overlapping: every read sees the old contents, as in numpy
  np.testing.assert_array_equal(x.numpy(), np.concatenate([[0], data[:-1] * 10]))

def test_an_empty_box_writes_nothing_and_a_bad_value_raises():
  x = Tensor.ones(3, 4).contiguous().realize()
  x[2:2] = 5.0
  x[:, 4:] = Tensor.zeros(3, 0)
  np.testing.assert_array_equal(x.numpy(), np.ones((3, 4)))
  with pytest.raises(RuntimeError, match="shape mismatch"): x[1] = Tensor.ones(3)
  with pytest.raises(IndexError): x[3] = 1.0

def test_writes_inside_a_jit_replay_at_their_positions():
  x = Tensor.zeros(4, 3).contiguous().realize()
  @TinyJit
  def step(v: Tensor) -> Tensor:
    x[1] = v
    x[3, 1:] = v[:2] * 2
    return x.sum().realize()
  for i in range(4): step(Tensor.full((3,), float(i)))
  np.testing.assert_array_equal(x.numpy(), [[0, 0, 0], [3, 3, 3], [0, 0, 0], [0, 6, 6]])

@pytest.mark.parametrize("symbolic", [False, True])
def test_a_view_taken_before_the_write_computes_from_the_new_contents(symbolic):
  # the view reads the buffer, not the write's node: the write must still run before the kernels that read it
  x = Tensor.zeros(3, 4).contiguous().realize()
  row = x[1:2]
  if symbolic: x[POS.bind(1):POS.bind(1) + 1] = Tensor.full((1, 4), 5.0)
  else: x[1] = 5.0
  np.testing.assert_array_equal((row * 2).numpy(), np.full((1, 4), 10.0))

def test_assign_into_a_slice_writes_the_box_in_place():
  # tinygrad's KV cache at an int position: cache.shrink(...).assign(kv), one kernel for every position
  cache = Tensor.zeros(2, 6, 3).contiguous().realize()
  buf = cache._buffer()
  with _launches() as launched:
    for pos in (1, 4):
      part = cache.shrink((None, (pos, pos + 2), None))
      part.assign(Tensor(np.full((2, 2, 3), pos, np.float32)))
      np.testing.assert_array_equal(part.numpy(), np.full((2, 2, 3), pos))
  writes = [(ast, stored) for ast, stored, _ in launched if ast.src[0].src[2:] and ast.src[0].src[2].op is Ops.ASSIGN]
  assert len(writes) == 2 and len(set(writes)) == 1
  cache[:, 0][1:2].assign(Tensor([[7.0, 7.0, 7.0]])).realize()  # a slice of a reshaped slice: no box, written through
  assert cache._buffer() is buf
  want = np.zeros((2, 6, 3), np.float32)
  want[:, 1:3], want[:, 4:6], want[1, 0] = 1, 4, 7
  np.testing.assert_array_equal(cache.numpy(), want)

_GRAD_WRITES = {
  "x[1] = w*2": lambda x, w: x.__setitem__(1, w * 2),
  "x += w": lambda x, w: x.__iadd__(w),
  "x[0:2] = w": lambda x, w: x.__setitem__(slice(0, 2), w),
  "x[[0, 2]] = w": lambda x, w: x.__setitem__([0, 2], w),
  "x[:, 1] = w[:3]": lambda x, w: x.__setitem__((slice(None), 1), w[:3]),
  "x[::2] = w": lambda x, w: x.__setitem__(slice(None, None, 2), w),
  "x.T[1] = w[:3]": lambda x, w: x.T.__setitem__(1, w[:3]),
  "x[1][2:] = w[:2]": lambda x, w: x[1].__setitem__(slice(2, None), w[:2]),
}

@pytest.mark.parametrize("write", list(_GRAD_WRITES))
def test_a_written_value_that_requires_grad_gets_its_gradient(write):
  # x holds a buffer and needs no gradient; the value does (a lazy leaf): the write keeps its graph, as in torch (the
  # value's gradient was None)
  weights = np.arange(12, dtype=np.float32).reshape(3, 4)
  x, w = Tensor.zeros(3, 4).contiguous().realize(), Tensor.ones(4, requires_grad=True)
  _GRAD_WRITES[write](x, w)
  (x * Tensor(weights)).sum().backward()
  tx, tw = torch.zeros(3, 4), torch.ones(4, requires_grad=True)
  _GRAD_WRITES[write](tx, tw)
  (tx * torch.from_numpy(weights)).sum().backward()
  assert w.grad is not None, "the gradient was lost"
  np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy())

def test_writes_fuse_with_the_graph_built_after_them():
  # a KV cache per layer, written then read in one step: one schedule for the step. (Realizing each write at once
  # recomputed every earlier layer at each write: the kernel count grew with the square of the layers.)
  caches = [Tensor.zeros(4, 8).contiguous().realize() for _ in range(8)]
  w = Tensor.eye(8).realize()
  x = Tensor.ones(1, 8)
  with _launches() as launched:
    for c in caches:
      h = x @ w  # a kernel of its own, read by the write and by what follows it
      c[1:2] = h
      x = (c.sum(0, keepdim=True) + h).relu()
    got = x.numpy()
  np.testing.assert_array_equal(got, np.full((1, 8), 2.0 ** len(caches)))
  assert len(launched) <= 3 * len(caches) + 1, f"{len(launched)} kernels for {len(caches)} layers"

@pytest.mark.parametrize("where", ["NOOPT", "PYTHON"])
def test_box_writes_match_noopt_and_the_python_device(where):
  # the multi-dim ASSIGN kernels against the unoptimized kernels and the interpreter, on odd shapes
  rng = random.Random(11)
  for shape in [(5, 3), (3, 2, 7)]:
    want = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    x = Tensor(want.copy(), device="PYTHON" if where == "PYTHON" else None).contiguous().realize()
    with Context(NOOPT=int(where == "NOOPT")):
      for step in range(6):
        idx = _random_box(rng, shape)
        value = np.full(want[idx].shape, -step - 0.5, np.float32)
        want[idx] = value
        x[idx] = Tensor(value, device=x.device)
        np.testing.assert_array_equal(x.numpy(), want, err_msg=f"{where} x[{idx}] = ...")
