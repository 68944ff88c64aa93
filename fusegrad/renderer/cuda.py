"""CUDA C, the C family's GPU dialect: a `__global__` kernel per program whose output loops codegen/gpu.py has
lowered to thread indices (SPECIAL; shared memory and barriers for block reductions), compiled by NVRTC with no headers. float16 and
bfloat16 are kept as their 16-bit words and converted with PTX instructions (half) or bit arithmetic (bfloat16), so
the arithmetic is float32's, as on the CPU."""
from __future__ import annotations
import dataclasses, struct
from fusegrad.dtype import DType, dtypes
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.symbolic import _terms
from fusegrad.renderer import ProgramSpec, launch_size
from fusegrad.renderer.cstyle import C_TYPES, CKernel, CStyleRenderer

# the target facts the GPU lowering reads; the PYTHON device takes the same ones to emulate a launch (DEV=PYTHON:CUDA)
# (every NVIDIA GPU since Volta: warps of 32, blocks of at most 1024 threads and 48 KiB of static shared memory)
GPU_FACTS = {"has_threads": True, "block_size": 128, "warp_size": 32, "max_threads": 1024, "shared_bytes": 48 * 1024,
             "simd_width": 0, "vector_registers": 0}

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
  def __init__(self, device: str, arch: str = "sm_80"):
    super().__init__(device, **GPU_FACTS)
    self.arch = arch

  def render_const(self, v, d: DType) -> str:
    if d == dtypes.float16: return f"((unsigned short){struct.unpack('<H', struct.pack('<e', v))[0]})"  # OverflowError: a bug
    return super().render_const(v, d)

  def render_cast(self, x: str, src: DType, dst: DType) -> str:
    # a half word goes through float32 both ways, as the C renderer's _Float16 conversions do
    if src == dtypes.float16: x, src = f"h2f({x})", dtypes.float32
    if dst == dtypes.float16: return f"f2h((float){x})"
    return super().render_cast(x, src, dst)

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str: return f"bitcast<{self.ctype(dst)}, {self.ctype(src)}>({x})"

  def prepare(self, k: CKernel) -> None:
    k.vec_loads, k.vec_names = vector_loads(k.uops), {}  # type: ignore[attr-defined]

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
    k.names[u] = k.names[u.src[0]]  # the shared memory, now holding every thread's stores
    k.emit("__syncthreads();")

  def render(self, uops: list[UOp]) -> ProgramSpec:
    grid, block = launch_size(uops, self.block_size)
    return dataclasses.replace(super().render(uops), global_size=grid, local_size=block)
