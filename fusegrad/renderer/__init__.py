"""Renderers turn a linear UOp list into source text for one kind of device."""
from __future__ import annotations
from dataclasses import dataclass, field
from fusegrad.uop.ops import GroupOp, Ops, UOp

@dataclass
class ProgramSpec:
  """Everything a runtime needs to launch one kernel, plus what DEBUG and GlobalCounters report."""
  name: str
  src: str
  uops: list[UOp]
  globals: list[tuple[int, bool]]  # (buffer index, is written)
  vars: list[UOp] = field(default_factory=list)
  flops: int = 0
  mem_bytes: int = 0
  shape: tuple[int, ...] = ()
  parallel: bool = False  # the kernel takes (core_id, n_cores) and splits its outer loop

def kernel_name(uops: list[UOp]) -> tuple[str, tuple[int, ...]]:
  sizes = tuple(u.src[0].arg for u in uops if u.op is Ops.RANGE)
  reduce = any(u.op is Ops.DEFINE_ACC for u in uops)
  return ("r" if reduce else "E") + "_" + ("_".join(str(s) for s in sizes) or "1"), sizes

def estimate(uops: list[UOp]) -> tuple[int, int]:
  """(FLOPs, bytes moved): ALU ops and memory accesses weighted by the trip count of their loops."""
  flops = mem = 0
  trips = [1]
  for u in uops:
    if u.op is Ops.RANGE: trips.append(trips[-1] * u.src[0].arg)
    elif u.op is Ops.ENDRANGE: trips.pop()
    elif u.op in GroupOp.ALU or u.op is Ops.ACC_UPDATE: flops += trips[-1]
  for u in uops:
    if u.op is Ops.DEFINE_GLOBAL: mem += max(u.dtype.size, 0) * u.dtype.itemsize
  return flops, mem
