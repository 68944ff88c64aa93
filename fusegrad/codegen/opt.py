"""Kernel optimizations on the scalar graph, before linearization.

The C compiler vectorizes an innermost loop that walks memory contiguously with independent iterations, but it
will not reorder a float sum. The vocabulary, each applied by name and checked for legality by `actions`:
  - Opt("VECTOR", t): the innermost output loop j (contiguous in some load) is split into tiles of t (t divides its
    size) and the tile is placed innermost, inside the reduce loops, with an accumulator array acc[t].
  - Opt("VECTOR", t, upcast=n): also n consecutive values of the next-outer output loop per iteration, each with its
    own accumulator array (register tiling: a load along j serves all n rows).
  - Opt("LANES", n): a contiguous reduce loop k becomes k = k_outer*n + lane with acc[lane] += body, then a short
    reduce over the n lanes (the sum is reordered, as every fast BLAS does).
  - Opt("NONE"): plain loops.
A REDUCE with an accumulator array has arg (op, j) and its last source is its private copy of j.
`choose` is the hand-written heuristic; BEAM search (codegen/search.py) times every legal action instead.
NOOPT=1 applies nothing."""
from __future__ import annotations
import itertools
from dataclasses import dataclass
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.symbolic import _terms

@dataclass(frozen=True)
class Opt:
  kind: str        # "NONE" | "VECTOR" | "LANES"
  arg: int = 0
  upcast: int = 1  # with VECTOR: also compute this many consecutive rows of the next-outer output loop per iteration

MAX_ACC = 32     # the heuristic's longest accumulator array: 4 rows x 32 floats stay in vector registers
LANES = 16
_ids = itertools.count(10_000)

def _new_range(like: UOp, size: int) -> UOp: return UOp(Ops.RANGE, like.dtype, (UOp.const(like.dtype, size),), next(_ids))

def _contiguous_in(body: UOp, r: UOp, loop: UOp | None = None) -> bool:
  """Does some load step by exactly 1 along r (and, if given, also move with `loop`, so it is main traffic and
  not a small side buffer such as a per-row mean)?"""
  return any(u.op is Ops.LOAD and any(n is r and c == 1 for n, c in _terms(u.src[1])) and (loop is None or loop in u.src[1].toposort())
             for u in body.toposort())

def output_ranges(sink: UOp) -> list[UOp]:
  """The loops over output elements (not closed by a reduce), outermost first."""
  order = sink.toposort()
  closed = {r for u in order if u.op is Ops.REDUCE for r in u.src[1:]}
  return sorted((u for u in order if u.op is Ops.RANGE and u not in closed), key=lambda r: r.arg)

def _divisors(n: int, lo: int, hi: int) -> list[int]: return [d for d in range(lo, min(n, hi) + 1) if n % d == 0]

def _analyze(sink: UOp) -> tuple[list[UOp], UOp | None, list[UOp]] | None:
  """(reduces, vectorizable output loop or None, reduces with a contiguous last loop); None if nothing applies."""
  reduces = [u for u in sink.toposort() if u.op is Ops.REDUCE]
  if not reduces or any(x.op is Ops.REDUCE for r in reduces for x in r.src[0].toposort()): return None
  out_ranges = output_ranges(sink)
  j = out_ranges[-1] if out_ranges else None
  if j is not None and not (all(j in r.src[0].toposort() for r in reduces) and any(_contiguous_in(r.src[0], j, r.src[-1]) for r in reduces)): j = None
  return reduces, j, [r for r in reduces if _contiguous_in(r.src[0], r.src[-1])]

def actions(sink: UOp) -> list[Opt]:
  """Every legal action for this kernel (the search space of BEAM)."""
  out = [Opt("NONE")]
  if (a := _analyze(sink)) is None: return out
  _, j, lane_reduces = a
  if j is not None:
    i = _upcast_range(sink, j)
    ups = [n for n in (1, 2, 4, 8) if n == 1 or (i is not None and i.src[0].arg % n == 0)]
    out += [Opt("VECTOR", t, n) for t in _divisors(j.src[0].arg, 4, 1024) for n in ups]
  sizes = [r.src[-1].src[0].arg for r in lane_reduces]
  out += [Opt("LANES", n) for n in (4, 8, 16, 32) if sizes and all(s % n == 0 for s in sizes)]
  return out + ([c] if (c := choose(sink)) not in out else [])

