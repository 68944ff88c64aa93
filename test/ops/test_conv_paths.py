"""The convolution's kernel forms and its own gradients (tensor/nn.py: conv2d, _conv_vjp), against PyTorch, NOOPT and PYTHON.

conv2d builds one of two forms: channels last (the output channels innermost, from a transposed copy of the weight)
where the channels per group are a multiple of 8 and an image row is shorter than 16 or more than two of the target's
vectors, or there are 64 or more channels, else channels first. Its gradients
are registered, not composed: the input gradient of a stride-1 convolution is a transposed convolution, a strided one
keeps the composed window gradient, and the weight gradient reduces batch-last copies of both operands."""
import re
import numpy as np, pytest, torch
import torch.nn.functional as F
from fusegrad import Tensor, Context, Device
from fusegrad.codegen.opt import Opt, actions, choose
from fusegrad.codegen.search import lower_and_simplify
from fusegrad.engine import realize as realize_mod
from fusegrad.engine.realize import get_program
from fusegrad.codegen.program import _render
from fusegrad import dtypes
from fusegrad.codegen.linearize import linearize
from fusegrad.codegen.lowerer import lower_kernel
from fusegrad.schedule import create_schedule
from fusegrad.schedule.fusion import decide_buffers
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.symbolic import conjuncts
from .helpers import helper_test_op

CASES = [
  # x shape, w shape, kwargs: channels last (short rows, channels a multiple of 8), then channels first
  ((3, 5, 7, 7), (16, 5, 3, 3), dict(padding=1)),
  ((2, 4, 9, 9), (16, 2, 3, 3), dict(groups=2)),
  ((2, 3, 11, 11), (8, 3, 5, 5), dict(stride=2, padding=2)),
  ((2, 3, 9, 8), (8, 3, 3, 2), dict(dilation=(2, 1), padding=(1, 2))),
  ((1, 6, 6, 6), (24, 6, 1, 1), dict()),
  ((2, 16, 9, 9), (32, 16, 3, 3), dict()),  # 7 columns: 7 rows of the narrower tile at once
  ((1, 3, 5, 20), (64, 3, 3, 3), dict(padding=1)),  # a wide row, but 64 channels fill a tile
  ((1, 8, 7, 7), (128, 8, 3, 3), dict(padding=1)),  # batch 1: the weight tile loop outside the image (staged)
  ((2, 3, 5, 18), (8, 3, 3, 3), dict()),
  ((3, 4, 7, 21), (6, 4, 5, 5), dict(padding=2)),
  ((2, 4, 8, 20), (16, 1, 3, 3), dict(groups=4, stride=2, padding=1)),
  ((3, 8, 7, 5), (16, 8, 3, 3), dict(padding=1)),  # channels last, odd image sizes
  ((2, 16, 5, 9), (24, 8, 3, 3), dict(groups=2, padding=(0, 1))),
  ((2, 8, 6, 24), (16, 8, 5, 5), dict()),  # 20-wide rows: channels last on 8 and 16 lanes (16 + 4 is not whole vectors)
  ((1, 8, 4, 16), (64, 8, 3, 3), dict()),  # 14 columns: 7 rows of a narrower tile
]

def _fg_conv(kw):
  return lambda x, w, b: x.conv2d(w, b, groups=kw.get("groups", 1), stride=kw.get("stride", 1), dilation=kw.get("dilation", 1),
                                  padding=kw.get("padding", 0))

@pytest.mark.parametrize("xs,ws,kw", CASES)
def test_conv_forms_match_torch(xs, ws, kw):
  helper_test_op([xs, ws, (ws[0],)], lambda x, w, b: F.conv2d(x, w, b, **kw), _fg_conv(kw), atol=1e-5)

@pytest.mark.parametrize("xs,ws,kw", [((2, 3, 13), (8, 3, 3), dict(padding=1)), ((2, 3, 20), (5, 3, 4), dict(stride=2))])
def test_conv1d_forms_match_torch(xs, ws, kw):
  helper_test_op([xs, ws, (ws[0],)], lambda x, w, b: F.conv1d(x, w, b, **kw), _fg_conv(kw), atol=1e-5)

def test_conv3d_channels_last_matches_torch():
  helper_test_op([(2, 3, 5, 6, 7), (8, 3, 2, 3, 3), (8,)], lambda x, w, b: F.conv3d(x, w, b, padding=1),
                 lambda x, w, b: x.conv2d(w, b, padding=1), atol=1e-5)

@pytest.mark.parametrize("frozen", ["input", "weight"])
@pytest.mark.parametrize("stride", [1, 2])
def test_one_operand_needs_a_gradient(frozen, stride):
  rng = np.random.default_rng(1)
  xn, wn = rng.standard_normal((2, 4, 9, 9), dtype=np.float32), rng.standard_normal((8, 4, 3, 3), dtype=np.float32)
  x, w = Tensor(xn, requires_grad=frozen != "input"), Tensor(wn, requires_grad=frozen != "weight")
  tx, tw = torch.tensor(xn, requires_grad=frozen != "input"), torch.tensor(wn, requires_grad=frozen != "weight")
  x.conv2d(w, stride=stride, padding=1).square().sum().backward()
  F.conv2d(tx, tw, stride=stride, padding=1).square().sum().backward()
  for a, t in ((x, tx), (w, tw)):
    assert (a.grad is None) == (t.grad is None)
    if t.grad is not None: np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)

