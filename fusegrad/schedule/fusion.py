"""Fusion: which nodes of a tensor graph get their own buffer (end a kernel). Everything else fuses into the kernel of
the node that reads it: elementwise chains into the reduce that consumes them, movement ops into index math."""
from __future__ import annotations
from fusegrad.helpers import prod
from fusegrad.uop.ops import GroupOp, Ops, UOp

EXPAND_COST_LIMIT = 8
MASKED_ROW_MIN = 32  # output row length from which a conv may read its padded input in place (decide_buffers)
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

def decide_buffers(order: list[UOp], targets: list[UOp], rows: bool = True, tails: bool = False) -> dict[UOp, None]:
  """Which nodes get their own buffer. Walking users before sources, track the distinct index contexts each node
  would be evaluated in if fused (a kernel root, or a movement op's view of a context; elementwise users share
  their context, so x*x reads x once) and whether it is read through a broadcast. A reduce evaluated in more than
  one context, or through an expand, would redo its whole loop each time: it gets a buffer, unless `rows` (a target
  whose loops are sequential, not GPU threads) and its value is needed once per row of one kernel (_per_row).
  tails: the target's tiles' last vectors can be masked (_copies_pad)."""
  materialize: dict[UOp, None] = dict.fromkeys(targets)
  materialize.update(dict.fromkeys(u for u in order if u.op in (Ops.CONTIGUOUS, Ops.COPY, Ops.ASSIGN)))
  users: dict[UOp, list[UOp]] = {}
  for u in order:
    for s in u.src: users.setdefault(s, []).append(u)
  ctx: dict[UOp, frozenset] = {}
  expanded: dict[UOp, bool] = {}
  in_reduce: dict[UOp, bool] = {}  # evaluated inside a reduce loop of its kernel
  padded: dict[UOp, bool] = {}  # evaluated by a kernel that writes a padded copy (gated per element)
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
    padded[u] = any(p.op is Ops.PAD or (p not in materialize and padded.get(p, False)) for p in ps)
    shared = len(ctx[u]) > 1 or expanded[u]
    per_row = (rows and shared and not (u.op is Ops.REDUCE_AXIS and _reads_broadcast(u, materialize, memory_only=True))
               and _per_row(u, users, materialize))
    if per_row: pass  # computed once per row by the kernel that reads it
    # a reduce that reuses its inputs (matmul, conv: it reads through a broadcast) nested in another reduce's loop makes
    # a kernel the optimizer cannot tile (a matmul summed to a scalar ran at 1 GFLOP/s): it gets a buffer, and both
    # kernels are optimized on their own. A plain nested sum (x.sum(1).sum()) stays one kernel.
    # so does one that would be computed inside a padded copy (a conv whose output is the next conv's padded input):
    # gated per element and tiled along the padded rows, ResNet's 56x56 convs ran 2.5x slower than in a kernel of their own
    elif u.op is Ops.REDUCE_AXIS and (shared or (in_reduce[u] or padded[u]) and _reads_broadcast(u, materialize)): materialize[u] = None
    elif u.op is Ops.PAD and any(p.op is Ops.WINDOW and _copies_pad(p, expanded[p], rows, rows and tails) for p in ps):
      materialize[u] = None
    elif expanded[u] and u.op not in GroupOp.Movement and u.op not in (Ops.BUFFER, Ops.CONST) and _cost(u, materialize) > EXPAND_COST_LIMIT:
      # cheap math is recomputed per broadcast element; expensive math (e.g. a random generator) gets a buffer
      materialize[u] = None
    # a buffer, or a value computed once per row (above the row's loops), is a context of its own for what it reads,
    # not read through a broadcast and not inside a reduce loop
    if u in materialize or per_row: ctx[u], expanded[u], in_reduce[u], padded[u] = frozenset([u]), False, False, False
  return materialize

