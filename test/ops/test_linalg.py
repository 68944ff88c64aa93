"""Decompositions and solvers (fusegrad/tensor/linalg.py) against torch.linalg: values, gradients, errors, edge shapes.

Methods covered: det, slogdet, logdet, inverse, matrix_power, pinverse, cholesky, cholesky_inverse, cholesky_solve, qr,
svd, lu."""
import numpy as np
import pytest
import torch
from fusegrad import Tensor, dtypes
from fusegrad.tensor.linalg import LinAlgError

RNG = np.random.default_rng(1234)

def rand(*shape, dtype=np.float64):
  return RNG.standard_normal(shape).astype(dtype)

def spd(*shape):
  """Symmetric positive-definite (..., n, n), well conditioned."""
  x = rand(*shape)
  return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])

def close(got, want, tol=1e-10):
  got = got.numpy() if isinstance(got, Tensor) else np.asarray(got)
  want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
  assert got.shape == want.shape, (got.shape, want.shape)
  np.testing.assert_allclose(got, want, atol=tol * max(1.0, float(np.abs(want).max(initial=0))), rtol=0)

def grads(fg_fn, t_fn, *arrays, seed=0):
  """fusegrad's and torch's gradients of sum(w * f(x)) for every input, w random (one per output)."""
  fx = [Tensor(a, requires_grad=True) for a in arrays]
  tx = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
  fo, to = fg_fn(*fx), t_fn(*tx)
  fo, to = (fo, to) if isinstance(to, (tuple, list)) else ((fo,), (to,))
  rng = np.random.default_rng(seed)
  fl, tl = 0, 0
  for f, t in zip(fo, to):
    w = rng.standard_normal(tuple(t.shape))
    fl, tl = fl + (f * Tensor(w, dtype=f.dtype)).sum(), tl + (t * torch.from_numpy(w).to(t.dtype)).sum()
  fl.backward()
  tl.backward()
  return [f.grad for f in fx], [t.grad for t in tx]

def check_grads(fg_fn, t_fn, *arrays, tol=1e-9):
  for g, w in zip(*grads(fg_fn, t_fn, *arrays)): close(g, w, tol)

SQUARE = [(1, 1), (2, 2), (5, 5), (16, 16), (3, 4, 4)]

# ---------------- det, slogdet, logdet, inverse
@pytest.mark.parametrize("shape", SQUARE)
def test_det_slogdet_inverse_forward(shape):
  x = rand(*shape)
  t = torch.from_numpy(x)
  close(Tensor(x).det(), torch.linalg.det(t))
  sign, logabs = Tensor(x).slogdet()
  tsign, tlog = torch.linalg.slogdet(t)
  close(sign, tsign)
  close(logabs, tlog)
  inv = Tensor(x).inverse()
  close(inv, torch.linalg.inv(t))
  close(Tensor(x) @ inv, np.broadcast_to(np.eye(shape[-1]), shape))

def test_float32():
  x = rand(3, 4, 4, dtype=np.float32)
  t = torch.from_numpy(x)
  a = spd(3, 4, 4).astype(np.float32)
  for got, want in ((Tensor(x).det(), torch.linalg.det(t)), (Tensor(x).inverse(), torch.linalg.inv(t)),
                    (Tensor(x).slogdet()[1], torch.linalg.slogdet(t)[1]), (Tensor(x).svd()[1], torch.linalg.svd(t)[1]),
                    (Tensor(x).qr()[1], torch.linalg.qr(t)[1]), (Tensor(a).cholesky(), torch.linalg.cholesky(torch.from_numpy(a)))):
    assert got.dtype == dtypes.float32
    close(got, want, 1e-4)

def test_logdet_signs():
  x = rand(4, 5, 5)
  close(Tensor(x).logdet(), torch.logdet(torch.from_numpy(x)))  # NaN where the determinant is negative
  y = spd(5, 5)
  close(Tensor(y).logdet(), torch.logdet(torch.from_numpy(y)))
  check_grads(lambda a: a.logdet(), torch.logdet, y)

@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 4, 4)])
def test_det_slogdet_inverse_grad(shape):
  x = rand(*shape)
  check_grads(lambda a: a.det(), torch.linalg.det, x)
  check_grads(lambda a: a.slogdet()[1], lambda a: torch.linalg.slogdet(a)[1], x)
  check_grads(lambda a: a.inverse(), torch.linalg.inv, x)

