"""GPU lowering: a kernel's output loops become hardware thread indices (UOp SPECIAL). The renderer turns them into
blockIdx/threadIdx math and a launch size; the PYTHON device interprets the same UOps once per thread of the launch
(runtime/ops_python.py), barriers included.

The GPU's optimization actions (an `Opt` each, chosen by `choose` from the target's facts or timed by BEAM):
  - Opt("THREADS", b, upcast=u, upcast2=v): one thread per tile of u consecutive rows x v consecutive columns of the
    outputs, b threads a block. The columns are the innermost output loop; the rows the innermost loop that some load
    along the columns does not depend on (a matmul's rows, a conv's output channels). The tile's copies of the body
    share their reduce loops (the linearizer merges them), so a value loaded once serves every output that reads it
    (register tiling). A size the tile does not divide is padded: the extra copies read the last row (in bounds) and
    their stores are gated off. The thread's indices are recovered from `gidx0` by div/mod and it runs the reductions itself.
  - Opt("GROUP", b): one block of b threads per output element, for few outputs with long reductions (a sum of a whole
    tensor, a row softmax): each thread reduces a strided share of every reduction, a warp's partials are combined by
    shuffles (a butterfly: every lane ends with the warp's total), lane 0 of each warp stores it to shared memory
    (DEFINE_LOCAL), and after a barrier (BARRIER) every thread combines the warps' totals in the same order, so all of
    them hold the same result; thread 0 stores it. b is a power of two from a warp to the block limit.
  - Opt("TC", b): tensor cores, for a sum over one reduction of float(a) * float(b) with a and b both float16 or both
    bfloat16 (a matmul, a batched matmul, a conv: its reduce loops are flattened into one K), on a target whose
    renderer has `tensor_cores` (CUDA: mma.sync m16n8k16, whose tile sizes and fragment layout it describes): a warp
    per 16 x 8 tile of outputs (b threads a block, whole warps), stepping through K 16 at a time; at each step every
    lane reads its fragment of the 16 x 16 tile of A and the 16 x 8 tile of B (zero past the edges of M, N and K) and
    the warp multiplies them (BARRIER with arg ("mma", r): the lane's r-th value of the product) into 4 float32
    accumulators a lane; each lane then stores its 4 outputs, the kernel's epilogue applied to each."""
from __future__ import annotations
from dataclasses import dataclass
from fusegrad.dtype import DType, dtypes
from fusegrad.helpers import NOOPT, prod
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.pattern import graph_rewrite
from fusegrad.uop.symbolic import symbolic
from fusegrad.codegen.lowerer import reduce_identity
from fusegrad.codegen.opt import Opt, nested_reduce, output_ranges
from fusegrad.renderer import Renderer, TensorCores

# a kernel gets block reductions when it has at most this many outputs and a reduction at least this long
GROUP_MAX_OUTPUTS, GROUP_MIN_REDUCE = 1024, 256
# register tiles pay when each output's reduction is at least this long and the tiled launch still has this many
# blocks' worth of threads to spread over the GPU's multiprocessors
TILE_MIN_REDUCE, TILE_MIN_BLOCKS = 16, 4
# tensor cores pay for at least this many whole tiles along each of M, N and K (16 x 8 x 16 on CUDA)
TC_MIN_TILES = 1

def to_threads(sink: UOp, target: Renderer, opt: Opt | None = None) -> UOp:
  """Replace the output loops of `sink` with thread indices as `opt` says (None: the heuristic's choice)."""
  opt = choose(sink, target) if opt is None else opt
  if opt.kind == "TC":
    if (plan := tc_plan(sink, target)) is None or not _warp_block(opt.arg, target): raise ValueError(f"{opt} does not apply to this kernel")
    return _tensor_cores(sink, plan, opt.arg, target.tensor_cores)
  if opt.kind == "GROUP":
    if (reduces := _groupable(sink)) is None or not _pow2_block(opt.arg, target): raise ValueError(f"{opt} does not apply to this kernel")
    return _split(_group_reduces(sink, reduces, opt.arg, target.warp_size), output_ranges(sink), "bidx0", opt.arg)
  if opt.kind != "THREADS" or not 1 <= opt.arg <= target.max_threads: raise ValueError(f"{opt} does not apply to a GPU kernel")
  rows, cols = tile_loops(sink)
  for r, n in ((rows, opt.upcast), (cols, opt.upcast2)):
    if n == 1: continue
    if r is None: raise ValueError(f"{opt} does not apply to this kernel")
    sink = _upcast(sink, r, n)
  return _split(sink, output_ranges(sink), "gidx0", opt.arg)

