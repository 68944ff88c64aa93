"""Writes into a view land in the tensor it views, as in torch and tinygrad (a KV cache is a slice assign)."""
import numpy as np
import pytest
import torch
from fusegrad import Tensor, TinyJit

def flip(x, axis): return x.flip(axis) if isinstance(x, Tensor) else np.flip(x, axis)

def both(shape):
  a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
  return Tensor(a).contiguous().realize(), a

def test_slice_assign_writes_the_base():
  cache = Tensor.zeros(2, 3, 4).contiguous().realize()
  cache[:, :, 1:3].assign(Tensor.ones(2, 3, 2)).realize()
  want = np.zeros((2, 3, 4), np.float32); want[:, :, 1:3] = 1
  np.testing.assert_array_equal(cache.numpy(), want)

@pytest.mark.parametrize("write", [
  lambda x, v: x.T.__setitem__(1, v(3)),
  lambda x, v: flip(x, 1).__setitem__(0, v(4)),
  lambda x, v: flip(x, 0).T.__setitem__((slice(None), 1), v(4)),
  lambda x, v: (x.detach() if isinstance(x, Tensor) else x).__setitem__(1, v(4)),
  lambda x, v: x[1].__setitem__(2, v()),
  lambda x, v: x[:, ::-2].__setitem__(0, v(2)),
  lambda x, v: x[1:, 1::2].__setitem__((slice(None), 0), v(2)),
  lambda x, v: x.reshape(12)[3:7].__setitem__(slice(None), v(4)),
  lambda x, v: x.transpose(1, 0)[2:].__setitem__(slice(None), v(2, 3)),
], ids=["T", "flip", "flip_T", "detach", "x[i][j]", "neg_step", "strided", "reshape", "permute"])
def test_setitem_through_a_view_matches_numpy(write):
  f, a = both((3, 4))
  write(f, lambda *s: Tensor(np.full(s, -1, np.float32)))
  write(a, lambda *s: np.full(s, -1, np.float32))
  np.testing.assert_array_equal(f.numpy(), a)

def test_assign_through_views_of_a_lazy_tensor():
  z = Tensor.zeros(3, 4)
  z[1:, ::2].assign(Tensor.ones(2, 2))
  want = np.zeros((3, 4), np.float32); want[1:, ::2] = 1
  np.testing.assert_array_equal(z.numpy(), want)

def test_program_order_between_writes_and_reads():
  a = Tensor.arange(5).contiguous().realize()
  before = a[1:3] * 10
  view = a[1:3]
  a[1:3].assign(Tensor([9, 9]))
  after = a[1:3] * 10
  a[2:4].assign(Tensor([7, 7]))
  assert before.tolist() == [10, 20] and after.tolist() == [90, 90]
  assert view.tolist() == [9, 7] and a.tolist() == [0, 9, 7, 7, 4]

def test_overlapping_source_and_destination():
  f, a = both((6,))
  f[1:].assign(f[:-1])
  t = torch.tensor(a)
  t[1:] = t[:-1].clone()
  np.testing.assert_array_equal(f.numpy(), t.numpy())

def test_writing_into_a_broadcast_view_raises():
  a = Tensor.arange(4).contiguous().realize()
  with pytest.raises(RuntimeError, match="single memory location"):
    a.reshape(1, 4).expand(3, 4)[0].assign(Tensor.zeros(4, dtype=a.dtype))

def test_inplace_operators_keep_identity_and_views():
  a = Tensor.arange(4).float().contiguous().realize()
  ident, row = id(a), a[1:3]
  a += 1
  a *= 2
  a -= Tensor([1.0, 1.0, 1.0, 1.0])
  a /= 2
  assert id(a) == ident and a.tolist() == [0.5, 1.5, 2.5, 3.5]
  row += 10
  assert a.tolist() == [0.5, 11.5, 12.5, 3.5]

def test_kv_cache_in_a_jitted_step():
  cache = Tensor.zeros(1, 6, 2).contiguous().realize()
  @TinyJit
  def step(x):
    cache[:, 2:3].assign(x).realize()
    return cache.sum(1).realize()
  for i in range(4):
    out = step(Tensor([[[float(i), 1.0]]]))
    assert out.tolist() == [[float(i), 1.0]] and cache.numpy()[0, 2].tolist() == [float(i), 1.0]