def test_conv_gradient_of_a_gradient():
  # the registered gradients are ordinary graphs, so they differentiate again (the transposed convolution registers its own)
  rng = np.random.default_rng(2)
  xn, wn = rng.standard_normal((2, 3, 6, 6), dtype=np.float32), rng.standard_normal((8, 3, 3, 3), dtype=np.float32)
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  tx, tw = torch.tensor(xn, requires_grad=True), torch.tensor(wn, requires_grad=True)
  (gx,) = torch.autograd.grad(F.conv2d(tx, tw, padding=1).square().sum(), tx, create_graph=True)
  gx.sum().backward()
  y = x.conv2d(w, padding=1).square().sum()
  (fgx,) = y.gradient(x)
  fgx.sum().backward()
  np.testing.assert_allclose(fgx.numpy(), gx.detach().numpy(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)

def _grads(device, xn, wn, kw):
  x, w = Tensor(xn, device=device, requires_grad=True), Tensor(wn, device=device, requires_grad=True)
  out = _fg_conv(kw)(x, w, None)
  (out * out.detach().sin()).sum().backward()
  return [t.numpy() for t in (out, x.grad, w.grad)]

def _match_noopt_and_python(xs, ws, kw, seed: int, tol: float = 1e-4):
  """A conv's output and both gradients on random data: the optimized CPU kernels against NOOPT and the PYTHON device."""
  rng = np.random.default_rng(seed)
  xn, wn = rng.standard_normal(xs, dtype=np.float32), rng.standard_normal(ws, dtype=np.float32)
  got = _grads(None, xn, wn, kw)
  realize_mod._programs.clear()  # NOOPT is read at compile time
  with Context(NOOPT=1): plain = _grads(None, xn, wn, kw)
  realize_mod._programs.clear()
  for want in (plain, _grads("PYTHON", xn, wn, kw)):
    for a, b in zip(got, want): np.testing.assert_allclose(a, b, rtol=tol, atol=tol)

@pytest.mark.parametrize("xs,ws,kw", CASES[:3] + CASES[5:10] + CASES[11:])
def test_conv_kernels_match_noopt_and_python(xs, ws, kw): _match_noopt_and_python(xs, ws, kw, 3)

def _schedule(xs, ws, **kw):
  rng = np.random.default_rng(4)
  x = Tensor(rng.standard_normal(xs, dtype=np.float32), requires_grad=True)
  w = Tensor(rng.standard_normal(ws, dtype=np.float32), requires_grad=True)
  x.conv2d(w, **kw).relu().sum().backward()
  return create_schedule([x.grad.uop, w.grad.uop])[0]

def test_stride1_input_gradient_has_no_window_sized_buffer():
  # the composed gradient of a 5x5 convolution wrote a buffer 25 times the input's size before summing shifted copies of it
  xs = (4, 8, 12, 12)
  items = _schedule(xs, (8, 8, 5, 5), padding=2)
  assert max(b.size for si in items for b in si.bufs) <= 4 * np.prod(xs)

@pytest.fixture
def batch_last_wgrad(monkeypatch):
  """The batch-last weight gradient, whatever form the host's target picks (AVX2 puts 5x5 ones' channels in lanes)."""
  from fusegrad.tensor import nn as tnn
  monkeypatch.setattr(tnn, "_wgrad_by_channels", lambda *args: False)

def test_weight_gradient_tiles_registers_for_a_five_wide_kernel(batch_last_wgrad):
  # a 5x5 weight gradient reduces batch x image columns in lanes; 5 kernel columns have no divisor to tile, so the
  # input channels are tiled, and the output channels on top
  items = _schedule((8, 8, 12, 12), (16, 8, 5, 5))
  wgrad = next(si for si in items if si.bufs[0].size == 16 * 8 * 25 and len(si.bufs) == 3)  # reads both operands
  opt = choose(lower_and_simplify(wgrad.ast), Device[wgrad.device].renderer)
  assert opt.kind == "LANES" and opt.upcast > 1 and opt.upcast2 > 1, opt

@pytest.mark.parametrize("width,regs,want", [(16, 32, (16, 4, 4)), (8, 16, (8, 4, 4)), (4, 16, (4, 4, 4))])
def test_weight_gradient_prefers_outputs_per_load_to_lanes(width, regs, want, batch_last_wgrad):
  # with 16 registers (AVX2) two vectors of lanes left room for 4 x 2 outputs only; one vector of lanes with 4 x 4
  # outputs ran 1.7x faster. AVX-512's 32 registers would hold 4 x 4 outputs of two vectors each, but nothing else:
  # one vector each, with room for the 8 loads, ran 1.2-1.5x faster (a 32-channel 5x5 layer at b128: 17.4 -> 14.5 ms)
  from types import SimpleNamespace
  items = _schedule((8, 8, 12, 12), (16, 8, 5, 5))
  wgrad = next(si for si in items if si.bufs[0].size == 16 * 8 * 25 and len(si.bufs) == 3)
  opt = choose(lower_and_simplify(wgrad.ast), SimpleNamespace(simd_width=width, vector_registers=regs))
  assert (opt.kind, opt.arg, opt.upcast, opt.upcast2) == ("LANES", *want), opt

def test_every_legal_action_of_channels_last_conv_kernels_matches_noopt():
  items = _schedule((4, 8, 6, 6), (32, 8, 3, 3), padding=1)
  tried = 0
  for si in items:
    if si.ast.src[0].op.name == "COPY": continue
    mems = [b.ensure_allocated()._mem for b in si.bufs]
    with Context(NOOPT=1): get_program(si.device, si.ast)(mems, [])
    want = np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32).copy()
    for opt in actions(lower_and_simplify(si.ast), Device[si.device].renderer):
      get_program(si.device, si.ast, opt)(mems, [])
      np.testing.assert_allclose(np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32), want, rtol=1e-4, atol=1e-4, err_msg=str(opt))
      tried += opt != Opt("NONE")
  assert tried > 20

def test_seven_columns_are_computed_seven_at_a_time():
  # 4 and 2 do not divide a 7x7 image's columns: VECTOR tiles fewer channels and computes all 7 columns per weight load
  x, w = Tensor.rand(1, 16, 9, 9).realize(), Tensor.rand(64, 16, 3, 3).realize()
  si = next(si for si in create_schedule([x.conv2d(w).uop])[0] if len(si.bufs) == 3)
  opt = choose(lower_and_simplify(si.ast), Device[si.device].renderer)
  assert opt.kind == "VECTOR" and opt.upcast == 7 and opt.arg * 7 <= 4 * 64, opt

