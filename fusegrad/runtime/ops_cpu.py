"""CPU device: C source compiled with $CC (else clang, else gcc) into a shared library, loaded with ctypes."""
from __future__ import annotations
import _ctypes, concurrent.futures, contextlib, ctypes, functools, hashlib, os, platform, re, shutil, subprocess, sys, tempfile, threading
from typing import Iterable
from fusegrad.helpers import CACHELEVEL, DISK_CACHE_MB, cache_dir, getenv
from fusegrad.renderer import ProgramSpec
from fusegrad.renderer.cstyle import ClangRenderer
from fusegrad.renderer.cvector import VECTOR_MATH
from fusegrad.runtime.cpu_threads import KERNEL_MARK, kernel_source, load_pool, pool_source, task_symbol

# -ffp-contract=off: a value recomputed in two kernels (fusion duplicates cheap work) must round the same in both, or
# e.g. max-pool's backward (x == max) misses; explicit FMA is used only to accumulate reductions (renderer/cvector.py)
CFLAGS = ["-shared", "-O3", "-fPIC", "-march=native", "-fwrapv", "-fno-math-errno", "-std=gnu11", "-ffp-contract=off"]
# gcc 12 with AVX-512 can place a stack array in the red zone 8 bytes off the 16-byte alignment its aligned vector
# stores assume (a (3,4,5) gather gradient's float[20] accumulator crashed); kernels are not that stack-hungry
if platform.machine() in ("x86_64", "AMD64"): CFLAGS.append("-mno-red-zone")

def find_compiler() -> str:
  from fusegrad.device import Device
  return _find_compiler(os.getenv("CC") or {"CLANG": "clang", "GCC": "gcc"}.get(Device.renderer_override or "", ""), os.getenv("PATH"))

@functools.lru_cache(maxsize=8)  # every kernel asks (searching PATH took 0.4 ms); keyed on what the answer depends on
def _find_compiler(want: str, path: str | None) -> str:
  for cc in ([want] if want else ["clang", "gcc", "cc"]):
    if shutil.which(cc, path=path): return cc
  raise RuntimeError(f"no C compiler found (tried {want or 'clang, gcc, cc'}): install gcc or clang, or set CC=/path/to/compiler")

class CPUAllocator:
  def alloc(self, nbytes: int):
    # over-allocate so the data pointer can be 64-byte aligned for vector loads
    try: raw = (ctypes.c_uint8 * (max(nbytes, 1) + 64))()
    except (MemoryError, OverflowError): raise MemoryError(f"cannot allocate {nbytes} bytes of CPU memory") from None
    off = (-ctypes.addressof(raw)) % 64
    return (raw, ctypes.addressof(raw) + off, nbytes)
  def offset(self, mem, byte_offset: int, nbytes: int): return (mem[0], mem[1] + byte_offset, nbytes)  # (a BufferView's)
  def copyin(self, mem, mv: memoryview): ctypes.memmove(mem[1], (ctypes.c_char * mv.nbytes).from_buffer_copy(mv) if mv.readonly else (ctypes.c_char * mv.nbytes).from_buffer(mv), mv.nbytes)
  def as_memoryview(self, mem, nbytes: int) -> memoryview:
    # from_buffer keeps the allocation alive for as long as the view exists
    return memoryview((ctypes.c_uint8 * nbytes).from_buffer(mem[0], mem[1] - ctypes.addressof(mem[0]))).cast("B")

_dlclose = getattr(_ctypes, "dlclose", None)  # POSIX only: on Windows a kernel stays loaded

