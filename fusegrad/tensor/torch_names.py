"""PyTorch's other spellings of existing ops (aliases such as multiply, greater, ravel), its in-place _-suffixed methods
(add_, mul_, zero_, fill_, ...), new_* constructors, is_* queries and strides, and the BLAS-style fused ops (mm, bmm,
addmm, addcmul, ...).

Every op here is composed from the other mixins' ops, so autograd and every dtype come with them. An in-place method
computes the out-of-place result and writes it into the tensor's data with assign(), as `x += y` does (elementwise.py's
_inplace): views of the tensor see the write, the tensor keeps its dtype (a result of a higher kind, int -> float,
raises as in torch), and a leaf that requires grad raises outside Tensor.inference_mode().

Tensor inherits TorchNamesMixin."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Sequence
from fusegrad.dtype import DType, dtypes, least_upper_dtype, to_dtype
from fusegrad.uop.ops import GroupOp, Ops, UOp, broadcast_shape
from fusegrad.tensor.common import TensorMixin, is_tensor, _norm_axis

if TYPE_CHECKING:
  from fusegrad.tensor.tensor import Tensor

# ---------------- strides: what torch's tensor made by the same ops would report
def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
  """Row-major strides; a 0-size dim counts as 1, as torch's."""
  out, step = [], 1
  for s in reversed(shape):
    out.append(step)
    step *= max(s, 1)
  return tuple(reversed(out))

def _reshape_strides(shape: Sequence[int], strides: Sequence[int], new: Sequence[int]) -> list[int] | None:
  """Strides that view the elements of (shape, strides) as `new` (the same elements in row-major order), or None where
  no strides can (torch's reshape copies there). Dims that the reshape leaves alone keep their strides (a size-1 dim's
  too, as torch's slicing keeps it); the others are joined into runs that one stride walks (size-1 dims dropped), and
  the new dims, from the last, must cover those runs exactly."""
  if 0 in shape: return list(_contiguous_strides(new))
  if [n for n in shape if n != 1] == [n for n in new if n != 1]:  # a squeeze or unsqueeze: the other dims keep their strides
    out, i = [], 0
    for n in new:
      while i < len(shape) and shape[i] == 1 and n != 1: i += 1  # a dropped size-1 dim
      if i < len(shape) and shape[i] == n: out.append(strides[i]); i += 1
      else: out.append(shape[i] * strides[i] if i < len(shape) else 1)  # a new size-1 dim: as torch's unsqueeze
    return out
  pre = next((i for i, (a, b) in enumerate(zip(shape, new)) if a != b), min(len(shape), len(new)))
  post = 0
  while post < min(len(shape), len(new)) - pre and shape[-1 - post] == new[-1 - post]: post += 1
  mid_old, mid_st, mid_new = shape[pre:len(shape) - post], strides[pre:len(shape) - post], new[pre:len(new) - post]
  runs: list[tuple[int, int]] = []  # (elements, stride of the innermost dim) of each run
  for n, s in zip(mid_old, mid_st):
    if n == 1: continue
    if runs and runs[-1][1] == n * s: runs[-1] = (runs[-1][0] * n, s)
    else: runs.append((n, s))
  mid, i = [0] * len(mid_new), len(mid_new) - 1
  for size, inner in reversed(runs or [(1, 1)]):
    covered = 1
    while i >= 0 and (covered < size or mid_new[i] == 1):  # a size-1 dim joins the run it sits in (any stride would do)
      mid[i] = covered * inner
      covered *= mid_new[i]
      i -= 1
    if covered != size: return None
  return list(strides[:pre]) + mid + list(strides[len(shape) - post:]) if i < 0 else None