def test_inplace_update_of_a_jit_input_writes_the_callers_tensor():
  @TinyJit
  def inc(a):
    a += 1
    return (a * 2).realize()
  for i in range(5):
    a = Tensor([float(i), 10.0]).contiguous().realize()
    out = inc(a)
    assert a.tolist() == [i + 1.0, 11.0] and out.tolist() == [2 * (i + 1.0), 22.0]

def test_kv_cache_at_a_moving_position_in_a_jitted_step():
  cache = Tensor.zeros(1, 5, 2).contiguous().realize()
  @TinyJit
  def step(x, pos: int):
    cache[:, pos:pos + 1].assign(x).realize()
    return cache.sum(1).realize()
  for i in range(5):
    out = step(Tensor([[[float(i + 1), 1.0]]]), i)
    assert out.tolist() == [[sum(range(1, i + 2)), i + 1.0]]
  assert cache.numpy()[0, :, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]

def test_a_view_read_before_a_write_still_sees_it():
  # realizing a view made it a copy, so later writes to the base did not reach it
  x = Tensor([1.0, 2.0, 3.0]).realize()
  v, d, row = x[1:], x.detach(), x.reshape(1, 3)[0]
  assert v.tolist() == [2.0, 3.0] and d.tolist() == [1.0, 2.0, 3.0] and row.tolist() == [1.0, 2.0, 3.0]
  x += 1
  assert v.tolist() == [3.0, 4.0] and d.tolist() == [2.0, 3.0, 4.0] and row.tolist() == [2.0, 3.0, 4.0]

def test_inplace_operators_follow_torchs_rules():
  c = Tensor([1, 2])
  with pytest.raises(RuntimeError, match="can't be cast"): c /= 2
  with pytest.raises(RuntimeError, match="can't be cast"): c += 1.5
  w = Tensor([1.0], requires_grad=True)
  with pytest.raises(RuntimeError, match="requires grad"): w += 1
  with Tensor.inference_mode(): w += 1
  assert w.tolist() == [2.0] and c.tolist() == [1, 2]

def test_jit_without_tensor_arguments_sees_a_pending_assign():
  s = Tensor([2.0]).realize()
  f = TinyJit(lambda: s * 3)
  for _ in range(3): f()
  s.assign(s * 5)
  assert f().item() == 30.0

@pytest.mark.parametrize("make", [lambda a: (a + 1).contiguous(), lambda a: a + 1, lambda a: (a * 2).sum(1)],
                         ids=["contiguous", "elementwise", "reduce"])
@pytest.mark.parametrize("writer", [0, 1])
def test_equal_results_computed_separately_do_not_alias(make, writer):
  # hash-consing makes equal lazy graphs one node; realized together (or one after the other, while the node lives)
  # both tensors got the one result buffer, so a write into either showed in the other (torch keeps them apart)
  a = Tensor([[1.0, 2.0], [3.0, 4.0]]).realize()
  for together in (True, False):
    p, q = make(a), make(a)
    if together: Tensor.realize_all(p, q)
    else: p.realize(); q.realize()
    want = q.numpy().copy() if writer == 0 else p.numpy().copy()
    (p if writer == 0 else q)[0] = 100
    assert (q if writer == 0 else p).numpy().tolist() == want.tolist()
    assert (p if writer == 0 else q).numpy().flatten()[0] == 100

def test_a_write_inspects_only_the_tensors_that_can_see_it(monkeypatch):
  # realized tensors alive elsewhere (a dataset, other weights) are not walked: each write had checked every live
  # tensor, so an eager Adam step slowed from 24 to 79 ms with 3000 of them alive
  import fusegrad.tensor.tensor as tt
  alive = [Tensor([float(i)] * 4) for i in range(2000)]
  w, a = both((3, 4))
  wt, flat = w.T, Tensor(w.uop.reshape((12,)))  # a view, and another tensor holding w's buffer reshaped
  seen = []
  real = tt._is_view_of
  monkeypatch.setattr(tt, "_is_view_of", lambda u, base: seen.append(u) or real(u, base))
  w.assign(w * 2).realize()
  w += 1
  w[1] = Tensor.zeros(4)
  assert 0 < len(seen) < 100
  a = a * 2 + 1; a[1] = 0
  np.testing.assert_array_equal(w.numpy(), a)
  np.testing.assert_array_equal(wt.numpy(), a.T)
  np.testing.assert_array_equal(flat.numpy(), a.reshape(12))
  assert alive[7].tolist() == [7.0] * 4