def test_a_conv_read_by_a_padded_copy_gets_its_own_kernel():
  # conv -> relu -> padded 5x5 conv (which reads a padded copy): fused into the next conv's padded input, the first
  # conv ran gated and tiled along the padded rows; it is computed on its own, and the pad kernel only applies the
  # relu. A 3x3 conv reads its padded input in place: the first conv computes the relu, and the second reads its buffer
  x, w1 = Tensor.rand(1, 8, 20, 20).realize(), Tensor.rand(12, 8, 3, 3).realize()
  for k, want in ((5, [12 * 20 * 20, 12 * 24 * 24, 12 * 20 * 20]), (3, [12 * 20 * 20] * 2)):
    w2 = Tensor.rand(12, 12, k, k).realize()
    items = create_schedule([x.conv2d(w1, padding=1).relu().conv2d(w2, padding=k // 2).uop])[0]
    assert sorted(si.bufs[0].size for si in items) == sorted(want)

DEPTHWISE = [((2, 6, 34, 34), dict(padding=1)),  # rows of 34: masked loads, no padded copy
             ((2, 6, 12, 12), dict(padding=1)),  # short rows: a padded copy
             ((2, 5, 67, 66), dict(stride=2, padding=1)),  # 34 output columns read at stride 2, gated
             ((1, 5, 21, 19), dict(stride=2, padding=(1, 2))),  # from a padded copy at stride 2 (two loads and a shuffle)
             ((2, 4, 36, 35), dict(padding=(2, 0), dilation=2))]

@pytest.mark.parametrize("xs,kw", DEPTHWISE)
def test_depthwise_convs_match_torch_noopt_and_python(xs, kw):
  c, kw = xs[1], dict(kw, groups=xs[1])
  helper_test_op([xs, (c, 1, 3, 3), (c,)], lambda x, w, b: F.conv2d(x, w, b, **kw), _fg_conv(kw), atol=1e-5)
  _match_noopt_and_python(xs, (c, 1, 3, 3), kw, 5)

def _padded_copies(out: Tensor, *more: Tensor, tails: bool = True) -> int:
  """The padded copies on a CPU whose tiles' last vectors can be masked (tails: AVX2, AVX-512) or not (SSE)."""
  targets = [t.uop for t in (out, *more)]
  order = UOp(Ops.SINK, dtypes.void, tuple(targets)).toposort(lambda u: u.op is Ops.BUFFER)
  return sum(u.op is Ops.PAD for u in decide_buffers(order, targets, rows=True, tails=tails))

def test_a_depthwise_conv_with_long_rows_reads_its_input_unpadded():
  # the padded copy is a whole pass over memory; a depthwise conv (each window read by one output channel) spends as long
  # on it as on the conv when its rows are long, and gates its loads instead, on every target
  def copies(size: int, tails: bool = True, cout: int = 8, groups: int = 8, stride: int = 1) -> int:
    x, w = Tensor.empty(2, 8, size, size), Tensor.empty(cout, 8 // groups, 3, 3)
    return _padded_copies(x.conv2d(w, padding=1, groups=groups, stride=stride), tails=tails)
  for tails in (False, True):
    assert copies(40, tails) == 0 and copies(80, tails, stride=2) == 0  # (40 output columns)
    assert copies(20, tails) == (0 if tails else 1)  # short rows: masks cost more than the copy, unless a tile's last
    assert copies(40, tails, stride=2) == 1  # vector is masked too (tails: AVX2, AVX-512; at stride 1)
  # a dense or grouped conv (windows broadcast to several output channels) at most 3 wide gates its loads at any
  # stride and row length
  for size, stride in ((40, 1), (20, 1), (80, 2), (40, 2)):
    assert copies(size, cout=16, groups=1, stride=stride) == 0 and copies(size, cout=16, groups=8, stride=stride) == 0
  # copied: a 5x5 kernel, a 3x3 kernel dilated to 5
  x = Tensor.empty(2, 8, 40, 40)
  assert _padded_copies(x.conv2d(Tensor.empty(16, 8, 5, 5), padding=2)) == 1
  assert _padded_copies(x.conv2d(Tensor.empty(16, 8, 3, 3), padding=2, dilation=2)) == 1
  # one padded input read by two kernels (a conv and, in training, its weight gradient): both read it in place
  assert _padded_copies(x.conv2d(Tensor.empty(16, 8, 3, 3), padding=1), x.conv2d(Tensor.empty(4, 8, 3, 3), padding=1)) == 0
  assert _padded_copies(x.conv2d(Tensor.empty(16, 8, 5, 5), padding=2), x.conv2d(Tensor.empty(4, 8, 5, 5), padding=2)) == 1
  # a gated load is 0 where its gate is off: the lowered conv has no select around it
  x, w = Tensor.empty(2, 8, 40, 40), Tensor.empty(8, 1, 3, 3)
  ast = lower_and_simplify(create_schedule([x.conv2d(w, padding=1, groups=8).uop])[0][-1].ast)
  loads = [u for u in ast.toposort() if u.op.name == "LOAD" and len(u.src) == 3]
  assert loads and not any(u.op.name == "WHERE" and u.src[1] in loads for u in ast.toposort())

def _has_weight_copy(x: Tensor, w: Tensor) -> bool:
  """Whether the convolution is channels last: it reads a transposed copy of the weight, made by a kernel of its own."""
  return any(si.bufs[0].size == w.numel() and len(si.bufs) == 2 for si in create_schedule([x.conv2d(w).uop])[0])

@pytest.mark.parametrize("device", ["CPU", "NULL"])
def test_rows_that_are_not_one_or_two_whole_vectors_go_channels_last(device):
  # MNIST's 32-channel 5x5 layers: a 20- or 24-wide row is 3 AVX2 vectors (a 4-row register tile of them leaves no
  # registers for its loads) or 16 + 4 / 16 + 8 AVX-512 lanes (idle ones): channels last. Rows of one or two whole
  # vectors with few channels stay channels first (16 wide with 8 or 16 lanes, 32 wide with 16)
  width = Device[device].renderer.simd_width
  def channels_last(row: int, cout: int = 32) -> bool:
    return _has_weight_copy(Tensor.empty(2, 32, row + 4, row + 4, device=device), Tensor.empty(cout, 32, 5, 5, device=device))
  assert channels_last(20) and channels_last(24)
  assert channels_last(16) == (width < 8) and channels_last(32) == (width < 16)
  # whatever the lanes: rows shorter than 16, and 64 channels, go channels last
  assert channels_last(12) and channels_last(32, cout=64)

def test_a_computed_input_is_computed_once():
  # relu(x + b) read by a 5x5 convolution: fused into it, each value was recomputed for every tap and channel tile
  # (MNIST's second conv: 35 to 14 ms); it is computed into a buffer first
  x, b, w = Tensor.rand(2, 8, 12, 12).realize(), Tensor.rand(1, 8, 1, 1).realize(), Tensor.rand(16, 8, 5, 5).realize()
  items = create_schedule([(x + b).relu().conv2d(w).uop])[0]
  conv = next(si for si in items if si.bufs[0].size == 2 * 16 * 8 * 8)
  assert len(conv.bufs) == 3 and not any(u.op.name == "WHERE" for u in conv.ast.toposort()), "the relu was fused into the convolution"
  np.testing.assert_allclose((Tensor(x.numpy()) + Tensor(b.numpy())).relu().conv2d(Tensor(w.numpy())).numpy(),
                             F.conv2d(torch.relu(torch.tensor(x.numpy()) + torch.tensor(b.numpy())), torch.tensor(w.numpy())).numpy(), rtol=1e-5, atol=1e-4)

def test_a_staged_weight_tile_is_read_once_for_all_rows():
  # batch 1, 7x7, many channels: each weight tile was read again for every image row (ResNet-18's 512-channel layer
  # 3.9 -> 2.2 ms on AVX2); staged, the tile loop is outermost, outside the image rows and columns. 256 channels: with
  # 128, AVX-512's 32-channel tiles leave 4 tiles, too few to share among threads, and that target does not stage
  from fusegrad.codegen.opt import apply_opt, output_ranges
  x, w = Tensor.rand(1, 32, 9, 9).realize(), Tensor.rand(256, 32, 3, 3).realize()
  si = next(si for si in create_schedule([x.conv2d(w).uop])[0] if len(si.bufs) == 3)
  k = lower_and_simplify(si.ast)
  opt = choose(k, Device[si.device].renderer)
  assert opt.kind == "VECTOR" and opt.stage, opt
  assert output_ranges(apply_opt(k, opt))[0].src[0].arg == 256 // opt.arg
  helper_test_op([(1, 32, 9, 9), (256, 32, 3, 3)], lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: x.conv2d(w, padding=1), atol=1e-4)

@pytest.mark.parametrize("cout,size,want", [(256, 14, Opt("VECTOR", 32, 7, True)), (512, 7, Opt("VECTOR", 16, 7, True))])
def test_batch1_layers_on_16_lanes_tile_odd_rows_and_stage_blocks_that_fit(cout, size, want):
  # ResNet-18's 256-channel 14x14 layer took 2 rows x 4 vectors, 8 accumulators, unstaged (4 tiles): 3.2 ms; 7 rows x
  # 2 vectors staged, 0.54 ms. Its 512-channel 7x7 one took 32-lane tiles whose block (512 x 9 x 32) does not fit
  # MAX_STAGE, so it was not staged: 1.7 ms; 16-lane tiles fit, 1.05 ms (an AVX-512 Xeon)
  from types import SimpleNamespace
  x, w = Tensor.empty(1, cout, size + 2, size + 2), Tensor.empty(cout, cout, 3, 3)
  si = max(create_schedule([x.conv2d(w).uop])[0], key=lambda si: len(si.ast.toposort()))
  assert choose(lower_and_simplify(si.ast), SimpleNamespace(simd_width=16, vector_registers=32)) == want

@pytest.mark.parametrize("xs,opt", [((2, 16, 9, 9), Opt("VECTOR", 8, 7, True)), ((2, 16, 9, 9), Opt("VECTOR", 16, 5, True)),
                                    ((2, 16, 9, 9), Opt("VECTOR", 32, 2, True)), ((1, 16, 16, 16), Opt("VECTOR", 16, 7, True)),
                                    ((1, 16, 16, 16), Opt("VECTOR", 32, 7, True))])
def test_staged_tiles_outside_the_rows_match_noopt(xs, opt):
  # the tile loop outside every output loop its block does not move, with rows that 5 does not divide, and 7 rows of
  # a 14-wide image
  x, w = Tensor.rand(*xs).realize(), Tensor.rand(64, 16, 3, 3).realize()
  si = next(si for si in create_schedule([x.conv2d(w).uop])[0] if len(si.bufs) == 3)
  mems = [b.ensure_allocated()._mem for b in si.bufs]
  with Context(NOOPT=1): get_program(si.device, si.ast)(mems, [])
  want = np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32).copy()
  get_program(si.device, si.ast, opt)(mems, [])
  np.testing.assert_allclose(np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32), want, rtol=1e-5, atol=1e-5)

def test_an_output_gradient_read_channels_last_is_written_channels_last(monkeypatch):
  # the output gradient that both gradients read is computed once; where the weight gradient reads it with channels in
  # vector lanes, it is written so, not channels first and then copied channels last
  from fusegrad.tensor import nn as tnn
  monkeypatch.setattr(tnn, "_wgrad_by_channels", lambda *args: True)
  rng = np.random.default_rng(6)
  xn, wn = rng.standard_normal((2, 16, 12, 12), dtype=np.float32), rng.standard_normal((16, 16, 3, 3), dtype=np.float32)
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  x.conv2d(w, padding=1).square().sum().backward()
  items = create_schedule([x.grad.uop, w.grad.uop])[0]
  copies = [si for si in items if len(si.bufs) == 2 and si.bufs[0].size == xn.size]
  assert len(copies) == 2, "the output gradient once, and the input gradient from its channels-last buffer"
  tx, tw = torch.tensor(xn, requires_grad=True), torch.tensor(wn, requires_grad=True)
  F.conv2d(tx, tw, padding=1).square().sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-2)

@pytest.mark.parametrize("kw,tpad", [(dict(padding=1), (1, 1, 1, 1)), (dict(padding=(2, 1), dilation=2), (1, 1, 2, 2)),
                                     (dict(padding=(0, 1)), (1, 1, 0, 0)), (dict(padding=2), (2, 2, 2, 2)),
                                     (dict(padding=(1, 2, 0, 1)), (1, 2, 0, 1)), (dict(padding="same"), (1, 1, 1, 1))])
def test_input_gradient_of_a_padded_conv(kw, tpad):
  # symmetric padding within the kernel's span: the gradient of x itself, a transposed conv with that padding (no border
  # computed and cropped); other padding: the padded copy's gradient, cropped. tpad: the same padding for F.pad
  rng = np.random.default_rng(7)
  xn, wn = rng.standard_normal((2, 4, 9, 8), dtype=np.float32), rng.standard_normal((6, 4, 3, 3), dtype=np.float32)
  tx, tw = torch.tensor(xn, requires_grad=True), torch.tensor(wn, requires_grad=True)
  tout = F.conv2d(F.pad(tx, tpad), tw, dilation=kw.get("dilation", 1))
  gn = rng.standard_normal(tuple(tout.shape), dtype=np.float32)
  (tout * torch.tensor(gn)).sum().backward()
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  (x.conv2d(w, **kw) * Tensor(gn)).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-3)

