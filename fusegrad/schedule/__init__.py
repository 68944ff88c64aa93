"""Tensor graph -> ordered list of kernels.

A node gets its own buffer (ends a kernel) only where fusing would recompute work or the user asked for it:
realize targets, CONTIGUOUS, COPY, and a reduce whose result is used by several nodes or read through an expand."""
from __future__ import annotations
import itertools, struct, weakref
from dataclasses import dataclass
from fusegrad.device import Buffer
from fusegrad.schedule.disk import disk_view
from fusegrad.dtype import dtypes
from fusegrad.helpers import ContextVar
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

# ---------------- schedule cache
# A training step or `f(x_i).realize()` builds a fresh graph every call (new input BUFFERs make every node above them
# new), but its structure repeats. The cache keys a schedule on that structure with the input buffers abstracted to
# slots and bound variable values left out, and on a hit rebuilds the items on this call's buffers.
SCACHE = ContextVar("SCACHE", 1)
CACHE_SIZE = 256
_cache: dict[tuple, "_Template"] = {}

class _Walk:
  """One pass over the graph giving both the scheduler's toposort (same order as `sink.toposort(stop at BUFFER or
  realized)`, so a miss on a graph without BINDs reuses it) and the cache key: one (op, dtype, arg, source entry
  indices) entry per node.
  Input buffers become slots numbered by first use and a BIND keeps its variable but not its value, so the key repeats
  when the structure does. The key holds plain data, never a node: keeping graph nodes alive would keep them in the
  weak `realized` map and change what later, hash-consed-equal graphs compute. key is None: do not cache this graph."""
  __slots__ = ("order", "key", "ins", "in_uops", "binds", "saw_realized")
  def __init__(self, sink: UOp):
    self.order, self.ins, self.in_uops, self.binds, self.saw_realized = [], {}, {}, {}, False
    key: list = [EXPAND_COST_LIMIT]
    refs: dict[UOp, int] = {}  # node -> its entry in key
    seen: set[UOp] = set()
    # a None on the stack means "the node under it has all its sources done"; sources are pushed even when already
    # seen and skipped when popped, which gives toposort's order without a filtering generator per node
    stack: list = [sink]
    order, binds, ok, pop, push = self.order, self.binds, True, stack.pop, stack.append
    BUFFER, BIND, CONST, COPY = Ops.BUFFER, Ops.BIND, Ops.CONST, Ops.COPY
    while stack:
      u = pop()
      if u is not None:
        if u in seen: continue
        seen.add(u)
        if u.op is not BUFFER and u not in realized:
          push(u); push(None)
          # a bound value is not walked (it is not part of the key); the order then lacks it, see `order_ok`
          if u.op is BIND: push(u.src[0])
          else: stack += u.src[::-1]
          continue
        # a stop node: toposort appends it right away
        order.append(u)
        if ok:
          ent = self._input(u) if u.op is BUFFER else self._realized(realized[u])
          if ent is None: ok = False
          else: refs[u] = len(key); key.append(ent)
        continue
      u = pop()
      order.append(u)
      if not ok: continue
      op = u.op
      # a device transfer is rare in a step and has its own item kind: not worth keying
      if op is COPY: ok = False; continue
      if op is BIND:
        binds.setdefault(u, len(binds))
        ent: tuple = (op._value_, u.dtype, refs[u.src[0]])
      # Enum hashing runs Python code, so ops key as their int value; constants key as exact bits (0.0 == -0.0)
      else: ent = (op._value_, u.dtype, self._const_key(u.arg) if op is CONST else u.arg, tuple([refs[s] for s in u.src]))
      refs[u] = len(key)
      key.append(ent)
    self.key = tuple(key) if ok else None

  @staticmethod
  def _const_key(v) -> tuple:
    """1 == 1.0 == True and 0.0 == -0.0 in Python; the key keeps them apart like hash-consing does (type, exact bits)."""
    return (v.__class__, struct.pack("<d", v) if v.__class__ is float else v)

  @property
  def order_ok(self) -> bool: return not self.binds  # BIND values were left out of the walk

  def _input(self, u: UOp) -> tuple | None:
    """A BUFFER as a slot: numbered by first use of its Buffer object (kernels dedupe inputs by Buffer) and of the
    BUFFER node (which nodes merge once realized nodes are swapped for views), plus what the kernel reads of it.
    DISK buffers stay out: their views are made by the scheduler itself."""
    buf = buffers.get(u)
    if buf is None or u.src[0].arg.startswith("DISK"): return None
    return (Ops.BUFFER._value_, self.ins.setdefault(buf, len(self.ins)), self.in_uops.setdefault(u, len(self.in_uops)),
            u.dtype, u.arg[1], u.src[0].arg, buf.size, buf.dtype, buf.device)

  def _realized(self, view: UOp) -> tuple | None:
    """An already-realized node, keyed by the (small) buffer view that replaces it."""
    self.saw_realized = True
    if view.op is Ops.BUFFER: return self._input(view)
    srcs = tuple(self._realized(s) for s in view.src)
    return None if None in srcs else (view.op._value_, view.dtype, view.arg, srcs)

