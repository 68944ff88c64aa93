"""CUDA device: kernels in CUDA C, compiled by NVRTC to PTX and run through the driver API (libcuda), both with ctypes.

Nothing here needs the CUDA toolkit: the driver comes with the NVIDIA driver, NVRTC from the `nvidia-cuda-nvrtc` wheel.
`nvrtc_compile` and `ptxas` work without a GPU, so the renderer's output can be checked on any machine."""
from __future__ import annotations
import ctypes, ctypes.util, functools, glob, importlib.util, os, re, shutil, subprocess, sys, tempfile
from fusegrad.renderer import ProgramSpec

# ---------------- the driver

c_ptr, c_size, c_int, c_uint, c_void, byref = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p, ctypes.byref
# the driver calls we make and their argument types: without argtypes ctypes passes a Python int as a 32-bit int,
# which would cut a 64-bit device pointer
DRIVER_API: dict[str, list] = {
  "cuInit": [c_uint], "cuDeviceGetCount": [c_void], "cuDeviceGet": [c_void, c_int],
  "cuDeviceGetAttribute": [c_void, c_int, c_int], "cuDevicePrimaryCtxRetain": [c_void, c_int], "cuCtxSetCurrent": [c_void],
  "cuCtxSynchronize": [], "cuMemAlloc_v2": [c_void, c_size], "cuMemFree_v2": [c_ptr],
  "cuMemcpyHtoD_v2": [c_ptr, c_void, c_size], "cuMemcpyDtoH_v2": [c_void, c_ptr, c_size],
  "cuModuleLoadData": [c_void, c_void], "cuModuleGetFunction": [c_void, c_void, ctypes.c_char_p], "cuModuleUnload": [c_void],
  "cuLaunchKernel": [c_void, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void, c_void, c_void],
  "cuGetErrorName": [c_int, c_void],
}
COMPUTE_CAPABILITY_MAJOR, COMPUTE_CAPABILITY_MINOR = 75, 76  # CUdevice_attribute

# names of the errors we give advice for, for a driver whose cuGetErrorName cannot say (or a test's fake driver)
ERROR_NAMES = {1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 3: "CUDA_ERROR_NOT_INITIALIZED",
               34: "CUDA_ERROR_STUB_LIBRARY", 36: "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", 46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
               100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE", 201: "CUDA_ERROR_INVALID_CONTEXT",
               209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 218: "CUDA_ERROR_INVALID_PTX", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
               304: "CUDA_ERROR_OPERATING_SYSTEM", 500: "CUDA_ERROR_NOT_FOUND", 700: "CUDA_ERROR_ILLEGAL_ADDRESS",
               701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
               804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 999: "CUDA_ERROR_UNKNOWN"}
NVRTC_PIN = "nvidia-cuda-nvrtc==13.0.*"
# what to do about an error, where the error's name alone does not say
ERROR_HINTS = {
  34: "libcuda.so.1 is the CUDA toolkit's stub, not a driver: install the NVIDIA driver, or take the stub's folder off LD_LIBRARY_PATH",
  36: "the NVIDIA driver is too old: update it",
  46: "the GPU is busy in exclusive mode or prohibited (nvidia-smi shows its compute mode)",
  100: "no GPU visible (check nvidia-smi, and CUDA_VISIBLE_DEVICES if it is set)",
  222: f"the NVIDIA driver is older than the NVRTC that made the PTX: pip install \"{NVRTC_PIN}\" or update the driver",
  304: "the operating system refused (in a container, start it with GPU access, e.g. docker run --gpus all)",
  700: "a kernel read or wrote outside its buffers; this process cannot use the GPU any more: restart it",
  701: "the kernel asks for more threads or registers per block than the GPU has",
  803: "the driver library and the loaded kernel module are different versions: reboot, or reinstall the NVIDIA driver",
  804: "this GPU does not support the forward-compatibility driver: use the driver that came with the system",
  999: "often the nvidia kernel module is not loaded or does not match the driver (check nvidia-smi)",
}

