"""The Tensor class: construction from Python data, autograd, properties, realization and data out, assign and
in-place writes through views, and the per-thread training / no-grad modes.

The ops are grouped by concept in the mixins Tensor inherits: creation.py, movement.py, elementwise.py, reduce.py,
indexing.py and nn.py. Every op builds UOps lazily; nothing runs until realize/numpy/item/tolist."""
from __future__ import annotations
import itertools, pathlib, struct, sys, threading, weakref
from typing import Any
from fusegrad.dtype import DType, dtypes, to_dtype, truncate, bf16_to_float, fp8_to_float
from fusegrad.device import Buffer, canonicalize
from fusegrad.helpers import KeyRef, TensorError, argsort, prod, TRAINING
from fusegrad.uop.ops import GroupOp, Ops, UOp, Variable, sym_value
from fusegrad import buffers
from fusegrad.schedule import create_schedule
from fusegrad.engine.realize import run_schedule
from fusegrad.engine import realize as _realize
from fusegrad.tensor.common import _checked_dtype, _held_buffer, _norm_axis, _note_view, _viewed_buffers, value_device
from fusegrad.tensor.creation import CreationMixin
from fusegrad.tensor.movement import MovementMixin
from fusegrad.tensor.elementwise import ElementwiseMixin
from fusegrad.tensor.reduce import ReduceMixin
from fusegrad.tensor.indexing import IndexingMixin
from fusegrad.tensor.nn import NNMixin
from fusegrad.tensor.torch_names import TorchNamesMixin
from fusegrad.tensor.special import SpecialMixin
from fusegrad.tensor.stats import StatsMixin
from fusegrad.tensor.linalg import LinalgMixin
from fusegrad.tensor.printing import tensor_str

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

def _nested_lists(data: Any) -> Any:
  """data with the numpy arrays inside it (a list of rows as arrays) as nested lists, as torch and numpy accept them."""
  if type(data).__module__ == "numpy" and getattr(data, "ndim", 0) > 0: return data.tolist()
  return [_nested_lists(x) for x in data] if isinstance(data, (list, tuple)) else data

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
  if dtype in dtypes.fp8s:
    from fusegrad.dtype import float_to_fp8
    return bytes(float_to_fp8(float(v), dtype) for v in values)
  return struct.pack(f"{len(values)}{dtype.fmt}", *[truncate(dtype, v) for v in values])

def _numpy_dtype(d: DType):
  import numpy as np
  return np.dtype(d.fmt) if d != dtypes.bfloat16 else np.dtype(np.uint16)  # (fp8 is read as bytes: its own branch in numpy())

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
_pending_assigns: dict[int, "weakref.ref[Tensor]"] = {}
# The live tensors, grouped by what their node is, so that an in-place write looks only at the tensors that can see it:
# `_lazy` holds those that are not a realized buffer (lazy values and views: only these read a buffer lazily or through
# movement ops), and each BUFFER node's `holders` those that hold it (reshaped at most). Every write had walked all the
# live tensors: an eager Adam step of 20 weights took 79 ms with 3000 realized tensors alive, 24 ms with few.
_lazy: dict[int, "_TensorRef"] = {}
_holding: "weakref.WeakSet[UOp]" = weakref.WeakSet()  # the BUFFER nodes with a `holders` dict

class _TensorRef(KeyRef):
  """The registry's weak reference to a tensor: key is its id, group the dict of `_lazy` or `holders` it is filed in."""
  __slots__ = ("group",)

def _file(ref: _TensorRef, u: UOp) -> None:
  """File the tensor of ref under its node u (see `_lazy`). (A TinyJit replay rebinds its state tensors through this:
  _held_buffer and the holders lookup are inlined.)"""
  b = u if u.op is Ops.BUFFER else u.src[0] if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER else None
  if b is None: group = _lazy
  elif (group := b.__dict__.get("holders")) is None:
    group = b.__dict__["holders"] = {}
    _holding.add(b)
  if (old := ref.group) is not group:
    if old is not None and old.get(ref.key) is ref: del old[ref.key]
    group[ref.key] = ref
    ref.group = group

def _unregister(ref: _TensorRef) -> None:
  if (group := ref.group) is not None and group.get(ref.key) is ref: del group[ref.key]
def _live_refs() -> list[_TensorRef]:
  """The registry's references to every live tensor: each is filed in exactly one group (a TinyJit capture asks)."""
  return [*_lazy.values(), *(r for b in list(_holding) for r in list(b.__dict__["holders"].values()))]
