"""conv2d, ResNet-like 3x3 64->64 channels, 56x56, batch 8, padding 1: fusegrad vs torch.nn.functional.conv2d.

Rows: ms per call (wall clock, inputs already realized; fusegrad includes building and scheduling the graph with a warm
kernel cache) and GFLOP/s (fusegrad from kernel time, GlobalCounters.time_sum_s; PyTorch from wall time).

usage: python bench/conv2d.py"""
from common import Row, fg_times, best_wall, check_close, get_torch, run_standalone  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
import numpy as np
from fusegrad import Tensor

N, CIN, COUT, H, W, K = 8, 64, 64, 56, 56, 3

def rows(reps: int = 5) -> list[Row]:
  rng = np.random.default_rng(0)
  x = rng.standard_normal((N, CIN, H, W), dtype=np.float32)
  w = (rng.standard_normal((COUT, CIN, K, K), dtype=np.float32) / (CIN * K * K) ** 0.5).astype(np.float32)
  flops = 2 * N * COUT * H * W * CIN * K * K
  tx, tw = Tensor(x).realize(), Tensor(w).realize()
  def fg(): return tx.conv2d(tw, padding=1).realize()
  fg_wall, fg_kern, _ = fg_times(fg, reps, warmup=1)
  torch = get_torch()
  ref_s = None
  if torch is not None:
    import torch.nn.functional as F
    px, pw = torch.from_numpy(x), torch.from_numpy(w)
    with torch.no_grad():
      want = F.conv2d(px, pw, padding=1).numpy()
      ref_s = best_wall(lambda: F.conv2d(px, pw, padding=1), reps, warmup=1)
    check_close("conv2d 3x3 64->64 56x56 b8 pad1", fg().numpy(), want, rtol=1e-3, atol=1e-3)
  name = f"conv2d 3x3 {CIN}->{COUT} {H}x{W} b{N}"
  return [Row(f"{name} (wall)", fg_wall * 1e3, ref_s * 1e3 if ref_s else None, "ms/call", False, "PyTorch"),
          Row(f"{name}", flops / fg_kern * 1e-9, flops / ref_s * 1e-9 if ref_s else None, "GFLOP/s", True, "PyTorch")]

if __name__ == "__main__":
  run_standalone(rows)
