"""The lazy Tensor: every method builds UOps; nothing runs until realize/numpy/item/tolist."""
from __future__ import annotations
import itertools, math, pathlib, struct, sys, threading, weakref
from typing import Any, Callable, Sequence, cast  # noqa: F401  (tinygrad programs import typing.cast from here)
from fusegrad.dtype import DType, dtypes, least_upper_dtype, result_dtype, to_dtype, truncate, bf16_to_float, category
from fusegrad.device import Buffer, BufferView, canonicalize
from fusegrad.helpers import TensorError, argsort, flatten, prod, TRAINING
from fusegrad.uop.ops import GroupOp, Ops, UOp, Variable, broadcast_shape, sum_dtype, wide_dtype  # noqa: F401  (Variable: tinygrad programs import it from here)
from fusegrad import buffers
from fusegrad.schedule import create_schedule
from fusegrad.engine.realize import run_schedule
from fusegrad.engine import realize as _realize, rng
from fusegrad.tensor_nn import NNMixin
from fusegrad.tensor_ops import OpsMixin

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

def _shape_of(data: Any) -> tuple[int, ...]:
  if not isinstance(data, (list, tuple)): return ()
  if len(data) == 0: return (0,)
  inner = [_shape_of(x) for x in data]
  if any(s != inner[0] for s in inner): raise TensorError(f"ragged nested sequence: sub-shapes {sorted(set(inner))} differ; every row needs the same length")
  return (len(data),) + inner[0]

def _flat(data: Any) -> list:
  return [data] if not isinstance(data, (list, tuple)) else [y for x in data for y in _flat(x)]

def _pack(values: list, dtype: DType) -> bytes:
  if dtype == dtypes.bfloat16:
    from fusegrad.dtype import float_to_bf16
    return struct.pack(f"{len(values)}H", *[float_to_bf16(float(v)) for v in values])
  return struct.pack(f"{len(values)}{dtype.fmt}", *[truncate(dtype, v) for v in values])

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

def _numpy_dtype(d: DType):
  import numpy as np
  return np.dtype(d.fmt) if d != dtypes.bfloat16 else np.dtype(np.uint16)

# `with Tensor.train()` / `Tensor.inference_mode()` hold per thread (as torch's grad mode does), so two threads training
# side by side do not switch each other's mode; `Tensor.training = x` outside such a block sets it for every thread.
_thread_modes = threading.local()

class _TensorMeta(type):
  @property
  def training(cls) -> bool:
    mode = getattr(_thread_modes, "training", None)
    return bool(TRAINING.value) if mode is None else mode
  @training.setter
  def training(cls, v: bool):
    if getattr(_thread_modes, "training", None) is not None: _thread_modes.training = bool(v)
    else: TRAINING.value = int(bool(v))
  @property
  def no_grad(cls) -> bool:
    mode = getattr(_thread_modes, "no_grad", None)
    return cls._no_grad if mode is None else mode
  @no_grad.setter
  def no_grad(cls, v: bool):
    if getattr(_thread_modes, "no_grad", None) is not None: _thread_modes.no_grad = bool(v)
    else: cls._no_grad = bool(v)

class _ThreadMode:
  """A context manager (or decorator) that sets one of the per-thread modes inside."""
  name = ""
  def __init__(self, mode: bool = True): self.mode = mode
  def __enter__(self):
    self.prev = getattr(_thread_modes, self.name, None)
    setattr(_thread_modes, self.name, self.mode)
  def __exit__(self, *exc): setattr(_thread_modes, self.name, self.prev)
  def __call__(self, fn):
    def wrapper(*args, **kwargs):
      with type(self)(self.mode): return fn(*args, **kwargs)
    return wrapper

class _TrainMode(_ThreadMode):
  """`with Tensor.train():` (or `@Tensor.train()`) turns training mode on inside; `Tensor.test()` turns it off."""
  name = "training"

class _NoGrad(_ThreadMode):
  """`with Tensor.inference_mode():` or `@Tensor.inference_mode()`: backward() is refused inside."""
  name = "no_grad"

_realize_lock = threading.RLock()
_all_tensors: dict[int, "weakref.ref[Tensor]"] = {}
_pending_assigns: dict[int, "weakref.ref[Tensor]"] = {}

_device_nodes: dict[str | None, UOp] = {}
def _device_node(device: str | None) -> UOp:
  """UOp(Ops.DEVICE, arg=device), kept here for good (there are only a few devices): every constant needs one."""
  if (u := _device_nodes.get(device)) is None: u = _device_nodes[device] = UOp(Ops.DEVICE, arg=device)
  return u

def _live_tensors() -> list["Tensor"]: return [t for r in list(_all_tensors.values()) if (t := r()) is not None]
_leaf_ids = itertools.count()  # tensors given a new value by assign() and not yet realized