def _alive(refs) -> list["Tensor"]: return [t for r in list(refs) if (t := r()) is not None]
def _tensors_on(nodes) -> list["Tensor"]:
  """The live tensors whose node may be one of `nodes` or a view of one: the lazy ones and the holders of its BUFFERs."""
  return _alive([*_lazy.values(), *(r for u in nodes if u.op is Ops.BUFFER for r in (u.__dict__.get("holders") or {}).values())])
# the live tensors with requires_grad=True: realizing a tensor asks whether its graph leads to one, and walking every
# live tensor for that cost each realize about 40 ns per tensor alive (a model's weights, a dataset's batches)
_grad_tensors: dict[int, KeyRef] = {}
def _unregister_grad(ref: KeyRef) -> None:
  if _grad_tensors.get(ref.key) is ref: del _grad_tensors[ref.key]
def _lazy_tensors(*but: "Tensor") -> list["Tensor"]:
  """The live tensors other than `but` that are not a realized buffer (a BUFFER, reshaped at most): only these can read
  another buffer lazily."""
  skip = {id(b) for b in but}
  return [t for t in _alive(_lazy.values()) if id(t) not in skip]
_VIEW_OPS = frozenset(GroupOp.Movement | {Ops.DETACH})
def _viewed_by_another(base: UOp, but: "Tensor") -> bool:
  """Does a live tensor other than `but` hold BUFFER `base` or view it (_is_view_of)? Only a holder or a lazy tensor whose
  node is a movement op can: the test skips the rest (an optimizer step asks once per weight, with the whole training
  graph's tensors alive: testing each took 2.4 ms of an eager MNIST step's 63)."""
  for r in list((base.__dict__.get("holders") or {}).values()):
    if (t := r()) is not None and t is not but: return True
  for r in list(_lazy.values()):
    if (t := r()) is not None and t._uop.op in _VIEW_OPS and t is not but and base in _view_chain(t._uop): return True
  return False
def _reads_leaf(u: UOp, leaves: set[UOp]) -> bool:
  """Whether u's graph holds one of `leaves` other than through a DETACH: depth first, done at the first one found (the
  newest layer's weights are near the top; a whole toposort of a conv's gradients took 0.2 ms of each realize)."""
  stack, seen = [u], set()
  while stack:
    if (x := stack.pop()) in leaves: return True
    if x not in seen and x.op is not Ops.DETACH:
      seen.add(x)
      stack.extend(x.src)
  return False
def _grad_leaf_uops() -> set[UOp]: return {t.uop for r in list(_grad_tensors.values()) if (t := r()) is not None and t._requires_grad}
_leaf_ids = itertools.count()  # tensors given a new value by assign() and not yet realized