def _layout(u: UOp) -> tuple[tuple[int, ...], int]:
  """(strides, storage offset) that torch's tensor made by the same ops would have: the chain of movement ops from the
  data (a buffer, or a computed value that would have one) replayed on strides. Where torch's op copies (a flip, a pad,
  a reshape no strides can express) the layout starts again, contiguous. A stepped slice, which fusegrad builds as a pad
  to a multiple of the step, a reshape and a shrink, keeps its strides: the pad only moves the offset there."""
  chain = [u]
  while chain[-1].op in GroupOp.Movement or chain[-1].op is Ops.DETACH: chain.append(chain[-1].src[0])
  # a lazy constant (zeros, ones, full) is a broadcast number: fusegrad holds no data for it, torch a fresh tensor
  if chain[-1].op is Ops.CONST: return _contiguous_strides(u.shape), 0
  ops = chain[::-1]
  shape, strides, offset = ops[0].shape, _contiguous_strides(ops[0].shape), 0
  for i, v in enumerate(ops[1:], 1):
    fresh = (_contiguous_strides(v.shape), 0)
    if v.op is Ops.RESHAPE:
      strides, offset = (tuple(st), offset) if (st := _reshape_strides(shape, strides, v.shape)) is not None else fresh
    elif v.op is Ops.PERMUTE: strides = tuple(strides[j] for j in v.arg)
    elif v.op is Ops.SHRINK: offset += sum(b * s for (b, _), s in zip(v.arg, strides))
    elif v.op is Ops.EXPAND: strides = tuple(0 if n != o else s for n, o, s in zip(v.shape, shape, strides))
    elif v.op is Ops.PAD and [w.op for w in ops[i + 1:i + 3]] == [Ops.RESHAPE, Ops.SHRINK]: offset -= sum(b * s for (b, _), s in zip(v.arg, strides))
    elif v.op is not Ops.DETACH: strides, offset = fresh  # FLIP, PAD, WINDOW: torch's result is a copy
    shape = v.shape
  return strides, offset

# ---------------- the fused BLAS-style ops
def _check_same_dtype(name: str, *ts: Tensor) -> DType:
  """torch's matrix products take one dtype (no promotion) and no bool."""
  if len({t.dtype for t in ts}) != 1: raise RuntimeError(f"{name}: input tensors must have the same dtype, got {', '.join(str(t.dtype) for t in ts)}")
  if ts[0].dtype == dtypes.bool: raise NotImplementedError(f"{name}: not implemented for bool tensors (torch neither)")
  return ts[0].dtype

def _check_dims(name: str, **ts: tuple[Tensor, int]) -> None:
  """Each argument a tensor of its number of dims: torch's matrix products do not broadcast."""
  for n, (t, nd) in ts.items():
    if not is_tensor(t): raise TypeError(f"{name}(): argument '{n}' must be a Tensor, not {type(t).__name__}")
    if t.ndim != nd: raise RuntimeError(f"{name}: {n} must be a {nd}-D tensor, got shape {t.shape}")

def _scalars(name: str, dtype: DType, beta, alpha, blas: bool) -> tuple:
  """beta and alpha as torch takes them for a dtype: ints for an integer result (the BLAS-backed ops truncate a float
  one, addr refuses it), bools for a bool one (and, or)."""
  if dtypes.is_float(dtype): return beta, alpha
  if dtype == dtypes.bool: return bool(beta), bool(alpha)
  if not blas and (isinstance(beta, float) or isinstance(alpha, float)):
    raise RuntimeError(f"{name}: for integral input tensors, beta and alpha must not be floating point numbers")
  return int(beta), int(alpha)

def _zero_of(x: Tensor) -> Tensor | None:
  """A zero the shape of x whose graph keeps x (a zero gradient, as torch's beta=0 gives) and whose value ignores NaN
  and inf in x; None for non-float x (no gradient to keep)."""
  return x.isfinite().where(x, 0) * 0 if dtypes.is_float(x.dtype) else None

def _fused(name: str, inp: Tensor, product: Tensor, beta, alpha, alpha_zero_skips: bool = False) -> Tensor:
  """beta * inp + alpha * product, inp expanded to product's shape (not the other way, as torch). beta == 0 ignores
  inp (NaN and inf in it do not propagate), and alpha == 0 the product where torch's BLAS path skips it."""
  if not is_tensor(inp): raise TypeError(f"{name}(): self must be a Tensor")
  base = inp.expand(product.shape)
  out = product if alpha == 1 else product * alpha
  if alpha == 0 and alpha_zero_skips: out = z if (z := _zero_of(product)) is not None else out
  if beta == 0: return out if (z := _zero_of(base)) is None else out + z
  return out + (base if beta == 1 else base * beta)

# ---------------- in-place methods made from the out-of-place ones
def _named(fn, name: str, call: str):
  fn.__name__ = name
  fn.__qualname__ = f"TorchNamesMixin.{name}"
  fn.__doc__ = f"In place (torch): writes x.{call} into x, which every view of x sees, and returns x."
  return fn

