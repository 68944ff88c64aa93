"""Memory planning: a schedule's intermediate buffers share memory where their lifetimes do not overlap."""
from __future__ import annotations
from fusegrad.device import Buffer
from fusegrad.schedule.kernel import ScheduleItem

def plan_memory(items: list[ScheduleItem], kept: set) -> list[ScheduleItem]:
  """Intermediate buffers (not kept by a target) whose last reader has run hand their memory to later outputs of the
  same size, dtype and device: peak memory follows the live set, not the number of kernels."""
  outputs = {si.bufs[0] for si in items}
  temps = outputs - kept
  last_use: dict = {}
  for i, si in enumerate(items):
    for b in si.bufs: last_use[b] = i
  free: dict[tuple, list[Buffer]] = {}
  swap: dict[Buffer, Buffer] = {}
  for i, si in enumerate(items):
    out = si.bufs[0]
    key = (out.device, out.size, out.dtype)
    if out in temps and free.get(key): swap[out] = free[key].pop()
    for b in dict.fromkeys(si.bufs):
      if b in temps and last_use[b] == i: free.setdefault((b.device, b.size, b.dtype), []).append(swap.get(b, b))
  if not swap: return items
  return [ScheduleItem(si.ast, tuple(swap.get(b, b) for b in si.bufs), si.device, si.var_vals) for si in items]
