"""The schedule cache. A training step or `f(x_i).realize()` builds a fresh graph every call (new input BUFFERs make
every node above them new), but its structure repeats. The cache keys a schedule on that structure with the input
buffers abstracted to slots and bound variable values left out, and on a hit rebuilds the items on this call's buffers."""
from __future__ import annotations
import struct
from fusegrad.buffers import REALIZED, buffer_of, buffer_view, new_buffer_uop, realized_view
from fusegrad.device import Buffer
from fusegrad.helpers import ContextVar
from fusegrad.schedule.fusion import EXPAND_COST_LIMIT
from fusegrad.schedule.kernel import ScheduleItem, Window, window
from fusegrad.uop.ops import Ops, UOp

SCACHE = ContextVar("SCACHE", 1)
CACHE_SIZE = 256
_cache: dict[tuple, "Template"] = {}

class Walk:
  """One pass over the graph giving both the scheduler's toposort (same order as `sink.toposort(stop at BUFFER or
  realized)`, so a miss on a graph without BINDs reuses it) and the cache key: each node's entry (op, dtype, arg and
  its sources' entries; see _walk).
  Input buffers become slots numbered by first use, a BIND keeps its variable but not its value and a box of an input
  that a kernel reads as a Window keeps its sizes but not its start (numbered by first use too), so the key repeats
  when the structure does. The key holds plain data, never a node: keeping graph nodes alive would keep them in the
  weak `realized` map and change what later, hash-consed-equal graphs compute. key is None: do not cache this graph."""
  __slots__ = ("order", "key", "ins", "in_uops", "binds", "windows", "saw_realized")
  def __init__(self, sink: UOp, permuted: bool = False):
    self.order, self.ins, self.in_uops, self.binds, self.saw_realized = [], {}, {}, {}, False
    self.windows: dict[tuple, int] = {}  # (buffer, start, span) -> its number
    key: list = [EXPAND_COST_LIMIT, permuted]
    self.key = tuple(key) if _walk(self, sink, key) else None

  def _stop(self, u: UOp) -> tuple | None:
    """The entry of a node the walk stops at: an input BUFFER or an already-realized node."""
    return self._input(u) if u.op is Ops.BUFFER else self._realized(realized_view(u))

  def _shrink(self, u: UOp, src_pos: int) -> tuple | None:
    """The entry of a SHRINK that is a window of an input (its sizes and window number, not its start), else None;
    src_pos is its source's entry's position in the key."""
    if (win := self._window(u)) is None: return None
    return (u.op._value_, u.dtype, tuple([e - b for b, e in u.arg]), src_pos, self.windows.setdefault(win, len(self.windows)))

  @staticmethod
  def _window(u: UOp) -> tuple | None:
    """The window (kernel.window) that u, a SHRINK, is to the kernels, which see a realized source as its buffer."""
    return window(u, realized_view(s) if REALIZED in (s := u.src[0]).__dict__ else s)

  @property
  def starts(self) -> list[int]: return [start for _, start, _ in self.windows]

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
    buf = buffer_of(u)
    if buf is None or u.src[0].arg.startswith("DISK"): return None
    return (Ops.BUFFER._value_, self.ins.setdefault(buf, len(self.ins)), self.in_uops.setdefault(u, len(self.in_uops)),
            u.dtype, u.arg[1], u.src[0].arg, buf.size, buf.dtype, buf.device)

  def _realized(self, view: UOp) -> tuple | None:
    """An already-realized node, keyed by the (small) buffer view that replaces it."""
    self.saw_realized = True
    if view.op is Ops.BUFFER: return self._input(view)
    srcs = tuple(self._realized(s) for s in view.src)
    return None if None in srcs else (view.op._value_, view.dtype, view.arg, srcs)

def _walk(w: Walk, sink: UOp, key: list) -> bool:
  """Walk's one pass: appends the scheduler's toposort to w.order and each node's entry to key (a list holding the key's
  header), numbers w.binds; False where the graph cannot be keyed. (fusegrad.native replaces it with its C version.)
  An entry is one tuple (a stop node's, a window's: _stop, _shrink) or, flat, an op's int value, then for a BIND its
  dtype and source, for any other node its dtype, arg, source count and sources; a source is its entry's position in
  key. The key is read one way only, so equal keys are equal graphs."""
  refs: dict[UOp, int] = {}  # node -> its entry's position in key
  seen: set[UOp] = set()
  # a None on the stack means "the node under it has all its sources done"; sources are pushed even when already
  # seen and skipped when popped, which gives toposort's order without a filtering generator per node
  stack: list = [sink]
  order, binds, ok, pop, push = w.order, w.binds, True, stack.pop, stack.append
  BUFFER, BIND, CONST, COPY, SHRINK = Ops.BUFFER, Ops.BIND, Ops.CONST, Ops.COPY, Ops.SHRINK
  while stack:
    u = pop()
    if u is not None:
      if u in seen: continue
      seen.add(u)
      if (op := u.op) is not BUFFER and REALIZED not in u.__dict__:  # is_realized, inlined
        push(u); push(None)
        # a bound value is not walked (it is not part of the key); the order then lacks it, see `order_ok`
        if op is BIND: push(u.src[0])
        else: stack += u.src[::-1]
        continue
      # a stop node: toposort appends it right away
      order.append(u)
      if ok:
        if (ent := w._stop(u)) is None: ok = False
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
      refs[u] = len(key)
      key += (op._value_, u.dtype, refs[u.src[0]])
    elif op is SHRINK and (ent := w._shrink(u, refs[u.src[0]])) is not None:
      refs[u] = len(key)
      key.append(ent)
    else:
      # flat: (op value, dtype, arg, source count, source positions); Enum hashing runs Python code, so ops key as their
      # int value; constants key as exact bits (0.0 == -0.0)
      src = u.src
      at = [refs[s] for s in src]
      refs[u] = len(key)
      key += (op._value_, u.dtype, Walk._const_key(u.arg) if op is CONST else u.arg, len(src), *at)
  return ok