def test_plain_tensor_gets_a_gradient():
  # as tinygrad: a float tensor that does not say requires_grad=False gets one, though these ops realize their results
  x = rand(3, 3)
  for fn, tfn in ((lambda t: t.inverse(), torch.linalg.inv), (lambda t: t.svd()[1], torch.linalg.svdvals),
                  (lambda t: t.qr()[1], lambda t: torch.linalg.qr(t)[1])):
    t, tt = Tensor(x), torch.from_numpy(x).requires_grad_()
    fn(t).sum().backward()
    tfn(tt).sum().backward()
    close(t.grad, tt.grad)

def test_singular():
  x = np.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 4.0]]])
  close(Tensor(x).det(), torch.linalg.det(torch.from_numpy(x)))
  sign, logabs = Tensor(x).slogdet()
  assert sign.tolist()[0] == 0 and logabs.tolist()[0] == -np.inf
  # the gradient of a singular matrix's determinant: its cofactors (torch takes them from the SVD)
  check_grads(lambda a: a.det(), torch.linalg.det, x, tol=1e-7)
  with pytest.raises(LinAlgError, match=r"Batch element 0\): The diagonal element 3 is zero"): Tensor(x).inverse()
  with pytest.raises(RuntimeError, match="singular"): Tensor(np.zeros((2, 2))).inverse()
  assert issubclass(LinAlgError, RuntimeError)

@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, -1, -3])
def test_matrix_power(n):
  x = rand(3, 4, 4)
  close(Tensor(x).matrix_power(n), torch.linalg.matrix_power(torch.from_numpy(x), n))
  if n: check_grads(lambda a: a.matrix_power(n), lambda a: torch.linalg.matrix_power(a, n), x)

def test_matrix_power_ints():
  x = np.array([[1, 2], [3, 4]], dtype=np.int32)
  got, want = Tensor(x).matrix_power(3), torch.from_numpy(x).matrix_power(3)
  assert got.dtype == dtypes.int32 and got.tolist() == want.tolist()
  assert Tensor(x).matrix_power(0).tolist() == [[1, 0], [0, 1]]
  with pytest.raises(RuntimeError, match="floating point"): Tensor(x).matrix_power(-1)

# ---------------- errors and edge shapes
@pytest.mark.parametrize("name", ["det", "slogdet", "logdet", "inverse", "cholesky", "cholesky_inverse", "matrix_power", "qr", "svd", "pinverse",
                                  "lu"])
def test_errors(name):
  call = (lambda t: t.matrix_power(2)) if name == "matrix_power" else (lambda t: getattr(t, name)())
  with pytest.raises(RuntimeError, match="at least 2 dimensions"): call(Tensor([1.0, 2.0]))
  if name not in ("qr", "svd", "pinverse", "lu"):
    with pytest.raises(RuntimeError, match="square"): call(Tensor(rand(2, 3)))
  if name != "matrix_power":
    with pytest.raises(RuntimeError, match="floating point"): call(Tensor([[1, 2], [3, 4]]))
    with pytest.raises(RuntimeError, match="Low precision"): call(Tensor(np.eye(2), dtype=dtypes.float16))

def test_empty():
  for shape in ((0, 0), (0, 3, 3)):
    x = np.zeros(shape)
    t = torch.from_numpy(x)
    close(Tensor(x).det(), torch.linalg.det(t))
    close(Tensor(x).slogdet()[1], torch.linalg.slogdet(t)[1])
    close(Tensor(x).inverse(), torch.linalg.inv(t))
    close(Tensor(x).cholesky(), torch.linalg.cholesky(t))
  for shape in ((3, 0), (2, 0, 3)):
    x = np.zeros(shape)
    t = torch.from_numpy(x)
    for full in (True, False):
      for got, want in zip(Tensor(x).svd(full), torch.linalg.svd(t, full)): close(got, want)
    for got, want in zip(Tensor(x).qr(), torch.linalg.qr(t)): close(got, want)
    close(Tensor(x).pinverse(), torch.pinverse(t))

# ---------------- cholesky
@pytest.mark.parametrize("shape", SQUARE)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(shape, upper):
  a = spd(*shape)
  a_t = torch.from_numpy(a)
  close(Tensor(a).cholesky(upper), torch.linalg.cholesky(a_t, upper=upper))
  # only one triangle is read
  junk = a + np.triu(rand(*shape), 1) if not upper else a + np.tril(rand(*shape), -1)
  close(Tensor(junk).cholesky(upper=upper), torch.linalg.cholesky(torch.from_numpy(junk), upper=upper))
  if shape[-1] != 16: check_grads(lambda t: t.cholesky(upper=upper), lambda t: torch.linalg.cholesky(t, upper=upper), junk)

