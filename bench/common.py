"""Shared helpers for the bench/ scripts: fair BLAS environment, timers, optional torch, result rows and the table.

Import this module before numpy: it drops OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE from this process's environment, which
(set on some machines for old OpenBLAS builds) make a current numpy pick a slow kernel and the reference unfair."""
from __future__ import annotations
import os, sys, time, platform, statistics, threading
from dataclasses import dataclass
from typing import Callable

for _k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"): os.environ.pop(_k, None)
# CPU_ISA=avx2 compiles fusegrad for AVX2 on an AVX-512 host; the references then run their AVX2 kernels too (PyTorch's
# ATen and oneDNN, OpenBLAS's Haswell ones), or the comparison would set AVX2 code against AVX-512 code
REFERENCE_ISA = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell"},
                 "sse": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "OPENBLAS_CORETYPE": "Nehalem"}}
for _k, _v in REFERENCE_ISA.get(os.environ.get("CPU_ISA", "").lower(), {}).items(): os.environ.setdefault(_k, _v)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path: sys.path.insert(0, _ROOT)

import numpy as np  # noqa: E402
from fusegrad import GlobalCounters  # noqa: E402

ROOT = _ROOT
PROBLEMS: list[str] = []  # mismatches and failures found while benchmarking, printed under the table

# ---- optional torch ----
_torch = None
_torch_tried = False
def get_torch():
  """torch with one thread per core, or None when it is not installed."""
  global _torch, _torch_tried
  if not _torch_tried:
    _torch_tried = True
    try:
      import torch
      torch.set_num_threads(os.cpu_count() or 1)
      _torch = torch
    except ImportError: _torch = None
  return _torch

def blas_info() -> str:
  """Which BLAS numpy runs (via threadpoolctl, when installed)."""
  try: from threadpoolctl import threadpool_info
  except ImportError: return "numpy BLAS: (threadpoolctl not installed)"
  libs = [f"{d.get('internal_api')} {d.get('version')} arch={d.get('architecture')} threads={d.get('num_threads')}"
          for d in threadpool_info() if d.get("user_api") == "blas"]
  return "numpy BLAS: " + ("; ".join(libs) or "none found")

def cpu_model() -> str:
  """The CPU's name from /proc/cpuinfo (or platform.processor() where there is none)."""
  try:
    for line in open("/proc/cpuinfo"):
      if line.startswith("model name"): return line.split(":", 1)[1].strip()
  except OSError: pass
  return platform.processor() or platform.machine() or "unknown"

def fusegrad_target() -> str:
  """The ISA fusegrad's CPU kernels are compiled for (vector lanes, CPU_ISA when set) and the threads they run on."""
  from fusegrad import Device
  from fusegrad.runtime.ops_cpu import cpu_count
  lanes = Device["CPU"].renderer.simd_width
  isa = "NEON" if platform.machine() in ("aarch64", "arm64") else {16: "AVX-512", 8: "AVX2", 4: "SSE"}.get(lanes, f"{lanes} lanes")
  forced = f" (CPU_ISA={os.environ['CPU_ISA']})" if os.environ.get("CPU_ISA") else ""
  return f"fusegrad: {isa}{forced}, {lanes} float32 lanes, threads={cpu_count()}"

