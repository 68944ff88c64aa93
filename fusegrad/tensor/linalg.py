"""Matrix decompositions and solvers (qr, svd, inverse, det, cholesky, solve, ...), composed from tensor ops so autograd flows through them.

Every algorithm loops in Python over the matrix dimension only (one elimination step, Householder reflection, Jacobi
round ... per iteration), batched over the leading dims. Each step reads row k of a small realized table (eye[k],
after[k]) rather than building a mask from k: a read of a realized tensor at k compiles one kernel for every k, a mask
made from the number k compiled one per step. Each step ends in contiguous(): the matrix gets a buffer, so the next
step's kernels read it instead of inlining every earlier step.

Gradients: the results carry closed-form vector-Jacobian products (with_gradient), a few matmuls each, because
differentiating the n steps themselves built a backward graph of thousands of kernels. Forward values the rule needs are
realized once (the singular / not-positive-definite checks need the data anyway); lu is the exception and
differentiates through its elimination.

Tensor inherits LinalgMixin."""
from __future__ import annotations
import collections, math
from typing import TYPE_CHECKING, Callable
from fusegrad.dtype import dtypes
from fusegrad.gradient import with_gradient
from fusegrad.uop.ops import broadcast_shape
from fusegrad.tensor.common import TensorMixin
from fusegrad.tensor.elementwise import _sgn

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

class LinAlgError(RuntimeError):
  """A matrix the operation cannot handle (singular for inverse, not positive-definite for cholesky): torch's
  torch.linalg.LinAlgError, a RuntimeError as torch's is."""

_SlogdetRet = collections.namedtuple("slogdet", ["sign", "logabsdet"])
_QRRet = collections.namedtuple("qr", ["Q", "R"])
_SVDRet = collections.namedtuple("svd", ["U", "S", "Vh"])
_TorchSVDRet = collections.namedtuple("svd", ["U", "S", "V"])

# ---------------- argument checks
def _check(x: Tensor, name: str, square: bool = True) -> None:
  """torch's checks, in its order: at least 2 dims, square matrices, a float32/float64 dtype (torch's CPU kernels have no
  16-bit ones)."""
  if x.ndim < 2: raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions, got shape {x.shape}")
  if square and x.shape[-1] != x.shape[-2]:
    raise RuntimeError(f"{name}: A must be batches of square matrices, but they are {x.shape[-2]} by {x.shape[-1]} matrices")
  if not dtypes.is_float(x.dtype): raise RuntimeError(f"{name}: Expected a floating point tensor as input. Got {x.dtype}")
  if x.dtype.itemsize < 4: raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {x.dtype}")

def _first_bad(bad: Tensor) -> tuple[str, int] | None:
  """(torch's '(Batch element i): ' prefix, 1-based position) of the first True of bad (..., n), or None. Realizes bad."""
  rows = bad.reshape(-1, bad.shape[-1]).tolist()
  for b, row in enumerate(rows):
    if True in row: return (f"(Batch element {b}): " if bad.ndim > 1 else ""), row.index(True) + 1
  return None

# ---------------- building blocks
class _Rows:
  """Realized tables of n x n whose row k a loop step reads: eye[k] (e_k), after[k] (i > k), start[k] (i >= k)."""
  def __init__(self, n: int, like: Tensor):
    self.ar = type(like).arange(n, device=like.device)
    r, c = self.ar.reshape(n, 1), self.ar.reshape(1, n)
    self.eye, self.after, self.start = (_fixed((r == c).cast(like.dtype)), _fixed(r < c), _fixed(r <= c))

def _fixed(t: Tensor) -> Tensor:
  t = t.contiguous().realize()
  t.requires_grad = False  # a constant: backward gives float tensors of the graph a gradient unless they say no
  return t

def _realize(*ts: Tensor) -> None:
  """Compute ts now, each keeping its lazy graph (its node is marked realized, so later kernels read the buffer): a result
  built from them still has the input in its graph, for its gradient rule, even where the input does not require grad
  yet (a plain float tensor gets one from backward). Realizing the tensors themselves would swap their graphs for the
  buffers then."""
  type(ts[0]).realize_all(*(type(t)(t.uop) for t in ts))

def _batch_eye(n: int, like: Tensor) -> Tensor:
  return type(like).eye(n, dtype=like.dtype, device=like.device).expand(like.shape[:-2] + (n, n))

