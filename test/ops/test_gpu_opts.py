"""The GPU's optimization actions (codegen/gpu.py: launch sizes, register tiles, block reductions), without a GPU:
every legal action of a kernel gives the default's result under the PYTHON:CUDA emulation on odd shapes, the
heuristic picks from the target's facts, and the CUDA C of every action compiles with NVRTC and ptxas (sm_80, sm_90)."""
import os
import numpy as np
import pytest
import torch
from fusegrad import Device, Tensor
from fusegrad.codegen import gpu, program
from fusegrad.codegen.linearize import linearize
from fusegrad.codegen.lowerer import lower_kernel
from fusegrad.codegen.opt import Opt
from fusegrad.codegen.search import lower_and_simplify
from fusegrad.renderer.cuda import CUDARenderer
from fusegrad.runtime import ops_cuda
from fusegrad.runtime.ops_python import PythonDevice
from fusegrad.schedule import create_schedule
from .helpers import helper_test_op

@pytest.fixture(autouse=True)
def emulated_gpu(monkeypatch):
  monkeypatch.setitem(Device._opened, "PYTHON", PythonDevice("PYTHON", gpu=True))
  monkeypatch.setattr(program, "_programs", {})

def _rand(*shape, seed=0): return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), device="PYTHON").realize()

# small kernels of odd sizes: a tile or block size never divides them
KERNELS = {
  "matmul": lambda: _rand(5, 7) @ _rand(7, 6, seed=1),
  "matmul_bias_relu": lambda: (_rand(9, 17) @ _rand(17, 8, seed=1) + _rand(8, seed=2)).relu(),
  "batched_matmul": lambda: _rand(2, 3, 18) @ _rand(2, 18, 5, seed=1),
  "conv": lambda: _rand(1, 2, 4, 5).conv2d(_rand(3, 2, 3, 3, seed=1), padding=1),
  "rows_sum": lambda: _rand(3, 300).sum(1),
  "softmax": lambda: _rand(2, 33).softmax(-1),
  "elementwise": lambda: _rand(3, 13) * 2 + 1,
  "elementwise_vec": lambda: _rand(4, 16) * 2 + _rand(16, seed=1) + _rand(4, 20, seed=2)[:, 1:17],  # one slice that cannot
  "one_output": lambda: _rand(70).sum(),
}

def _last_kernel(t: Tensor):
  items, _ = create_schedule([t.uop])
  for si in items[:-1]:
    for b in si.bufs: b.ensure_allocated()
    program.get_program(si.device, si.ast)([b._mem for b in si.bufs], [])
  return items[-1]

def _run(si, opt) -> np.ndarray:
  mems = [b.ensure_allocated()._mem for b in si.bufs]
  program.get_program(si.device, si.ast, opt)(mems, [])
  return np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32).copy()

@pytest.mark.parametrize("name", list(KERNELS))
def test_every_gpu_action_matches_the_default(name, monkeypatch):
  target = Device["PYTHON"].renderer
  monkeypatch.setattr(target, "max_threads", 64)  # blocks of 32 and 64 threads: the emulation runs each thread in Python
  si = _last_kernel(KERNELS[name]())
  want = _run(si, None)
  acts = gpu.actions(lower_and_simplify(si.ast, gpu_target=True), target)
  assert len(acts) >= 2 and all(a.kind in ("THREADS", "GROUP") for a in acts)
  for opt in acts:
    np.testing.assert_allclose(_run(si, opt), want, rtol=1e-5, atol=1e-5, err_msg=str(opt))

def _kernel(t: Tensor):
  items, _ = create_schedule([t.uop])
  return lower_and_simplify(items[-1].ast, gpu_target=True)

