"""Tensor graph -> ordered list of kernels.

A node gets its own buffer (ends a kernel) only where fusing would recompute work or the user asked for it:
realize targets, CONTIGUOUS, COPY, and a reduce whose result is used by several nodes or read through an expand."""
from __future__ import annotations
import itertools, weakref
from dataclasses import dataclass
from fusegrad.device import Buffer
from fusegrad.runtime.ops_disk import disk_view
from fusegrad.dtype import dtypes
from fusegrad.uop.ops import GroupOp, Ops, UOp

_buffer_ids = itertools.count()
# BUFFER uop -> the Buffer it names, and any realized lazy uop -> the buffer view holding its value
buffers: "weakref.WeakKeyDictionary[UOp, Buffer]" = weakref.WeakKeyDictionary()
realized: "weakref.WeakKeyDictionary[UOp, UOp]" = weakref.WeakKeyDictionary()

def new_buffer_uop(device: str, size: int, dtype, buf: Buffer | None = None) -> UOp:
  u = UOp(Ops.BUFFER, dtype, (UOp(Ops.DEVICE, arg=device),), (next(_buffer_ids), size))
  buffers[u] = buf if buf is not None else Buffer(device, size, dtype)
  return u

def buffer_view(u: UOp) -> UOp | None:
  """The BUFFER behind u if u is only a reshape of a whole buffer (its value needs no kernel)."""
  while True:
    if u in realized: u = realized[u]
    elif u.op is Ops.RESHAPE: u = u.src[0]
    else: break
  return u if u.op is Ops.BUFFER else disk_view(u)

@dataclass(frozen=True)
class ScheduleItem:
  ast: UOp               # SINK(STORE(DEFINE_GLOBAL(0), value)) or SINK(COPY)
  bufs: tuple            # Buffer objects; bufs[i] is DEFINE_GLOBAL(i)
  device: str
  var_vals: tuple = ()   # ((DEFINE_VAR, value), ...) bound for this launch

EXPAND_COST_LIMIT = 8
EXPENSIVE = {Ops.SIGMOID, Ops.EXP, Ops.LOG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TAN, Ops.SQRT, Ops.POW, Ops.TANH, Ops.ERF, Ops.IDIV, Ops.MOD}

def _cost(u: UOp, stop) -> int:
  """Rough ALU count of the fused work that computes u (stops at buffers and materialized nodes)."""
  total, seen, stack = 0, set(), [u]
  while stack:
    x = stack.pop()
    if x in seen or x.op is Ops.BUFFER or (x is not u and x in stop): continue
    seen.add(x)
    if x.op is Ops.REDUCE_AXIS: return EXPAND_COST_LIMIT + 1
    total += 4 if x.op in EXPENSIVE else 1 if x.op in GroupOp.ALU else 0
    stack.extend(x.src)
  return total

def decide_buffers(order: list[UOp], targets: list[UOp]) -> dict[UOp, None]:
  """Which nodes get their own buffer. Walking users before sources, track the distinct index contexts each node
  would be evaluated in if fused (a kernel root, or a movement op's view of a context; elementwise users share
  their context, so x*x reads x once) and whether it is read through a broadcast. A reduce evaluated in more than
  one context, or through an expand, would redo its whole loop each time: it gets a buffer."""
  materialize: dict[UOp, None] = dict.fromkeys(targets)
  materialize.update(dict.fromkeys(u for u in order if u.op in (Ops.CONTIGUOUS, Ops.COPY)))
  users: dict[UOp, list[UOp]] = {}
  for u in order:
    for s in u.src: users.setdefault(s, []).append(u)
  ctx: dict[UOp, frozenset] = {}
  expanded: dict[UOp, bool] = {}
  for u in reversed(order):
    if u.op is Ops.SINK: continue
    ps = users.get(u, [])
    seen: set = set()
    for p in ps:
      if p in materialize: seen.add(p)
      elif p.op in GroupOp.Movement or p.op is Ops.GATHER: seen.update((p, t) for t in ctx.get(p, ()))
      else: seen.update(ctx.get(p, ()))
      if len(seen) > 1: break  # only "one or more than one" matters
    ctx[u] = frozenset(list(seen)[:2]) or frozenset([u])
    expanded[u] = any(p not in materialize and (expanded.get(p, False) or _expands(p)) for p in ps)
    if u.op is Ops.REDUCE_AXIS and (len(ctx[u]) > 1 or expanded[u]): materialize[u] = None
    # a padded input read through sliding windows (a padded conv) is copied once, so the conv's loads need no bounds checks
    elif u.op is Ops.PAD and any(p.op is Ops.WINDOW for p in ps): materialize[u] = None
    elif expanded[u] and u.op not in GroupOp.Movement and u.op not in (Ops.BUFFER, Ops.CONST) and _cost(u, materialize) > EXPAND_COST_LIMIT:
      # cheap math is recomputed per broadcast element; expensive math (e.g. a random generator) gets a buffer
      materialize[u] = None
    if u in materialize: ctx[u], expanded[u] = frozenset([u]), False
  return materialize