# ---------------- choosing

def choose(sink: UOp, target: Renderer) -> Opt:
  """The heuristic, from the target's facts: a block per output for few outputs with long reductions; register tiles
  of 4 x 4 outputs (a matmul, a conv) when the reductions are long and enough threads are left; else one thread per output.
  Before all of them, tensor cores for a 16-bit matmul of at least one whole tile where the target has them."""
  if not NOOPT and (plan := tc_plan(sink, target)) is not None and plan.worth_it(target.tensor_cores): return Opt("TC", min(target.block_size, target.max_threads))
  reduces = [u for u in sink.toposort() if u.op is Ops.REDUCE]
  longest = max((_size(u) for u in reduces), default=0)
  if _groupable(sink) is not None and _outputs(sink) <= GROUP_MAX_OUTPUTS and longest >= GROUP_MIN_REDUCE:
    return Opt("GROUP", 128 if NOOPT else _group_block(longest, target))
  block = min(target.block_size, target.max_threads)
  rows, cols = tile_loops(sink)
  if not NOOPT and not reduces and cols is not None and cols.src[0].arg % 4 == 0 and _outputs(sink) >= 4 * block * TILE_MIN_BLOCKS:
    return Opt("THREADS", block, upcast2=4)  # 4 consecutive outputs a thread: float4 loads where they line up
  if NOOPT or longest < TILE_MIN_REDUCE: return Opt("THREADS", block)
  up = 4 if rows is not None else 1
  up2 = next((n for n in (4, 2) if cols is not None and cols.src[0].arg % n == 0), 1)  # whole vectors of columns
  if _outputs(sink) < up * up2 * block * TILE_MIN_BLOCKS: up = up2 = 1
  return Opt("THREADS", block, up, upcast2=up2)

def actions(sink: UOp, target: Renderer) -> list[Opt]:
  """Every legal GPU action for this kernel (BEAM's search space): block sizes from a warp to the most threads a block
  may have, register tiles of rows and columns, block reductions, tensor cores."""
  blocks = [b for b in (32, 64, 128, 256, 512, 1024) if b <= target.max_threads]
  rows, cols = tile_loops(sink)
  ups = [1] + ([2, 4, 8] if rows is not None else [])
  ups2 = [1] + ([2, 4] if cols is not None else [])
  out = [Opt("THREADS", b, u, upcast2=v) for b in blocks for u in ups for v in ups2]
  if _groupable(sink) is not None: out += [Opt("GROUP", b) for b in blocks if _pow2_block(b, target)]
  if tc_plan(sink, target) is not None: out += [Opt("TC", b) for b in blocks if _warp_block(b, target)]
  return out + ([c] if (c := choose(sink, target)) not in out else [])

def tile_loops(sink: UOp) -> tuple[UOp | None, UOp | None]:
  """(rows, columns) of a register tile, each None where tiling it would share no load. Columns: the innermost output
  loop, if some load of a reduction does not depend on it. Rows: the innermost other output loop that some load
  along the columns does not depend on."""
  outs = output_ranges(sink)
  reduces = [u for u in sink.toposort() if u.op is Ops.REDUCE]
  if not outs: return None, None
  if not reduces: return None, outs[-1]  # elementwise: consecutive columns a thread (its loads become vector loads)
  j = outs[-1]
  loads = [set(u.toposort()) for r in reduces for u in r.src[0].toposort() if u.op is Ops.LOAD]
  cols = j if any(j not in t for t in loads) else None
  along = [t for t in loads if j in t]
  rows = next((r for r in reversed(outs[:-1]) if any(r not in t for t in along) and any(r in t for t in loads)), None)
  return rows, cols

def _groupable(sink: UOp) -> list[UOp] | None:
  """The reduces of a kernel that block reductions can split (every barrier must be outside loops: no reduce may run
  inside another's loop), or None."""
  reduces = [u for u in sink.toposort() if u.op is Ops.REDUCE]
  return reduces if reduces and not nested_reduce(reduces) else None