def _load_libcuda():
  """The driver library with its argument types declared; OSError when there is none, AttributeError when it is too old."""
  lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
  for fn, args in DRIVER_API.items(): getattr(lib, fn).argtypes = args
  return lib

def error_name(lib, rc: int) -> str:
  """cuGetErrorName's name for `rc`, else ours, else its number."""
  s = ctypes.c_char_p()
  try:
    if lib.cuGetErrorName(rc, byref(s)) == 0 and s.value: return s.value.decode()
  except Exception: pass  # a driver (or fake) without cuGetErrorName
  return ERROR_NAMES.get(rc, f"CUDA error {rc}")

def describe(lib, rc: int, call: str) -> str:
  hint = ERROR_HINTS.get(rc)
  return f"{call} failed with {error_name(lib, rc)} ({rc})" + (f": {hint}" if hint else "")

def check(lib, rc: int, call: str) -> None:
  if rc != 0: raise RuntimeError(f"CUDA: {describe(lib, rc, call)}")

@functools.cache
def _driver() -> tuple:
  """(libcuda, GPU count, None) once cuInit succeeded and a GPU exists, else (None, 0, why not): probed once per process."""
  try: lib = _load_libcuda()
  except OSError: return None, 0, "CUDA: no NVIDIA driver (libcuda.so.1 not found): install the NVIDIA driver to use CUDA"
  except AttributeError as e: return None, 0, f"CUDA: the NVIDIA driver is too old ({e}): update it"
  try:
    if (rc := lib.cuInit(0)) != 0: return None, 0, f"CUDA: {describe(lib, rc, 'cuInit')}"
    count = c_int()
    if (rc := lib.cuDeviceGetCount(byref(count))) != 0: return None, 0, f"CUDA: {describe(lib, rc, 'cuDeviceGetCount')}"
    if count.value < 1: return None, 0, "CUDA: the driver sees no GPU: check nvidia-smi, and CUDA_VISIBLE_DEVICES if it is set"
    return lib, count.value, None
  except Exception as e:  # unavailable() must answer, whatever the driver does
    return None, 0, f"CUDA: probing the driver failed ({type(e).__name__}: {e}): check nvidia-smi"

def unavailable() -> str | None:
  """Why CUDA cannot run here (no driver, cuInit failed, no GPU), or None."""
  return _driver()[2]

# ---------------- memory

class CUDAMemory:
  """`nbytes` of device memory at `ptr`; freed when the last reference goes. A view (`base` set) frees nothing."""
  __slots__ = ("device", "ptr", "nbytes", "base")
  def __init__(self, device: CUDADevice, ptr: int, nbytes: int, base: CUDAMemory | None = None):
    self.device, self.ptr, self.nbytes, self.base = device, ptr, nbytes, base
  def __del__(self, is_finalizing=sys.is_finalizing):
    # at interpreter exit the process frees it, and the driver may be gone; __del__ must not raise
    if self.base is not None or is_finalizing(): return
    try: self.device.free(self.ptr)
    except Exception: pass
  def __repr__(self) -> str: return f"<CUDAMemory {self.device.name} 0x{self.ptr:x} {self.nbytes} bytes>"