class CPUProgram:
  def __init__(self, spec: ProgramSpec, lib_path: str):
    self.spec = spec
    self.lib = ctypes.CDLL(lib_path)
    # every kernel is called through its task wrapper: one signature, so the C thread pool can run its slices. It is
    # called without argtypes (every argument is already a ctypes array or a small int), which costs a third as much.
    self.task = getattr(self.lib, task_symbol(spec))
    self.task.restype = None
    self.task_ptr = ctypes.c_void_p(ctypes.cast(self.task, ctypes.c_void_p).value)
    self.n_globals, self.n_vars = len(spec.globals), len(spec.vars)
    self.parallel = spec.parallel and spec.flops >= PARALLEL_MIN_FLOPS
    # (what the native core's _run_task calls: the task as an address, the buffers by parameter)
    self.task_addr: int = self.task_ptr.value or 0
    self.params = tuple(i for i, _ in spec.globals)
  def __del__(self, is_finalizing=sys.is_finalizing, dlclose=_dlclose):
    # unload the library once nothing can call it any more (the program cache evicted it and no TinyJit capture holds
    # it): each loaded kernel keeps its mappings resident. dlopen counts references, so another program from the same
    # file keeps it loaded. At interpreter exit the process unmaps everything anyway, and module globals may already be
    # None (hence the default arguments).
    if dlclose is None or is_finalizing() or (lib := self.__dict__.get("lib")) is None: return
    try: dlclose(lib._handle)
    except Exception: pass  # __del__ must not raise
  def args(self, mems: list, var_vals: list[int]) -> tuple:
    """The kernel's arguments as ctypes arrays: only the buffers it still reads or writes are parameters (lowering can
    drop an input, e.g. a zero-size one)."""
    return ((ctypes.c_void_p * max(self.n_globals, 1))(*[mems[i][1] for i, _ in self.spec.globals]),
            (ctypes.c_int * max(self.n_vars, 1))(*var_vals))
  def __call__(self, mems: list, var_vals: list[int]): _run_task(self, mems, var_vals)
  def run(self, bufs, vars_):
    n = cpu_count() if self.parallel else 1
    if n == 1 or thread_pool()(self.task_ptr, bufs, vars_, n) != 0:
      for i in range(n): self.task(bufs, vars_, i, n)  # one thread, or no worker thread could be started
  def launcher(self, mems: list, var_vals: list[int]) -> CPULauncher: return CPULauncher(self, mems, var_vals)

def _run_task(prg: CPUProgram, mems: list, var_vals: list[int]) -> None:
  """Run prg's kernel on the buffers mems[i] for i in prg.params and var_vals, on cpu_count() threads if prg.parallel.
  (fusegrad.native replaces it with a C version, which calls prg.task_addr and pool_address() without ctypes.)"""
  prg.run(*prg.args(mems, var_vals))

def pool_address() -> int:
  """The C thread pool's pool_run as an address."""
  return ctypes.cast(thread_pool(), ctypes.c_void_p).value or 0

class CPULauncher:
  """A kernel with its arguments bound, called again and again (a TinyJit replay): it keeps its ctypes arrays, and a
  replay only rewrites the pointers of buffers that were swapped."""
  def __init__(self, prg: CPUProgram, mems: list, var_vals: list[int]):
    self.prg, (self.bufs, self.vars) = prg, prg.args(mems, var_vals)
    self.param = {i: j for j, (i, _) in enumerate(prg.spec.globals)}  # buffer index -> the kernel's parameter number
  def set_buffer(self, i: int, mem) -> None:
    if (j := self.param.get(i)) is not None: self.bufs[j] = mem[1]
  def set_vars(self, var_vals: list[int]) -> None: self.vars[:len(var_vals)] = var_vals
  def __call__(self): self.prg.run(self.bufs, self.vars)

PARALLEL_MIN_FLOPS = 1 << 16  # below this, waking threads costs more than it saves

@functools.cache
def cpu_count() -> int: return max(1, getenv("CPU_COUNT", os.cpu_count() or 1))

@functools.cache
def thread_pool():
  """The C thread pool's pool_run(task, bufs, vars, n) (cpu_threads.py), compiled on first use."""
  return load_pool(build_library(pool_source(), ["-pthread"]))

def _simd_decls() -> str:
  """glibc's libmvec has vector versions of the renderer's vector math (and pow); declaring them `simd` lets the compiler
  vectorize scalar loops that call them (accurate to a few ulp, like the scalar versions). Used only where a probe
  shows the compiler and libmvec support it."""
  out = []
  for f in [*VECTOR_MATH.values(), "pow"]:
    args = "float, float" if f == "pow" else "float"
    out.append(f"float {f}f({args}) __attribute__((simd(\"notinbranch\")));")
  return "\n".join(out) + "\n"

