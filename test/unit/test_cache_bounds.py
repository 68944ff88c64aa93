"""The compiled-kernel caches stay bounded: programs in memory (PROGRAM_CACHE, least recently used evicted, a dropped
library unloaded) and kernel libraries on disk (DISK_CACHE_MB, oldest mtime deleted first, a hit refreshes it)."""
import gc, os, shutil, time, weakref
import numpy as np, pytest
from fusegrad import Tensor, TinyJit, Context
from fusegrad.engine import realize
from fusegrad.runtime import ops_cpu
from fusegrad.schedule import create_schedule

needs_cc = pytest.mark.skipif(not any(shutil.which(c) for c in (os.getenv("CC") or "clang", "gcc", "cc")), reason="no C compiler")

def kernel(n: int, device: str = "CPU"):
  """The schedule item of one elementwise kernel over n floats: a new n is a new kernel."""
  return create_schedule([(Tensor(np.arange(n, dtype=np.float32), device=device) * 2 + 1).uop])[0][-1]

def cached(si) -> bool: return any(k[1] is si.ast for k in realize._programs)

def run(prg, si) -> np.ndarray:
  prg([b.ensure_allocated()._mem for b in si.bufs], [])
  return np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32)

def loaded(path: str) -> bool:
  with open("/proc/self/maps") as f: return path in f.read()

@pytest.mark.parametrize("device", ["PYTHON", pytest.param("CPU", marks=needs_cc)])
def test_program_cache_stays_at_cap_and_evicts_least_recently_used(device):
  sis = [kernel(n, device) for n in range(3001, 3009)]
  with Context(PROGRAM_CACHE=3):
    for si in sis[:3]: realize.get_program(si.device, si.ast)
    assert len(realize._programs) == 3
    realize.get_program(sis[0].device, sis[0].ast)  # a hit: sis[0] is now the most recently used
    realize.get_program(sis[3].device, sis[3].ast)
    assert cached(sis[0]) and not cached(sis[1]) and cached(sis[2]) and cached(sis[3])
    for si in sis[4:]: realize.get_program(si.device, si.ast)
    assert len(realize._programs) == 3 and [cached(si) for si in sis] == [False] * 5 + [True] * 3

@needs_cc
def test_evicted_program_unloads_only_when_unreferenced():
  held, dropped = kernel(4001), kernel(4002)
  with Context(PROGRAM_CACHE=2):
    prg = realize.get_program(held.device, held.ast)
    lib = realize.get_program(dropped.device, dropped.ast).lib._name
    for n in range(4003, 4006): realize.get_program("CPU", kernel(n).ast)
    gc.collect()
    assert not cached(held) and not cached(dropped)
    np.testing.assert_equal(run(prg, held), np.arange(4001, dtype=np.float32) * 2 + 1)  # still referenced: still loaded
    if os.path.exists("/proc/self/maps") and hasattr(__import__("_ctypes"), "dlclose"): assert not loaded(lib)
    held_lib = prg.lib._name
    del prg
    gc.collect()
    if os.path.exists("/proc/self/maps") and hasattr(__import__("_ctypes"), "dlclose"): assert not loaded(held_lib)

@needs_cc
def test_jit_replay_survives_eviction_of_its_programs():
  f = TinyJit(lambda a: (a * 3 - 1).realize())
  x = np.arange(5001, dtype=np.float32)
  with Context(PROGRAM_CACHE=2):
    for _ in range(3): f(Tensor(x, device="CPU"))
    for n in range(5002, 5006): realize.get_program("CPU", kernel(n).ast)
    gc.collect()
    np.testing.assert_equal(f(Tensor(x + 1, device="CPU")).numpy(), (x + 1) * 3 - 1)

def test_beam_choices_are_bounded(monkeypatch):
  from fusegrad.codegen import search
  from fusegrad.codegen.opt import Opt
  searched = []
  monkeypatch.setattr(search, "beam_search", lambda device, ast, *args: searched.append(ast) or Opt("NONE"))
  monkeypatch.setattr(realize, "_beam_choices", {})
  sis = [kernel(n, "CPU") for n in range(6001, 6005)]  # scheduling only: no compiler needed
  with Context(BEAM=1, PROGRAM_CACHE=2):
    for si in sis[:2] + sis[:1] + sis[2:]: realize._beam_choice(si)
  assert len(realize._beam_choices) == 2 and len(searched) == 4  # the second sis[0] was a hit
  assert [k[1] for k in realize._beam_choices] == [sis[2].ast, sis[3].ast]

@pytest.fixture
def disk_cache(tmp_path, monkeypatch):
  """An empty cache directory, seen as a new process would see it (nothing used or trimmed yet)."""
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  monkeypatch.setattr(ops_cpu, "_used", set())
  monkeypatch.setattr(ops_cpu, "_since_trim", {})
  return tmp_path / "fusegrad"

def fill(d, names_sizes, start: float) -> None:
  """Files of the given sizes, each one second newer than the last, from `start` on."""
  d.mkdir(exist_ok=True)
  for i, (name, size) in enumerate(names_sizes):
    (d / name).write_bytes(b"\0" * size)
    os.utime(d / name, (start + i, start + i))