class CUDAAllocator:
  def __init__(self, device: CUDADevice): self.device = device
  def alloc(self, nbytes: int) -> CUDAMemory:
    dev, ptr = self.device, c_ptr()
    dev.activate()
    if (rc := dev.lib.cuMemAlloc_v2(byref(ptr), max(nbytes, 1))) != 0:  # a zero-size buffer still needs a distinct pointer
      raise MemoryError(f"cannot allocate {nbytes} bytes of {dev.name} memory: {describe(dev.lib, rc, 'cuMemAlloc_v2')}")
    return CUDAMemory(dev, ptr.value, nbytes)
  def copyin(self, mem: CUDAMemory, mv: memoryview):
    if mv.nbytes == 0: return
    # pageable memory: the call returns once the bytes are staged, so `src` may go right after it
    src = (ctypes.c_char * mv.nbytes).from_buffer_copy(mv) if mv.readonly else (ctypes.c_char * mv.nbytes).from_buffer(mv)
    self.device.activate()
    check(self.device.lib, self.device.lib.cuMemcpyHtoD_v2(mem.ptr, src, mv.nbytes), "cuMemcpyHtoD_v2")
  def as_memoryview(self, mem: CUDAMemory, nbytes: int) -> memoryview:
    out = bytearray(nbytes)
    if nbytes:
      # on the default stream, so it waits for the kernels that wrote the buffer
      self.device.activate()
      check(self.device.lib, self.device.lib.cuMemcpyDtoH_v2((ctypes.c_char * nbytes).from_buffer(out), mem.ptr, nbytes), "cuMemcpyDtoH_v2")
    return memoryview(out)
  def offset(self, mem: CUDAMemory, byte_offset: int, nbytes: int) -> CUDAMemory:
    """A byte range of `mem` (a BufferView's memory); it keeps `mem` alive."""
    return CUDAMemory(self.device, mem.ptr + byte_offset, nbytes, base=mem)

# ---------------- programs

class CUDAProgram:
  """One kernel: PTX from NVRTC, JIT-compiled for the GPU by the driver when the module loads."""
  def __init__(self, device: CUDADevice, spec: ProgramSpec):
    if spec.global_size is None or spec.local_size is None:
      raise ValueError(f"CUDA kernel {spec.name} has no launch size (global_size {spec.global_size}, local_size {spec.local_size})")
    self.device, self.spec, self.grid, self.block = device, spec, spec.global_size, spec.local_size
    ptx = ctypes.create_string_buffer(nvrtc_compile(spec.src, device.arch, f"{spec.name}.cu"))  # the driver wants it NUL-terminated
    lib, self.module, self.func = device.lib, c_void(), c_void()
    device.activate()
    check(lib, lib.cuModuleLoadData(byref(self.module), ptx), f"cuModuleLoadData of kernel {spec.name} for {device.arch}")
    check(lib, lib.cuModuleGetFunction(byref(self.func), self.module, spec.name.encode()), f"cuModuleGetFunction({spec.name!r})")
    self.n_globals, self.n_vars = len(spec.globals), len(spec.vars)
  def __call__(self, mems: list, var_vals: list[int]):
    # kernelParams points at each argument's value: the buffers' device pointers, then the variables as 32-bit ints
    ptrs = (c_ptr * self.n_globals)(*[mems[i].ptr for i, _ in self.spec.globals])
    ints = (ctypes.c_int32 * self.n_vars)(*var_vals)
    p, v = ctypes.addressof(ptrs), ctypes.addressof(ints)
    params = (c_void * (self.n_globals + self.n_vars))(*[p + 8 * k for k in range(self.n_globals)], *[v + 4 * k for k in range(self.n_vars)])
    lib = self.device.lib
    self.device.activate()
    rc = lib.cuLaunchKernel(self.func, *self.grid, *self.block, 0, None, params, None)
    check(lib, rc, f"cuLaunchKernel of {self.spec.name} (grid {self.grid}, block {self.block})")
  def __del__(self, is_finalizing=sys.is_finalizing):
    if is_finalizing() or not getattr(self, "module", None): return
    try:
      self.device.activate()
      self.device.lib.cuModuleUnload(self.module)
    except Exception: pass

# ---------------- the device

def ordinal(name: str) -> int:
  """The GPU number of a device name: CUDA is 0, CUDA:1 is 1."""
  rest = name.partition(":")[2] or "0"
  if not rest.isdigit(): raise ValueError(f"{name}: a CUDA device is CUDA or CUDA:<GPU number>, e.g. CUDA:1")
  return int(rest)

