"""Row-wise reductions fused into the kernel that reads them (schedule/fusion.py `_per_row`): softmax, log_softmax,
layernorm and RMSNorm over the last axis are one kernel that computes each row's max/sum above the row's inner loop.
Checked against torch (forward and backward), NOOPT, every legal optimization, and the PYTHON interpreter."""
import math
import numpy as np, pytest
import torch
import torch.nn.functional as F
from fusegrad import Tensor, GlobalCounters, Device, Context
from fusegrad.codegen.opt import actions
from fusegrad.codegen.search import lower_and_simplify
from fusegrad.engine import realize as realize_mod
from fusegrad.engine.realize import get_program
from fusegrad.schedule import create_schedule
from fusegrad.schedule.fusion import decide_buffers
from fusegrad.uop.ops import Ops
from .helpers import helper_test_op

ROW_OPS = {
  "softmax": (lambda x: x.softmax(-1), lambda x: torch.softmax(x, -1)),
  "log_softmax": (lambda x: x.log_softmax(-1), lambda x: torch.log_softmax(x, -1)),
  "layernorm": (lambda x: x.layernorm(-1), lambda x: F.layer_norm(x, x.shape[-1:])),
  "rms_norm": (lambda x: x.rms_norm(-1, 1e-6), lambda x: F.rms_norm(x, x.shape[-1:], eps=1e-6)),
  "logsumexp_sub": (lambda x: x - x.logsumexp(-1, keepdim=True), lambda x: x - torch.logsumexp(x, -1, keepdim=True)),
}
ODD_SHAPES = [(7, 13), (3, 5, 33), (2, 1), (5, 1000), (1, 17)]

def kernels(t: Tensor) -> int:
  GlobalCounters.reset()
  t.realize()
  return GlobalCounters.kernel_count

@pytest.mark.parametrize("name", ROW_OPS)
def test_row_ops_are_one_kernel(name):
  x = Tensor(np.random.default_rng(0).standard_normal((9, 33), dtype=np.float32)).realize()
  assert kernels(ROW_OPS[name][0](x)) == 1

@pytest.mark.parametrize("shape", ODD_SHAPES)
@pytest.mark.parametrize("name", ROW_OPS)
def test_row_ops_match_torch(name, shape):
  fg, pt = ROW_OPS[name]
  helper_test_op([shape], pt, fg, atol=1e-5, grad_atol=1e-4)

@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_rows_with_inf_and_nan(name):
  fg, pt = ROW_OPS[name]
  vals = [[1.0, -math.inf, 2.0, 0.5], [-math.inf] * 4, [math.inf, 1.0, 0.0, 2.0], [math.nan, 1.0, 2.0, 3.0], [3e38, -3e38, 0.0, 1.0]]
  got, want = fg(Tensor(vals)).numpy(), pt(torch.tensor(vals)).numpy()
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)

def test_not_trailing_axis_stays_correct():
  # the reduced axis is not the innermost loop: no per-row fusion, same answers
  x = np.random.default_rng(1).standard_normal((6, 5, 7), dtype=np.float32)
  for axis in (0, 1):
    np.testing.assert_allclose(Tensor(x).softmax(axis).numpy(), torch.softmax(torch.tensor(x), axis).numpy(), rtol=1e-5, atol=1e-6)

def test_value_needed_by_two_kernels_is_not_fused():
  # the row max feeds two outputs (two kernels): it gets its own buffer instead of being computed in both
  x = Tensor(np.random.default_rng(2).standard_normal((8, 16), dtype=np.float32)).realize()
  m = x.max(-1, keepdim=True)
  a, b = x - m, x * m
  GlobalCounters.reset()
  Tensor.realize_all(a, b)
  assert GlobalCounters.kernel_count == 3
  nx = x.numpy()
  np.testing.assert_allclose(b.numpy(), nx * nx.max(-1, keepdims=True), rtol=1e-6)
  np.testing.assert_allclose(a.numpy(), nx - nx.max(-1, keepdims=True), rtol=1e-6)

def test_gpu_threads_do_not_fuse_rows():
  # each GPU thread would recompute the row's reductions: with rows=False the reductions keep their buffers
  x = Tensor(np.ones((4, 8), dtype=np.float32)).realize()
  out = x.softmax(-1).uop
  order = out.toposort(lambda u: u.op is Ops.BUFFER)
  assert list(decide_buffers(order, [out], rows=True)) == [out]
  assert len(decide_buffers(order, [out], rows=False)) == 3  # the max, the sum and the output

def _fused_item(fn, shape):
  x = np.random.default_rng(3).standard_normal(shape, dtype=np.float32)
  items, _ = create_schedule([fn(Tensor(x).realize()).uop])
  assert len(items) == 1
  return items[0], x

def _run(si, opt, shape):
  prg = get_program(si.device, si.ast, opt)
  prg([buf.ensure_allocated()._mem for buf in si.bufs], [])
  return np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32).reshape(shape).copy()

