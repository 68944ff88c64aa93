"""Optimizers. A step builds the update of every parameter lazily and realizes them together.

Learning rate and step counters live in tensors, so changing them (e.g. a schedule) reuses the compiled kernels."""
from __future__ import annotations
from fusegrad.tensor import Tensor
from fusegrad.dtype import dtypes

class Optimizer:
  def __init__(self, params: list[Tensor], lr: float | Tensor):
    params = list(params)
    for p in params:
      if p.requires_grad is None: p.requires_grad_(True)  # also gives lazily-initialized parameters their own buffer
    self.params = [p for p in params if p.requires_grad]
    if not self.params: raise ValueError("optimizer got no parameters that require grad")
    self.device = self.params[0].device
    self.lr = lr if isinstance(lr, Tensor) else Tensor([lr], device=self.device, dtype=dtypes.float32)
    self.buffers: list[Tensor] = []
  def zero_grad(self):
    for p in self.params: p.grad = None
  def step(self) -> None: Tensor.realize_all(*self.schedule_step())
  def schedule_step(self) -> list[Tensor]:
    """Assign the new values (lazily) and return every tensor that must be realized for the step.
    Parameters without a gradient are left alone, as torch does."""
    if all(p.grad is None for p in self.params): raise RuntimeError("no parameter has a gradient: call backward() before step()")
    return self._step() + self.params + self.buffers
  def _step(self) -> list[Tensor]: raise NotImplementedError
  def _zeros(self) -> list[Tensor]: return [Tensor.zeros(p.shape, dtype=p.dtype, device=p.device).contiguous().realize() for p in self.params]

class SGD(Optimizer):
  """torch.optim.SGD: weight decay, momentum (dampening 0) and Nesterov momentum."""
  def __init__(self, params, lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False, classic=False):
    super().__init__(params, lr)
    if nesterov and momentum <= 0: raise ValueError("Nesterov momentum needs momentum > 0")
    self.momentum, self.wd, self.nesterov, self.classic = momentum, weight_decay, nesterov, classic
    self.b = self._zeros() if momentum else []
    self.buffers = list(self.b)
  def _step(self) -> list[Tensor]:
    for i, p in enumerate(self.params):
      if p.grad is None: continue
      g = p.grad.detach().cast(p.dtype)
      if self.wd: g = g + self.wd * p.detach()
      if self.momentum:
        self.b[i].assign(self.momentum * self.b[i] + g)
        g = g + self.momentum * self.b[i] if self.nesterov else self.b[i]
      p.assign(p.detach() - (self.lr * g).cast(p.dtype))
    return []

class LAMB(Optimizer):
  """LAMB (layer-wise adaptive moments); with adam=True and weight decay it is AdamW, without it Adam."""
  def __init__(self, params, lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, adam=False, decoupled=True):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd, self.adam, self.decoupled = b1, b2, eps, weight_decay, adam, decoupled
    self.b1_t = Tensor.ones((1,), device=self.device, dtype=dtypes.float32).contiguous().realize()
    self.b2_t = Tensor.ones((1,), device=self.device, dtype=dtypes.float32).contiguous().realize()
    self.m, self.v = self._zeros(), self._zeros()
    self.buffers = [*self.m, *self.v, self.b1_t, self.b2_t]
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
      p.assign((w - self.lr * trust * up).cast(p.dtype))
    return []

def Adam(params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0, betas=None):
  """torch.optim.Adam (weight_decay is the L2 penalty added to the gradient)."""
  if betas is not None: b1, b2 = betas
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True, decoupled=False)

def AdamW(params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01, betas=None):
  """torch.optim.AdamW: decoupled weight decay (p -= lr * wd * p)."""
  if betas is not None: b1, b2 = betas
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True, decoupled=True)

class OptimizerGroup(Optimizer):
  """Several optimizers stepped as one (one realize for all of them)."""
  def __init__(self, *optimizers: Optimizer):
    self.optimizers = optimizers
    self.params, self.buffers = [p for o in optimizers for p in o.params], [b for o in optimizers for b in o.buffers]
  def zero_grad(self):
    for o in self.optimizers: o.zero_grad()
  def schedule_step(self) -> list[Tensor]: return [t for o in self.optimizers for t in o.schedule_step()]
