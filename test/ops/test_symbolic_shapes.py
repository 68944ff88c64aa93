"""Symbolic shapes: dims whose size is an expression of bound Variables (`cache[:, :, 0:pos+1]`, `x.reshape(3, v)`,
`x.pad(((0, v),))`). Storage is the expression's upper bound, positions past its value are never observed, and one
compiled kernel (one TinyJit capture) serves every value. Checked against numpy on the values, on CPU and PYTHON."""
import numpy as np
import pytest
from fusegrad import Tensor, TinyJit, Variable
from fusegrad.device import Device
from fusegrad.helpers import TensorError

MAX = 10

@pytest.fixture(params=["CPU", "PYTHON"])
def device(request):
  prev = Device.DEFAULT
  Device.DEFAULT = request.param
  try: yield request.param
  finally: Device.DEFAULT = prev

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def softmax(a, axis=-1):
  e = np.exp(a - a.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)

@pytest.mark.parametrize("i", [1, 4, MAX])
def test_reshape_to_a_variable_and_back(device, i):
  vi = Variable("i", 1, MAX).bind(i)
  a = rnd(3, i)
  s = Tensor(a).reshape(3, vi)
  assert s.shape[0] == 3 and s.shape[1] is vi
  np.testing.assert_allclose((s + 1).numpy(), a + 1, rtol=1e-6)
  np.testing.assert_allclose((s + 1).reshape(3, i).numpy(), a + 1, rtol=1e-6)
  np.testing.assert_allclose((s * 2).reshape(i, 3).numpy(), (a * 2).reshape(i, 3), rtol=1e-6)

@pytest.mark.parametrize("i", [1, 3, MAX])
def test_reductions_over_a_symbolic_dim(device, i):
  vi = Variable("i", 1, MAX).bind(i)
  a = rnd(4, i)
  s = Tensor(a).reshape(4, vi)
  for got, want in [(s.sum(1), a.sum(1)), (s.max(1), a.max(1)), (s.min(1), a.min(1)), (s.mean(1), a.mean(1)), (s.sum(), a.sum()),
                    (s.softmax(1), softmax(a, 1)), (s.log_softmax(1).exp(), softmax(a, 1)), (s.argmax(1), a.argmax(1))]:
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
  if i > 1: np.testing.assert_allclose(s.var(1).numpy(), a.var(1, ddof=1), rtol=1e-5)

@pytest.mark.parametrize("i", [1, 5, MAX])
def test_matmul_over_a_symbolic_inner_dim(device, i):
  vi = Variable("i", 1, MAX).bind(i)
  a, b = rnd(3, i), rnd(i, 5, seed=1)
  got = Tensor(a).reshape(3, vi) @ Tensor(b).reshape(vi, 5)
  assert got.shape == (3, 5)
  np.testing.assert_allclose(got.numpy(), a @ b, rtol=1e-5, atol=1e-5)
  out = Tensor(b).reshape(vi, 5).T @ Tensor(b).reshape(vi, 5)
  np.testing.assert_allclose(out.numpy(), b.T @ b, rtol=1e-5, atol=1e-5)

def test_storage_past_the_value_is_never_observed(device):
  # the cache holds NaN past position 2: a slice to pos+1 = 3 reads none of it in sums, maxes, softmax or matmul
  data = rnd(2, MAX, 4)
  data[:, 3:] = np.nan
  cache, pos = Tensor(data).realize(), Variable("pos", 0, MAX - 1).bind(2)
  k = cache[:, 0:pos + 1]
  assert k.shape[1] is not None and k.numpy().shape == (2, 3, 4)
  q = Tensor(rnd(2, 1, 4, seed=2))
  att = (q @ k.transpose(-1, -2)).softmax(-1)
  out = att @ k
  kn = data[:, :3]
  want = softmax(q.numpy() @ kn.transpose(0, 2, 1)) @ kn
  np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
  for got, w in [(k.sum(1), kn.sum(1)), (k.max(1), kn.max(1)), (k.mean(1), kn.mean(1))]: np.testing.assert_allclose(got.numpy(), w, rtol=1e-5)
  # a pad after the symbolic dim writes zeros over the NaN storage
  np.testing.assert_allclose(k.pad((None, (0, 2), None)).numpy(), np.pad(kn, ((0, 0), (0, 2), (0, 0))))