@functools.cache
def vector_math(cc: str) -> bool:
  probe = "#include <math.h>\n" + _simd_decls() + "void k(float* restrict a, int n) { for (int i = 0; i < n; i++) a[i] = expf(a[i]) + powf(a[i], a[i]); }\n"
  with tempfile.TemporaryDirectory() as d:
    proc = subprocess.run([cc, *CFLAGS, "-x", "c", "-", "-o", os.path.join(d, "probe.so"), "-lmvec", "-lm"], input=probe.encode(), capture_output=True)
  return proc.returncode == 0

# CPU_ISA compiles for a narrower x86 ISA than the host's (gcc's -march levels), so the AVX2 or SSE code path can be
# measured and tested on an AVX-512 machine: name -> (-march value, float32 lanes, vector registers, the /proc/cpuinfo
# flag it needs)
CPU_ISAS = {"avx512": ("x86-64-v4", 16, 32, "avx512f"), "avx2": ("x86-64-v3", 8, 16, "avx2"), "sse": ("x86-64-v2", 4, 16, "sse4_2")}

def _cpu_flags() -> str:
  try: return open("/proc/cpuinfo").read()
  except OSError: return ""

@functools.cache
def target_isa() -> tuple[str, int, int]:
  """(-march value, float32 lanes of a vector register, vector registers) for the kernels: the host's own, or CPU_ISA's."""
  isa = (os.getenv("CPU_ISA") or "native").lower()  # (CPU_ISA= is unset, as for other variables)
  if isa == "native":
    if platform.machine() in ("aarch64", "arm64"): return "native", 4, 32  # NEON
    flags = _cpu_flags()
    return ("native", *CPU_ISAS["avx512" if " avx512f" in flags else "avx2" if " avx2" in flags else "sse"][1:3])  # every x86-64 has SSE2
  if isa not in CPU_ISAS: raise RuntimeError(f"CPU_ISA={isa} is not one of native, {', '.join(CPU_ISAS)}")
  march, lanes, registers, needs = CPU_ISAS[isa]
  if platform.machine() not in ("x86_64", "AMD64") or f" {needs}" not in _cpu_flags():
    raise RuntimeError(f"CPU_ISA={isa} needs an x86-64 CPU with {needs}; this one does not have it (kernels would crash): unset CPU_ISA")
  return march, lanes, registers

@functools.cache
def is_clang(cc: str) -> bool:
  proc = subprocess.run([cc, "-dM", "-E", "-x", "c", os.devnull], capture_output=True, text=True)
  return "__clang__" in proc.stdout

def compiler_flags(cc: str) -> tuple[str, ...]: return _compiler_flags(cc, target_isa())

@functools.cache
def _compiler_flags(cc: str, isa: tuple[str, int, int]) -> tuple[str, ...]:
  """CFLAGS plus workarounds for known compiler bugs, checked once per process against the patterns they broke."""
  # gcc 12's loop vectorizer miscompiles a sum of reversed loads gathered into a vector initializer
  # (flip(0).sum() of arange(10) gave 53), and its SLP vectorizer drops the float16 rounding of one of a kernel's loads
  # rounded float32 -> float16 -> float32 (a float16 matmul of float32 inputs cast in the same kernel: a quarter of the
  # results off by an ulp); our kernels are explicit SIMD, so the auto-vectorizers add little
  march = f"-march={isa[0]}"
  flags = (*(march if f == "-march=native" else f for f in CFLAGS), *([] if is_clang(cc) else ["-fno-tree-loop-vectorize", "-fno-tree-slp-vectorize"]))
  check_compiler(cc, flags)
  return flags

# Patterns a compiler once got wrong, each with the inputs it broke on: (source of `void k(float*, const float*)`, n, expected)
KNOWN_MISCOMPILES = [
  ("""typedef float f32x2 __attribute__((vector_size(8), aligned(4)));
void k(float* restrict out, const float* restrict in, int n) {
  float acc = 0.0f;
  for (long long i = 0; i < n/2; i++) {
    f32x2 v = (f32x2){in[(n-1)-(i*2+0)], in[(n-1)-(i*2+1)]};
    acc = acc + v[0]; acc = acc + v[1];
  }
  out[0] = acc;
}""", n, n * (n - 1) / 2) for n in (10, 14, 64)]

