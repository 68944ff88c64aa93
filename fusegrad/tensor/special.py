"""Special functions and two-argument math (erfc, erfinv, lgamma, digamma, hypot, xlogy, gcd, ...), as in torch.special.

Tensor inherits SpecialMixin."""
from __future__ import annotations
from typing import TYPE_CHECKING
from fusegrad.tensor.common import TensorMixin

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor  # noqa: F401

class SpecialMixin(TensorMixin):
  pass
