"""Kernel optimizations on the scalar graph, before linearization.

The C compiler vectorizes an innermost loop that walks memory contiguously with independent iterations, but it
will not reorder a float sum. The vocabulary, each applied by name and checked for legality by `actions`:
  - Opt("VECTOR", t): the innermost output loop j (contiguous in some load) is split into tiles of t (t divides its
    size) and the tile is placed innermost, inside the reduce loops, with an accumulator array acc[t].
  - Opt("VECTOR", t, upcast=n): also n consecutive values of the next-outer output loop per iteration, each with its
    own accumulator array (register tiling: a load along j serves all n rows).
  - Opt("VECTOR", t, upcast=n, stage=True): also the outer tile loop moves outside the row loop, and a load that
    does not depend on the rows (the right matrix of a matmul) is copied once per tile into a contiguous scratch block
    (a STAGE) in reduce-then-tile order, so the inner loop reads it sequentially and aligned instead of striding by a
    whole row (each step a new cache set and page) for every row.
  - Opt("VECTOR", t, upcast=n, kblock=b): also the reduce's outermost loop runs in blocks of b, each block over a whole
    row of tiles, adding to partial sums kept in the output (_block_reduce).
  - Opt("LANES", n): a contiguous reduce loop k becomes k = k_outer*n + lane with acc[lane] += body, then a short
    reduce over the n lanes (the sum is reordered, as every fast BLAS does).
  - Opt("LANES", n, upcast=u, upcast2=v): also u consecutive values of the innermost output loop that some load along k
    does not depend on (a conv weight gradient's kernel columns), so that load serves all u outputs, and v values of a
    loop that the other loads do not depend on (output channels).
  - Opt("TILE", t): a kernel without reductions that reads some input across its output rows (a transpose) walks its
    two inner loops in t x t blocks, so one block's reads share t cache lines and pages instead of one a row element
    (t x the whole row where t does not divide a row of at most TILE_WHOLE_ROW).
Before any of them, merge_loops fuses adjacent loops that every index walks contiguously ((14, 14) -> 196).
  - Opt("NONE"): plain loops.
A REDUCE with an accumulator array has arg (op, j) and its last source is its private copy of j.
`choose` is the hand-written heuristic, sized by the target's facts (its renderer's vector width and register count);
BEAM search (codegen/search.py) times every legal action instead.
NOOPT=1 applies nothing."""
from __future__ import annotations
import itertools
from dataclasses import dataclass
from fusegrad.dtype import dtypes
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.symbolic import _sum, _terms
from fusegrad.helpers import prod
from fusegrad.codegen.lowerer import flat_index
from fusegrad.renderer import Renderer

@dataclass(frozen=True)
class Opt:
  kind: str        # "NONE" | "VECTOR" | "LANES" | "TILE"
  arg: int = 0
  upcast: int = 1  # also compute this many consecutive rows of an output loop per iteration (register tiling)
  stage: bool = False  # with VECTOR and upcast: tile loop outside the rows, row-invariant loads staged (see above)
  upcast2: int = 1     # with LANES and upcast: also this many values of a second loop, shared by the other loads
  kblock: int = 0      # with VECTOR and upcast: the reduce's outer loop in blocks of this many (_block_reduce)