@pytest.mark.parametrize("p", [0, 4, MAX - 1])
def test_slice_to_a_variable_and_attention(device, p):
  data, q = rnd(1, 2, MAX, 8), rnd(1, 2, 1, 8, seed=3)
  pos = Variable("start_pos", 0, MAX - 1).bind(p)
  cache = Tensor(data)
  k = cache[:, :, 0:pos + 1]
  assert k.shape[:2] == (1, 2) and k.shape[3] == 8
  kn = data[:, :, :p + 1]
  want = softmax(q @ kn.transpose(0, 1, 3, 2) / np.sqrt(8)) @ kn
  mask = Tensor.full((1, 1, 1, pos + 1), float("-inf")).triu(pos + 1)  # tinygrad's llama mask for one new token
  got = Tensor(q).scaled_dot_product_attention(k, k, mask)
  np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(cache.shrink((None, None, (0, pos + 1), None)).numpy(), kn)

@pytest.mark.parametrize("v", [0, 2, 5])
def test_pad_by_a_variable(device, v):
  var = Variable("v", 0, 5).bind(v)
  a = rnd(3, 4)
  x = Tensor(a)
  np.testing.assert_allclose(x.pad((None, (0, var))).numpy(), np.pad(a, ((0, 0), (0, v))))
  np.testing.assert_allclose(x.pad(((var, 1), None)).numpy(), np.pad(a, ((v, 1), (0, 0))))
  np.testing.assert_allclose(x.pad((None, (var, var))).sum(1).numpy(), a.sum(1), rtol=1e-5)
  np.testing.assert_allclose(x.pad((None, (0, var)), value=7).numpy(), np.pad(a, ((0, 0), (0, v)), constant_values=7))

def test_creation_with_symbolic_shapes(device):
  v = Variable("n", 1, MAX).bind(4)
  assert Tensor.ones(2, v).numpy().tolist() == [[1.0] * 4] * 2
  assert Tensor.full((v,), 3).tolist() == [3] * 4
  assert Tensor.arange(v).tolist() == [0, 1, 2, 3]
  assert Tensor.zeros(v, 2).sum().item() == 0
  assert Tensor.empty(v, 3).shape[1] == 3
  np.testing.assert_array_equal(Tensor.ones(3, v + 1).triu(1).numpy(), np.triu(np.ones((3, 5)), 1))
  np.testing.assert_array_equal(Tensor.ones(v, v).tril().numpy(), np.tril(np.ones((4, 4))))

def test_realized_symbolic_tensor_keeps_its_shape(device):
  v = Variable("n", 1, MAX).bind(3)
  t = (Tensor.arange(v) * 2).contiguous().realize()
  assert t.shape[0] is v
  assert t.sum().item() == 6 and t.tolist() == [0, 2, 4] and str(t).startswith("tensor([0, 2, 4]")

def test_one_jit_capture_serves_every_position():
  cache = Tensor.zeros(1, 2, MAX, 8).contiguous().realize()
  ref = np.zeros((1, 2, MAX, 8), np.float32)
  @TinyJit
  def step(x, pos):
    cache[:, :, pos:pos + 1].assign(x).realize()
    k = cache[:, :, 0:pos + 1]
    return (x @ k.transpose(-1, -2)).softmax(-1).matmul(k).realize()
  kernels = None
  for p in range(MAX):
    xn = rnd(1, 2, 1, 8, seed=p)
    out = step(Tensor(xn), Variable("start_pos", 0, MAX - 1).bind(p))
    ref[:, :, p] = xn[:, :, 0]
    kn = ref[:, :, :p + 1]
    np.testing.assert_allclose(out.numpy(), softmax(xn @ kn.transpose(0, 1, 3, 2)) @ kn, rtol=1e-5, atol=1e-6)
    if p >= 2: assert step.cnt == 2 and (kernels is None or step.captured is kernels)
    if p == 2: kernels = step.captured

def test_jit_with_symbolic_inputs():
  @TinyJit
  def f(a, b): return (a @ b).realize()
  for i in range(1, 7):
    vi = Variable("i", 1, MAX).bind(i)
    a, b = rnd(3, i, seed=i), rnd(i, 5, seed=i + 10)
    got = f(Tensor(a).reshape(3, vi), Tensor(b).reshape(vi, 5))
    np.testing.assert_allclose(got.numpy(), a @ b, rtol=1e-5, atol=1e-5)
  assert f.cnt == 2
  @TinyJit
  def g(a): return (a * 2).realize()
  for i in range(1, 5):
    vi = Variable("i", 1, MAX).bind(i)
    out = g(Tensor(rnd(2, i)).reshape(2, vi))
    assert out.shape[1].src[1].arg == i and out.numpy().shape == (2, i)  # the output's size takes each call's value

