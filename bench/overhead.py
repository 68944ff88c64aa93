"""Python overhead: a 100-op elementwise graph on a 16-element tensor, warm caches; basic indexing; a column read at a new
index; a row write.

fusegrad eager: time per call from building the graph to the kernel having run (`.realize()`); fusegrad JIT: the same
function under TinyJit (replay). Reference: the same 100 ops in PyTorch eager (one kernel per op). Reported as us per
call and us per kernel launched (GlobalCounters.kernel_count for fusegrad, 100 for PyTorch).

usage: python bench/overhead.py"""
import time
from common import Row, check_close, get_torch, run_standalone, settle, PROBLEMS  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
import numpy as np
from fusegrad import Tensor, TinyJit, GlobalCounters

N_OPS, SIZE = 100, 16
_CYCLE = [lambda y: y * 1.01, lambda y: y + 0.1, lambda y: y.relu(), lambda y: y - 0.05, lambda y: y.clamp(min=-1.0)]

def graph(x):
  """100 elementwise ops; works on fusegrad and torch tensors alike."""
  for i in range(N_OPS): x = _CYCLE[i % len(_CYCLE)](x)
  return x

_NP_CYCLE = [lambda y: y * 1.01, lambda y: y + 0.1, lambda y: np.maximum(y, 0), lambda y: y - 0.05, lambda y: np.maximum(y, -1.0)]
def graph_np(x):
  for i in range(N_OPS): x = _NP_CYCLE[i % len(_NP_CYCLE)](x)
  return x

def per_call(fn, calls: int, batches: int = 5, warmup: int = 3) -> float:
  """Best (over batches) mean seconds per call, after settle()."""
  settle()
  for _ in range(warmup): fn()
  best = float("inf")
  for _ in range(batches):
    st = time.perf_counter()
    for _ in range(calls): fn()
    best = min(best, (time.perf_counter() - st) / calls)
  return best

def kernels_per_call(fn) -> int:
  GlobalCounters.reset(); fn(); return GlobalCounters.kernel_count

# views user code takes every step (a batch, a row, a channel, a new axis): fusegrad builds a node, torch makes a view
_INDEXES = [3, (slice(1, 3),), (Ellipsis, 2), (slice(None), None)]

def indexing_row(calls: int = 2000) -> Row:
  """Mean us per basic index (the four of _INDEXES in turn) of a realized (8, 16, 4) tensor: fusegrad's lazy view against
  torch's."""
  xn = np.arange(8 * 16 * 4, dtype=np.float32).reshape(8, 16, 4)
  x = Tensor(xn).realize()
  for i in _INDEXES: check_close(f"overhead index {i}", x[i].numpy(), xn[i], rtol=0, atol=0)
  fg = per_call(lambda: [x[i] for i in _INDEXES], calls) / len(_INDEXES)
  torch = get_torch()
  ref = None if torch is None else per_call(lambda px=torch.from_numpy(xn): [px[i] for i in _INDEXES], calls) / len(_INDEXES)
  return Row("overhead basic indexing (x[3], x[1:3], x[..., 2], x[:, None])", fg * 1e6, ref * 1e6 if ref else None, "us/op", False, "PyTorch")

def column_read_row(calls: int = 200) -> Row:
  """Mean us per `(x[:, j] * 2).realize()` of a realized (64, 4096) tensor, every call at a column not read before (the
  column's start is a launch value: one kernel and one cached schedule for all), against torch's eager op."""
  xn = np.arange(64 * 4096, dtype=np.float32).reshape(64, 4096)
  x, cols = Tensor(xn).realize(), iter(range(1 << 62))
  def read(): return (x[:, next(cols)] * 2).realize()
  check_close("overhead column read", read().numpy(), xn[:, 0] * 2, rtol=0, atol=0)
  fg = per_call(read, calls)
  torch = get_torch()
  ref = None
  if torch is not None:
    px, pcols = torch.from_numpy(xn), iter(range(1 << 62))
    ref = per_call(lambda: px[:, next(pcols)] * 2, calls)
  return Row("overhead column read (x[:, j] * 2), new j each call, realized", fg * 1e6, ref * 1e6 if ref else None, "us/op", False, "PyTorch")

def setitem_row(calls: int = 500) -> Row:
  """Mean us per row write `x[i] = v` into a realized (64, 128) tensor, rows in turn, realized each time (written in
  place: one kernel over the row, compiled once), against torch's in-place copy."""
  xn, vn = np.zeros((64, 128), np.float32), np.arange(128, dtype=np.float32)
  x, v = Tensor(xn).realize(), Tensor(vn).realize()
  rows_done = iter(range(1 << 62))
  def write():
    x[next(rows_done) % 64] = v
    x.realize()
  for _ in range(64): write()
  check_close("overhead setitem", x.numpy(), np.broadcast_to(vn, xn.shape), rtol=0, atol=0)
  fg = per_call(write, calls)
  torch = get_torch()
  ref = None
  if torch is not None:
    px, pv, prow = torch.from_numpy(xn), torch.from_numpy(vn), iter(range(1 << 62))
    def twrite(): px[next(prow) % 64] = pv
    ref = per_call(twrite, calls)
  return Row("overhead row write x[i] = v, (64, 128), realized", fg * 1e6, ref * 1e6 if ref else None, "us/op", False, "PyTorch")

def rows(calls: int = 20) -> list[Row]:
  xn = np.linspace(-2, 2, SIZE, dtype=np.float32)
  x = Tensor(xn).realize()
  def eager(): return graph(x).realize()
  jit = TinyJit(lambda t: graph(t).realize())
  # two inputs in turn: a replay skips a kernel whose input buffer did not change since its last run
  inputs = [x, Tensor(xn).realize()]
  def jcall():
    inputs.reverse()
    return jit(inputs[0])
  want = graph_np(xn.astype(np.float64))
  check_close("overhead graph (eager)", eager().numpy(), want, rtol=1e-4, atol=1e-5)
  for _ in range(3): jcall()
  check_close("overhead graph (TinyJit replay)", jcall().numpy(), want, rtol=1e-4, atol=1e-5)
  e_s, j_s = per_call(eager, calls), per_call(jcall, calls * 5)
  e_k, j_k = kernels_per_call(eager), kernels_per_call(jcall)
  if j_k != e_k: PROBLEMS.append(f"overhead graph: {e_k} kernels eager but {j_k} under TinyJit")
  torch = get_torch()
  t_s = None
  if torch is not None:
    px = torch.from_numpy(xn)
    with torch.no_grad(): t_s = per_call(lambda: graph(px), calls * 5)
  def us(s): return s * 1e6 if s else None
  return [indexing_row(), column_read_row(), setitem_row(),
          Row(f"overhead {N_OPS}-op graph eager ({e_k} kernel{'s' * (e_k != 1)})", us(e_s), us(t_s), "us/call", False, "PyTorch"),
          Row(f"overhead {N_OPS}-op graph eager per kernel", us(e_s / max(e_k, 1)), us(t_s / N_OPS) if t_s else None, "us/kernel", False, "PyTorch"),
          Row(f"overhead {N_OPS}-op graph TinyJit ({j_k} kernel{'s' * (j_k != 1)})", us(j_s), us(t_s), "us/call", False, "PyTorch"),
          Row(f"overhead {N_OPS}-op graph TinyJit per kernel", us(j_s / max(j_k, 1)), us(t_s / N_OPS) if t_s else None, "us/kernel", False, "PyTorch")]

if __name__ == "__main__":
  run_standalone(rows)