@pytest.mark.parametrize("shape", [(6, 48), (5, 7), (3, 2, 96)])
@pytest.mark.parametrize("name", ["softmax", "layernorm"])
def test_every_legal_action_matches_torch(name, shape):
  fg, pt = ROW_OPS[name]
  si, x = _fused_item(fg, shape)
  want = pt(torch.tensor(x)).numpy()
  opts = actions(lower_and_simplify(si.ast), Device[si.device].renderer)
  assert any(o.kind == "LANES" for o in opts) == (shape[-1] % 4 == 0)
  for opt in opts: np.testing.assert_allclose(_run(si, opt, shape), want, rtol=1e-5, atol=1e-5, err_msg=str(opt))

@pytest.mark.parametrize("name", ROW_OPS)
def test_noopt_and_python_device_agree(name):
  fg, _ = ROW_OPS[name]
  x = np.random.default_rng(4).standard_normal((5, 37), dtype=np.float32)
  outs = []
  for noopt in (0, 1):
    realize_mod._programs.clear()  # NOOPT is read at compile time
    with Context(NOOPT=noopt): outs.append(fg(Tensor(x)).numpy())
  realize_mod._programs.clear()
  outs.append(fg(Tensor(x, device="PYTHON")).numpy())
  for o in outs[1:]: np.testing.assert_allclose(outs[0], o, rtol=1e-5, atol=1e-6)

def test_cross_entropy_rows_fuse_and_match_torch():
  rng = np.random.default_rng(5)
  x, y = rng.standard_normal((33, 10), dtype=np.float32), rng.integers(0, 10, 33)
  tx, ty = Tensor(x, requires_grad=True).realize(), Tensor(y).realize()
  loss = tx.cross_entropy(ty)
  assert kernels(loss) == 2  # each row's max, log-sum-exp and picked logit in one kernel, then the mean
  loss.backward()
  px = torch.tensor(x, requires_grad=True)
  want = F.cross_entropy(px, torch.tensor(y))
  want.backward()
  np.testing.assert_allclose(loss.numpy(), want.detach().numpy(), rtol=1e-5)
  np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-6)

@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.int8, np.uint8])
def test_a_picked_element_is_one_load_not_a_pass_over_the_row(dtype):
  # the sum over j of (j == y ? x[j] : 0) is x[y], or 0 where y is out of range: cross-entropy's picked logit is one
  # load instead of a third pass over the row (a 512 x 49152 cross-entropy's kernel 9.9 -> 9.0 ms)
  rng = np.random.default_rng(3)
  x = rng.standard_normal((10, 300), dtype=np.float32)
  x[2, 7] = np.nan  # not picked: the mask's 0 stands
  y = np.array([0, 299, 5, -1, 300, 1000, 17, 299, -128, 100]).astype(dtype)
  n = np.arange(10)
  want = np.where((y >= 0) & (y < 300), x[n, np.clip(y, 0, 299)], 0).astype(np.float32)
  fn = lambda tx, ty: (Tensor.arange(300) == ty.unsqueeze(1)).where(tx, 0).sum(1)  # noqa: E731
  np.testing.assert_array_equal(fn(Tensor(x), Tensor(y)).numpy(), want)
  with Context(NOOPT=1):
    realize_mod._programs.clear()
    np.testing.assert_array_equal(fn(Tensor(x), Tensor(y)).numpy(), want)
  realize_mod._programs.clear()
  src = get_program("CPU", create_schedule([fn(Tensor.empty(10, 300), Tensor(y)).uop])[0][-1].ast).spec.src
  assert src.split("void ")[-1].count("for (") == 1  # the loop over the rows only

@pytest.mark.parametrize("shape", [(6, 48), (5, 7), (3, 2, 96)])
def test_softmax_computes_each_exp_once(shape):
  # exp(x - max) is needed by the row's sum and by the output: it is computed once into a scratch row (a STAGE)
  from fusegrad.codegen.linearize import linearize
  si, _ = _fused_item(ROW_OPS["softmax"][0], shape)
  uops = linearize(lower_and_simplify(si.ast), Device[si.device].renderer)
  assert [u.op for u in uops].count(Ops.EXP) == 1 and [u.op for u in uops].count(Ops.STAGE) == 1

def _source(fn, shape) -> str:
  si, _ = _fused_item(fn, shape)
  return get_program(si.device, si.ast).spec.src

@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layernorm"])
def test_later_passes_over_a_row_prefetch_the_next_row(name):
  # the first pass reads the row from memory; a later one (exp, from cache) prefetches the next row, 33 floats (132
  # bytes) on, so memory does not idle while it computes
  src = _source(ROW_OPS[name][0], (6, 33))
  assert "__builtin_prefetch" in src and "+132ull)" in src
  with Context(NOOPT=1):
    realize_mod._programs.clear()
    assert "__builtin_prefetch" not in _source(ROW_OPS[name][0], (6, 33))
  realize_mod._programs.clear()

def test_single_pass_and_long_rows_do_not_prefetch():
  from fusegrad.renderer.cstyle import PREFETCH_ROW_BYTES
  assert "__builtin_prefetch" not in _source(lambda x: (x * 2).sum(-1), (6, 33))  # one pass: the hardware streams it
  assert "__builtin_prefetch" not in _source(ROW_OPS["softmax"][0], (2, PREFETCH_ROW_BYTES // 4 + 16))  # next row would not stay cached
