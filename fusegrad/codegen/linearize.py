"""Scalar kernel graph -> a linear list of UOps with explicit loops (RANGE ... ENDRANGE).

Each node is placed in the innermost loop among the ranges it depends on, so loop-invariant work is hoisted
for free and every node is computed once (CSE comes from hash-consing)."""
from __future__ import annotations
from dataclasses import dataclass, field
from fusegrad.dtype import LOW_FLOATS, dtypes
from fusegrad.uop.ops import GroupOp, Ops, UOp
from fusegrad.uop.pattern import PatternMatcher, UPat, graph_rewrite
from fusegrad.uop.symbolic import conjuncts, symbolic
from fusegrad.codegen.lowerer import reduce_identity
from fusegrad.codegen.opt import Opt, apply_opt, choose, loop_deps, merge_loops, output_ranges, reads_own_output, reduce_op, share_row_values
from fusegrad.codegen.gpu import to_threads
from fusegrad.helpers import NOOPT
from fusegrad.renderer import Renderer


def _compute_in_float(x: UOp) -> UOp | None:
  # PyTorch computes half/bfloat16 (and fp8) math in float32 and rounds each result; so do we
  if x.op in GroupOp.ALU and x.op is not Ops.WHERE and any(s.dtype in LOW_FLOATS for s in x.src):
    out = x.replace(src=tuple(s.cast(dtypes.float32) if s.dtype in LOW_FLOATS else s for s in x.src),
                    dtype=dtypes.float32 if x.dtype in LOW_FLOATS else x.dtype)
    return out.cast(x.dtype)
  if x.op is Ops.REDUCE and x.dtype in LOW_FLOATS:
    return x.replace(dtype=dtypes.float32, src=(x.src[0].cast(dtypes.float32),) + x.src[1:]).cast(x.dtype)
  return None

def _cast_roundtrip(x: UOp, y: UOp) -> UOp | None:
  # half -> float -> half is exact, so it can go; float -> half -> float rounds and must stay
  if x.dtype == y.dtype and x.dtype in LOW_FLOATS and y.src[0].dtype == dtypes.float32: return x
  return None

legalize = PatternMatcher([
  (UPat((*GroupOp.ALU, Ops.REDUCE), name="x"), _compute_in_float),
  (UPat(Ops.CAST, name="y", src=(UPat(Ops.CAST, src=(UPat.var("x"),)),)), lambda y, x: _cast_roundtrip(x, y)),
])

@dataclass
class Block:
  rng: UOp | None
  depth: int = 0
  items: list = field(default_factory=list)
  inner: "Block | None" = None  # the nested output loop, emitted after this block's own items
  reduce: bool = False  # a reduce's loop (not an output or staging loop)