def test_heuristic_picks_from_the_targets_facts():
  r = CUDARenderer("CUDA")
  assert gpu.choose(_kernel(Tensor.empty(256, 256, device="PYTHON") @ Tensor.empty(256, 256, device="PYTHON")), r) == Opt("THREADS", 128, 4, upcast2=4)
  # too few outputs for 4 x 4 tiles to fill the GPU: one thread an output
  assert gpu.choose(_kernel(Tensor.empty(16, 64, device="PYTHON") @ Tensor.empty(64, 16, device="PYTHON")), r) == Opt("THREADS", 128)
  assert gpu.choose(_kernel(Tensor.empty(3, 1000, device="PYTHON").sum(1)), r) == Opt("GROUP", 128)   # ~4 elements a thread
  assert gpu.choose(_kernel(Tensor.empty(5000, device="PYTHON").sum()), r) == Opt("GROUP", 1024)   # at most max_threads
  assert gpu.choose(_kernel(Tensor.empty(2, 300, device="PYTHON").sum(1)), r) == Opt("GROUP", 64)
  assert gpu.choose(_kernel(Tensor.empty(300, 5, device="PYTHON").sum(1)), r) == Opt("THREADS", 128)
  r.max_threads = 256
  assert gpu.choose(_kernel(Tensor.empty(5000, device="PYTHON").sum()), r) == Opt("GROUP", 256)
  assert max(a.arg for a in gpu.actions(_kernel(Tensor.empty(5000, device="PYTHON").sum()), r)) == 256

