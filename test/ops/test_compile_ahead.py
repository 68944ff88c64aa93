"""A schedule's new kernels are compiled in parallel before it runs (engine/realize.py, codegen/program.compile_ahead),
with the same programs and results as one by one."""
import threading, time
import numpy as np
from fusegrad import Device, Tensor
from fusegrad.codegen import program

def graph(x: Tensor) -> Tensor:  # several kernels: two reductions read through broadcasts, then elementwise
  return ((x @ x.T).relu().sum(1, keepdim=True) + (x.T @ x).max()).exp2()

def test_new_kernels_compile_on_several_threads(monkeypatch):
  dev = Device["CPU"]
  threads, real = set(), type(dev).compile
  def slow_compile(self, spec):  # a compile as slow as a cold one, so a warm disk cache cannot let one thread take all of them
    threads.add(threading.get_ident())
    time.sleep(0.05)
    return real(self, spec)
  monkeypatch.setattr(type(dev), "compile", slow_compile)
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
