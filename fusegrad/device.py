"""Device registry and buffers."""
from __future__ import annotations
import functools, importlib, itertools, os, pkgutil
from typing import Any
from fusegrad.dtype import DType
from fusegrad.helpers import DEBUG, DEV, GlobalCounters, Target

@functools.cache
def device_names() -> tuple[str, ...]:
  """Every device there is a runtime for: the module fusegrad/runtime/ops_<name>.py is device NAME (found, not listed)."""
  import fusegrad.runtime  # the (empty) package, for its folders: a plug-in may add one to its __path__
  return tuple(sorted(m.name[len("ops_"):].upper() for m in pkgutil.iter_modules(fusegrad.runtime.__path__) if m.name.startswith("ops_")))

def _runtime(base: str):
  return importlib.import_module(f"fusegrad.runtime.ops_{base.lower()}")

def unavailable_reason(device: str) -> str | None:
  """Why `device` cannot run kernels here (a missing compiler or driver), or None. A runtime module says so with its
  own `unavailable()`; one that cannot even be imported is unavailable for that reason."""
  try: mod = _runtime(canonicalize(device).split(":")[0])
  except ImportError as e: return f"{device}: its runtime failed to import ({e})"
  return mod.unavailable() if hasattr(mod, "unavailable") else None

def canonicalize(device: str | None) -> str:
  if device is None: return Device.DEFAULT
  base, _, rest = str(device).partition(":")
  base = base.upper()
  if base == "CLANG": base = "CPU"
  if base not in device_names(): raise ValueError(f"unknown device {device!r}; available: {', '.join(device_names())}")
  if base == "DISK": return f"DISK:{rest}"
  return base if rest in ("", "0") else f"{base}:{rest}"

class _Device:
  """`Device["CPU"]` is the device object; `Device.DEFAULT` comes from DEV=DEVICE[:RENDERER] (default CPU)."""
  def __init__(self):
    self._opened: dict[str, Any] = {}
    self._default_cache: tuple[Target, str] | None = None
  def __getitem__(self, name: str):
    if (dev := self._opened.get(name)) is not None: return dev  # a canonical name (every launch asks): no parsing
    name = canonicalize(name)
    if name not in self._opened:
      dev = self._opened[name] = _runtime(name.split(":")[0]).open_device(name)
      dev.device = name  # tinygrad programs read Device[d].device (and Device[d].renderer, which every runtime has)
      if DEBUG >= 1: print(f"opened device {name}")
    return self._opened[name]
  def canonicalize(self, device: str | None) -> str: return canonicalize(device)
  @property
  def default(self) -> Any: return self[self.DEFAULT]
  @property
  def DEFAULT(self) -> str:
    target = DEV.value
    if self._default_cache is None or self._default_cache[0] is not target:  # DEV changed (Context, assignment): parse again
      dev = target.device or next((k for k in ("CPU", "PYTHON", "NULL") if os.getenv(k, "") == "1"), "CPU")
      self._default_cache = (target, canonicalize(dev))
    return self._default_cache[1]
  @DEFAULT.setter
  def DEFAULT(self, v: str):
    # kept (tinygrad now wants Context(DEV=...)): sets DEV's device and keeps its renderer choice, so switching to
    # PYTHON and back to CPU under DEV=CPU:CLANG still compiles with clang
    DEV.value = Target(canonicalize(v), DEV.value.renderer)
  @property
  def renderer_override(self) -> str | None: return DEV.renderer or None
  def get_available_devices(self) -> list[str]:
    """The devices that can run kernels here (DISK, which maps files, is not one)."""
    return [d for d in device_names() if d != "DISK" and unavailable_reason(d) is None]
  def status(self) -> dict[str, str]:
    """Each device, "ok" or the reason it cannot run here (`python -c "from fusegrad import Device; print(Device.status())"`)."""
    return {d: unavailable_reason(d) or "ok" for d in device_names() if d != "DISK"}

Device = _Device()

def is_dtype_supported(dtype: DType, device: str | None = None) -> bool:
  """Whether kernels on `device` (default: Device.DEFAULT) can use `dtype`, as its renderer says."""
  return dtype.base in Device[canonicalize(device)].renderer.supported_dtypes()

# Freed device memory is kept per (device, size) and handed to the next buffer of that size: fresh memory costs a
# page fault per 4 KiB on first touch, which for a training step's large activations costs more than the kernels.
ALLOC_CACHE_BYTES = 1 << 30
_free_lists: dict[tuple[str, int], list] = {}  # (device, bytes) -> freed memory, the most recently freed last
_cached_bytes = 0
# the keys of _free_lists in the order memory was last freed into them, oldest first: a full cache drops the oldest
# memory of the key freed into least recently (every step is O(1): a model's many sizes made a scan per free costly)
_lru: dict[tuple[str, int], None] = {}

