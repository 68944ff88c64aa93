"""Renderers turn a linear UOp list into a program for one kind of target, and say what that target is: the kernel
optimizer and BEAM read these facts (vector width, registers, threads, math functions) from `Device[d].renderer`,
never from a device name or a constant."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Callable
from fusegrad.dtype import ALL_DTYPES, DType
from fusegrad.uop.ops import GroupOp, Ops, UOp

@dataclass
class ProgramSpec:
  """Everything a runtime needs to launch one kernel, plus what DEBUG and GlobalCounters report."""
  name: str
  src: str
  uops: list[UOp]
  globals: list[tuple[int, bool]]  # (buffer index, is written)
  vars: list[UOp] = field(default_factory=list)
  flops: int = 0
  mem_bytes: int = 0
  shape: tuple[int, ...] = ()
  parallel: bool = False  # the kernel takes (core_id, n_cores) and splits its outer loop
  global_size: tuple[int, int, int] | None = None  # a GPU launch: blocks in the grid (x, y, z)
  local_size: tuple[int, int, int] | None = None   # and threads in a block

def kernel_name(uops: list[UOp]) -> tuple[str, tuple[int, ...]]:
  sizes = tuple(u.arg[1] if u.op is Ops.SPECIAL else u.src[0].arg for u in uops if u.op in (Ops.RANGE, Ops.SPECIAL))
  reduce = any(u.op is Ops.DEFINE_ACC for u in uops)
  return ("r" if reduce else "E") + "_" + ("_".join(str(s) for s in sizes) or "1"), sizes

def estimate(uops: list[UOp]) -> tuple[int, int]:
  """(FLOPs, bytes moved): ALU ops and memory accesses weighted by the trip count of their loops."""
  flops = mem = 0
  trips = [1]
  for u in uops:
    if u.op is Ops.RANGE: trips.append(trips[-1] * u.src[0].arg)
    elif u.op is Ops.ENDRANGE: trips.pop()
    elif u.op in GroupOp.ALU or u.op is Ops.ACC_UPDATE: flops += trips[-1]
  for u in uops:
    if u.op is Ops.DEFINE_GLOBAL: mem += max(u.dtype.size, 0) * u.dtype.itemsize
  return flops, mem

def launch_size(uops: list[UOp], block: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
  """(grid, block) of a GPU launch for linear UOps (codegen/gpu.py): one block per `bidx0` with `lidx0` threads each, or
  enough blocks of `block` threads (the kernel's own block size where its `gidx0` names one; one smaller block for a
  small kernel) to cover the global index `gidx0`; a kernel with neither runs on one thread."""
  specials = {u.arg[0]: u.arg for u in uops if u.op is Ops.SPECIAL}
  count = {k: a[1] for k, a in specials.items()}
  if "lidx0" in count: return (count.get("bidx0", 1), 1, 1), (count["lidx0"], 1, 1)
  total = count.get("gidx0", 1)
  if "gidx0" in specials and len(specials["gidx0"]) > 2: block = specials["gidx0"][2]
  local = max(1, min(block, total))
  return ((total + local - 1) // local, 1, 1), (local, 1, 1)

@dataclass(frozen=True)
class TensorCores:
  """A warp-wide matrix multiply the target has: (m x k of A) @ (k x n of B) into float32, A and B both of one of
  `dtypes`. Each lane holds m*k/lanes values of A, k*n/lanes of B and m*n/lanes of the result; a(lane, i), b(lane, i)
  and c(lane, i) give the (row, column) in its tile of the lane's i-th one (lane: an index UOp; so are the results)."""
  dims: tuple[int, int, int]  # m, n, k
  lanes: int
  dtypes: frozenset[DType]
  a: Callable[[UOp, int], tuple[UOp, UOp]]
  b: Callable[[UOp, int], tuple[UOp, UOp]]
  c: Callable[[UOp, int], tuple[UOp, UOp]]
  def counts(self) -> tuple[int, int, int]:
    """Values of A, B and the result a lane holds."""
    m, n, k = self.dims
    return m * k // self.lanes, k * n // self.lanes, m * n // self.lanes

class Renderer:
  """A target's facts and its code generator. The defaults describe a scalar target with no SIMD, threads or shared
  memory that renders every dtype (the C and Python renderers emulate half, bfloat16 and fp8)."""
  simd_width: int = 0          # float32 lanes of the widest vector register (0: no vector types)
  vector_registers: int = 0    # how many such registers: the accumulator budget of register tiling
  has_threads: bool = False    # many hardware threads run one kernel together (GPU blocks)
  has_shared: bool = False     # memory shared by those threads
  block_size: int = 0          # threads per block of a GPU launch (has_threads), unless the kernel's optimization says
  warp_size: int = 0           # threads that run in lockstep and exchange registers (shuffles, tensor-core fragments)
  max_threads: int = 0         # most threads one block may have
  shared_bytes: int = 0        # shared memory one block may declare statically
  tensor_cores: TensorCores | None = None  # a warp's matrix multiply instruction (codegen/gpu.py's Opt("TC"))
  vector_math: frozenset[Ops] = frozenset()  # ops the target computes a whole vector of at once (exp, log, ...)
  half_loads: bool = False     # a vector of float16 converts to float32 in one instruction (x86 F16C, AVX-512, NEON)
  compile_flags: tuple[str, ...] = ()
  def __init__(self, device: str, **facts):
    """facts: class-level facts this instance overrides (a NULL device's AVX-512 CPU, the PYTHON device's GPU)."""
    self.device = device
    for k, v in facts.items(): setattr(self, k, v)
  def supported_dtypes(self) -> set[DType]: return set(ALL_DTYPES)
  def render(self, uops: list[UOp]) -> ProgramSpec: raise NotImplementedError(f"{type(self).__name__} cannot render kernels")
  def __repr__(self) -> str: return f"<{type(self).__name__} {self.device}>"