def linearize(sink: UOp, target: Renderer, opt: Opt | None = None) -> list[UOp]:
  """`opt` (default: the heuristic's choice for `target`) applied, then: output loops nest outermost-first and each holds the nodes that depend on it; a reduce's loop is emitted as a unit
  where the REDUCE sits in toposort order, after everything its body reads from outer levels."""
  sink = graph_rewrite(sink, symbolic)
  if not NOOPT:
    sink = merge_loops(sink)
    # a GPU's threads take the output loops (codegen/gpu.py); the CPU's tiling and vector opts do not apply to it
    if not target.has_threads: sink = apply_opt(sink := share_row_values(sink), choose(sink, target) if opt is None else opt)
  sink = graph_rewrite(sink, symbolic + legalize)
  if target.has_threads: sink = to_threads(sink, target, None if NOOPT else opt)
  # REDUCEs over the very same loops (the copies UPCAST makes) share one loop nest: group them, and order the graph
  # so every member's body comes before any member, so the shared loop can be placed at the first one
  groups: dict[tuple, list[UOp]] = {}
  for u in sink.toposort():
    if u.op is Ops.REDUCE: groups.setdefault((u.src[1:], u.arg[1] if isinstance(u.arg, tuple) else None), []).append(u)
  group_of = {m: g for g in groups.values() for m in g}
  order = sink.toposort(srcs=lambda u: u.src + (tuple(m.src[0] for m in group_of[u] if m is not u) if u in group_of else ()))
  deps = loop_deps(order, group_of)
  root = Block(None)
  block_of: dict[UOp, Block] = {}
  def deepest(rs) -> Block: return max((block_of[r] for r in rs), key=lambda b: b.depth, default=root)
  parent = root
  for r in output_ranges(sink):
    parent.inner = block_of[r] = Block(r, parent.depth + 1)
    parent = parent.inner
  # reduce loops nest under the block of their result; outer reduces come later in toposort, so walk backwards
  def nest(parent: Block, rngs, reduce: bool = True) -> tuple[Block, Block]:
    outer = None
    for r in rngs:
      b = block_of[r] = Block(r, parent.depth + 1, reduce=reduce)
      if outer is None: outer = b
      else: parent.inner = b
      parent = b
    return outer, parent  # type: ignore
  def outer_deps(u: UOp) -> frozenset: return deps[u] - {u.arg[1]} if isinstance(u.arg, tuple) else deps[u]
  # a group's shared loop sits under the deepest block any member needs (one member may be a constant that needs none)
  def loop_parent(u: UOp) -> Block: return deepest(frozenset().union(*[outer_deps(m) for m in group_of[u]]))
  loops: dict[UOp, tuple[Block, Block]] = {}
  for u in reversed(order):
    if u.op is Ops.STAGE: loops[u] = nest(deepest(deps[u]), u.src[2:], reduce=False)
    if u.op is not Ops.REDUCE: continue
    if (first := group_of[u][0]) in loops:
      loops[u] = loops[first]
      continue
    loops[first] = loops[u] = nest(loop_parent(u), u.src[1:])
  accs = {u: UOp(Ops.DEFINE_ACC, u.dtype, (UOp.const(u.dtype, reduce_identity(reduce_op(u), u.dtype)),), u) for u in group_of}
  placed: set[int] = set()
  home_of: dict[UOp, Block] = {}
  for u in order:
    if u.op in (Ops.RANGE, Ops.SINK): continue
    home = home_of[u] = deepest(deps[u])
    if u.op is Ops.STAGE:  # declared at the top of the kernel, filled by its own loop nest before its first reader
      outer, inner = loops[u]
      inner.items.append(UOp(Ops.STORE, dtypes.void, (u, u.src[1], u.src[0])))
      root.items.append(u)
      home.items.append(outer)
      continue
    if u.op is Ops.REDUCE:
      outer, inner = loops[u]
      arr = isinstance(u.arg, tuple)  # an accumulator array indexed by the last range (see codegen/opt.py)
      update = UOp(Ops.ACC_UPDATE, u.dtype, (accs[u], u.src[0]) + ((u.src[-1],) if arr else ()), reduce_op(u))
      # with 16 vector registers, right after its value: a register tile's operands then die as soon as their FMAs are
      # done (all live at once, an AVX2 conv weight gradient's 3 x 4 tile spilled: 21.3 -> 17.9 ms on one core). With
      # 32, after every member's body: the loads issue first (AVX-512 matmuls 4-7% faster that way)
      late = target.vector_registers >= 32 or home_of.get(u.src[0]) is not inner
      inner.items.insert(len(inner.items) if late else inner.items.index(u.src[0]) + 1, update)
      if id(outer) not in placed:  # the first member of a group places every accumulator, then the shared loop
        placed.add(id(outer))
        loop_parent(u).items += [*(accs[m] for m in group_of[u]), outer]
    home.items.append(u)
  if reads_own_output(sink, order): stores_last(root)
  if not NOOPT and not target.has_threads: skip_dead_iterations(root, home_of)  # (a GPU thread skipping a barrier would hang)
  out: list[UOp] = []
  def flatten(b: Block):
    if b.rng is not None: out.append(b.rng)
    for it in b.items:
      if isinstance(it, Block): flatten(it)
      else: out.append(it)
    if b.inner is not None: flatten(b.inner)
    if b.rng is not None: out.append(UOp(Ops.ENDRANGE, dtypes.void, (b.rng,)))
  flatten(root)
  return out

