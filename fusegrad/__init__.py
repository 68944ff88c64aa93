"""fusegrad: a small, fast, hackable deep-learning framework (tinygrad-compatible API)."""
from fusegrad.tensor import Tensor
from fusegrad.dtype import dtypes
from fusegrad.device import Device
from fusegrad.helpers import Context, GlobalCounters
from fusegrad.uop.ops import UOp

from fusegrad.uop.ops import Variable

def TinyJit(fn=None, **kwargs):
  """Placeholder until the JIT lands: calls the function directly (correct, just not replayed)."""
  if fn is None: return lambda f: f
  return fn

from fusegrad import nn  # noqa: E402

__all__ = ["Tensor", "dtypes", "Device", "Context", "GlobalCounters", "Variable", "TinyJit", "nn"]
