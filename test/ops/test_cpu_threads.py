"""The CPU's C thread pool (runtime/cpu_threads.py): a kernel split across n threads gives the single-thread answer for
any n (more threads than cores, more than output rows), from several Python threads at once, and in a forked child."""
import multiprocessing, threading
import numpy as np
import pytest
from fusegrad import Tensor, Variable, native
from fusegrad.runtime import ops_cpu

def _work(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  return ((Tensor(a) @ Tensor(b)).relu() + 1).sum(1).numpy()  # a matmul big enough to be split across threads

def _want(a, b): return (np.maximum(a @ b, 0) + 1).sum(1)

A = np.random.default_rng(0).standard_normal((37, 96), dtype=np.float32)
B = np.random.default_rng(1).standard_normal((96, 53), dtype=np.float32)

@pytest.mark.parametrize("n", [1, 2, 3, 5, 64])
def test_any_thread_count(monkeypatch, n):
  monkeypatch.setattr(ops_cpu, "cpu_count", lambda: n)
  np.testing.assert_allclose(_work(A, B), _want(A, B), rtol=1e-4, atol=1e-3)  # (the native core's launcher, where built)
  # through ctypes, counting the pool's calls
  monkeypatch.setattr(ops_cpu, "_run_task", native.python_versions.get((ops_cpu, "_run_task"), ops_cpu._run_task))
  calls = []
  real = ops_cpu.thread_pool()
  monkeypatch.setattr(ops_cpu, "thread_pool", lambda: lambda *a: calls.append(a[-1]) or real(*a))
  np.testing.assert_allclose(_work(A, B), _want(A, B), rtol=1e-4, atol=1e-3)
  assert (n in calls) == (n > 1)  # the split ran through the pool

def test_bound_variable_reaches_every_thread(monkeypatch):
  monkeypatch.setattr(ops_cpu, "cpu_count", lambda: 3)
  x = Tensor(np.arange(64 * 256, dtype=np.float32).reshape(64, 256)).realize()
  pos = Variable("p", 0, 200)
  for p in (0, 17, 200):
    got = (x[:, pos.bind(p):pos.bind(p) + 56] * 2).sum(1).numpy()
    np.testing.assert_allclose(got, (x.numpy()[:, p:p + 56] * 2).sum(1), rtol=1e-6)

def test_python_threads_at_once(monkeypatch):
  monkeypatch.setattr(ops_cpu, "cpu_count", lambda: 2)
  errors = []
  def run(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((37, 96), dtype=np.float32), rng.standard_normal((96, 53), dtype=np.float32)
    for _ in range(5):
      try: np.testing.assert_allclose(_work(a, b), _want(a, b), rtol=1e-4, atol=1e-3)
      except Exception as e: errors.append(e)
  threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert not errors

def _child(q):
  q.put(bool(np.allclose(_work(A, B), _want(A, B), rtol=1e-4, atol=1e-3)))

def test_forked_child_starts_its_own_workers(monkeypatch):
  monkeypatch.setattr(ops_cpu, "cpu_count", lambda: 2)
  _work(A, B)  # the parent's workers exist now; a forked child inherits none of them
  ctx = multiprocessing.get_context("fork")
  q = ctx.Queue()
  p = ctx.Process(target=_child, args=(q,))
  p.start()
  p.join(60)
  assert p.exitcode == 0 and q.get(timeout=5)