def test_block_size_reaches_the_launch():
  r = CUDARenderer("CUDA")
  items, _ = create_schedule([(Tensor.empty(1000, device="PYTHON") * 2).uop])
  for b in (32, 256, 1024):
    spec = r.render(linearize(lower_kernel(items[-1].ast), r, Opt("THREADS", b)))
    assert spec.local_size == (min(b, 1000), 1, 1) and spec.global_size == (-(-1000 // b), 1, 1)  # one smaller block at most

def test_illegal_actions_raise():
  si = _last_kernel(KERNELS["elementwise"]())
  with pytest.raises(ValueError): _run(si, Opt("THREADS", 128, 4))   # no reduction: no rows share a load
  with pytest.raises(ValueError): _run(si, Opt("GROUP", 128))        # nothing to reduce
  with pytest.raises(ValueError): _run(si, Opt("THREADS", 2048))     # past max_threads

@pytest.fixture
def small_tiles(monkeypatch):
  """The heuristic tiles these small shapes as it would large ones."""
  monkeypatch.setattr(gpu, "TILE_MIN_BLOCKS", 0)

TILED = {  # forward and backward through register tiles, odd sizes
  "matmul": ([(9, 19), (19, 10)], lambda a, b: a @ b, {}),
  "matmul_vec_cols": ([(6, 16), (16, 8)], lambda a, b: a @ b, {}),
  "conv2d": ([(2, 3, 6, 7), (6, 3, 3, 3)], lambda x, w: torch.nn.functional.conv2d(x, w, padding=1), dict(fusegrad_fxn=lambda x, w: x.conv2d(w, padding=1))),
}

@pytest.mark.parametrize("name", list(TILED))
def test_register_tiles_forward_backward(name, small_tiles):
  shapes, fn, kw = TILED[name]
  helper_test_op(shapes, fn, device="PYTHON", atol=1e-4, rtol=1e-4, **kw)

VECTOR = {  # 4 consecutive outputs a thread: float4 loads where the index lines up (the emulation checks each one)
  "aligned": ([(3, 16), (16,)], lambda x, y: x * 2 + y, True),
  "shifted_pairs": ([(2, 20)], lambda x: x[:, :16] + x[:, 1:17] * x[:, 4:20], True),
  "odd_columns": ([(3, 13)], lambda x: x.exp(), False),
  "size_one": ([(1, 4)], lambda x: x + 1, True),
}

@pytest.mark.parametrize("name", list(VECTOR))
def test_vector_columns_forward_backward(name, small_tiles):
  shapes, fn, vectors = VECTOR[name]
  helper_test_op(shapes, fn, device="PYTHON", atol=1e-5, rtol=1e-5)
  # the emulation checked every float4 load of these kernels for alignment, thread by thread
  assert any(p.aligned for p in program._programs.values()) == vectors

def test_vector_loads_need_a_provable_multiple_of_4():
  r = CUDARenderer("CUDA")
  def src(t: Tensor, opt=Opt("THREADS", 128, upcast2=4)) -> str:
    items, _ = create_schedule([t.uop])
    return r.render(linearize(lower_kernel(items[-1].ast), r, opt)).src
  x = Tensor.empty(3, 20, device="PYTHON")
  assert src(x[:, :16] * 2).count("float4 ") == 1 and "& 15ull) == 0ull)" in src(x[:, :16] * 2)  # row stride 20: a multiple of 4
  assert "float4" not in src(x.T[1:17].T * 2)   # starts at 1: never a multiple of 4
  # read as a window (a pointer to element 1, kernel.Window), the start is the pointer's: checked when the kernel runs
  assert "((unsigned long long)data1 & 15ull) == 0ull)" in src(x[:, 1:17] * 2)
  assert "float4" not in src(Tensor.empty(3, 13, device="PYTHON") * 2)  # the row stride 13 is not
  assert "float4" not in src(x * 2, Opt("THREADS", 128, upcast2=2))  # two lanes: scalar
  # a matmul's 4 x 4 tile: one float4 of the right matrix a step of the reduction, the left one's column is strided
  mm = src(Tensor.empty(64, 32, device="PYTHON") @ Tensor.empty(32, 64, device="PYTHON"), Opt("THREADS", 128, 4, upcast2=4))
  assert mm.count("float4 ") == 1 and "(const float4*)(data2+" in mm

def test_tile_shares_loads():
  # a 4 x 4 tile of a matmul reads 4 values of each matrix per step of the reduction, not 16 pairs
  r = CUDARenderer("CUDA")
  items, _ = create_schedule([(Tensor.empty(64, 32, device="PYTHON") @ Tensor.empty(32, 64, device="PYTHON")).uop])
  uops = linearize(lower_kernel(items[-1].ast), r, Opt("THREADS", 128, 4, upcast2=4))
  assert sum(u.op.name == "LOAD" for u in uops) == 8 and sum(u.op.name == "STORE" for u in uops) == 16

# ---------------- every action's CUDA C compiles

def cuda_tools():
  """NVRTC and ptxas, or a skip where they are missing (CUDA_COMPILE_CHECK=1, as in CI, makes that an error)."""
  try: ops_cuda.nvrtc_compile('extern "C" __global__ void probe(float* a) { a[0] = 1.0f; }')
  except RuntimeError as e: why = str(e)
  else: why = None if ops_cuda.find_ptxas() is not None else "ptxas not found"
  if why is None: return ops_cuda.nvrtc_compile, ops_cuda.ptxas
  if os.getenv("CUDA_COMPILE_CHECK") == "1": pytest.fail(f"CUDA_COMPILE_CHECK=1 but {why}")
  pytest.skip(why)

def compile_all(sources: list[tuple[str, str]]) -> None:
  """NVRTC then ptxas for sm_80 and sm_90 on the kernels as one unit (each renamed: several share a name)."""
  nvrtc, ptxas = cuda_tools()
  prelude = CUDARenderer.prelude
  src = prelude + "".join(s[len(prelude):].replace(f"void {n}(", f"void k{i}_{n}(", 1) for i, (n, s) in enumerate(sources))
  ptx = nvrtc(src)
  for arch in ("sm_80", "sm_90"): ptxas(ptx, arch)

def test_every_action_compiles_for_cuda():
  r = CUDARenderer("CUDA")
  sources = {}  # the block size is not in the source: one compile per distinct kernel
  for name, make in KERNELS.items():
    items, _ = create_schedule([make().uop])
    ast = items[-1].ast
    for opt in gpu.actions(lower_and_simplify(ast, gpu_target=True), r):
      spec = r.render(linearize(lower_kernel(ast), r, opt))
      sources[spec.src] = spec.name
  assert len(sources) > 25
  compile_all([(n, s) for s, n in sources.items()])
