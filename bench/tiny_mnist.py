"""tinygrad's beautiful_mnist CNN, one training step (batch 128, Adam): fusegrad under TinyJit with Tensor.train(), and
the same step eager (no TinyJit: its graph built and scheduled in Python every step), vs the same model in PyTorch (CPU,
fusegrad's thread count), started from the same weights.

The model is the one in tinygrad's examples/beautiful_mnist.py (written here from its layer list): Conv2d(1,32,5) ReLU,
Conv2d(32,32,5) ReLU, BatchNorm(32), MaxPool 2x2, Conv2d(32,64,3) ReLU, Conv2d(64,64,3) ReLU, BatchNorm(64), MaxPool 2x2,
flatten, Linear(576,10). The first steps' losses are compared as a correctness check. Reported: wall ms per step after
warm-up (median), and, in a subprocess with an empty kernel cache (XDG_CACHE_HOME a fresh temp dir), the seconds to build
the model (weights realized) and to run the first training step; the first step is timed again with that cache now warm.

usage: python bench/tiny_mnist.py          (python bench/tiny_mnist.py --cold: only the cold timings, as JSON)"""
import os, sys, json, time, subprocess, tempfile
from common import adam_jit_step, time_train_steps, Row, get_torch, run_standalone, PROBLEMS  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
import numpy as np
from fusegrad import GlobalCounters, Tensor, nn
from fusegrad.nn.state import get_parameters
from fusegrad.runtime.ops_cpu import cpu_count

BS, LR, NBATCH, CHECK_STEPS = 128, 1e-3, 4, 4

class Model:
  def __init__(self):
    self.layers = [
      nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), Tensor.relu, nn.BatchNorm(32), Tensor.max_pool2d,    # 32 x 10 x 10
      nn.Conv2d(32, 64, 3), Tensor.relu, nn.Conv2d(64, 64, 3), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d,  # 64 x 3 x 3
      lambda x: x.flatten(1), nn.Linear(576, 10)]
  def __call__(self, x: Tensor) -> Tensor: return x.sequential(self.layers)

WEIGHTED = (0, 2, 4, 6, 8, 10, 13)  # layers with weight and bias, at the same index in the torch Sequential

def _torch_model(torch, fg_model):
  tnn = torch.nn
  m = tnn.Sequential(tnn.Conv2d(1, 32, 5), tnn.ReLU(), tnn.Conv2d(32, 32, 5), tnn.ReLU(), tnn.BatchNorm2d(32), tnn.MaxPool2d(2),
                     tnn.Conv2d(32, 64, 3), tnn.ReLU(), tnn.Conv2d(64, 64, 3), tnn.ReLU(), tnn.BatchNorm2d(64), tnn.MaxPool2d(2),
                     tnn.Flatten(), tnn.Linear(576, 10))
  with torch.no_grad():
    for i in WEIGHTED:
      src, dst = fg_model.layers[i], m[i]
      dst.weight.copy_(torch.from_numpy(src.weight.numpy())); dst.bias.copy_(torch.from_numpy(src.bias.numpy()))
  return m

def _data():
  rng = np.random.default_rng(0)
  xs = [rng.standard_normal((BS, 1, 28, 28), dtype=np.float32) for _ in range(NBATCH)]
  return xs, [rng.integers(0, 10, BS).astype(np.int32) for _ in range(NBATCH)]

def cold() -> dict:
  """Seconds to build the model (weights realized) and to run its first training step, in this process."""
  xs, ys = _data()
  tx, ty = Tensor(xs[0]).realize(), Tensor(ys[0]).realize()
  st = time.perf_counter()
  Tensor.manual_seed(0)
  model = Model()
  Tensor.realize(*get_parameters(model))
  step = adam_jit_step(model, LR)
  build = time.perf_counter() - st
  st = time.perf_counter()
  step(tx, ty).item()
  return {"build_s": build, "step1_s": time.perf_counter() - st}

def _cold_rows() -> list[Row]:
  with tempfile.TemporaryDirectory(prefix="fusegrad-cold-") as d:
    env = {**os.environ, "XDG_CACHE_HOME": d}
    runs = []
    for _ in range(2):  # 1: empty kernel cache, 2: the cache run 1 filled
      p = subprocess.run([sys.executable, os.path.abspath(__file__), "--cold"], env=env, capture_output=True, text=True)
      if p.returncode != 0:
        PROBLEMS.append(f"beautiful_mnist cold run failed (rc {p.returncode}): {(p.stderr.strip().splitlines() or [''])[-1]}"); return []
      runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
  name = f"beautiful_mnist b{BS}"
  return [Row(f"{name} cold: build model", runs[0]["build_s"], None, "s", False, "PyTorch"),
          Row(f"{name} cold: first train step", runs[0]["step1_s"], None, "s", False, "PyTorch"),
          Row(f"{name} first step, warm disk cache", runs[1]["step1_s"], None, "s", False, "PyTorch")]

def rows(steps: int = 15, warmup: int = 3) -> list[Row]:
  xs, ys = _data()
  Tensor.manual_seed(0)
  model = Model()
  torch = get_torch()
  if torch is not None: torch.set_num_threads(cpu_count())  # the threads fusegrad runs kernels on
  tm = _torch_model(torch, model) if torch is not None else None  # copy weights before fusegrad trains them
  step = adam_jit_step(model, LR)
  fg_ms, ref_ms = time_train_steps("beautiful_mnist step", step, tm, xs, ys, LR, steps, warmup, CHECK_STEPS)
  # the same step without TinyJit, from the same starting weights
  Tensor.manual_seed(0)
  model = Model()
  tm = _torch_model(torch, model) if torch is not None else None
  eager_ms, eager_ref_ms = time_train_steps("beautiful_mnist eager step", adam_jit_step(model, LR, jit=False), tm, xs, ys, LR, steps, warmup, CHECK_STEPS)
  return [Row(f"beautiful_mnist train step b{BS} Adam (JIT)", fg_ms, ref_ms, "ms/step", False, "PyTorch"),
          Row(f"beautiful_mnist train step b{BS} Adam (eager, no TinyJit)", eager_ms, eager_ref_ms, "ms/step", False, "PyTorch"),
          Row("beautiful_mnist TinyJit replay, Python per kernel", replay_python_us(step, xs[0], ys[0]), None, "us/kernel", False, "PyTorch"),
          *_cold_rows()]

def replay_python_us(step, x, y, rounds: int = 10) -> float:
  """Microseconds of Python per kernel in a TinyJit replay of the step: (wall time - the kernels' own time) / kernels,
  least of `rounds` replays. A kernel's own time (GlobalCounters.time_sum_s) is timed around its call into C, which
  includes waking the kernel threads. Each replay gets new input tensors, as in training, so no kernel is skipped for
  reading the same batch again."""
  best = float("inf")
  for _ in range(rounds):
    tx, ty = Tensor(x).realize(), Tensor(y).realize()
    GlobalCounters.reset()
    st = time.perf_counter()
    step(tx, ty)
    wall = time.perf_counter() - st
    best = min(best, (wall - GlobalCounters.time_sum_s) / max(GlobalCounters.kernel_count, 1) * 1e6)
  return best

if __name__ == "__main__":
  if sys.argv[1:] == ["--cold"]: print(json.dumps(cold()))
  else: run_standalone(rows)
