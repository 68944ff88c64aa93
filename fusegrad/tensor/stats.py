"""Statistics and data-dependent results (unique, bincount, quantile, median variants, cov, corrcoef, ...).

Tensor inherits StatsMixin."""
from __future__ import annotations
from typing import TYPE_CHECKING
from fusegrad.tensor.common import TensorMixin

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor  # noqa: F401

class StatsMixin(TensorMixin):
  pass
