"""What the gcc workarounds cost: kernels compiled with our flags (gcc gets -fno-tree-loop-vectorize and
-fno-tree-slp-vectorize: gcc 12.2's loop vectorizer miscompiled reversed loads and its SLP vectorizer a float16 rounding)
against the same kernels without them, interleaved in one process.

usage: python bench/compiler_flags.py      (a ratio above 1 means the workarounds are faster; noise is about +-15% on 2 cores)"""
import statistics
from common import env_info, Row, print_table  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
import numpy as np
from fusegrad import Tensor, GlobalCounters
from fusegrad.engine import realize
from fusegrad.runtime import ops_cpu

WORKAROUNDS = ("-fno-tree-loop-vectorize", "-fno-tree-slp-vectorize")

def workloads() -> dict:
  rng = np.random.default_rng(0)
  def t(*shape): return Tensor(rng.random(shape, dtype=np.float32)).realize()
  a, b, x, w, s, e = t(1024, 1024), t(1024, 1024), t(8, 64, 56, 56), t(64, 64, 3, 3), t(4096, 1024), t(4096, 4096)
  return {"matmul 1024": lambda: (a @ b).realize(), "conv2d 3x3 64ch 56x56 b8": lambda: x.conv2d(w, padding=1).realize(),
          "softmax 4096x1024": lambda: s.softmax(-1).realize(), "layernorm 4096x1024": lambda: s.layernorm().realize(),
          "elementwise 16M": lambda: (e * 2 + e.exp()).realize(), "flip + row sum 16M": lambda: e.flip(1).sum(1).realize()}

def kernel_ms(fn, reps: int = 7) -> float:
  fn()
  times = []
  for _ in range(reps):
    GlobalCounters.reset()
    fn()
    times.append(GlobalCounters.time_sum_s * 1e3)
  return statistics.median(times)

def rows(rounds: int = 4) -> list[Row]:
  ours = ops_cpu.compiler_flags
  def without(cc: str) -> tuple[str, ...]: return tuple(f for f in ours(cc) if f not in WORKAROUNDS)
  work, best = workloads(), {}
  try:
    for r in range(rounds):
      for mode in (("with", "without") if r % 2 else ("without", "with")):
        ops_cpu.compiler_flags = ours if mode == "with" else without
        realize._programs.clear()  # recompile (the disk cache keys on the flags)
        for name, fn in work.items(): best[(name, mode)] = min(best.get((name, mode), float("inf")), kernel_ms(fn))
  finally: ops_cpu.compiler_flags = ours
  return [Row(f"{name} (kernel ms)", best[(name, "with")], best[(name, "without")], "ms", False, "no workaround") for name in work]

if __name__ == "__main__":
  print(env_info())
  print(f"compiler {ops_cpu.find_compiler()}, flags {' '.join(ops_cpu.compiler_flags(ops_cpu.find_compiler()))}")
  print_table(rows(), "fusegrad's flags vs the same without " + " ".join(WORKAROUNDS))