STRIDED = [((2, 3, 11, 11), (8, 3, 3, 3), dict(stride=2, padding=1)), ((2, 4, 12, 9), (6, 4, 1, 1), dict(stride=2)),
           ((1, 3, 13, 10), (4, 3, 5, 5), dict(stride=(3, 2), padding=2)), ((2, 6, 9, 9), (6, 1, 3, 3), dict(stride=2, padding=1, groups=6)),
           ((2, 4, 10, 11), (8, 2, 2, 4), dict(stride=2, groups=2, padding=(1, 0))), ((2, 3, 14), (5, 3, 4), dict(stride=3, padding=1)),
           ((1, 2, 5, 6, 7), (3, 2, 3, 2, 3), dict(stride=2)),
           # phases computed channels last (8 or more input channels a group) and so interleaved: odd sizes, stride 3,
           # groups, padding past the kernel, a 1-d conv
           ((2, 16, 11, 13), (8, 16, 3, 3), dict(stride=2, padding=1)), ((1, 8, 13, 10), (4, 8, 5, 5), dict(stride=(3, 2), padding=(2, 1))),
           ((2, 16, 10, 11), (16, 8, 3, 3), dict(stride=2, groups=2, padding=1)), ((2, 8, 9, 9), (8, 8, 3, 3), dict(stride=2, padding=3)),
           ((2, 8, 17), (16, 8, 3), dict(stride=2, padding=1))]

