"""tinygrad's nn pieces on the CPU device: LSTMCell against torch.nn.LSTMCell on the same weights, Embedding's
initialisation, Muon and Newton-Schulz against a NumPy reference, and optimizer behaviour (training mode,
duplicated parameters) against torch.optim."""
import math
import numpy as np
import pytest
import torch
from fusegrad import Tensor, nn, TinyJit
from fusegrad.nn import optim

# ======================================================================== LSTMCell

def _lstm_pair(input_size: int, hidden_size: int, bias: bool = True, seed: int = 0):
  torch.manual_seed(seed)
  tcell = torch.nn.LSTMCell(input_size, hidden_size, bias=bias)
  cell = nn.LSTMCell(input_size, hidden_size, bias=bias)
  for k, v in tcell.state_dict().items(): setattr(cell, k, Tensor(v.detach().numpy().copy(), requires_grad=True))
  return cell, tcell

@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell_matches_torch_over_steps(bias):
  cell, tcell = _lstm_pair(5, 7, bias)
  rng = np.random.default_rng(0)
  xs = rng.standard_normal((4, 3, 5)).astype(np.float32)
  h, c, th, tc = None, None, None, None
  for x in xs:  # a short sequence: the state carries over, starting from zeros (hc=None)
    h, c = cell(Tensor(x), None if h is None else (h, c))
    th, tc = tcell(torch.from_numpy(x), None if th is None else (th, tc))
    np.testing.assert_allclose(h.numpy(), th.detach().numpy(), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(c.numpy(), tc.detach().numpy(), atol=1e-5, rtol=1e-5)
  # gradients of every weight through the whole sequence
  (h.sum() + (c * c).sum()).backward()
  (th.sum() + (tc * tc).sum()).backward()
  for k, tp in tcell.named_parameters(): np.testing.assert_allclose(getattr(cell, k).grad.numpy(), tp.grad.numpy(), atol=1e-4, rtol=1e-4, err_msg=k)

def test_lstm_cell_unbatched_and_given_state():
  cell, tcell = _lstm_pair(3, 4, seed=1)
  rng = np.random.default_rng(1)
  x, h0, c0 = (rng.standard_normal(s).astype(np.float32) for s in ((3,), (4,), (4,)))
  h, c = cell(Tensor(x), (Tensor(h0), Tensor(c0)))
  th, tc = tcell(torch.from_numpy(x), (torch.from_numpy(h0), torch.from_numpy(c0)))
  np.testing.assert_allclose(h.numpy(), th.detach().numpy(), atol=1e-5)
  np.testing.assert_allclose(c.numpy(), tc.detach().numpy(), atol=1e-5)

def test_lstm_cell_init_and_names():
  Tensor.manual_seed(3)
  cell, tcell = nn.LSTMCell(6, 20), torch.nn.LSTMCell(6, 20)
  for k, v in tcell.state_dict().items(): assert getattr(cell, k).shape == tuple(v.shape), k
  bound = 1 / math.sqrt(20)
  w = np.concatenate([cell.weight_ih.numpy().ravel(), cell.weight_hh.numpy().ravel()])
  assert np.abs(w).max() <= bound + 1e-7 and np.abs(w).max() > 0.9 * bound and abs(w.mean()) < 0.1 * bound
  assert (cell.bias_ih.numpy() == 0).all() and (cell.bias_hh.numpy() == 0).all()  # tinygrad's choice (torch draws them)

# ======================================================================== Embedding

def test_embedding_init_is_glorot_uniform():
  Tensor.manual_seed(1)
  w = nn.Embedding(200, 50).weight.numpy()
  bound = math.sqrt(6 / (200 + 50))
  assert np.abs(w).max() <= bound + 1e-7 and np.abs(w).max() > 0.95 * bound
  assert abs(w.mean()) < 0.05 * bound and abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound  # U(-b, b) has std b/sqrt(3)
  with pytest.raises(ValueError, match="positive"): nn.Embedding(0, 4)

# ======================================================================== Newton-Schulz and Muon

MUON_NS = (3.4445, -4.7750, 2.0315)

def ns_reference(g: np.ndarray, steps: int, params, eps: float = 1e-7) -> np.ndarray:
  """Newton-Schulz in float64: unit Frobenius norm, then G <- sum_i params[i] (G G^T)^i G; tall matrices transposed."""
  if g.shape[0] > g.shape[1]: return ns_reference(g.T, steps, params, eps).T
  G = g.astype(np.float64) / (np.sqrt((g.astype(np.float64) ** 2).sum()) + eps)
  for _ in range(steps):
    gram, term, out = G @ G.T, G, np.zeros_like(G)
    for i, p in enumerate(params):
      if i: term = gram @ term
      out = out + p * term
    G = out
  return G

@pytest.mark.parametrize("shape", [(4, 6), (6, 4), (5, 5)])
def test_newton_schulz_matches_reference(shape):
  g = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
  got = optim.newton_schulz(Tensor(g), 5, MUON_NS).numpy()
  np.testing.assert_allclose(got, ns_reference(g, 5, MUON_NS), atol=2e-5, rtol=1e-4)

def test_newton_schulz_orthogonalises():
  # the cubic iteration converges to U V^T of the SVD for a well-conditioned matrix
  rng = np.random.default_rng(4)
  u, _ = np.linalg.qr(rng.standard_normal((4, 4)))
  v, _ = np.linalg.qr(rng.standard_normal((6, 6)))
  g = (u @ np.diag([1.0, 0.8, 0.6, 0.5]) @ np.eye(4, 6) @ v.T).astype(np.float32)
  got = optim.newton_schulz(Tensor(g), 30, (1.5, -0.5)).numpy()
  np.testing.assert_allclose(got, u @ np.eye(4, 6) @ v.T, atol=1e-4)
  with pytest.raises(ValueError, match="at least 2 dims"): optim.newton_schulz(Tensor([1.0, 2.0]), 5, MUON_NS)

def muon_reference(w0, grads, lr, momentum, wd, nesterov):
  w, b = w0.astype(np.float64), np.zeros(w0.shape)
  for g in grads:  # tinygrad's Muon: weight decay decoupled, applied after the orthogonalised step
    b = momentum * b + g
    g = g + momentum * b if nesterov else b
    w = w - lr * ns_reference(g.reshape(g.shape[0], -1), 5, MUON_NS).reshape(w.shape) - wd * lr * w
  return w

@pytest.mark.parametrize("shape", [(4, 6), (6, 4), (3, 2, 2), (5,)])
@pytest.mark.parametrize("kw", [dict(lr=0.02, momentum=0.95, weight_decay=0.0, nesterov=True),
                                dict(lr=0.05, momentum=0.9, weight_decay=0.1, nesterov=False)])
def test_muon_matches_reference(shape, kw):
  rng = np.random.default_rng(5)
  w0 = rng.standard_normal(shape).astype(np.float32)
  grads = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
  w = Tensor(w0.copy(), requires_grad=True)
  opt = optim.Muon([w], **kw)
  with Tensor.train():
    for g in grads:
      opt.zero_grad()
      (w * Tensor(g)).sum().backward()  # gradient = g
      opt.step()
  np.testing.assert_allclose(w.numpy(), muon_reference(w0, grads, kw["lr"], kw["momentum"], kw["weight_decay"], kw["nesterov"]), atol=3e-5, rtol=1e-4)

def test_muon_rejects_scalars():
  with pytest.raises(ValueError, match="at least one dim"): optim.Muon([Tensor(1.0, requires_grad=True)])

def test_muon_under_jit():
  rng = np.random.default_rng(6)
  w0, grads = rng.standard_normal((4, 3)).astype(np.float32), [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(4)]
  w = Tensor(w0.copy(), requires_grad=True)
  opt = optim.Muon([w], lr=0.02, momentum=0.9)
  @TinyJit
  @Tensor.train()
  def step(g: Tensor) -> Tensor:
    opt.zero_grad()
    loss = (w * g).sum()
    loss.backward()
    opt.step()
    return loss.realize()
  for g in grads: step(Tensor(g))
  np.testing.assert_allclose(w.numpy(), muon_reference(w0, grads, 0.02, 0.9, 0.1, True), atol=3e-5, rtol=1e-4)

# ======================================================================== optimizer behaviour vs torch

def test_step_outside_training_raises_and_changes_nothing():
  w = Tensor([1.0, -2.0], requires_grad=True)
  for opt in (optim.SGD([w], lr=0.1), optim.Adam([w]), optim.AdamW([w]), optim.LAMB([w]), optim.Muon([w])):
    (w * w).sum().backward()
    with pytest.raises(RuntimeError, match=r"Tensor.training=False.*Tensor.train\(\)"): opt.step()
    opt.zero_grad()
  assert w.tolist() == [1.0, -2.0]

@pytest.mark.parametrize("make,tmake", [(lambda p: optim.SGD(p, lr=0.1, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
                                        (lambda p: optim.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01))])
def test_duplicated_parameters_step_once(make, tmake):
  w0 = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
  w, tw = Tensor(w0.copy(), requires_grad=True), torch.tensor(w0.copy(), requires_grad=True)
  opt, topt = make([w, w, w]), tmake([tw])  # torch gets it once: listing it three times must not triple the step
  with Tensor.train():
    for _ in range(3):
      opt.zero_grad(); (w * w).sum().backward(); opt.step()
      topt.zero_grad(); (tw * tw).sum().backward(); topt.step()
  np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)

def test_lars_trust_ratio_matches_reference():
  rng = np.random.default_rng(7)
  w0, g0 = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
  w = Tensor(w0.copy(), requires_grad=True)
  opt = optim.LARS([w], lr=0.1, momentum=0.9, weight_decay=1e-2, tcoef=0.001)
  p, b = w0.astype(np.float64), np.zeros((3, 4))
  with Tensor.train():
    for _ in range(3):
      opt.zero_grad(); (w * Tensor(g0)).sum().backward(); opt.step()
      r = 0.001 * np.linalg.norm(p) / (np.linalg.norm(g0) + 1e-2 * np.linalg.norm(p))
      b = 0.9 * b + (g0 + 1e-2 * p) * r * 0.1  # classic: lr and trust ratio before the momentum
      p = p - b
  np.testing.assert_allclose(w.numpy(), p, rtol=1e-5, atol=1e-6)