class Template:
  """A cached schedule with its buffers as slots: inputs first (in Walk's order), then one per distinct buffer the
  schedule allocated (after memory planning, so reuse is replayed as is)."""
  __slots__ = ("items", "new", "outs")
  def __init__(self, items: tuple, new: tuple, outs: tuple): self.items, self.new, self.outs = items, new, outs

  @staticmethod
  def build(w: Walk, items: list[ScheduleItem], item_binds: list[tuple], originals: list[UOp], views: list[UOp]) -> Template | None:
    slot: dict[Buffer, int] = dict(w.ins)
    new: list[tuple] = []
    for si in items:
      if (b := si.bufs[0]) not in slot:
        slot[b] = len(slot)
        new.append((b.device, b.size, b.dtype))
    titems = []
    for si, binds in zip(items, item_binds):
      # (a window of an input buffer: the input's slot, the window's number and its size)
      refs = tuple((slot.get(b.source, -1), w.windows.get((b.source, b.start, b.size), -1), b.size) if type(b) is Window else slot.get(b, -1)
                   for b in si.bufs)
      # a buffer or window the walk did not see, or a variable bound below a realized node: do not cache
      if -1 in refs or any(type(r) is tuple and -1 in r for r in refs) or any(b not in w.binds for b in binds): return None
      titems.append((si.ast, refs, si.device, tuple((v, w.binds[b]) for (v, _), b in zip(si.var_vals, binds))))
    outs = []
    for o, v in zip(originals, views):  # targets must land in buffers this schedule allocates, seen through reshapes and permutes
      if o.op is Ops.ASSIGN:  # an in-place write: its target's own buffer (seen with symbolic sizes: not templated)
        if o.vshape is not o.shape: return None
        outs.append((None, ()))
        continue
      chain = []
      # (a view with symbolic sizes holds this call's bound values: not templated)
      while v.op in (Ops.RESHAPE, Ops.PERMUTE) and len(v.src) == 1:
        chain.append((v.op, v.dtype, v.arg))
        v = v.src[0]
      r = slot.get(buffer_of(v), -1) if chain and v.op is Ops.BUFFER else -1
      if r < len(w.ins): return None
      outs.append((r, tuple(reversed(chain))))
    return Template(tuple(titems), tuple(new), tuple(outs))

  def instantiate(self, w: Walk, originals: list[UOp]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
    """The schedule the uncached path would give for this call: this call's inputs and bound values, fresh outputs."""
    bufs = list(w.ins) + [Buffer(*spec) for spec in self.new]
    vals, starts = [b.src[1].arg for b in w.binds], w.starts
    items = [ScheduleItem(ast, tuple([bufs[r] if type(r) is int else Window(bufs[r[0]], starts[r[1]], r[2]) for r in refs]), dev,
                          tuple([(v, vals[i]) for v, i in var_refs]))
             for ast, refs, dev, var_refs in self.items]
    out_uops: dict[int, UOp] = {}
    views: dict[UOp, UOp] = {}
    for o, (r, chain) in zip(originals, self.outs):
      if r is None:  # (as the uncached path views it)
        views[o] = UOp(Ops.RESHAPE, o.dtype, (buffer_view(o.src[0]),), o.shape)
        continue
      if r not in out_uops: b = bufs[r]; out_uops[r] = new_buffer_uop(b.device, b.size, b.dtype, b)
      views[o] = out_uops[r]
      for op, dtype, arg in chain: views[o] = UOp(op, dtype, (views[o],), arg)
    return items, views

def lookup(w: Walk) -> Template | None: return _cache.get(w.key) if w.key is not None else None

def remember(w: Walk, items: list[ScheduleItem], item_binds: list[tuple], originals: list[UOp], views: list[UOp]) -> None:
  """Keep this miss's schedule for the next graph of the same structure, if it can be replayed on other buffers."""
  if w.key is None or (tpl := Template.build(w, items, item_binds, originals, views)) is None: return
  # first in, first out: a hot graph that gets pushed out costs one miss to come back, and a hit stays cheap
  if len(_cache) >= CACHE_SIZE: _cache.pop(next(iter(_cache)))
  _cache[w.key] = tpl
