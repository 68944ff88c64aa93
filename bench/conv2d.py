"""conv2d against torch.nn.functional.conv2d: ResNet's 3x3 64->64 channels at 56x56, batch 8, padding 1 (wall clock and
GFLOP/s). bench/conv_forms.py times the other forms networks use from here (form_rows).

Rows: ms per call (wall clock, inputs already realized; fusegrad includes building and scheduling the graph with a warm
kernel cache) and GFLOP/s (fusegrad from kernel time, GlobalCounters.time_sum_s; PyTorch from wall time).

usage: python bench/conv2d.py"""
from common import Row, fg_times, best_wall, check_close, get_torch, run_standalone  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
import numpy as np
from fusegrad import Tensor

N, CIN, COUT, H, W, K = 8, 64, 64, 56, 56, 3
# name, (batch, in channels, out channels, image size, kernel size), conv2d's keywords
FORMS = [("3x3 s2 64->128 56x56 b8", (8, 64, 128, 56, 3), dict(stride=2, padding=1)),
         ("1x1 64->256 56x56 b8", (8, 64, 256, 56, 1), dict()),
         ("depthwise 3x3 144ch 56x56 b8", (8, 144, 144, 56, 3), dict(padding=1, groups=144)),
         ("depthwise 3x3 s2 96ch 112x112 b8", (8, 96, 96, 112, 3), dict(stride=2, padding=1, groups=96)),
         ("depthwise 3x3 512ch 14x14 b16", (16, 512, 512, 14, 3), dict(padding=1, groups=512)),
         ("grouped 3x3 g32 128ch 28x28 b8", (8, 128, 128, 28, 3), dict(padding=1, groups=32))]
TRAINED = ["3x3 64->64 56x56 b8", "3x3 s2 64->128 56x56 b8", "depthwise 3x3 144ch 56x56 b8"]

def _data(shape, kw, rng):
  n, cin, cout, size, k = shape
  x = rng.standard_normal((n, cin, size, size), dtype=np.float32)
  fan_in = cin // kw.get("groups", 1) * k * k
  return x, (rng.standard_normal((cout, cin // kw.get("groups", 1), k, k), dtype=np.float32) / fan_in ** 0.5).astype(np.float32)

def _forward_row(name, x, w, kw, reps, torch) -> tuple[Row, float]:
  """The wall-clock row of one conv's forward pass, and fusegrad's kernel seconds."""
  tx, tw = Tensor(x).realize(), Tensor(w).realize()
  def fg(): return tx.conv2d(tw, **kw).realize()
  fg_wall, fg_kern, _ = fg_times(fg, reps, warmup=3)  # new buffers and idle threads make the first calls slow
  ref_s = None
  if torch is not None:
    px, pw = torch.from_numpy(x), torch.from_numpy(w)
    with torch.no_grad():
      check_close(f"conv2d {name}", fg().numpy(), torch.nn.functional.conv2d(px, pw, **kw).numpy(), rtol=1e-3, atol=1e-3)
      ref_s = best_wall(lambda: torch.nn.functional.conv2d(px, pw, **kw), reps, warmup=3)
  return Row(f"conv2d {name} (wall)", fg_wall * 1e3, ref_s * 1e3 if ref_s else None, "ms/call", False, "PyTorch"), fg_kern

def _train_row(name, x, w, kw, reps, torch) -> Row:
  """Forward, then the gradients of the input and the weight for sum(out^2)/2, each step from a fresh graph."""
  tx, tw = Tensor(x, requires_grad=True).realize(), Tensor(w, requires_grad=True).realize()
  def fg():
    tx.grad = tw.grad = None
    (tx.conv2d(tw, **kw).square().sum() / 2).backward()
    Tensor.realize(tx.grad, tw.grad)
    return tx.grad, tw.grad
  fg_wall, _, _ = fg_times(fg, reps, warmup=2)
  ref_s = None
  if torch is not None:
    px, pw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    def ref():
      px.grad = pw.grad = None
      (torch.nn.functional.conv2d(px, pw, **kw).square().sum() / 2).backward()
    ref()
    check_close(f"conv2d {name} weight gradient", fg()[1].numpy(), pw.grad.numpy(), rtol=2e-3, atol=2e-3)
    ref_s = best_wall(ref, reps, warmup=2)
  return Row(f"conv2d {name} forward+backward (wall)", fg_wall * 1e3, ref_s * 1e3 if ref_s else None, "ms/step", False, "PyTorch")

NAME = f"3x3 {CIN}->{COUT} {H}x{W} b{N}"

def rows(reps: int = 5) -> list[Row]:
  rng, torch = np.random.default_rng(0), get_torch()
  kw = dict(padding=1)
  x, w = _data((N, CIN, COUT, H, K), kw, rng)
  wall, fg_kern = _forward_row(NAME, x, w, kw, reps, torch)
  flops = 2 * N * COUT * H * W * CIN * K * K
  return [wall, Row(f"conv2d {NAME}", flops / fg_kern * 1e-9, flops / (wall.reference * 1e-3) * 1e-9 if wall.reference else None, "GFLOP/s", True, "PyTorch")]

def form_rows(reps: int = 5) -> list[Row]:
  """The wall clock of each of FORMS, then of a training step of each of TRAINED."""
  rng, torch = np.random.default_rng(1), get_torch()
  cases = {n: (*_data(shape, k, rng), k) for n, shape, k in [(NAME, (N, CIN, COUT, H, K), dict(padding=1)), *FORMS]}
  return [_forward_row(n, *cases[n], reps, torch)[0] for n, _, _ in FORMS] + [_train_row(n, *cases[n], reps, torch) for n in TRAINED]

if __name__ == "__main__":
  run_standalone(rows)
