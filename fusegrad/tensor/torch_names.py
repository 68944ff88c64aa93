"""PyTorch's other spellings of existing ops (aliases such as multiply, greater, ravel), its in-place _-suffixed methods (add_, mul_, zero_, fill_, ...), new_* constructors, is_* queries and the BLAS-style fused ops (mm, bmm, addmm, addcmul, ...).

Tensor inherits TorchNamesMixin."""
from __future__ import annotations
from typing import TYPE_CHECKING
from fusegrad.tensor.common import TensorMixin

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor  # noqa: F401

class TorchNamesMixin(TensorMixin):
  pass