def test_cholesky_not_positive_definite():
  a = np.stack([np.eye(3), np.diag([1.0, -1.0, 1.0])])
  with pytest.raises(LinAlgError, match=r"Batch element 1\).*leading minor of order 2 is not positive-definite"): Tensor(a).cholesky()
  with pytest.raises(RuntimeError, match="order 1"): Tensor(-np.eye(2)).cholesky()

@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inverse_and_solve(upper):
  a = spd(3, 4, 4)
  lo = torch.linalg.cholesky(torch.from_numpy(a), upper=upper).numpy()
  b = rand(3, 4, 3)
  close(Tensor(lo).cholesky_inverse(upper), torch.from_numpy(lo).cholesky_inverse(upper))
  close(Tensor(lo).cholesky_inverse(upper), np.linalg.inv(a))
  close(Tensor(b).cholesky_solve(Tensor(lo), upper), torch.from_numpy(b).cholesky_solve(torch.from_numpy(lo), upper))
  close(Tensor(b).cholesky_solve(Tensor(lo), upper), np.linalg.solve(a, b))
  check_grads(lambda t: t.cholesky_inverse(upper), lambda t: t.cholesky_inverse(upper), lo)
  check_grads(lambda x, y: x.cholesky_solve(y, upper), lambda x, y: x.cholesky_solve(y, upper), b, lo)
  # broadcast batch dims, and the other triangle is not read
  junk = lo + (np.tril(rand(4, 4), -1) if upper else np.triu(rand(4, 4), 1))
  close(Tensor(b).cholesky_solve(Tensor(junk[0]), upper), torch.from_numpy(b).cholesky_solve(torch.from_numpy(junk[0]), upper))
  with pytest.raises(RuntimeError): Tensor(rand(3, 2)).cholesky_solve(Tensor(lo[0]))

# ---------------- qr
WIDE_TALL = [(6, 3), (3, 6), (2, 5, 3)]
QR_SHAPES = SQUARE + WIDE_TALL + [(1, 4), (4, 1)]

@pytest.mark.parametrize("shape", QR_SHAPES)
def test_qr(shape):
  x = rand(*shape)
  t = torch.from_numpy(x)
  for mode in ("reduced", "complete"):
    q, r = Tensor(x).qr(mode)
    tq, tr = torch.linalg.qr(t, mode=mode)
    close(q @ r, x)
    close(q.mT @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2))
    close(r, np.triu(r.numpy()))
    # QR is unique up to the signs of R's rows; fusegrad takes LAPACK's (Householder) signs, so Q and R equal torch's
    close(q, tq)
    close(r, tr)
  q, r = Tensor(x).qr(mode="r")
  assert q.shape == (0,)
  close(r, torch.linalg.qr(t, mode="r")[1])

@pytest.mark.parametrize("shape", [(1, 1), (3, 4, 4)] + WIDE_TALL)
def test_qr_grad(shape):
  x = rand(*shape)
  check_grads(lambda a: tuple(a.qr()), lambda a: tuple(torch.linalg.qr(a)), x)
  check_grads(lambda a: a.qr()[1], lambda a: torch.linalg.qr(a)[1], x)

def test_qr_spellings():
  x = rand(6, 3)
  assert Tensor(x).qr(some=False).Q.shape == (6, 6)
  assert Tensor(x).qr(False)[0].shape == (6, 6)  # torch.Tensor.qr(some) positionally
  assert Tensor(x).qr(True).R.shape == (3, 3)
  with pytest.raises(RuntimeError, match="mode"): Tensor(x).qr("full")
  xt = Tensor(x, requires_grad=True)
  with pytest.raises(RuntimeError, match="complete"): xt.qr("complete")[0].sum().backward()

# ---------------- svd and pinverse
SVD_SHAPES = SQUARE + WIDE_TALL + [(1, 4)]

def check_svd(x, u, s, vh, full):
  m, n = x.shape[-2:]
  k = min(m, n)
  assert u.shape == x.shape[:-2] + ((m, m) if full else (m, k)) and vh.shape == x.shape[:-2] + ((n, n) if full else (k, n))
  close(u.mT @ u, np.broadcast_to(np.eye(u.shape[-1]), u.shape[:-2] + (u.shape[-1],) * 2))
  close(vh @ vh.mT, np.broadcast_to(np.eye(vh.shape[-2]), vh.shape[:-2] + (vh.shape[-2],) * 2))
  close((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], x)
  ts = torch.linalg.svd(torch.from_numpy(x), full_matrices=False)
  close(s, ts.S)
  # each singular vector is unique up to its sign (the singular values here are distinct)
  close((u[..., :k] * Tensor(ts.U.numpy())).sum(-2).abs(), np.ones(x.shape[:-2] + (k,)))
  close((vh[..., :k, :] * Tensor(ts.Vh.numpy())).sum(-1).abs(), np.ones(x.shape[:-2] + (k,)))