def check_compiler(cc: str, flags: tuple[str, ...]) -> None:
  """Compile and run each known-miscompiled pattern: a wrong answer here stops us before it reaches a user's result."""
  for src, n, want in KNOWN_MISCOMPILES:
    fn = getattr(ctypes.CDLL(_build(cc, flags, src, ["-lm"])), "k")
    out, data = (ctypes.c_float * 1)(), (ctypes.c_float * n)(*range(n))
    fn(out, data, ctypes.c_int(n))
    if out[0] != want:
      raise RuntimeError(f"{cc} with flags {' '.join(flags)} miscompiles a known pattern (a reversed-load sum of {n} gave {out[0]}, "
                         f"expected {want}): use another compiler with CC=... (e.g. CC=clang) or report the compiler version")

def compile_c(src: str) -> str:
  """Compile a kernel to a shared library cached on disk by the hash of the source, compiler and flags."""
  return build_library(*_with_math(src))

def _with_math(src: str) -> tuple[str, list[str]]:
  """The source with libmvec's vector function declarations and the libraries to link, where it calls vector math."""
  if "_ZGV" not in src or not vector_math(find_compiler()): return src, ["-lm"]
  return _simd_decls() + src, ["-lmvec", "-lm"]

# a batch compiles on one core: capped so that the last batches of a schedule still keep every core busy
BATCH_CHARS = 32_000

def compile_many(srcs: Iterable[str], workers: int) -> list[str]:
  """compile_c for several kernels at once: the sources not cached yet are compiled to object files on `workers`
  compilers in parallel, as the iterable yields them (the caller renders the next ones meanwhile), and one link makes a
  library of all of them, stored under each kernel's cache name (hard links). A compiler that comes free takes every
  waiting kernel that shares the first one's prelude (up to BATCH_CHARS of their own code) as one translation unit:
  starting gcc and parsing the prelude cost about 20 ms, a third of a typical kernel's compile. Linking once saves
  another third. Each kernel exports only its task symbol (its function is static)."""
  cc = find_compiler()
  flags = compiler_flags(cc)
  cflags = [f for f in flags if f != "-shared"]
  jobs: dict[str, tuple[str, list[str]]] = {}
  order: list[str] = []
  built: dict[str, str] = {}
  waiting: list[str] = []  # sources to compile, in the order they came
  objs: dict[str, str] = {}  # source -> the object file holding it
  lock = threading.Lock()
  with tempfile.TemporaryDirectory(dir=cache_dir()) as d, concurrent.futures.ThreadPoolExecutor(max(1, workers)) as pool:
    def compile_waiting():  # one call per source; a call that finds nothing waiting (an earlier batch took it) returns
      with lock:
        if not waiting: return
        batch, o = _take_batch(waiting, jobs), os.path.join(d, f"{len(objs)}.o")
        objs.update((src, o) for src in batch)
      _compile_batch(cc, cflags, [jobs[src][0] for src in batch], o)
    compiles = []
    for src in srcs:
      order.append(src)
      if src in jobs: continue
      full, libs = jobs[src] = _with_math(src)
      if os.path.exists(_cache_path(cc, flags, full)) and CACHELEVEL: continue
      with lock: waiting.append(src)
      compiles.append(pool.submit(compile_waiting))
    for f in compiles: f.result()
    if objs:
      lib = os.path.join(d, "all.so")
      libs = sorted({x for src in objs for x in jobs[src][1]}, key=["-lmvec", "-lm"].index)
      _run_cc(cc, ["-shared"], None, [*dict.fromkeys(objs.values()), "-o", lib, *libs])
      for src in objs:
        path = _cache_path(cc, flags, jobs[src][0])
        tmp = f"{path}.{os.getpid()}.tmp"
        try: os.link(lib, tmp)
        except OSError: shutil.copyfile(lib, tmp)
        os.replace(tmp, path)  # atomic, as _build
        _used.add(path)
        built[src] = path
        _after_write(os.path.dirname(path), path)
  return [built.get(src) or build_library(*jobs[src]) for src in order]  # the others were cached