class CUDADevice:
  beam_search = False  # BEAM's timing of candidate kernels is not tried on GPUs yet
  def __init__(self, name: str):
    lib, count, why = _driver()
    if why is not None: raise RuntimeError(why)
    self.name, self.lib, self.ordinal = name, lib, ordinal(name)
    if self.ordinal >= count: raise RuntimeError(f"{name}: no such GPU (the driver sees {count}: CUDA:0 to CUDA:{count - 1})")
    self.cu_device, self.context = c_int(), c_void()
    check(lib, lib.cuDeviceGet(byref(self.cu_device), self.ordinal), f"cuDeviceGet({self.ordinal})")
    self.arch = f"sm_{self._attribute(COMPUTE_CAPABILITY_MAJOR)}{self._attribute(COMPUTE_CAPABILITY_MINOR)}"
    # the primary context is the one every library in the process shares on this GPU; never released (it lives as
    # long as the process, like the device object)
    check(lib, lib.cuDevicePrimaryCtxRetain(byref(self.context), self.cu_device), "cuDevicePrimaryCtxRetain")
    self.allocator = CUDAAllocator(self)
    from fusegrad.renderer.cuda import CUDARenderer
    self.renderer = CUDARenderer(name, arch=self.arch)
    # NVRTC compiles in the calling thread and releases the GIL: a schedule's new kernels compile side by side
    self.compile_workers = min(8, os.cpu_count() or 1)
  def _attribute(self, attr: int) -> int:
    out = c_int()
    check(self.lib, self.lib.cuDeviceGetAttribute(byref(out), attr, self.cu_device), f"cuDeviceGetAttribute({attr})")
    return out.value
  def activate(self):
    """Make this GPU's context current: it is per thread, and tensors may be used from several threads."""
    check(self.lib, self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
  def free(self, ptr: int):
    self.activate()
    check(self.lib, self.lib.cuMemFree_v2(ptr), "cuMemFree_v2")
  def compile(self, spec: ProgramSpec) -> CUDAProgram: return CUDAProgram(self, spec)
  def synchronize(self):
    # a kernel's own faults (out-of-bounds access) surface here, at the first call after it
    self.activate()
    check(self.lib, self.lib.cuCtxSynchronize(), f"cuCtxSynchronize on {self.name}")

def open_device(name: str) -> CUDADevice: return CUDADevice(name)

# ---------------- NVRTC and ptxas (no GPU needed)

NVRTC_MISSING = (f"CUDA: NVRTC (the CUDA C compiler library) was not found: pip install \"{NVRTC_PIN}\" "
                 "(13.0, not newer: a newer NVRTC emits PTX that driver 580 and ptxas 13.0 reject)")
NVRTC_API: dict[str, list] = {
  "nvrtcCreateProgram": [c_void, ctypes.c_char_p, ctypes.c_char_p, c_int, c_void, c_void],
  "nvrtcCompileProgram": [c_void, c_int, c_void], "nvrtcDestroyProgram": [c_void],
  "nvrtcGetProgramLogSize": [c_void, c_void], "nvrtcGetProgramLog": [c_void, c_void],
  "nvrtcGetPTXSize": [c_void, c_void], "nvrtcGetPTX": [c_void, c_void], "nvrtcGetErrorString": [c_int],
}

def _find_nvrtc() -> tuple[str | None, str] | None:
  """(libnvrtc-builtins path or None, libnvrtc path): the nvidia-cuda-nvrtc wheel's (13.x, or 12.x's layout), else the
  system's; None when there is neither."""
  try: spec = importlib.util.find_spec("nvidia")
  except (ImportError, ValueError): spec = None
  for root in (spec.submodule_search_locations or []) if spec else []:
    for lib_dir in (os.path.join(root, "cu13", "lib"), os.path.join(root, "cuda_nvrtc", "lib")):
      libs = sorted(p for p in glob.glob(os.path.join(lib_dir, "libnvrtc.so.*")) if ".alt." not in p)
      if libs:
        builtins = sorted(p for p in glob.glob(os.path.join(lib_dir, "libnvrtc-builtins.so.*")) if ".alt." not in p)
        return (builtins[0] if builtins else None, libs[0])
  return (None, found) if (found := ctypes.util.find_library("nvrtc")) else None

@functools.cache
def _nvrtc():
  if (paths := _find_nvrtc()) is None: raise RuntimeError(NVRTC_MISSING)
  builtins, path = paths
  try:
    # NVRTC dlopens its builtins by name; loading them globally first means it finds them without LD_LIBRARY_PATH
    if builtins: ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(path)
    for fn, args in NVRTC_API.items(): getattr(lib, fn).argtypes = args
  except (OSError, AttributeError) as e: raise RuntimeError(f"{NVRTC_MISSING}; loading {path} failed: {e}") from None
  lib.nvrtcGetErrorString.restype = ctypes.c_char_p
  return lib

def compute_arch(arch: str) -> str:
  """The virtual architecture the PTX is written for: sm_80 -> compute_80."""
  if not (m := re.fullmatch(r"sm_(\d+[a-z]?)", arch)): raise ValueError(f"CUDA arch {arch!r} is not of the form sm_XY (e.g. sm_80)")
  return f"compute_{m.group(1)}"

def numbered(src: str, limit: int = 400) -> str:
  lines = src.splitlines()
  out = [f"{i:4d} {line}" for i, line in enumerate(lines[:limit], 1)]
  return "\n".join(out + ([f"... ({len(lines) - limit} more lines)"] if len(lines) > limit else []))

def _nvrtc_bytes(lib, prog, size_fn, get_fn) -> bytes:
  n = c_size()
  size_fn(prog, byref(n))
  buf = ctypes.create_string_buffer(n.value)
  get_fn(prog, buf)
  return buf.raw.rstrip(b"\0")

def nvrtc_compile(src: str, arch: str = "sm_80", name: str = "kernel.cu") -> bytes:
  """CUDA C -> PTX for `arch` (sm_XY). Exact float math: no -use_fast_math, so results match the CPU's."""
  lib, prog = _nvrtc(), c_void()
  opts = [o.encode() for o in (f"--gpu-architecture={compute_arch(arch)}", "-default-device", "--std=c++17")]
  if (rc := lib.nvrtcCreateProgram(byref(prog), src.encode(), name.encode(), 0, None, None)) != 0:
    raise RuntimeError(f"CUDA: nvrtcCreateProgram failed: {lib.nvrtcGetErrorString(rc).decode()}")
  try:
    if (rc := lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))) != 0:
      log = _nvrtc_bytes(lib, prog, lib.nvrtcGetProgramLogSize, lib.nvrtcGetProgramLog).decode(errors="replace")
      raise RuntimeError(f"CUDA: NVRTC failed to compile {name} for {arch} ({lib.nvrtcGetErrorString(rc).decode()}):\n"
                         f"{log.strip()}\n--- source ---\n{numbered(src)}")
    return _nvrtc_bytes(lib, prog, lib.nvrtcGetPTXSize, lib.nvrtcGetPTX)
  finally: lib.nvrtcDestroyProgram(byref(prog))

