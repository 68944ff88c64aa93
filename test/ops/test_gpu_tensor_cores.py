"""Tensor cores (codegen/gpu.py's Opt("TC"): a warp per 16 x 8 tile, PTX mma.sync.m16n8k16) without a GPU: float16
and bfloat16 matmuls of odd sizes, forward and backward, under the PYTHON:CUDA emulation against PyTorch (float32 math
on the same 16-bit values); the emulated mma against numpy, so that a wrong fragment layout in the lowering cannot
pass; the heuristic's and BEAM's choices; and every tensor-core kernel's CUDA C through NVRTC and ptxas (sm_80, sm_90)."""
import dataclasses
import numpy as np
import pytest
import torch
from fusegrad import Device, Tensor, dtypes
from fusegrad.codegen import gpu, program
from fusegrad.codegen.linearize import linearize
from fusegrad.codegen.lowerer import lower_kernel
from fusegrad.codegen.opt import Opt
from fusegrad.codegen.search import lower_and_simplify
from fusegrad.renderer.cuda import CUDARenderer
from fusegrad.runtime.ops_python import PythonDevice, mma_sync
from fusegrad.schedule import create_schedule
from fusegrad.uop.ops import Ops
from .test_gpu_opts import compile_all

TORCH = {dtypes.float16: torch.float16, dtypes.bfloat16: torch.bfloat16}
# the output (and a backward's incoming gradient) is rounded to 16 bits: about 2^-11 (half) or 2^-8 (bfloat16) of
# values up to ~10 (sums of up to 48 products of normal values)
TOL = {dtypes.float16: dict(rtol=1e-2, atol=1e-2), dtypes.bfloat16: dict(rtol=2e-2, atol=6e-2)}

@pytest.fixture(autouse=True)
def emulated_gpu(monkeypatch):
  monkeypatch.setitem(Device._opened, "PYTHON", PythonDevice("PYTHON", gpu=True))
  monkeypatch.setattr(program, "_programs", {})

@pytest.fixture
def every_size(monkeypatch):
  """The heuristic takes tensor cores for any size (it needs a whole tile otherwise), so small odd shapes run on them."""
  monkeypatch.setattr(gpu, "TC_MIN_TILES", 0)

def _is_tc(prg) -> bool: return any(u.op is Ops.BARRIER and u.arg[0] == "mma" for u in prg.spec.uops)
def _tc_programs() -> int: return sum(_is_tc(p) for p in program._programs.values())

CASES = {  # shapes, function (the same on Tensor and torch.Tensor), tensor-core kernels forward, at least that many with backward
  "1x1x1": ([(1, 1), (1, 1)], lambda a, b: a @ b, 0, 0),  # no reduce loop: not a tensor-core kernel
  "17x23x9": ([(17, 9), (9, 23)], lambda a, b: a @ b, 1, 3),
  "16x8x16": ([(16, 16), (16, 8)], lambda a, b: a @ b, 1, 3),
  "33x40x48": ([(33, 48), (48, 40)], lambda a, b: a @ b, 1, 3),
  "batched_2x16x24x32": ([(2, 16, 32), (2, 32, 24)], lambda a, b: a @ b, 1, 3),
  "bias_relu": ([(9, 20), (20, 12), (12,)], lambda a, b, c: (a @ b + c).relu(), 1, 3),
  "transposed": ([(18, 11), (18, 10)], lambda a, b: a.transpose(0, 1) @ b, 1, 3),
  "conv2d": ([(1, 3, 5, 6), (4, 3, 3, 3)], lambda x, w: x.conv2d(w, padding=1), 1, 1),
}
BACKWARD = {"17x23x9", "16x8x16", "batched_2x16x24x32", "bias_relu", "transposed"}

