"""CUDA C, the C family's GPU dialect: a `__global__` kernel per program whose output loops codegen/gpu.py has
lowered to thread indices (SPECIAL; shared memory and barriers for block reductions), compiled by NVRTC with no headers. float16 and
bfloat16 are kept as their 16-bit words and converted with PTX instructions (half) or bit arithmetic (bfloat16, and fp8 bytes), so
the arithmetic is float32's, as on the CPU."""
from __future__ import annotations
import dataclasses, struct
from fusegrad.dtype import DType, dtypes
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.symbolic import _terms
from fusegrad.renderer import ProgramSpec, TensorCores, launch_size
from fusegrad.renderer.cstyle import C_TYPES, FP8_FORMATS, CKernel, CStyleRenderer

# Where a lane's values sit in the tiles of PTX mma.sync.aligned.m16n8k16 with 16-bit floats (PTX ISA, "Matrix Fragments
# for mma.m16n8k16 with floating point type"), from g = lane // 4 (groupID) and q = lane % 4 (threadID_in_group): 8
# values of A (four 32-bit registers of 2), 4 of B (two registers), 4 float32 of the result; (row, column) each.
def _gq(lane: UOp) -> tuple[UOp, UOp]: return lane // UOp.const(lane.dtype, 4), lane % UOp.const(lane.dtype, 4)
def _plus(x: UOp, c: int) -> UOp: return x + c if c else x
def _mma_a(lane: UOp, i: int) -> tuple[UOp, UOp]: return _plus((g := _gq(lane))[0], 8 * (i // 2 % 2)), _plus(g[1] * 2, i % 2 + 8 * (i // 4))
def _mma_b(lane: UOp, i: int) -> tuple[UOp, UOp]: return _plus((g := _gq(lane))[1] * 2, i % 2 + 8 * (i // 2)), g[0]
def _mma_c(lane: UOp, i: int) -> tuple[UOp, UOp]: return _plus((g := _gq(lane))[0], 8 * (i // 2)), _plus(g[1] * 2, i % 2)
MMA_M16N8K16 = TensorCores((16, 8, 16), 32, frozenset({dtypes.float16, dtypes.bfloat16}), _mma_a, _mma_b, _mma_c)
TENSOR_CORE_ARCH = 80  # the first compute capability with mma.sync.m16n8k16 for float16 and bfloat16 (Ampere)

# the target facts the GPU lowering reads; the PYTHON device takes the same ones to emulate a launch (DEV=PYTHON:CUDA)
# (every NVIDIA GPU since Volta: warps of 32, blocks of at most 1024 threads and 48 KiB of static shared memory; tensor
# cores as of sm_80, the default target)
GPU_FACTS = {"has_threads": True, "block_size": 128, "warp_size": 32, "max_threads": 1024, "shared_bytes": 48 * 1024,
             "simd_width": 0, "vector_registers": 0, "tensor_cores": MMA_M16N8K16}

PRELUDE = r"""#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
__device__ inline float h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ inline unsigned short f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ inline float bf16_to_f32(unsigned short x) { return __uint_as_float(((unsigned int)x) << 16); }
__device__ inline unsigned short f32_to_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if (f != f) return 0x7fc0;
  return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
template <class T, class F> __device__ inline T bitcast(F x) { T d; memcpy(&d, &x, sizeof(T)); return d; }
"""

VEC = 4  # float32 lanes of one float4 load: 16 bytes, the widest load of one thread

def vector_loads(uops: list[UOp]) -> dict[UOp, tuple[UOp, int]]:
  """Loads a thread can make as one float4: VEC ungated float32 loads of one buffer at index base + 0 .. VEC-1 where
  base is provably a multiple of VEC (every term of the index steps by a multiple of VEC: the strides check, and the
  constant is the lane). Each load -> (its group's lane-0 load, its lane). The buffer's own alignment is only known at
  launch (a BufferView may start anywhere; cuMemAlloc's are 256-byte aligned): the renderer checks it in the kernel."""
  groups: dict[tuple, dict[int, UOp]] = {}
  for u in uops:
    if u.op is not Ops.LOAD or len(u.src) != 2 or u.src[0].op is not Ops.DEFINE_GLOBAL or u.dtype != dtypes.float32: continue
    coef: dict = {}
    for n, c in _terms(u.src[1]): coef[n] = coef.get(n, 0) + c
    const = coef.pop(None, 0)
    if any(c % VEC for c in coef.values()): continue
    groups.setdefault((u.src[0], frozenset(coef.items()), const - const % VEC), {})[const % VEC] = u
  return {m: (g[0], lane) for g in groups.values() if len(g) == VEC for lane, m in g.items()}

# SPECIAL thread indices by their first letter: global (one thread per element), block, thread in the block
SPECIALS = {"g": "(long long)blockIdx.x * blockDim.x + threadIdx.x", "b": "blockIdx.x", "l": "threadIdx.x"}

class CUDARenderer(CStyleRenderer):
  types = {**C_TYPES, dtypes.bool: "bool", dtypes.float16: "unsigned short"}
  prelude = PRELUDE
  kernel_prefix = 'extern "C" __global__ void '
  pointer_qualifier = "__restrict__"
  fn_qualifier = "__device__ inline"  # the fp8 conversions (cstyle.py's fp8_source): the C code, as device functions
  def __init__(self, device: str, arch: str = "sm_80"):
    super().__init__(device, **GPU_FACTS)
    self.arch = arch
    if int(arch.removeprefix("sm_").rstrip("af")) < TENSOR_CORE_ARCH: self.tensor_cores = None

  def render_const(self, v, d: DType) -> str:
    if d == dtypes.float16: return f"((unsigned short){struct.unpack('<H', struct.pack('<e', v))[0]})"  # OverflowError: a bug
    return super().render_const(v, d)

  def render_cast(self, x: str, src: DType, dst: DType) -> str:
    # a half word goes through float32 both ways, as the C renderer's _Float16 conversions do; so does an fp8 byte
    if src in FP8_FORMATS: x, src = f"{FP8_FORMATS[src][0]}_to_f32({x})", dtypes.float32
    if src == dtypes.float16: x, src = f"h2f({x})", dtypes.float32
    if dst == dtypes.float16: return f"f2h((float){x})"
    return super().render_cast(x, src, dst)

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str: return f"bitcast<{self.ctype(dst)}, {self.ctype(src)}>({x})"

  def prepare(self, k: CKernel) -> None:
    k.vec_loads, k.vec_names, k.mma_names = vector_loads(k.uops), {}, {}  # type: ignore[attr-defined]

  def render_load(self, k: CKernel, u: UOp) -> bool:
    """A lane of a float4 load; the first lane the kernel reaches loads all four (a scalar load each where the buffer's
    address is not 16-byte aligned: the same branch in every thread)."""
    if u not in k.vec_loads: return False  # type: ignore[attr-defined]
    lead, lane = k.vec_loads[u]  # type: ignore[attr-defined]
    if lead not in k.vec_names:  # type: ignore[attr-defined]
      name = k.vec_names[lead] = k.new_name("vec")  # type: ignore[attr-defined]
      buf, base = k.r(u.src[0]), f"({k.r(u.src[1])}-{lane})"
      scalars = ", ".join(f"{buf}[{base}+{i}]" for i in range(VEC))
      k.emit(f"float4 {name} = (((unsigned long long){buf} & 15ull) == 0ull) ? *((const float4*)({buf}+{base})) : make_float4({scalars});")
    k.names[u] = f"{k.vec_names[lead]}.{'xyzw'[lane]}"  # type: ignore[attr-defined]
    return True

  def render_special(self, k: CKernel, u: UOp) -> None:
    k.names[u] = name = u.arg[0]
    k.emit(f"long long {name} = {SPECIALS[name[0]]};")
    if name[0] == "g": k.emit(f"if ({name} >= {u.arg[1]}ll) return;")  # the last block's spare threads
  def render_local(self, k: CKernel, u: UOp) -> None:
    k.names[u] = u.arg
    k.emit(f"__shared__ {self.ctype(u.dtype)} {u.arg}[{u.dtype.size}];")
  def render_barrier(self, k: CKernel, u: UOp) -> None:
    if isinstance(u.arg, tuple) and u.arg[0] == "shfl_xor":  # a warp's exchange: the value of lane ^ mask
      k.names[u] = k.new_name()
      k.emit(f"{self.ctype(u.dtype)} {k.names[u]} = __shfl_xor_sync(0xffffffffu, {k.r(u.src[0])}, {u.arg[1]});")
      return
    if isinstance(u.arg, tuple) and u.arg[0] == "mma":
      self.render_mma(k, u)
      return
    k.names[u] = k.names[u.src[0]]  # the shared memory, now holding every thread's stores
    k.emit("__syncthreads();")

  def render_mma(self, k: CKernel, u: UOp) -> None:
    """Value u.arg[1] of the lane's 4 results of a warp's mma.sync.m16n8k16 (the fragments of MMA_M16N8K16: 8 halves of
    A, 4 of B, as u's sources). The first of the 4 the kernel reaches issues the instruction for all of them; each 32-bit
    register holds two 16-bit values, the lower-numbered one in the low half. C is zero: the kernel's own float32
    accumulators add up the products of the steps of K."""
    if u.src not in k.mma_names:  # type: ignore[attr-defined]
      name = k.mma_names[u.src] = k.new_name("mma")  # type: ignore[attr-defined]
      regs = [f"(((unsigned int)({k.r(hi)}) << 16) | (unsigned int)({k.r(lo)}))" for lo, hi in zip(u.src[0::2], u.src[1::2])]
      kind = "bf16.bf16" if u.src[0].dtype == dtypes.bfloat16 else "f16.f16"
      outs, ins = ", ".join(f'"=f"({name}[{i}])' for i in range(4)), ", ".join(f'"r"({r})' for r in regs)
      k.emit(f"float {name}[4];")
      k.emit(f'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{kind}.f32 {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, '
             f'{{%10, %10, %10, %10}};" : {outs} : {ins}, "f"(0.0f));')
    k.names[u] = f"{k.mma_names[u.src]}[{u.arg[1]}]"  # type: ignore[attr-defined]

  def render(self, uops: list[UOp]) -> ProgramSpec:
    grid, block = launch_size(uops, self.block_size)
    return dataclasses.replace(super().render(uops), global_size=grid, local_size=block)