@needs_cc
def test_disk_cache_is_trimmed_oldest_first_and_a_hit_survives(disk_cache, monkeypatch):
  t, kib = time.time() - 10000, 1 << 10
  with Context(DISK_CACHE_MB=0): old = ops_cpu.compile_c(src := "void k(float* a) { a[0] = 4001.0f; }")
  os.utime(old, (t - 100, t - 100))  # the oldest file of all, until a hit refreshes it
  fakes = [f"kernel_{i:032x}.so" for i in range(12)]
  fill(disk_cache, [(name, 100 * kib) for name in fakes] + [("cache.db", 2048 * kib), ("notes.so", 10)], t)
  monkeypatch.setattr(ops_cpu, "_used", set())  # a new process
  assert ops_cpu.compile_c(src) == old and os.path.getmtime(old) > t + 100
  with Context(DISK_CACHE_MB=1): new = ops_cpu.compile_c("void k(float* a) { a[0] = 4002.0f; }")  # first write: trims
  kernels = {p.name: p.stat().st_size for p in disk_cache.glob("kernel_*.so")}
  assert sum(kernels.values()) <= 1 << 20
  assert os.path.exists(old) and os.path.exists(new)
  # 12 x 100 KiB + two ~15 KiB libraries is over 1 MiB by about 210 KiB: exactly the three oldest fakes went
  assert sorted(n for n in kernels if n in fakes) == fakes[3:]
  assert (disk_cache / "cache.db").exists() and (disk_cache / "notes.so").exists()  # not kernel libraries: never counted or deleted

@needs_cc
def test_disk_cache_trims_again_after_writing_a_sixteenth_of_the_cap(disk_cache):
  with Context(DISK_CACHE_MB=1):
    ops_cpu.compile_c("void k(float* a) { a[0] = 1.0f; }")  # first write: trims an empty cache
    fill(disk_cache, [(f"kernel_{i:032x}.so", 200 * 1024) for i in range(6)], time.time() - 10000)
    for i in range(8):  # ~15 KiB each: the 1/16 (64 KiB) threshold is crossed after about five
      ops_cpu.compile_c(f"void k(float* a) {{ a[0] = {i + 2}.0f; }}")
    assert sum(p.stat().st_size for p in disk_cache.glob("kernel_*.so")) <= 1 << 20
    assert not (disk_cache / f"kernel_{0:032x}.so").exists() and (disk_cache / f"kernel_{5:032x}.so").exists()

def test_trim_tolerates_files_vanishing(tmp_path, monkeypatch):
  fill(tmp_path, [(f"kernel_{i}.so", 1000) for i in range(5)], time.time() - 100)
  unlink = os.unlink
  def racing_unlink(p):  # another process deletes the file first
    unlink(p)
    unlink(p)
  monkeypatch.setattr(ops_cpu.os, "unlink", racing_unlink)
  ops_cpu.trim_disk_cache(str(tmp_path), 2500)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["kernel_3.so", "kernel_4.so"]

@needs_cc
def test_load_rebuilds_a_library_deleted_before_it_was_loaded(disk_cache, monkeypatch):
  si = kernel(7001)
  compile_c = ops_cpu.compile_c
  def compile_then_lose(src):  # another process's trim deletes the file between the cache check and the load
    path = compile_c(src)
    if not calls: os.unlink(path)
    calls.append(path)
    return path
  calls: list = []
  monkeypatch.setattr(ops_cpu, "compile_c", compile_then_lose)
  prg = realize.get_program(si.device, si.ast)
  assert len(calls) == 2
  np.testing.assert_equal(run(prg, si), np.arange(7001, dtype=np.float32) * 2 + 1)

def test_scalar_constants_are_kept_for_reuse_and_bounded(monkeypatch):
  """An eager program's `x * 1.01` reuses its constant's nodes call after call (the result is freed in between), and the
  memo keeps only the most recent CONSTS_KEPT constants."""
  from fusegrad.uop import ops
  x = Tensor(np.arange(4, dtype=np.float32))
  kept = weakref.ref((x * 1.01).uop.src[1])
  gc.collect()
  assert kept() is not None and (x * 1.01).uop.src[1] is kept()
  monkeypatch.setattr(ops, "_consts", {})
  monkeypatch.setattr(ops, "CONSTS_KEPT", 3)
  for v in range(10): x + v / 7
  assert len(ops._consts) == 3
  np.testing.assert_allclose((x * 1.01).numpy(), np.arange(4, dtype=np.float32) * np.float32(1.01))

def test_a_kept_constant_once_realized_stays_inline():
  # the memo keeps a constant's nodes alive, and a realized node is read from its buffer by later kernels: a constant
  # is never remembered as realized, so a later kernel using the same number still computes it inline
  from fusegrad.schedule import create_schedule
  (Tensor.ones(3) * 0).sum().numpy()  # folds to the constant 0.0, which the next line then realizes
  assert not bool(Tensor(0.0))
  x = Tensor(np.arange(4, dtype=np.float32)).realize()
  assert len(create_schedule([(x.maximum(Tensor(0.0))).uop])[0][-1].bufs) == 2  # the output and x
