"""Tensor graph -> ordered list of kernels, in four steps, one module each: look the graph's structure up in the
schedule cache (cache.py); on a miss decide which nodes get a buffer (fusion.py), build one kernel per such node
(kernel.py) and let intermediate buffers share memory (memory.py). Which buffers exist and what is realized is
fusegrad/buffers.py's, below this package."""
from __future__ import annotations
import collections
from fusegrad.buffers import buffer_of, buffer_view, is_realized, new_buffer_uop, realized_view
from fusegrad.device import Device
from fusegrad.dtype import dtypes
from fusegrad.schedule import cache
from fusegrad.schedule.fusion import decide_buffers
from fusegrad.schedule.kernel import ScheduleItem, build_kernel
from fusegrad.schedule.memory import plan_memory
from fusegrad.uop.ops import Ops, UOp, sym_node

__all__ = ["ScheduleItem", "create_schedule"]

def _stop(u: UOp) -> bool: return u.op is Ops.BUFFER or is_realized(u)  # the graph below these is not scheduled

def create_schedule(targets: list[UOp], permuted: bool = False) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  """Returns the kernels to run, in order, and for each target the buffer view that will hold it. permuted: a target
  that permutes a contiguous() may be that node's buffer seen through the permute (see _viewed_contiguous)."""
  originals = [t for t in dict.fromkeys(targets) if buffer_view(t) is None]
  if not originals: return [], {}
  sink = UOp(Ops.SINK, dtypes.void, tuple(originals))
  if not cache.SCACHE: return _schedule(sink, sink.toposort(_stop), True, permuted)[:2]
  w = cache.Walk(sink, permuted)
  if (tpl := cache.lookup(w)) is not None: return tpl.instantiate(w, originals)
  # a miss reuses the walk's toposort, unless the walk left bound values out of it
  items, views, item_binds = _schedule(sink, w.order, w.saw_realized, permuted) if w.order_ok else _schedule(sink, sink.toposort(_stop), True, permuted)
  cache.remember(w, items, item_binds, originals, [views[o] for o in originals])
  return items, views

def _schedule(sink: UOp, order: list[UOp], any_realized: bool, permuted: bool) -> tuple[list[ScheduleItem], dict[UOp, UOp], list[tuple]]:
  """The uncached path: decide the buffers, build one kernel per materialized node, plan memory. Also returns, per item,
  the BIND node behind each of its var_vals (the cache needs them to rebind values on a hit)."""
  originals = sink.src
  # swap in buffers for already-realized nodes so they are never recomputed
  if any_realized and any(is_realized(u) for u in order):
    sink = sink.substitute({u: v for u in order if (v := realized_view(u)) is not None})
    order = sink.toposort(lambda u: u.op is Ops.BUFFER)
  # a target that only reshapes (or permutes) a contiguous() is that node's buffer seen through the view, not a copy of
  # it; not where two targets would share the buffer (equal expressions are one node: a write into one must not reach
  # the other)
  through = {t: c for t in sink.src if (c := _viewed_contiguous(t, permuted)) is not None}
  shared = collections.Counter([*through.values(), *sink.src])
  through = {t: c for t, c in through.items() if shared[c] == 1}
  targets = list(dict.fromkeys(through.get(t, t) for t in sink.src))
  materialize = decide_buffers(order, targets, *_target_facts(targets))
  # build one kernel per materialized node, children first
  out_view: dict[UOp, UOp] = {}
  items: list[ScheduleItem] = []
  item_binds: list[tuple] = []
  for u in order:
    if u not in materialize or u.op is Ops.SINK: continue
    if buffer_view(u) is not None:  # a target that is already a whole buffer
      out_view[u] = u
      continue
    # an in-place write's kernel writes its target's own buffer
    # (a graph of bound Variables alone has no device: its value goes to the default one)
    out = buffer_view(u.src[0]) if u.op is Ops.ASSIGN else new_buffer_uop(u.device or Device.DEFAULT, u.size, u.dtype)
    si, binds = build_kernel(u, out, out_view)
    items.append(si)
    item_binds.append(binds)
    out_view[u] = sym_node(Ops.RESHAPE, out, u.vshape) if u.vshape is not u.shape else UOp(Ops.RESHAPE, u.dtype, (out,), u.shape)
  for t, c in through.items(): out_view[t] = _view_of(t, c, out_view[c].base)
  kept = {buffer_of(out_view[t].base) for t in targets} | {buffer_of(out_view[u].base) for u in out_view if u.op is Ops.ASSIGN}
  return plan_memory(items, kept), {o: out_view[t] for o, t in zip(originals, sink.src)}, item_binds

def _viewed_contiguous(t: UOp, permuted: bool) -> UOp | None:
  """The CONTIGUOUS under a chain of reshapes (and, if permuted, permutes) of fixed sizes that is t, or None. A
  convolution computed channels last is such a permute: realized, it stays a view of the channels-last buffer (as
  torch's channels_last results do) instead of a copy into NCHW order, which a reader that needs one makes."""
  c, views = t, (Ops.RESHAPE, Ops.PERMUTE) if permuted else (Ops.RESHAPE,)
  while c.op in views and c.vshape is c.shape: c = c.src[0]
  return c if c is not t and c.op is Ops.CONTIGUOUS and c.vshape is c.shape else None

def _view_of(t: UOp, c: UOp, buf: UOp) -> UOp:
  """t's view of its contiguous() c, on c's buffer: one reshape, or the chain's permutes between reshapes."""
  chain = []
  while t is not c:
    chain.append(t)
    t = t.src[0]
  if all(u.op is Ops.RESHAPE for u in chain): return UOp(Ops.RESHAPE, chain[0].dtype, (buf,), chain[0].shape)
  v = UOp(Ops.RESHAPE, c.dtype, (buf,), c.shape)
  for u in reversed(chain): v = UOp(u.op, u.dtype, (v,), u.arg)
  return v

def _target_facts(targets: list[UOp]) -> tuple[bool, bool]:
  """Do the kernels run their loops in sequence (a CPU)? Only then is a per-row value fused above a row's inner loops
  computed once per row (each of a GPU's threads would recompute it), and does a dense conv read its padded input in
  place. And can a tile's last vector be masked (masked_tails)? Then a depthwise conv with short rows reads its input
  in place too (decide_buffers)."""
  devices = {t.device for t in targets if isinstance(t.device, str) and not t.device.startswith("DISK")}
  renderers = [Device[d].renderer for d in devices]
  rows = not any(r.has_threads for r in renderers)
  return rows, rows and bool(renderers) and all(getattr(r, "masked_tails", False) for r in renderers)