def _inputs(shapes, dt, seed=0, device="PYTHON"):
  """The same 16-bit values as torch tensors (float32 copies, for the reference) and fusegrad tensors."""
  rng = np.random.default_rng(seed)
  tts = [torch.from_numpy(rng.standard_normal(s).astype(np.float32)).to(TORCH[dt]).float() for s in shapes]
  return tts, [Tensor(t.numpy(), device=device, dtype=dt, requires_grad=True) for t in tts]

def _torch_fn(name):
  if name == "conv2d": return lambda x, w: torch.nn.functional.conv2d(x, w, padding=1)
  return CASES[name][1]

def _check(name: str, dt, device: str, backward: bool):
  """CASES[name] on `device` against torch, forward and (backward) the inputs' gradients, and its tensor-core kernels."""
  shapes, fn, forward_tc, backward_tc = CASES[name]
  program._programs.clear()  # (this test's own cache) the kernels of this case only
  tts, fts = _inputs(shapes, dt, device=device)
  for t in tts: t.requires_grad_()
  want, out = _torch_fn(name)(*tts), fn(*fts)
  assert out.dtype == dt
  np.testing.assert_allclose(out.float().numpy(), want.detach().numpy(), **TOL[dt], err_msg=f"{name} forward")
  assert _tc_programs() == forward_tc
  if not backward: return
  # an incoming gradient of 16-bit values: fusegrad rounds it to the inputs' dtype (the cast's gradient), torch need not
  g = torch.from_numpy(np.random.default_rng(1).standard_normal(tuple(want.shape)).astype(np.float32)).to(TORCH[dt]).float()
  (want * g).sum().backward()
  (out.float() * Tensor(g.numpy(), device=device)).sum().backward()
  for i, (t, f) in enumerate(zip(tts, fts)):
    assert f.grad.dtype == dt
    np.testing.assert_allclose(f.grad.float().numpy(), t.grad.numpy(), **TOL[dt], err_msg=f"{name} gradient of input {i}")
  # the two matmuls of the backward pass take tensor cores too (and a kernel that recomputes the forward one, if any)
  assert _tc_programs() >= backward_tc

DTYPES = pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=["float16", "bfloat16"])

@DTYPES
@pytest.mark.parametrize("name", list(CASES))
def test_matmul_on_tensor_cores(name, dt, every_size):
  # the emulation is slow: backward for a subset
  _check(name, dt, "PYTHON", name in BACKWARD and (dt == dtypes.float16 or name == "transposed"))

@DTYPES
def test_matmul_on_a_real_gpu(dt, every_size):
  """The same cases on a GPU, where there is one (test/cuda_check.sh runs this): the layout against the hardware."""
  if (why := Device.status().get("CUDA")) != "ok": pytest.skip(f"no GPU: {why}")
  if Device["CUDA"].renderer.tensor_cores is None: pytest.skip(f"no tensor cores for float16 and bfloat16 on {Device['CUDA'].renderer.arch}")
  for name in CASES: _check(name, dt, "CUDA", name in BACKWARD)

def _kernel(t: Tensor):
  items, _ = create_schedule([t.uop])
  return lower_and_simplify(items[-1].ast, gpu_target=True)

def _empty(*shape, dt=dtypes.float16): return Tensor.empty(*shape, device="PYTHON", dtype=dt)

