"""PyTorch-level Tensor ops beyond the core (indexing, scatter/gather, sorting, scans, einsum, ...).

Tensor inherits OpsMixin, so these are ordinary Tensor methods."""
from __future__ import annotations

class OpsMixin:
  pass
