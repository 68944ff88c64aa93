"""fp32 matmul: fusegrad vs NumPy GFLOP/s, measured in the same run (fusegrad: kernel time from GlobalCounters.time_sum_s).

usage: python bench/matmul.py [sizes...]   (default 512 1024 2048)"""
import sys
from common import Row, fg_times, best_wall, check_close, run_standalone  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
import numpy as np
from fusegrad import Tensor

def rows(sizes=(512, 1024, 2048)) -> list[Row]:
  out = []
  for n in sizes:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    ta, tb = Tensor(a).realize(), Tensor(b).realize()
    check_close(f"matmul {n}", (ta @ tb).numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-2 * n ** 0.5)
    reps = 20 if n <= 512 else 8 if n <= 1024 else 3  # small sizes are noisy on a shared 2-core box
    _, fg_s, _ = fg_times(lambda: (ta @ tb).realize(), reps, warmup=1)
    np_s = best_wall(lambda: a @ b, reps, warmup=1)
    flops = 2 * n ** 3
    out.append(Row(f"matmul fp32 {n}", flops / fg_s * 1e-9, flops / np_s * 1e-9, "GFLOP/s", True, "NumPy"))
  return out

if __name__ == "__main__":
  run_standalone(rows, sizes=[int(x) for x in sys.argv[1:]] or (512, 1024, 2048))
