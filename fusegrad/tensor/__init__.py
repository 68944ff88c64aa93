"""The lazy Tensor, grouped by concept:

  tensor.py       the Tensor class: construction, autograd, properties, realization and data out, assign and in-place
                  writes through views, training / no-grad modes
  creation.py     full, zeros, arange, eye ... and random numbers (rand, randn, initializers, multinomial, randperm)
  movement.py     reshape, permute, pad, shrink, cat/stack/split and the shape ops built on them
  elementwise.py  casting, unary and binary math with broadcasting and type promotion, comparisons, operators
  reduce.py       sum, max, mean, var, argmax ... and linear algebra (matmul, einsum)
  indexing.py     getitem/setitem, gather/scatter, masked ops, sort/topk, scans
  nn.py           softmax, pooling, convolution, activations, normalisation, losses, attention
  torch_names.py  PyTorch's aliases, in-place _ methods, new_* and is_* and the fused BLAS-style ops (mm, addmm, addcmul)
  special.py      special functions and two-argument math (erfc, erfinv, lgamma, hypot, xlogy, gcd, ...)
  stats.py        statistics and data-dependent results (unique, bincount, quantile, cov, ...)
  linalg.py       decompositions and solvers (qr, svd, inverse, det, cholesky, solve)
  printing.py     str(tensor), laid out as PyTorch prints it
  common.py       what those modules share (argument checks, type promotion, view bookkeeping)

Tensor inherits one mixin per concept module; the mixins never import tensor.py (they use `type(self)` / `cls`).
`from fusegrad.tensor import Tensor` is the public spelling, as `from tinygrad.tensor import Tensor`."""
from typing import cast  # noqa: F401  (tinygrad programs import typing.cast from here)
from fusegrad.dtype import DType, dtypes  # noqa: F401  (as tinygrad.tensor, which imports them)
from fusegrad.uop.ops import Variable, broadcast_shape  # noqa: F401  (Variable: tinygrad programs import it from here)
from fusegrad.tensor.common import promote_types  # noqa: F401
from fusegrad.device import Device  # noqa: F401  (older tinygrad programs: from tinygrad.tensor import Tensor, dtypes, Device)
from fusegrad.tensor.tensor import Tensor

__all__ = ["Tensor"]