def _cached_alloc(device: str, nbytes: int):
  global _cached_bytes
  if mems := _free_lists.get(key := (device, nbytes)):
    _cached_bytes -= nbytes
    mem = mems.pop()
    if not mems: del _lru[key]
    return mem
  return Device[device].allocator.alloc(nbytes)

def _cache_freed(device: str, nbytes: int, mem) -> None:
  global _cached_bytes
  _free_lists.setdefault(key := (device, nbytes), []).append(mem)
  _lru.pop(key, None)
  _lru[key] = None
  _cached_bytes += nbytes
  while _cached_bytes > ALLOC_CACHE_BYTES and _lru:
    oldest = next(iter(_lru))
    (mems := _free_lists[oldest]).pop(0)
    if not mems: del _lru[oldest]
    _cached_bytes -= oldest[1]

# Every write through the runtime (a kernel's output, a copy) gives the buffer a new number from this one counter, so
# (buffer, contents) pairs never repeat: a TinyJit replay skips a kernel whose buffers all carry the numbers they had
# after its last run. A new buffer takes one too.
write_stamps = itertools.count()

class Buffer:
  """`size` elements of `dtype` on `device`; memory is allocated on first use and freed with the object."""
  aliased = False  # set once Tensor.data() has handed out a writable view: writes through it carry no stamp
  def __init__(self, device: str, size: int, dtype: DType, initial: bytes | memoryview | None = None):
    self.device, self.size, self.dtype = device, size, dtype
    self._mem: Any = None
    self.stamp = next(write_stamps)
    if initial is not None: self.copyin(initial)
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  def ensure_allocated(self) -> Buffer:
    if self._mem is None:
      self._mem = _cached_alloc(self.device, self.nbytes)
      GlobalCounters.mem_used += self.nbytes
      GlobalCounters.mem_peak = max(GlobalCounters.mem_peak, GlobalCounters.mem_used)
    return self
  @property
  def is_allocated(self) -> bool: return self._mem is not None
  def __del__(self):
    if getattr(self, "_mem", None) is not None:
      GlobalCounters.mem_used -= self.nbytes
      if getattr(self, "_exported", False): return  # a memoryview from .data() may still point at it: never reuse
      _cache_freed(self.device, self.nbytes, self._mem)
  def copyin(self, data: bytes | memoryview):
    mv = memoryview(data).cast("B")
    if mv.nbytes != self.nbytes: raise ValueError(f"copyin of {mv.nbytes} bytes into a buffer of {self.nbytes} bytes ({self.size} x {self.dtype})")
    self.ensure_allocated()
    Device[self.device].allocator.copyin(self._mem, mv)
    self.stamp = next(write_stamps)
    return self
  def as_memoryview(self) -> memoryview:
    """The buffer's bytes (a copy where the device cannot expose its memory)."""
    self.ensure_allocated()
    self._exported = True
    return Device[self.device].allocator.as_memoryview(self._mem, self.nbytes)
  def __repr__(self) -> str: return f"<Buffer {self.device} {self.size} {self.dtype}>"

# ---------------- sub-buffer views (used by the DISK device: a tensor that is a byte range of a file)
class BufferView(Buffer):
  """`size` elements of `dtype` starting `offset` bytes into `base`: shares base's memory, never allocates its own.
  The device's allocator must implement `offset(mem, byte_offset, nbytes)`, returning memory it accepts for copyin/as_memoryview."""
  def __init__(self, base: Buffer, offset: int, size: int, dtype: DType):
    while isinstance(base, BufferView): base, offset = base.base, base.offset + offset
    if offset < 0 or size < 0 or offset + size * dtype.itemsize > base.nbytes:
      raise ValueError(f"view of {size} x {dtype} at byte {offset} does not fit in {base} ({base.nbytes} bytes)")
    self.base, self.offset = base, offset
    super().__init__(base.device, size, dtype)
  def ensure_allocated(self) -> Buffer:
    if self._mem is None:
      allocator = Device[self.device].allocator
      if not hasattr(allocator, "offset"): raise NotImplementedError(f"device {self.device} does not support buffer views")
      self._mem = allocator.offset(self.base.ensure_allocated()._mem, self.offset, self.nbytes)
    return self
  def __del__(self): pass  # the memory belongs to (and is counted for) the base buffer
  def __repr__(self) -> str: return f"<BufferView {self.device} {self.size} {self.dtype} at byte {self.offset}>"
