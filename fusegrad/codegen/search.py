"""BEAM search: time every legal optimization of a kernel on its real buffers, keep the fastest.

Round one times each candidate twice (best kept); the best BEAM=N and the heuristic's pick are timed again (5 runs, best kept) and the winner is cached on
disk (SQLite under the user cache dir, keyed by device and kernel), so the next run reuses it with no search.
CACHELEVEL=0 skips the disk cache; BEAM_TIMEOUT (seconds, default 20) bounds the search of one kernel."""
from __future__ import annotations
import hashlib, json, os, sqlite3, time
from fusegrad.device import Device
from fusegrad.helpers import CACHELEVEL, DEBUG, cache_dir, getenv
from fusegrad.uop.ops import UOp
from fusegrad.codegen.opt import Opt, actions, choose
from fusegrad.codegen import gpu

def ast_key(device: str, ast: UOp) -> str:
  """A stable identity for a kernel on a target across processes (hash-consed UOps are only identical within one). The
  target is the device kind and its renderer's compile flags (CPU_ISA=avx2 on an AVX-512 host is another target)."""
  order = ast.toposort()
  pos = {u: i for i, u in enumerate(order)}
  text = "\n".join(f"{u.op.name}|{u.dtype!r}|{u.arg!r}|{[pos[s] for s in u.src]}" for u in order)
  target = " ".join(Device[device].renderer.compile_flags)
  return hashlib.sha256(f"{device.split(':')[0]}\n{target}\n{text}".encode()).hexdigest()

def _db() -> sqlite3.Connection:
  db = sqlite3.connect(os.path.join(cache_dir(), "cache.db"), timeout=30)
  db.execute("CREATE TABLE IF NOT EXISTS beam (key TEXT PRIMARY KEY, opt TEXT)")
  return db

def cached_opt(key: str) -> Opt | None:
  if not CACHELEVEL: return None
  with _db() as db: row = db.execute("SELECT opt FROM beam WHERE key=?", (key,)).fetchone()
  return Opt(*json.loads(row[0])) if row else None

def store_opt(key: str, opt: Opt):
  if not CACHELEVEL: return
  with _db() as db: db.execute("INSERT OR REPLACE INTO beam VALUES (?, ?)", (key, json.dumps([opt.kind, opt.arg, opt.upcast, opt.stage, opt.upcast2])))

def _time(prg, mems, var_vals, reps: int) -> float:
  best = float("inf")
  for _ in range(reps):
    st = time.perf_counter()
    prg(mems, var_vals)
    best = min(best, time.perf_counter() - st)
  return best

def beam_search(device: str, ast: UOp, bufs, var_vals: dict, width: int) -> Opt:
  from fusegrad.codegen.program import get_program
  key = ast_key(device, ast)
  if (opt := cached_opt(key)) is not None: return opt
  target = Device[device].renderer
  kernel = lower_and_simplify(ast, target.has_threads)
  # a GPU's actions are launch shapes (codegen/gpu.py), a CPU's are loop tilings (codegen/opt.py)
  chooser, lister = (gpu.choose, gpu.actions) if target.has_threads else (choose, actions)
  heuristic = chooser(kernel, target)
  cands = [heuristic] + [c for c in lister(kernel, target) if c != heuristic]  # timed first: a timeout must not skip the default
  mems = [b.ensure_allocated()._mem for b in bufs]
  deadline = time.perf_counter() + getenv("BEAM_TIMEOUT", 20.0)
  timed: list[tuple[float, Opt]] = []
  for i, opt in enumerate(cands):
    if time.perf_counter() > deadline: break
    try:
      prg = get_program(device, ast, opt)
      timed.append((_time(prg, mems, [var_vals[v] for v in prg.spec.vars], 2), opt))
    except Exception as e:  # a candidate that fails to build is skipped, never chosen
      if DEBUG >= 2: print(f"beam: {opt} failed: {e}")
    if DEBUG >= 1: print(f"\rbeam: {i + 1}/{len(cands)} candidates", end="", flush=True)
  finals = []
  # the heuristic's pick always reaches the final round: one noisy first timing must not lose the default
  best_first = [opt for _, opt in sorted(timed, key=lambda x: x[0])[:max(width, 1)]]
  for opt in best_first + ([heuristic] if heuristic not in best_first and timed else []):
    prg = get_program(device, ast, opt)
    finals.append((_time(prg, mems, [var_vals[v] for v in prg.spec.vars], 5), opt))
  best_t, best = min(finals, key=lambda x: x[0]) if finals else (0.0, Opt("NONE"))
  if DEBUG >= 1: print(f"\rbeam: {len(timed)}/{len(cands)} candidates timed, best {best} ({best_t*1e6:.1f} us)")
  store_opt(key, best)
  return best

def lower_and_simplify(ast: UOp, gpu_target: bool = False) -> UOp:
  from fusegrad.codegen.lowerer import lower_kernel
  from fusegrad.uop.pattern import graph_rewrite
  from fusegrad.uop.symbolic import symbolic
  from fusegrad.codegen.opt import merge_loops, share_row_values
  merged = merge_loops(graph_rewrite(lower_kernel(ast), symbolic))
  return merged if gpu_target else share_row_values(merged)  # what linearize optimizes
