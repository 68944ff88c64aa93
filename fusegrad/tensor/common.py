"""What the Tensor modules share: argument checks (dims, shapes, element counts, Python numbers' dtypes), PyTorch's
dtype promotion between tensors, which buffers have views, and the per-dim helpers the PyTorch-level ops build on.

Functions here never name the Tensor class: one that makes a tensor is given one (`like`) and uses its class."""
from __future__ import annotations
import weakref
from typing import TYPE_CHECKING, Any, TypeGuard
from fusegrad.dtype import DType, dtypes, least_upper_dtype, category
from fusegrad.helpers import prod
from fusegrad.uop.ops import Ops, UOp

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

IDX = dtypes.int32  # dtype of index results

class TensorMixin:
  """The root of the mixins Tensor inherits (creation.py, movement.py ...): `is_tensor` asks for it, so a mixin can tell
  a Tensor without importing tensor.py, which imports the mixins."""

def is_tensor(x: Any) -> TypeGuard[Tensor]: return isinstance(x, TensorMixin)

# ---------------- argument checks
def _checked_dtype(values: list, dtype: DType | None) -> DType:
  """The dtype for Python numbers: given, or inferred as torch does (ints that need it widen to int64). An int that
  does not fit an integer dtype raises instead of wrapping silently (negative ints into unsigned dtypes wrap, as torch)."""
  ints = [v for v in values if type(v) is int]
  if dtype is None:
    dtype = dtypes.from_py(values)
    if dtype == dtypes.default_int and ints and not all(dtypes.min(dtype) <= v <= dtypes.max(dtype) for v in ints): dtype = dtypes.int64
  if dtypes.is_int(dtype) and ints:
    lo, hi = (-dtypes.max(dtype) - 1 if dtypes.is_unsigned(dtype) else dtypes.min(dtype)), dtypes.max(dtype)
    if bad := next((v for v in ints if not lo <= v <= hi), None):
      raise RuntimeError(f"value {bad} cannot be converted to type {dtype} without overflow" if dtype != dtypes.int64 or abs(bad) < 2**64 else
                         f"value {bad} does not fit any integer dtype (the widest is int64)")
  return dtype

def _check_numel(shape: tuple[int, ...]) -> tuple[int, ...]:
  """Kernels index with 64-bit integers: a larger tensor would wrap around and give wrong answers, so it is refused."""
  if prod(shape) >= 2**63: raise RuntimeError(f"shape {shape} has {prod(shape)} elements, more than 64-bit indexing can address (2**63 - 1)")
  return shape

def _norm_axis(axis: int, ndim: int, name: str = "dim") -> int:
  if not isinstance(axis, int) or isinstance(axis, bool): raise TypeError(f"{name} must be an int, got {type(axis).__name__}")
  lo, hi = (-ndim, ndim - 1) if ndim else (-1, 0)
  if not lo <= axis <= hi: raise IndexError(f"{name} {axis} is out of range for a tensor with {ndim} dimension(s) (expected in [{lo}, {hi}])")
  return axis % max(ndim, 1)
_norm = _norm_axis

def _pick(axis, dim, name: str = "dim"):
  """Methods take tinygrad's `axis` and PyTorch's `dim` keyword; at most one may be given."""
  if dim is not None and axis is not None and axis != dim: raise TypeError(f"got both axis={axis} and {name}={dim}")
  return dim if dim is not None else axis

def promote_types(x: Tensor, y: Tensor) -> DType:
  """PyTorch's rule: a 0-d tensor only raises the result's category (int -> float), like a Python scalar does, but
  with its own dtype; between tensors of the same kind of rank the usual lattice applies."""
  if (x.ndim == 0) != (y.ndim == 0):
    dim, zero = (y, x) if x.ndim == 0 else (x, y)
    return zero.dtype if category(zero.dtype) > category(dim.dtype) else dim.dtype
  return least_upper_dtype(x.dtype, y.dtype)

# ---------------- views
# buffers some view was taken of (a slice, reshape, detach ...): only an assign to one of these must look for views to update
_viewed_buffers: "weakref.WeakSet[UOp]" = weakref.WeakSet()

def _note_view(u: UOp) -> None:
  if u.op is Ops.BUFFER: _viewed_buffers.add(u)
  elif u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER: _viewed_buffers.add(u.src[0])

# ---------------- per-dim helpers
def _arange(n: int, like: Tensor, dtype: DType = IDX) -> Tensor:
  """0 .. n-1 on like's device (and of like's class)."""
  return type(like).arange(n, device=like.device, dtype=dtype)

def _to_last(x: Tensor, d: int) -> Tensor:
  return x if d == x.ndim - 1 else x.permute(tuple(i for i in range(x.ndim) if i != d) + (d,))

def _from_last(x: Tensor, d: int) -> Tensor:
  if d == x.ndim - 1: return x
  order = list(range(x.ndim - 1))
  order.insert(d, x.ndim - 1)
  return x.permute(order)

def _shrink_dim(x: Tensor, d: int, b: int, e: int) -> Tensor:
  return x.shrink(tuple((b, e) if i == d else None for i in range(x.ndim)))

def _pad_dim(x: Tensor, d: int, b: int, a: int, value: Any = 0) -> Tensor:
  return x.pad(tuple((b, a) if i == d else (0, 0) for i in range(x.ndim)), value=value)
