"""Results that a C compiler once got wrong, and the per-compiler self-check that guards against them."""
import numpy as np
import pytest
import torch
from fusegrad import Tensor, Context
from fusegrad.runtime import ops_cpu

@pytest.mark.parametrize("noopt", [0, 1])
def test_flipped_sum_every_length(noopt):
  # gcc 12.2 -O3 summed arange(10).flip(0) to 53: 33 of the lengths 1..79 were wrong
  with Context(NOOPT=noopt):
    got = [Tensor(np.arange(n, dtype=np.float32)).flip(0).sum().item() for n in range(1, 80)]
  assert got == [n * (n - 1) / 2 for n in range(1, 80)]

@pytest.mark.parametrize("shape", [(6, 2), (64, 64), (7, 3), (5, 9), (3, 10)])
def test_flipped_2d_sum_and_mean(shape):
  x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
  for axis in (0, 1):
    np.testing.assert_allclose(Tensor(x).flip(axis).sum().item(), x.sum(), rtol=1e-6)
    np.testing.assert_allclose(Tensor(x).flip(axis).mean().item(), x.mean(), rtol=1e-6)
    np.testing.assert_allclose(Tensor(x).flip(axis).sum(axis).numpy(), x.sum(axis), rtol=1e-6)

def test_self_check_catches_a_miscompiled_pattern():
  # the check must fail for a compiler/flags pair that gets a known pattern wrong: fake one that "computes" garbage
  bad = ("void k(float* restrict out, const float* restrict in, int n) { out[0] = 53.0f; }", 10, 45.0)
  orig = ops_cpu.KNOWN_MISCOMPILES
  try:
    ops_cpu.KNOWN_MISCOMPILES = [bad]
    with pytest.raises(RuntimeError, match="miscompiles a known pattern"): ops_cpu.check_compiler(ops_cpu.find_compiler(), tuple(ops_cpu.CFLAGS))
  finally: ops_cpu.KNOWN_MISCOMPILES = orig

def test_chosen_flags_pass_the_self_check():
  cc = ops_cpu.find_compiler()
  ops_cpu.check_compiler(cc, ops_cpu.compiler_flags(cc))

@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_two_strided_reads_of_one_buffer(dtype):
  # gcc 12.2 (-O1 and up) dropped the kernel call from its task wrapper: after induction-variable optimization rewrote the
  # store's address, interprocedural analysis took the static kernel for one without side effects, and the output kept
  # whatever the buffer held (zeros). 4 of 82 random pairs of strided rows of a (3, 4, 5) tensor were wrong
  xn = (np.arange(60) % 50).astype(dtype).reshape(3, 4, 5)
  x = Tensor(xn).realize()
  for i, j in [((slice(1, 3), 2, 0), (2, slice(2, 4), 4)), ((2, slice(1, 4), 2), (slice(None), 1, 2)),
               ((slice(0, 2), 3, 3), (0, slice(1, 3), 1))]:
    np.testing.assert_array_equal((x[i] + x[j]).numpy(), xn[i] + xn[j], err_msg=f"x[{i}] + x[{j}]")

# ======================================================================== float16 values cast in a vector loop, then selected
def _where(m, a, b): return torch.where(m, a, b) if isinstance(m, torch.Tensor) else m.where(a, b)

@pytest.mark.parametrize("make", [
  lambda x, m: _where(m, x.half(), 0),
  lambda x, m: _where(m, x.half(), x.half() * 2),
  lambda x, m: x.half().masked_fill(m, 3.0),
  lambda x, m: (_where(m, x.half(), 0).float() * 3).sum(-1),
  lambda x, m: _where(m, x.half(), 0).sum(-1),
  lambda x, m: _where(m, x.half(), x.half() * 2).sum(-1),
])
def test_float16_cast_then_where(make):
  """The vector renderer selected between float16 bits (a cast in the loop) and float32 values: gcc refused the kernel."""
  rng = np.random.default_rng(0)
  xn, mn = (rng.standard_normal((5, 37)) * 100).astype(np.float32), rng.random((5, 37)) > 0.5
  got = make(Tensor(xn), Tensor(mn)).numpy()
  want = make(torch.tensor(xn), torch.tensor(mn)).numpy()
  np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3)
