"""What the Tensor modules share: argument checks (dims, shapes, element counts, Python numbers' dtypes, and PyTorch's
dtype promotion between tensors: those UOp's builders use too come from uop/ops.py), which buffers have views, and the
per-dim helpers the PyTorch-level ops build on.

Functions here never name the Tensor class: one that makes a tensor is given one (`like`) and uses its class."""
from __future__ import annotations
import weakref
from typing import TYPE_CHECKING, Any, TypeGuard
from fusegrad.device import canonicalize
from fusegrad.dtype import DType, dtypes
from fusegrad.uop.ops import Ops, UOp, check_numel, checked_dtype, norm_axis, promote_types  # noqa: F401  (promote_types: re-exported)

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

IDX = dtypes.int32  # dtype of index results

class TensorMixin:
  """The root of the mixins Tensor inherits (creation.py, movement.py ...): `is_tensor` asks for it, so a mixin can tell
  a Tensor without importing tensor.py, which imports the mixins."""

def is_tensor(x: Any) -> TypeGuard[Tensor]: return isinstance(x, TensorMixin)

def value_device(device: str) -> str:
  """Where a value for a tensor on `device` is made: a file (DISK) computes nothing, so on the default device."""
  return canonicalize(None) if device.startswith("DISK") else device

# ---------------- argument checks (the ones OpBuilder shares live in uop/ops.py, under the names used here)
_checked_dtype, _check_numel, _norm_axis = checked_dtype, check_numel, norm_axis
_norm = _norm_axis

def _pick(axis, dim, name: str = "dim"):
  """Methods take tinygrad's `axis` and PyTorch's `dim` keyword; at most one may be given."""
  if dim is not None and axis is not None and axis != dim: raise TypeError(f"got both axis={axis} and {name}={dim}")
  return dim if dim is not None else axis

# ---------------- views
# buffers some view was taken of (a slice, reshape, detach ...): only an assign to one of these must look for views to update
_viewed_buffers: "weakref.WeakSet[UOp]" = weakref.WeakSet()

def _held_buffer(u: UOp) -> UOp | None:
  """The BUFFER that u is, reshaped at most (what a realized tensor holds), or None."""
  if u.op is Ops.BUFFER: return u
  return u.src[0] if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER else None

def _note_view(u: UOp) -> None:
  if (b := _held_buffer(u)) is not None: _viewed_buffers.add(b)

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