def _copies_pad(window: UOp, expanded: bool, rows: bool, tails: bool) -> bool:
  """Is the padded input that sliding `window`s read (a padded conv) copied once, so that the conv's loads need no
  bounds checks? A depthwise conv (windows read by one output channel, not `expanded` to many) spends as long on that
  pass over memory as on the conv: it masks its loads instead where its rows are long (from MASKED_ROW_MIN outputs:
  144 channels at 56x56, batch 8: 1.75 -> 1.0 ms on AVX-512, 1.9 -> 1.2 on AVX2; shorter rows, cut into 8 + 4 + 2-lane
  vectors, ran slower with masks than with the copy), and at stride 1 at any length where the tile's last vector can
  be masked as well (tails, renderer/cvector.py vector_loops: 512 channels at 14x14, batch 16, 0.80 -> 0.62 ms on
  AVX-512, 0.89 -> 0.59 under CPU_ISA=avx2; 960 at 7x7 0.63 -> 0.45 and 0.74 -> 0.44).
  A dense or grouped conv reads in place on a CPU (rows) where its window is at most 3 wide. Its tap rows past the
  image's edge are left out by the tap loop's bounds and its middle column tiles read without tests
  (renderer/cstyle.py bounded_loops, peeled_loops), so it runs as fast as from a copy, or faster (a
  64-channel 56x56 conv at batch 8 on AVX-512 4.45 -> 4.2 ms with the copy's 0.23 ms gone; stride 2, 64 -> 128
  channels: 3.3 -> 2.3-2.4 ms; under AVX2 7.9 -> 7.3-7.4 ms; ResNeXt's 4 channels a group, 128 at 28x28: 0.80 -> 0.69
  and 0.83 -> 0.80). Kept copied, as measured slower in place: a 7x7 stem (0.85 -> 0.87 ms on AVX-512, 1.26 -> 1.34
  on AVX2), and a 5x5 conv (under AVX2 32 channels at 28x28 1.69 -> 2.82 ms). That holds where the forward conv and
  its weight gradient both read the input (a training step): ResNet's 3x3 stride-2 64 -> 128 step at 56x56, batch 8,
  12.0 -> 11.2 ms of kernels on AVX-512 and 19.5 -> 16.4 under CPU_ISA=avx2 without the copy they shared; the 3x3
  stride-1 64-channel step the same on AVX-512 (19.2-19.4 ms) and 30.6 -> 29.6 under AVX2."""
  k, strides, dilations = window.arg
  if not expanded: return not (window.shape[-len(k) - 1] >= MASKED_ROW_MIN or (tails and max(strides) == 1))
  narrow = (k[-1] - 1) * dilations[-1] < 3  # at most 3 wide
  return not narrow or not rows

def _per_row(u: UOp, users: dict[UOp, list[UOp]], materialize) -> bool:
  """Is u (shape lead + trailing 1s) needed only per row of one kernel: does every path up to that kernel's root keep
  the lead dims' index (elementwise ops, and expands, reshapes and non-reusing reduces of the trailing dims only)?
  Then the kernel evaluates u once per row, above the row's inner loops (the linearizer hoists it), so softmax or
  layernorm is one kernel that reads each row from memory once instead of three kernels reading it three times."""
  lead = len(u.shape)
  while lead and u.shape[lead - 1] == 1: lead -= 1
  if lead == len(u.shape) or prod(u.shape[:lead]) < 2 or (u.op is Ops.REDUCE_AXIS and min(u.arg[1]) < lead): return False
  roots: set[UOp] = set()
  seen, stack = {u}, [u]
  while stack:
    for p in users.get(stack.pop(), []):
      if p.op is Ops.SINK or p.shape[:lead] != u.shape[:lead]: return False
      if p.op in GroupOp.Movement and p.op not in (Ops.EXPAND, Ops.RESHAPE) or p.op in (Ops.GATHER, Ops.COPY): return False
      # only into streaming work: a reduction that reuses a broadcast input (a matmul) is tiled in a kernel of its own
      if p.op is Ops.REDUCE_AXIS and (min(p.arg[1]) < lead or _reads_broadcast(p, materialize, memory_only=True)): return False
      if p in materialize: roots.add(p)
      elif p not in seen: seen.add(p); stack.append(p)
  return len(roots) == 1

def _reads_broadcast(u: UOp, stop, memory_only: bool = False) -> bool:
  """Does the fused work that computes u read something through an expand or sliding window (stops at buffers and
  materialized nodes)? A constant, or a value broadcast only along u's own reduce axes (a row's max inside the row's
  sum), is read once per row, not reused, so it does not count; with memory_only, neither does pure index math (a
  class mask's arange)."""
  per_row_axes = set(u.arg[1]) if u.op is Ops.REDUCE_AXIS else set()
  seen, stack = set(), [(s, True) for s in u.src]
  while stack:
    x, same_coords = stack.pop()  # same_coords: only same-shape elementwise ops lie between u's input and x
    if x in seen or x.op is Ops.BUFFER or x in stop: continue
    seen.add(x)
    # a reduction inside is its own loop: what it reads through a broadcast is its reuse (it then gets a buffer), not u's
    if x.op is Ops.REDUCE_AXIS: continue
    if _expands(x) and not (_reads_no_memory(x.src[0], stop) if memory_only else x.src[0].base.op is Ops.CONST) and not (same_coords and x.op is Ops.EXPAND and x.shape == u.src[0].shape and
                            all(d in per_row_axes for d, (a, b) in enumerate(zip(x.src[0].shape, x.shape)) if a != b)): return True
    same_coords = same_coords and x.op not in GroupOp.Movement and x.op is not Ops.GATHER and x.shape == u.src[0].shape
    stack.extend((s, same_coords) for s in x.src)
  return False

def _reads_no_memory(u: UOp, stop) -> bool:
  seen, stack = set(), [u]
  while stack:
    x = stack.pop()
    if x.op is Ops.BUFFER or x in stop: return False
    if x not in seen: seen.add(x); stack.extend(x.src)
  return True

def _expands(u: UOp) -> bool: return u.op in (Ops.EXPAND, Ops.WINDOW) and u.size > u.src[0].size