def find_ptxas() -> str | None:
  """The ptxas binary (CUDA toolkit): on PATH, else /usr/local/cuda/bin, else $CUDA_HOME/bin."""
  cuda_home = os.getenv("CUDA_HOME")
  for p in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas", os.path.join(cuda_home, "bin", "ptxas") if cuda_home else None):
    if p and os.path.isfile(p) and os.access(p, os.X_OK): return p
  return None

def ptxas(ptx: bytes, arch: str) -> bytes:
  """PTX -> a cubin for `arch` (sm_XY): checks PTX the way the driver's JIT would, without a GPU."""
  if (exe := find_ptxas()) is None: raise RuntimeError("CUDA: ptxas not found: install the CUDA toolkit, or put its bin/ on PATH or set CUDA_HOME")
  with tempfile.TemporaryDirectory() as d:
    src, out = os.path.join(d, "kernel.ptx"), os.path.join(d, "kernel.cubin")
    with open(src, "wb") as f: f.write(ptx)
    proc = subprocess.run([exe, f"--gpu-name={arch}", src, "-o", out], capture_output=True)
    if proc.returncode != 0: raise RuntimeError(f"CUDA: ptxas failed for {arch}:\n{proc.stderr.decode(errors='replace').strip()}")
    with open(out, "rb") as f: return f.read()
