"""Neural-network functions on Tensor (conv, pooling, activations, losses, attention, ...).

Kept out of tensor.py so the core stays readable; Tensor inherits NNMixin, so these are ordinary Tensor methods."""
from __future__ import annotations

class NNMixin:
  pass
