"""The CUDA runtime without a GPU: how it says CUDA is unavailable, its driver plumbing against a fake libcuda whose
"device memory" is host memory, and NVRTC / ptxas, which need no GPU."""
import ctypes, sys, threading, types
import pytest
from fusegrad import Context, Device, Tensor, Variable
from fusegrad.renderer import ProgramSpec
from fusegrad.runtime import ops_cuda

KERNEL = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }'

def nvrtc_found() -> bool:
  try: ops_cuda._nvrtc()
  except RuntimeError: return False
  return True

needs_nvrtc = pytest.mark.skipif(not nvrtc_found(), reason=f'NVRTC is not installed (pip install "{ops_cuda.NVRTC_PIN}")')
needs_ptxas = pytest.mark.skipif(ops_cuda.find_ptxas() is None, reason="ptxas not found (CUDA toolkit not installed)")

@pytest.fixture(autouse=True)
def fresh_probe():
  """Each test probes the driver afresh (the probe is cached per process) and leaves no fake behind."""
  ops_cuda._driver.cache_clear()
  yield
  ops_cuda._driver.cache_clear()

# ---------------- this machine: no GPU, no driver

@pytest.fixture
def reason():
  if (why := ops_cuda.unavailable()) is None: pytest.skip("a GPU and driver are present here")
  return why

def test_unavailable_says_what_is_missing(reason):
  assert reason.startswith("CUDA: ") and "\n" not in reason and ("install" in reason or "check" in reason)

def test_opening_the_device_raises_the_reason(reason):
  with pytest.raises(RuntimeError) as e: ops_cuda.open_device("CUDA")
  assert str(e.value) == reason

def test_status_lists_cuda_with_its_reason(reason, monkeypatch):
  assert Device.status()["CUDA"] == reason and "CUDA" not in Device.get_available_devices()
  for var in ("CPU", "PYTHON", "NULL"): monkeypatch.delenv(var, raising=False)
  with Context(DEV=""): assert Device.DEFAULT == "CPU"

def test_a_tensor_on_cuda_raises_the_reason(reason):
  with pytest.raises(RuntimeError, match="^CUDA: ") as e: Tensor([1.0], device="CUDA").realize()
  assert str(e.value) == reason and "CUDA" not in Device._opened

# ---------------- a fake driver

class FakeDriver:
  """libcuda's calls as this runtime makes them: device memory is host memory, and launches are recorded with their
  kernel arguments read back through kernelParams (`arg_sizes`: 8 for a pointer, 4 for an int)."""
  def __init__(self, init_rc=0, count=1, cc=(9, 0), alloc_limit=1 << 30):
    self.init_rc, self.count, self.cc, self.alloc_limit = init_rc, count, cc, alloc_limit
    self.init_calls, self.blocks, self.freed, self.images, self.launches, self.current = 0, {}, [], [], [], []
    self.arg_sizes: list[int] = []
    self.launch_rc = self.sync_rc = 0
  def cuInit(self, flags):
    self.init_calls += 1
    return self.init_rc
  def cuDeviceGetCount(self, p): p._obj.value = self.count; return 0
  def cuDeviceGet(self, p, i): p._obj.value = i; return 0
  def cuDeviceGetAttribute(self, p, attr, dev): p._obj.value = {75: self.cc[0], 76: self.cc[1]}[attr]; return 0
  def cuDevicePrimaryCtxRetain(self, p, dev): p._obj.value = 0xC0 + dev.value; return 0
  def cuCtxSetCurrent(self, ctx): self.current.append((threading.get_ident(), ctx.value)); return 0
  def cuCtxSynchronize(self): return self.sync_rc
  def cuMemAlloc_v2(self, p, n):
    if n > self.alloc_limit: return 2
    block = (ctypes.c_uint8 * n)()
    p._obj.value = ctypes.addressof(block)
    self.blocks[p._obj.value] = block
    return 0
  def cuMemFree_v2(self, ptr): self.freed.append(ptr); del self.blocks[ptr]; return 0
  def cuMemcpyHtoD_v2(self, dst, src, n): ctypes.memmove(dst, src, n); return 0
  def cuMemcpyDtoH_v2(self, dst, src, n): ctypes.memmove(dst, src, n); return 0
  def cuModuleLoadData(self, p, image): self.images.append(ctypes.string_at(image)); p._obj.value = 0x300; return 0
  def cuModuleGetFunction(self, p, mod, name):
    if f".entry {name.decode()}(".encode() not in self.images[-1]: return 500
    p._obj.value = 0x400
    return 0
  def cuModuleUnload(self, mod): return 0
  def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    read = {8: ctypes.c_uint64, 4: ctypes.c_int32}
    args = [read[size].from_address(params[i]).value for i, size in enumerate(self.arg_sizes)]
    self.launches.append(((gx, gy, gz), (bx, by, bz), shared, stream, args))
    return self.launch_rc