class Tensor(NNMixin, OpsMixin, metaclass=_TensorMeta):
  """A lazily evaluated n-dimensional array with PyTorch-style semantics."""
  _no_grad: bool = False
  train = staticmethod(lambda mode=True: _TrainMode(mode))
  test = staticmethod(lambda: _TrainMode(False))
  inference_mode = staticmethod(lambda mode=True: _NoGrad(mode))
  __array_priority__ = 1000  # numpy defers to our reflected operators

  def __init__(self, data: Any = None, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None):
    if type(data) is UOp and device is None and dtype is None and requires_grad is None:
      # every op wraps its result like this: nothing to convert, move or make a leaf of
      self.grad, self.requires_grad = None, None
      self.uop = data
      self._register()  # only once built: another thread may be walking the live tensors
      return
    device = canonicalize(device)
    dtype = to_dtype(dtype) if dtype is not None else None
    self.grad: Tensor | None = None
    self.requires_grad: bool | None = requires_grad
    if isinstance(data, UOp): self.uop = data
    elif isinstance(data, Tensor): self.uop = data.cast(dtype).to(device).uop if dtype else data.to(device).uop
    elif data is None: self.uop = Tensor.empty(0, device=device, dtype=dtype or dtypes.default_float).uop
    elif isinstance(data, (bool, int, float)): self.uop = Tensor._const(data, _checked_dtype([data], dtype), device, ())
    elif isinstance(data, (list, tuple)):
      shape = _shape_of(data)
      flat = _flat(data)
      for v in flat:
        if not isinstance(v, (bool, int, float)) and not hasattr(v, "item"):
          raise TypeError(f"Tensor() got an element of type {type(v).__name__}; expected numbers (or nested lists of them)")
      flat = [v.item() if hasattr(v, "item") else v for v in flat]
      dtype = _checked_dtype(flat, dtype) if flat else dtype or dtypes.default_float
      self.uop = Tensor._from_bytes(_pack(flat, dtype), dtype, device, shape)
    elif isinstance(data, (bytes, bytearray, memoryview)):
      self.uop = Tensor._from_bytes(bytes(data), dtypes.uint8, device, (len(data),))
      if dtype and dtype != dtypes.uint8: self.uop = self.cast(dtype).uop
    elif type(data).__module__ == "numpy" or hasattr(data, "__array_interface__"):
      import numpy as np
      arr = np.asarray(data)
      if arr.dtype == object: raise TypeError("Tensor() cannot take a numpy object array")
      src_dtype = to_dtype(arr.dtype.name)
      arr = np.ascontiguousarray(arr).reshape(arr.shape)  # ascontiguousarray makes 0-d arrays 1-d
      self.uop = Tensor._from_bytes(arr.tobytes(), src_dtype, device, arr.shape)
      if dtype and dtype != src_dtype: self.uop = self.cast(dtype).uop
    elif isinstance(data, pathlib.Path):  # tinygrad's spelling of a file's bytes: a uint8 tensor on the DISK device, read on use
      if not data.is_file(): raise FileNotFoundError(f"Tensor(Path): no file at {data}")
      buf, dtype = Buffer(f"DISK:{data.resolve()}", data.stat().st_size, dtypes.uint8).ensure_allocated(), dtype or dtypes.uint8
      if buf.size % dtype.itemsize: raise TensorError(f"Tensor(Path): {data} has {buf.size} bytes, not a whole number of {dtype} elements")
      view = BufferView(buf, 0, buf.size // dtype.itemsize, dtype) if dtype != dtypes.uint8 else buf
      self.uop = buffers.new_buffer_uop(buf.device, view.size, dtype, view)
    else: raise TypeError(f"Tensor() cannot be built from {type(data).__name__}")
    self._register()
    # a leaf that needs a gradient gets its own buffer: equal lazy constants are one node and would share a gradient
    if requires_grad and buffers.buffer_view(self.uop) is None: self.contiguous_leaf_()

  def _register(self) -> None:
    key = id(self)
    _all_tensors[key] = weakref.ref(self, lambda _: _all_tensors.pop(key, None))

  # ---------------- autograd
  def requires_grad_(self, requires_grad: bool = True) -> Tensor:
    self.requires_grad = requires_grad
    if requires_grad and buffers.buffer_view(self.uop) is None: self.contiguous_leaf_()
    return self
  def contiguous_leaf_(self) -> Tensor:
    """Give this tensor a buffer of its own (a unique node: equal lazy values would otherwise share one gradient)."""
    self.uop = Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,), ("leaf", next(_leaf_ids)))).realize().uop
    return self
  def is_param_(self, is_param: bool = True) -> Tensor:
    """Mark whether this tensor is a trainable parameter (tinygrad): True also makes it require a gradient."""
    self.is_param = is_param
    return self.requires_grad_(True) if is_param else self
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
    """d(self)/d(target) for each target, as lazy tensors."""
    from fusegrad.gradient import compute_gradient
    if gradient is None:
      if self.numel() != 1: raise RuntimeError(f"gradient of a non-scalar tensor of shape {self.shape} needs an explicit `gradient`")
      gradient = Tensor.ones(self.shape, dtype=self.dtype, device=self.device)
    if gradient.shape != self.shape: raise TensorError(f"gradient shape {gradient.shape} does not match tensor shape {self.shape}")
    grads = compute_gradient(self.uop, gradient.cast(self.dtype).uop, {t.uop for t in targets})
    return [Tensor(grads[t.uop]) if t.uop in grads else t.zeros_like() for t in targets]
  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Accumulate d(self)/d(t) into t.grad for every tensor t with requires_grad=True in self's graph."""
    if Tensor.no_grad: raise RuntimeError("backward() while Tensor.no_grad is set (or inside Tensor.inference_mode()): gradients are off")
    in_graph = set(self.uop.toposort())
    # as tinygrad: every float tensor of the graph gets a gradient unless it says requires_grad=False (constants have none)
    params = [t for t in _live_tensors() if t.uop in in_graph and (t.requires_grad or t.requires_grad is None and dtypes.is_float(t.dtype)
                                                                  and t.uop.base.op is not Ops.CONST and t is not self)]
    if not params: raise RuntimeError("backward(): no tensor in this graph can have a gradient (all are constants, or requires_grad=False)")
    for t, g in zip(params, self.gradient(*params, gradient=gradient)):
      if g.shape != t.shape: raise RuntimeError(f"internal error: gradient shape {g.shape} != tensor shape {t.shape}")
      t.grad = g if t.grad is None else t.grad + g
    return self
  def assign(self, x: Any) -> Tensor:
    """Give this tensor the value of x (same shape and dtype); the tensor object keeps its identity."""
    if not isinstance(x, Tensor): x = Tensor.full(self.shape, x, dtype=self.dtype, device=self.device)
    if x.shape != self.shape: raise TensorError(f"assign: shape {x.shape} does not match {self.shape}")
    if x.device != self.device: raise TensorError(f"assign: device {x.device} does not match {self.device}")
    with _realize_lock:
      if self._write_through_view(x.cast(self.dtype)): return self
    self.uop = x.cast(self.dtype).uop
    # equal constants are one node: a tensor assigned one gets a node of its own (two parameters must not share a gradient)
    if self.uop.base.op is Ops.CONST: self.uop = UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,), ("leaf", next(_leaf_ids)))
    _pending_assigns[id(self)] = weakref.ref(self)
    return self
  def replace(self, x: Tensor) -> Tensor:
    if x.shape != self.shape: raise TensorError(f"replace: shape {x.shape} does not match {self.shape}")
    self.uop = x.uop
    return self

  @staticmethod
  def _from_bytes(raw: bytes, dtype: DType, device: str, shape: tuple[int, ...]) -> UOp:
    size = prod(shape)
    buf = Buffer(device, size, dtype, raw)
    return UOp(Ops.RESHAPE, dtype, (buffers.new_buffer_uop(device, size, dtype, buf),), shape) if shape != (size,) else buffers.new_buffer_uop(device, size, dtype, buf)

  @staticmethod
  def _const(value: Any, dtype: DType, device: str, shape: tuple[int, ...]) -> UOp:
    c = UOp(Ops.CONST, dtype, (_device_node(device),), truncate(dtype, value))
    if not shape: return c
    return UOp(Ops.EXPAND, dtype, (UOp(Ops.RESHAPE, dtype, (c,), (1,) * len(shape)),), tuple(shape))

  # ---------------- properties
  @property
  def shape(self) -> tuple[int, ...]: return self.uop.shape
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str: return self.uop.device
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return prod(self.shape)
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.dtype.itemsize
  def dim(self) -> int: return self.ndim
  def size(self, dim: int | None = None): return self.shape if dim is None else self.shape[_norm_axis(dim, self.ndim)]
  @property
  def T(self) -> Tensor: return self.transpose()
  @property
  def lazydata(self) -> UOp: return self.uop  # the name older tinygrad programs use
  def is_floating_point(self) -> bool: return dtypes.is_float(self.dtype)
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __repr__(self) -> str: return f"<Tensor {self.shape} {self.dtype} on {self.device} with grad {self.grad!r}>" if self.grad is None else f"<Tensor {self.shape} {self.dtype} on {self.device} with grad>"
  def __str__(self) -> str:
    """The values, as torch prints them, for a realized tensor or a small lazy one (computing it); else the repr."""
    if buffers.buffer_view(self.uop) is None and self.numel() > 1000: return repr(self)
    from fusegrad.tensor_str import tensor_str
    return tensor_str(self)
  def __hash__(self): return id(self)
  def __bool__(self):
    if self.numel() != 1: raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements is ambiguous; use .any() or .all()")
    return bool(self.item())
  def __iter__(self):
    if not self.shape: raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))

  # ---------------- realization and data out
  @staticmethod
  def realize_all(*tensors: Tensor) -> None:
    # scheduling, the caches and buffer state are shared by every thread: one realize at a time (graph building is free)
    with _realize_lock: Tensor._realize_all(*tensors)
  @staticmethod
  def _realize_all(*tensors: Tensor) -> None:
    # pending assigns happen with the next realize, as an in-place update would have (e.g. BatchNorm running stats)
    tensors = tensors + tuple(t for r in list(_pending_assigns.values()) if (t := r()) is not None and not any(t is x for x in tensors))
    _pending_assigns.clear()
    items, views = create_schedule([t.uop for t in tensors])
    run_schedule(items)
    grad_leaves = None
    for t in tensors:
      if t.uop in views:
        old = t.uop
        buffers.mark_realized(old, views[old])
        # a view of a buffer stays a view (later writes to the buffer drop the cached copy), as torch's views alias;
        # not in a TinyJit capture, whose replays write the copy's buffer
        if (old.op in GroupOp.Movement or old.op is Ops.DETACH) and _view_chain(old)[-1].op is Ops.BUFFER and not _realize.is_capturing(): continue
        # keep the lazy graph while it still leads to a tensor that needs a gradient (so y.numpy(); y.backward() works);
        # the realized map makes later kernels read the buffer instead of recomputing
        if not t.requires_grad:
          if grad_leaves is None: grad_leaves = {g.uop for g in _live_tensors() if g.requires_grad}
          if grad_leaves and any(u in grad_leaves for u in old.toposort(lambda u: u.op is Ops.DETACH)): continue
        t.uop = views[old]
  def realize(self, *lst: Tensor) -> Tensor:
    Tensor.realize_all(self, *lst)
    return self
  def _buffer(self) -> Buffer:
    self.realize()
    return buffers.buffer_of(buffers.buffer_view(self.uop))
  def _flat_values(self) -> list:
    mv = self._buffer().as_memoryview()
    # memoryview has no bfloat16 format, and half ('e') only from Python 3.12: convert 16-bit words here
    if self.dtype == dtypes.bfloat16: return [bf16_to_float(v) for v in mv.cast("H")]
    if self.dtype == dtypes.float16: return list(struct.unpack(f"{self.numel()}e", mv))
    return mv.cast(self.dtype.fmt).tolist()
  def data(self) -> memoryview:
    mv = self._buffer().as_memoryview()
    if self.dtype in (dtypes.bfloat16, dtypes.float16): raise TypeError(f"memoryview has no {self.dtype} format here; use .float().data() or .numpy()")
    return mv.cast(self.dtype.fmt, self.shape) if self.numel() and self.shape else mv.cast(self.dtype.fmt)
  def tolist(self) -> Any:
    vals = self._flat_values()
    def nest(v, shape):
      if not shape: return v[0]
      step = prod(shape[1:])
      return [nest(v[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
    return nest(vals, self.shape)
  def item(self) -> Any:
    if self.numel() != 1: raise TensorError(f"item() needs a tensor with exactly one element, this one has shape {self.shape}")
    return self._flat_values()[0]
  def numpy(self):
    import numpy as np
    raw = bytes(self._buffer().as_memoryview())
    arr = np.frombuffer(raw, dtype=_numpy_dtype(self.dtype)).reshape(self.shape).copy()
    if self.dtype == dtypes.bfloat16: arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr
  def __array__(self, dtype=None, copy=None):
    arr = self.numpy()
    return arr.astype(dtype) if dtype is not None else arr
  def to(self, device: str | None) -> Tensor:
    device = canonicalize(device)
    if device == self.device: return self
    return Tensor(UOp(Ops.COPY, self.dtype, (self.contiguous().uop, UOp(Ops.DEVICE, arg=device))))
  def to_(self, device: str | None) -> Tensor:
    self.uop = self.to(device).uop
    return self
  def clone(self, device: str | None = None, **kwargs) -> Tensor:
    """A copy in a buffer of its own, on `device` (default: self's device), as tinygrad's clone(device=)."""
    x = self.to(device) if device is not None else self
    return Tensor(UOp(Ops.CONTIGUOUS, x.dtype, (x.uop,)))
  def contiguous(self) -> Tensor:
    if buffers.buffer_view(self.uop) is not None: return self
    return Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))
  def detach(self) -> Tensor:
    _note_view(self.uop)
    return Tensor(UOp(Ops.DETACH, self.dtype, (self.uop,)) if self.uop.op is not Ops.DETACH else self.uop)

  # ---------------- creation
  @staticmethod
  def empty(*shape, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    shape = Tensor._shape_arg(shape)
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    device = canonicalize(device)
    u = buffers.new_buffer_uop(device, prod(shape), dtype)
    return Tensor(UOp(Ops.RESHAPE, dtype, (u,), shape) if shape != (prod(shape),) else u, **kwargs)
  @staticmethod
  def _shape_arg(shape: tuple) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)): shape = tuple(shape[0])
    for s in shape:
      if not isinstance(s, int) or isinstance(s, bool): raise TypeError(f"shape entries must be ints, got {shape!r}")
      if s < 0: raise TensorError(f"negative dimension {s} in shape {shape}")
    return _check_numel(tuple(shape))
  @staticmethod
  def full(shape: tuple[int, ...] | int, fill_value: Any, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    shape = Tensor._shape_arg((shape,) if isinstance(shape, int) else tuple(shape))
    dtype = _checked_dtype([fill_value], to_dtype(dtype) if dtype is not None else None)
    return Tensor(Tensor._const(fill_value, dtype, canonicalize(device), shape), **kwargs)
  @staticmethod
  def zeros(*shape, **kwargs) -> Tensor: return Tensor.full(Tensor._shape_arg(shape), 0.0 if "dtype" not in kwargs else 0, **kwargs)
  @staticmethod
  def ones(*shape, **kwargs) -> Tensor: return Tensor.full(Tensor._shape_arg(shape), 1.0 if "dtype" not in kwargs else 1, **kwargs)
  def full_like(self, fill_value: Any, **kwargs) -> Tensor:
    return Tensor.full(self.shape, fill_value, dtype=kwargs.pop("dtype", self.dtype), device=kwargs.pop("device", self.device), **kwargs)
  def zeros_like(self, **kwargs) -> Tensor: return self.full_like(0, **kwargs)
  def ones_like(self, **kwargs) -> Tensor: return self.full_like(1, **kwargs)
  def empty_like(self, **kwargs) -> Tensor: return Tensor.empty(self.shape, dtype=kwargs.pop("dtype", self.dtype), device=kwargs.pop("device", self.device), **kwargs)
  @staticmethod
  def arange(start, stop=None, step=1, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    if stop is None: start, stop = 0, start
    if step == 0: raise TensorError("arange step must be nonzero")
    n = max(0, math.ceil((stop - start) / step))
    ends = [start, start + (n - 1) * step] if n else [start]
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float if any(isinstance(x, float) for x in (start, stop, step)) else None
    dtype = _checked_dtype(ends, dtype) if dtype is None or dtypes.is_int(dtype) else dtype
    iota = Tensor(UOp(Ops.IOTA, dtypes.int32 if n < 2**31 else dtypes.int64, (UOp(Ops.DEVICE, arg=canonicalize(device)),), n))
    out = (iota.cast(dtype) * step + start) if dtypes.is_int(dtype) or isinstance(step, float) or isinstance(start, float) else (iota * step + start).cast(dtype)
    return Tensor(out.cast(dtype).uop, **kwargs)
  @staticmethod
  def linspace(start, stop, steps: int, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    if steps < 0: raise TensorError(f"linspace needs steps >= 0, got {steps}")
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if steps == 1: return Tensor.full((1,), start, device=device, dtype=dtype, **kwargs)
    i = Tensor.arange(steps, device=device, dtype=dtypes.float32 if dtype != dtypes.float64 else dtypes.float64)
    step = (stop - start) / max(steps - 1, 1)
    # fill from both ends so the last value is exactly stop, as torch does
    half = steps // 2
    out = (i < half).where(start + step * i, stop - step * (steps - 1 - i))
    return Tensor(out.cast(dtype).uop, **kwargs)
  @staticmethod
  def eye(n: int, m: int | None = None, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    m = n if m is None else m
    if n < 0 or m < 0: raise TensorError(f"eye needs non-negative sizes, got {n}, {m}")
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    r = Tensor.arange(n, device=device).reshape(n, 1)
    c = Tensor.arange(m, device=device).reshape(1, m)
    return Tensor((r == c).cast(dtype).uop, **kwargs)

  # ---------------- random (counter-based: a hash of (seed, element counter), computed on the device)
  @staticmethod
  def manual_seed(seed: int = 0): rng.manual_seed(seed)
  @staticmethod
  def _random_bits(shape: tuple[int, ...], device: str | None) -> Tensor:
    n = prod(shape)
    offset = rng.advance(n)
    ctr = Tensor(UOp(Ops.IOTA, dtypes.int32 if n < 2**31 else dtypes.int64, (UOp(Ops.DEVICE, arg=canonicalize(device)),), n)).cast(dtypes.uint32)
    # the low bits of the offset are a bound variable, so every call reuses the same compiled kernel
    off = Tensor(rng.offset_var(offset)).cast(dtypes.uint32)
    ctr = ctr + off._broadcast_to(ctr.shape)
    def mix(x: Tensor) -> Tensor:  # "lowbias32" integer hash
      x = x ^ (x >> 16); x = x * 0x7feb352d; x = x ^ (x >> 15); x = x * 0x846ca68b
      return x ^ (x >> 16)
    key = (rng.seed() * 0x9E3779B9 + (offset >> 31) * 0x85EBCA6B) & 0xffffffff
    return mix(mix(ctr ^ key) + 0x68E31DA4 ^ key).reshape(shape)
  @staticmethod
  def rand(*shape, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    shape = Tensor._shape_arg(shape)
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dtype): raise TypeError(f"rand needs a float dtype, got {dtype}")
    bits = min(dtypes.finfo(dtype)[1] + 1, 24)  # values k * 2**-bits are exact in dtype, so the result stays < 1
    x = (Tensor._random_bits(shape, device) >> (32 - bits)).cast(dtypes.float32) * (2.0 ** -bits)
    return Tensor(x.cast(dtype).uop, **kwargs)
  def rand_like(self, **kwargs) -> Tensor: return Tensor.rand(self.shape, device=kwargs.pop("device", self.device), dtype=kwargs.pop("dtype", self.dtype), **kwargs)
  @staticmethod
  def randn(*shape, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    shape = Tensor._shape_arg(shape)
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    u = Tensor.rand(2, *shape, device=device, dtype=dtypes.float32)
    x = (1 - u[0]).log().mul(-2).sqrt() * (u[1] * (2 * math.pi)).cos()  # Box-Muller; 1-u is in (0, 1]
    return Tensor(x.cast(dtype).uop, **kwargs)
  def randn_like(self, **kwargs) -> Tensor: return Tensor.randn(self.shape, device=kwargs.pop("device", self.device), dtype=kwargs.pop("dtype", self.dtype), **kwargs)
  @staticmethod
  def randint(*shape, low: int = 0, high: int = 10, device: str | None = None, dtype: DType | str | None = None, **kwargs) -> Tensor:
    if high <= low: raise TensorError(f"randint needs low < high, got low={low}, high={high}")
    dtype = to_dtype(dtype) if dtype is not None else dtypes.int32
    x = (Tensor.rand(*shape, device=device, dtype=dtypes.float32) * (high - low)).floor().cast(dtypes.int64) + low
    return Tensor(x.minimum(high - 1).cast(dtype).uop, **kwargs)
  @staticmethod
  def uniform(*shape, low: float = 0.0, high: float = 1.0, dtype: DType | str | None = None, **kwargs) -> Tensor:
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return ((high - low) * Tensor.rand(*shape, **kwargs) + low).cast(dtype)
  @staticmethod
  def normal(*shape, mean: float = 0.0, std: float = 1.0, dtype: DType | str | None = None, **kwargs) -> Tensor:
    dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return (std * Tensor.randn(*shape, **kwargs) + mean).cast(dtype)
  @staticmethod
  def scaled_uniform(*shape, **kwargs) -> Tensor:
    return Tensor.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(prod(Tensor._shape_arg(shape)) ** -0.5)
  @staticmethod
  def glorot_uniform(*shape, **kwargs) -> Tensor:
    s = Tensor._shape_arg(shape)
    bound = (6 / (s[0] + prod(s[1:]))) ** 0.5
    return Tensor.uniform(*s, low=-bound, high=bound, **kwargs)
  @staticmethod
  def kaiming_uniform(*shape, a: float = 0.01, **kwargs) -> Tensor:
    s = Tensor._shape_arg(shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(s[1:]))
    return Tensor.uniform(*s, low=-bound, high=bound, **kwargs)
  @staticmethod
  def kaiming_normal(*shape, a: float = 0.01, **kwargs) -> Tensor:
    s = Tensor._shape_arg(shape)
    std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(s[1:]))
    return Tensor.normal(*s, mean=0.0, std=std, **kwargs)

  # ---------------- building blocks
  def _mop(self, op: Ops, arg: Any) -> Tensor:
    _note_view(self.uop)
    return Tensor(UOp(op, self.dtype, (self.uop,), arg))
  def _alu(self, op: Ops, *others: Tensor) -> Tensor:
    dt = dtypes.bool if op in GroupOp.Comparison else (others[0].dtype if op is Ops.WHERE else self.dtype)
    return Tensor(UOp(op, dt, (self.uop, *[o.uop for o in others])))

  def _to_tensor(self, x: Any, dtype: DType | None = None) -> Tensor:
    if isinstance(x, Tensor): return x
    if not isinstance(x, (bool, int, float)):
      if hasattr(x, "item") and getattr(x, "ndim", 1) == 0: x = x.item()
      else: return Tensor(x, device=self.device)
    return Tensor(Tensor._const(x, dtype or result_dtype(self.dtype, x), self.device, ()))

  def _scalar(self, value: bool | int | float, dtype: DType) -> Tensor:
    """A Python scalar as a constant of self's shape and device: the view _broadcast_to makes of a 0-d constant."""
    return Tensor(UOp.tensor_const(value, dtype, self.device, self.shape))

  def _broadcasted(self, y: Any, reverse: bool = False, match_dtype: bool = True) -> tuple[Tensor, Tensor]:
    x: Tensor = self
    if isinstance(y, (bool, int, float)):
      # fast path, same result as the general one below: the constant's dtype comes from result_dtype, and promoting a
      # tensor with a constant of that dtype gives that dtype again; x's shape is already the broadcast shape
      dt = result_dtype(x.dtype, y)
      if match_dtype: x = x.cast(dt)
      c = x._scalar(y, dt)
      return (c, x) if reverse else (x, c)
    if isinstance(y, Tensor) and y.shape == x.shape and y.device == x.device and (y.dtype is x.dtype or not match_dtype):
      return (y, x) if reverse else (x, y)  # fast path: nothing to promote or broadcast
    if not isinstance(y, Tensor):
      y = x._to_tensor(y)
      if match_dtype and y.dtype != (dt := result_dtype(x.dtype, y.uop.arg if y.uop.op is Ops.CONST else 0.0)): y = y.cast(dt)
    if x.device != y.device and None not in (x.device, y.device): raise RuntimeError(f"tensors are on different devices: {x.device} and {y.device}; move one with .to()")
    if reverse: x, y = y, x
    if match_dtype:
      out = promote_types(x, y)
      x, y = x.cast(out), y.cast(out)
    shape = broadcast_shape(x.shape, y.shape)
    return x._broadcast_to(shape), y._broadcast_to(shape)

  def _broadcast_to(self, shape: tuple[int, ...]) -> Tensor:
    if self.shape == shape: return self
    if len(self.shape) > len(shape): raise TensorError(f"cannot broadcast shape {self.shape} to {shape}")
    x = self.reshape((1,) * (len(shape) - len(self.shape)) + self.shape) if len(self.shape) < len(shape) else self
    broadcast_shape(x.shape, shape)
    if any(a != b and a != 1 for a, b in zip(x.shape, shape)): raise TensorError(f"cannot broadcast shape {self.shape} to {shape}")
    return x._mop(Ops.EXPAND, _check_numel(shape)) if x.shape != shape else x

  # ---------------- movement
  def reshape(self, shape, *args) -> Tensor:
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if None in shape:  # tinygrad: None keeps that dim's size
      if len(shape) > self.ndim and None in shape[self.ndim:]: raise TensorError(f"reshape {shape}: None at a dim that {self.shape} does not have")
      shape = tuple(self.shape[i] if s is None else s for i, s in enumerate(shape))
    for s in shape:
      if not isinstance(s, int) or isinstance(s, bool): raise TypeError(f"reshape sizes must be ints, got {shape}")
    if shape.count(-1) > 1: raise TensorError(f"only one dimension can be inferred (-1) in reshape {shape}")
    if any(s < -1 for s in shape): raise TensorError(f"invalid size in reshape {shape}")
    if -1 in shape:
      known = prod(s for s in shape if s != -1)
      if known == 0 or self.numel() % known: raise TensorError(f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) into {shape}")
      shape = tuple(self.numel() // known if s == -1 else s for s in shape)
    if prod(shape) != self.numel(): raise TensorError(f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) into {shape} ({prod(shape)} elements)")
    if shape == self.shape: return self
    return self._mop(Ops.RESHAPE, shape)
  def view(self, *shape) -> Tensor: return self.reshape(*shape) if shape and not isinstance(shape[0], DType) else self.bitcast(shape[0])
  def expand(self, shape, *args) -> Tensor:
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if len(shape) < self.ndim: raise TensorError(f"expand to {shape} has fewer dims than the tensor's shape {self.shape}")
    padded = (None,) * (len(shape) - self.ndim) + self.shape
    new = tuple(p if s == -1 else s for s, p in zip(shape, padded))
    if None in new: raise TensorError(f"-1 is not allowed for new leading dims in expand {shape}")
    return self._broadcast_to(new)  # type: ignore
  def permute(self, order, *args) -> Tensor:
    order = tuple(order) if isinstance(order, (tuple, list)) else (order,) + args
    order = tuple(_norm_axis(o, self.ndim) for o in order)
    if sorted(order) != list(range(self.ndim)): raise TensorError(f"permute order {order} is not a permutation of the {self.ndim} dims of shape {self.shape}")
    return self._mop(Ops.PERMUTE, order) if order != tuple(range(self.ndim)) else self
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    if self.ndim < 2 and dim0 == 1 and dim1 == 0: return self
    order = list(range(self.ndim))
    a, b = _norm_axis(dim0, self.ndim), _norm_axis(dim1, self.ndim)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  def flip(self, axis=None, *args, dims=None) -> Tensor:
    if (axis is None) == (dims is None): raise TypeError("flip() takes the axes to flip, as `axis` (tinygrad) or `dims=` (torch), once")
    if dims is not None: axis = dims
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,) + args
    axes = [_norm_axis(a, self.ndim) for a in axes]
    if len(set(axes)) != len(axes): raise TensorError(f"dim appears multiple times in flip {axis}")
    if not axes: return self
    return self._mop(Ops.FLIP, tuple(i in axes for i in range(self.ndim)))
  def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
    if len(arg) != self.ndim: raise TensorError(f"shrink needs one (start, end) per dim of {self.shape}, got {arg}")
    arg = tuple((0, s) if a is None else tuple(a) for a, s in zip(arg, self.shape))
    for (b, e), s in zip(arg, self.shape):
      if not 0 <= b <= e <= s: raise TensorError(f"shrink {arg} out of bounds for shape {self.shape}")
    if all(a == (0, s) for a, s in zip(arg, self.shape)): return self
    return self._mop(Ops.SHRINK, arg)
  def pad(self, padding, mode: str = "constant", value: float = 0.0) -> Tensor:
    """padding: one (before, after) pair per dim (None = no pad), or a flat torch-style sequence starting from the last dim.
    Negative amounts crop."""
    if all(isinstance(p, int) for p in padding) and len(padding) > 0:
      if len(padding) % 2 or len(padding) // 2 > self.ndim: raise TensorError(f"flat padding {padding} needs an even length of at most 2*ndim={2*self.ndim}")
      pairs = [(0, 0)] * (self.ndim - len(padding) // 2) + [(padding[i], padding[i + 1]) for i in range(len(padding) - 2, -1, -2)]
    else:
      if len(padding) != self.ndim: raise TensorError(f"padding {padding} needs one pair per dim of {self.shape}")
      pairs = [(0, 0) if p is None else tuple(p) for p in padding]
    if mode != "constant":  # reflect / replicate / circular live in tensor_ops.py
      if value != 0: raise TensorError(f"pad mode {mode!r} does not take a value argument")
      return self._pad_mode(pairs, mode)
    x = self
    crop = [(-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pairs, self.shape)]
    if any(c != (0, s) for c, s in zip(crop, self.shape)):
      if any(e < b for b, e in crop): raise TensorError(f"negative padding {padding} crops more than shape {self.shape}")
      x = x.shrink(crop)
    pos = tuple((max(b, 0), max(a, 0)) for b, a in pairs)
    if all(p == (0, 0) for p in pos): return x
    out = x._mop(Ops.PAD, pos)
    _check_numel(out.shape)
    if value != 0:
      mask = Tensor.ones(x.shape, dtype=dtypes.bool, device=x.device)._mop(Ops.PAD, pos)
      out = mask.where(out, value)
    return out
  def squeeze(self, dim: int | None = None) -> Tensor:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(_norm_axis(d, self.ndim) for d in dims)
    return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1))) if self.ndim else self
  def unsqueeze(self, dim: int) -> Tensor:
    d = _norm_axis(dim, self.ndim + 1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    s, e = _norm_axis(start_dim, self.ndim), _norm_axis(end_dim, self.ndim)
    if s > e: raise TensorError(f"flatten start_dim {start_dim} comes after end_dim {end_dim}")
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def unflatten(self, dim: int, sizes: tuple[int, ...]) -> Tensor:
    d = _norm_axis(dim, self.ndim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])
  def repeat(self, repeats, *args) -> Tensor:
    repeats = tuple(repeats) if isinstance(repeats, (tuple, list)) else (repeats,) + args
    if len(repeats) < self.ndim: raise TensorError(f"repeat needs at least {self.ndim} repeat counts for shape {self.shape}, got {repeats}")
    base = (1,) * (len(repeats) - self.ndim) + self.shape
    x = self.reshape(base)
    x = x.reshape(flatten((1, s) for s in base)).expand(flatten((r, s) for r, s in zip(repeats, base)))
    return x.reshape(tuple(r * s for r, s in zip(repeats, base)))
  def cat(self, *others: Tensor, dim: int = 0) -> Tensor:
    """tinygrad's `a.cat(b, c, dim=...)` / `Tensor.cat(a, b, c)`, and torch's `Tensor.cat([a, b, c], dim)`."""
    self, others, dim = _sequence_args(self, others, dim)
    ts = [self, *others]
    if any(t.ndim == 0 for t in ts): raise TensorError("zero-dimensional tensors cannot be concatenated")
    d = _norm_axis(dim, self.ndim)
    for t in ts:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise TensorError(f"cat: shapes {[t.shape for t in ts]} must match except in dim {d}")
    dt = least_upper_dtype(*[t.dtype for t in ts])
    total, off, out = sum(t.shape[d] for t in ts), 0, None
    for t in ts:
      p = [(0, 0)] * self.ndim
      p[d] = (off, total - off - t.shape[d])
      piece = t.cast(dt).pad(p)
      out = piece if out is None else out + piece
      off += t.shape[d]
    return out  # type: ignore
  def stack(self, *others: Tensor, dim: int = 0) -> Tensor:
    """tinygrad's `a.stack(b, dim=...)` / `Tensor.stack(a, b)`, and torch's `Tensor.stack([a, b], dim)`."""
    self, others, dim = _sequence_args(self, others, dim)
    ts = [self, *others]
    if any(t.shape != self.shape for t in ts): raise TensorError(f"stack needs equal shapes, got {[t.shape for t in ts]}")
    d = _norm_axis(dim, self.ndim + 1)
    return Tensor.cat(*[t.unsqueeze(d) for t in ts], dim=d)
  def split(self, sizes: int | Sequence[int], dim: int = 0) -> list[Tensor]:
    d = _norm_axis(dim, self.ndim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0: raise TensorError(f"split size must be positive, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
    if sum(sizes) != n: raise TensorError(f"split sizes {list(sizes)} must sum to {n} (dim {d} of {self.shape})")
    out, off = [], 0
    for s in sizes:
      out.append(self.shrink(tuple((off, off + s) if i == d else None for i in range(self.ndim))))
      off += s
    return out
  def chunk(self, chunks: int, dim: int = 0) -> list[Tensor]:
    if chunks <= 0: raise TensorError(f"chunk needs a positive number of chunks, got {chunks}")
    d = _norm_axis(dim, self.ndim)
    return self.split(max(1, math.ceil(self.shape[d] / chunks)), d)

  def gather(self, dim: int, index: Tensor) -> Tensor:
    """torch.gather: out[i][j][k] = self[index[i][j][k]][j][k] for dim=0 (and likewise for other dims).
    index must be an integer tensor with self's ndim and index.shape[d] <= self.shape[d] for d != dim."""
    if not isinstance(index, Tensor): index = Tensor(index, device=self.device)
    d = _norm_axis(dim, self.ndim)
    if not dtypes.is_int(index.dtype): raise TypeError(f"gather index must be an integer tensor, got {index.dtype}")
    if index.ndim != self.ndim or any(i > s for k, (i, s) in enumerate(zip(index.shape, self.shape)) if k != d):
      raise TensorError(f"gather: index shape {index.shape} must have {self.ndim} dims and fit in {self.shape} outside dim {d}")
    x = self.shrink(tuple((0, i) if k != d else None for k, i in enumerate(index.shape)))
    return Tensor(UOp(Ops.GATHER, self.dtype, (x.uop, index.uop), d))
  def _index_tensor(self, dim: int, idx: Tensor) -> Tensor:
    """self indexed along `dim` by an integer tensor (numpy advanced indexing with one index array)."""
    if not dtypes.is_int(idx.dtype): raise TypeError(f"index tensors must be integer (bool masks are not supported yet), got {idx.dtype}")
    n = self.shape[dim]
    idx = (idx < 0).where(idx + n, idx)
    x = self.permute((dim,) + tuple(i for i in range(self.ndim) if i != dim))  # indexed dim first
    rest = x.shape[1:]
    k = idx.ndim
    xe = x.reshape((n,) + (1,) * max(k - 1, 0) + rest).expand((n,) + idx.shape[1:] + rest) if k else x
    ie = idx.reshape(idx.shape + (1,) * len(rest)).expand(idx.shape + rest) if k else idx.reshape((1,) * (1 + len(rest))).expand((1,) + rest)
    out = xe.gather(0, ie) if k else xe.gather(0, ie).reshape(rest)
    # numpy puts the index dims where the indexed dim was when it is the only advanced index
    lead = tuple(range(k, k + dim))
    return out.permute(lead + tuple(range(k)) + tuple(range(k + dim, out.ndim))) if dim and k else out

  def __getitem__(self, indices) -> Tensor:
    """numpy/PyTorch indexing: ints, slices (negative steps too), None, ..., and integer/bool tensors or lists
    (advanced indexing, PyTorch's rules for where the indexed dims go). Implemented in tensor_ops.py."""
    return self._getitem(indices)
  def __setitem__(self, indices, value) -> None:
    """self[indices] = value, written in place into the data this tensor holds or views: every view of it (slices,
    reshapes, transposes, made before or after) sees the new values, as in torch. Inside a TinyJit capture the views are
    rebound to the new value instead."""
    if self.requires_grad and not Tensor.no_grad:
      raise RuntimeError("a leaf tensor that requires grad cannot be modified in place by setitem; use `with Tensor.inference_mode():` or detach()")
    value = self._setitem_value(indices, value)
    with _realize_lock:
      if self._write_through_view(value): return
      if _realize.is_capturing() or not self._write_in_place(value): self.assign(value)

  def _write_through_view(self, value: Tensor) -> bool:
    """If self is a view (slice, transpose, flip, detach, ...) of data another tensor or a buffer holds, write value
    (self's full new value) into that data, as torch and tinygrad do, and return True. The base gets
    `where(mask, value placed where the view reads, old base)`, so one fused kernel does the write."""
    chain = _view_chain(self.uop)
    if len(chain) == 1 and self.uop not in _viewed_buffers: return False  # a lazy value or an unviewed buffer: rebinding is the write
    if (owned := buffers.buffer_view(self.uop)) is not None and (owned not in _viewed_buffers or owned not in chain): return False
    others = [t for t in _live_tensors() if t is not self]
    # self holds a whole buffer: rebinding it is the write, unless other tensors view that buffer
    if owned is not None and not any(owned in _view_chain(t.uop) for t in others): return False
    held = {id(t.uop): t for t in others}
    depth = next((i for i in range(len(chain) - 1, -1, -1) if id(chain[i]) in held or buffers.buffer_view(chain[i]) is chain[i]), 0)
    if depth == 0 and owned is None: return False  # nothing else sees the data: rebinding self is the whole write
    base_uop = chain[depth]
    placed, mask = _unview(value, chain[:depth + 1])
    base = held[id(base_uop)] if id(base_uop) in held else Tensor(base_uop)
    new_base = mask.where(placed, base)
    if not _realize.is_capturing() and base._write_in_place(new_base): return True
    # a TinyJit capture or a graph autograd still needs: every live view of the base is rebound to the new value
    for t in [*others, self]:
      if base_uop in _view_chain(t.uop):
        t.uop = t.uop.substitute({base_uop: new_base.uop})
        _pending_assigns[id(t)] = weakref.ref(t)
    return True

  def _write_in_place(self, value: Tensor) -> bool:
    """Copy value into this tensor's own buffer. Lazy tensors computed from the old contents are realized first, and
    cached results that read the buffer are dropped, so only views (which alias the buffer) see the new data."""
    # a value that autograd must still see through keeps the lazy (rebinding) form
    grad_leaves = {g.uop for g in _live_tensors() if g.requires_grad and
                   (b := buffers.buffer_view(g.uop)) is not None and _is_view_of(g.uop, b)}
    if grad_leaves and any(u in grad_leaves for x in (self, value) for u in x.uop.toposort(lambda u: u.op is Ops.DETACH)): return False
    lazy = self.uop
    if (b := buffers.buffer_view(lazy)) is None or not _is_view_of(lazy, b):
      # a lazy tensor (or one whose value is a cached result other tensors share) gets a buffer of its own now;
      # views made of its lazy value become views of that buffer
      self.contiguous_leaf_()
      for t in _live_tensors():
        if t is not self and t.uop is not lazy and _is_view_of(t.uop, lazy): t.uop = t.uop.substitute({lazy: self.uop})
    if self.uop.op not in (Ops.BUFFER, Ops.RESHAPE) or (base := buffers.buffer_view(self.uop)) is None or base.device != self.device or \
       base.device.startswith("DISK"): return False
    new = value.cast(self.dtype).contiguous()
    readers = [t for t in _live_tensors() if t is not self and not _is_view_of(t.uop, base)
               and any(u is base or u is lazy for u in t.uop.toposort())]
    Tensor.realize_all(new, *readers)
    for t in readers: t.uop = v if (v := buffers.realized_view(t.uop)) is not None else t.uop  # pin each to the value computed from the old contents
    buffers.buffer_of(base).copyin(new._buffer().as_memoryview())
    buffers.invalidate(base)
    return True

  # ---------------- casting
  def cast(self, dtype: DType | str) -> Tensor:
    dtype = to_dtype(dtype)
    return self if self.dtype == dtype else Tensor(UOp(Ops.CAST, dtype, (self.uop,)))
  def bitcast(self, dtype: DType | str) -> Tensor:
    dtype = to_dtype(dtype)
    if dtype.itemsize != self.dtype.itemsize: return self._bitcast_resize(dtype)
    return self if self.dtype == dtype else Tensor(UOp(Ops.BITCAST, dtype, (self.uop,)))
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def double(self) -> Tensor: return self.cast(dtypes.float64)
  def bfloat16(self) -> Tensor: return self.cast(dtypes.bfloat16)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def short(self) -> Tensor: return self.cast(dtypes.int16)
  def char(self) -> Tensor: return self.cast(dtypes.int8)
  def byte(self) -> Tensor: return self.cast(dtypes.uint8)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)
  def type(self, dtype) -> Tensor: return self.cast(dtype)

  # ---------------- elementwise
  def _float(self) -> Tensor: return self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)
  def _unary(self, op: Ops) -> Tensor: return self._float()._alu(op)
  def neg(self) -> Tensor:
    if self.dtype == dtypes.bool: raise TypeError("negation of a bool tensor is not supported; use logical_not()")
    return self._alu(Ops.NEG)
  def exp(self) -> Tensor: return self._unary(Ops.EXP)
  def exp2(self) -> Tensor: return self._unary(Ops.EXP2)
  def log(self) -> Tensor: return self._unary(Ops.LOG)
  def log2(self) -> Tensor: return self._unary(Ops.LOG2)
  def log10(self) -> Tensor: return self.log2() * (1 / math.log2(10))
  def log1p(self) -> Tensor:
    # log(u) * x / (u - 1) with u = 1 + x rounded cancels the rounding of u, so tiny x keep full precision
    x = self._float()
    u = x + 1
    one = u == 1
    return (x == math.inf).where(x, one.where(x, u.log() * (x / one.where(1, u - 1))))
  def expm1(self) -> Tensor:
    # the same trick for exp: (u - 1) * x / log(u) with u = exp(x)
    x = self._float()
    u = x.exp()
    one, zero, inf = u == 1, u == 0, u == math.inf
    safe = (one | zero | inf).where(2.0, u)
    return one.where(x, zero.where(-1.0, inf.where(math.inf, (safe - 1) * x / safe.log())))
  def sin(self) -> Tensor: return self._unary(Ops.SIN)
  def cos(self) -> Tensor: return self._unary(Ops.COS)
  def tan(self) -> Tensor: return self._unary(Ops.TAN)
  def sqrt(self) -> Tensor: return self._unary(Ops.SQRT)
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def reciprocal(self) -> Tensor: return self._unary(Ops.RECIP)
  def tanh(self) -> Tensor: return self._unary(Ops.TANH)
  def erf(self) -> Tensor: return self._unary(Ops.ERF)
  def abs(self) -> Tensor: return self._alu(Ops.ABS) if self.dtype != dtypes.bool and not dtypes.is_unsigned(self.dtype) else self
  def trunc(self) -> Tensor: return self._alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self
  def floor(self) -> Tensor: return self._alu(Ops.FLOOR) if dtypes.is_float(self.dtype) else self
  def ceil(self) -> Tensor: return self._alu(Ops.CEIL) if dtypes.is_float(self.dtype) else self
  def round(self) -> Tensor: return self._alu(Ops.RINT) if dtypes.is_float(self.dtype) else self
  def square(self) -> Tensor: return self * self
  def sign(self) -> Tensor:
    if self.dtype == dtypes.bool: return self
    return (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)  # sign(nan) is 0, as in torch
  def relu(self) -> Tensor: return ((self < 0) | (self == 0)).where(0, self)
  def sigmoid(self) -> Tensor: return self._unary(Ops.SIGMOID)
  def logical_not(self) -> Tensor: return self.ne(True) if self.dtype == dtypes.bool else self == 0
  def isnan(self) -> Tensor: return self != self
  def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    if not dtypes.is_float(self.dtype) or not (detect_positive or detect_negative): return self.full_like(False, dtype=dtypes.bool)
    if detect_positive and detect_negative: return self.abs() == math.inf
    return self == (math.inf if detect_positive else -math.inf)
  def isfinite(self) -> Tensor: return (self.isinf() | self.isnan()).logical_not()

  def add(self, x, alpha=None) -> Tensor:
    if alpha is not None: x = self._to_tensor(x) * alpha
    a, b = self._broadcasted(x)
    return a._alu(Ops.OR, b) if a.dtype == dtypes.bool else a._alu(Ops.ADD, b)
  def sub(self, x, reverse: bool = False, alpha=None) -> Tensor:
    if alpha is not None: x = self._to_tensor(x) * alpha
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: raise TypeError("subtraction of bool tensors is not supported; use logical_xor() or ^")
    return a._alu(Ops.SUB, b)
  def mul(self, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._alu(Ops.AND, b) if a.dtype == dtypes.bool else a._alu(Ops.MUL, b)
  def div(self, x, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if rounding_mode == "trunc":
      return a._alu(Ops.IDIV, b) if dtypes.is_int(a.dtype) else a._alu(Ops.FDIV, b).trunc()
    if rounding_mode == "floor": return a._floordiv(b)
    if rounding_mode is not None: raise TensorError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    return a._alu(Ops.FDIV, b)
  def _floordiv(self, b: Tensor) -> Tensor:
    if dtypes.is_float(self.dtype): return self._alu(Ops.FDIV, b).floor()
    if self.dtype == dtypes.bool: raise TypeError("floor division of bool tensors is not supported")
    q = self._alu(Ops.IDIV, b)
    if dtypes.is_unsigned(self.dtype): return q
    # C truncates toward zero; floor division rounds down when the signs differ and there is a remainder
    fix = (self._alu(Ops.MOD, b) != 0) & ((self < 0) != (b < 0))
    return q - fix.cast(self.dtype)
  def idiv(self, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._floordiv(b)
  def mod(self, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: raise TypeError("remainder of bool tensors is not supported")
    r = a._alu(Ops.MOD, b)
    if dtypes.is_unsigned(a.dtype): return r
    return ((r != 0) & ((r < 0) != (b < 0))).where(r + b, r)  # Python/PyTorch sign: the divisor's
  def fmod(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    return a._alu(Ops.MOD, b)
  def pow(self, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: return a | b.logical_not()  # x**0 is 1 and x**1 is x
    if not dtypes.is_float(a.dtype):
      return a.cast(dtypes.float64)._alu(Ops.POW, b.cast(dtypes.float64)).cast(a.dtype)
    return a._alu(Ops.POW, b)
  def maximum(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    return a._alu(Ops.OR, b) if a.dtype == dtypes.bool else a._alu(Ops.MAX, b)
  def minimum(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a._alu(Ops.AND, b)
    # floats: -max(-a, -b) keeps NaN propagation and splits the gradient of ties as torch does;
    # ints select instead (negation overflows at the minimum value and wraps for unsigned)
    if dtypes.is_float(a.dtype): return -((-a)._alu(Ops.MAX, -b))
    return (a < b).where(a, b)
  def where(self, x, y) -> Tensor:
    cond = self if self.dtype == dtypes.bool else self.ne(0)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
      xt = Tensor(x, device=self.device)
      x, y = xt._broadcasted(y)
    elif not isinstance(x, Tensor): x, y = y._broadcasted(x, reverse=True)
    else: x, y = x._broadcasted(y)
    shape = x.shape if cond.shape == x.shape else broadcast_shape(cond.shape, x.shape)  # equal shapes: nothing to broadcast
    return cond._broadcast_to(shape)._alu(Ops.WHERE, x._broadcast_to(shape), y._broadcast_to(shape))
  def clip(self, min_=None, max_=None) -> Tensor:
    if min_ is None and max_ is None: raise TensorError("clip needs at least one of min_ or max_")
    ref = self if min_ is None else self.maximum(min_)
    ref = ref if max_ is None else ref.minimum(max_)  # the value (NaN stays NaN), in the promoted dtype and broadcast shape
    if not dtypes.is_float(ref.dtype): return ref
    if not isinstance(min_, Tensor) and not isinstance(max_, Tensor):
      # constant bounds: the value is max/min (one op each) and the gradient torch.clamp's, x's where lo <= x <= hi
      from fusegrad.gradient import with_gradient
      inside = lambda x: (x >= min_ if max_ is None else x <= max_ if min_ is None else (x >= min_) & (x <= max_))  # noqa: E731
      return with_gradient(ref, self, lambda g, x: inside(x).where(g, 0))
    # the gradient is torch.clamp's, selected with where so an inf/NaN upstream gradient never reaches an input that was not
    # chosen: x where min_ <= x <= max_ (bounds included), max_ where x > max_ or max_ < min_, min_ where x < min_ < max_
    x, out = self.cast(ref.dtype)._broadcast_to(ref.shape), ref.detach()
    lo = None if min_ is None else x._broadcasted(min_)[1]
    hi = None if max_ is None else x._broadcasted(max_)[1]
    if hi is None: return (x >= lo).where(x, (x < lo).where(lo, out))
    if lo is None: return (x <= hi).where(x, (x > hi).where(hi, out))
    return ((x >= lo) & (x <= hi)).where(x, ((x > hi) | ((hi < lo) & (x == x))).where(hi, ((x < lo) & (lo < hi)).where(lo, out)))
  def clamp(self, min=None, max=None) -> Tensor: return self.clip(min, max)
  def lerp(self, end, weight) -> Tensor: return self + (end - self) * weight

  def _cmp(self, op: Ops, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._alu(op, b)
  def __lt__(self, x) -> Tensor: return self._cmp(Ops.CMPLT, x)
  def __gt__(self, x) -> Tensor: return self._cmp(Ops.CMPLT, x, True)
  # not `not >`: every comparison with NaN is False (IEEE, as torch)
  def __le__(self, x) -> Tensor: return self._cmp(Ops.CMPLT, x) | self._cmp(Ops.CMPEQ, x)
  def __ge__(self, x) -> Tensor: return self._cmp(Ops.CMPLT, x, True) | self._cmp(Ops.CMPEQ, x)
  def __eq__(self, x) -> Tensor: return self._cmp(Ops.CMPEQ, x)  # type: ignore[override]
  def __ne__(self, x) -> Tensor: return self._cmp(Ops.CMPNE, x)  # type: ignore[override]
  def eq(self, x) -> Tensor: return self == x
  def ne(self, x) -> Tensor: return self != x
  def lt(self, x) -> Tensor: return self < x
  def le(self, x) -> Tensor: return self <= x
  def gt(self, x) -> Tensor: return self > x
  def ge(self, x) -> Tensor: return self >= x

  def _bitwise(self, op: Ops, x, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype): raise TypeError(f"bitwise {op.name.lower()} needs integer or bool tensors, got {a.dtype}")
    return a._alu(op, b)
  def bitwise_and(self, x) -> Tensor: return self._bitwise(Ops.AND, x)
  def bitwise_or(self, x) -> Tensor: return self._bitwise(Ops.OR, x)
  def bitwise_xor(self, x) -> Tensor: return self._bitwise(Ops.XOR, x)
  def bitwise_not(self) -> Tensor:
    if dtypes.is_float(self.dtype): raise TypeError(f"bitwise not needs integer or bool tensors, got {self.dtype}")
    return self.logical_not() if self.dtype == dtypes.bool else self ^ -1 if not dtypes.is_unsigned(self.dtype) else self ^ dtypes.max(self.dtype)
  def lshift(self, x) -> Tensor: return self._bitwise(Ops.SHL, x)
  def rshift(self, x) -> Tensor: return self._bitwise(Ops.SHR, x)
  def logical_and(self, x) -> Tensor: return self.bool() & self._to_tensor(x).bool()
  def logical_or(self, x) -> Tensor: return self.bool() | self._to_tensor(x).bool()
  def logical_xor(self, x) -> Tensor: return self.bool() ^ self._to_tensor(x).bool()

  __neg__ = neg
  def __add__(self, x): return self.add(x)
  def __radd__(self, x): return self.add(x)
  def __sub__(self, x): return self.sub(x)
  def __rsub__(self, x): return self.sub(x, reverse=True)
  def __mul__(self, x): return self.mul(x)
  def __rmul__(self, x): return self.mul(x, reverse=True)
  def __truediv__(self, x): return self.div(x)
  def __rtruediv__(self, x): return self.div(x, reverse=True)
  def __floordiv__(self, x): return self.idiv(x)
  def __rfloordiv__(self, x): return self.idiv(x, reverse=True)
  def __mod__(self, x): return self.mod(x)
  def __rmod__(self, x): return self.mod(x, reverse=True)
  def __pow__(self, x): return self.pow(x)
  def __rpow__(self, x): return self.pow(x, reverse=True)
  def __matmul__(self, x): return self.matmul(x)
  def __rmatmul__(self, x): return self._to_tensor(x).matmul(self)
  def __and__(self, x): return self._bitwise(Ops.AND, x)
  def __rand__(self, x): return self._bitwise(Ops.AND, x, True)
  def __or__(self, x): return self._bitwise(Ops.OR, x)
  def __ror__(self, x): return self._bitwise(Ops.OR, x, True)
  def __xor__(self, x): return self._bitwise(Ops.XOR, x)
  def __rxor__(self, x): return self._bitwise(Ops.XOR, x, True)
  def __lshift__(self, x): return self._bitwise(Ops.SHL, x)
  def __rshift__(self, x): return self._bitwise(Ops.SHR, x)
  def __invert__(self): return self.bitwise_not()
  # in place, as in torch and tinygrad: the tensor (and views of it) keep their identity and see the new value
  def __iadd__(self, x): return self._inplace(self.add(x))
  def __isub__(self, x): return self._inplace(self.sub(x))
  def __imul__(self, x): return self._inplace(self.mul(x))
  def __itruediv__(self, x): return self._inplace(self.div(x))
  def __ifloordiv__(self, x): return self._inplace(self.idiv(x))
  def __imod__(self, x): return self._inplace(self.mod(x))
  def __ipow__(self, x): return self._inplace(self.pow(x))
  def __iand__(self, x): return self._inplace(self.bitwise_and(x))
  def __ior__(self, x): return self._inplace(self.bitwise_or(x))
  def __ixor__(self, x): return self._inplace(self.bitwise_xor(x))
  def __ilshift__(self, x): return self._inplace(self.lshift(x))
  def __irshift__(self, x): return self._inplace(self.rshift(x))
  def __imatmul__(self, x): return self._inplace(self.matmul(x))
  def _inplace(self, result: Tensor) -> Tensor:
    """torch's rules for `t op= x`: the result must fit t's dtype without changing kind (int /= 2 raises, not truncates),
    and a leaf that requires grad is not modified in place outside no_grad."""
    if category(result.dtype) > category(self.dtype):
      raise RuntimeError(f"result type {result.dtype} can't be cast to the desired output type {self.dtype} of an in-place operation")
    if self.requires_grad and not Tensor.no_grad:
      raise RuntimeError("a leaf tensor that requires grad cannot be modified in place; use assign(), or `with Tensor.inference_mode():`")
    return self.assign(result)
  def __abs__(self): return self.abs()

  # ---------------- reductions
  def _axes(self, axis) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(_norm_axis(a, self.ndim) for a in axes)
    if len(set(axes)) != len(axes): raise TensorError(f"dim {axis} appears multiple times in the list of dims")
    return axes
  def _reduce(self, op: Ops, axis=None, keepdim: bool = False) -> Tensor:
    axes = self._axes(axis)
    if self.ndim == 0: return self
    red = self._reduce_in_groups(op, axes) if axes else self
    return red if keepdim else red.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))
  # the reduce builders live on UOp (uop/ops.py), shared with the derivative rules: backward reduces split and widen alike
  def _reduce_in_groups(self, op: Ops, axes) -> Tensor: return Tensor(self.uop._reduce_in_groups(op, axes))
  def _sum_dtype(self) -> DType: return sum_dtype(self.dtype)
  def _wide(self) -> Tensor: return self.cast(wide_dtype(self.dtype))
  def sum(self, axis=None, keepdim: bool = False, dtype: DType | str | None = None, acc_dtype=None, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    x = self.cast(to_dtype(dtype) if dtype is not None else self._sum_dtype())
    return x._wide()._reduce(Ops.ADD, axis, keepdim).cast(x.dtype)
  def prod(self, axis=None, keepdim: bool = False, dtype: DType | str | None = None, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    x = self.cast(to_dtype(dtype) if dtype is not None else self._sum_dtype())
    return x._wide()._reduce(Ops.MUL, axis, keepdim).cast(x.dtype)
  def max(self, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    """tinygrad's max(axis) gives the values; torch's spelling max(dim=d) gives (values, indices) as torch does."""
    if dim is not None: return self._max_min_dim(self._pick_axis(axis, dim), keepdim, True)
    self._check_nonempty("max", axis)
    if self.dtype == dtypes.bool: return self.cast(dtypes.uint8)._reduce(Ops.MAX, axis, keepdim).cast(dtypes.bool)
    return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    if dim is not None: return self._max_min_dim(self._pick_axis(axis, dim), keepdim, False)
    self._check_nonempty("min", axis)
    if self.dtype == dtypes.bool: return self.logical_not().max(axis, keepdim).logical_not()
    if dtypes.is_int(self.dtype): return (~(~self).max(axis, keepdim))
    return -((-self).max(axis, keepdim))
  def _check_nonempty(self, name: str, axis):
    if any(self.shape[a] == 0 for a in self._axes(axis)): raise RuntimeError(f"{name}() of an empty dimension has no identity: shape {self.shape}, dim {axis}")
  def mean(self, axis=None, keepdim: bool = False, dtype: DType | str | None = None, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    x = self.cast(dtype) if dtype is not None else self._float()
    n = prod(self.shape[a] for a in self._axes(axis))
    out = x._wide().sum(axis, keepdim)
    return (out.div(n) if n else out * math.nan).cast(x.dtype)
  def var(self, axis=None, keepdim: bool = False, correction: int = 1, unbiased: bool | None = None, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    if unbiased is not None: correction = int(unbiased)
    x = self._float()
    n = prod(self.shape[a] for a in self._axes(axis))
    sq = (x - x.mean(axis, keepdim=True)).square().sum(axis, keepdim)
    return sq.div(max(0, n - correction)) if n - correction > 0 else sq * math.nan if n == 0 else sq.div(0)
  def std(self, axis=None, keepdim: bool = False, correction: int = 1, unbiased: bool | None = None, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    return self.var(axis, keepdim, correction, unbiased).sqrt()
  def var_mean(self, axis=None, keepdim=False, correction=1, *, dim=None):
    axis = self._pick_axis(axis, dim)
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)
  def std_mean(self, axis=None, keepdim=False, correction=1, *, dim=None):
    axis = self._pick_axis(axis, dim)
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)
  def any(self, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    # MAX over an empty axis gives the identity 0, so any() of nothing is False as in torch
    return self.bool().cast(dtypes.uint8)._reduce(Ops.MAX, axis, keepdim).cast(dtypes.bool)
  def all(self, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    return self.logical_not().any(self._pick_axis(axis, dim), keepdim).logical_not()
  def _arg(self, axis, keepdim: bool, largest: bool) -> Tensor:
    x = self if largest else (-self if dtypes.is_float(self.dtype) else ~self if dtypes.is_int(self.dtype) else self.logical_not())
    if axis is None: return x.flatten()._arg(0, keepdim=False, largest=True).reshape(() if not keepdim else (1,) * self.ndim)
    a = _norm_axis(axis, self.ndim)
    self._check_nonempty("argmax" if largest else "argmin", a)
    m = x.max(a, keepdim=True)
    n = self.shape[a]
    # the first index holding the max: NaN counts as the max, as in torch
    hit = (x == m) | (x != x) if dtypes.is_float(self.dtype) else (x == m)
    rev = Tensor.arange(n, 0, -1, device=self.device).reshape((n,) + (1,) * (self.ndim - a - 1))
    return (n - (hit * rev).max(a, keepdim)).cast(dtypes.int32)
  def argmax(self, axis=None, keepdim: bool = False, *, dim=None) -> Tensor: return self._arg(self._pick_axis(axis, dim), keepdim, True)
  def argmin(self, axis=None, keepdim: bool = False, *, dim=None) -> Tensor: return self._arg(self._pick_axis(axis, dim), keepdim, False)

  # ---------------- linear algebra
  def dot(self, w: Tensor) -> Tensor:
    x = self
    if x.ndim == 0 or w.ndim == 0: raise TensorError(f"matmul needs at least 1-d operands, got shapes {x.shape} and {w.shape}")
    if x.device != w.device: raise RuntimeError(f"matmul operands are on different devices: {x.device} and {w.device}")
    k1, k2 = x.shape[-1], w.shape[-2] if w.ndim > 1 else w.shape[0]
    if k1 != k2: raise TensorError(f"matmul shape mismatch: {x.shape} @ {w.shape} (inner sizes {k1} and {k2} differ)")
    dt = least_upper_dtype(x.dtype, w.dtype)
    x, w = x.cast(dt), w.cast(dt)
    squeeze = []
    if x.ndim == 1: x = x.reshape(1, k1); squeeze.append(-2)
    if w.ndim == 1: w = w.reshape(k2, 1); squeeze.append(-1)
    batch = broadcast_shape(x.shape[:-2], w.shape[:-2])
    m, n = x.shape[-2], w.shape[-1]
    xb = x.reshape(x.shape[:-1] + (1, k1))._broadcast_to(batch + (m, n, k1))
    wb = w.transpose(-1, -2).reshape(w.shape[:-2] + (1, n, k1))._broadcast_to(batch + (m, n, k1))
    out = (xb * wb).sum(-1, dtype=dt)  # like torch, integer matmul keeps its dtype (and wraps)
    if -1 in squeeze: out = out.squeeze(-1)
    if -2 in squeeze: out = out.squeeze(-1 if -1 in squeeze else -2)
    return out
  def matmul(self, x: Tensor, reverse: bool = False) -> Tensor: return x.dot(self) if reverse else self.dot(x)
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    x = self.mul(weight) if weight.ndim == 1 else self.dot(weight)
    return x.add(bias) if bias is not None else x

  def sequential(self, layers: list[Callable[[Tensor], Tensor]]) -> Tensor:
    """Apply each callable of `layers` in turn, each to the previous one's output (tinygrad's nn.Sequential)."""
    x = self
    for f in layers: x = f(x)
    return x

  # ---------------- nn functions used by the foundation
  def _shift(self, axis) -> Tensor | float:
    """The max along axis, subtracted before exp to keep it in range. The result does not depend on it, so no gradient
    goes through it; an empty axis has no max (and needs no shift)."""
    if self.ndim and not all(self.shape[a] for a in self._axes(axis)): return 0.0
    return (self.max(axis, keepdim=True) if self.ndim else self).detach()
  def softmax(self, axis: int = -1, dtype: DType | str | None = None, *, dim: int | None = None) -> Tensor:
    if dim is not None: axis = dim  # torch's spelling; the default axis=-1 is not a conflict
    x = self.cast(dtype) if dtype is not None else self._float()
    e = (x - x._shift(axis)).exp()
    return e / e.sum(axis, keepdim=True)
  def log_softmax(self, axis: int = -1, dtype: DType | str | None = None, *, dim: int | None = None) -> Tensor:
    if dim is not None: axis = dim
    x = self.cast(dtype) if dtype is not None else self._float()
    m = x - x._shift(axis)
    return m - m.exp().sum(axis, keepdim=True).log()
  def logsumexp(self, axis=None, keepdim: bool = False, *, dim=None) -> Tensor:
    axis = self._pick_axis(axis, dim)
    x = self._float()
    m = x._shift(axis)
    if isinstance(m, Tensor): m = (m.abs() == math.inf).where(0, m)  # all -inf (or an inf) must not give inf - inf = NaN
    out = (x - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.squeeze(self._axes(axis))

  # ---------------- PyTorch conveniences
  def __float__(self) -> float:
    if self.numel() != 1: raise TensorError(f"only one element tensors can be converted to Python scalars, got shape {self.shape}")
    return float(self.item())
  def __int__(self) -> int:
    if self.numel() != 1: raise TensorError(f"only one element tensors can be converted to Python scalars, got shape {self.shape}")
    return int(self.item())
  def cpu(self) -> Tensor: return self.to("CPU")
  def t(self) -> Tensor:
    """torch's t(): 0-d and 1-d tensors as they are, a 2-d tensor transposed."""
    if self.ndim > 2: raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return self.transpose(0, 1) if self.ndim == 2 else self
  @property
  def mT(self) -> Tensor:
    if self.ndim < 2: raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices, got {self.ndim}-D tensor")
    return self.transpose(-2, -1)
  def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along dim, with dim removed."""
    d = _norm_axis(dim, self.ndim)
    return tuple(t.squeeze(d) for t in self.split(1, d)) if self.shape[d] else ()

# buffers some view was taken of (a slice, reshape, detach ...): only an assign to one of these must look for views to update
_viewed_buffers: "weakref.WeakSet[UOp]" = weakref.WeakSet()

def _note_view(u: UOp) -> None:
  if u.op is Ops.BUFFER: _viewed_buffers.add(u)
  elif u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER: _viewed_buffers.add(u.src[0])

def _view_chain(u: UOp) -> list[UOp]:
  """u and the movement ops (and DETACHes) under it, down to the first node that is neither."""
  chain = [u]
  while chain[-1].op in GroupOp.Movement or chain[-1].op is Ops.DETACH: chain.append(chain[-1].src[0])
  return chain

def _unview(value: Tensor, chain: list[UOp]) -> tuple[Tensor, Tensor]:
  """value (shaped like chain[0]) and a mask of where it lands, in the coordinates of chain[-1]: each view op of the
  chain is undone in turn, so a write through a view lands exactly where the view reads."""
  mask = Tensor.ones(value.shape, dtype=dtypes.bool, device=value.device)
  for u in chain[:-1]:
    src = u.src[0].shape
    if u.op is Ops.RESHAPE: value, mask = value.reshape(src), mask.reshape(src)
    elif u.op is Ops.PERMUTE:
      inv = argsort(list(u.arg))
      value, mask = value.permute(inv), mask.permute(inv)
    elif u.op is Ops.FLIP:
      axes = [i for i, f in enumerate(u.arg) if f]
      value, mask = value.flip(axes), mask.flip(axes)
    elif u.op is Ops.SHRINK:
      pads = tuple((b, s - e) for (b, e), s in zip(u.arg, src))
      value, mask = value.pad(pads), mask.pad(pads)
    elif u.op is Ops.PAD:
      keep = tuple((b, b + s) for (b, _), s in zip(u.arg, src))
      value, mask = value.shrink(keep), mask.shrink(keep)
    elif u.op is not Ops.DETACH and u.shape != src:  # EXPAND, WINDOW: many view elements read one base element
      raise RuntimeError(f"unsupported operation: writing into a broadcast (expand) or sliding-window view of shape {u.shape} over "
                         f"{src}: more than one element of the written-to tensor refers to a single memory location; use .contiguous() first")
  return value, mask

def _is_view_of(u: UOp, base: UOp) -> bool:
  """Is u only movement ops over `base` (so it reads the buffer's current contents whenever it is evaluated)?"""
  return base in _view_chain(u)

def _sequence_args(first, others: tuple, dim: int) -> tuple:
  """Accept torch's `f([a, b], dim)` besides tinygrad's `f(a, b, dim=dim)`."""
  if not isinstance(first, (list, tuple)): return first, others, dim
  if not first: raise TensorError("expected a non-empty sequence of tensors")
  return first[0], (*first[1:], *[o for o in others if isinstance(o, Tensor)]), next((o for o in others if isinstance(o, int)), dim)

def promote_types(x: Tensor, y: Tensor) -> DType:
  """PyTorch's rule: a 0-d tensor only raises the result's category (int -> float), like a Python scalar does, but
  with its own dtype; between tensors of the same kind of rank the usual lattice applies."""
  if (x.ndim == 0) != (y.ndim == 0):
    dim, zero = (y, x) if x.ndim == 0 else (x, y)
    return zero.dtype if category(zero.dtype) > category(dim.dtype) else dim.dtype
  return least_upper_dtype(x.dtype, y.dtype)

# tinygrad spells the bitwise-not dunder and a few aliases differently; keep both spellings available
Tensor.xor = Tensor.bitwise_xor
