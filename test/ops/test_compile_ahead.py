"""A schedule's new kernels are compiled in parallel before it runs (engine/realize.py, codegen/program.compile_ahead),
with the same programs and results as one by one."""
import threading, time
import numpy as np
from fusegrad import Device, Tensor
from fusegrad.codegen import program

def graph(x: Tensor) -> Tensor:  # several kernels: two reductions read through broadcasts, then elementwise
  return ((x @ x.T).relu().sum(1, keepdim=True) + (x.T @ x).max()).exp2()

def test_new_kernels_compile_on_several_threads(monkeypatch, tmp_path):
  from fusegrad.runtime import ops_cpu
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # a cold disk cache: every kernel is compiled
  dev = Device["CPU"]
  threads, real = set(), ops_cpu._run_cc
  def slow_cc(cc, flags, src, args):  # a compile as slow as a cold one, so one thread cannot take all of them
    if "-c" in args: threads.add(threading.get_ident()); time.sleep(0.05)  # a schedule's object files, not a lone kernel
    return real(cc, flags, src, args)
  monkeypatch.setattr(ops_cpu, "_run_cc", slow_cc)
  monkeypatch.setattr(dev, "compile_workers", 2)
  program._programs.clear()
  a = np.random.default_rng(0).standard_normal((33, 17)).astype(np.float32)
  got = graph(Tensor(a)).numpy()
  want = np.exp2(np.maximum(a @ a.T, 0).sum(1, keepdims=True) + (a.T @ a).max())
  np.testing.assert_allclose(got, want, rtol=1e-4)
  assert len(threads) == 2, "the kernels were compiled one by one"
  monkeypatch.setattr(dev, "compile_workers", 1)
  program._programs.clear()
  np.testing.assert_array_equal(graph(Tensor(a)).numpy(), got)  # the same programs, compiled in turn

def test_kernels_linked_into_one_library_keep_apart(monkeypatch, tmp_path):
  # kernels of one name from different graphs (E_7 twice) and the same source twice, compiled as one batch and one link:
  # each runs its own code, every one lands in the disk cache under its own name, and a later compile finds them there
  from fusegrad.runtime import ops_cpu
  from fusegrad.codegen.program import _render
  from fusegrad.schedule import create_schedule
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  a = np.arange(7, dtype=np.float32)
  x = Tensor(a).realize()
  outs = [x + 1, x * 2, (x * 2).exp(), x + 1]
  items = [create_schedule([o.uop])[0][-1] for o in outs]
  specs = [_render("CPU", si.ast, None) for si in items]
  assert specs[0].name == specs[1].name and specs[0].src != specs[1].src
  links = []
  real = ops_cpu._run_cc
  monkeypatch.setattr(ops_cpu, "_run_cc", lambda cc, flags, src, args: (links.append(args) if src is None else None, real(cc, flags, src, args))[1])
  progs = Device["CPU"].compile_many(specs, 2)
  assert len(links) == 1 and sum(a.endswith(".o") for a in links[0]) == 3, "three distinct kernels, one link"
  for prg, si, want in zip(progs, items, (a + 1, a * 2, np.exp(a * 2), a + 1)):
    prg([b.ensure_allocated()._mem for b in si.bufs], [])
    np.testing.assert_allclose(np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32), want, rtol=1e-6)
  monkeypatch.setattr(ops_cpu, "_run_cc", lambda *a: (_ for _ in ()).throw(AssertionError("compiled again")))
  assert [p.lib._name for p in Device["CPU"].compile_many(specs, 2)] == [p.lib._name for p in progs]

def test_a_kernel_that_fails_to_compile_in_a_batch_raises(monkeypatch, tmp_path):
  from fusegrad.runtime import ops_cpu
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  ok = "static void k(float* a) { a[0] = 1.0f; }\nvoid task_ok(float* a) { k(a); }\n"
  import pytest
  with pytest.raises(RuntimeError, match="failed to compile a kernel"): ops_cpu.compile_many([ok, "void broken( {"], 2)

def _slow_first_compile(monkeypatch, ops_cpu, units):
  """Records each translation unit compiled to an object file; the first one takes long enough for the rest to queue."""
  real = ops_cpu._run_cc
  def cc(c, flags, src, args):
    if "-c" in args:
      units.append(src)
      if len(units) == 1: time.sleep(0.3)
    return real(c, flags, src, args)
  monkeypatch.setattr(ops_cpu, "_run_cc", cc)

def test_waiting_kernels_with_one_prelude_compile_as_one_unit(monkeypatch, tmp_path):
  # kernels that queue while the compiler is busy share one gcc run, even two of one name (E_7) with different code
  from fusegrad.runtime import ops_cpu
  from fusegrad.codegen.program import _render
  from fusegrad.schedule import create_schedule
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  a = np.arange(7, dtype=np.float32)
  x = Tensor(a).realize()
  outs = [x - 3, x + 1, x * 2, (x * 2).exp(), x.sqrt()]
  items = [create_schedule([o.uop])[0][-1] for o in outs]
  specs = [_render("CPU", si.ast, None) for si in items]
  units: list = []
  _slow_first_compile(monkeypatch, ops_cpu, units)
  progs = Device["CPU"].compile_many(specs, 1)
  assert len(units) < len(specs) and any(u.count("void task_") > 1 for u in units), "no kernels were batched"
  for prg, si, want in zip(progs, items, (a - 3, a + 1, a * 2, np.exp(a * 2), np.sqrt(a))):
    prg([b.ensure_allocated()._mem for b in si.bufs], [])
    np.testing.assert_allclose(np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32), want, rtol=1e-6)

def test_a_broken_kernel_in_a_unit_is_named_by_its_own_source(monkeypatch, tmp_path):
  from fusegrad.runtime import ops_cpu
  import pytest
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  pre = "typedef float f;\n" + ops_cpu.KERNEL_MARK
  # the first has a prelude of its own, so it compiles alone while the two others wait
  first = "typedef int i;\n" + ops_cpu.KERNEL_MARK + "static void k(i* a) { a[0] = 1; }\nvoid task_a(i* a) { k(a); }\n"
  ok = pre + "static void k(f* a) { a[0] = 2; }\nvoid task_b(f* a) { k(a); }\n"
  broken = pre + "static void k(f* a) { a[0] = oops; }\nvoid task_c(f* a) { k(a); }\n"
  units: list = []
  _slow_first_compile(monkeypatch, ops_cpu, units)
  with pytest.raises(RuntimeError, match="failed to compile a kernel") as e: ops_cpu.compile_many([first, ok, broken], 1)
  assert any(u.count("void task_") == 2 for u in units), "the two waiting kernels were not batched"
  assert "task_c" in str(e.value) and "task_b" not in str(e.value)
