"""Kernel optimizations on the scalar graph, before linearization. NOOPT=1 turns them off.

The C compiler vectorizes an innermost loop that walks memory contiguously with independent iterations, but it
will not reorder a float sum. So a reduce gets an accumulator *array* indexed by a contiguous loop placed
innermost, inside the reduce loops:
  - `vector_output`: the innermost output loop j is contiguous in some load: acc[j] += body(j) for each reduce step.
  - `split_lanes`: the reduce loop k itself is contiguous: k = k_outer*L + lane, acc[lane] += body, then a short
    reduce over the lanes.
A REDUCE of this kind has arg (op, j) and its last source is its private copy of j (the lane/array index)."""
from __future__ import annotations
import itertools
from fusegrad.helpers import NOOPT
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.symbolic import _terms

MAX_ACC = 256    # accumulator array length (floats on the stack)
LANES = 16
_ids = itertools.count(10_000)

def _new_range(like: UOp, size: int) -> UOp: return UOp(Ops.RANGE, like.dtype, (UOp.const(like.dtype, size),), next(_ids))

def _contiguous_in(body: UOp, r: UOp) -> bool:
  """Does some load (or the body's index math) step by exactly 1 along r?"""
  for u in body.toposort():
    if u.op is Ops.LOAD and any(n is r and c == 1 for n, c in _terms(u.src[1])): return True
  return False

def _lanes(size: int) -> int:
  """Accumulator lanes for a contiguous reduce of `size`: the whole loop when short, else a divisor up to LANES."""
  return size if size <= 2 * LANES else _largest_divisor(size, LANES)

def _largest_divisor(n: int, cap: int) -> int: return max(d for d in range(1, min(n, cap) + 1) if n % d == 0)

def optimize(sink: UOp) -> UOp:
  if NOOPT: return sink
  reduces = [u for u in sink.toposort() if u.op is Ops.REDUCE]
  if not reduces or any(r.src[0].op is Ops.REDUCE or any(x.op is Ops.REDUCE for x in r.src[0].toposort()) for r in reduces): return sink
  out_ranges = sorted({u for u in sink.toposort() if u.op is Ops.RANGE} - {r for u in reduces for r in u.src[1:]}, key=lambda r: r.arg)
  j = out_ranges[-1] if out_ranges else None
  if j is not None and all(j in r.src[0].toposort() for r in reduces) and any(_contiguous_in(r.src[0], j) for r in reduces) and \
     (j.src[0].arg >= 8 or not any(_contiguous_in(r.src[0], r.src[-1]) and r.src[-1].src[0].arg >= 8 for r in reduces)):
    return _vector_output(sink, j, reduces)
  return _split_lanes(sink, reduces)

def _vector_output(sink: UOp, j: UOp, reduces: list[UOp]) -> UOp:
  size = j.src[0].arg
  if size > MAX_ACC:
    t = _largest_divisor(size, MAX_ACC)
    if t < 8: return sink
    jo, ji = _new_range(j, size // t), _new_range(j, t)
    # renumber so the new outer loop keeps j's place in the nest and the inner one is the innermost output loop
    jo = UOp(Ops.RANGE, j.dtype, jo.src, j.arg)
    sink = sink.substitute({j: jo * UOp.const(j.dtype, t) + ji})
    reduces = [u for u in sink.toposort() if u.op is Ops.REDUCE]
    j = ji
  mapping = {}
  for r in reduces:
    jr = _new_range(j, j.src[0].arg)
    mapping[r] = UOp(Ops.REDUCE, r.dtype, (r.src[0].substitute({j: jr}), *r.src[1:], jr), (r.arg, j))
  return sink.substitute(mapping)

def _split_lanes(sink: UOp, reduces: list[UOp]) -> UOp:
  mapping = {}
  for r in reduces:
    k = r.src[-1]
    size = k.src[0].arg
    lanes = _lanes(size)
    if lanes < 8 or not _contiguous_in(r.src[0], k): continue
    ko, lane, lane_red = _new_range(k, size // lanes), _new_range(k, lanes), _new_range(k, lanes)
    body = r.src[0].substitute({k: (ko * UOp.const(k.dtype, lanes) + lane_red) if size > lanes else lane_red})
    if size == lanes: ko = None
    partial = UOp(Ops.REDUCE, r.dtype, (body, *r.src[1:-1], *([ko] if ko is not None else []), lane_red), (r.arg, lane))
    mapping[r] = UOp(Ops.REDUCE, r.dtype, (partial, lane), r.arg)
  return sink.substitute(mapping) if mapping else sink
