"""CUDA figures for test/cuda_check.sh: fp32 and fp16 matmul 4096 TFLOP/s and the beautiful_mnist training step (b128,
Adam, TinyJit), fusegrad on CUDA beside PyTorch on the same GPU when torch with CUDA is installed.

usage: python bench/cuda.py"""
import statistics
from common import adam_jit_step, wall_times  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
import numpy as np
from fusegrad import Device, Tensor, TinyJit, dtypes
from fusegrad.nn.state import get_parameters
from tiny_mnist import BS, LR, Model

def _torch_cuda():
  try: import torch
  except ImportError: return None
  return torch if torch.cuda.is_available() else None

def _median_s(fn, sync) -> float:
  """Median wall seconds of fn with the device synchronized after it (GPU launches return before the work is done)."""
  return statistics.median(wall_times(lambda: (fn(), sync()), 10))

def matmul_rows(torch) -> list[str]:
  n, rows = 4096, []
  for name, dt in (("fp32", dtypes.float32), ("fp16", dtypes.float16)):
    a, b = Tensor.rand(n, n, device="CUDA").cast(dt).realize(), Tensor.rand(n, n, device="CUDA").cast(dt).realize()
    mm = TinyJit(lambda a, b: (a @ b).realize())
    fg = 2 * n ** 3 / _median_s(lambda: mm(a, b), sync=Device["CUDA"].synchronize) / 1e12
    ref = "n/a"
    if torch is not None:
      ta, tb = (torch.rand(n, n, device="cuda", dtype=getattr(torch, {"fp32": "float32", "fp16": "float16"}[name])) for _ in range(2))
      ref = f"{2 * n ** 3 / _median_s(lambda: ta @ tb, sync=torch.cuda.synchronize) / 1e12:.1f}"
    rows.append(f"matmul {name} {n}    fusegrad {fg:8.2f} TFLOP/s   PyTorch {ref} TFLOP/s")
  return rows

def torch_mnist_ms(torch, fg_model, x: np.ndarray, y: np.ndarray) -> float:
  """PyTorch's median ms per beautiful_mnist step on the GPU (the same layers and weights; Adam; cross-entropy)."""
  from tiny_mnist import _torch_model
  m = _torch_model(torch, fg_model).cuda().train()
  opt = torch.optim.Adam(m.parameters(), lr=LR)
  tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).long().cuda()
  def step():
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(tx), ty).backward()
    opt.step()
  for _ in range(3): step()
  return _median_s(step, sync=torch.cuda.synchronize) * 1e3

def mnist_row(torch) -> str:
  model = Model()
  rng = np.random.default_rng(0)
  xn, yn = rng.standard_normal((BS, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, BS).astype(np.int32)
  ref = f"{torch_mnist_ms(torch, model, xn, yn):.2f} ms" if torch is not None else "n/a"  # before fusegrad trains the weights
  for p in get_parameters(model): p.replace(p.to("CUDA").realize())
  step = adam_jit_step(model, LR)
  x, y = Tensor(xn, device="CUDA").realize(), Tensor(yn, device="CUDA").realize()
  for _ in range(3): step(x, y)
  fg = _median_s(lambda: step(x, y), sync=Device["CUDA"].synchronize) * 1e3
  return f"beautiful_mnist step b{BS}   fusegrad {fg:8.2f} ms   PyTorch {ref}"

if __name__ == "__main__":
  torch = _torch_cuda()
  print(f"GPU: {Device['CUDA'].renderer.arch}; torch CUDA: {torch.cuda.get_device_name(0) if torch else 'not installed'}")
  for row in matmul_rows(torch): print(row, flush=True)
  print(mnist_row(torch))
