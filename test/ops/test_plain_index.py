"""x[ints, slices, None, ...] takes a direct path (indexing._plain_view): the same nodes as the general path, the same
values as numpy, the same errors."""
import random
import numpy as np
import pytest
from fusegrad import Tensor
from fusegrad.tensor import indexing

def _random_index(rng: random.Random, shape: tuple[int, ...]):
  idx, dims = [], list(shape)
  ell = rng.random() < 0.3
  for d, n in enumerate(dims):
    if ell and rng.random() < 0.3: idx.append(Ellipsis); ell = False; break
    r = rng.random()
    if r < 0.3 and n: idx.append(rng.randrange(-n, n))
    elif r < 0.85: idx.append(slice(rng.choice([None, *range(-n - 2, n + 3)]), rng.choice([None, *range(-n - 2, n + 3)]), rng.choice([None, 1, 1, 2, 3, -1, -2])))
    else: break  # the dims left are taken whole
    if rng.random() < 0.15: idx.append(None)
  return tuple(idx) if rng.random() < 0.8 or len(idx) != 1 else idx[0]

@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 0, 4), (4, 5, 6), (2, 1, 3, 5)])
def test_plain_indices_match_numpy_and_the_general_path(shape):
  rng = random.Random(hash(shape) % 1000)
  a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
  x = Tensor(a).realize()
  for _ in range(60):
    idx = _random_index(rng, shape)
    v = indexing._plain_view(x.uop, idx)
    assert v is not None, idx
    assert v is x._getitem(idx).uop, idx  # hash-consed: the very nodes the general path builds
    np.testing.assert_array_equal(x[idx].numpy(), a[idx])

@pytest.mark.parametrize("idx", [True, np.int64(1), [0, 1], slice(None, None, 0), slice(np.int64(1), None), (Ellipsis, Ellipsis),
                                 (0, 0, 0, 0), 7, -8, (slice(None), 9)])
def test_other_indices_take_the_general_path(idx):
  a = np.arange(7 * 6 * 3, dtype=np.float32).reshape(7, 6, 3)
  x = Tensor(a)
  assert indexing._plain_view(x.uop, idx) is None
  try: want = a[idx]
  except (IndexError, ValueError) as e:
    with pytest.raises(type(e)): x[idx].numpy()
    return
  np.testing.assert_array_equal(x[idx].numpy(), want)

def test_a_plain_view_writes_through_and_backpropagates():
  x = Tensor.zeros(3, 4).contiguous().realize()
  row = x[1]
  x[1, 2:] = 5
  assert row.tolist() == [0, 0, 5, 5]
  w = Tensor.ones(3, 4, requires_grad=True)
  (w[-1, None, 1:3] * 2).sum().backward()
  assert w.grad.tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [0, 2, 2, 0]]