@dataclass(frozen=True)
class Budget:
  """The heuristic's sizes for one target, from its vector width W and register count R (measured on AVX-512, W=16,
  R=32: accumulators in half the registers were best, 4 rows x 64 floats; register tiling of a split reduce was best a
  little over R vectors, 36 on a 14-lane conv weight gradient beat 18, as spills of accumulators are cheap L1 hits).
  With 16 registers half is 2 vectors a row, too few to hide the FMA latency, so a tile may take 4 (AVX2: a 20-wide
  conv row is one 8 + 8 + 4 tile, not two of 8 + 2; a 24-wide one 8 + 8 + 8, not three of 8).
  A register tile of n rows x v vectors holds n*v accumulators and the n rows' broadcast values: n*(v+1) registers, at
  most tile_registers. AVX-512 was best at 4 rows x 4 vectors (20 of 32); an AVX2 Zen 3 at 5 rows x 2 vectors (15 of 16:
  1.3-1.6x the 4 x 2 tile on 512 to 2048 matmuls, where 4 x 2's 8 accumulators barely cover the FMA latency, and 6 x 2
  spilled accumulators to the stack). 3 rows x 4 vectors (also 15 of 16) loads 7 values per 12 FMAs where 5 x 2 loads
  7 per 10: under CPU_ISA=avx2 on an Intel Xeon it ran matmuls 2-5% faster, a 64-channel 3x3 conv 10%, the
  beautiful_mnist step 5-7% and ResNet-18 8-10% (not measured on Zen 3, which has a third load port)."""
  width: int     # float32 lanes of a vector
  max_tile: int  # longest accumulator array of VECTOR: (R/2 registers) x W lanes over 4 rows, at least 4 vectors
  max_vectors: int  # vector accumulators of one LANES kernel
  tile_registers: int  # registers of VECTOR's register tile: accumulators and broadcast row values
  registers: int  # vector registers

  @staticmethod
  def of(target: Renderer) -> Budget:
    w, r = max(target.simd_width, 4), max(target.vector_registers, 16)  # a scalar target gets SSE's shapes
    return Budget(w, max(r // 2 * w // 4, 4 * w), r + r // 8, min(r, 20), r)

  def rows(self, tile: int) -> int:
    """Rows of VECTOR's register tile for a tile of this many lanes (at most 8)."""
    return min(8, self.tile_registers // (self.vectors(tile) + 1))

  def vectors(self, lanes: int) -> int:
    """Vectors that hold `lanes` floats: 14 lanes are 8 + 4 + 2 (renderer/cvector.py tile_widths)."""
    return lanes // self.width + bin(lanes % self.width).count("1")
MAX_STAGE = 1 << 17  # elements of one staged block: it lives on the C stack of each thread (512 KB of float32)
# outputs that share a staged block before its tile loop stops moving outward: filling it then costs under 1% of their
# work, and the loops left outside (a batch) still split among the threads
STAGE_SHARED = 256
_ids = itertools.count(10_000)

def loop_deps(order: list[UOp], groups: dict[UOp, list[UOp]] | None = None) -> dict[UOp, frozenset]:
  """The loops each node's value depends on (order: a toposort). A REDUCE closes its loops but depends on the tile
  loop indexing its accumulator array; a STAGE closes its fill loops. groups: REDUCEs that share one loop nest (each
  depends on what any of them does, since their shared loop sits where all of them can run; order must put every
  member's body before any member)."""
  deps: dict[UOp, frozenset] = {}
  def closed(r: UOp) -> frozenset: return deps[r.src[0]] - frozenset(r.src[1:]) | (frozenset([r.arg[1]]) if isinstance(r.arg, tuple) else frozenset())
  for u in order:
    if u.op is Ops.RANGE: deps[u] = frozenset([u])
    elif u.op is Ops.REDUCE: deps[u] = frozenset().union(*[closed(m) for m in (groups[u] if groups and u in groups else (u,))])
    elif u.op is Ops.STAGE: deps[u] = (deps[u.src[0]] | deps[u.src[1]]) - frozenset(u.src[2:])
    else: deps[u] = frozenset().union(*[deps[s] for s in u.src])
  return deps

# math worth a scratch row to compute once: an exp costs about as much as reading its input from memory
COSTLY = {Ops.EXP, Ops.EXP2, Ops.LOG, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TAN, Ops.TANH, Ops.ERF, Ops.POW, Ops.SIGMOID}

def share_row_values(sink: UOp) -> UOp:
  """A costly value that two loops of a kernel compute alike, each over its own loop of the same size (softmax's row
  kernel: exp(x - max) in the sum's loop and again in the output loop), is computed once per row into a STAGE, a
  scratch row filled by its own loop before both, and read from it there: one exp per element instead of two."""
  order = sink.toposort()
  deps = loop_deps(order)
  def hole(r: UOp) -> UOp: return UOp(Ops.RANGE, r.dtype, r.src, -1)  # any loop of r's size
  outs = output_ranges(sink)
  inner = set(outs[-1:]) | {r for u in order if u.op is Ops.REDUCE for r in u.src[1:]}  # loops a row's work runs in
  if len(inner) < 2: return sink  # one loop: nothing is computed twice
  groups: dict[UOp, dict[UOp, UOp]] = {}  # the value with its loop as a placeholder -> {member: its loop}
  for u in reversed(order):  # users first: the largest shared value wins
    if u.op not in COSTLY or u.dtype != dtypes.float32: continue
    for r in deps[u] & inner:
      if not deps[u] - {r} <= set(outs) - {r}: continue  # anything else it depends on must be a loop outside the row
      if not 2 <= r.src[0].arg <= MAX_STAGE: continue
      groups.setdefault(u.substitute({r: hole(r)}), {})[u] = r
  for key, members in groups.items():
    if len(set(members.values())) < 2 or not set(members) <= set(sink.toposort()): continue  # one loop, or gone into a larger stage
    r = next(iter(members.values()))
    f = _new_range(r, r.src[0].arg)
    stage = UOp(Ops.STAGE, dtypes.float32, (key.substitute({hole(r): f}), f, f), f.src[0].arg)
    sink = sink.substitute({m: UOp(Ops.LOAD, dtypes.float32, (stage, r)) for m, r in members.items()})
  return sink

def _new_range(like: UOp, size: int) -> UOp: return UOp(Ops.RANGE, like.dtype, (UOp.const(like.dtype, size),), next(_ids))

def _contiguous_in(body: UOp, r: UOp, loop: UOp | None = None, any_step: bool = False) -> bool:
  """Does some load step by exactly 1 (any_step: by a constant) along r (and, if given, also move with `loop`, so it
  is main traffic and not a small side buffer such as a per-row mean)?"""
  return any(u.op is Ops.LOAD and any(n is r and (c == 1 or any_step) for n, c in _terms(u.src[1])) and (loop is None or loop in u.src[1].toposort())
             for u in body.toposort())

def reduce_op(r: UOp) -> Ops:
  """A REDUCE's op (its arg, or the arg's first entry where it has an accumulator array)."""
  return r.arg[0] if isinstance(r.arg, tuple) else r.arg

def reads_own_output(sink: UOp, nodes) -> bool:
  """Does a LOAD among `nodes` (the kernel's) read a buffer the kernel stores to (_block_reduce's partial sums)?"""
  stored = {st.src[0] for st in sink.src if st.op is Ops.STORE}
  return any(u.op is Ops.LOAD and u.src[0] in stored for u in nodes)

def output_ranges(sink: UOp) -> list[UOp]:
  """The loops over output elements (not closed by a reduce), outermost first."""
  order = sink.toposort()
  closed = {r for u in order if u.op is Ops.REDUCE for r in u.src[1:]} | {r for u in order if u.op is Ops.STAGE for r in u.src[2:]}
  return sorted((u for u in order if u.op is Ops.RANGE and u not in closed), key=lambda r: r.arg)

def merge_loops(sink: UOp) -> UOp:
  """Two adjacent loops (a outside b) that every index uses only as a*size(b)*c + b*c become one loop over both: a
  contiguous (14, 14) becomes 196 (LANES 28 = 7 x 28, whole vectors) where 14 lanes would be 8 + 4 + 2. Loops of one reduce must be
  adjacent in it; output loops adjacent in the nest. A loop in a gate, a division or a value is never merged."""
  while (pair := _mergeable(sink)) is not None: sink = _merge(sink, *pair)
  return sink

def _index_roots(sink: UOp) -> list[UOp]:
  return [u.src[1] for u in sink.toposort() if u.op in (Ops.LOAD, Ops.STORE) and u.src[0].op is Ops.DEFINE_GLOBAL]

def _pair_ok(order: list[UOp], roots: list[UOp], a: UOp, b: UOp) -> bool:
  # the index math built on a or b (a loaded value is data, not index math)
  dep = {a, b}
  for u in order:
    if u.op in (Ops.ADD, Ops.MUL) and any(s in dep for s in u.src): dep.add(u)
  in_index = {n for idx in roots for n in idx.toposort() if n.op in (Ops.ADD, Ops.MUL)}
  for u in order:
    for i, s in enumerate(u.src):
      if s in dep and not ((u.op in (Ops.ADD, Ops.MUL) and u in in_index) or (u.op in (Ops.LOAD, Ops.STORE) and i == 1) or (u.op is Ops.REDUCE and i > 0)):
        return False  # a gate, a division, a value: merging would change it
  nb = b.src[0].arg
  for idx in roots:
    terms = _terms(idx)
    if any(n is not None and n not in (a, b) and n in dep for n, _ in terms): return False
    if sum(c for n, c in terms if n is a) != sum(c for n, c in terms if n is b) * nb: return False
  return True

def _mergeable(sink: UOp) -> tuple[UOp, UOp] | None:
  order, roots = sink.toposort(), _index_roots(sink)
  reduces = [u for u in order if u.op is Ops.REDUCE]
  outs = output_ranges(sink)
  pairs = list(zip(outs, outs[1:])) + [p for r in reduces for p in zip(r.src[1:], r.src[2:])]
  for a, b in pairs:
    if a.src[0].op is Ops.CONST and b.src[0].op is Ops.CONST and all((a in r.src) == (b in r.src) for r in reduces) and _pair_ok(order, roots, a, b): return a, b
  return None

def _merge(sink: UOp, a: UOp, b: UOp) -> UOp:
  m = UOp(Ops.RANGE, a.dtype, (UOp.const(a.dtype, a.src[0].arg * b.src[0].arg),), a.arg)
  roots = _index_roots(sink)
  def merged(idx: UOp) -> UOp:
    terms = _terms(idx)
    return _sum(idx.dtype, [(n, c) for n, c in terms if n not in (a, b)] + [(m, sum(c for n, c in terms if n is b))])
  sink = sink.substitute({idx: merged(idx) for idx in roots if any(n in (a, b) for n, _ in _terms(idx))})
  return sink.substitute({r: r.replace(src=tuple(m if s is a else s for s in r.src if s is not b)) for r in sink.toposort()
                          if r.op is Ops.REDUCE and a in r.src})

def _tile(n: int, hi: int) -> int:
  """The largest divisor of n up to hi, preferring a multiple of 8, then of 4, then an even one (whole SIMD vectors:
  renderer/cvector.py; an odd tile leaves a lane over and runs as scalar C, so 114 is tiled by 38, not 57)."""
  divs = _divisors(n, 1, hi)
  return max([d for d in divs if d % 8 == 0] or [d for d in divs if d % 4 == 0 and d >= 8] or [d for d in divs if d % 2 == 0 and d >= 8] or divs)

def _divisors(n: int, lo: int, hi: int) -> list[int]: return [d for d in range(lo, min(n, hi) + 1) if n % d == 0]

def nested_reduce(reduces: list[UOp]) -> bool:
  """Does a reduce run inside another's loop (it reads that loop's index)? A reduce that only reads another's result
  (a row's max before the row's sum of exp) is not nested: it runs before that loop, on its own."""
  return any(x is not r and x.op is Ops.REDUCE and any(k in x.toposort() for k in r.src[1:]) for r in reduces for x in r.src[0].toposort())

def _analyze(sink: UOp) -> tuple[list[UOp], UOp | None, list[UOp]] | None:
  """(reduces, vectorizable output loop or None, reduces with a contiguous last loop); None if nothing applies."""
  reduces = [u for u in sink.toposort() if u.op is Ops.REDUCE]
  if not reduces or nested_reduce(reduces): return None
  out_ranges = output_ranges(sink)
  # VECTOR gives each reduce its own copy of j, so one reduce cannot read another's result
  reads_reduce = any(x.op is Ops.REDUCE for r in reduces for x in r.src[0].toposort())
  j = out_ranges[-1] if out_ranges and not reads_reduce else None
  lane_reduces = [r for r in reduces if _contiguous_in(r.src[0], r.src[-1])]
  # j is the vector axis if a load moves along it by 1 (and with the reduction); with no contiguous reduction worth
  # splitting either, any constant step will do (2x2 max-pool reads every other input: gathers, still a vector max)
  any_step = all(r.src[-1].src[0].arg < 8 for r in lane_reduces)
  if j is not None and not (all(j in r.src[0].toposort() for r in reduces) and
                            any(_contiguous_in(r.src[0], j, r.src[-1], any_step) for r in reduces)): j = None
  return reduces, j, lane_reduces

def _transposed(sink: UOp) -> tuple[UOp, UOp] | None:
  """(i, j) for a kernel without reductions whose every store moves by 1 along its innermost output loop j while some
  load moves by 1 along an outer output loop i and by more than 1 along j: it reads its input across the rows it writes."""
  order = sink.toposort()
  outs = output_ranges(sink)
  if any(u.op is Ops.REDUCE for u in order) or len(outs) < 2: return None
  def step(idx: UOp, r: UOp) -> int: return sum(c for n, c in _terms(idx) if n is r)
  j = outs[-1]
  if not all(st.op is Ops.STORE and step(st.src[1], j) == 1 for st in sink.src): return None
  loads = [u.src[1] for u in order if u.op is Ops.LOAD and u.src[0].op is Ops.DEFINE_GLOBAL]
  return next(((i, j) for i in reversed(outs[:-1]) if any(step(x, i) == 1 and step(x, j) > 1 for x in loads)), None)

TILE_WHOLE_ROW = 256  # longest row a TILE block takes whole where the tile does not divide it (lines it reads stay in L1)

def _tiles(sink: UOp, target: Renderer) -> list[int]:
  """The block sizes Opt("TILE") may take: vector widths that divide the rows i, and the columns j or a whole row."""
  if (ij := _transposed(sink)) is None: return []
  return [t for t in (4, 8, 16) if t <= max(target.simd_width, 4) and _tile_fits(*ij, t)]

def _tile_fits(i: UOp, j: UOp, t: int) -> bool: return i.src[0].arg % t == 0 and (j.src[0].arg % t == 0 or j.src[0].arg <= TILE_WHOLE_ROW)

def _tile_loops(sink: UOp, t: int) -> UOp:
  i, j = _transposed(sink)  # type: ignore[misc]
  # i's blocks keep its place in the nest, then j's blocks, then a block's rows and its columns, innermost. Columns the
  # tile does not divide (a padded 114-wide row read from a channels-last buffer) are one block: a block's rows then
  # share the row's cache lines, where they were reloaded from memory for every row
  sizes = {i: t, j: t if j.src[0].arg % t == 0 else j.src[0].arg}
  io, jo = (UOp(Ops.RANGE, r.dtype, (UOp.const(r.dtype, r.src[0].arg // sizes[r]),), r.arg) for r in (i, j))
  ii, ji = (UOp(Ops.RANGE, r.dtype, (UOp.const(r.dtype, sizes[r]),), j.arg + f) for r, f in ((i, 0.25), (j, 0.5)))
  return sink.substitute({i: io * UOp.const(i.dtype, t) + ii, j: jo * UOp.const(j.dtype, sizes[j]) + ji})

def actions(sink: UOp, target: Renderer) -> list[Opt]:
  """Every legal action for this kernel (the search space of BEAM)."""
  out = [Opt("NONE")] + [Opt("TILE", t) for t in _tiles(sink, target)]
  if (a := _analyze(sink)) is None: return out
  _, j, lane_reduces = a
  if j is not None:
    i = _upcast_range(sink, j)
    ups = [n for n in (1, 2, 3, 4, 5, 8) if n == 1 or (i is not None and _rows(sink, i, n) == n)]
    out += [Opt("VECTOR", t, n) for t in _divisors(j.src[0].arg, 4, 1024) for n in ups]
    out += [Opt("VECTOR", t, n, True) for t in _divisors(j.src[0].arg, 8, 64) for n in ups if n > 1]
  sizes = [r.src[-1].src[0].arg for r in lane_reduces]
  rows, rows2 = _lane_rows(sink, lane_reduces[0].src[-1]) if lane_reduces else (None, None)
  out += [Opt("LANES", n, u, upcast2=u2) for n in (4, 8, 16, 32) if sizes and all(s % n == 0 for s in sizes)
          for u in (1, 2, 3, 4) if u == 1 or (rows is not None and rows.src[0].arg % u == 0)
          for u2 in (1, 2, 4) if u2 == 1 or (u > 1 and rows2 is not None and rows2.src[0].arg % u2 == 0)]
  return out + ([c] if (c := choose(sink, target)) not in out else [])

def choose(sink: UOp, target: Renderer) -> Opt:
  """The default heuristic (measured on matmul and conv kernels): a contiguous output loop of 8 or more becomes the
  vector axis (tiles up to the target's max_tile); else a contiguous reduce gets one vector of lanes (or all of a short one);
  a transpose walks blocks of one vector's width."""
  if (a := _analyze(sink)) is None: return Opt("TILE", max(ts)) if (ts := _tiles(sink, target)) else Opt("NONE")
  budget = Budget.of(target)
  reduces, j, lane_reduces = a
  k = min((r.src[-1].src[0].arg for r in lane_reduces), default=0)
  if j is not None and (j.src[0].arg >= 8 or k < 8):
    t = _tile(j.src[0].arg, budget.max_tile)
    if t < 8 and t != j.src[0].arg: return Opt("NONE")
    if t == j.src[0].arg and t >= 2 * budget.width and (half := _tile(t, t // 2)) % budget.width == 0 and all(o is j for o in output_ranges(sink) if o.src[0].arg > 1):
      # threads split the tile loop: a reduction into the vector axis alone (batchnorm's per-channel sums of a
      # channels-last buffer) in one tile ran on one core; two tiles of whole vectors share the cores
      t = half
    # register tiling: several rows share each load of the vector axis
    i = _upcast_range(sink, j)
    up = _rows(sink, i, budget.rows(t))
    if up <= 2 and i is not None and (odd := next((n for n in (7, 5, 3) if i.src[0].arg % n == 0 and n > up), 0)):
      # rows that 4 does not divide (a 7x7 or 14x14 image's columns in a channels-last conv): an odd count of them, on
      # a narrower tile, so the accumulators stay in the same registers (7 rows x 2 vectors for 4 x 4; 2 rows x 4
      # AVX-512 vectors left 8: ResNet-18's 256-channel 14x14 layer 3.2 -> 0.54 ms with staging)
      narrow = _tile(j.src[0].arg, budget.max_tile * budget.rows(budget.max_tile) // odd)
      if narrow >= budget.width and narrow % budget.width == 0: t, up = narrow, odd
    # staging pays when the block is reused by many outputs and enough tiles are left to share among threads; a
    # narrower tile makes room where its rows x vectors still hide the FMA latency (ResNet-18's 512-channel 7x7 layer,
    # whose 32-lane block did not fit MAX_STAGE, 1.7 -> 1.05 ms on 16 lanes)
    pos, reuse = _staged_reuse(sink, j, i) if up > 1 else (None, 0)  # type: ignore[arg-type]
    if stage := reuse >= 32:
      block, n_j = max(prod(x.src[0].arg for x in r.src[1:]) for r in reduces), j.src[0].arg
      # a tile of part of a row reads its block at a stride (a conv's weights, 16 of 64 output channels): staged as it is
      # where an outer loop is left for the threads to split (batch 8's 64-channel 56x56 conv 12.0 -> 10.2 ms under
      # CPU_ISA=avx2, a 128-channel 28x28 one 6.3 -> 5.8 ms on AVX-512). Otherwise the tile loop is the outermost, and
      # threads need 8 tiles: a narrower tile, of several vectors with as many rows as the registers allow (3 x 4 ->
      # 5 x 2 under CPU_ISA=avx2: batch 1's 128-channel 28x28 conv 1.6 -> 1.35 ms), or of one vector where the rows
      # already hide the FMA latency (a one-vector tile loads a broadcast per FMA: 8 rows ran 1.1-1.4x slower)
      def rows_for(n: int) -> int:
        """The rows of a tile of n lanes: ours where they hide the FMA latency, else what n's registers allow (0 for
        one vector)."""
        if up * budget.vectors(n) >= 7: return up
        return _rows(sink, i, budget.rows(n)) if budget.vectors(n) > 1 else 0
      if not (t < n_j and pos is not output_ranges(sink)[0] and block * t <= MAX_STAGE):
        fits = [(n, u) for n in _divisors(n_j, budget.width, t) if n % budget.width == 0 and n_j // n >= 8 and block * n <= MAX_STAGE
                and (u := rows_for(n)) * budget.vectors(n) >= 7]
        if fits: t, up = max(fits)
        else: stage = n_j // t >= 8
    return Opt("VECTOR", t, up, stage, kblock=_kblock(sink, reduces, t, up, i) if up > 1 else 0)
  lanes = k if k <= 2 * budget.width and k % 4 == 0 or k < 8 else _tile(k, 2 * budget.width)
  if lanes < 8 or any(r.src[-1].src[0].arg % lanes for r in lane_reduces): return Opt("NONE")
  # register tiling, as VECTOR's: outputs that share a load of the reduction (a conv's weight gradient: kernel columns),
  # then a second loop for the loads the first does not share (output channels), up to the budget's vector accumulators
  i, i2 = _lane_rows(sink, lane_reduces[0].src[-1])
  up = next((n for n in (4, 3, 2) if i is not None and i.src[0].arg % n == 0), 1)
  def tiled(n: int) -> Opt:
    vectors = budget.vectors(n) * up
    up2 = next((u for u in (4, 2) if i2 is not None and i2.src[0].arg % u == 0 and vectors * u <= budget.max_vectors), 1)
    return Opt("LANES", n, up, upcast2=up2 if up > 1 else 1)
  # more outputs per load beat more lanes per output: with 16 registers (AVX2) a 5x5 weight gradient ran 1.7x faster on
  # one vector of lanes and 4 x 4 outputs than on two vectors and 4 x 2
  # and at equal outputs, lanes whose accumulators and loads fit the registers: a 4 x 4 tile of two-vector lanes is 32
  # accumulators, all of AVX-512's registers, with none left for its 8 loads (x @ w.T, 128x576 by 1536x576: 2.1 ms
  # against 1.3 ms on one vector), while a matrix-vector product's 4 x 1 tile wants the longer chains of two
  def fits(o: Opt) -> bool: return budget.vectors(o.arg) * (o.upcast * o.upcast2 + o.upcast + o.upcast2) <= budget.registers
  return max((tiled(n) for n in {lanes, budget.width} if n <= lanes and k % n == 0), key=lambda o: (o.upcast * o.upcast2, fits(o), o.arg))

def _rows(sink: UOp, i: UOp | None, best: int) -> int:
  """VECTOR's upcast: the register tile's rows where at most 1/8 of the computed rows are spare copies (the last group of
  a size they do not divide, _upcast), else the most rows up to that (or 4) which divide them (20 columns on
  AVX-512's 6-row budget: 5 rows, where 4 took MNIST's 32-channel 5x5 forward kernel 8.6 against 7.8 ms)."""
  if i is None: return 1
  size = i.src[0].arg
  if best > 1 and (-size % best == 0 or -size % best * 8 <= size and _clamped_rows_ok(sink)): return best
  return next((n for n in range(max(best, 4), 1, -1) if size % n == 0), 1)

def apply_opt(sink: UOp, opt: Opt) -> UOp:
  if opt.kind == "TILE":
    if (ij := _transposed(sink)) is None or not _tile_fits(*ij, opt.arg): raise ValueError(f"{opt} does not apply to this kernel")
    return _tile_loops(sink, opt.arg)
  if opt.kind == "NONE" or (a := _analyze(sink)) is None: return sink
  reduces, j, lane_reduces = a
  if opt.kind == "VECTOR":
    if j is None or j.src[0].arg % opt.arg or opt.upcast2 > 1: raise ValueError(f"{opt} does not apply to this kernel")
    rows = None
    if opt.upcast > 1:
      if (i := _upcast_range(sink, j)) is None or i.src[0].arg % opt.upcast and not _clamped_rows_ok(sink):
        raise ValueError(f"{opt} does not apply to this kernel")
      sink, rows = _upcast(sink, i, opt.upcast)
    elif opt.stage: raise ValueError(f"{opt}: staging needs an upcast")
    sink = _vector_output(sink, j, opt.arg, rows if opt.stage else None)
    if opt.kblock:
      if not _blockable(sink, rows, opt.kblock): raise ValueError(f"{opt} does not apply to this kernel")
      sink = _block_reduce(sink, rows, opt.kblock)  # type: ignore[arg-type]
    return sink
  if opt.kind == "LANES":
    if not lane_reduces or any(r.src[-1].src[0].arg % opt.arg for r in lane_reduces): raise ValueError(f"{opt} does not apply to this kernel")
    if (swapped := _larger_operand_outside(sink, lane_reduces[0].src[-1])) is not sink:
      sink, lane_reduces = swapped, _analyze(swapped)[2]  # type: ignore[index]
    i, i2 = _lane_rows(sink, lane_reduces[0].src[-1])
    for rows, n in ((i, opt.upcast), (i2, opt.upcast2)):
      if n == 1: continue
      if rows is None or rows.src[0].arg % n: raise ValueError(f"{opt} does not apply to this kernel")
      sink = _upcast(sink, rows, n)[0]
    lane_reduces = _analyze(sink)[2]  # type: ignore[index]
    return _split_lanes(sink, lane_reduces, opt.arg)
  raise ValueError(f"unknown optimization {opt}")

def _larger_operand_outside(sink: UOp, k: UOp) -> UOp:
  """A LANES matmul whose two output loops each have an operand of their own along k (x @ w.T, both contiguous in k):
  the loop of the larger operand goes outside, so that operand streams from memory once while the smaller one is read
  again from cache, not the other way round (an LLM prefill's 32 tokens x 1536x576 weight read the weight 8 times,
  once per group of 4 tokens)."""
  outs = [r for r in output_ranges(sink) if r.src[0].arg > 1]
  if len(outs) != 2: return sink
  outer, inner = outs
  along = [t for u in sink.toposort() if u.op is Ops.LOAD and k in (t := u.src[1].toposort())]
  own = [any(r in t and (outer if r is inner else inner) not in t for t in along) for r in outs]
  if not all(own) or inner.src[0].arg <= outer.src[0].arg: return sink
  return sink.substitute({inner: UOp(Ops.RANGE, inner.dtype, inner.src, outer.arg - 0.5)})

def _upcast_range(sink: UOp, j: UOp, fallback: bool = True) -> UOp | None:
  """The rows to compute together: the innermost output loop that some load along j does not depend on, so that load
  serves every row (rows of a matmul, output channels of a conv); else (fallback) the output loop just outside j."""
  outs = [r for r in output_ranges(sink) if r is not j]
  loads = [u.toposort() for u in sink.toposort() if u.op is Ops.LOAD and j in u.src[1].toposort()]
  return next((r for r in reversed(outs) if any(r not in t for t in loads)), outs[-1] if outs and fallback else None)

def _lane_rows(sink: UOp, k: UOp) -> tuple[UOp | None, UOp | None]:
  """LANES' register tiling loops: rows that some load along the reduction k does not depend on, then rows that some
  load depending on the first rows does not depend on (so both kinds of load are shared), in the loop order
  apply_opt gives them (_larger_operand_outside)."""
  sink = _larger_operand_outside(sink, k)
  first = _upcast_range(sink, k, fallback=False)
  along = [u.src[1].toposort() for u in sink.toposort() if u.op is Ops.LOAD and k in u.src[1].toposort()]
  # rows that no load along k depends on (the columns of a row-wise softmax's output loop) share nothing
  if first is None or not any(first in t for t in along): return None, None
  if not any(first.src[0].arg % n == 0 for n in (4, 3, 2)):
    # a 5x5 kernel's columns have no divisor to tile: another loop that some load along k does not depend on (its input
    # channels) is tiled instead
    first = next((r for r in reversed(output_ranges(sink)) if any(r not in t for t in along) and any(r in t for t in along)
                  and any(r.src[0].arg % n == 0 for n in (4, 3, 2))), first)
  loads = [t for u in sink.toposort() if u.op is Ops.LOAD and k in (t := u.toposort()) and first in t]
  return first, next((r for r in reversed(output_ranges(sink)) if r is not first and any(r not in t for t in loads)), None)

def _staged_reuse(sink: UOp, j: UOp, rows: UOp) -> tuple[UOp | None, int]:
  """The loop the tile loop goes just outside of (_block_outside), and the output elements (along all loops but j) that
  share each staged block: (None, 0) where no load along j depends on no output loop from the rows inward (a block
  reused by all rows)."""
  if not (block := _stage_block(sink, j, rows)): return None, 0
  pos = _block_outside(sink, j, rows, block)
  return pos, prod(r.src[0].arg for r in output_ranges(sink) if r.arg >= pos.arg and r is not j)

def _stage_block(sink: UOp, j: UOp, rows: UOp) -> list[set[UOp]]:
  """The nodes of each load along j that depends on no output loop from the rows inward."""
  inner = {r for r in output_ranges(sink) if r.arg >= rows.arg and r is not j}
  return [t for u in sink.toposort() if u.op is Ops.LOAD and j in (t := set(u.toposort())) and not t & inner]

def _upcast(sink: UOp, i: UOp, n: int) -> tuple[UOp, UOp]:
  """Register tiling: the kernel body is copied for n consecutive values of i; the copies' reduces run over the same
  loops (the linearizer merges them), so a value that does not depend on i is loaded once for all n rows. Where n does
  not divide i, the last group's spare copies compute the last row again and store the same values there (see
  _clamped_rows_ok)."""
  size = i.src[0].arg
  io = UOp(Ops.RANGE, i.dtype, (UOp.const(i.dtype, -(-size // n)),), i.arg)
  base, last = io * UOp.const(i.dtype, n), UOp.const(i.dtype, size - 1)
  def row(c: int) -> UOp:
    r = base + UOp.const(i.dtype, c)
    return r if size % n == 0 or c < size % n else r.alu(Ops.CMPLT, UOp.const(i.dtype, size)).alu(Ops.WHERE, r, last)
  return UOp(Ops.SINK, sink.dtype, tuple(st.substitute({i: row(c)}) for c in range(n) for st in sink.src), sink.arg), io

def _clamped_rows_ok(sink: UOp) -> bool:
  """Spare copies of a clamped upcast store their row's value a second time, which is only the same value if the kernel
  reads no buffer it writes (an in-place update would read the first copy's result)."""
  stored = {st.src[0] for st in sink.src if st.op is Ops.STORE}
  return not any(u.op is Ops.LOAD and u.src[0] in stored for u in sink.toposort())

def _block_outside(sink: UOp, j: UOp, rows: UOp, block: list[set[UOp]]) -> UOp:
  """The outermost output loop, from the rows outward, that no load staged for them depends on: the tile loop goes just
  outside it, so each block is filled and read once for all of them (a batch-1 convolution's weights, whose tiles
  were read again for every image row: ResNet-18's 512-channel 7x7 layer 3.9 -> 2.2 ms, its 256-channel 14x14 one
  2.1 -> 1.3 ms on an AVX2 Zen 3), or just outside the loops whose outputs already share it STAGE_SHARED times. block:
  _stage_block's loads."""
  outputs = [r for r in output_ranges(sink) if r is not j]
  for r in reversed([r for r in outputs if r.arg < rows.arg]):
    if any(r in t for t in block) or prod(o.src[0].arg for o in outputs if o.arg >= rows.arg) >= STAGE_SHARED: break
    rows = r
  return rows

def _vector_output(sink: UOp, j: UOp, tile: int, rows: UOp | None = None) -> UOp:
  """rows: stage row-invariant loads, with the outer tile loop moved outside the rows (_block_outside)."""
  size = j.src[0].arg
  if rows is not None: rows = _block_outside(sink, j, rows, _stage_block(sink, j, rows))
  if tile < size:
    # the outer loop keeps j's place in the nest (same arg), or goes outside the rows; the tile is innermost
    jo = UOp(Ops.RANGE, j.dtype, (UOp.const(j.dtype, size // tile),), j.arg if rows is None else rows.arg - 0.5)
    ji = _new_range(j, tile)
    sink = sink.substitute({j: jo * UOp.const(j.dtype, tile) + ji})
    j = ji
  # each reduce loops over its own copy of j, shared only by reduces over the same loops (the linearizer merges those)
  jrs: dict[tuple, UOp] = {}
  mapping: dict[UOp, UOp] = {}
  staged: dict[UOp, UOp] = {}  # the copies of a body that UPCAST made share their staged loads
  for r in (u for u in sink.toposort() if u.op is Ops.REDUCE):
    jr = jrs.setdefault(r.src[1:], _new_range(j, j.src[0].arg))
    body = r.src[0].substitute({**mapping, j: jr})
    if rows is not None: body = _stage_loads(body, r.src[1:], jr, {o for o in output_ranges(sink) if o.arg >= rows.arg}, staged)
    mapping[r] = UOp(Ops.REDUCE, r.dtype, (body, *r.src[1:], jr), (r.arg, j))
  return sink.substitute(mapping)

L1_BLOCK = 12 << 10  # bytes of one block of _block_reduce's operand: with the block's share of the other operand and
# a row of partial sums (at most ROW_PARTIALS) it stays within the smallest common L1d (32 KB)
ROW_PARTIALS = 16 << 10
BLOCK_STEPS = 64  # steps of the reduce a block runs at least between reading and writing its partial sums

def _kblock(sink: UOp, reduces: list[UOp], t: int, up: int, rows: UOp) -> int:
  """VECTOR's kblock for a tile of t lanes by `up` rows: the largest blocks of the reduce's outer loop whose share of the
  operand a tile loads (a conv's weights) fits L1_BLOCK, where the whole does not and a row of at least 4 tiles shares
  each block. Under CPU_ISA=avx2 ResNet-18's 3x3 convs ran 3-19% faster (a row of 19 3-column tiles of 32 channels
  reads 72 KB of weights per tile; blocks of 8 channels). Not taken: 3 tiles a row (a 10-wide image, 3% slower), a
  row's partial sums over ROW_PARTIALS (a 1024 matmul's span all its rows: 2x slower), blocks of fewer than BLOCK_STEPS
  steps (a 5x5 conv's 4 channels, 1-3% slower; AVX-512's 64-channel 3x3 tiles in blocks of 4, within 2%)."""
  k, *rest = reduces[0].src[1:]
  steps = prod(x.src[0].arg for x in rest if x.src[0].op is Ops.CONST)
  tiles = -(-rows.src[0].arg // up)
  if k.src[0].arg * steps * t * 4 <= L1_BLOCK or tiles < 4 or tiles * up * t * 4 > ROW_PARTIALS: return 0
  n = max((n for n in _divisors(k.src[0].arg, 2, k.src[0].arg - 1) if n * steps * t * 4 <= L1_BLOCK), default=0)
  return n if n * steps >= BLOCK_STEPS and _blockable(sink, rows, n) else 0

def _blockable(sink: UOp, rows: UOp | None, n: int) -> bool:
  """Can _block_reduce split this kernel's reduce into blocks of n? One loop nest of sums (VECTOR's copies of one
  reduce), whose outermost loop n divides, each stored as float32 into a buffer the kernel does not read, with
  some output loop outside the rows for the threads to split (each thread then owns its outputs' partial sums)."""
  order = sink.toposort()
  reduces = [u for u in order if u.op is Ops.REDUCE]
  if rows is None or not reduces: return False
  if any(r.src[1:] != reduces[0].src[1:] or reduce_op(r) is not Ops.ADD or r.dtype != dtypes.float32 for r in reduces): return False
  k = reduces[0].src[1]
  if not (k.src[0].op is Ops.CONST and n < k.src[0].arg and k.src[0].arg % n == 0): return False
  if not any(r.arg < rows.arg and r.src[0].op is Ops.CONST and r.src[0].arg > 1 for r in output_ranges(sink)): return False
  if any(st.src[0].dtype.base != dtypes.float32 for st in sink.src) or reads_own_output(sink, order): return False
  return all(sum(1 for u in st.src[2].toposort() if u.op is Ops.REDUCE) == 1 for st in sink.src)

def _block_reduce(sink: UOp, rows: UOp, n: int) -> UOp:
  """The reduce's outermost loop k (a conv's input channels) runs in blocks of n, in a new output loop just outside
  the rows, so one block of the staged operand serves a whole row of tiles from L1 (a 64-channel 3x3 conv's 32-lane
  tile reads 72 KB of weights, over L1, for every 3 output columns). Each block adds its sums to the partial sums the
  earlier blocks left in the output (the first reads none), and the last stores the kernel's value of the total."""
  k = next(u for u in sink.toposort() if u.op is Ops.REDUCE).src[1]
  kb = UOp(Ops.RANGE, k.dtype, (UOp.const(k.dtype, k.src[0].arg // n),), rows.arg - 0.25)
  ki = _new_range(k, n)
  blocked = kb * UOp.const(k.dtype, n) + ki
  def block_sum(r: UOp) -> UOp: return UOp(Ops.REDUCE, r.dtype, (r.src[0].substitute({k: blocked}), ki, *r.src[2:]), r.arg)
  later, last = kb.ne(UOp.const(k.dtype, 0)), kb.eq(UOp.const(k.dtype, k.src[0].arg // n - 1))
  stores = []
  for st in sink.src:
    buf, idx, val = st.src[:3]
    r = next(u for u in val.toposort() if u.op is Ops.REDUCE)
    total = block_sum(r) + UOp(Ops.LOAD, dtypes.float32, (buf, idx, later))
    stores.append(st.replace(src=(buf, idx, total if val is r else last.where(val.substitute({r: total}), total), *st.src[3:])))
  return sink.replace(src=tuple(stores))

def _stage_loads(body: UOp, reduce_ranges: tuple[UOp, ...], jr: UOp, inner: set[UOp], staged: dict[UOp, UOp]) -> UOp:
  """Loads of the reduce body that move with the tile jr (step 1) and the reduce loops but not with the `inner` output
  loops read from a STAGE instead: a scratch block filled once per tile, laid out [reduce loops..., tile]."""
  mapping = {}
  for u in body.toposort():
    if u.op is not Ops.LOAD or u.src[0].op is not Ops.DEFINE_GLOBAL: continue
    if u in staged:
      mapping[u] = staged[u]
      continue
    used = {x for x in u.toposort() if x.op is Ops.RANGE}
    ks = [k for k in reduce_ranges if k in used]
    steps: dict = {}
    for n, c in _terms(u.src[1]): steps[n] = steps.get(n, 0) + c
    if not ks or steps.get(jr) != 1 or used & inner or steps.get(ks[-1]) == jr.src[0].arg: continue  # already contiguous
    sizes = [k.src[0].arg for k in ks] + [jr.src[0].arg]
    if prod(sizes) > MAX_STAGE: continue
    fill = [_new_range(k, n) for k, n in zip(ks + [jr], sizes)]
    stage = UOp(Ops.STAGE, u.dtype, (u.substitute(dict(zip(ks + [jr], fill))), flat_index(fill, tuple(sizes), jr.dtype), *fill), prod(sizes))
    mapping[u] = staged[u] = UOp(Ops.LOAD, u.dtype, (stage, flat_index(ks + [jr], tuple(sizes), jr.dtype)))
  return body.substitute(mapping)

def _split_lanes(sink: UOp, reduces: list[UOp], lanes: int) -> UOp:
  mapping = {}
  made: dict[tuple, tuple] = {}  # the copies UPCAST made share their lane loops, so the linearizer runs them together
  for r in reduces:
    k = r.src[-1]
    size = k.src[0].arg
    lane, lane_red, outer = made.setdefault(r.src[1:], (_new_range(k, lanes), _new_range(k, lanes), [_new_range(k, size // lanes)] if size > lanes else []))
    # reduces come inner first: one whose result this body reads is already split (mapping)
    body = r.src[0].substitute({**mapping, k: outer[0] * UOp.const(k.dtype, lanes) + lane_red if outer else lane_red})
    partial = UOp(Ops.REDUCE, r.dtype, (body, *r.src[1:-1], *outer, lane_red), (r.arg, lane))
    mapping[r] = UOp(Ops.REDUCE, r.dtype, (partial, lane), r.arg)
  return sink.substitute(mapping)