@pytest.fixture
def fake(monkeypatch):
  drv = FakeDriver()
  monkeypatch.setattr(ops_cuda, "_load_libcuda", lambda: drv)
  # the renderer is written elsewhere: a stand-in records what the device asks of it
  renderer = types.ModuleType("fusegrad.renderer.cuda")
  renderer.CUDARenderer = lambda name, arch: types.SimpleNamespace(device=name, arch=arch)  # type: ignore[attr-defined]
  monkeypatch.setitem(sys.modules, "fusegrad.renderer.cuda", renderer)
  return drv

@pytest.mark.parametrize("rc, name", [(100, "CUDA_ERROR_NO_DEVICE"), (34, "CUDA_ERROR_STUB_LIBRARY"),
                                      (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"), (35, "CUDA error 35")])
def test_a_failed_cuinit_is_named(fake, rc, name):
  fake.init_rc = rc
  assert ops_cuda.unavailable().startswith(f"CUDA: cuInit failed with {name} ({rc})")
  with pytest.raises(RuntimeError, match=f"{name} \\({rc}\\)"): ops_cuda.open_device("CUDA")

def test_the_probe_runs_once(fake):
  fake.init_rc = 100
  for _ in range(3): assert "no GPU visible" in ops_cuda.unavailable()
  assert fake.init_calls == 1

def test_no_driver_and_an_old_driver(monkeypatch):
  def missing(): raise OSError("libcuda.so.1: cannot open shared object file")
  monkeypatch.setattr(ops_cuda, "_load_libcuda", missing)
  assert ops_cuda.unavailable() == "CUDA: no NVIDIA driver (libcuda.so.1 not found): install the NVIDIA driver to use CUDA"
  def old(): raise AttributeError("undefined symbol: cuDevicePrimaryCtxRetain")
  monkeypatch.setattr(ops_cuda, "_load_libcuda", old)
  ops_cuda._driver.cache_clear()
  assert "cuDevicePrimaryCtxRetain" in ops_cuda.unavailable() and "update" in ops_cuda.unavailable()

def test_no_gpu_or_a_crashing_driver_still_answers(fake):
  fake.count = 0
  assert "sees no GPU" in ops_cuda.unavailable()
  def boom(flags): raise ValueError("bad")
  fake.cuInit = boom
  ops_cuda._driver.cache_clear()
  assert ops_cuda.unavailable().startswith("CUDA: probing the driver failed (ValueError: bad)")

def test_open_device_picks_the_gpu_and_its_arch(fake):
  fake.count, fake.cc = 2, (8, 6)
  assert ops_cuda.unavailable() is None
  dev = ops_cuda.open_device("CUDA:1")
  assert (dev.name, dev.ordinal, dev.arch, dev.context.value) == ("CUDA:1", 1, "sm_86", 0xC1)
  assert (dev.renderer.device, dev.renderer.arch) == ("CUDA:1", "sm_86") and dev.beam_search is False
  assert ops_cuda.open_device("CUDA").ordinal == 0
  with pytest.raises(RuntimeError, match="CUDA:2: no such GPU"): ops_cuda.open_device("CUDA:2")
  with pytest.raises(ValueError, match="CUDA:<GPU number>"): ops_cuda.open_device("CUDA:x")

def test_memory_round_trip_and_free(fake):
  dev = ops_cuda.open_device("CUDA")
  a = dev.allocator
  mem = a.alloc(8)
  a.copyin(mem, memoryview(bytearray(b"abcdefgh")))
  a.copyin(mem, memoryview(b"ABCD"))  # read-only source
  assert bytes(a.as_memoryview(mem, 8)) == b"ABCDefgh"
  view = a.offset(mem, 2, 4)
  assert view.ptr == mem.ptr + 2 and bytes(a.as_memoryview(view, 4)) == b"CDef"
  ptr = mem.ptr
  del mem
  assert ptr not in fake.freed  # the view keeps it alive
  del view
  assert fake.freed == [ptr]
  empty = a.alloc(0)  # still a real allocation
  assert empty.nbytes == 0 and len(fake.blocks[empty.ptr]) == 1 and bytes(a.as_memoryview(empty, 0)) == b""

def test_a_failed_allocation_is_a_memory_error(fake):
  fake.alloc_limit = 100
  with pytest.raises(MemoryError, match="cannot allocate 12345 bytes of CUDA memory.*CUDA_ERROR_OUT_OF_MEMORY"):
    ops_cuda.open_device("CUDA").allocator.alloc(12345)

def test_each_thread_makes_the_context_current(fake):
  dev = ops_cuda.open_device("CUDA")
  t = threading.Thread(target=lambda: dev.allocator.alloc(4))
  t.start()
  t.join()
  assert (t.ident, 0xC0) in fake.current

def spec(src=KERNEL, name="k", **kw) -> ProgramSpec:
  return ProgramSpec(name=name, src=src, uops=[], **{"globals": [(0, True)], "global_size": (1, 1, 1), "local_size": (32, 1, 1), **kw})

@needs_nvrtc
def test_compile_and_launch(fake):
  dev = ops_cuda.open_device("CUDA")
  src = 'extern "C" __global__ void add(float* out, const float* a, int n, int m) { out[threadIdx.x] = a[threadIdx.x] + n + m; }'
  n, m = Variable("n", 0, 10), Variable("m", 0, 10)
  prg = dev.compile(spec(src, "add", globals=[(2, True), (0, False)], vars=[n, m], global_size=(4, 2, 1), local_size=(32, 4, 2)))
  assert fake.images[-1].startswith(b"//") and b".target sm_90" in fake.images[-1] and b".entry add(" in fake.images[-1]
  mems = [dev.allocator.alloc(16) for _ in range(3)]
  fake.arg_sizes = [8, 8, 4, 4]
  fake.current.clear()
  prg(mems, [7, -3])
  # the arguments are the globals' pointers in the spec's order, then the variables
  assert fake.launches == [((4, 2, 1), (32, 4, 2), 0, None, [mems[2].ptr, mems[0].ptr, 7, -3])]
  assert fake.current == [(threading.get_ident(), 0xC0)]

@needs_nvrtc
def test_driver_errors_name_the_call(fake):
  dev = ops_cuda.open_device("CUDA")
  with pytest.raises(RuntimeError, match="cuModuleGetFunction\\('nope'\\) failed with CUDA_ERROR_NOT_FOUND \\(500\\)"):
    dev.compile(spec(name="nope"))
  prg = dev.compile(spec())
  fake.arg_sizes, fake.launch_rc = [8], 701
  with pytest.raises(RuntimeError, match="cuLaunchKernel of k .*CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES \\(701\\): the kernel asks for more"):
    prg([dev.allocator.alloc(4)], [])
  fake.sync_rc = 700
  with pytest.raises(RuntimeError, match="cuCtxSynchronize on CUDA failed with CUDA_ERROR_ILLEGAL_ADDRESS"): dev.synchronize()

def test_a_kernel_needs_a_launch_size(fake):
  with pytest.raises(ValueError, match="no launch size"): ops_cuda.open_device("CUDA").compile(spec(global_size=None))

# ---------------- NVRTC and ptxas: no GPU needed

@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_to_ptx(arch):
  ptx = ops_cuda.nvrtc_compile(KERNEL, arch)
  assert b".version" in ptx and f".target {arch}".encode() in ptx and b".entry k(" in ptx and not ptx.endswith(b"\0")

@needs_nvrtc
def test_nvrtc_compiles_in_parallel():
  # the device compiles a schedule's kernels on several threads at once
  out: dict[int, bytes] = {}
  def work(i): out[i] = ops_cuda.nvrtc_compile(KERNEL.replace("void k(", f"void k{i}("))
  threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert all(f".entry k{i}(".encode() in out[i] for i in range(4))

@needs_nvrtc
def test_nvrtc_error_shows_the_log_and_source():
  with pytest.raises(RuntimeError) as e: ops_cuda.nvrtc_compile(KERNEL.replace("1.0f", "undefined_thing"), name="bad.cu")
  msg = str(e.value)
  assert "NVRTC failed to compile bad.cu for sm_80" in msg and "undefined_thing" in msg and "error" in msg
  assert '--- source ---\n   1 extern "C"' in msg

def test_missing_nvrtc_says_how_to_install(monkeypatch):
  monkeypatch.setattr(ops_cuda, "_find_nvrtc", lambda: None)
  ops_cuda._nvrtc.cache_clear()
  try:
    with pytest.raises(RuntimeError, match='pip install "nvidia-cuda-nvrtc==13.0.\\*".*driver 580'): ops_cuda.nvrtc_compile(KERNEL)
  finally: ops_cuda._nvrtc.cache_clear()

def test_arch_must_be_sm_xy():
  assert ops_cuda.compute_arch("sm_90a") == "compute_90a"
  with pytest.raises(ValueError, match="sm_XY"): ops_cuda.compute_arch("compute_80")

@needs_nvrtc
@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_assembles_nvrtc_output(arch):
  assert ops_cuda.ptxas(ops_cuda.nvrtc_compile(KERNEL, arch), arch).startswith(b"\x7fELF")

@needs_ptxas
def test_ptxas_error_shows_its_message():
  with pytest.raises(RuntimeError, match="ptxas failed for sm_80:\n.*"): ops_cuda.ptxas(b".version 9.0\n.target sm_80\nnonsense\n", "sm_80")