class _Template:
  """A cached schedule with its buffers as slots: inputs first (in _Walk's order), then one per distinct buffer the
  schedule allocated (after memory planning, so reuse is replayed as is)."""
  __slots__ = ("items", "new", "outs")
  def __init__(self, items: tuple, new: tuple, outs: tuple): self.items, self.new, self.outs = items, new, outs

  @staticmethod
  def build(w: _Walk, items: list[ScheduleItem], item_binds: list[tuple], views: list[UOp]) -> _Template | None:
    slot: dict[Buffer, int] = dict(w.ins)
    new: list[tuple] = []
    for si in items:
      if (b := si.bufs[0]) not in slot:
        slot[b] = len(slot)
        new.append((b.device, b.size, b.dtype))
    titems = []
    for si, binds in zip(items, item_binds):
      refs = tuple(slot.get(b, -1) for b in si.bufs)
      # a buffer the walk did not see, or a variable bound below a realized node: do not cache
      if -1 in refs or any(b not in w.binds for b in binds): return None
      titems.append((si.ast, refs, si.device, tuple((v, w.binds[b]) for (v, _), b in zip(si.var_vals, binds))))
    outs = []
    for v in views:  # targets must land in buffers this schedule allocates
      r = slot.get(buffers.get(v.src[0]), -1) if v.op is Ops.RESHAPE and v.src[0].op is Ops.BUFFER else -1
      if r < len(w.ins): return None
      outs.append((r, v.dtype, v.arg))
    return _Template(tuple(titems), tuple(new), tuple(outs))

  def instantiate(self, w: _Walk, originals: list[UOp]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
    """The schedule the uncached path would give for this call: this call's inputs and bound values, fresh outputs."""
    bufs = list(w.ins) + [Buffer(*spec) for spec in self.new]
    vals = [b.src[1].arg for b in w.binds]
    items = [ScheduleItem(ast, tuple([bufs[r] for r in refs]), dev, tuple([(v, vals[i]) for v, i in var_refs]))
             for ast, refs, dev, var_refs in self.items]
    out_uops: dict[int, UOp] = {}
    views: dict[UOp, UOp] = {}
    for o, (r, dtype, shape) in zip(originals, self.outs):
      if r not in out_uops: b = bufs[r]; out_uops[r] = new_buffer_uop(b.device, b.size, b.dtype, b)
      views[o] = UOp(Ops.RESHAPE, dtype, (out_uops[r],), shape)
    return items, views

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
  in_reduce: dict[UOp, bool] = {}  # evaluated inside a reduce loop of its kernel
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
    in_reduce[u] = any(p.op is Ops.REDUCE_AXIS or (p not in materialize and in_reduce.get(p, False)) for p in ps)
    # a reduce that reuses its inputs (matmul, conv: it reads through a broadcast) nested in another reduce's loop makes
    # a kernel the optimizer cannot tile (a matmul summed to a scalar ran at 1 GFLOP/s): it gets a buffer, and both
    # kernels are optimized on their own. A plain nested sum (x.sum(1).sum()) stays one kernel.
    if u.op is Ops.REDUCE_AXIS and (len(ctx[u]) > 1 or expanded[u] or in_reduce[u] and _reads_broadcast(u, materialize)): materialize[u] = None
    # a padded input read through sliding windows (a padded conv) is copied once, so the conv's loads need no bounds checks
    elif u.op is Ops.PAD and any(p.op is Ops.WINDOW for p in ps): materialize[u] = None
    elif expanded[u] and u.op not in GroupOp.Movement and u.op not in (Ops.BUFFER, Ops.CONST) and _cost(u, materialize) > EXPAND_COST_LIMIT:
      # cheap math is recomputed per broadcast element; expensive math (e.g. a random generator) gets a buffer
      materialize[u] = None
    if u in materialize: ctx[u], expanded[u] = frozenset([u]), False
  return materialize

def _reads_broadcast(u: UOp, stop) -> bool:
  """Does the fused work that computes u read something through an expand or sliding window (stops at buffers and materialized nodes)?"""
  seen, stack = set(), list(u.src)
  while stack:
    x = stack.pop()
    if x in seen or x.op is Ops.BUFFER or x in stop: continue
    seen.add(x)
    if _expands(x): return True
    stack.extend(x.src)
  return False

def _expands(u: UOp) -> bool: return u.op in (Ops.EXPAND, Ops.WINDOW) and u.size > u.src[0].size

def _stop(u: UOp) -> bool: return u.op is Ops.BUFFER or u in realized  # the graph below these is not scheduled

def create_schedule(targets: list[UOp]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  """Returns the kernels to run, in order, and for each target the buffer view that will hold it."""
  originals = [t for t in dict.fromkeys(targets) if buffer_view(t) is None]
  if not originals: return [], {}
  sink = UOp(Ops.SINK, dtypes.void, tuple(originals))
  if not SCACHE: return _schedule(sink, sink.toposort(_stop), True)[:2]
  w = _Walk(sink)
  if w.key is not None and (tpl := _cache.get(w.key)) is not None: return tpl.instantiate(w, originals)
  # a miss reuses the walk's toposort, unless the walk left bound values out of it
  items, views, item_binds = _schedule(sink, w.order, w.saw_realized) if w.order_ok else _schedule(sink, sink.toposort(_stop), True)
  if w.key is not None and (tpl := _Template.build(w, items, item_binds, [views[o] for o in originals])) is not None:
    # first in, first out: a hot graph that gets pushed out costs one miss to come back, and a hit stays cheap
    if len(_cache) >= CACHE_SIZE: _cache.pop(next(iter(_cache)))
    _cache[w.key] = tpl
  return items, views

def _schedule(sink: UOp, order: list[UOp], any_realized: bool) -> tuple[list[ScheduleItem], dict[UOp, UOp], list[tuple]]:
  """The uncached path: decide the buffers, build one kernel per materialized node, plan memory. Also returns, per item,
  the BIND node behind each of its var_vals (the cache needs them to rebind values on a hit)."""
  originals = sink.src
  # swap in buffers for already-realized nodes so they are never recomputed
  if any_realized and any(u in realized for u in order):
    sink = sink.substitute({u: realized[u] for u in order if u in realized})
    order = sink.toposort(lambda u: u.op is Ops.BUFFER)
  targets = list(sink.src)
  materialize = decide_buffers(order, targets)
  # build one kernel per materialized node, children first
  out_view: dict[UOp, UOp] = {}
  items: list[ScheduleItem] = []
  item_binds: list[tuple] = []
  for u in order:
    if u not in materialize or u.op is Ops.SINK: continue
    if buffer_view(u) is not None:  # a target that is already a whole buffer
      out_view[u] = u
      continue
    out = new_buffer_uop(u.device, u.size, u.dtype)
    si, binds = _kernel(u, out, out_view)
    items.append(si)
    item_binds.append(binds)
    out_view[u] = UOp(Ops.RESHAPE, u.dtype, (out,), u.shape)
  kept = {buffers[out_view[t].base] for t in targets}
  return plan_memory(items, kept), {o: out_view[t] for o, t in zip(originals, targets)}, item_binds

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

def _kernel(u: UOp, out: UOp, out_view: dict[UOp, UOp]) -> tuple[ScheduleItem, tuple]:
  """The kernel computing u into `out`: materialized sources become DEFINE_GLOBAL loads, bound variables become
  DEFINE_VARs whose values travel with the item. Also returns the BIND behind each of the item's var_vals."""
  if u.op is Ops.COPY:
    src = u.src[0]
    bv = out_view[src].base if src in out_view else buffer_view(src)
    if bv is not None and src.device != u.device:
      return ScheduleItem(UOp(Ops.SINK, dtypes.void, (UOp(Ops.COPY, u.dtype, (), (src.device, u.device)),)), (buffers[out], buffers[bv]), u.device), ()
  bufs = [buffers[out]]
  var_vals: dict[UOp, UOp] = {}  # DEFINE_VAR -> the BIND giving its value
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
      while var_vals.setdefault(r, x).src[1].arg != x.src[1].arg:  # a second binding in one kernel gets its own name
        n += 1
        r = x.src[0].replace(arg=(f"{x.src[0].arg[0]}_{n}",) + x.src[0].arg[1:])
    elif x.op is Ops.COPY: r = index[x.src[0]]
    elif x.op is Ops.DEVICE: continue
    else: r = x.replace(src=tuple(index[s] for s in x.src if s.op is not Ops.DEVICE))
    index[x] = r
  value = index[u.src[0] if u.op in (Ops.CONTIGUOUS, Ops.COPY) else u]
  g0 = UOp(Ops.DEFINE_GLOBAL, u.dtype.ptr(u.size), (), 0)
  ast = UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (g0, value)),))
  return ScheduleItem(ast, tuple(bufs), u.device, tuple((v, b.src[1].arg) for v, b in var_vals.items())), tuple(var_vals.values())
