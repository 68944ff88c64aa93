"""CUDA C, the C family's GPU dialect: a `__global__` kernel per program whose output loops codegen/gpu.py has
lowered to thread indices (SPECIAL; shared memory and barriers for block reductions), compiled by NVRTC with no headers. float16 and
bfloat16 are kept as their 16-bit words and converted with PTX instructions (half) or bit arithmetic (bfloat16), so
the arithmetic is float32's, as on the CPU."""
from __future__ import annotations
import dataclasses, struct
from fusegrad.dtype import DType, dtypes
from fusegrad.uop.ops import UOp
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