@pytest.mark.parametrize("xs,ws,kw", STRIDED)
def test_strided_input_gradient_by_phases(xs, ws, kw):
  # the gradient of a strided conv's input is one stride-1 transposed conv per phase of the stride (kernel taps r, r+s,
  # ...), interleaved: against torch, NOOPT and PYTHON, with a phase no tap reaches (1x1 and 2-wide kernels at stride 2
  # or 3) and 1-d and 3-d convs
  rng = np.random.default_rng(8)
  xn, wn = rng.standard_normal(xs, dtype=np.float32), rng.standard_normal(ws, dtype=np.float32)
  conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(xs)]
  tx, tw = torch.tensor(xn, requires_grad=True), torch.tensor(wn, requires_grad=True)
  tout = conv(tx, tw, **kw)
  gn = rng.standard_normal(tuple(tout.shape), dtype=np.float32)
  (tout * torch.tensor(gn)).sum().backward()
  def grads(device):
    x, w = Tensor(xn, device=device, requires_grad=True), Tensor(wn, device=device, requires_grad=True)
    (_fg_conv(kw)(x, w, None) * Tensor(gn, device=device)).sum().backward()
    return x.grad.numpy(), w.grad.numpy()
  got = grads(None)
  np.testing.assert_allclose(got[0], tx.grad.numpy(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(got[1], tw.grad.numpy(), rtol=1e-4, atol=1e-3)
  realize_mod._programs.clear()
  with Context(NOOPT=1): plain = grads(None)
  realize_mod._programs.clear()
  for want in (plain, grads("PYTHON")):
    for a, b in zip(got, want): np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)

def test_strided_input_gradient_writes_no_column_buffer():
  # the composed gradient wrote every tap's product (9x the output gradient for a 3x3 kernel) and summed it into the input
  xs = (2, 8, 16, 16)
  items = _schedule(xs, (16, 8, 3, 3), stride=2, padding=1)
  assert max(b.size for si in items for b in si.bufs) <= 2 * 8 * 18 * 18  # at most the padded input's size (taps: 2 * 8 * 9 * 8 * 8)

WGRAD_CASES = [  # x shape, w shape, kwargs; chunks of 800 floats of output gradient per group (WGRAD_BLOCK is 102400):
  # 100 images x pixels for 8 channels
  ((12, 4, 6, 6), (8, 4, 5, 5), dict(padding=1)),  # 16 pixels: 6 images a chunk, 2 chunks
  ((7, 3, 10, 12), (8, 3, 4, 5), dict(stride=(1, 2), padding=1)),  # 45 pixels: 2 images, but 7 is prime: 7 chunks of 1
  ((4, 8, 9, 9), (16, 4, 5, 4), dict(groups=2, dilation=(1, 2), padding=(2, 3))),
  ((2, 1, 12, 12), (24, 1, 5, 5), dict()),  # 64 pixels x 24 channels: over a chunk, so one image each
  ((3, 2, 6, 6), (8, 2, 5, 5), dict()),  # one chunk
  ((0, 3, 8, 8), (8, 3, 5, 5), dict()),  # no images: no chunks
]

@pytest.mark.parametrize("xs,ws,kw", WGRAD_CASES)
def test_weight_gradient_with_channels_in_lanes_matches_torch(xs, ws, kw, monkeypatch):
  # _wgrad_channels_last (channels in vector lanes, summed in chunks of the batch), called directly so that every host
  # tests it, whatever form its own targets pick; on CPU, NOOPT and PYTHON
  from fusegrad.tensor import nn as tnn
  monkeypatch.setattr(tnn, "WGRAD_BLOCK", 800)
  rng = np.random.default_rng(5)
  xn, wn = rng.standard_normal(xs, dtype=np.float32), rng.standard_normal(ws, dtype=np.float32)
  tx, tw = torch.tensor(xn), torch.tensor(wn, requires_grad=True)
  out = F.conv2d(tx, tw, **kw)
  gn = rng.standard_normal(out.shape, dtype=np.float32)
  out.backward(torch.tensor(gn))
  def pair(key, default):
    v = kw.get(key, default)
    return (v, v) if isinstance(v, int) else v
  for device, noopt in (("CPU", 0), ("CPU", 1), ("PYTHON", 0)):
    realize_mod._programs.clear()
    with Context(NOOPT=noopt):
      xp = Tensor(xn, device=device).pad(((0, 0), (0, 0), *((p, p) for p in pair("padding", 0))))
      got = tnn._wgrad_channels_last(Tensor(gn, device=device), xp, ws, kw.get("groups", 1), pair("stride", 1), pair("dilation", 1)).numpy()
    np.testing.assert_allclose(got, tw.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=f"{device} NOOPT={noopt}")
  realize_mod._programs.clear()

def test_weight_gradient_form_follows_the_targets_registers():
  # channels go in lanes where the kernel's columns make the rows of a matmul register tile: with 16 registers 4 or 5
  # (a 4x4 batch-last tile of a 5x5 kernel spills; 3 rows are too few accumulators, but for strided columns, 7 too many
  # rows), with 32 (AVX-512)
  # 3 to 8; channels must fill vectors, and a chunk of the batch must hold an image's output gradient
  from types import SimpleNamespace
  from fusegrad.tensor.nn import _wgrad_by_channels
  def target(width, regs, threads=False): return SimpleNamespace(simd_width=width, vector_registers=regs, has_threads=threads)
  avx2, avx512, sse, gpu = target(8, 16), target(16, 32), target(4, 16), target(0, 0, True)
  assert _wgrad_by_channels(avx2, 32, (5, 5), (20, 20)) and _wgrad_by_channels(sse, 32, (5, 5), (20, 20))
  assert _wgrad_by_channels(avx2, 32, (5, 4), (20, 20))
  assert not _wgrad_by_channels(avx2, 32, (3, 3), (20, 20)) and not _wgrad_by_channels(avx2, 32, (7, 7), (20, 20))
  assert _wgrad_by_channels(avx2, 32, (3, 3), (20, 20), 2)  # strided columns: batch-last reuses no input vector
  assert not _wgrad_by_channels(avx2, 12, (5, 5), (20, 20))  # channels that do not fill vectors
  assert not _wgrad_by_channels(avx2, 32, (5, 5), (112, 112)) and not _wgrad_by_channels(avx2, 32, (5, 5), (0, 4))
  assert all(_wgrad_by_channels(avx512, 32, (k, k), (20, 20)) for k in (3, 5, 7)) and _wgrad_by_channels(avx512, 16, (3, 3), (8, 8))
  assert not _wgrad_by_channels(avx512, 32, (1, 1), (20, 20)) and not _wgrad_by_channels(avx512, 32, (9, 9), (20, 20))
  assert not _wgrad_by_channels(avx512, 24, (3, 3), (20, 20))
  assert _wgrad_by_channels(avx512, 256, (3, 3), (28, 28)) and not _wgrad_by_channels(avx512, 256, (3, 3), (56, 56))
  assert not _wgrad_by_channels(gpu, 32, (5, 5), (20, 20))

def test_a_realized_channels_last_conv_is_a_view_of_its_buffer():
  # eager conv2d(...).realize() keeps the channels-last result as an NCHW view (no copy kernel); reading it, computing
  # from it, writing into it and its gradient all see NCHW values
  rng = np.random.default_rng(7)
  x, w = rng.standard_normal((2, 8, 6, 6), dtype=np.float32), rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
  want = F.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
  tx, tw = Tensor(x).realize(), Tensor(w, requires_grad=True).realize()
  for _ in range(2):  # the uncached path, then the schedule cache
    out = tx.conv2d(tw, padding=1).realize()
    assert out.uop.op.name == "RESHAPE" and out.uop.src[0].op.name == "PERMUTE"
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.relu().sum((0, 2, 3)).numpy(), np.maximum(want, 0).sum((0, 2, 3)), rtol=1e-4, atol=1e-3)
  out.sum().backward()
  pw = torch.tensor(w, requires_grad=True)
  F.conv2d(torch.tensor(x), pw, padding=1).sum().backward()
  np.testing.assert_allclose(tw.grad.numpy(), pw.grad.numpy(), rtol=1e-4, atol=1e-3)
  out[0, 3] = 0.0
  want[0, 3] = 0.0
  np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
  big = Tensor(rng.standard_normal((2, 8, 12, 12), dtype=np.float32)).conv2d(Tensor(w), padding=1).realize()
  assert str(big).startswith("tensor([[[[")  # over 1000 elements: printed as values, as a computed buffer is