def test_bad_symbolic_shapes_raise_clearly():
  v = Variable("v", 0, 8).bind(3)
  x = Tensor(rnd(2, 8))
  with pytest.raises(IndexError, match="can leave"): x[:, 0:v + 1]  # v + 1 can reach 9 > 8
  with pytest.raises(ValueError, match="not bound"): Tensor.ones(2, Variable("u", 1, 4))
  with pytest.raises(TensorError, match="can be negative"): Tensor.ones(v - 5)
  s = x[:, 0:v]
  with pytest.raises(TypeError, match="flip"): s.flip(1)
  with pytest.raises(TypeError, match="no truth value"): bool(s.shape[1] < 2)
  with pytest.raises(TensorError, match="cannot be broadcast"): s + Tensor.ones(2, 8)
  with pytest.raises(TypeError, match="symbolic"): s.reshape(2, 1, -1).max_pool2d((1, 2))
  with pytest.raises(TypeError, match="step 1"): x[:, 0:v + 1:2]
  w = Tensor(rnd(2, 8), requires_grad=True)
  with pytest.raises(NotImplementedError, match="symbolic"): w[:, 0:v].sum().backward()

def test_tinygrad_llama_attention_under_jit():
  # tinygrad's LLaMA attention step: write the new keys and values at start_pos, read 0:start_pos+1 of the cache,
  # repeat the kv heads, attend; one capture for every position
  MAXC, KV, REP, HD = 12, 2, 3, 8
  cache_kv = Tensor.zeros(2, 1, MAXC, KV, HD).contiguous().realize()
  ref = np.zeros((2, 1, MAXC, KV, HD), np.float32)
  def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    bs, seqlen, n_kv_heads, head_dim = x.shape
    return x.repeat((1, 1, 1, n_rep)).reshape(bs, seqlen, n_kv_heads * n_rep, head_dim)
  @TinyJit
  def attn(xq, xk, xv, start_pos):
    cache_kv[:, :, start_pos:start_pos + 1, :, :].assign(Tensor.stack(xk, xv)).realize()
    keys, values = repeat_kv(cache_kv[0, :, 0:start_pos + 1, :, :], REP), repeat_kv(cache_kv[1, :, 0:start_pos + 1, :, :], REP)
    return xq.transpose(1, 2).scaled_dot_product_attention(keys.transpose(1, 2), values.transpose(1, 2)).transpose(1, 2).realize()
  for p in range(6):
    q, k, v = rnd(1, 1, KV * REP, HD, seed=p), rnd(1, 1, KV, HD, seed=p + 10), rnd(1, 1, KV, HD, seed=p + 20)
    out = attn(Tensor(q), Tensor(k), Tensor(v), Variable("start_pos", 0, MAXC - 1).bind(p)).numpy()
    ref[0, :, p], ref[1, :, p] = k[:, 0], v[:, 0]
    K, V = (np.repeat(ref[i, :, :p + 1], REP, axis=2).transpose(0, 2, 1, 3) for i in (0, 1))
    want = (softmax(q.transpose(0, 2, 1, 3) @ K.transpose(0, 1, 3, 2) / np.sqrt(HD)) @ V).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6, err_msg=f"position {p}")
  assert attn.cnt == 2

def test_reshape_by_value_inside_a_jit_raises():
  # a reshape that merges a symbolic dim with an int one goes through the current value, which a replay would reuse
  @TinyJit
  def f(x, n): return x[:, 0:n].reshape(-1).sum().realize()
  x = Tensor(rnd(3, 8))
  assert abs(f(x, Variable("n", 1, 8).bind(2)).item() - rnd(3, 8)[:, :2].sum()) < 1e-5  # the first call runs eagerly
  with pytest.raises(TypeError, match="TinyJit replay"): f(x, Variable("n", 1, 8).bind(3))

