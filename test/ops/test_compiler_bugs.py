"""Results that a C compiler once got wrong, and the per-compiler self-check that guards against them."""
import numpy as np
import pytest
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