def _group_block(longest: int, target: Renderer) -> int:
  """Threads of a block reduction: about 4 elements a thread, a power of two from a warp to the block limit."""
  b = target.warp_size
  while b * 2 <= min(longest // 4, target.max_threads): b *= 2
  return b

def _pow2_block(b: int, target: Renderer) -> bool: return target.warp_size <= b <= target.max_threads and b & (b - 1) == 0
def _outputs(sink: UOp) -> int: return prod(r.src[0].arg for r in output_ranges(sink))
def _size(reduce: UOp) -> int: return prod(r.src[0].arg for r in reduce.src[1:])

# ---------------- lowering

def _upcast(sink: UOp, r: UOp, n: int) -> UOp:
  """The kernel's stores are copied for n consecutive values of loop r, which now steps by n. Where n does not divide
  r's size, a copy past the end reads the last value (so its loads stay in bounds) and its stores are gated off."""
  size = r.src[0].arg
  outer = UOp(Ops.RANGE, r.dtype, (UOp.const(r.dtype, -(-size // n)),), r.arg)  # keeps r's place in the nest
  stores = []
  for c in range(n):
    v = outer * UOp.const(r.dtype, n) + UOp.const(r.dtype, c)
    if size % n == 0:
      stores += [st.substitute({r: v}) for st in sink.src]
      continue
    ok = v < UOp.const(r.dtype, size)
    stores += [_gated(st.substitute({r: ok.where(v, UOp.const(r.dtype, size - 1))}), ok) for st in sink.src]
  return graph_rewrite(UOp(Ops.SINK, sink.dtype, tuple(stores), sink.arg), symbolic)

def _gated(st: UOp, ok: UOp) -> UOp:
  """STORE(buffer, index, value[, gate]) with `ok` added to its gate."""
  return st.replace(src=st.src[:3] + ((st.src[3] & ok) if len(st.src) > 3 else ok,))

def _unflatten(flat: UOp, loops: tuple[UOp, ...] | list[UOp]) -> dict[UOp, UOp]:
  """Each loop's index from one flat index over them (outermost first): (flat // the inner loops' sizes) % its size."""
  out = {}
  for i, r in enumerate(loops):
    stride = prod(x.src[0].arg for x in loops[i + 1:])
    v = flat // UOp.const(flat.dtype, stride) if stride > 1 else flat
    out[r] = v % UOp.const(flat.dtype, r.src[0].arg) if i > 0 else v
  return out

def _split(sink: UOp, loops: list[UOp], name: str, block: int) -> UOp:
  """The output loops become one SPECIAL index `name` over all of their elements, launched `block` threads a block
  (gidx0) or with `block` threads in each block (bidx0, one block an element)."""
  if not loops: return graph_rewrite(sink, symbolic)  # a single output element: one thread (or one block)
  idx = UOp(Ops.SPECIAL, loops[0].dtype, (), (name, prod(r.src[0].arg for r in loops), block))
  return graph_rewrite(sink.substitute(_unflatten(idx, loops)), symbolic)

def _group_reduces(sink: UOp, reduces: list[UOp], block: int, warp: int) -> UOp:
  """Each reduce over R elements: thread t reduces elements t, t+block, ... (a loop of ceil(R/block)); the partials of
  a warp are combined by shuffles, and the warps' totals meet in shared memory after a barrier."""
  idt = reduces[0].src[1].dtype
  lid = UOp(Ops.SPECIAL, idt, (), ("lidx0", block))
  next_range = 1 + max(u.arg for u in sink.toposort() if u.op is Ops.RANGE)
  sub: dict[UOp, UOp] = {}
  for k, u in enumerate(reduces):
    rngs, size = u.src[1:], _size(u)
    outer = UOp(Ops.RANGE, idt, (UOp.const(idt, (size + block - 1) // block),), next_range + 2 * k)
    flat = outer * UOp.const(idt, block) + lid
    inside = flat < UOp.const(idt, size)
    at = inside.where(flat, UOp.const(idt, size - 1))  # past the end: read the last element (in bounds), use the identity
    idx_of = _unflatten(at, rngs)
    identity = UOp.const(u.dtype, reduce_identity(u.arg, u.dtype))
    # an earlier reduce this one reads (softmax's max in its sum) is already replaced: reduces come in toposort order
    partial = UOp(Ops.REDUCE, u.dtype, (inside.where(u.src[0].substitute({**sub, **idx_of}), identity), outer), u.arg)
    sub[u] = _across_block(_across_warp(partial, u.arg, warp), u.arg, lid, block, warp, f"smem{k}", next_range + 2 * k + 1)
  # every thread holds the result; thread 0 stores it (a gated STORE)
  first = UOp(Ops.CMPEQ, dtypes.bool, (lid, UOp.const(idt, 0)))
  sink = sink.substitute(sub)
  return sink.replace(src=tuple(_gated(st, first) for st in sink.src))

def _across_warp(v: UOp, op: Ops, warp: int) -> UOp:
  """A butterfly of shuffles (BARRIER with arg ("shfl_xor", m): the value of lane ^ m): after log2(warp) steps every
  lane holds op over the warp's values, the same in each (op(a, b) == op(b, a) bit for bit: add, mul, max)."""
  m = warp // 2
  while m:
    v = UOp(op, v.dtype, (v, UOp(Ops.BARRIER, v.dtype, (v,), ("shfl_xor", m))))
    m //= 2
  return v

def _across_block(v: UOp, op: Ops, lid: UOp, block: int, warp: int, name: str, rid: int) -> UOp:
  """Lane 0 of each warp stores its warp's total to shared memory; after a barrier every thread reduces the totals in
  the same order. A block of one warp needs neither."""
  if block <= warp: return v
  idt, warps = lid.dtype, block // warp
  smem = UOp(Ops.DEFINE_LOCAL, v.dtype.ptr(warps), (), name)
  lane0 = UOp(Ops.CMPEQ, dtypes.bool, (lid % UOp.const(idt, warp), UOp.const(idt, 0)))
  synced = UOp(Ops.BARRIER, v.dtype.ptr(warps), (smem, UOp(Ops.STORE, dtypes.void, (smem, lid // UOp.const(idt, warp), v, lane0))))
  j = UOp(Ops.RANGE, idt, (UOp.const(idt, warps),), rid)
  return UOp(Ops.REDUCE, v.dtype, (UOp(Ops.LOAD, v.dtype, (synced, j)), j), op)

# ---------------- tensor cores

@dataclass(frozen=True)
class TCPlan:
  """A kernel's sum of products as a matrix multiply: reduce = sum over its loops (K) of float(a) * float(b), where a
  reads the output loop `rows` (M) and b does not, and b reads the output loop `cols` (N) and a does not."""
  reduce: UOp
  a: UOp
  b: UOp
  rows: UOp
  cols: UOp
  @property
  def sizes(self) -> tuple[int, int, int]: return self.rows.src[0].arg, self.cols.src[0].arg, _size(self.reduce)
  def worth_it(self, tc: TensorCores) -> bool: return all(s >= TC_MIN_TILES * d for s, d in zip(self.sizes, tc.dims))

def tc_plan(sink: UOp, target: Renderer) -> TCPlan | None:
  """The kernel as a matmul on the target's tensor cores, or None: its one reduction must be a float32 sum of products
  of two 16-bit values of a dtype the target's tensor cores take (with a row loop only one factor reads and a column
  loop only the other reads). The columns are the innermost output loop where that fits (the stores' contiguous one)."""
  reduces = [u for u in sink.toposort() if u.op is Ops.REDUCE]
  if (tc := target.tensor_cores) is None or tc.lanes != target.warp_size or len(reduces) != 1: return None
  if (r := reduces[0]).arg is not Ops.ADD or r.dtype != dtypes.float32 or (factors := _half_factors(r.src[0], tc.dtypes)) is None: return None
  outs, plans = output_ranges(sink), []
  for a, b in (factors, factors[::-1]):
    ra, rb = set(a.toposort()), set(b.toposort())
    rows, cols = [o for o in outs if o in ra and o not in rb], [o for o in outs if o in rb and o not in ra]
    if rows and cols: plans.append(TCPlan(r, a, b, rows[-1], cols[-1]))
  return next((p for p in plans if p.cols is outs[-1]), plans[0] if plans else None)

def _half_factors(x: UOp, dts: frozenset[DType]) -> tuple[UOp, UOp] | None:
  """(a, b) where x is float(a) * float(b) and a, b are 16-bit of one dtype in dts. The product may be rounded to 16
  bits first (a 16-bit matmul's MUL; legalized: computed in float32, then rounded): tensor cores keep it exact."""
  if x.op is Ops.CAST and x.src[0].dtype in dts: x = x.src[0]
  if x.op is Ops.CAST and x.dtype in dts and x.src[0].dtype == dtypes.float32: x = x.src[0]
  if x.op is not Ops.MUL or len(x.src) != 2: return None
  a, b = (s.src[0] if s.op is Ops.CAST and s.src[0].dtype in dts else s for s in x.src)
  return (a, b) if a.dtype == b.dtype and a.dtype in dts else None

def _warp_block(b: int, target: Renderer) -> bool: return target.warp_size <= b <= target.max_threads and b % target.warp_size == 0

def _tensor_cores(sink: UOp, p: TCPlan, block: int, tc: TensorCores) -> UOp:
  """Lower the matmul `p` to a warp per tile of outputs (see the module's docstring). The other output loops (a batch),
  the tiles and the lanes become one thread index, lanes innermost so that a warp is one tile."""
  idt, (m, n, k), (dm, dn, dk) = p.rows.dtype, p.sizes, tc.dims
  first = 1 + max(u.arg for u in sink.toposort() if u.op is Ops.RANGE)
  tm, tn, lane, kk = (UOp(Ops.RANGE, idt, (UOp.const(idt, s),), first + i) for i, s in enumerate((-(-m // dm), -(-n // dn), tc.lanes, -(-k // dk))))
  def read(x: UOp, row_loop: UOp, row: UOp, size: int, kidx: UOp) -> UOp:
    """x at row `row` of `row_loop` and step `kidx` of the reduction: zero past either edge (read in bounds)."""
    (row, ok_row), (kidx, ok_k) = _edge(row, size), _edge(kidx, k)
    v = x.substitute({row_loop: row, **_unflatten(kidx, p.reduce.src[1:])})
    ok = ok_row if ok_k is None else ok_k if ok_row is None else ok_row & ok_k
    return v if ok is None else ok.where(v, UOp.const(x.dtype, 0))
  def at(tile: UOp, size: int, v: UOp) -> UOp: return tile * UOp.const(idt, size) + v
  n_a, n_b, n_c = tc.counts()
  frag = [read(p.a, p.rows, at(tm, dm, r), m, at(kk, dk, c)) for r, c in (tc.a(lane, i) for i in range(n_a))]
  frag += [read(p.b, p.cols, at(tn, dn, c), n, at(kk, dk, r)) for r, c in (tc.b(lane, i) for i in range(n_b))]
  stores = []
  for i in range(n_c):
    acc = UOp(Ops.REDUCE, dtypes.float32, (UOp(Ops.BARRIER, dtypes.float32, tuple(frag), ("mma", i)), kk), Ops.ADD)
    r, c = tc.c(lane, i)
    (row, ok_row), (col, ok_col) = _edge(at(tm, dm, r), m), _edge(at(tn, dn, c), n)
    for st in sink.src:
      st = st.substitute({p.reduce: acc, p.rows: row, p.cols: col})
      for ok in (ok_row, ok_col):
        if ok is not None: st = _gated(st, ok)
      stores.append(st)
  batch = [r for r in output_ranges(sink) if r is not p.rows and r is not p.cols]
  out = _split(UOp(Ops.SINK, sink.dtype, tuple(stores), sink.arg), batch + [tm, tn, lane], "gidx0", block)
  # a tile's rows past M in every lane (M < 9: rows 8 to 15) store nothing: drop those stores (lane 0's first stays)
  return out.replace(src=tuple(st for st in out.src if not (len(st.src) > 3 and st.src[3].op is Ops.CONST and not st.src[3].arg)))

def _edge(v: UOp, size: int) -> tuple[UOp, UOp | None]:
  """(v clamped to size - 1, v < size), for an index that may run past the end of its loop; (v, None) where the
  condition is provably true (symbolic simplification folds it: a size the tiles divide)."""
  ok = graph_rewrite(v < UOp.const(v.dtype, size), symbolic)
  if ok.op is Ops.CONST and ok.arg: return v, None
  return ok.where(v, UOp.const(v.dtype, size - 1)), ok