def _unary_(op: str):
  def method(self: Tensor) -> Tensor: return self._write_result(getattr(self, op)())
  return _named(method, op + "_", f"{op}()")

def _binary_(op: str):
  def method(self: Tensor, other) -> Tensor: return self._write_result(getattr(self, op)(other))
  return _named(method, op + "_", f"{op}(other)")

def _shaped_(op: str):
  """torch's in-place shape ops (t_, squeeze_, ...): the tensor itself becomes the view (its node is rebound), so
  writes to it still land in the data it viewed, and views taken before keep seeing that data."""
  def method(self: Tensor, *args, **kwargs) -> Tensor:
    self._check_leaf_write()
    if self.uop.op is Ops.ASSIGN: self.realize()  # a pending in-place write runs first: the view is taken of its result
    self.uop = getattr(self, op)(*args, **kwargs).uop
    return self
  return _named(method, op + "_", f"{op}(...)")

_LEAF_MSG = "a leaf tensor that requires grad cannot be modified in place; use `with Tensor.inference_mode():` (or assign())"

class TorchNamesMixin(TensorMixin):
  # ---------------- aliases (torch's other spellings of existing ops)
  def absolute(self: Tensor) -> Tensor: return self.abs()
  def negative(self: Tensor) -> Tensor: return self.neg()
  def positive(self: Tensor) -> Tensor:
    """self itself (torch's unary +); a bool tensor raises, as in torch."""
    if self.dtype == dtypes.bool: raise RuntimeError("positive(): the `+` operator on a bool tensor is not supported")
    return self
  def multiply(self: Tensor, other) -> Tensor: return self.mul(other)
  def divide(self: Tensor, other, *, rounding_mode: str | None = None) -> Tensor: return self.div(other, rounding_mode=rounding_mode)
  def subtract(self: Tensor, other, *, alpha=1) -> Tensor: return self.sub(other, alpha=None if alpha == 1 else alpha)
  def greater(self: Tensor, other) -> Tensor: return self > other
  def greater_equal(self: Tensor, other) -> Tensor: return self >= other
  def less(self: Tensor, other) -> Tensor: return self < other
  def less_equal(self: Tensor, other) -> Tensor: return self <= other
  def not_equal(self: Tensor, other) -> Tensor: return self != other
  def ravel(self: Tensor) -> Tensor: return self.reshape(-1)
  def reshape_as(self: Tensor, other: Tensor) -> Tensor: return self.reshape(other.shape)
  def type_as(self: Tensor, other: Tensor) -> Tensor: return self.cast(other.dtype)
  def nelement(self: Tensor) -> int: return self.numel()
  def ndimension(self: Tensor) -> int: return self.ndim
  def fix(self: Tensor) -> Tensor: return self.trunc()
  def sgn(self: Tensor) -> Tensor: return self.sign()  # (torch's sgn differs from sign for complex numbers only)
  def deg2rad(self: Tensor) -> Tensor: return self._float() * (math.pi / 180)
  def rad2deg(self: Tensor) -> Tensor: return self._float() * (180 / math.pi)
  def split_with_sizes(self: Tensor, split_sizes: Sequence[int], dim: int = 0) -> list[Tensor]:
    if not isinstance(split_sizes, (list, tuple)):
      raise TypeError(f"split_with_sizes(): split_sizes must be a list or tuple of ints, not {type(split_sizes).__name__}")
    return self.split(list(split_sizes), dim)
  def dsplit(self: Tensor, sections) -> list[Tensor]:
    """torch's: along dim 2 of a tensor of 3 or more dims; an int must split it evenly."""
    if self.ndim < 3: raise RuntimeError(f"dsplit(): needs a tensor of at least 3 dims, got {self.shape}")
    return self._split_evenly(sections, 2, "dsplit")
  def sum_to_size(self: Tensor, *size) -> Tensor:
    """Sum self down to `size`, which must expand to self's shape (the gradient of a broadcast, as torch's)."""
    if not size: raise TypeError("sum_to_size() missing the size")
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    lead = self.ndim - len(size)
    if lead < 0 or any(s != n and s != 1 for s, n in zip(size, self.shape[lead:])):
      raise RuntimeError(f"sum_to_size(): size {list(size)} is not expandable to size {list(self.shape)}")
    if size == self.shape: return self
    axes = tuple(range(lead)) + tuple(lead + i for i, (s, n) in enumerate(zip(size, self.shape[lead:])) if s == 1 and n != 1)
    return self.sum(axes, keepdim=True).reshape(size) if axes else self.reshape(size)
  def equal(self: Tensor, other: Tensor) -> bool:
    """True when other has self's shape and every element equals (after type promotion; NaN equals nothing), as
    torch.equal: a Python bool (realizes)."""
    if not is_tensor(other): raise TypeError(f"equal(): argument 'other' must be a Tensor, not {type(other).__name__}")
    return self.shape == other.shape and bool((self == other).all().item())
  def is_same_size(self: Tensor, other: Tensor) -> bool: return self.shape == other.shape
  def is_nonzero(self: Tensor) -> bool:
    """The one element's truth (realizes); no element or more than one raise, as torch."""
    if self.numel() == 0: raise RuntimeError("is_nonzero(): Boolean value of Tensor with no values is ambiguous")
    if self.numel() > 1: raise RuntimeError("is_nonzero(): Boolean value of Tensor with more than one value is ambiguous")
    return bool(self.item())

  # ---------------- properties and queries
  def is_contiguous(self: Tensor, memory_format=None) -> bool:
    """Whether torch's tensor made by the same ops would be contiguous (row-major, no gaps; see stride()): a buffer, a
    computed value and their reshapes, x[1:] and x[0] are; transposes, expands, x[:, 1:] and x[::2] are not."""
    if 0 in self.shape: return True
    step = 1
    for n, s in zip(reversed(self.shape), reversed(_layout(self.uop)[0])):
      if n != 1 and s != step: return False
      step *= n
    return True
  def stride(self: Tensor, dim: int | None = None):
    """The strides (in elements) torch's tensor made by the same ops would have: the data's row-major strides replayed
    through the view ops (slices, steps, transposes, expands, reshapes). fusegrad's flip and pad are views too, but
    torch's copy: there (and for a reshape no strides express) the strides start again, contiguous. A lazy constant
    (zeros, ones, full) counts as a fresh tensor."""
    st = _layout(self.uop)[0]
    return st if dim is None else st[_norm_axis(dim, self.ndim)]
  def storage_offset(self: Tensor) -> int:
    """Elements from the start of the data to the first one of this view (x[1:] of a (3, 4) tensor: 4), as stride()
    follows the view ops."""
    return _layout(self.uop)[1]
  def is_signed(self: Tensor) -> bool: return dtypes.is_float(self.dtype) or (dtypes.is_int(self.dtype) and not dtypes.is_unsigned(self.dtype))
  def is_complex(self: Tensor) -> bool: return False  # fusegrad has no complex dtypes
  @property
  def is_cpu(self: Tensor) -> bool: return self.device.split(":")[0] in ("CPU", "PYTHON")  # (PYTHON: the interpreted CPU device)
  @property
  def is_cuda(self: Tensor) -> bool: return self.device.split(":")[0] == "CUDA"
  @property
  def itemsize(self: Tensor) -> int: return self.dtype.itemsize

  # ---------------- new_* (self's dtype and device unless given)
  def _new_like(self: Tensor, dtype, device) -> dict:
    return {"dtype": to_dtype(dtype) if dtype is not None else self.dtype, "device": device if device is not None else self.device}
  def new_full(self: Tensor, size: Sequence[int], fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if not isinstance(size, (tuple, list)): raise TypeError(f"new_full(): size must be a tuple of ints, not {type(size).__name__}")
    return type(self).full(tuple(size), fill_value, **self._new_like(dtype, device), requires_grad=requires_grad)
  def new_zeros(self: Tensor, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return self.new_full(type(self)._shape_arg(size), 0, dtype=dtype, device=device, requires_grad=requires_grad)
  def new_ones(self: Tensor, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return self.new_full(type(self)._shape_arg(size), 1, dtype=dtype, device=device, requires_grad=requires_grad)
  def new_empty(self: Tensor, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return type(self).empty(type(self)._shape_arg(size), **self._new_like(dtype, device), requires_grad=requires_grad)
  def new_tensor(self: Tensor, data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of data (a tensor's values are copied and detached, as torch)."""
    kw = self._new_like(dtype, device)
    if is_tensor(data): return type(self)(data.detach().cast(kw["dtype"]).to(kw["device"]).clone(), requires_grad=requires_grad)
    return type(self)(data, **kw, requires_grad=requires_grad)

  # ---------------- BLAS-style fused ops (torch's shape and dtype checks; beta=0 ignores self)
  def mm(self: Tensor, mat2: Tensor) -> Tensor:
    _check_dims("mm", self=(self, 2), mat2=(mat2, 2))
    _check_same_dtype("mm", self, mat2)
    if self.shape[1] != mat2.shape[0]:
      raise RuntimeError(f"mm: mat1 and mat2 shapes cannot be multiplied ({self.shape[0]}x{self.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    return self.matmul(mat2)
  def bmm(self: Tensor, mat2: Tensor) -> Tensor:
    _check_dims("bmm", batch1=(self, 3), batch2=(mat2, 3))
    _check_same_dtype("bmm", self, mat2)
    if mat2.shape[:2] != (self.shape[0], self.shape[2]):
      raise RuntimeError(f"bmm: expected size for first two dimensions of batch2 tensor to be: {[self.shape[0], self.shape[2]]} "
                         f"but got: {list(mat2.shape[:2])}")
    return self.matmul(mat2)
  def mv(self: Tensor, vec: Tensor) -> Tensor:
    _check_dims("mv", self=(self, 2), vec=(vec, 1))
    _check_same_dtype("mv", self, vec)
    if self.shape[1] != vec.shape[0]: raise RuntimeError(f"mv: size mismatch, got mat ({self.shape[0]}x{self.shape[1]}), vec ({vec.shape[0]})")
    return self.matmul(vec)
  def addmm(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * self + alpha * (mat1 @ mat2); self must expand to the product's shape."""
    product = mat1.mm(mat2)
    beta, alpha = _scalars("addmm", _check_same_dtype("addmm", self, mat1, mat2), beta, alpha, True)
    return _fused("addmm", self, product, beta, alpha, alpha_zero_skips=True)
  def addmv(self: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * self + alpha * (mat @ vec)."""
    product = mat.mv(vec)
    beta, alpha = _scalars("addmv", _check_same_dtype("addmv", self, mat, vec), beta, alpha, True)
    return _fused("addmv", self, product, beta, alpha, alpha_zero_skips=True)
  def addr(self: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * self + alpha * outer(vec1, vec2); unlike the matrix products, the dtypes promote (as torch's)."""
    _check_dims("addr", vec1=(vec1, 1), vec2=(vec2, 1))
    beta, alpha = _scalars("addr", least_upper_dtype(self.dtype, vec1.dtype, vec2.dtype), beta, alpha, False)
    outer = vec1.reshape(-1, 1) * vec2.reshape(1, -1)
    return _fused("addr", self, outer.cast(least_upper_dtype(outer.dtype, self.dtype)), beta, alpha)
  def baddbmm(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * self + alpha * (batch1 @ batch2), batch by batch."""
    product = batch1.bmm(batch2)
    beta, alpha = _scalars("baddbmm", _check_same_dtype("baddbmm", self, batch1, batch2), beta, alpha, True)
    return _fused("baddbmm", self, product, beta, alpha)
  def addbmm(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * self + alpha * (the sum over the batch of batch1[i] @ batch2[i]): one product over batch and inner dim."""
    _check_dims("addbmm", batch1=(batch1, 3), batch2=(batch2, 3))
    dt = _check_same_dtype("addbmm", self, batch1, batch2)
    (b, n, k), (b2, k2, p) = batch1.shape, batch2.shape
    if b != b2: raise RuntimeError(f"addbmm: batch1 and batch2 must have same number of batches, got {b} and {b2}")
    if k != k2: raise RuntimeError(f"addbmm: incompatible matrix sizes for bmm ({n}x{k} and {k2}x{p})")
    beta, alpha = _scalars("addbmm", dt, beta, alpha, True)
    product = batch1.permute(1, 0, 2).reshape(n, b * k).matmul(batch2.reshape(b * k, p))
    return _fused("addbmm", self, product, beta, alpha, alpha_zero_skips=True)
  def addcmul(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """self + value * tensor1 * tensor2, all three broadcast together in their promoted dtype (an integer one
    truncates a float value, as torch)."""
    s, a, b = self._addc_operands("addcmul", tensor1, tensor2)
    value = value if dtypes.is_float(s.dtype) else int(value)
    return s + (a * b if value == 1 else value * a * b)
  def addcdiv(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """self + value * tensor1 / tensor2 (true division; two integer tensors raise, as torch)."""
    if is_tensor(tensor1) and is_tensor(tensor2) and not dtypes.is_float(tensor1.dtype) and not dtypes.is_float(tensor2.dtype):
      raise RuntimeError("addcdiv: integer division with addcdiv is not supported (torch neither); cast tensor1 or tensor2 to a float dtype")
    s, a, b = self._addc_operands("addcdiv", tensor1, tensor2)
    return s + (a / b if value == 1 else value * (a / b))
  def _addc_operands(self: Tensor, name: str, tensor1, tensor2) -> tuple[Tensor, Tensor, Tensor]:
    for n, t in (("tensor1", tensor1), ("tensor2", tensor2)):
      if not is_tensor(t): raise TypeError(f"{name}(): argument '{n}' must be a Tensor, not {type(t).__name__}")
    dt = least_upper_dtype(self.dtype, tensor1.dtype, tensor2.dtype)
    if dt == dtypes.bool: raise NotImplementedError(f"{name}: not implemented for bool tensors (torch neither)")
    return self.cast(dt), tensor1.cast(dt), tensor2.cast(dt)

  # ---------------- in place: the writes
  def _check_leaf_write(self: Tensor) -> None:
    if self._requires_grad and not type(self).no_grad: raise RuntimeError(_LEAF_MSG)  # (the tensor's own flag: a leaf's)
  def _write_result(self: Tensor, value: Tensor, cast: bool = False) -> Tensor:
    """Write value, computed from self by the out-of-place op, into self (as `x += y`): it must have self's shape
    (no broadcasting self up) and, unless `cast` (copy_, fill_ ... convert any dtype), a kind self's dtype holds."""
    if value.shape != self.shape:
      raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(value.shape)}")
    return self._inplace(value.cast(self.dtype) if cast else value)
  def zero_(self: Tensor) -> Tensor: return self.fill_(0)
  def fill_(self: Tensor, value) -> Tensor:
    """Every element set to value: a number or a 0-d tensor, converted to self's dtype (a float into an int
    truncates, as torch)."""
    if is_tensor(value):
      if value.ndim: raise RuntimeError(f"fill_ only supports a 0-dim value tensor, got one with {value.ndim} dims")
      return self._write_result(value.to(self.device).cast(self.dtype).expand(self.shape), cast=True)
    return self._write_result(self.full_like(value), cast=True)
  def copy_(self: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    """src's values (broadcast to self's shape, converted to self's dtype and device) written into self."""
    if not is_tensor(src): raise TypeError(f"copy_(): argument 'src' must be a Tensor, not {type(src).__name__}")
    if (shape := broadcast_shape(self.shape, src.shape)) != self.shape:
      raise RuntimeError(f"copy_: output with shape {list(self.shape)} doesn't match the broadcast shape {list(shape)}")
    return self._write_result(src.to(self.device).cast(self.dtype).expand(self.shape), cast=True)
  def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, **kwargs) -> Tensor:
    """Uniform random values in [a, b) (torch's keywords from= and to= work too)."""
    a, b = kwargs.pop("from", a), kwargs.pop("to", b)
    if kwargs: raise TypeError(f"uniform_() got unexpected keyword arguments {sorted(kwargs)}")
    self._check_random("uniform_")
    if a > b: raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
    return self._write_result(type(self).uniform(*self.shape, low=a, high=b, dtype=self.dtype, device=self.device))
  def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    self._check_random("normal_")
    if std < 0: raise RuntimeError(f"normal_ expects std >= 0.0, but found std {std}")
    return self._write_result(type(self).normal(*self.shape, mean=mean, std=std, dtype=self.dtype, device=self.device))
  def _check_random(self: Tensor, name: str) -> None:
    if not dtypes.is_float(self.dtype): raise NotImplementedError(f"{name}: not implemented for {self.dtype} tensors (floats only, as torch)")
  def bernoulli_(self: Tensor, p=0.5) -> Tensor:
    """0 or 1 in each element (self's dtype, any), 1 with probability p: a number or a tensor that broadcasts to self."""
    if is_tensor(p): p = p.to(self.device).expand(self.shape)
    elif not 0 <= p <= 1: raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    return self._write_result(type(self).rand(*self.shape, device=self.device) < p, cast=True)
  def detach_(self: Tensor) -> Tensor:
    """self cut from the graph it was computed in: a leaf that requires no grad, as torch's."""
    if not self.is_leaf: self.uop = self.detach().uop
    self.requires_grad = False
    return self

  # arithmetic with torch's keywords (their out-of-place forms have positional extras: reverse, tinygrad's min_/max_)
  def add_(self: Tensor, other, *, alpha=1) -> Tensor: return self._write_result(self.add(other, alpha=None if alpha == 1 else alpha))
  def sub_(self: Tensor, other, *, alpha=1) -> Tensor: return self._write_result(self.subtract(other, alpha=alpha))
  def subtract_(self: Tensor, other, *, alpha=1) -> Tensor: return self._write_result(self.subtract(other, alpha=alpha))
  def div_(self: Tensor, other, *, rounding_mode: str | None = None) -> Tensor: return self.divide_(other, rounding_mode=rounding_mode)
  def divide_(self: Tensor, other, *, rounding_mode: str | None = None) -> Tensor:
    return self._write_result(self.divide(other, rounding_mode=rounding_mode))
  def pow_(self: Tensor, exponent) -> Tensor: return self._write_result(self.pow(exponent))
  def clamp_(self: Tensor, min=None, max=None) -> Tensor: return self._write_result(self.clamp(min, max))
  def clip_(self: Tensor, min=None, max=None) -> Tensor: return self._write_result(self.clamp(min, max))
  def clamp_min_(self: Tensor, min) -> Tensor: return self._write_result(self.clamp_min(min))
  def clamp_max_(self: Tensor, max) -> Tensor: return self._write_result(self.clamp_max(max))
  def round_(self: Tensor, *, decimals: int = 0) -> Tensor: return self._write_result(self.round(decimals))
  def lerp_(self: Tensor, end, weight) -> Tensor: return self._write_result(self.lerp(end, weight))
  def addcmul_(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    return self._write_result(self.addcmul(tensor1, tensor2, value=value))
  def addcdiv_(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    return self._write_result(self.addcdiv(tensor1, tensor2, value=value))
  def addmm_(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    return self._write_result(self.addmm(mat1, mat2, beta=beta, alpha=alpha))
  def addmv_(self: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    return self._write_result(self.addmv(mat, vec, beta=beta, alpha=alpha))
  def addr_(self: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    return self._write_result(self.addr(vec1, vec2, beta=beta, alpha=alpha))
  def baddbmm_(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    return self._write_result(self.baddbmm(batch1, batch2, beta=beta, alpha=alpha))
  def addbmm_(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    return self._write_result(self.addbmm(batch1, batch2, beta=beta, alpha=alpha))
  # indexing, scans and triangles
  def masked_fill_(self: Tensor, mask: Tensor, value) -> Tensor: return self._write_result(self.masked_fill(mask, value))
  def index_fill_(self: Tensor, dim: int, index: Tensor, value) -> Tensor: return self._write_result(self.index_fill(dim, index, value))
  def index_add_(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    return self._write_result(self.index_add(dim, index, source, alpha))
  def scatter_(self: Tensor, dim: int, index: Tensor, src=None, value=None, *, reduce: str | None = None) -> Tensor:
    return self._write_result(self.scatter(dim, index, src, value, reduce=reduce))
  def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor: return self._write_result(self.scatter_add(dim, index, src))
  def scatter_reduce_(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True) -> Tensor:
    return self._write_result(self.scatter_reduce(dim, index, src, reduce, include_self=include_self))
  def cumsum_(self: Tensor, dim: int, dtype=None) -> Tensor: return self._write_result(self.cumsum(dim, dtype))
  def cumprod_(self: Tensor, dim: int, dtype=None) -> Tensor: return self._write_result(self.cumprod(dim, dtype))
  def tril_(self: Tensor, diagonal: int = 0) -> Tensor: return self._write_result(self.tril(diagonal))
  def triu_(self: Tensor, diagonal: int = 0) -> Tensor: return self._write_result(self.triu(diagonal))
  def nan_to_num_(self: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    return self._write_result(self.nan_to_num(nan, posinf, neginf))
  # one argument: x.op_(other) is x.op(other) written into x
  mul_, multiply_, true_divide_, floor_divide_ = _binary_("mul"), _binary_("multiply"), _binary_("true_divide"), _binary_("floor_divide")
  fmod_, remainder_, copysign_ = _binary_("fmod"), _binary_("remainder"), _binary_("copysign")
  atan2_, arctan2_ = _binary_("atan2"), _binary_("arctan2")
  eq_, ne_, lt_, le_, gt_, ge_ = _binary_("eq"), _binary_("ne"), _binary_("lt"), _binary_("le"), _binary_("gt"), _binary_("ge")
  greater_, greater_equal_, less_, less_equal_ = _binary_("greater"), _binary_("greater_equal"), _binary_("less"), _binary_("less_equal")
  not_equal_ = _binary_("not_equal")
  logical_and_, logical_or_, logical_xor_ = _binary_("logical_and"), _binary_("logical_or"), _binary_("logical_xor")
  bitwise_and_, bitwise_or_, bitwise_xor_ = _binary_("bitwise_and"), _binary_("bitwise_or"), _binary_("bitwise_xor")
  bitwise_left_shift_, bitwise_right_shift_ = _binary_("bitwise_left_shift"), _binary_("bitwise_right_shift")
  # no argument: x.op_() is x.op() written into x
  abs_, absolute_, neg_, negative_ = _unary_("abs"), _unary_("absolute"), _unary_("neg"), _unary_("negative")
  sign_, sgn_ = _unary_("sign"), _unary_("sgn")
  floor_, ceil_, trunc_, fix_, frac_ = _unary_("floor"), _unary_("ceil"), _unary_("trunc"), _unary_("fix"), _unary_("frac")
  relu_, sigmoid_, tanh_, square_, reciprocal_ = _unary_("relu"), _unary_("sigmoid"), _unary_("tanh"), _unary_("square"), _unary_("reciprocal")
  exp_, exp2_, expm1_, sqrt_, rsqrt_ = _unary_("exp"), _unary_("exp2"), _unary_("expm1"), _unary_("sqrt"), _unary_("rsqrt")
  log_, log2_, log10_, log1p_, erf_ = _unary_("log"), _unary_("log2"), _unary_("log10"), _unary_("log1p"), _unary_("erf")
  sin_, cos_, tan_, sinh_, cosh_ = _unary_("sin"), _unary_("cos"), _unary_("tan"), _unary_("sinh"), _unary_("cosh")
  asin_, acos_, atan_ = _unary_("asin"), _unary_("acos"), _unary_("atan")
  asinh_, acosh_, atanh_ = _unary_("asinh"), _unary_("acosh"), _unary_("atanh")
  arcsin_, arccos_, arctan_ = _unary_("arcsin"), _unary_("arccos"), _unary_("arctan")
  arcsinh_, arccosh_, arctanh_ = _unary_("arcsinh"), _unary_("arccosh"), _unary_("arctanh")
  deg2rad_, rad2deg_ = _unary_("deg2rad"), _unary_("rad2deg")
  logical_not_, bitwise_not_ = _unary_("logical_not"), _unary_("bitwise_not")
  # special functions (special.py)
  erfc_, erfinv_, lgamma_, digamma_, i0_ = _unary_("erfc"), _unary_("erfinv"), _unary_("lgamma"), _unary_("digamma"), _unary_("i0")
  sinc_, xlogy_, hypot_, heaviside_ = _unary_("sinc"), _binary_("xlogy"), _binary_("hypot"), _binary_("heaviside")
  float_power_, ldexp_, nextafter_ = _binary_("float_power"), _binary_("ldexp"), _binary_("nextafter")
  gcd_, lcm_ = _binary_("gcd"), _binary_("lcm")
  def logit_(self: Tensor, eps: float | None = None) -> Tensor:
    """In place: logit(eps)."""
    return self._write_result(self.logit(eps))
  def polygamma_(self: Tensor, n: int) -> Tensor:
    """In place: polygamma(n)."""
    return self._write_result(self.polygamma(n))
  def mvlgamma_(self: Tensor, p: int) -> Tensor:
    """In place: mvlgamma(p)."""
    return self._write_result(self.mvlgamma(p))
  # shape ops: the tensor becomes the view (see _shaped_)
  squeeze_, unsqueeze_, t_ = _shaped_("squeeze"), _shaped_("unsqueeze"), _shaped_("t")
  transpose_, swapaxes_, swapdims_ = _shaped_("transpose"), _shaped_("swapaxes"), _shaped_("swapdims")