class Tensor(CreationMixin, MovementMixin, ElementwiseMixin, ReduceMixin, IndexingMixin, NNMixin, TorchNamesMixin, SpecialMixin, StatsMixin,
             LinalgMixin, metaclass=_TensorMeta):
  """A lazily evaluated n-dimensional array with PyTorch-style semantics."""
  _no_grad: bool = False
  grad: Tensor | None = None
  _requires_grad: bool | None = None
  train = staticmethod(lambda mode=True: _TrainMode(mode))
  test = staticmethod(lambda: _TrainMode(False))
  inference_mode = staticmethod(lambda mode=True: _NoGrad(mode))
  __array_priority__ = 1000  # numpy defers to our reflected operators

  def __init__(self, data: Any = None, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None):
    if type(data) is UOp and device is None and dtype is None and requires_grad is None:
      # every op wraps its result like this: nothing to convert, move or make a leaf of (grad and requires_grad are the
      # class's None until set)
      self._uop = data
      self._register()  # only once built: another thread may be walking the live tensors
      return
    asked, device = device, canonicalize(device)
    dtype = to_dtype(dtype) if dtype is not None else None
    self.grad: Tensor | None = None
    self.requires_grad: bool | None = requires_grad
    if isinstance(data, UOp):  # (a node, cast to the dtype asked for; the device is the node's)
      self.uop = data
      if dtype and dtype != data.dtype: self.uop = self.cast(dtype).uop
    elif isinstance(data, Tensor): self.uop = data.cast(dtype).to(device).uop if dtype else data.to(device).uop
    elif data is None: self.uop = Tensor.empty(0, device=device, dtype=dtype or dtypes.default_float).uop
    # (np.float64 is a float: it goes with the numpy values below, keeping its dtype)
    elif isinstance(data, (bool, int, float)) and type(data).__module__ != "numpy": self.uop = Tensor._const(data, _checked_dtype([data], dtype), device, ())
    elif isinstance(data, (list, tuple)):
      data = _nested_lists(data)
      shape = _shape_of(data)
      flat = _flat(data)
      for v in flat:
        if not isinstance(v, (bool, int, float)) and not hasattr(v, "item"):
          raise TypeError(f"Tensor() got an element of type {type(v).__name__}; expected numbers (or nested lists of them)")
      # numpy scalars of one dtype keep it, as torch (np.float64 values would become float32)
      if dtype is None and flat and len(kinds := {v.dtype for v in flat if type(v).__module__ == "numpy" and hasattr(v, "dtype")}) == 1 \
         and all(type(v).__module__ == "numpy" for v in flat):
        dtype = to_dtype(kinds.pop().name)
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
      if not arr.dtype.isnative: arr = arr.astype(arr.dtype.newbyteorder("="))  # big-endian bytes were read as native
      src_dtype = to_dtype(arr.dtype.name)
      arr = np.ascontiguousarray(arr).reshape(arr.shape)  # ascontiguousarray makes 0-d arrays 1-d
      self.uop = Tensor._from_bytes(arr.tobytes(), src_dtype, device, arr.shape)
      if dtype and dtype != src_dtype: self.uop = self.cast(dtype).uop
    elif isinstance(data, pathlib.Path):  # tinygrad's spelling of a file's bytes: a uint8 tensor on the DISK device, read on use
      if not data.is_file(): raise FileNotFoundError(f"Tensor(Path): no file at {data}")
      buf, dtype = Buffer(f"DISK:{data.resolve()}", data.stat().st_size, dtypes.uint8).ensure_allocated(), dtype or dtypes.uint8
      if buf.size % dtype.itemsize: raise TensorError(f"Tensor(Path): {data} has {buf.size} bytes, not a whole number of {dtype} elements")
      self.uop = buffers.view_uop(buf, 0, buf.size // dtype.itemsize, dtype) if dtype != dtypes.uint8 else buffers.new_buffer_uop(buf.device, buf.size, dtype, buf)
      if asked is not None and not device.startswith("DISK"): self.uop = self.to(device).uop  # the bytes, copied where asked
    else: raise TypeError(f"Tensor() cannot be built from {type(data).__name__}")
    self._register()
    # a leaf that needs a gradient gets its own buffer: equal lazy constants are one node and would share a gradient
    if requires_grad and buffers.buffer_view(self.uop) is None: self.contiguous_leaf_()

  _ref: _TensorRef | None = None  # the registry's reference, once registered
  def _register(self) -> None:
    ref = self._ref = _TensorRef(self, _unregister)
    ref.key, ref.group = id(self), None
    if (u := self._uop).op is Ops.BUFFER or u.op is Ops.RESHAPE: _file(ref, u)
    else:  # most ops' results: lazy (_file inlined, as every op registers its result)
      _lazy[ref.key] = ref
      ref.group = _lazy
  @property
  def uop(self) -> UOp: return self._uop
  @uop.setter
  def uop(self, u: UOp) -> None:
    self._uop = u
    if (ref := self._ref) is not None: _file(ref, u)  # (unregistered while __init__ runs)
  @property
  def requires_grad(self) -> bool | None:
    """The flag given to this tensor, or for an op's result (no flag of its own) True when its graph reads a tensor that
    requires grad other than through detach(), as in torch and tinygrad (else None). The internals ask for the tensor's
    own flag, `_requires_grad`: that is what makes a leaf (in-place rules, which tensors backward() fills)."""
    if (flag := self._requires_grad) is not None: return flag
    if Tensor.no_grad: return False  # (torch's results under no_grad; for one made before, torch would say True)
    return True if (leaves := _grad_leaf_uops()) and _reads_leaf(self._uop, leaves) else None
  @property
  def is_leaf(self) -> bool:
    """torch's: False only for an op's result that requires grad through its inputs (see requires_grad)."""
    return self._requires_grad is not None or self.requires_grad is None
  @requires_grad.setter
  def requires_grad(self, value: bool | None) -> None:
    # a lazy leaf made to require grad gets a node of its own (no kernel now): equal lazy values are one node, and would
    # share one gradient (`b, c = a.clone(), a.clone()`). (Not while __init__ runs: it has no node yet, and does this itself.)
    if value and "_uop" in self.__dict__ and not self._requires_grad and self._is_shared_lazy_leaf(): self.contiguous_leaf_(realize=False)
    self._set_requires_grad(value)
  def _set_requires_grad(self, value: bool | None) -> None:
    self._requires_grad = value
    if not value: _grad_tensors.pop(id(self), None)
    elif (ref := _grad_tensors.get(id(self))) is None or ref() is not self:
      ref = _grad_tensors[id(self)] = KeyRef(self, _unregister_grad)
      ref.key = id(self)
  def _is_shared_lazy_leaf(self) -> bool:
    """Is this a lazy value (no buffer of its own, not already a unique leaf) that no tensor requiring grad feeds?"""
    u = self._uop
    if buffers.buffer_view(u) is not None or (u.op is Ops.CONTIGUOUS and type(u.arg) is tuple and u.arg[:1] == ("leaf",)): return False
    return self.requires_grad is None

  # ---------------- autograd
  def requires_grad_(self, requires_grad: bool = True) -> Tensor:
    self._set_requires_grad(requires_grad)
    if requires_grad and buffers.buffer_view(self.uop) is None: self.contiguous_leaf_()  # (its own buffer, now)
    return self
  def contiguous_leaf_(self, realize: bool = True) -> Tensor:
    """Give this tensor a buffer of its own (a unique node: equal lazy values would otherwise share one gradient), now or,
    with realize=False, when it is first computed (a layer's constant-initialised weights: no kernel at build time)."""
    leaf = Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,), ("leaf", next(_leaf_ids))))
    self.uop = (leaf.realize() if realize else leaf).uop
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
    params = [t for t in _tensors_on(in_graph) if t.uop in in_graph and (t._requires_grad or t._requires_grad is None and dtypes.is_float(t.dtype)
                                                                  and t.uop.base.op is not Ops.CONST and t is not self)]
    if not params: raise RuntimeError("backward(): no tensor in this graph can have a gradient (all are constants, or requires_grad=False)")
    for t, g in zip(params, self.gradient(*params, gradient=gradient)):
      if g.shape != t.shape: raise RuntimeError(f"internal error: gradient shape {g.shape} != tensor shape {t.shape}")
      t.grad = g if t.grad is None else t.grad + g
    return self
  def contiguous_backward(self) -> Tensor:
    """tinygrad's marker for a contiguous gradient; the value (and the gradient) pass through unchanged here."""
    return Tensor(self.uop)

  # ---------------- assign and in-place writes (setitem, `x += y`) through views
  def assign(self, x: Any) -> Tensor:
    """Give this tensor the value of x (same shape; a number fills it, lists and arrays become tensors of self's dtype);
    the tensor object keeps its identity. Into a file (DISK) tensor, x's bytes are written to the file (_write_file)."""
    if not isinstance(x, Tensor):
      number = isinstance(x, (bool, int, float)) or (hasattr(x, "item") and getattr(x, "ndim", 1) == 0)
      x = Tensor.full(self.shape, x, dtype=self.dtype, device=value_device(self.device)) if number else Tensor(x, device=value_device(self.device), dtype=self.dtype)
    if x.shape != self.shape: raise TensorError(f"assign: shape {x.shape} does not match {self.shape}")
    if self.device.startswith("DISK"): return self._write_file(x)
    if x.device != self.device: raise TensorError(f"assign: device {x.device} does not match {self.device}")
    if (sym := getattr(self, "_symbolic_view", None)) is not None:  # x[:, pos:pos+n].assign(v) writes into x
      base, d, start, n = sym
      base._write_slice(d, start, n, x, written=self)
      self.uop = base._symbolic_read(d, start, n).uop
      return self
    with _realize_lock:
      if self._assign_into_slice(x.cast(self.dtype)) or self._write_through_view(x.cast(self.dtype)): return self
    self.uop = x.cast(self.dtype).uop
    # equal constants are one node: a tensor assigned one gets a node of its own (two parameters must not share a gradient)
    if self.uop.base.op is Ops.CONST: self.uop = UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,), ("leaf", next(_leaf_ids)))
    _pending_assigns[id(self)] = weakref.ref(self)
    return self
  def _write_file(self, x: Tensor) -> Tensor:
    """Write x's values now into the byte range of the file that self, a DISK tensor, is (tinygrad's safe_save writes a
    file so: bitcast views of an empty DISK tensor, assigned), and forget results computed from the file before."""
    if (view := buffers.buffer_view(self.uop)) is None:
      raise TensorError(f"assign into {self.device}: the target must be one contiguous byte range of the file (whole rows, or "
                        f"part of one row, of a step-1 slice); copy the data into such a range instead")
    if x.device.startswith("DISK"):  # bytes of a file; a copy to a file not made yet is its source's values
      x = Tensor(x.uop.src[0]) if x.uop.op is Ops.COPY else x.to(value_device(x.device))
    buffers.buffer_of(view).copyin(x.cast(self.dtype).contiguous()._buffer().as_memoryview())
    buffers.invalidate_device(self.device)
    return self
  def replace(self, x: Tensor) -> Tensor:
    if x.shape != self.shape: raise TensorError(f"replace: shape {x.shape} does not match {self.shape}")
    self.uop = x.uop
    return self
  def _write(self, value: Tensor) -> None:
    """Give self the full new value `value` in place, as `self[...] = v` does (indexing.py computes the value): into the
    data self holds or views, so every view of it sees the new values. Inside a TinyJit capture the views are rebound."""
    with _realize_lock:
      if self._write_through_view(value): return
      if _realize.is_capturing() or not self._write_in_place(value): self.assign(value)

  def _write_slice(self, d: int, start: UOp, n: int, value, written: Tensor | None = None) -> None:
    """self[..., start:start+n, ...] = value (dim d, start a bound Variable). When self holds a whole buffer, a kernel
    over the n positions writes them into it (a KV cache's step writes one position, not the whole cache); otherwise
    it is any other write, of self's whole new value. `written`: the slice being assigned to (its old value is not
    needed)."""
    with _realize_lock:
      if not self._assign_box({d: start}, self._slice_value(d, n, value), written): self._write(self._symbolic_value(d, start, n, value))

  def _assign_box(self, starts: dict[int, Any], v: Tensor, written: Tensor | None = None) -> bool:
    """Write v (self's dtype, shaped as the box) in place into the box of self that starts at `starts` (per dim, an int
    or a bound Variable; dims not in it start at 0), when self holds a whole buffer: one ASSIGN kernel stores only v's
    elements, and an int start is passed at launch (as a bound variable), so writing row after row compiles once.
    False where the caller must write self's whole new value: self holds no buffer, or autograd must see through v."""
    with _realize_lock:  # (held by the caller's write too: it is reentrant)
      if self.uop.op is Ops.ASSIGN: Tensor._realize_all(self)  # the previous write first: then self holds its buffer again
      base = _held_buffer(self.uop)  # (not a lazy node that reads another tensor's result: that one keeps its old value)
      if base is None or base.device.startswith("DISK") or self._requires_grad: return False
      if v.device != self.device: raise TensorError(f"assign: device {v.device} does not match {self.device}")
      if (grad_leaves := _grad_leaf_uops()) and any(u in grad_leaves for u in v.uop.toposort(lambda u: u.op is Ops.DETACH)): return False
      if 0 in v.shape: return True
      # a value read from the buffer it is written into (a shift) is computed into a buffer of its own first: the write's
      # threads would otherwise read positions other threads have already overwritten
      if base in v.uop.toposort(): v = v.contiguous()
      # lazy values computed from the old contents are computed now (as torch would have); views see the new contents
      readers = _reading([t for t in _lazy_tensors(self, written) if not _is_view_of(t.uop, base)], {base})
      if readers: Tensor._realize_all(*readers)
      # (a bound variable is its own tensor-level node; a start expression, `pos + 1`, becomes one)
      at = [Tensor(s, device=self.device).uop if isinstance(s, UOp) else Variable(f"start{d}", 0, self.shape[d] - v.shape[d]).bind(s)
            for d, s in starts.items()]
      self.uop = UOp(Ops.ASSIGN, self.dtype, (self.uop, v.uop, *at), tuple(starts))
      # a view of the buffer that another tensor took before the write reads the buffer, not this node, and no schedule
      # would order its reads after the write: then the write runs now. Otherwise with the next realize, so that what is
      # built on self after it (a KV cache's attention) is one graph with it
      if _viewed_by_another(base, self): Tensor._realize_all(self)
      else: _pending_assigns[id(self)] = weakref.ref(self)
      return True

  def _assign_into_slice(self, value: Tensor) -> bool:
    """If self is a step-1 slice (a shrink, reshaped at most) of a tensor that holds a whole buffer, as
    `cache.shrink(...)` or `cache[:, a:b]` is, write value into that box of the buffer in place (_assign_box): a KV
    cache's `cache[:, :, pos:pos+n].assign(kv)` with an int pos writes n positions, one kernel for every pos."""
    u = self.uop.src[0] if self.uop.op is Ops.RESHAPE else self.uop
    if u.op is not Ops.SHRINK or len(u.src) != 1 or (b := _held_buffer(h := u.src[0])) is None: return False
    holder = next((t for r in list((b.__dict__.get("holders") or {}).values()) if (t := r()) is not None and t.uop is h), None)
    if holder is None: return False
    return holder._assign_box({d: lo for d, ((lo, hi), n) in enumerate(zip(u.arg, h.shape)) if hi - lo != n}, value.reshape(u.shape))

  def _write_through_view(self, value: Tensor) -> bool:
    """If self is a view (slice, transpose, flip, detach, ...) of data another tensor or a buffer holds, write value
    (self's full new value) into that data, as torch and tinygrad do, and return True. The base gets
    `where(mask, value placed where the view reads, old base)`, so one fused kernel does the write."""
    chain = _view_chain(self.uop)
    if len(chain) == 1 and self.uop not in _viewed_buffers: return False  # a lazy value or an unviewed buffer: rebinding is the write
    # (a view that has been read has a copy of its values: the write still goes to what it views)
    if (owned := buffers.buffer_view(self.uop)) is not None and owned not in chain and len(chain) > 1: owned = None
    if owned is not None and (owned not in _viewed_buffers or owned not in chain): return False
    # self holds a whole buffer: rebinding it is the write, unless other tensors view that buffer
    if owned is not None and not _viewed_by_another(owned, self): return False
    others = [t for t in _tensors_on(chain[-1:]) if t is not self]
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
    grad_leaves = _grad_leaf_uops()
    if grad_leaves and any(u in grad_leaves for x in (self, value) for u in x.uop.toposort(lambda u: u.op is Ops.DETACH)): return False
    lazy = self.uop
    if (b := buffers.buffer_view(lazy)) is None or not _is_view_of(lazy, b):
      # a lazy tensor (or one whose value is a cached result other tensors share) gets a buffer of its own now;
      # views made of its lazy value become views of that buffer
      # views made of its lazy value become views of that buffer; not when another live tensor holds the same node (equal
      # lazy values are one node: x = Tensor.zeros(3); z = Tensor.zeros(3); v = z[1:]; x[1] = 5 changed v)
      others = _lazy_tensors(self)
      self.contiguous_leaf_()
      if not any(t.uop is lazy for t in others):
        for t in others:
          if _is_view_of(t.uop, lazy): t.uop = t.uop.substitute({lazy: self.uop})
    if self.uop.op not in (Ops.BUFFER, Ops.RESHAPE) or (base := buffers.buffer_view(self.uop)) is None or base.device != self.device or \
       base.device.startswith("DISK"): return False
    new = value.cast(self.dtype).contiguous()
    readers = _reading([t for t in _lazy_tensors(self) if not _is_view_of(t.uop, base)], {base, lazy})
    Tensor.realize_all(new, *readers)
    for t in readers: t.uop = v if (v := buffers.realized_view(t.uop)) is not None else t.uop  # pin each to the value computed from the old contents
    buffers.buffer_of(base).copyin(new._buffer().as_memoryview())
    buffers.invalidate(base)
    return True

  # ---------------- properties
  @property
  def shape(self) -> tuple[int, ...]: return self.uop.vshape  # a symbolic dim is its size expression (see uop.ops.Sym)
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
    if (c := self._concrete()) is not self: return str(c)
    computed = buffers.buffer_view(self.uop) is not None or _view_chain(self.uop)[-1].op is Ops.BUFFER  # or a view of a buffer
    if not computed and self.numel() > 1000: return repr(self)
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
    if _pending_assigns:
      tensors = tensors + tuple(t for r in list(_pending_assigns.values()) if (t := r()) is not None and not any(t is x for x in tensors))
      _pending_assigns.clear()
    # a result that another tensor may already hold (computed before, or twice in this call: equal graphs are one node)
    # goes to one tensor only; the others keep the lazy node, which reads the buffer until a write invalidates it
    shared = {t.uop for t in tensors if buffers.is_realized(t.uop)}
    # a TinyJit capture keeps plain buffers: its replays hand back the buffers it captured
    items, views = create_schedule([t.uop for t in tensors], permuted=not _realize.is_capturing())
    run_schedule(items)
    grad_leaves, written = None, []
    for t in tensors:
      if t.uop in views and t.uop.op is Ops.ASSIGN:  # written in place: the tensor is its buffer again
        t.uop = views[t.uop]
        written.append(buffers.buffer_view(t.uop))
        continue
      if t.uop in views:
        old = t.uop
        buffers.mark_realized(old, views[old])
        # a view of a buffer stays a view (later writes to the buffer drop the cached copy), as torch's views alias;
        # not in a TinyJit capture, whose replays write the copy's buffer
        if (old.op in GroupOp.Movement or old.op is Ops.DETACH) and _view_chain(old)[-1].op is Ops.BUFFER and not _realize.is_capturing(): continue
        # keep the lazy graph while it still leads to a tensor that needs a gradient (so y.numpy(); y.backward() works);
        # the realized map makes later kernels read the buffer instead of recomputing
        if not t._requires_grad:
          if grad_leaves is None: grad_leaves = _grad_leaf_uops() if _grad_tensors else ()
          if grad_leaves and _reads_leaf(old, grad_leaves): continue
        if old in shared: continue
        shared.add(old)
        t.uop = views[old]
    for base in written: buffers.invalidate(base)  # results computed from the old contents are stale
  def schedule(self, *lst: Tensor) -> list:
    """tinygrad's: the kernels (ScheduleItems, in order) that realizing self and lst would run, without running them.
    Realizing afterwards schedules again (from the schedule cache)."""
    with _realize_lock: return create_schedule([t.uop for t in (self, *lst)])[0]
  def schedule_with_vars(self, *lst: Tensor) -> tuple[list, dict[str, int]]:
    """tinygrad's: schedule() and the values of the Variables its kernels are launched with, by name (a Variable bound
    to several values in one schedule, as a long sort's passes do, shows its last; each item's var_vals has its own)."""
    items = self.schedule(*lst)
    return items, {v.arg[0]: x for si in items for v, x in si.var_vals}
  def kernelize(self, *lst: Tensor) -> Tensor:
    """tinygrad's: group the graph into kernels without running them. Here kernels are made when a tensor is realized,
    so this returns self unchanged."""
    return self
  def realize(self, *lst: Tensor, do_update_stats: bool = True) -> Tensor:
    """Compute this tensor and those of lst (one schedule). do_update_stats is tinygrad's and changes nothing: the
    counters in GlobalCounters are always updated."""
    with _realize_lock: Tensor._realize_all(self, *lst)  # (realize_all, inlined)
    return self
  def __reduce__(self):
    """pickle and copy.deepcopy: the values travel as bytes of a contiguous copy, with dtype, device (a DISK tensor's
    copy is on the CPU), shape and requires_grad; the lazy graph and .grad do not, as with torch. (By default the
    graph's nodes were pickled without their buffers' data: the copy crashed when read.)"""
    t = self._concrete().detach().contiguous()
    device = "CPU" if self.device.startswith("DISK") else self.device
    return _rebuild, (bytes(t._buffer().as_memoryview()), self.dtype, device, tuple(t.shape), self._requires_grad)
  def _buffer(self) -> Buffer:
    self.realize()
    # a realized view that is no whole buffer (a channels-last convolution seen as NCHW) is copied on a second pass
    if buffers.buffer_view(self.uop) is None: self.realize()
    return buffers.buffer_of(buffers.buffer_view(self.uop))
  def _concrete(self) -> Tensor:
    """self with each symbolic dim cut to its size's value (what reading the data out sees)."""
    if self.uop.vshape is self.uop.shape: return self
    return self.shrink(tuple((0, sym_value(s)) for s in self.shape)).contiguous()
  def _flat_values(self) -> list:
    if (c := self._concrete()) is not self: return c._flat_values()
    mv = self._buffer().as_memoryview()
    # memoryview has no bfloat16 format, and half ('e') only from Python 3.12: convert 16-bit words here
    if self.dtype == dtypes.bfloat16: return [bf16_to_float(v) for v in mv.cast("H")]
    if self.dtype == dtypes.float16: return list(struct.unpack(f"{self.numel()}e", mv))
    if self.dtype in dtypes.fp8s: return [fp8_to_float(v, self.dtype) for v in mv.cast("B")]
    return mv.cast(self.dtype.fmt).tolist()
  def data(self) -> memoryview:
    if (c := self._concrete()) is not self: return c.data()
    buf = self._buffer()
    buf.aliased = True  # the caller may write through the view, which TinyJit's write stamps cannot see
    mv = buf.as_memoryview()
    if self.dtype in (dtypes.bfloat16, dtypes.float16, *dtypes.fp8s): raise TypeError(f"memoryview has no {self.dtype} format here; use .float().data() or .numpy()")
    return mv.cast(self.dtype.fmt, self.shape) if self.numel() and self.shape else mv.cast(self.dtype.fmt)
  def tolist(self) -> Any:
    if (c := self._concrete()) is not self: return c.tolist()
    vals = self._flat_values()
    def nest(v, shape):
      if not shape: return v[0]
      step = prod(shape[1:])
      return [nest(v[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
    return nest(vals, self.shape)
  def item(self) -> Any:
    if (c := self._concrete()) is not self: return c.item()
    if self.numel() != 1: raise TensorError(f"item() needs a tensor with exactly one element, this one has shape {self.shape}")
    return self._flat_values()[0]
  def numpy(self):
    import numpy as np
    if (c := self._concrete()) is not self: return c.numpy()
    raw = bytes(self._buffer().as_memoryview())
    if self.dtype in dtypes.fp8s:  # numpy has no fp8: float32 values (as bfloat16's), from a table of the 256 codes
      return np.array([fp8_to_float(c, self.dtype) for c in range(256)], np.float32)[np.frombuffer(raw, np.uint8)].reshape(self.shape)
    arr = np.frombuffer(raw, dtype=_numpy_dtype(self.dtype)).reshape(self.shape).copy()
    if self.dtype == dtypes.bfloat16: arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr
  def __array__(self, dtype=None, copy=None):
    arr = self.numpy()
    return arr.astype(dtype) if dtype is not None else arr
  def to(self, device: str | tuple[str, ...] | None) -> Tensor:
    if isinstance(device, (tuple, list)): return self.shard(device)
    device = canonicalize(device)
    if device == self.device: return self
    return Tensor(UOp(Ops.COPY, self.dtype, (self.contiguous().uop, UOp(Ops.DEVICE, arg=device))))
  def to_(self, device: str | None) -> Tensor:
    self.uop = self.to(device).uop
    return self
  def shard(self, devices: str | tuple[str, ...] | list[str], axis: int | None = None) -> Tensor:
    """tinygrad's: this tensor split along `axis` (or copied whole) across `devices`. A tensor here lives on one device,
    so one device is a move to it (to()); several raise NotImplementedError rather than run on one of them unasked."""
    devices = (devices,) if isinstance(devices, str) else tuple(devices)
    if axis is not None: _norm_axis(axis, self.ndim)
    if len(devices) == 1: return self.to(devices[0])
    raise NotImplementedError(f"shard across {devices}: fusegrad has no multi-device tensors; keep the tensor on one device "
                              f"(x.to({devices[0] if devices else 'CPU'!r})) and run the model there")
  def shard_(self, devices: str | tuple[str, ...] | list[str], axis: int | None = None) -> Tensor:
    self.uop = self.shard(devices, axis).uop
    return self
  def shard_like(self, y: Tensor) -> Tensor: return self.to(y.device)
  def clone(self, device: str | None = None, **kwargs) -> Tensor:
    """A copy in a buffer of its own, on `device` (default: self's device), as tinygrad's clone(device=)."""
    x = self.to(device) if device is not None else self
    return Tensor(UOp(Ops.CONTIGUOUS, x.dtype, (x.uop,)))
  def contiguous(self) -> Tensor:
    if buffers.buffer_view(self.uop) is not None: return self
    return self._wrap(self.uop.contiguous())  # (a CONTIGUOUS already is one, seen through reshapes)
  def detach(self) -> Tensor:
    _note_view(self.uop)
    return Tensor(UOp(Ops.DETACH, self.dtype, (self.uop,)) if self.uop.op is not Ops.DETACH else self.uop)
  def __float__(self) -> float:
    if self.numel() != 1: raise TensorError(f"only one element tensors can be converted to Python scalars, got shape {self.shape}")
    return float(self.item())
  def __int__(self) -> int:
    if self.numel() != 1: raise TensorError(f"only one element tensors can be converted to Python scalars, got shape {self.shape}")
    return int(self.item())
  def cpu(self) -> Tensor: return self.to("CPU")

def _rebuild(raw: bytes, dtype: DType, device: str, shape: tuple[int, ...], requires_grad: bool | None) -> Tensor:
  """A pickled tensor (Tensor.__reduce__) from its bytes."""
  return Tensor(Tensor._from_bytes(raw, dtype, device, shape), requires_grad=requires_grad)

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

def _reading(tensors: list[Tensor], nodes: set[UOp]) -> list[Tensor]:
  """The tensors whose graphs contain one of `nodes`, in one walk over the union of their graphs (live graphs share most
  of their nodes: a model's activations each extend the one before, so one walk per tensor would be quadratic)."""
  memo: dict[UOp, bool] = dict.fromkeys(nodes, True)
  for t in tensors:
    stack = [t.uop]
    while stack:
      u = stack[-1]
      if u in memo: stack.pop(); continue
      if todo := [x for x in u.src if x not in memo]: stack.extend(todo); continue
      memo[stack.pop()] = any(memo[x] for x in u.src)
  return [t for t in tensors if memo[t.uop]]

def _is_view_of(u: UOp, base: UOp) -> bool:
  """Is u only movement ops over `base` (so it reads the buffer's current contents whenever it is evaluated)?"""
  if (b := _held_buffer(u)) is not None: return u is base or b is base  # most live tensors: no chain to walk
  return base in _view_chain(u)
