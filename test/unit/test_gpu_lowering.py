"""GPU lowering (codegen/gpu.py) and the CUDA renderer's text, without a compiler or a GPU."""
import pytest
from fusegrad import Tensor, dtypes
from fusegrad.codegen.linearize import linearize
from fusegrad.codegen.lowerer import lower_kernel
from fusegrad.codegen.opt import Opt
from fusegrad.renderer.cstyle import ClangRenderer
from fusegrad.renderer.cuda import CUDARenderer
from fusegrad.schedule import create_schedule
from fusegrad.uop.ops import Ops

def uops_of(t: Tensor, renderer):
  items, _ = create_schedule([t.uop])
  return linearize(lower_kernel(items[-1].ast), renderer)

def test_output_loops_become_one_thread_index():
  uops = uops_of(Tensor.empty(3, 97, device="PYTHON") * 2, CUDARenderer("CUDA"))
  assert [u.arg for u in uops if u.op is Ops.SPECIAL] == [("gidx0", 291, 128)]
  assert not any(u.op is Ops.RANGE for u in uops)

def test_reduce_loop_stays_a_loop():
  uops = uops_of(Tensor.empty(5, 7, device="PYTHON").sum(1), CUDARenderer("CUDA"))
  assert [u.arg for u in uops if u.op is Ops.SPECIAL] == [("gidx0", 5, 128)]
  assert [u.src[0].arg for u in uops if u.op is Ops.RANGE] == [7]

def test_cuda_source_and_launch():
  spec = CUDARenderer("CUDA").render(uops_of(Tensor.empty(3, 97, device="PYTHON") * 2, CUDARenderer("CUDA")))
  assert 'extern "C" __global__ void E_291(' in spec.src and "blockIdx.x * blockDim.x + threadIdx.x" in spec.src
  assert "if (gidx0 >= 291ll) return;" in spec.src
  assert (spec.global_size, spec.local_size) == ((3, 1, 1), (128, 1, 1))

def test_small_and_scalar_launches():
  r = CUDARenderer("CUDA")
  assert r.render(uops_of(Tensor.empty(5, device="PYTHON") + 1, r)).local_size == (5, 1, 1)
  spec = r.render(uops_of(Tensor.empty(5, device="PYTHON").sum(), r))
  assert (spec.global_size, spec.local_size) == ((1, 1, 1), (1, 1, 1)) and "gidx0" not in spec.src

def test_long_reduce_is_a_block_reduce():
  r = CUDARenderer("CUDA")
  spec = r.render(uops_of(Tensor.empty(3, 1000, device="PYTHON").sum(1), r))
  assert (spec.global_size, spec.local_size) == ((3, 1, 1), (128, 1, 1))
  for text in ("long long bidx0 = blockIdx.x;", "long long lidx0 = threadIdx.x;", "__shared__ float smem0[4];", "__syncthreads();"):
    assert text in spec.src
  # a warp's partials meet by a butterfly of shuffles, then lane 0 of each of the 4 warps stores its total before the barrier
  assert [spec.src.count(f"__shfl_xor_sync(0xffffffffu, {x}, {m});") for x, m in [("acc2", 16), ("v11", 8), ("v17", 1)]] == [1, 1, 1]
  assert spec.src.count("__shfl_xor_sync") == 5
  assert spec.src.index("__shfl_xor_sync") < spec.src.index("smem0[v0] =") < spec.src.index("__syncthreads();")

def test_one_warp_block_reduce_needs_no_shared_memory():
  r = CUDARenderer("CUDA")
  spec = r.render(linearize(lower_kernel(create_schedule([Tensor.empty(3, 1000, device="PYTHON").sum(1).uop])[0][-1].ast), r, Opt("GROUP", 32)))
  assert spec.local_size == (32, 1, 1) and spec.src.count("__shfl_xor_sync") == 5
  assert "__shared__" not in spec.src and "__syncthreads" not in spec.src

def test_half_is_a_16_bit_word():
  r = CUDARenderer("CUDA")
  assert r.render_const(1.0, dtypes.float16) == "((unsigned short)15360)"
  src = r.render(uops_of((Tensor.empty(4, device="PYTHON", dtype=dtypes.float16) + 1), r)).src
  assert "h2f(" in src and "f2h(" in src and "_Float16" not in src

def test_cpu_renderer_has_no_thread_index():
  with pytest.raises(NotImplementedError, match="no thread indices"):
    ClangRenderer("CPU").render(uops_of(Tensor.empty(4, device="PYTHON") + 1, CUDARenderer("CUDA")))

def test_warp_shuffle_exchanges_within_a_warp():
  # 64 threads, two warps: thread i gets the value of lane (i % 32) ^ mask of its own warp
  from fusegrad.runtime.ops_python import shuffle
  got = shuffle({i: (i * 10, 5) for i in range(64)}, 32)
  assert [got[i] for i in (0, 5, 31, 32, 37, 63)] == [50, 0, 260, 370, 320, 580]
  with pytest.raises(RuntimeError, match="not running"): shuffle({i: (i, 1) for i in range(31)}, 32)
  with pytest.raises(RuntimeError, match="barrier, others at a shuffle"): shuffle({0: (1, 1), 1: None}, 32)

def test_emulation_rejects_a_misaligned_vector_load():
  # the PYTHON device checks each float4 load's index at run time (a thread's first lane must be a multiple of 4)
  from fusegrad.renderer.python import run_thread
  uops = uops_of(Tensor.empty(2, 8, device="PYTHON") * 2, CUDARenderer("CUDA"))
  load = next(u for u in uops if u.op is Ops.LOAD)
  mems = [[0.0] * 16, [1.0] * 16]
  list(run_thread(uops, mems, [], {"gidx0": 4}, {}, {load: 4}))
  assert mems[0][4] == 2.0
  with pytest.raises(RuntimeError, match="vector load at index 3, not a multiple of 4"): list(run_thread(uops, mems, [], {"gidx0": 3}, {}, {load: 4}))
