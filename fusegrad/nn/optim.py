"""Optimizers. A step builds the update of every parameter lazily and realizes them together.

Learning rate and step counters live in tensors, so changing them (e.g. a schedule) reuses the compiled kernels."""
from __future__ import annotations
from fusegrad.tensor import Tensor
from fusegrad.dtype import dtypes
from fusegrad.device import canonicalize

class Optimizer:
  """Base class. `params` may repeat a tensor ([w, w], or a weight shared by two layers): each one is updated once.
  Parameters with requires_grad=False are kept as buffers (realized with each step, never updated), as tinygrad does.
  `fused` is accepted for tinygrad compatibility and changes nothing (the step's updates are scheduled together anyway).
  `device` (tinygrad's, for multi-device state) must be the parameters' device when given: the state lives beside them."""
  def __init__(self, params: list[Tensor], lr: float | Tensor, device: str | None = None, fused: bool = False):
    params = list({id(p): p for p in params}.values())  # by identity: Tensor == compares elementwise
    for p in params:
      if p._requires_grad is None: p.requires_grad_(True)  # also gives lazily-initialized parameters their own buffer
    self.params = [p for p in params if p._requires_grad]
    if not self.params: raise ValueError("optimizer got no parameters that require grad")
    self.device, self.fused = self.params[0].device, fused
    if device is not None and (other := [p.device for p in self.params if p.device != canonicalize(device)]):
      raise ValueError(f"optimizer device={device!r}, but parameters are on {sorted(set(other))}: fusegrad keeps the optimizer's state "
                       "on its parameters' device (leave device unset)")
    self.lr = lr if isinstance(lr, Tensor) else Tensor([lr], device=self.device, dtype=dtypes.float32)
    self.buffers: list[Tensor] = [p for p in params if not p._requires_grad]
  def zero_grad(self):
    for p in self.params: p.grad = None
  def step(self) -> None: Tensor.realize_all(*self.schedule_step())
  def schedule_step(self) -> list[Tensor]:
    """Assign the new values (lazily) and return every tensor that must be realized for the step.
    Parameters without a gradient are left alone, as torch does."""
    if not Tensor.training:
      raise RuntimeError(f"Tensor.training={Tensor.training}: an optimizer steps only in training mode (as in tinygrad). "
                         "Set Tensor.training = True, or step inside `with Tensor.train():`, before calling step().")
    if all(p.grad is None for p in self.params): raise RuntimeError("no parameter has a gradient: call backward() before step()")
    return self._step() + self.params + self.buffers
  def _step(self) -> list[Tensor]: raise NotImplementedError
  def _zeros(self) -> list[Tensor]: return [Tensor.zeros(p.shape, dtype=p.dtype, device=p.device).contiguous().realize() for p in self.params]

def newton_schulz(g: Tensor, steps: int, params: tuple[float, ...], eps: float = 1e-7) -> Tensor:
  """Approximately orthogonalise the last two dims of g, as tinygrad's Tensor.newton_schulz: scale g to unit
  Frobenius norm, then `steps` times replace G by sum_i params[i] * (G G^T)^i G. A tall matrix is transposed first,
  so G G^T is the smaller Gram matrix. Muon uses the quintic (3.4445, -4.7750, 2.0315), which pushes every singular
  value towards 1 in five steps."""
  return g.newton_schulz(steps, params, eps)

class LARS(Optimizer):
  """tinygrad's LARS (layer-wise adaptive rate scaling), which is also its SGD (tcoef=0) and Muon (ns_coefficients set).
  Per parameter: trust ratio r = tcoef * |p| / (|g| + wd * |p|) (1 where a norm is 0; 1 when tcoef=0), g += wd * p
  (pre_wd), momentum b = momentum * b + g (Nesterov: g + momentum * b, else b), `ns_steps` Newton-Schulz steps
  orthogonalising g reshaped to (shape[0], -1) when ns_coefficients is given, g = lr * r * g, then g += wd * lr * p when
  not pre_wd (decoupled decay, Muon's), and p -= g. `classic` scales g by lr * r before the momentum instead of after
  (the same result while lr does not change)."""
  def __init__(self, params, lr=0.001, momentum=0.9, weight_decay=1e-4, ns_steps=0, ns_coefficients=None, nesterov=False, classic=True,
               pre_wd=True, tcoef=0.001, device=None, fused=False):
    super().__init__(params, lr, device, fused)
    if momentum < 0: raise ValueError(f"momentum must be >= 0, got {momentum}")
    if isinstance(ns_steps, bool): raise TypeError("LARS's 5th argument is ns_steps (tinygrad 0.14's order); pass nesterov= by keyword")
    if nesterov and momentum <= 0: raise ValueError("Nesterov momentum needs momentum > 0")
    if ns_coefficients is not None and (bad := [p.shape for p in self.params if p.ndim == 0]):
      raise ValueError(f"Newton-Schulz (Muon) updates need parameters with at least one dim, got shapes {bad}")
    self.momentum, self.wd, self.nesterov, self.classic, self.pre_wd, self.tcoef = momentum, weight_decay, nesterov, classic, pre_wd, tcoef
    self.ns_coefficients, self.ns_steps = (tuple(ns_coefficients) if ns_coefficients is not None else None), ns_steps
    self.b = self._zeros() if momentum else []
    self.buffers += self.b
  def _step(self) -> list[Tensor]:
    for i, p in enumerate(self.params):
      if p.grad is None: continue
      w, g = p.detach(), p.grad.detach().cast(p.dtype)
      r = self._trust_ratio(w, g) if self.tcoef else 1.0
      if self.wd and self.pre_wd: g = g + self.wd * w
      if self.classic: g = g * r * self.lr
      if self.momentum:
        self.b[i].assign(self.momentum * self.b[i] + g)
        g = g + self.momentum * self.b[i] if self.nesterov else self.b[i]
      if self.ns_coefficients is not None: g = newton_schulz(g.reshape(g.shape[0], -1), self.ns_steps, self.ns_coefficients).reshape(p.shape)
      if not self.classic: g = g * r * self.lr
      if self.wd and not self.pre_wd: g = g + self.wd * self.lr * w
      new = (w - g).cast(p.dtype)
      del w  # see LAMB._step
      p.assign(new)
    return []
  def _trust_ratio(self, w: Tensor, g: Tensor) -> Tensor:
    r1, r2 = w.square().sum().sqrt(), g.square().sum().sqrt()
    return (r1 > 0).where((r2 > 0).where(self.tcoef * r1 / (r2 + self.wd * r1), 1.0), 1.0)

