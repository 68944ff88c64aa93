"""GPU lowering: a kernel's output loops become one hardware thread index. Thread `gidx0` computes output element
gidx0 (the loops' flat index, split back into one index per loop by div/mod), and runs the kernel's reduce loops
itself; threads at or past the element count do nothing. The renderer turns SPECIAL into blockIdx/threadIdx math and
the launch size; the PYTHON device interprets the same UOps once per thread of the grid (renderer/python.py)."""
from __future__ import annotations
from fusegrad.helpers import prod
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.pattern import graph_rewrite
from fusegrad.uop.symbolic import symbolic
from fusegrad.codegen.opt import output_ranges

def to_threads(sink: UOp) -> UOp:
  """Replace the output loops of `sink` with index math over one SPECIAL thread index."""
  loops = output_ranges(sink)
  if not loops: return sink  # a single output element: one thread
  idt = loops[0].dtype
  total = prod(r.src[0].arg for r in loops)
  gid = UOp(Ops.SPECIAL, idt, (), ("gidx0", total))
  sub = {}
  for i, r in enumerate(loops):  # outermost first: loop i is (gid // product of the inner sizes) % its own size
    n, stride = r.src[0].arg, prod(x.src[0].arg for x in loops[i + 1:])
    v = gid // UOp.const(idt, stride) if stride > 1 else gid
    sub[r] = v % UOp.const(idt, n) if i > 0 else v
  return graph_rewrite(sink.substitute(sub), symbolic)