def _split_kernel(full: str) -> tuple[str, str]:
  """A kernel_source as (prelude, the kernel's own code); a source without the mark is all its own code."""
  prelude, mark, own = full.partition(KERNEL_MARK)
  return (prelude, own) if mark else ("", full)

def _take_batch(waiting: list[str], jobs: dict) -> list[str]:
  """Takes from `waiting` the first source and the later ones with the same prelude, within BATCH_CHARS."""
  prelude, size, batch = _split_kernel(jobs[waiting[0]][0])[0], 0, []
  for src in list(waiting):
    pre, own = _split_kernel(jobs[src][0])
    if batch and (pre != prelude or not pre or size + len(own) > BATCH_CHARS): continue
    batch.append(src)
    waiting.remove(src)
    size += len(own)
  return batch

def _compile_batch(cc: str, cflags: list, fulls: list[str], obj: str) -> None:
  """Kernels with one prelude compiled as one translation unit. Each kernel's static function is renamed by a macro
  (two kernels may share a name). If the unit fails, each kernel is compiled alone, so the error shows its source."""
  if len(fulls) == 1: return _run_cc(cc, cflags, fulls[0], ["-c", "-o", obj])
  unit = [_split_kernel(fulls[0])[0]]
  for i, full in enumerate(fulls):
    own = _split_kernel(full)[1]
    name = re.search(r"\bvoid\s+(\w+)\s*\(", own).group(1)  # type: ignore[union-attr]
    unit.append(f"#define {name} k{i}_{name}\n{own}#undef {name}\n")
  try: _run_cc(cc, cflags, "".join(unit), ["-c", "-o", obj])
  except RuntimeError:
    for full in fulls: _run_cc(cc, cflags, full, ["-c", "-o", os.devnull])
    raise

def _run_cc(cc: str, flags: list, src: str | None, args: list) -> None:
  cmd = [cc, *flags, *(["-x", "c", "-"] if src is not None else []), *args]
  proc = subprocess.run(cmd, input=None if src is None else src.encode(), capture_output=True)
  if proc.returncode != 0: raise RuntimeError(f"{cc} failed to compile a kernel:\n{proc.stderr.decode()}\n--- source ---\n{src}")

def build_library(src: str, libs: list[str]) -> str:
  cc = find_compiler()
  return _build(cc, compiler_flags(cc), src, libs)

# The disk cache is bounded to DISK_CACHE_MB, least recently used files deleted first, with each file's mtime as its
# last use. A hit refreshes the mtime only once per process per file (_used), which keeps the file among the recent ones
# while this process runs; later hits here mostly come from the in-memory program cache and never reach the disk.
_used: set[str] = set()
_since_trim: dict[str, int] = {}  # cache dir -> bytes this process wrote there since it last trimmed it (absent: never)

def _cache_path(cc: str, flags: tuple[str, ...], src: str) -> str:
  return os.path.join(cache_dir(), f"kernel_{hashlib.sha256((cc + ' '.join(flags) + src).encode()).hexdigest()[:32]}.so")

def _build(cc: str, flags: tuple[str, ...], src: str, libs: list[str]) -> str:
  path = _cache_path(cc, flags, src)
  d = os.path.dirname(path)
  if os.path.exists(path) and CACHELEVEL:
    if path not in _used:
      if len(_used) > 1 << 16: _used.clear()  # a long-lived process must not grow this either; forgetting costs a utime
      _used.add(path)
      with contextlib.suppress(OSError): os.utime(path)  # gone (another process trimmed it: the load retries) or not ours
    return path
  fd, tmp = tempfile.mkstemp(suffix=".so", dir=d)
  os.close(fd)
  try: _run_cc(cc, list(flags), src, ["-o", tmp, *libs])
  except RuntimeError:
    os.unlink(tmp)
    raise
  os.replace(tmp, path)  # atomic: another process never sees a half-written library
  _used.add(path)  # its mtime is now
  _after_write(d, path)
  return path

