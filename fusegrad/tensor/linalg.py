"""Matrix decompositions and solvers (qr, svd, inverse, det, cholesky, solve, ...), composed from tensor ops so autograd flows through them.

Tensor inherits LinalgMixin."""
from __future__ import annotations
from typing import TYPE_CHECKING
from fusegrad.tensor.common import TensorMixin

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor  # noqa: F401

class LinalgMixin(TensorMixin):
  pass
