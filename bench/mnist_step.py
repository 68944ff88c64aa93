"""One MNIST CNN training step (batch 256, Adam): fusegrad under TinyJit with Tensor.train() vs the same model in PyTorch.

The fusegrad model is examples/beautiful_mnist.py's Model; the torch one is rebuilt layer by layer and starts from the
same weights, so the first steps' losses are compared as a correctness check. Reported: wall ms per step after
warm-up (median).

usage: python bench/mnist_step.py"""
import os, sys, time, statistics
import common  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
from common import Row, check_close, get_torch, run_standalone, PROBLEMS
import numpy as np
from fusegrad import Tensor, TinyJit
from fusegrad.nn import optim
from fusegrad.nn.state import get_parameters

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
  opt = optim.Adam(get_parameters(model), lr=LR)

  @TinyJit
  @Tensor.train()
  def fg_step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    # the loss and the update in one schedule, so the forward pass is computed once
    return loss.realize(*opt.schedule_step())

  txs, tys = [Tensor(x).realize() for x in xs], [Tensor(y).realize() for y in ys]
  fg_losses = [fg_step(txs[i % NBATCH], tys[i % NBATCH]).item() for i in range(CHECK_STEPS)]  # run, capture, replays
  for i in range(warmup): fg_step(txs[i % NBATCH], tys[i % NBATCH])
  fg_t = []
  for i in range(steps):
    st = time.perf_counter(); fg_step(txs[i % NBATCH], tys[i % NBATCH]); fg_t.append(time.perf_counter() - st)
  fg_ms = statistics.median(fg_t) * 1e3

  ref_ms = None
  if tm is not None:
    topt = torch.optim.Adam(tm.parameters(), lr=LR)
    tm.train()
    pxs, pys = [torch.from_numpy(x) for x in xs], [torch.from_numpy(y).long() for y in ys]
    def t_step(i):
      topt.zero_grad()
      loss = torch.nn.functional.cross_entropy(tm(pxs[i % NBATCH]), pys[i % NBATCH])
      loss.backward()
      topt.step()
      return loss
    t_losses = [t_step(i).item() for i in range(CHECK_STEPS)]
    check_close(f"MNIST step losses, first {CHECK_STEPS} steps (step 1 eager, 2 capture, 3+ JIT replay)",
                fg_losses, t_losses, rtol=2e-3, atol=1e-4)
    for i in range(warmup): t_step(i)
    t_t = []
    for i in range(steps):
      st = time.perf_counter(); t_step(i); t_t.append(time.perf_counter() - st)
    ref_ms = statistics.median(t_t) * 1e3
  if not np.all(np.isfinite(fg_losses)): PROBLEMS.append(f"MNIST step: non-finite fusegrad loss {fg_losses}")
  return [Row(f"MNIST CNN train step b{BS} Adam (JIT)", fg_ms, ref_ms, "ms/step", False, "PyTorch")]

if __name__ == "__main__":
  run_standalone(rows)
