"""Run a schedule: lower, render and compile each kernel (cached), then launch it."""
from __future__ import annotations
import contextlib, time
from typing import Iterator
from fusegrad.device import Device, write_stamps
from fusegrad.helpers import BEAM, DEBUG, GlobalCounters, NOOPT, colored
from fusegrad.uop.ops import Capturing, Ops
from fusegrad.schedule import ScheduleItem
from fusegrad.codegen.program import _bound, _programs, compile_ahead, get_program  # noqa: F401  (_programs: tests clear it)

# while a TinyJit captures, every launch is recorded here as (ScheduleItem, program or None for a copy)
_capturing: list | None = None

@contextlib.contextmanager
def capture() -> Iterator[list]:
  """Record every kernel launched inside the block (what TinyJit replays) into the list it yields."""
  global _capturing
  prev, _capturing, was = _capturing, [], Capturing.active
  Capturing.active = True
  try: yield _capturing
  finally: _capturing, Capturing.active = prev, was

def is_capturing() -> bool: return _capturing is not None

def run_schedule(schedule: list[ScheduleItem]):
  schedule = [si for si in schedule if si.bufs[0].size]  # an empty output has nothing to compute (nor compile)
  if DEBUG.value >= 3 and schedule:
    print(f"schedule: {len(schedule)} item(s)")
    for i, si in enumerate(schedule):
      kind = "copy" if si.ast.src[0].op is Ops.COPY else "kernel"
      print(f"  {i:3d} {kind:6s} -> {si.bufs[0]}  inputs {list(si.bufs[1:])}" + (f"  vars {[(v.arg[0], x) for v, x in si.var_vals]}" if si.var_vals else ""))
  if not BEAM.value and len(schedule) > 1:  # a cold schedule compiles its kernels in parallel (BEAM times them one by one)
    kernels = [(si.device, si.ast) for si in schedule if si.ast.src[0].op is not Ops.COPY]
    if kernels: compile_ahead(kernels, getattr(Device[kernels[0][0]], "compile_workers", 1))
  for si in schedule:
    prg = None if si.ast.src[0].op is Ops.COPY else get_program(si.device, si.ast, _beam_choice(si) if BEAM.value else None)
    if _capturing is not None: _capturing.append((si, prg))
    launch(si, prg, si.bufs, dict(si.var_vals))

_beam_choices: dict = {}  # (device, ast) -> Opt, least recently used first, bounded like _programs

def _beam_choice(si: ScheduleItem):
  # BEAM times candidate kernels: only devices whose runtime says its timings mean something (the interpreter's do not)
  if not BEAM or NOOPT or not getattr(Device[si.device], "beam_search", False): return None
  key = (si.device, si.ast)
  if (opt := _beam_choices.pop(key, None)) is None:
    from fusegrad.codegen.search import beam_search
    opt = beam_search(si.device, si.ast, si.bufs, dict(si.var_vals), BEAM.value)
  _beam_choices[key] = opt
  _bound(_beam_choices)
  return opt

def launch(si: ScheduleItem, prg, bufs, var_vals: dict):
  """Run one kernel (or copy) on the given buffers; counts it in GlobalCounters and prints it at DEBUG>=2."""
  if prg is None:
    bufs[0].copyin(bufs[1].as_memoryview())
    return
  mems = [b.ensure_allocated()._mem for b in bufs]
  if bufs[0].size != 0: timed(si, prg, prg, mems, [var_vals[v] for v in prg.spec.vars])
  bufs[0].stamp = next(write_stamps)

class Launcher:
  """A kernel with its arguments bound, for calling again and again (a TinyJit replay changes only what was swapped).
  A device whose calls marshal their arguments gives a cheaper one from `prg.launcher(mems, var_vals)`."""
  def __init__(self, prg, mems: list, var_vals: list[int]): self.prg, self.mems, self.vals = prg, list(mems), list(var_vals)
  def set_buffer(self, i: int, mem) -> None: self.mems[i] = mem
  def set_vars(self, var_vals: list[int]) -> None: self.vals = list(var_vals)
  def __call__(self): self.prg(self.mems, self.vals)

def launcher(prg, mems: list, var_vals: list[int]):
  return prg.launcher(mems, var_vals) if hasattr(prg, "launcher") else Launcher(prg, mems, var_vals)

def timed(si: ScheduleItem, prg, fn, *args):
  """fn(*args), which runs prg's kernel: timed, counted in GlobalCounters, and printed at DEBUG>=2."""
  st = time.perf_counter()
  fn(*args)
  Device[si.device].synchronize()
  et = time.perf_counter() - st
  spec = prg.spec
  GlobalCounters.add(1, spec.flops, spec.mem_bytes, et)
  if DEBUG.value >= 2:  # .value: no Python-level comparison call per kernel
    print(f"{colored('***', 'green')} {si.device:7s} {GlobalCounters.kernel_count:4d} {spec.name:32s} shape {str(spec.shape):20s} "
          f"tm {et*1e3:9.3f}ms ({spec.flops/max(et,1e-9)*1e-9:9.2f} GFLOP/s {spec.mem_bytes/max(et,1e-9)*1e-9:8.2f} GB/s) "
          f"mem {GlobalCounters.mem_used/1e9:.3f} GB (peak {GlobalCounters.mem_peak/1e9:.3f})")
