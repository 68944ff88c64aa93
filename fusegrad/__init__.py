"""fusegrad: a small, fast, hackable deep-learning framework (tinygrad-compatible API)."""
from fusegrad.tensor import Tensor
from fusegrad.dtype import dtypes
from fusegrad.device import Device
from fusegrad.helpers import Context, GlobalCounters, fetch, getenv
from fusegrad.uop.ops import UOp

from fusegrad.uop.ops import Variable

from fusegrad import function as _function_module  # noqa: F401  (loaded first: importing it later would shadow the decorator)
from fusegrad.engine.jit import TinyJit, function
from fusegrad import nn
from fusegrad import native as _native
_native.install()  # the C versions of the eager hot paths, where they can be built

__all__ = ["Tensor", "dtypes", "Device", "Context", "GlobalCounters", "Variable", "TinyJit", "function", "nn", "fetch", "getenv", "UOp"]