def test_the_registry_files_a_tensor_under_its_current_node():
  # lazy values and views are filed as lazy; a realized one under its buffer's holders, again after each rebinding
  import fusegrad.tensor.tensor as tt
  lazy = Tensor.ones(3) + 1
  assert id(lazy) in tt._lazy
  lazy.realize()
  buf = lazy.uop if lazy.uop.op.name == "BUFFER" else lazy.uop.src[0]
  assert id(lazy) not in tt._lazy and id(lazy) in buf.holders
  lazy.assign(lazy * 3)
  assert id(lazy) in tt._lazy and id(lazy) not in buf.holders
  view = lazy.realize()[1:]
  assert id(view) in tt._lazy and [t for t in tt._lazy_tensors() if t is view]
  key = id(view)
  del view
  assert key not in tt._lazy

def test_a_conv_gradient_rule_keeps_no_tensor_alive():
  # a conv's gradient rule lives as long as its graph, which an input's lazy .grad keeps from step to step (a float
  # input gets one, as in tinygrad): a Tensor held by the rule stayed in the live-tensor registry, which every assign and
  # backward scans, and an eager MNIST loop grew it by 12 tensors a step
  import fusegrad.tensor.tensor as tt
  x, live = Tensor.randn(2, 3, 8, 8).realize(), []
  for stride in (1, 2, 1, 2, 1, 2):
    w = Tensor.randn(4, 3, 3, 3, requires_grad=True)  # new weights each step, as an optimizer's: a new graph
    x.conv2d(w, padding=1, stride=stride).relu().sum().backward()
    live.append(len(tt._lazy))
  assert x.grad is not None and live[-1] == live[-3] == live[1]

# ======================================================================== in-place writes into a lazy tensor reach its views (torch's aliasing)
# (not flip: a copy in torch, a view here, see ops.md)
VIEWS = [lambda t: t[1:], lambda t: t.reshape(3, 2), lambda t: t.reshape(2, 3).T, lambda t: t[::2], lambda t: t.detach(),
         lambda t: t.reshape(2, 3)[1][1:]]

def test_inplace_write_never_reaches_another_tensors_views():
  """Equal lazy values are one node: a write into one tensor must not reach views of another that holds the same value
  (nor of a dead one). (An in-place write into a lazy tensor does not reach its own earlier views either: see ops.md.)"""
  x, z = Tensor.zeros(3), Tensor.zeros(3)
  v = z[1:]
  x += 1
  assert v.tolist() == [0.0, 0.0] and z.tolist() == [0.0, 0.0, 0.0] and x.tolist() == [1.0, 1.0, 1.0]
  yv = Tensor.zeros(3)[:2]
  w = Tensor.zeros(3)
  w.add_(5)
  assert yv.tolist() == [0.0, 0.0]
  t = Tensor([1.0, 2.0, 3.0]).realize()
  a, b = t * 2, t * 2
  bt = b.reshape(3, 1)
  a.assign(a + 100)
  assert bt.tolist() == [[2.0], [4.0], [6.0]] and a.tolist() == [102.0, 104.0, 106.0]

@pytest.mark.parametrize("view", range(len(VIEWS)))
def test_a_read_view_still_writes_through(view):
  """Reading a view computes a copy of its values; a later write through the view must still land in its base."""
  fx, tx = Tensor(np.arange(6, dtype=np.float32)), torch.arange(6, dtype=torch.float32)
  fv, tv = VIEWS[view](fx), VIEWS[view](tx)
  np.testing.assert_array_equal(fv.numpy(), tv.numpy())
  with torch.no_grad():
    fv += 10; tv += 10
  np.testing.assert_array_equal(fx.numpy(), tx.numpy())
  np.testing.assert_array_equal(fv.numpy(), tv.numpy())

def test_setitem_never_reaches_another_tensors_views():
  x, z = Tensor.zeros(3), Tensor.zeros(3)
  v = z[1:]
  x[1] = 5
  assert v.tolist() == [0.0, 0.0] and x.tolist() == [0.0, 5.0, 0.0]