def test_heuristic_and_beam_take_tensor_cores_where_legal():
  r = CUDARenderer("CUDA")
  for dt in (dtypes.float16, dtypes.bfloat16):
    mm = _kernel(_empty(64, 32, dt=dt) @ _empty(32, 48, dt=dt))
    assert gpu.choose(mm, r) == Opt("TC", 128)
    assert [a for a in gpu.actions(mm, r) if a.kind == "TC"] == [Opt("TC", b) for b in (32, 64, 128, 256, 512, 1024)]
  assert gpu.choose(_kernel(_empty(2, 16, 16) @ _empty(2, 16, 8)), r) == Opt("TC", 128)  # batched, one whole tile each
  assert gpu.choose(_kernel((_empty(16, 48) @ _empty(48, 16) + _empty(16)).relu()), r) == Opt("TC", 128)  # with an epilogue
  # not worth it: a dimension smaller than a tile
  assert gpu.choose(_kernel(_empty(64, 8) @ _empty(8, 64)), r).kind != "TC"
  assert gpu.choose(_kernel(_empty(8, 64) @ _empty(64, 64)), r).kind != "TC"
  # never legal: float32 or mixed inputs, no products, an older GPU
  never = [_empty(64, 32, dt=dtypes.float32) @ _empty(32, 48, dt=dtypes.float32), _empty(64, 32) @ _empty(32, 48, dt=dtypes.bfloat16),
           _empty(64, 300).sum(1), _empty(64, 300).float().exp().sum(1), (_empty(64, 32) * 2).float(), (_empty(64, 32) * _empty(64, 32)).sum(1)]
  for t in never:
    k = _kernel(t)
    assert gpu.choose(k, r).kind != "TC" and all(a.kind != "TC" for a in gpu.actions(k, r)), t
    with pytest.raises(ValueError): linearize(k, r, Opt("TC", 128))
  turing = CUDARenderer("CUDA", arch="sm_75")
  mm = _kernel(_empty(64, 32) @ _empty(32, 48))
  assert not turing.tensor_cores and gpu.choose(mm, turing).kind != "TC" and all(a.kind != "TC" for a in gpu.actions(mm, turing))
  with pytest.raises(ValueError): linearize(mm, r, Opt("TC", 48))  # not whole warps

def test_every_tensor_core_action_runs(monkeypatch):
  """BEAM's candidates: each block size of TC gives the same values (the same products and sums), close to a plain launch's."""
  target = Device["PYTHON"].renderer
  monkeypatch.setattr(target, "max_threads", 64)
  _, (a, b) = _inputs([(17, 24), (24, 9)], dtypes.bfloat16)
  items, _ = create_schedule([(a @ b).uop])
  si = items[-1]
  mems = [buf.ensure_allocated()._mem for buf in si.bufs]
  def run(opt):
    program.get_program(si.device, si.ast, opt)(mems, [])
    return np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.uint16).copy()
  acts = [o for o in gpu.actions(lower_and_simplify(si.ast, gpu_target=True), target) if o.kind == "TC"]
  assert acts == [Opt("TC", 32), Opt("TC", 64)]
  got = [run(o) for o in acts]
  np.testing.assert_array_equal(got[0], got[1])
  plain = torch.from_numpy(run(Opt("THREADS", 64)).view(np.int16)).view(torch.bfloat16).float().numpy()
  assert np.abs(plain).max() > 1
  np.testing.assert_allclose(torch.from_numpy(got[0].view(np.int16)).view(torch.bfloat16).float().numpy(), plain, rtol=2e-2, atol=6e-2)

def test_heuristic_picks_tensor_cores_when_run():
  a, b = _inputs([(32, 16), (16, 24)], dtypes.float16)
  np.testing.assert_allclose((b[0] @ b[1]).float().numpy(), (a[0] @ a[1]).detach().numpy(), **TOL[dtypes.float16])
  (prg,) = [p for p in program._programs.values() if p.spec.name.startswith("r_")]
  assert _is_tc(prg) and prg.spec.name == f"r_{2 * 3 * 32}_1" and prg.spec.local_size == (128, 1, 1)  # 6 warps, one step of K

# ---------------- the fragment layout

def _frag_owner(which: str, row: int, col: int) -> tuple[int, int]:
  """(lane, index) holding element (row, col) of A (16 x 16), B (16 x 8) or D (16 x 8): the PTX ISA's layout for
  mma.m16n8k16 read the other way round (from an element to its lane), independently of the lowering's and the
  emulation's own formulas."""
  if which == "A": return (row % 8) * 4 + (col % 8) // 2, col % 2 + 2 * (row // 8) + 4 * (col // 8)
  if which == "B": return col * 4 + (row % 8) // 2, row % 2 + 2 * (row // 8)
  return (row % 8) * 4 + col // 2, col % 2 + 2 * (row // 8)

