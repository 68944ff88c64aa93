"""softmax, log_softmax, layernorm and cross-entropy over (4096, 1024) fp32: fusegrad vs PyTorch, and vs memory
bandwidth. On a CPU each is one kernel per row block (schedule/fusion.py `_per_row`).

Rows per op: ms per call (wall clock, input already realized; fusegrad includes building and scheduling the graph with
a warm kernel cache), GB/s vs PyTorch and GB/s vs NumPy's copy of the same bytes (the machine's practical memory
bandwidth). GB/s = the minimum bytes moved (read the input once, write the output once) / time; fusegrad's time there
is kernel time (GlobalCounters.time_sum_s), the references' wall time.

usage: python bench/norms.py"""
from common import Row, fg_times, best_wall, check_close, get_torch, run_standalone  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
import numpy as np
from fusegrad import Tensor

SHAPE = (4096, 1024)

def _np_softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True)); return e / e.sum(-1, keepdims=True)
def _np_log_softmax(x):
  m = x - x.max(-1, keepdims=True); return m - np.log(np.exp(m).sum(-1, keepdims=True))
def _np_cross_entropy(x, y): return -_np_log_softmax(x)[np.arange(len(y)), y].mean()
def _np_layernorm(x, eps=1e-5):
  m = x.mean(-1, keepdims=True); return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps)

def rows(reps: int = 10) -> list[Row]:
  rng = np.random.default_rng(0)
  x = rng.standard_normal(SHAPE, dtype=np.float32)
  def gbs(s, nbytes=2 * x.nbytes): return nbytes / s * 1e-9 if s else None  # read + write, 4 bytes each
  dst = np.empty_like(x)
  copy_s = best_wall(lambda: np.copyto(dst, x), reps * 2, warmup=2)
  tx = Tensor(x).realize()
  _, fg_copy, _ = fg_times(lambda: (-tx).realize(), reps, warmup=1)
  out = [Row(f"copy (neg) {SHAPE[0]}x{SHAPE[1]} fp32", gbs(fg_copy), gbs(copy_s), "GB/s", True, "NumPy copy")]
  torch = get_torch()
  px = torch.from_numpy(x) if torch is not None else None
  y = rng.integers(0, SHAPE[1], SHAPE[0])
  ty, py = Tensor(y).realize(), torch.from_numpy(y) if torch is not None else None
  # attention's causal mask: -inf above the diagonal (exp of -inf must not take a slow path)
  xm = np.where(np.arange(SHAPE[1]) <= np.arange(SHAPE[0])[:, None] % SHAPE[1], x, -np.inf).astype(np.float32)
  txm, pxm = Tensor(xm).realize(), torch.from_numpy(xm) if torch is not None else None
  ops = [("softmax", lambda: tx.softmax(-1).realize(), (lambda: torch.softmax(px, -1)) if torch else None, _np_softmax),
         ("causal softmax", lambda: txm.softmax(-1).realize(), (lambda: torch.softmax(pxm, -1)) if torch else None, lambda a: _np_softmax(xm.astype(np.float64))),
         ("log_softmax", lambda: tx.log_softmax(-1).realize(), (lambda: torch.log_softmax(px, -1)) if torch else None, _np_log_softmax),
         ("layernorm", lambda: tx.layernorm(-1).realize(),
          (lambda: torch.nn.functional.layer_norm(px, (SHAPE[1],))) if torch else None, _np_layernorm),
         ("cross_entropy", lambda: tx.cross_entropy(ty).realize(),
          (lambda: torch.nn.functional.cross_entropy(px, py)) if torch else None, lambda a: _np_cross_entropy(a, y))]
  for name, fg, ref, npref in ops:
    check_close(f"{name} {SHAPE}", fg().numpy(), npref(x.astype(np.float64)), rtol=1e-3, atol=1e-5)
    fg_wall, fg_kern, _ = fg_times(fg, reps, warmup=1)
    ref_s = best_wall(ref, reps, warmup=1) if ref else None
    label = f"{name} {SHAPE[0]}x{SHAPE[1]}"
    moved = x.nbytes if name == "cross_entropy" else 2 * x.nbytes  # a loss writes one number
    out += [Row(f"{label} (wall)", fg_wall * 1e3, ref_s * 1e3 if ref_s else None, "ms/call", False, "PyTorch"),
            Row(label, gbs(fg_kern, moved), gbs(ref_s, moved), "GB/s", True, "PyTorch"),
            Row(f"{label} vs bandwidth", gbs(fg_kern, moved), gbs(copy_s, moved), "GB/s", True, "NumPy copy")]
  return out

if __name__ == "__main__":
  run_standalone(rows)