def test_register_tile_takes_the_most_rows_that_divide_the_columns():
  # 20 output columns, 32 channels (two AVX-512 vectors): the budget allows 6 rows, which leave 4 of 24 spare; the
  # tile takes 5 (4 ran MNIST's second forward convolution 8.6 against 7.8 ms). AVX2's 32 channels are 4 vectors,
  # whose budget is 3 rows (one spare of 21)
  from types import SimpleNamespace
  x, w = Tensor.rand(2, 32, 24, 24).realize(), Tensor.rand(32, 32, 5, 5).realize()
  fwd = max(create_schedule([x.conv2d(w).uop])[0], key=lambda si: len(si.ast.toposort()))
  for width, regs, rows in ((16, 32, 5), (8, 16, 3)):
    opt = choose(lower_and_simplify(fwd.ast), SimpleNamespace(simd_width=width, vector_registers=regs))
    assert (opt.kind, opt.arg, opt.upcast) == ("VECTOR", 32, rows), opt

def _reduce_kernel(out: Tensor) -> UOp:
  return [si.ast for si in create_schedule([out.uop])[0] if any(u.op is Ops.REDUCE_AXIS for u in si.ast.toposort())][-1]
def _linear(out: Tensor) -> list[UOp]: return linearize(lower_kernel(_reduce_kernel(out)), Device["CPU"].renderer)