class SGD(LARS):
  """torch.optim.SGD (= tinygrad's SGD): weight decay, momentum (dampening 0) and Nesterov momentum."""
  def __init__(self, params, lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False, classic=False, device=None, fused=False):
    super().__init__(params, lr, momentum, weight_decay, nesterov=nesterov, classic=classic, tcoef=0.0, device=device, fused=fused)

def Muon(params, lr=0.001, momentum=0.95, weight_decay=0.1, ns_steps=5, ns_coefficients=(3.4445, -4.775, 2.0315), nesterov=True,
         device=None, fused=False) -> LARS:
  """tinygrad's Muon: SGD with Nesterov momentum whose update is orthogonalised by `ns_steps` Newton-Schulz steps
  (see newton_schulz), with decoupled weight decay (p -= lr * wd * p after the update). Each parameter's update is its
  (shape[0], -1) matrix, so use it for weight matrices and another optimizer (Adam) for biases and embeddings, as
  Muon's authors do."""
  return LARS(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False, pre_wd=False, tcoef=0.0, device=device,
              fused=fused)

class LAMB(Optimizer):
  """LAMB (layer-wise adaptive moments); with adam=True and weight decay it is AdamW, without it Adam."""
  def __init__(self, params, lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, adam=False, decoupled=True, device=None, fused=False):
    super().__init__(params, lr, device, fused)
    self.b1, self.b2, self.eps, self.wd, self.adam, self.decoupled = b1, b2, eps, weight_decay, adam, decoupled
    self.b1_t = Tensor.ones((1,), device=self.device, dtype=dtypes.float32).contiguous().realize()
    self.b2_t = Tensor.ones((1,), device=self.device, dtype=dtypes.float32).contiguous().realize()
    self.m, self.v = self._zeros(), self._zeros()
    self.buffers += [*self.m, *self.v, self.b1_t, self.b2_t]
  def _step(self) -> list[Tensor]:
    self.b1_t.assign(self.b1_t * self.b1)
    self.b2_t.assign(self.b2_t * self.b2)
    for i, p in enumerate(self.params):
      if p.grad is None: continue
      g = p.grad.detach().float()
      w = p.detach().float()
      if self.wd and not self.decoupled: g = g + self.wd * w  # torch Adam's L2 penalty
      self.m[i].assign(self.b1 * self.m[i] + (1.0 - self.b1) * g)
      self.v[i].assign(self.b2 * self.v[i] + (1.0 - self.b2) * g * g)
      m_hat = self.m[i] / (1.0 - self.b1_t)
      v_hat = self.v[i] / (1.0 - self.b2_t)
      up = m_hat / (v_hat.sqrt() + self.eps)
      if self.wd and self.decoupled: up = up + self.wd * w
      if not self.adam:
        r1, r2 = w.square().sum().sqrt(), up.square().sum().sqrt()
        trust = ((r1 > 0) & (r2 > 0)).where(r1 / r2, 1.0)
      else: trust = 1.0
      new = (w - self.lr * trust * up).cast(p.dtype)
      # no view of p may be alive when it is assigned: a write that a view must see is made in place at once, which
      # realizes each parameter's update on its own (an eager Adam step of 20 weights: 20 schedules instead of one)
      del w
      p.assign(new)
    return []

def Adam(params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0, betas=None, device=None, fused=False):
  """torch.optim.Adam (weight_decay is the L2 penalty added to the gradient)."""
  if betas is not None: b1, b2 = betas
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True, decoupled=False, device=device, fused=fused)

def AdamW(params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01, betas=None, device=None, fused=False):
  """torch.optim.AdamW: decoupled weight decay (p -= lr * wd * p)."""
  if betas is not None: b1, b2 = betas
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True, decoupled=True, device=device, fused=fused)

class OptimizerGroup(Optimizer):
  """Several optimizers stepped as one (one realize for all of them)."""
  def __init__(self, *optimizers: Optimizer):
    self.optimizers = optimizers
    self.params, self.buffers = [p for o in optimizers for p in o.params], [b for o in optimizers for b in o.buffers]
  def __getitem__(self, i: int) -> Optimizer: return self.optimizers[i]
  def zero_grad(self):
    for o in self.optimizers: o.zero_grad()
  def schedule_step(self) -> list[Tensor]: return [t for o in self.optimizers for t in o.schedule_step()]
