"""The GPU lowering, run without a GPU: the PYTHON device with CUDA's facts (DEV=PYTHON:CUDA) gets the kernels the CUDA
renderer would (output loops as a thread index, codegen/gpu.py) and interprets each one once per thread of its launch,
grid x block. The op subset of test_ops_python.py, forward and backward against PyTorch, plus launch edge cases."""
import numpy as np
import pytest
import torch
from fusegrad import Device, Tensor, Variable, dtypes
from fusegrad.codegen import program
from fusegrad.runtime.ops_python import PythonDevice, PythonProgram
from fusegrad.uop.ops import Ops
from fusegrad.schedule import create_schedule
from .helpers import helper_test_op
from .test_ops_python import CASES

@pytest.fixture(autouse=True)
def emulated_gpu(monkeypatch):
  """PYTHON lowers for a GPU in these tests; its programs are compiled afresh (the cache holds the CPU-style ones)."""
  monkeypatch.setitem(Device._opened, "PYTHON", PythonDevice("PYTHON", gpu=True))
  monkeypatch.setattr(program, "_programs", {})
  launches = []
  real = PythonProgram.__call__
  def counted(self, mems, var_vals):
    launches.append(self.spec)
    return real(self, mems, var_vals)
  monkeypatch.setattr(PythonProgram, "__call__", counted)
  yield launches
  assert launches and all(s.global_size is not None for s in launches)  # every kernel ran as a GPU launch

@pytest.mark.parametrize("name", list(CASES))
def test_op_on_emulated_gpu(name):
  shapes, fn, kw = CASES[name]
  helper_test_op(shapes, fn, device="PYTHON", **kw)

MORE = {
  "conv2d_strided_padded": ([(1, 2, 6, 5), (3, 2, 3, 3)], lambda x, w: torch.nn.functional.conv2d(x, w, stride=2, padding=1),
                            dict(fusegrad_fxn=lambda x, w: x.conv2d(w, stride=2, padding=1), atol=1e-5)),
  "cumsum": ([(3, 5)], lambda x: x.cumsum(1), dict(atol=1e-5)),
  "gather": (None, lambda x, i: x.gather(1, i), dict(vals=[[[1.0, 2, 3], [4, 5, 6]], [[2, 0], [1, 1]]], dtype=[dtypes.float32, dtypes.int64])),
  "bf16_roundtrip": ([(2, 3)], lambda x: x.bfloat16().float() * 3, dict(atol=1e-2, rtol=1e-2, forward_only=True)),
  "int64_near_overflow": (None, lambda a: a + 1, dict(vals=[[2**62, -2**63, 2**63 - 2]], dtype=dtypes.int64)),
}

@pytest.mark.parametrize("name", list(MORE))
def test_more_on_emulated_gpu(name):
  shapes, fn, kw = MORE[name]
  helper_test_op(shapes, fn, device="PYTHON", **kw)

def test_launch_covers_elements_past_one_block(emulated_gpu):
  # 3 x 97 = 291 outputs: three blocks of 128 threads, the last one's 93 spare threads do nothing
  x = np.random.default_rng(0).standard_normal((3, 97)).astype(np.float32)
  np.testing.assert_allclose((Tensor(x, device="PYTHON") * 2 + 1).numpy(), x * 2 + 1, rtol=1e-6)
  assert any(s.global_size == (3, 1, 1) and s.local_size == (128, 1, 1) for s in emulated_gpu)

def test_short_reduce_runs_in_each_thread(emulated_gpu):
  x = np.random.default_rng(1).standard_normal((300, 7)).astype(np.float32)
  np.testing.assert_allclose(Tensor(x, device="PYTHON").sum(1).numpy(), x.sum(1), rtol=1e-5, atol=1e-5)
  assert emulated_gpu[-1].global_size == (3, 1, 1) and not any(u.op is Ops.BARRIER for u in emulated_gpu[-1].uops)

BLOCK_REDUCES = {  # few outputs, long reductions: one block per output, partials meet in shared memory
  "sum_all": ([(300,)], lambda x: x.sum(), dict(atol=1e-4)),
  "rows_sum_max": ([(3, 700)], lambda x: x.sum(1) + x.amax(1), dict(atol=1e-4)),
  "two_axes": ([(2, 30, 20)], lambda x: x.sum((1, 2)), dict(atol=1e-4)),
  "softmax_rows": ([(2, 500)], lambda x: x.softmax(-1), dict(atol=1e-6)),
  "mean_var": ([(1000,)], lambda x: x.mean() + x.var(), dict(atol=1e-4)),
  "int_sum": ([(3, 400)], lambda x: x.sum(1), dict(dtype=dtypes.int32, low=-1000, high=1000, forward_only=True, check_dtype=False)),
  "half_mean": ([(600,)], lambda x: x.half().mean().float(), dict(atol=1e-3, rtol=1e-3, forward_only=True)),
  "nan_max": (None, lambda x: x.amax(), dict(vals=[[1.0] * 150 + [float("nan")] + [2.0] * 149], forward_only=True)),
}

@pytest.mark.parametrize("name", list(BLOCK_REDUCES))
def test_block_reduce(name, emulated_gpu):
  shapes, fn, kw = BLOCK_REDUCES[name]
  helper_test_op(shapes, fn, device="PYTHON", **kw)
  # a block of a power of two threads, at least a warp (codegen/gpu.py's heuristic: about 4 elements a thread)
  assert any(s.local_size[0] in (32, 64, 128, 256) and any(u.op is Ops.BARRIER for u in s.uops) for s in emulated_gpu)

def test_zero_size():
  assert Tensor.ones(0, 3, device="PYTHON").sum(0).tolist() == [0.0, 0.0, 0.0]
  assert (Tensor.ones(2, 0, device="PYTHON") * 2).shape == (2, 0)

def test_bound_variable_reaches_the_kernel():
  x = Tensor(np.arange(40, dtype=np.float32).reshape(4, 10), device="PYTHON").realize()
  pos = Variable("pos", 0, 7)
  for p in (0, 5, 7):
    np.testing.assert_array_equal(x[:, pos.bind(p):pos.bind(p) + 3].numpy(), x.numpy()[:, p:p + 3])

@pytest.mark.parametrize("block", [32, 64, 256])
def test_block_reduce_of_each_size(block, emulated_gpu):
  # one warp (shuffles only), two warps and eight (shuffles, then the warps' totals through shared memory)
  from fusegrad.codegen.opt import Opt
  x = np.random.default_rng(2).standard_normal((2, 300)).astype(np.float32)
  items, _ = create_schedule([Tensor(x, device="PYTHON").realize().max(1).uop])
  si = items[-1]
  program.get_program(si.device, si.ast, Opt("GROUP", block))([b.ensure_allocated()._mem for b in si.bufs], [])
  np.testing.assert_array_equal(np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32), x.max(1))
  assert emulated_gpu[-1].local_size == (block, 1, 1) and sum(u.op is Ops.BARRIER for u in emulated_gpu[-1].uops) == 5 + (block > 32)