def test_an_in_place_conv_bounds_its_tap_rows_and_peels_its_column_tiles():
  # each tap of a dense conv that reads its padded input in place is gated by its row being inside the image (SKIP):
  # the C loop over tap rows runs only over those (its bounds), with no `continue`, and the tiles of columns past the
  # first and before the last read without tests (the loop in three: first tile, middle ones, last one)
  from fusegrad.renderer.cstyle import bounded_loops, peeled_loops
  out = Tensor.empty(2, 8, 40, 40).conv2d(Tensor.empty(64, 8, 3, 3), padding=1)  # (channels last, as ResNet's)
  uops = _linear(out)
  skips = [u for u in uops if u.op is Ops.SKIP]
  assert skips and all(s.src[1].op is Ops.RANGE and s.src[1].src[0].arg == 3 for s in skips)  # the tap row loop
  bounded = bounded_loops(uops, set())
  assert set(bounded) == {s.src[1] for s in skips}
  peeled = peeled_loops(uops, set(), bounded)
  # the column tests of the loads' gates (the tap rows' are the SKIP's) are constant in the middle tiles
  tests = {c for u in uops if u.op is Ops.LOAD and len(u.src) == 3 for c in conjuncts(u.src[2]) if c.op is not Ops.AND}
  tests -= {c for s in skips for c in conjuncts(s.src[0])}
  assert len(peeled) == 1 and tests and all(t in folded for folded in peeled.values() for t in tests)
  src = _render("CPU", _reduce_kernel(out), None).src
  assert "continue;" not in src and re.search(r"for \(long long ridx\d+ = \(\(0\)>\(1-ridx\d+\)", src)
  n = next(iter(peeled)).src[0].arg
  for lo, hi in ((0, 1), (1, n - 1), (n - 1, n)): assert re.search(rf"ridx\d+ = {lo}; ridx\d+ < {hi};", src)
  # a strided transposed conv's tap loop also skips the zeros between input pixels: that SKIP stays a `continue`
  out = Tensor.empty(1, 8, 10, 10).conv_transpose2d(Tensor.empty(8, 16, 3, 3), stride=2)
  bounded = bounded_loops(uops := _linear(out), set())
  assert bounded and any(u.op is Ops.SKIP and u is not bounded.get(u.src[1], (None,))[0] for u in uops)
  assert "continue;" in _render("CPU", _reduce_kernel(out), None).src

# in place: 3x3s, a 5x3 (tap rows bounded 2 past each edge), 8 and 2 output channels a group, stride 2 in both dims or
# in one, column tiles too few to peel; copied: a 3x5, a dilated 3x3 (both 5 wide)
IN_PLACE = [((2, 5, 14, 16), (16, 5, 3, 3), dict(padding=1), True), ((1, 4, 13, 17), (8, 4, 5, 3), dict(padding=(2, 1)), True),
            ((1, 6, 12, 11), (16, 3, 3, 3), dict(padding=1, groups=2), True), ((2, 5, 15, 14), (8, 5, 3, 3), dict(stride=2, padding=1), True),
            ((1, 4, 14, 13), (12, 4, 3, 3), dict(stride=(2, 1), padding=1), True), ((2, 3, 5, 6), (8, 3, 3, 3), dict(padding=1), True),
            ((1, 3, 9, 7), (64, 3, 3, 3), dict(padding=1), True), ((2, 8, 10, 12), (8, 2, 3, 3), dict(padding=1, groups=4), True),
            ((1, 4, 13, 16), (8, 4, 3, 5), dict(padding=(1, 2)), False), ((1, 6, 16, 14), (8, 3, 3, 3), dict(padding=2, dilation=2, groups=2), False)]

@pytest.mark.parametrize("xs,ws,kw,in_place", IN_PLACE)
def test_dense_convs_read_in_place_match_torch_noopt_and_python(xs, ws, kw, in_place):
  assert _padded_copies(Tensor.empty(*xs).conv2d(Tensor.empty(*ws), **kw)) == (0 if in_place else 1)
  helper_test_op([xs, ws, (ws[0],)], lambda x, w, b: F.conv2d(x, w, b, **kw), _fg_conv(kw), atol=1e-5)
  _match_noopt_and_python(xs, ws, kw, 7)

def test_only_sums_of_gated_values_skip():
  # an iteration is skipped only where everything it adds is 0: not where a padded value has 1 added to it, not in a
  # max (its identity is not 0), and both give the right answer
  xn = -np.arange(1, 1 + 4 * 40, dtype=np.float32).reshape(4, 40)
  x = Tensor(xn).realize()
  def windows(t: Tensor) -> Tensor: return t.pad(((0, 0), (3, 3)))._pool((5,), (1,), (1,))  # (4, 42, 5): zeros past the edges
  npw = np.lib.stride_tricks.sliding_window_view(np.pad(xn, ((0, 0), (3, 3))), 5, axis=1)
  for fn, want in [(lambda t: (windows(t) * 2).sum(-1), (npw * 2).sum(-1)), (lambda t: (windows(t) + 1).sum(-1), (npw + 1).sum(-1)),
                   (lambda t: windows(t).max(-1), npw.max(-1))]:
    np.testing.assert_allclose(fn(x).numpy(), want)
  assert any(u.op is Ops.SKIP for u in _linear((windows(x) * 2).sum(-1)))
  assert not any(u.op is Ops.SKIP for u in _linear((windows(x) + 1).sum(-1)))
  assert not any(u.op is Ops.SKIP for u in _linear(windows(x).max(-1)))

@pytest.mark.parametrize("xs,kw", [((2, 6, 14, 14), dict(padding=1)), ((1, 5, 7, 9), dict(padding=1)), ((2, 3, 13, 5), dict(padding=(2, 1), dilation=2)),
                                   ((2, 4, 30, 30), dict(padding=1)), ((1, 4, 11, 11), dict(stride=2, padding=1))])
def test_masked_tile_tails_match_torch_noopt_and_python(xs, kw, monkeypatch):
  # a tile whose last vector is partly used (14 lanes of 16) computes it whole with the lanes past the tile masked off
  # (AVX2's and AVX-512's choice), forced here on any host (plain SSE's masked loads and stores are lane by lane), and
  # with a padded copy (as a wide target's dense conv reads its input)
  from fusegrad.renderer.cstyle import ClangRenderer
  monkeypatch.setattr(ClangRenderer, "masked_tails", property(lambda self: True))
  import fusegrad.schedule as schedule_mod
  for facts in ((True, True), (True, False)):
    monkeypatch.setattr(schedule_mod, "_target_facts", lambda targets: facts)
    realize_mod._programs.clear()
    test_depthwise_convs_match_torch_noopt_and_python(xs, kw)
  realize_mod._programs.clear()