def choose(sink: UOp) -> Opt:
  """The default heuristic (measured on matmul and conv kernels): a contiguous output loop of 8 or more becomes the
  vector axis (tiles up to MAX_ACC); else a contiguous reduce gets 16 lanes (or all of a short one)."""
  if (a := _analyze(sink)) is None: return Opt("NONE")
  _, j, lane_reduces = a
  k = min((r.src[-1].src[0].arg for r in lane_reduces), default=0)
  if j is not None and (j.src[0].arg >= 8 or k < 8):
    t = max(_divisors(j.src[0].arg, 1, MAX_ACC))
    if t < 8 and t != j.src[0].arg: return Opt("NONE")
    # register tiling: several rows share each load of the vector axis (measured best: 4 rows x 32 columns)
    i = _upcast_range(sink, j)
    up = next((n for n in (4, 2) if i is not None and i.src[0].arg % n == 0), 1)
    return Opt("VECTOR", t, up)
  lanes = k if k <= 2 * LANES else max(_divisors(k, 1, LANES))
  return Opt("LANES", lanes) if lanes >= 8 and all(r.src[-1].src[0].arg % lanes == 0 for r in lane_reduces) else Opt("NONE")

def apply_opt(sink: UOp, opt: Opt) -> UOp:
  if opt.kind == "NONE" or (a := _analyze(sink)) is None: return sink
  reduces, j, lane_reduces = a
  if opt.kind == "VECTOR":
    if j is None or j.src[0].arg % opt.arg: raise ValueError(f"{opt} does not apply to this kernel")
    if opt.upcast > 1:
      if (i := _upcast_range(sink, j)) is None or i.src[0].arg % opt.upcast: raise ValueError(f"{opt} does not apply to this kernel")
      sink = _upcast(sink, i, opt.upcast)
    return _vector_output(sink, j, opt.arg)
  if opt.kind == "LANES":
    if not lane_reduces or any(r.src[-1].src[0].arg % opt.arg for r in lane_reduces): raise ValueError(f"{opt} does not apply to this kernel")
    return _split_lanes(sink, lane_reduces, opt.arg)
  raise ValueError(f"unknown optimization {opt}")

def _upcast_range(sink: UOp, j: UOp) -> UOp | None:
  """The output loop just outside j, if it has one (rows of a matmul, output channels of a conv)."""
  outs = [r for r in output_ranges(sink) if r is not j]
  return outs[-1] if outs else None

def _upcast(sink: UOp, i: UOp, n: int) -> UOp:
  """Register tiling: the kernel body is copied for n consecutive values of i; the copies' reduces run over the same
  loops (the linearizer merges them), so a value that does not depend on i is loaded once for all n rows."""
  io = UOp(Ops.RANGE, i.dtype, (UOp.const(i.dtype, i.src[0].arg // n),), i.arg)
  base = io * UOp.const(i.dtype, n)
  return UOp(Ops.SINK, sink.dtype, tuple(st.substitute({i: base + UOp.const(i.dtype, c)}) for c in range(n) for st in sink.src), sink.arg)

def _vector_output(sink: UOp, j: UOp, tile: int) -> UOp:
  size = j.src[0].arg
  if tile < size:
    # the outer loop keeps j's place in the nest (same arg); the tile is the innermost output loop
    jo, ji = UOp(Ops.RANGE, j.dtype, (UOp.const(j.dtype, size // tile),), j.arg), _new_range(j, tile)
    sink = sink.substitute({j: jo * UOp.const(j.dtype, tile) + ji})
    j = ji
  # each reduce loops over its own copy of j, shared only by reduces over the same loops (the linearizer merges those)
  jrs: dict[tuple, UOp] = {}
  mapping = {}
  for r in (u for u in sink.toposort() if u.op is Ops.REDUCE):
    jr = jrs.setdefault(r.src[1:], _new_range(j, j.src[0].arg))
    mapping[r] = UOp(Ops.REDUCE, r.dtype, (r.src[0].substitute({j: jr}), *r.src[1:], jr), (r.arg, j))
  return sink.substitute(mapping)

def _split_lanes(sink: UOp, reduces: list[UOp], lanes: int) -> UOp:
  mapping = {}
  for r in reduces:
    k = r.src[-1]
    size = k.src[0].arg
    lane, lane_red = _new_range(k, lanes), _new_range(k, lanes)
    outer = [_new_range(k, size // lanes)] if size > lanes else []
    body = r.src[0].substitute({k: outer[0] * UOp.const(k.dtype, lanes) + lane_red if outer else lane_red})
    partial = UOp(Ops.REDUCE, r.dtype, (body, *r.src[1:-1], *outer, lane_red), (r.arg, lane))
    mapping[r] = UOp(Ops.REDUCE, r.dtype, (partial, lane), r.arg)
  return sink.substitute(mapping)