def stores_last(b: Block) -> None:
  """A kernel that reads a buffer it writes (partial sums, _block_reduce in codegen/opt.py) stores after every load of
  the same iteration: the spare copies of a clamped upcast read and write their row's values again, and each must read
  them as they were before any copy stored."""
  for it in [*b.items, b.inner]:
    if isinstance(it, Block): stores_last(it)
  b.items = [u for u in b.items if not (isinstance(u, UOp) and u.op is Ops.STORE)] + [u for u in b.items if isinstance(u, UOp) and u.op is Ops.STORE]

def skip_dead_iterations(b: Block, home_of: dict[UOp, Block]) -> None:
  """For each reduce loop in b (b included): where every sum it adds to the kernel's accumulators is 0 unless some
  condition computed in b holds (a padded conv's tap row past the image edge: each of its loads is gated by it), the
  iteration ends there when it does not (SKIP), instead of adding masked zeros. A padded input is read in place this way
  at the speed of a padded copy (a 64-channel 3x3 conv at 56x56: 9.9 -> 8.3 ms on one AVX-512 core, the copy's
  kernel 8.35). Where the C `continue` is taken, a tap past the edge adds nothing rather than 0 * w, as in oneDNN (an
  inf or NaN weight then reaches no output through padding alone; a padded copy, a vector loop or NOOPT gives NaN)."""
  for it in [*b.items, b.inner]:
    if isinstance(it, Block): skip_dead_iterations(it, home_of)
  if not b.reduce: return
  items = list(_items(b))
  local = {u for u in items if u.op is Ops.DEFINE_ACC}
  updates = [u for u in items if u.op is Ops.ACC_UPDATE and u.src[0] not in local]
  if not updates or any(u.op is Ops.STORE or (u.op is Ops.ACC_UPDATE and u.arg is not Ops.ADD) for u in items): return
  memo: dict[UOp, frozenset | None] = {}
  common = None
  for u in updates: common = _meet(common, _zero_unless(u.src[1], memo))
  gates = [g for g in common or () if home_of.get(g) is b]
  # a gate that is part of another one needs no test of its own (and gcc folds the larger gate's later uses only when
  # that one was tested)
  gates = [g for g in gates if not any(g is not h and g in conjuncts(h) for h in gates)]
  for g in gates: b.items.insert(b.items.index(g) + 1, UOp(Ops.SKIP, dtypes.void, (g, b.rng)))

def _items(b: Block):
  for it in b.items:
    if isinstance(it, Block): yield from _items(it)
    else: yield it
  if b.inner is not None: yield from _items(b.inner)

def _meet(a: frozenset | None, b: frozenset | None) -> frozenset | None: return b if a is None else a if b is None else a & b
def _join(a: frozenset | None, b: frozenset | None) -> frozenset | None: return None if a is None or b is None else a | b

def _zero_unless(v: UOp, memo: dict) -> frozenset | None:
  """Conditions (bool nodes) where any one is false, v is 0; None: v is 0 everywhere. A product counts as 0 with either
  factor 0 (0 * inf is taken as 0, see skip_dead_iterations)."""
  if v in memo: return memo[v]
  s = v.src
  if v.op is Ops.CONST: out = None if v.arg == 0 else frozenset()
  elif v.op is Ops.LOAD: out = conjuncts(s[2]) if len(s) == 3 else frozenset()
  elif v.op is Ops.WHERE:
    a, b = _zero_unless(s[1], memo), _zero_unless(s[2], memo)
    out = _join(conjuncts(s[0]), a) if b is None else _meet(a, b)
  elif v.op is Ops.MUL: out = _join(_zero_unless(s[0], memo), _zero_unless(s[1], memo))
  elif v.op in (Ops.ADD, Ops.SUB): out = _meet(_zero_unless(s[0], memo), _zero_unless(s[1], memo))
  elif v.op in (Ops.NEG, Ops.CAST): out = _zero_unless(s[0], memo)
  else: out = frozenset()
  memo[v] = out
  return out