def _mat(g: Tensor, u) -> Tensor:
  """A value kept for a gradient rule: rules hold the node (a UOp), not a Tensor, which backward would give a .grad."""
  return type(g)(u)

def _with_vjp(value: Tensor, x: Tensor, vjp: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
  """value (computed from x) as a new node whose gradient for x is vjp(g, x). The node is a copy of value, so that vjp
  may read value (realized by the caller, _realize) without the node's rule holding the node itself."""
  return with_gradient(value.clone(), x, vjp)

def _tie(value: Tensor, x: Tensor) -> Tensor:
  """value, with x among its inputs (adding x's empty sum, an exact 0 whatever x holds): a result that does not depend on
  x (Q of a 1-row matrix, V of a 1-column one) still needs x in its graph for its gradient rule to run."""
  return value + x.flatten()[:0].sum()

def _eliminate(a: Tensor, rhs: Tensor | None = None, jordan: bool = False, pack: bool = False):
  """Gaussian elimination with partial pivoting on a (..., m, n): at step k the row holding the largest |value| of
  column k at or below row k (the first on ties, as LAPACK's getrf) is swapped up and eliminated from the rows below it
  (jordan: from every other row, so a ends diagonal and the rows of rhs, swapped and combined alike, end as diag * a^-1
  rhs). pack: keep the multipliers below the diagonal, getrf's packed LU. A zero pivot eliminates nothing (the column is
  zero). Returns (a, rhs, the permutation's sign (...), the pivot rows (..., min(m, n)) int32)."""
  m, n = a.shape[-2:]
  rows = _Rows(m, a)
  cols = rows if n == m else _Rows(n, a)
  picked = []
  for k in range(min(m, n)):
    ek, ck = rows.eye[k], cols.eye[k]
    col = (a * ck).sum(-1)
    p = rows.start[k].where(col.abs(), -1.0).argmax(-1, keepdim=True)
    # swapping rows k and p is t - w (w^T t) with w = e_k - e_p: one reduction, and nothing when p == k
    w = (ek - (rows.ar == p).cast(a.dtype)).unsqueeze(-1)
    def swapped(t: Tensor) -> Tensor: return t - w * (w * t).sum(-2).unsqueeze(-2)
    a = swapped(a)
    row = (ek.unsqueeze(-1) * a).sum(-2)
    col = (a * ck).sum(-1)
    pivot = (row * ck).sum(-1, keepdim=True)
    mult = ((1 - ek) if jordan else rows.after[k]) * col / (pivot == 0).where(1.0, pivot)
    a = a - mult.unsqueeze(-1) * (cols.start[k] * row if pack else row).unsqueeze(-2)  # (packed: not the multipliers left of k)
    if pack: a = (rows.after[k].unsqueeze(-1) & (ck > 0)).where(mult.unsqueeze(-1), a)
    a = a.contiguous()
    if rhs is not None:
      rhs = swapped(rhs)
      rhs = (rhs - mult.unsqueeze(-1) * (ek.unsqueeze(-1) * rhs).sum(-2).unsqueeze(-2)).contiguous()
    picked.append(p)
  steps = min(m, n)
  picked_t = picked[0].cat(*picked[1:], dim=-1) if picked else type(a).zeros(*a.shape[:-2], 0, dtype=dtypes.int32, device=a.device)
  swaps = (picked_t != type(a).arange(steps, device=a.device)).sum(-1)
  return a, rhs, 1 - (swaps % 2).cast(a.dtype) * 2, picked_t

def _gauss_jordan(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
  """(x^-1, the pivots (..., n), the permutation's sign) of square x; a zero pivot (singular x) gives inf/NaN rows."""
  a, rhs, sign, _ = _eliminate(x, _batch_eye(x.shape[-1], x), jordan=True)
  piv = a.diagonal(0, -2, -1)
  return rhs / piv.unsqueeze(-1), piv, sign

def _tri_inv(t: Tensor, upper: bool) -> Tensor:
  """The inverse of the triangle of t (the other one is not read) by substitution: row k of x = t^-1 is
  (e_k - t[k, :] @ x) / t[k, k], the rows not yet solved being 0 (lower: k ascending; upper: descending)."""
  n = t.shape[-1]
  rows = _Rows(n, t)
  t = t.triu() if upper else t.tril()
  x = t.zeros_like()
  for k in reversed(range(n)) if upper else range(n):
    ek = rows.eye[k]
    row = (ek.unsqueeze(-1) * t).sum(-2)
    acc = (row.unsqueeze(-1) * x).sum(-2)
    x = (x + ek.unsqueeze(-1) * ((ek - acc) / (row * ek).sum(-1, keepdim=True)).unsqueeze(-2)).contiguous()
  return x

def _tri_inverse(t: Tensor, upper: bool) -> Tensor:
  """_tri_inv with the gradient of a general inverse, -x^T g x^T, not masked to the triangle: torch's cholesky_solve
  and cholesky_inverse differentiate L L^T as a product of full matrices."""
  x = _tri_inv(t, upper)
  _realize(x)
  u = x.uop
  return _with_vjp(x, t, lambda g, _t: -(_mat(g, u).mT @ g @ _mat(g, u).mT))

def _cholesky_lower(a: Tensor) -> Tensor:
  """The lower Cholesky factor of symmetric a, a column per step: l_k = s[:, k] / sqrt(s[k, k]) on rows >= k, then
  s -= l_k l_k^T. A pivot that is not positive gives NaN or inf (the caller raises)."""
  n = a.shape[-1]
  rows = _Rows(n, a)
  out, s = a.zeros_like(), a
  for k in range(n):
    ek = rows.eye[k]
    col = (s * ek).sum(-1)
    col = rows.start[k].where(col / (col * ek).sum(-1, keepdim=True).sqrt(), 0.0)  # (where: a NaN pivot leaves rows < k)
    out = (out + col.unsqueeze(-1) * ek).contiguous()
    s = (s - col.unsqueeze(-1) * col.unsqueeze(-2)).contiguous()
  return out

def _householder(a: Tensor) -> tuple[Tensor, Tensor]:
  """The complete QR of a (..., m, n), Q (m, m) and R (m, n), by Householder reflections H = I - tau v v^T with LAPACK's
  (geqrf's) signs: R[k, k] = -sign(a_kk) * |column|, and no reflection (tau = 0) where the column is zero below the
  diagonal. So Q and R equal torch's, not just up to signs."""
  m, n = a.shape[-2:]
  rows = _Rows(m, a)
  cols = rows if n == m else _Rows(n, a)
  q, r = _batch_eye(m, a).contiguous(), a
  for k in range(min(m - 1, n)):
    ek, below = rows.eye[k], rows.after[k]
    x = (r * cols.eye[k]).sum(-1)
    alpha = (x * ek).sum(-1, keepdim=True)
    rest = (x * x * below).sum(-1, keepdim=True)
    norm = (alpha * alpha + rest).sqrt()
    beta = (alpha < 0).where(norm, -norm)
    keep = rest == 0
    tau = keep.where(0.0, (beta - alpha) / keep.where(1.0, beta))
    v = ek + below * x / keep.where(1.0, alpha - beta)
    tv = tau * v
    r = (r - tv.unsqueeze(-1) * (v.unsqueeze(-1) * r).sum(-2).unsqueeze(-2)).contiguous()
    q = (q - (q * v.unsqueeze(-2)).sum(-1).unsqueeze(-1) * tv.unsqueeze(-2)).contiguous()
  return q, r.triu()

# ---------------- SVD by one-sided Jacobi
def _round_robin(n: int) -> list[tuple[list[int], list[int]]]:
  """Per round of a sweep, each column's partner (itself when it sits out) and role (+1 first of its pair, -1 second,
  0 sitting out): the circle method, so every pair meets once a sweep and a round's pairs are disjoint (they rotate
  together)."""
  size = n + n % 2
  players, rounds = list(range(size)), []
  for _ in range(size - 1):
    partner, role = list(range(n)), [0] * n
    for i in range(size // 2):
      p, q = players[i], players[size - 1 - i]
      if p < n and q < n: partner[p], partner[q], role[p], role[q] = q, p, 1, -1
    rounds.append((partner, role))
    players = [players[0], players[-1]] + players[1:-1]
  return rounds

_MAX_SWEEPS = 40

def _jacobi(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
  """(U (..., m, n), S (..., n) descending, V (..., n, n)) of a (..., m, n), m >= n, by one-sided Jacobi: rotate pairs of
  columns of a (and of V = I) until every two are orthogonal; then S holds the column norms and U the normalized
  columns. Accurate to the last bits of small singular values too; sweeps until converged (a data check per sweep)."""
  n = a.shape[-1]
  t, dev = type(a), a.device
  v = _batch_eye(n, a).contiguous()
  if n > 1:
    rr = _round_robin(n)
    # perms[r][j, i] = 1 where j is i's partner: a @ perms[r] holds each column's partner
    perms = _fixed((t([p for p, _ in rr], device=dev).unsqueeze(-2) == t.arange(n, device=dev).reshape(n, 1)).cast(a.dtype))
    roles = _fixed(t([r for _, r in rr], dtype=a.dtype, device=dev))
    eps = 2.0 ** -52 if a.dtype == dtypes.float64 else 2.0 ** -23
    off_diag = _fixed(t.eye(n, device=dev, dtype=dtypes.bool).logical_not())
    tol, last = a.shape[-2] * eps, False
    for _ in range(_MAX_SWEEPS):
      for r in range(len(rr)):
        perm, role = perms[r], roles[r]
        ap = a @ perm
        alpha, beta, gamma = (a * a).sum(-2), (ap * ap).sum(-2), (a * ap).sum(-2)
        turn = (role != 0) & (gamma != 0)
        zeta = role * (beta - alpha) / (turn.where(gamma, 1.0) * 2)
        tan = turn.where(_sgn(zeta) / (zeta.abs() + (zeta * zeta + 1).sqrt()), 0.0)
        c = 1 / (tan * tan + 1).sqrt()
        w = -role * c * tan
        a = (a * c.unsqueeze(-2) + ap * w.unsqueeze(-2)).contiguous()
        v = (v * c.unsqueeze(-2) + (v @ perm) * w.unsqueeze(-2)).contiguous()
      if last: break
      # how far from orthogonal the columns are: max |a_i . a_j| / (|a_i| |a_j|). Convergence is quadratic, so a sweep
      # from below sqrt(tol) ends below tol: that one is the last, without a check after it
      g = a.mT @ a
      d = g.diagonal(0, -2, -1).sqrt()
      scale = d.unsqueeze(-1) * d.unsqueeze(-2)
      off = (off_diag & (scale > 0)).where(g.abs() / (scale == 0).where(1.0, scale), 0.0).max()
      _realize(a, v, off)
      worst = off.item()
      if not worst > tol: break  # (NaN stops too)
      last = worst < math.sqrt(tol)
  s = (a * a).sum(-2).sqrt()
  # sort descending (ties keep their order): a column's rank is how many come before it
  si, sj = s.unsqueeze(-1), s.unsqueeze(-2)
  ar = t.arange(n, device=dev)
  before = (sj > si) | ((sj == si) & (ar.reshape(1, n) < ar.reshape(n, 1)))
  order = (before.sum(-1).unsqueeze(-1) == ar).cast(a.dtype)
  u = (a / (s == 0).where(1.0, s).unsqueeze(-2)) @ order
  return u, (s.unsqueeze(-2) @ order).squeeze(-2), v @ order

def _complete(u: Tensor, s: Tensor) -> Tensor:
  """u (..., m, k) with orthonormal columns where s > 0 and zero columns (last, s sorted) where s == 0, completed to an
  orthogonal (..., m, m): Q of u's complete QR, its signs matched to u's columns."""
  m, k = u.shape[-2:]
  q, r = _householder(u)
  d = r.diagonal(0, -2, -1)
  flip = (d < 0).where(-1.0, 1.0).pad(((0, 0),) * (d.ndim - 1) + ((0, m - k),), value=1.0)
  keep = (s > 0).pad(((0, 0),) * (s.ndim - 1) + ((0, m - k),), value=False)
  return keep.unsqueeze(-2).where(u.pad(((0, 0),) * (u.ndim - 1) + ((0, m - k),)), q * flip.unsqueeze(-2))

def _svd(x: Tensor, full: bool) -> tuple[Tensor, Tensor, Tensor]:
  """(U, S, V) of x (..., m, n), realized: U (m, m) and V (n, n) when full, else (m, k) and (n, k), k = min(m, n)."""
  m, n = x.shape[-2:]
  tall = m >= n
  u, s, v = _jacobi(x if tall else x.mT)
  if (full and m != n) or (s == 0).any().item(): u = _complete(u, s)
  if not full: u = u[..., :min(m, n)]
  u, v = (u, v) if tall else (v, u)
  finite = s.isfinite().all()
  _realize(u, s, v, finite)
  if not finite.item(): raise LinAlgError("linalg.svd: The algorithm failed to converge because the input matrix contained non-finite values.")
  return u, s, v

def _svd_grad(gU: Tensor | None, gS: Tensor | None, gV: Tensor | None, U: Tensor, S: Tensor, V: Tensor) -> Tensor:
  """The gradient for x = U diag(S) V^T of one output's gradient (J. Townsend, "Differentiating the Singular Value
  Decomposition", 2016), from the first k = min(m, n) columns of U and V (torch ignores the rest too). Repeated singular
  values give inf/NaN for gU and gV, as in torch."""
  k = S.shape[-1]
  u, v = U[..., :k], V[..., :k]
  if gS is not None: return (u * gS.unsqueeze(-2)) @ v.mT
  s2 = S * S
  diff = s2.unsqueeze(-2) - s2.unsqueeze(-1)  # [i, j] = s_j^2 - s_i^2
  other = type(S).eye(k, device=S.device, dtype=dtypes.bool).logical_not()
  f = other.where(1 / other.where(diff, 1.0), 0.0)
  if gU is not None:
    g = gU[..., :k]
    out = u @ ((f * (u.mT @ g - g.mT @ u)) * S.unsqueeze(-2)) @ v.mT
    if U.shape[-2] > k: out = out + ((g - u @ (u.mT @ g)) / S.unsqueeze(-2)) @ v.mT
    return out
  assert gV is not None
  g = gV[..., :k]
  out = u @ (S.unsqueeze(-1) * (f * (v.mT @ g - g.mT @ v))) @ v.mT
  if V.shape[-2] > k: out = out + u @ ((g - v @ (v.mT @ g)) / S.unsqueeze(-2)).mT
  return out

# ---------------- QR gradient
def _qr_grad_tall(gQ: Tensor, gR: Tensor, Q: Tensor, R: Tensor) -> Tensor:
  """x = QR with R square: (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q, copyltu(M) the symmetric matrix of M's lower
  triangle (from differentiating Q^T Q = I and R upper triangular)."""
  mm = R @ gR.mT - gQ.mT @ Q
  return (gQ + Q @ (mm.tril() + mm.tril(-1).mT)) @ _tri_inv(R, upper=True).mT

def _qr_grad(gQ: Tensor, gR: Tensor, Q: Tensor, R: Tensor, x: Tensor) -> Tensor:
  m, n = x.shape[-2:]
  if m >= n: return _qr_grad_tall(gQ, gR, Q, R)
  # wide: x = [X | Y] with X = Q R1 and Y = Q R2, R2 = Q^T Y adding Y gR2^T to Q's gradient
  g1, g2 = gR[..., :m], gR[..., m:]
  gx = _qr_grad_tall(gQ + x[..., m:] @ g2.mT, g1, Q, R[..., :m])
  return gx.cat(Q @ g2, dim=-1)

def _svd_empty(x: Tensor, full: bool) -> tuple[Tensor, Tensor, Tensor]:
  """(U, S, V) of a matrix with no elements: identities when full (as torch), else empty."""
  m, n = x.shape[-2:]
  k, lead = min(m, n), x.shape[:-2]
  def side(r: int) -> Tensor: return _batch_eye(r, x) if full else type(x).zeros(*lead, r, k, dtype=x.dtype, device=x.device)
  return side(m), type(x).zeros(*lead, k, dtype=x.dtype, device=x.device), side(n)

def _svd_rule(which: str, vals: tuple) -> Callable[[Tensor, Tensor], Tensor]:
  """The gradient rule of the SVD output `which` (U, S, V or Vh), vals holding the nodes of U, S and V."""
  def vjp(g: Tensor, _x: Tensor) -> Tensor:
    gv = None if which in ("U", "S") else g if which == "V" else g.mT
    return _svd_grad(g if which == "U" else None, g if which == "S" else None, gv, *(_mat(g, u) for u in vals))
  return vjp

class LinalgMixin(TensorMixin):
  # ---------------- determinants and inverses
  def det(self: Tensor) -> Tensor:
    """torch.linalg.det of the last two dims, by Gaussian elimination with partial pivoting. The gradient is det * A^-T,
    and for a singular matrix the cofactors, from the SVD, as torch computes them."""
    _check(self, "linalg.det")
    if self.shape[-1] == 0 or self.numel() == 0: return type(self).full(self.shape[:-2], 1.0, dtype=self.dtype, device=self.device)
    return _with_vjp(_plain_det(self), self, _det_vjp)
  def slogdet(self: Tensor):
    """torch.linalg.slogdet: (sign, logabsdet) of the last two dims; a singular matrix gives (0, -inf). sign has no
    gradient; logabsdet's is A^-T."""
    _check(self, "linalg.slogdet")
    if self.shape[-1] == 0 or self.numel() == 0:
      return _SlogdetRet(*(type(self).full(self.shape[:-2], v, dtype=self.dtype, device=self.device) for v in (1.0, 0.0)))
    a, _, sign, _ = _eliminate(self)
    piv = a.diagonal(0, -2, -1)
    logabs = _with_vjp(piv.abs().log().sum(-1), self, lambda g, x: g.unsqueeze(-1).unsqueeze(-1) * _gauss_jordan(x)[0].mT)
    return _SlogdetRet((sign * piv.sign().prod(-1)).detach(), logabs)
  def logdet(self: Tensor) -> Tensor:
    """torch.logdet: log(det), NaN for a negative determinant and -inf for a singular matrix."""
    _check(self, "logdet")
    sign, logabs = self.slogdet()
    return (sign < 0).where(math.nan, logabs)
  def inverse(self: Tensor) -> Tensor:
    """torch.linalg.inv of the last two dims, by Gauss-Jordan elimination with partial pivoting. A singular matrix (a
    zero pivot) raises LinAlgError, a RuntimeError, as torch (checking realizes the result)."""
    _check(self, "linalg.inv")
    n = self.shape[-1]
    if n == 0 or self.numel() == 0: return self.zeros_like()
    inv, piv, _ = _gauss_jordan(self)
    zero = piv == 0
    _realize(inv, zero)
    if (bad := _first_bad(zero)) is not None:
      raise LinAlgError(f"linalg.inv: {bad[0]}The diagonal element {bad[1]} is zero, the inversion could not be completed because the "
                        "input matrix is singular.")
    u = inv.uop
    return _with_vjp(inv, self, lambda g, _x: -(_mat(g, u).mT @ g @ _mat(g, u).mT))
  def matrix_power(self: Tensor, n: int) -> Tensor:
    """torch.linalg.matrix_power: self multiplied by itself n times by repeated squaring; n = 0 gives the identity and
    a negative n the inverse's power (floats only, as torch)."""
    if self.ndim < 2: raise RuntimeError(f"linalg.matrix_power: The input tensor A must have at least 2 dimensions, got shape {self.shape}")
    if self.shape[-1] != self.shape[-2]:
      raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are {self.shape[-2]} by {self.shape[-1]} matrices")
    if not isinstance(n, int) or isinstance(n, bool): raise TypeError(f"matrix_power(): n must be an int, got {type(n).__name__}")
    if n == 0: return _batch_eye(self.shape[-1], self).contiguous()
    if n < 0: return self.inverse().matrix_power(-n)
    out, sq = None, self
    while True:
      if n & 1: out = sq if out is None else out @ sq
      n >>= 1
      if not n: break
      sq = sq @ sq
    return out if out is not self else self.clone()
  def pinverse(self: Tensor, rcond: float = 1e-15) -> Tensor:
    """torch.pinverse: the Moore-Penrose pseudo-inverse (..., n, m) from the SVD, singular values at or below
    rcond * the largest counting as 0. The gradient is the closed form of Golub and Pereyra (torch's)."""
    _check(self, "linalg.pinv", square=False)
    m, n = self.shape[-2:]
    if self.numel() == 0: return type(self).zeros(*self.shape[:-2], n, m, dtype=self.dtype, device=self.device)
    u, s, v = _svd(self, full=False)
    inv_s = (s > rcond * s.max(-1, keepdim=True)).where(1 / (s == 0).where(1.0, s), 0.0)
    p = (v * inv_s.unsqueeze(-2)) @ u.mT
    _realize(p)
    up = p.uop
    def vjp(g: Tensor, x: Tensor) -> Tensor:
      pm = _mat(g, up)
      row_space, col_space = _batch_eye(m, x) - x @ pm, _batch_eye(n, x) - pm @ x
      return -(pm.mT @ g @ pm.mT) + row_space @ g.mT @ pm @ pm.mT + pm.mT @ pm @ g.mT @ col_space
    return _with_vjp(p, self, vjp)

  # ---------------- factorizations
  def cholesky(self: Tensor, upper: bool = False) -> Tensor:
    """torch.linalg.cholesky: L with A = L L^T (upper: U with A = U^T U) of a symmetric positive-definite matrix, read
    from its lower triangle (upper: its upper one). A matrix that is not positive-definite raises LinAlgError, a
    RuntimeError, as torch (checking realizes the result). The gradient is torch's, symmetric."""
    _check(self, "linalg.cholesky")
    if self.numel() == 0: return self.zeros_like()
    sym = self.triu() + self.triu(1).mT if upper else self.tril() + self.tril(-1).mT
    low = _cholesky_lower(sym)
    bad = (low.diagonal(0, -2, -1) > 0).logical_not()
    _realize(low, bad)
    if (found := _first_bad(bad)) is not None:
      raise LinAlgError(f"linalg.cholesky: {found[0]}The factorization could not be completed because the input is not positive-definite "
                        f"(the leading minor of order {found[1]} is not positive-definite).")
    u = low.uop
    def vjp(g: Tensor, _x: Tensor) -> Tensor:
      lw, gl = _mat(g, u), (g.mT if upper else g)
      mm = (lw.mT @ gl).tril()
      inv = _tri_inv(lw, upper=False)
      return inv.mT @ ((mm + mm.tril(-1).mT) * 0.5) @ inv
    return _with_vjp(low.mT if upper else low, self, vjp)
  def cholesky_inverse(self: Tensor, upper: bool = False) -> Tensor:
    """torch.cholesky_inverse: (L L^T)^-1 from the Cholesky factor L in self (upper: (U^T U)^-1), only its triangle read."""
    _check(self, "cholesky_inverse")
    if self.numel() == 0: return self.zeros_like()
    inv = _tri_inverse(self, upper)
    return inv @ inv.mT if upper else inv.mT @ inv
  def cholesky_solve(self: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """torch.cholesky_solve: X with A X = self for A = L L^T, L the Cholesky factor input2 (upper: A = U^T U), only
    its triangle read; the batch dims broadcast."""
    _check(input2, "cholesky_solve")
    if self.ndim < 2: raise RuntimeError(f"cholesky_solve: The input tensor B must have at least 2 dimensions, got shape {self.shape}")
    if self.shape[-2] != input2.shape[-1]:
      raise RuntimeError(f"cholesky_solve: Incompatible matrix sizes for the product of {input2.shape[-2]}x{input2.shape[-1]} and "
                         f"{self.shape[-2]}x{self.shape[-1]}")
    if self.dtype != input2.dtype: raise RuntimeError(f"cholesky_solve: Expected b and A to have the same dtype, got {self.dtype} and {input2.dtype}")
    if input2.numel() == 0 or self.numel() == 0:
      return type(self).zeros(*broadcast_shape(self.shape[:-2], input2.shape[:-2]), *self.shape[-2:], dtype=self.dtype, device=self.device)
    inv = _tri_inverse(input2, upper)
    return inv @ (inv.mT @ self) if upper else inv.mT @ (inv @ self)
  def qr(self: Tensor, mode: str | bool = "reduced", *, some: bool | None = None):
    """torch.linalg.qr by Householder reflections: (Q, R) with LAPACK's (torch's) signs. mode 'reduced' (Q (m, k), R (k, n),
    k = min(m, n)), 'complete' (Q (m, m), R (m, n): tinygrad's qr()) or 'r' (R only, an empty Q); torch.Tensor.qr's
    some=True/False is 'reduced'/'complete'. The gradient is torch's (none for 'complete' with m > n)."""
    if isinstance(mode, bool): some, mode = mode, "reduced"
    if some is not None: mode = "reduced" if some else "complete"
    if mode not in ("reduced", "complete", "r"):
      raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'")
    _check(self, "linalg.qr", square=False)
    m, n = self.shape[-2:]
    k = min(m, n)
    q, r = _householder(self)
    if mode != "complete" or m <= n: q, r = q[..., :k], r[..., :k, :]
    if min(m - 1, n) <= 0: q = _tie(q, self)
    _realize(q, r)
    uq, ur = q.uop, r.uop
    def grads(gq: bool) -> Callable[[Tensor, Tensor], Tensor]:
      def vjp(g: Tensor, x: Tensor) -> Tensor:
        if mode == "complete" and m > n: raise RuntimeError("The derivative of linalg.qr is not defined when mode='complete' and nrows > ncols.")
        qm, rm = _mat(g, uq), _mat(g, ur)
        return _qr_grad(g if gq else qm.zeros_like(), rm.zeros_like() if gq else g, qm, rm, x)
      return vjp
    rr = _with_vjp(r, self, grads(False))
    if mode == "r": return _QRRet(type(self).zeros(0, dtype=self.dtype, device=self.device), rr)
    return _QRRet(_with_vjp(q, self, grads(True)), rr)
  def svd(self: Tensor, full_matrices: bool = True, *, some: bool | None = None, compute_uv: bool = True):
    """tinygrad's Tensor.svd: (U, S, Vh) with x = U diag(S) Vh as torch.linalg.svd, U (m, m) and Vh (n, n) when
    full_matrices (the default), else (m, k) and (k, n). torch.Tensor.svd's spelling, some= given, returns (U, S, V)
    instead, reduced when some (its default is True), U and V zero-filled when not compute_uv. Computed by one-sided
    Jacobi (realized, a data check per sweep); S is descending and each singular vector is unique up to its sign. The
    gradient is torch's: from S always, from U and V where the singular values are distinct."""
    _check(self, "linalg.svd", square=False)
    full = full_matrices if some is None else not some
    m, n = self.shape[-2:]
    if self.numel() == 0: u, s, v = _svd_empty(self, full)
    else:
      u, s, v = _svd(self, full)
      if min(m, n) == 1:
        u, v = _tie(u, self), _tie(v, self)
        _realize(u, v)
    if self.numel() == 0: return _TorchSVDRet(u, s, v) if some is not None else _SVDRet(u, s, v.mT)
    vals = (u.uop, s.uop, v.uop)
    out_s = _with_vjp(s, self, _svd_rule("S", vals))
    if some is None: return _SVDRet(_with_vjp(u, self, _svd_rule("U", vals)), out_s, _with_vjp(v.mT, self, _svd_rule("Vh", vals)))
    if compute_uv: return _TorchSVDRet(_with_vjp(u, self, _svd_rule("U", vals)), out_s, _with_vjp(v, self, _svd_rule("V", vals)))
    def zeros(r: int) -> Tensor: return type(self).zeros(*self.shape[:-2], r, r, dtype=self.dtype, device=self.device)
    return _TorchSVDRet(zeros(m), out_s, zeros(n))
  def lu(self: Tensor, pivot: bool = True, get_infos: bool = False):
    """torch.Tensor.lu: (A_LU, pivots) of getrf with partial pivoting: L's multipliers below the diagonal and U on and
    above it in one (..., m, n) matrix, and the 1-based int32 row swapped with row i at step i; get_infos adds the
    int32 info (1 + the first zero of U's diagonal, else 0). Rectangular matrices too. Differentiable through the
    elimination itself."""
    if not pivot: raise RuntimeError("lu without pivoting is not implemented on the CPU")
    _check(self, "torch.lu", square=False)
    m, n = self.shape[-2:]
    k, t = min(m, n), type(self)
    if k == 0 or self.numel() == 0:
      packed, piv = self.clone(), t.zeros(*self.shape[:-2], k, dtype=dtypes.int32, device=self.device)
    else:
      packed, _, _, picked = _eliminate(self, pack=True)
      piv = (picked + 1).cast(dtypes.int32)
    if not get_infos: return packed, piv
    zero = packed.diagonal(0, -2, -1) == 0
    info = zero.any(-1).where(zero.argmax(-1) + 1, 0).cast(dtypes.int32) if k else t.zeros(*self.shape[:-2], dtype=dtypes.int32, device=self.device)
    return packed, piv, info

def _plain_det(x: Tensor) -> Tensor:
  a, _, sign, _ = _eliminate(x)
  return sign * a.diagonal(0, -2, -1).prod(-1)

def _det_vjp(g: Tensor, x: Tensor) -> Tensor:
  """g det(x) x^-T, the cofactor matrix. Where x is singular (a zero pivot: det is 0 and x^-1 has none) the cofactors come
  from the SVD instead, det(U) det(V) U diag(prod_{j != i} s_j) V^T, as torch computes them (only when one is)."""
  inv, piv, sign = _gauss_jordan(x)
  det = sign * piv.prod(-1)
  cof = det.unsqueeze(-1).unsqueeze(-1) * inv.mT
  _realize(cof, det)
  singular = (det == 0).unsqueeze(-1).unsqueeze(-1)
  if singular.any().item():
    u, s, v = _svd(x.detach(), full=True)
    n = s.shape[-1]
    others = type(s).eye(n, device=s.device, dtype=dtypes.bool).where(1.0, s.unsqueeze(-2)).prod(-1)
    cof = singular.where((_plain_det(u) * _plain_det(v)).unsqueeze(-1).unsqueeze(-1) * (u * others.unsqueeze(-2)) @ v.mT, cof)
  return g.unsqueeze(-1).unsqueeze(-1) * cof