def test_emulated_mma_is_the_documented_product():
  rng = np.random.default_rng(0)
  frags, want = {}, {}
  for w in range(2):  # two warps of a block, each its own product
    a, b = rng.integers(-8, 8, (16, 16)).astype(np.float64), rng.integers(-8, 8, (16, 8)).astype(np.float64)
    want[w] = a @ b
    lanes = [[0.0] * 12 for _ in range(32)]
    for (r, c), v in np.ndenumerate(a): lanes[_frag_owner("A", r, c)[0]][_frag_owner("A", r, c)[1]] = v
    for (r, c), v in np.ndenumerate(b): lanes[_frag_owner("B", r, c)[0]][8 + _frag_owner("B", r, c)[1]] = v
    frags.update({w * 32 + lane: f for lane, f in enumerate(lanes)})
  got = {w: np.zeros((16, 8)) for w in range(2)}
  for i in range(4):
    out = mma_sync(frags, 32, i)
    for w in range(2):
      for r in range(16):
        for c in range(8):
          lane, j = _frag_owner("D", r, c)
          if j == i: got[w][r, c] = out[w * 32 + lane]
  for w in range(2): np.testing.assert_array_equal(got[w], want[w])
  with pytest.raises(RuntimeError, match="all 32 lanes"): mma_sync({i: frags[i] for i in range(31)}, 32, 0)

def _gq(lane): return lane // 4, lane % 4
WRONG = {  # each fragment with one documented detail changed
  "a_row_halves": ("a", lambda lane, i: (_gq(lane)[0] + 8 * (i // 4), _gq(lane)[1] * 2 + (i % 2 + 8 * (i // 2 % 2)))),
  "b_pairs": ("b", lambda lane, i: (_gq(lane)[1] * 2 + ((i + 1) % 2 + 8 * (i // 2)), _gq(lane)[0])),
  "c_rows": ("c", lambda lane, i: (_gq(lane)[0] + 8 * (i % 2), _gq(lane)[1] * 2 + i // 2)),
}

@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_fragment_layout_fails_under_emulation(name, monkeypatch, every_size):
  tts, fts = _inputs([(16, 16), (16, 8)], dtypes.float16, seed=3)
  want = (tts[0] @ tts[1]).detach().numpy()
  target = Device["PYTHON"].renderer
  field, wrong = WRONG[name]
  monkeypatch.setattr(target, "tensor_cores", dataclasses.replace(target.tensor_cores, **{field: wrong}))
  got = (fts[0] @ fts[1]).float().numpy()
  assert _tc_programs() == 1 and np.abs(got - want).max() > 0.5

# ---------------- every tensor-core kernel's CUDA C compiles

def test_tensor_core_kernels_compile_for_cuda():
  r = CUDARenderer("CUDA")
  sources = {}
  for name, (shapes, fn, _, _) in CASES.items():
    for dt in (dtypes.float16, dtypes.bfloat16):
      _, fts = _inputs(shapes, dt)
      out = fn(*fts)
      (out.float() * 1.5).sum().backward()  # the backward matmuls too
      items, _ = create_schedule([out.uop] + [f.grad.uop for f in fts])
      for si in items:
        if gpu.tc_plan(lower_and_simplify(si.ast, gpu_target=True), r) is None: continue
        spec = r.render(linearize(lower_kernel(si.ast), r, Opt("TC", 128)))
        assert "mma.sync.aligned.m16n8k16.row.col.f32." + ("bf16.bf16" if dt == dtypes.bfloat16 else "f16.f16") + ".f32" in spec.src
        sources[spec.src] = spec.name
  # (>= 20 before 16-bit matmuls multiplied float32 casts: a backward whose upstream gradient is the constant 1.5 folds
  # that factor to a float32 constant and is no tensor-core matmul, rightly)
  assert len(sources) >= 18
  compile_all([(n, s) for s, n in sources.items()])
