"""fp32 matmul: fusegrad vs NumPy GFLOP/s, measured in the same run.

usage: python bench/matmul.py [sizes...]   (default 256 512 1024)"""
import sys, time
import numpy as np
from fusegrad import Tensor, GlobalCounters

def best_of(fn, reps: int) -> float:
  times = []
  for _ in range(reps):
    times.append(fn())
  return min(times)

def fusegrad_time(a: np.ndarray, b: np.ndarray) -> float:
  (Tensor(a) @ Tensor(b)).realize()  # compile once
  out = []
  for _ in range(5):
    ta, tb = Tensor(a).realize(), Tensor(b).realize()
    GlobalCounters.reset()
    (ta @ tb).realize()
    out.append(GlobalCounters.time_sum_s)
  return min(out)

def numpy_time(a: np.ndarray, b: np.ndarray) -> float:
  def run():
    st = time.perf_counter(); a @ b; return time.perf_counter() - st
  run()
  return best_of(run, 5)

def main():
  sizes = [int(x) for x in sys.argv[1:]] or [256, 512, 1024]
  print(f"{'workload':<22}{'fusegrad GFLOP/s':>18}{'NumPy GFLOP/s':>16}{'ratio':>8}")
  for n in sizes:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    flops = 2 * n ** 3
    fg, npt = flops / fusegrad_time(a, b) * 1e-9, flops / numpy_time(a, b) * 1e-9
    print(f"{f'matmul fp32 {n}':<22}{fg:>18.1f}{npt:>16.1f}{fg / npt:>8.2f}")

if __name__ == "__main__":
  main()
