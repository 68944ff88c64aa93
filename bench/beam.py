"""BEAM=2 beside the heuristic: matmul fp32 1024, conv2d 3x3 64->64 56x56 b8 and tinygrad's beautiful_mnist train step
(b128, Adam, TinyJit), each timed with the heuristic's kernels and again with the kernels BEAM=2 picked. The search runs
before the timed calls and its picks are cached on disk, so a second run of this script does not search again;
BEAM_TIMEOUT (5 s a kernel unless set) bounds it. Ratio > 1: BEAM's kernels are faster than the heuristic's.

usage: python bench/beam.py"""
import os, statistics
from common import Row, fg_times, wall_times, check_close, adam_jit_step, run_standalone  # first: drops OPENBLAS_* before numpy loads
import numpy as np
from fusegrad import Tensor, Context
from fusegrad.helpers import BEAM
import conv2d, tiny_mnist

os.environ.setdefault("BEAM_TIMEOUT", "5")

def matmul_gflops() -> float:
  n = 1024
  rng = np.random.default_rng(0)
  a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
  ta, tb = Tensor(a).realize(), Tensor(b).realize()
  check_close(f"beam matmul 1024 (BEAM={BEAM.value})", (ta @ tb).numpy(), a.astype(np.float64) @ b, rtol=1e-3, atol=1e-2)
  return 2 * n ** 3 / fg_times(lambda: (ta @ tb).realize(), 5)[1] * 1e-9

def conv_gflops() -> float:
  rng = np.random.default_rng(0)
  x = rng.standard_normal((conv2d.N, conv2d.CIN, conv2d.H, conv2d.W), dtype=np.float32)
  w = rng.standard_normal((conv2d.COUT, conv2d.CIN, conv2d.K, conv2d.K), dtype=np.float32) * 0.05
  tx, tw = Tensor(x).realize(), Tensor(w).realize()
  flops = 2 * conv2d.N * conv2d.COUT * conv2d.H * conv2d.W * conv2d.CIN * conv2d.K * conv2d.K
  return flops / fg_times(lambda: tx.conv2d(tw, padding=1).realize(), 3)[1] * 1e-9

def mnist_step_ms(steps: int = 8) -> float:
  xs, ys = tiny_mnist._data()
  Tensor.manual_seed(0)
  step = adam_jit_step(tiny_mnist.Model(), tiny_mnist.LR)
  txs, tys = [Tensor(x).realize() for x in xs], [Tensor(y).realize() for y in ys]
  for i in range(3): step(txs[i], tys[i]).item()  # run, capture (BEAM searches here), replay
  it = iter(range(1 << 62))
  def one(): i = next(it) % len(txs); step(txs[i], tys[i]).item()
  return statistics.median(wall_times(one, steps, 1)) * 1e3

def rows() -> list[Row]:
  out = []
  for name, fn, unit, higher in [("matmul fp32 1024", matmul_gflops, "GFLOP/s", True),
                                 (f"conv2d 3x3 {conv2d.CIN}->{conv2d.COUT} {conv2d.H}x{conv2d.W} b{conv2d.N}", conv_gflops, "GFLOP/s", True),
                                 (f"beautiful_mnist train step b{tiny_mnist.BS} Adam (JIT)", mnist_step_ms, "ms/step", False)]:
    heuristic = fn()
    with Context(BEAM=2): beam = fn()
    out.append(Row(f"{name}: BEAM=2 vs heuristic", beam, heuristic, unit, higher, "heuristic"))
  return out

if __name__ == "__main__":
  run_standalone(rows)
