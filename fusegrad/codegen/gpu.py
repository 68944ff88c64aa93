"""GPU lowering: a kernel's output loops become hardware thread indices (UOp SPECIAL). The renderer turns them into
blockIdx/threadIdx math and a launch size; the PYTHON device interprets the same UOps once per thread of the launch
(runtime/ops_python.py), barriers included.

Two shapes of kernel:
  - one thread per output element (`gidx0`, the global thread index): the loops' indices are recovered from it by
    div/mod and the thread runs the kernel's reduce loops itself;
  - one block per output element when there are few outputs and long reductions (a sum of a whole tensor, a row
    softmax): block `bidx0` computes element bidx0, each of its `lidx0` threads reduces a strided share of every
    reduction, the partials meet in shared memory (DEFINE_LOCAL) after a barrier (BARRIER), and every thread combines
    them in the same order, so all of them hold the same result; thread 0 stores it."""
from __future__ import annotations
from fusegrad.dtype import dtypes
from fusegrad.helpers import prod
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.pattern import graph_rewrite
from fusegrad.uop.symbolic import symbolic
from fusegrad.codegen.lowerer import reduce_identity
from fusegrad.codegen.opt import nested_reduce, output_ranges

# a kernel gets block reductions when it has at most this many outputs and a reduction at least this long
GROUP_MAX_OUTPUTS, GROUP_MIN_REDUCE = 1024, 256

def to_threads(sink: UOp, block: int) -> UOp:
  """Replace the output loops of `sink` with thread indices, with block reductions where they pay."""
  loops, reduces = output_ranges(sink), [u for u in sink.toposort() if u.op is Ops.REDUCE]
  n_out = prod(r.src[0].arg for r in loops)
  # block reductions need every barrier outside loops: no reduce may run inside another's loop
  if reduces and n_out <= GROUP_MAX_OUTPUTS and max(_size(u) for u in reduces) >= GROUP_MIN_REDUCE and not nested_reduce(reduces):
    sink = _group_reduces(sink, reduces, block)
    return _split(sink, loops, "bidx0")
  return _split(sink, loops, "gidx0")

def _size(reduce: UOp) -> int: return prod(r.src[0].arg for r in reduce.src[1:])

def _unflatten(flat: UOp, loops: tuple[UOp, ...] | list[UOp]) -> dict[UOp, UOp]:
  """Each loop's index from one flat index over them (outermost first): (flat // the inner loops' sizes) % its size."""
  out = {}
  for i, r in enumerate(loops):
    stride = prod(x.src[0].arg for x in loops[i + 1:])
    v = flat // UOp.const(flat.dtype, stride) if stride > 1 else flat
    out[r] = v % UOp.const(flat.dtype, r.src[0].arg) if i > 0 else v
  return out

def _split(sink: UOp, loops: list[UOp], name: str) -> UOp:
  """The output loops become one SPECIAL index `name` over all of their elements."""
  if not loops: return graph_rewrite(sink, symbolic)  # a single output element: one thread (or one block)
  idx = UOp(Ops.SPECIAL, loops[0].dtype, (), (name, prod(r.src[0].arg for r in loops)))
  return graph_rewrite(sink.substitute(_unflatten(idx, loops)), symbolic)

def _group_reduces(sink: UOp, reduces: list[UOp], block: int) -> UOp:
  """Each reduce over R elements: thread t reduces elements t, t+block, ... (a loop of ceil(R/block)), stores its
  partial to shared memory, and after a barrier every thread reduces the `block` partials."""
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
    smem = UOp(Ops.DEFINE_LOCAL, u.dtype.ptr(block), (), f"smem{k}")
    synced = UOp(Ops.BARRIER, u.dtype.ptr(block), (smem, UOp(Ops.STORE, dtypes.void, (smem, lid, partial))))
    j = UOp(Ops.RANGE, idt, (UOp.const(idt, block),), next_range + 2 * k + 1)
    sub[u] = UOp(Ops.REDUCE, u.dtype, (UOp(Ops.LOAD, u.dtype, (synced, j)), j), u.arg)
  # every thread holds the result; thread 0 stores it (a gated STORE)
  first = UOp(Ops.CMPEQ, dtypes.bool, (lid, UOp.const(idt, 0)))
  sink = sink.substitute(sub)
  return sink.replace(src=tuple(st.replace(src=st.src + (first,)) for st in sink.src))