def test_a_partly_used_vector_is_masked():
  from fusegrad.renderer.cvector import vector_loops
  out = Tensor.empty(2, 8, 14, 14).conv2d(Tensor.empty(8, 1, 3, 3), padding=1, groups=8)
  uops = _linear(out)
  tiles = vector_loops(uops, 16, masked_tail=True)
  assert tiles and all(w == (16,) for w in tiles.values())  # one vector, not 8 + 4 + 2 lanes
  assert all(w == (8, 4, 2) for w in vector_loops(uops, 16).values())
  assert all(w == (8, 8) for w in vector_loops(uops, 8, masked_tail=True).values())  # whole 8-lane vectors
  # a row sum takes the lanes together: its partly used vector would add what the masked lanes hold
  uops = _linear(Tensor.empty(64, 14, 30).sum(-1))
  assert vector_loops(uops, 16, masked_tail=True) == vector_loops(uops, 16)

def _conv_kernel_output(device: str, xs, ws, kw, opt: Opt | None, epilogue: bool) -> np.ndarray:
  """The output of a conv's reduce kernel (with its bias and relu, if `epilogue`) under `opt` (NOOPT where None)."""
  rng = np.random.default_rng(11)
  x, w, b = (Tensor(rng.standard_normal(s, dtype=np.float32), device=device).realize() for s in (xs, ws, ws[:1]))
  y = _fg_conv(kw)(x, w, b if epilogue else None)
  items = create_schedule([(y.relu() if epilogue else y).uop], permuted=True)[0]
  realize_mod.run_schedule(items[:-1])
  si = items[-1]
  mems = [buf.ensure_allocated()._mem for buf in si.bufs]
  with Context(NOOPT=int(opt is None)): get_program(si.device, si.ast, opt)(mems, [])
  return np.frombuffer(bytes(si.bufs[0].as_memoryview()), np.float32).copy()

@pytest.mark.parametrize("xs,ws,kw,opt", [
  ((1, 16, 9, 9), (64, 16, 3, 3), dict(padding=1), Opt("VECTOR", 32, 3, True, kblock=4)),
  ((1, 16, 11, 11), (64, 16, 3, 3), dict(), Opt("VECTOR", 16, 4, kblock=8)),  # 9 columns by 4: the last tile's spare rows
  ((2, 8, 10, 12), (32, 8, 3, 3), dict(padding=1), Opt("VECTOR", 8, 5, True, kblock=2)),  # 12 by 5: two spare rows
  ((1, 12, 9, 14), (32, 12, 5, 3), dict(padding=(2, 1)), Opt("VECTOR", 32, 4, kblock=6)),
])
@pytest.mark.parametrize("epilogue", [False, True])
def test_blocked_reduces_match_noopt_and_python(xs, ws, kw, opt, epilogue):
  # the reduce's outer loop (input channels) in blocks, each adding to the partial sums the last left in the output:
  # spare rows of a clamped tile read and write their row's sums again, and the bias and relu apply to the total only
  want = _conv_kernel_output("CPU", xs, ws, kw, None, epilogue)
  for device in ("CPU", "PYTHON"):
    np.testing.assert_allclose(_conv_kernel_output(device, xs, ws, kw, opt, epilogue), want, rtol=1e-5, atol=1e-4)

def test_reduce_blocks_fit_l1_where_a_row_of_tiles_shares_them():
  # AVX2's 3x3 tile of 32 channels loads 72 KB of a 64-channel conv's weights: blocks of 8 channels (9 KB) serve the
  # row's 19 tiles from L1. AVX-512's 64-channel tile would take blocks of 4 channels, 36 steps, too few; a 10-wide
  # image leaves 3 tiles a row, and a matmul's row of partial sums spans all its rows
  from types import SimpleNamespace
  avx2, avx512 = SimpleNamespace(simd_width=8, vector_registers=16), SimpleNamespace(simd_width=16, vector_registers=32)
  def kblock(out: Tensor, target) -> int: return choose(lower_and_simplify(_reduce_kernel(out)), target).kblock
  conv = Tensor.empty(2, 64, 58, 58).conv2d(Tensor.empty(64, 64, 3, 3))
  assert (kblock(conv, avx2), kblock(conv, avx512)) == (8, 0)
  assert kblock(Tensor.empty(2, 64, 10, 10).conv2d(Tensor.empty(64, 64, 3, 3)), avx2) == 0
  assert kblock(Tensor.empty(256, 256) @ Tensor.empty(256, 256), avx2) == 0

def test_blocked_convs_match_torch_noopt_and_python(monkeypatch):
  # the heuristic's reduce blocks as a target of 16 registers of 8 lanes (AVX2) takes them, on any host: the forward
  # conv and its input gradient (a conv too) against torch, NOOPT and PYTHON. (Without libmvec's vector functions: their
  # 8-lane forms take AVX registers, which a build for an older ISA does not pass them in.)
  cpu = Device["CPU"].renderer
  for fact, value in (("simd_width", 8), ("vector_registers", 16), ("vector_math_lib", False)): monkeypatch.setitem(cpu.__dict__, fact, value)
  realize_mod._programs.clear()
  xs, ws, kw = (2, 32, 5, 14), (32, 32, 3, 3), dict(padding=1)  # 32 channels of 3x3 weights: 36 KB a tile, blocks of 8
  assert choose(lower_and_simplify(_reduce_kernel(Tensor.empty(*xs).conv2d(Tensor.empty(*ws), **kw))), cpu).kblock == 8
  helper_test_op([xs, ws, ws[:1]], lambda x, w, b: F.conv2d(x, w, b, **kw), _fg_conv(kw), atol=1e-4)
  _match_noopt_and_python(xs, ws, kw, 5, tol=5e-4)  # sums of 288 products: NOOPT's own gradients are 2e-4 off float64's
  realize_mod._programs.clear()