@pytest.mark.parametrize("shape", SVD_SHAPES)
def test_svd(shape):
  x = rand(*shape)
  for full in (True, False):
    u, s, vh = Tensor(x).svd(full_matrices=full)
    check_svd(x, u, s, vh, full)

def test_svd_torch_spelling():
  x = rand(6, 3)
  u, s, v = Tensor(x).svd(some=True)  # torch.Tensor.svd: V, not Vh
  assert u.shape == (6, 3) and v.shape == (3, 3)
  close((u * s.unsqueeze(-2)) @ v.mT, x)
  u, s, v = Tensor(x).svd(some=False)
  assert u.shape == (6, 6) and v.shape == (3, 3)
  u, s, v = Tensor(x).svd(some=False, compute_uv=False)
  assert u.abs().sum().item() == 0 and v.shape == (3, 3)
  close(s, torch.from_numpy(x).svd().S)

def test_svd_rank_deficient():
  for x in (np.zeros((6, 3)), np.ones((5, 5)), np.outer(rand(6), rand(3)), np.array([[1.0, 1.0], [1.0, 1.0]])):
    for full in (True, False):
      u, s, vh = Tensor(x).svd(full)
      close(s, torch.linalg.svd(torch.from_numpy(x)).S)
      close(u.mT @ u, np.eye(u.shape[-1]))
      close(vh @ vh.mT, np.eye(vh.shape[-2]))
      k = min(x.shape)
      close((u[:, :k] * s.unsqueeze(-2)) @ vh[:k], x)

@pytest.mark.parametrize("shape", [(1, 1), (3, 4, 4)] + WIDE_TALL)
def test_svd_grad(shape):
  x = rand(*shape)
  k = min(shape[-2:])
  check_grads(lambda a: a.svd()[1], lambda a: torch.linalg.svd(a)[1], x)
  # a loss the singular vectors' signs do not change: sum_i u_i^T W v_i
  w = rand(*shape)
  def loss(svd, wt):
    u, _, vh = svd
    return (u[..., :k] * (wt @ vh[..., :k, :].mT)).sum(-2)
  for full in (True, False):
    check_grads(lambda a: loss(a.svd(full), Tensor(w)), lambda a: loss(torch.linalg.svd(a, full), torch.from_numpy(w)), x, tol=1e-8)
  check_grads(lambda a: (lambda u, s, v: (u * (Tensor(w) @ v)).sum(-2))(*a.svd(some=True)),
              lambda a: (lambda u, s, v: (u * (torch.from_numpy(w) @ v)).sum(-2))(*a.svd(some=True)), x, tol=1e-8)

@pytest.mark.parametrize("shape", [(1, 1), (3, 4, 4)] + WIDE_TALL)
def test_pinverse(shape):
  x = rand(*shape)
  close(Tensor(x).pinverse(), torch.pinverse(torch.from_numpy(x)))
  check_grads(lambda a: a.pinverse(), torch.pinverse, x, tol=1e-8)

def test_pinverse_rank_deficient():
  x = np.outer(rand(6), rand(3))
  close(Tensor(x).pinverse(rcond=1e-6), torch.pinverse(torch.from_numpy(x), rcond=1e-6))
  close(Tensor(x).pinverse(rcond=1e-6), np.linalg.pinv(x, rcond=1e-6))

# ---------------- lu
@pytest.mark.filterwarnings("ignore:torch.lu is deprecated")
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 4, 4)] + WIDE_TALL)
def test_lu(shape):
  x = rand(*shape)
  packed, piv = Tensor(x).lu()
  tpacked, tpiv = torch.from_numpy(x).lu()
  close(packed, tpacked)
  assert piv.dtype == dtypes.int32 and piv.tolist() == tpiv.tolist()
  if len(shape) == 3: check_grads(lambda a: a.lu()[0], lambda a: a.lu()[0], x)  # through the elimination itself

@pytest.mark.filterwarnings("ignore:torch.lu is deprecated")
def test_lu_infos_and_errors():
  x = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]])
  packed, piv, info = Tensor(x).lu(get_infos=True)
  tpacked, tpiv, tinfo = torch.from_numpy(x).lu(get_infos=True)
  close(packed, tpacked)
  assert piv.tolist() == tpiv.tolist() and info.dtype == dtypes.int32 and info.tolist() == tinfo.tolist()
  with pytest.raises(RuntimeError, match="pivoting"): Tensor(x).lu(pivot=False)
