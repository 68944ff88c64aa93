"""GPU lowering (codegen/gpu.py) and the CUDA renderer's text, without a compiler or a GPU."""
import pytest
from fusegrad import Tensor, dtypes
from fusegrad.codegen.linearize import linearize
from fusegrad.codegen.lowerer import lower_kernel
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
  for text in ("long long bidx0 = blockIdx.x;", "long long lidx0 = threadIdx.x;", "__shared__ float smem0[128];", "__syncthreads();"):
    assert text in spec.src
  assert spec.src.index("smem0[lidx0] =") < spec.src.index("__syncthreads();")  # every partial is stored before the barrier

def test_half_is_a_16_bit_word():
  r = CUDARenderer("CUDA")
  assert r.render_const(1.0, dtypes.float16) == "((unsigned short)15360)"
  src = r.render(uops_of((Tensor.empty(4, device="PYTHON", dtype=dtypes.float16) + 1), r)).src
  assert "h2f(" in src and "f2h(" in src and "_Float16" not in src

def test_cpu_renderer_has_no_thread_index():
  with pytest.raises(NotImplementedError, match="no thread indices"):
    ClangRenderer("CPU").render(uops_of(Tensor.empty(4, device="PYTHON") + 1, CUDARenderer("CUDA")))