def test_a_reduction_whose_rows_are_partly_padding():
  # a reduce over rows of which some are padding (zeros) split into lanes: the copies of a reduction that do not read
  # the padded rows must not be placed before the loop they share with those that do (the linearizer crashed)
  rng = np.random.default_rng(0)
  cn, qn = rng.standard_normal((1, 12, 2, 8)).astype(np.float32), rng.standard_normal((1, 6, 1, 8)).astype(np.float32)
  k = Tensor(cn).realize()
  kk = k.reshape(1, 1, 1, 12, 1, 2, 1, 8).expand(1, 1, 1, 12, 1, 2, 3, 8)[:, :, :, 0:2].reshape(1, 2, 2, 24).pad((None, (0, 10), None, None))
  kk = kk[:, 0:2].reshape(1, 2, 6, 8).pad((None, (0, 10), None, None))
  out = (Tensor(qn).reshape(1, 6, 1, 1, 8) * kk.permute(0, 2, 1, 3).reshape(1, 6, 1, 12, 8)).sum(-1)
  kn = np.pad(np.tile(cn[:, :2], (1, 1, 1, 3)).reshape(1, 2, 6, 8), ((0, 0), (0, 10), (0, 0), (0, 0)))
  np.testing.assert_allclose(out.numpy(), (qn.reshape(1, 6, 1, 1, 8) * kn.transpose(0, 2, 1, 3).reshape(1, 6, 1, 12, 8)).sum(-1), rtol=1e-5, atol=1e-5)

# ======================================================================== a shrink to the end of a dim beside a symbolic dim
@pytest.mark.parametrize("lo,hi", [(4, 8), (1, 8), (0, 8), (0, 4), (2, 6)])
def test_shrink_to_the_end_beside_a_symbolic_dim(lo, hi):
  """(4, 8) of a dim of 8 was taken for the whole dim (no shrink) when another dim was symbolic."""
  x = Tensor.arange(80).reshape(10, 8)[:Variable("a", 1, 10).bind(2), :]
  got = x.shrink((None, (lo, hi)))
  assert got.shape[1] == hi - lo
  np.testing.assert_array_equal(got.numpy(), np.arange(80).reshape(10, 8)[:2, lo:hi])
  a, b = x.chunk(2, -1)
  np.testing.assert_array_equal(b.numpy(), np.arange(80).reshape(10, 8)[:2, 4:])

def test_variable_comparisons_decided_by_their_bounds():
  """tinygrad's KV-cache code writes `if start_pos > 0:` with a bound Variable in [1, n]: its bounds decide it."""
  v = Variable("start_pos", 1, 10).bind(3)
  assert bool(v > 0) and not bool(v > 10) and bool(v < 11)
  with pytest.raises(TypeError, match="no truth value"): bool(v > 5)
  assert v.val == 3 and v.expr == "start_pos" and v.unbind() == (Variable("start_pos", 1, 10), 3)
  with pytest.raises(TypeError, match="bound Variable"): Variable("q", 0, 5).unbind()

# ======================================================================== basic indexing of a tensor with a symbolic dim
@pytest.mark.parametrize("index", [(slice(None), slice(None, 1)), (slice(None, 2),), (0,), (slice(None), 0), (Ellipsis, slice(None, 1)),
                                   (slice(1, None), slice(None)), (slice(None), slice(1, None)), (None, 1)])
def test_basic_indexing_beside_or_on_a_symbolic_dim(index):
  """x[0], x[:2], x[:, 0] of x (3, i) raised ('UOp' object cannot be interpreted as an integer)."""
  base = np.arange(30, dtype=np.float32).reshape(3, 10)
  x = Tensor(base)[:, :Variable("i", 1, 10).bind(5)]
  np.testing.assert_array_equal(x[index].numpy(), base[:, :5][index])

def test_indexing_a_symbolic_dim_beyond_its_smallest_size_raises():
  x = Tensor.ones(3, 10)[:, :Variable("i", 2, 10).bind(5)]
  with pytest.raises(IndexError, match="symbolic dim"): x[:, 3]
  with pytest.raises(IndexError, match="symbolic dim"): x[:, :4]
  with pytest.raises(TypeError, match="step-1"): x[:, ::2]

def test_a_slice_of_a_symbolic_dim_under_tinyjit():
  base = np.arange(30, dtype=np.float32).reshape(3, 10)
  b = Tensor(base).realize()
  @TinyJit
  def f(v): return b[:, :v][:, 1:].sum(1).realize()
  for i in range(2, 8): np.testing.assert_array_equal(f(Variable("i", 1, 10).bind(i)).numpy(), base[:, 1:i].sum(1))