def _after_write(d: str, path: str) -> None:
  """Trim the disk cache at this process's first write to it, then whenever it has written 1/16 of the cap since the
  last trim: a scan per compile would cost more than the compile for a large cache, and the overshoot stays small."""
  if (cap := DISK_CACHE_MB.value << 20) <= 0: return
  with contextlib.suppress(OSError): _since_trim[d] = _since_trim.get(d, cap) + os.path.getsize(path)
  if _since_trim.get(d, cap) >= cap // 16:
    _since_trim[d] = 0
    trim_disk_cache(d, cap, keep=path)

def trim_disk_cache(d: str, cap: int, keep: str | None = None) -> None:
  """Delete the least recently used (oldest mtime) kernel libraries in `d` until they total at most `cap` bytes. Only
  kernel_*.so files count and go (cache.db and temporary files stay), and never `keep`, the one about to be loaded.
  Other processes trim the same directory: a file that vanishes under us is skipped. A process that has a deleted file
  loaded keeps its mapping (Linux frees the inode after the last unmap)."""
  files = []
  with contextlib.suppress(OSError), os.scandir(d) as it:
    for e in it:
      if not (e.name.startswith("kernel_") and e.name.endswith(".so")): continue
      with contextlib.suppress(OSError):
        st = e.stat()
        files.append((st.st_mtime_ns, st.st_size, e.path))
  total = sum(size for _, size, _ in files)
  for _, size, path in sorted(files):
    if total <= cap: break
    if path == keep: continue
    try: os.unlink(path)
    except FileNotFoundError: pass  # another process trimmed it first
    except OSError: continue  # loaded (Windows) or not ours to delete: it still takes space
    _used.discard(path)  # if it comes back, it is a new file
    total -= size

class CPURenderer(ClangRenderer):
  """C for this CPU: its vector width and registers (or CPU_ISA's), libmvec where the compiler links it, and the flags
  kernels are compiled with; each found on first use."""
  @functools.cached_property
  def simd_width(self) -> int: return target_isa()[1]  # type: ignore[override]
  @functools.cached_property
  def vector_registers(self) -> int: return target_isa()[2]  # type: ignore[override]
  @functools.cached_property
  def vector_math_lib(self) -> bool:  # type: ignore[override]
    # libmvec's vector functions are called by their x86-64 vector ABI names
    try: return platform.machine() in ("x86_64", "AMD64") and vector_math(find_compiler())
    except RuntimeError: return False  # no compiler: compiling says so
  @functools.cached_property
  def half_loads(self) -> bool:  # type: ignore[override]
    if platform.machine() in ("aarch64", "arm64"): return True  # NEON converts half vectors
    isa = target_isa()[0]
    return isa in ("x86-64-v3", "x86-64-v4") or (isa == "native" and " f16c" in _cpu_flags())  # v3 and up include F16C
  @property
  def compile_flags(self) -> tuple[str, ...]: return compiler_flags(find_compiler())  # type: ignore[override]

class CPUDevice:
  beam_search = True  # kernel timings are real: BEAM may search optimizations by timing them
  def __init__(self, name: str):
    self.name, self.allocator, self.renderer = name, CPUAllocator(), CPURenderer(name)
    self.compile_workers = cpu_count()  # a schedule's new kernels compile on every core at once
  def compile(self, spec: ProgramSpec) -> CPUProgram: return self._load(spec, compile_c(kernel_source(spec)))
  def compile_many(self, specs: Iterable[ProgramSpec], workers: int) -> list[CPUProgram]:
    seen: list[ProgramSpec] = []
    def sources():  # rendered one by one by the caller's generator: each compiles while the next renders
      for spec in specs:
        seen.append(spec)
        yield kernel_source(spec)
    paths = compile_many(sources(), workers)
    return [self._load(spec, path) for spec, path in zip(seen, paths)]
  def _load(self, spec: ProgramSpec, path: str) -> CPUProgram:
    try: return CPUProgram(spec, path)
    except OSError:
      if os.path.exists(path): raise
      return CPUProgram(spec, compile_c(kernel_source(spec)))  # another process's trim deleted it between the check and the load: rebuild
  def synchronize(self): pass

def open_device(name: str) -> CPUDevice: return CPUDevice(name)

def unavailable() -> str | None:
  """Kernels need a C compiler; without one the device still holds data, and compiling raises this same reason."""
  try: find_compiler()
  except RuntimeError as e: return str(e)
  return None