def env_info() -> str:
  t = get_torch()
  tv = f"torch {t.__version__} threads={t.get_num_threads()}" if t else "torch: not installed (references n/a)"
  load = "  load avg %.1f" % os.getloadavg()[0] if hasattr(os, "getloadavg") else ""
  pinned = "  ".join(f"{k}={os.environ[k]}" for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE") if k in os.environ)
  refs = f"\nreferences pinned to CPU_ISA: {pinned}" if pinned else ""
  return f"CPU: {cpu_model()}  cpus={os.cpu_count()}{load}\n{fusegrad_target()}\nnumpy {np.__version__}  {tv}\n{blas_info()}{refs}"

# ---- timers ----
SETTLE_S = 0.2  # OpenBLAS's threads spin for 10-50 ms after a call: a fusegrad matmul timed then ran at the one-core rate
SETTLE_MAX_S = 5.0  # PyTorch's threads kept 2 cores busy for over a second after its AVX2 depthwise conv

def _other_threads_cpu() -> int:
  """CPU time (clock ticks) used so far by this process's threads other than the calling one (0 where /proc is missing)."""
  me, total = threading.get_native_id(), 0
  try:
    for tid in os.listdir("/proc/self/task"):
      if int(tid) == me: continue
      with open(f"/proc/self/task/{tid}/stat") as f: fields = f.read().rsplit(")", 1)[1].split()
      total += int(fields[11]) + int(fields[12])  # utime, stime
  except (OSError, ValueError, IndexError): return 0
  return total

def settle():
  """Wait until the threads of the library timed or checked before (OpenBLAS, PyTorch's OpenMP) stop spinning, so the
  next timing has the cores to itself: at least SETTLE_S, then until the other threads use no CPU for 50 ms."""
  time.sleep(SETTLE_S)
  deadline = time.perf_counter() + SETTLE_MAX_S
  while time.perf_counter() < deadline:
    before = _other_threads_cpu()
    time.sleep(0.05)
    if _other_threads_cpu() - before < 1: return

def wall_times(fn: Callable[[], object], reps: int, warmup: int = 1) -> list[float]:
  """Wall-clock seconds of each of `reps` calls of fn, after settle() and `warmup` untimed calls."""
  settle()
  for _ in range(warmup): fn()
  out = []
  for _ in range(reps):
    st = time.perf_counter(); fn(); out.append(time.perf_counter() - st)
  return out

def best_wall(fn: Callable[[], object], reps: int, warmup: int = 1) -> float: return min(wall_times(fn, reps, warmup))
def median_wall(fn: Callable[[], object], reps: int, warmup: int = 1) -> float: return statistics.median(wall_times(fn, reps, warmup))

def fg_times(fn: Callable[[], object], reps: int, warmup: int = 1) -> tuple[float, float, int]:
  """For a fusegrad callable that realizes its result: (best wall s, best kernel s from GlobalCounters.time_sum_s,
  kernels launched per call), after settle() and `warmup` untimed calls."""
  settle()
  for _ in range(warmup): fn()
  walls, kerns, count = [], [], 0
  for _ in range(reps):
    GlobalCounters.reset()
    st = time.perf_counter(); fn(); walls.append(time.perf_counter() - st)
    kerns.append(GlobalCounters.time_sum_s); count = GlobalCounters.kernel_count
  return min(walls), min(kerns), count

def check_close(name: str, got, want, rtol: float = 1e-3, atol: float = 1e-4) -> bool:
  """Compare a fusegrad result with the reference once; record a mismatch in PROBLEMS instead of raising."""
  got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
  if got.shape != want.shape:
    PROBLEMS.append(f"{name}: shape {got.shape} != reference {want.shape}"); return False
  if not np.allclose(got, want, rtol=rtol, atol=atol):
    err = np.abs(got - want); i = np.unravel_index(int(np.argmax(err)), err.shape)
    PROBLEMS.append(f"{name}: max abs err {err[i]:.3g} at {tuple(int(j) for j in i)} (got {got[i]:.6g}, want {want[i]:.6g}; "
                    f"{int((~np.isclose(got, want, rtol=rtol, atol=atol)).sum())}/{got.size} off)"); return False
  return True

# ---- rows and the table ----
@dataclass
class Row:
  workload: str
  fusegrad: float | None
  reference: float | None
  unit: str               # e.g. "GFLOP/s", "ms", "us/call"
  higher_better: bool     # True for rates (GFLOP/s, GB/s), False for times
  ref_name: str = "NumPy" # "NumPy" or "PyTorch"
  @property
  def ratio(self) -> float | None:
    """fusegrad speed / reference speed (>1: fusegrad faster)."""
    if not self.fusegrad or not self.reference: return None
    return self.fusegrad / self.reference if self.higher_better else self.reference / self.fusegrad

def _fmt(v: float | None) -> str:
  if v is None: return "n/a"
  if v >= 100: return f"{v:.0f}"
  if v >= 10: return f"{v:.1f}"
  return f"{v:.2f}" if v >= 0.1 else f"{v:.3g}"

def print_table(rows: list[Row], title: str | None = None):
  if title: print(title)
  w = max([len("workload")] + [len(r.workload) for r in rows]) + 2
  print(f"{'workload':<{w}}{'fusegrad':>10}{'reference':>22}{'ratio':>10}  unit")
  print("-" * (w + 10 + 22 + 10 + 12))
  for r in rows:
    ref = f"{_fmt(r.reference)} ({r.ref_name})" if r.reference is not None else f"n/a ({r.ref_name})"
    print(f"{r.workload:<{w}}{_fmt(r.fusegrad):>10}{ref:>22}{_fmt(r.ratio):>10}  {r.unit}")
  print("ratio = fusegrad speed / reference speed in this run (>1: fusegrad faster)")

def print_problems():
  if PROBLEMS:
    print("\nPROBLEMS found while benchmarking:")
    for p in PROBLEMS: print("  - " + p)
  else: print("\nall fusegrad outputs matched the references" + ("" if get_torch() else " (torch missing: conv2d and MNIST outputs unchecked)"))

def run_standalone(rows_fn: Callable[..., list[Row]], **kw):
  """What each script's __main__ does: print the environment, its rows as a table, and any problems."""
  print(env_info())
  print_table(rows_fn(**kw))
  print_problems()

def adam_jit_step(model, lr: float, jit: bool = True) -> Callable:
  """The training step every benchmark times: TinyJit of Tensor.train() forward, sparse cross-entropy, backward and Adam,
  the loss and the update realized in one schedule (so the forward pass is computed once). jit=False: the same step
  eager, its graph built and scheduled in Python every call, as a PyTorch-style loop runs."""
  from fusegrad import Tensor, TinyJit
  from fusegrad.nn import optim
  from fusegrad.nn.state import get_parameters
  opt = optim.Adam(get_parameters(model), lr=lr)
  @Tensor.train()
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    return loss.realize(*opt.schedule_step())
  return TinyJit(step) if jit else step

def time_train_steps(label: str, fg_step: Callable, torch_model, xs: list, ys: list, lr: float, steps: int, warmup: int,
                     check_steps: int = 4) -> tuple[float, float | None]:
  """Median ms per training step of fusegrad's `fg_step(x, y) -> loss` and of `torch_model` with torch's Adam and
  cross-entropy on the same batches (cycled), after warm-up; the first check_steps losses must agree (PROBLEMS)."""
  from fusegrad import Tensor
  n = len(xs)
  txs, tys = [Tensor(x).realize() for x in xs], [Tensor(y).realize() for y in ys]
  fg_losses = [fg_step(txs[i % n], tys[i % n]).item() for i in range(check_steps)]  # run, capture, replays
  def cycled(step: Callable[[int], object]) -> Callable[[], object]:  # step(0), step(1), ... on successive calls
    it = iter(range(1 << 62))
    return lambda: step(next(it))
  fg_ms = statistics.median(wall_times(cycled(lambda i: fg_step(txs[i % n], tys[i % n])), steps, warmup)) * 1e3
  if not np.all(np.isfinite(fg_losses)): PROBLEMS.append(f"{label}: non-finite fusegrad loss {fg_losses}")
  if torch_model is None: return fg_ms, None
  torch = get_torch()
  topt = torch.optim.Adam(torch_model.parameters(), lr=lr)
  torch_model.train()
  pxs, pys = [torch.from_numpy(x) for x in xs], [torch.from_numpy(y).long() for y in ys]
  def t_step(i: int):
    topt.zero_grad()
    loss = torch.nn.functional.cross_entropy(torch_model(pxs[i % n]), pys[i % n])
    loss.backward()
    topt.step()
    return loss
  t_losses = [t_step(i).item() for i in range(check_steps)]
  check_close(f"{label} losses, first {check_steps} steps", fg_losses, t_losses, rtol=2e-3, atol=1e-4)
  ref_ms = statistics.median(wall_times(cycled(t_step), steps, warmup)) * 1e3
  return fg_ms, ref_ms
