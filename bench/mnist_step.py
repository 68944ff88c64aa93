"""One MNIST CNN training step (batch 256, Adam): fusegrad under TinyJit with Tensor.train() vs the same model in PyTorch.

The fusegrad model is examples/beautiful_mnist.py's Model; the torch one is rebuilt layer by layer and starts from the
same weights, so the first steps' losses are compared as a correctness check. Reported: wall ms per step after
warm-up (median).

usage: python bench/mnist_step.py"""
import os, sys
import common  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
from common import adam_jit_step, time_train_steps, Row, get_torch, run_standalone
import numpy as np
from fusegrad import Tensor

sys.path.insert(0, os.path.join(common.ROOT, "examples"))
from beautiful_mnist import Model

BS, LR, NBATCH, CHECK_STEPS = 256, 1e-3, 4, 4

def _torch_model(torch, fg_model):
  nn = torch.nn
  m = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
  with torch.no_grad():
    for i in (0, 1, 4, 5, 9):  # same starting weights as the fusegrad model
      src, dst = fg_model.layers[i], m[i]
      dst.weight.copy_(torch.from_numpy(src.weight.numpy())); dst.bias.copy_(torch.from_numpy(src.bias.numpy()))
  return m

def rows(steps: int = 15, warmup: int = 3) -> list[Row]:
  rng = np.random.default_rng(0)
  xs = [rng.standard_normal((BS, 1, 28, 28), dtype=np.float32) for _ in range(NBATCH)]
  ys = [rng.integers(0, 10, BS).astype(np.int32) for _ in range(NBATCH)]

  Tensor.manual_seed(0)
  model = Model()
  torch = get_torch()
  tm = _torch_model(torch, model) if torch is not None else None  # copy weights before fusegrad trains them
  fg_ms, ref_ms = time_train_steps("MNIST step", adam_jit_step(model, LR), tm, xs, ys, LR, steps, warmup, CHECK_STEPS)
  return [Row(f"MNIST CNN train step b{BS} Adam (JIT)", fg_ms, ref_ms, "ms/step", False, "PyTorch")]

if __name__ == "__main__":
  run_standalone(rows)