def _expands(u: UOp) -> bool: return u.op in (Ops.EXPAND, Ops.WINDOW) and u.size > u.src[0].size

def create_schedule(targets: list[UOp]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  """Returns the kernels to run, in order, and for each target the buffer view that will hold it."""
  originals = [t for t in dict.fromkeys(targets) if buffer_view(t) is None]
  if not originals: return [], {}
  sink = UOp(Ops.SINK, dtypes.void, tuple(originals))
  # swap in buffers for already-realized nodes so they are never recomputed
  stop = lambda u: u.op is Ops.BUFFER or u in realized
  order = sink.toposort(stop)
  if any(u in realized for u in order):
    sink = sink.substitute({u: realized[u] for u in order if u in realized})
    order = sink.toposort(lambda u: u.op is Ops.BUFFER)
  targets = list(sink.src)
  materialize = decide_buffers(order, targets)
  # build one kernel per materialized node, children first
  out_view: dict[UOp, UOp] = {}
  items: list[ScheduleItem] = []
  for u in order:
    if u not in materialize or u.op is Ops.SINK: continue
    if buffer_view(u) is not None:  # a target that is already a whole buffer
      out_view[u] = u
      continue
    out = new_buffer_uop(u.device, u.size, u.dtype)
    items.append(_kernel(u, out, out_view))
    out_view[u] = UOp(Ops.RESHAPE, u.dtype, (out,), u.shape)
  kept = {buffers[out_view[t].base] for t in targets}
  return plan_memory(items, kept), {o: out_view[t] for o, t in zip(originals, targets)}

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

def _kernel(u: UOp, out: UOp, out_view: dict[UOp, UOp]) -> ScheduleItem:
  """The kernel computing u into `out`: materialized sources become DEFINE_GLOBAL loads, bound variables become
  DEFINE_VARs whose values travel with the item."""
  if u.op is Ops.COPY:
    src = u.src[0]
    bv = out_view[src].base if src in out_view else buffer_view(src)
    if bv is not None and src.device != u.device:
      return ScheduleItem(UOp(Ops.SINK, dtypes.void, (UOp(Ops.COPY, u.dtype, (), (src.device, u.device)),)), (buffers[out], buffers[bv]), u.device)
  bufs = [buffers[out]]
  var_vals: dict[UOp, int] = {}
  index: dict[UOp, UOp] = {}
  for x in (u.src[0] if u.op in (Ops.CONTIGUOUS, Ops.COPY) else u).toposort(lambda x: x is not u and (x in out_view or x.op is Ops.BUFFER)):
    if x is not u and (x in out_view or x.op is Ops.BUFFER):
      buf = buffers[out_view[x].base if x in out_view else x]
      if buf not in bufs: bufs.append(buf)
      g = UOp(Ops.DEFINE_GLOBAL, buf.dtype.ptr(buf.size), (), bufs.index(buf))
      r = UOp(Ops.RESHAPE, g.dtype.base, (g,), x.shape) if x.shape != g.shape else g
    elif x.op is Ops.CONST: r = UOp(Ops.CONST, x.dtype, (), x.arg)
    elif x.op is Ops.BIND:  # the kernel sees only the variable; its value is passed at launch, so no recompile
      r, n = x.src[0], 0
      while var_vals.setdefault(r, x.src[1].arg) != x.src[1].arg:  # a second binding in one kernel gets its own name
        n += 1
        r = x.src[0].replace(arg=(f"{x.src[0].arg[0]}_{n}",) + x.src[0].arg[1:])
    elif x.op is Ops.COPY: r = index[x.src[0]]
    elif x.op is Ops.DEVICE: continue
    else: r = x.replace(src=tuple(index[s] for s in x.src if s.op is not Ops.DEVICE))
    index[x] = r
  value = index[u.src[0] if u.op in (Ops.CONTIGUOUS, Ops.COPY) else u]
  g0 = UOp(Ops.DEFINE_GLOBAL, u.dtype.ptr(u.size), (), 0)
  return ScheduleItem(UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (g0, value)),)), tuple(bufs), u.device, tuple(var_vals.items()))
