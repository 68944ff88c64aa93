"""Random-number state, one owner: a seed and a count of the numbers drawn so far. Tensor.rand draws through here, and
TinyJit reads and advances it so a replay produces the numbers a real run would have."""
from __future__ import annotations
from fusegrad.uop.ops import UOp, Variable

class _State:
  seed, counter = 0, 0

def manual_seed(seed: int) -> None: _State.seed, _State.counter = int(seed) & 0xffffffff, 0
def seed() -> int: return _State.seed
def counter() -> int: return _State.counter
def advance(n: int) -> int:
  """Reserve n numbers; returns the offset of the first."""
  offset, _State.counter = _State.counter, _State.counter + n
  return offset

# the low 31 bits of a draw's offset are a bound variable, so each draw reuses one compiled kernel; a replay rebinds it
OFFSET_VAR = "rng_offset"
def offset_var(offset: int) -> UOp: return Variable(OFFSET_VAR, 0, 2**31 - 1).bind(offset & 0x7fffffff)
def is_offset_var(var: UOp) -> bool: return var.arg[0] == OFFSET_VAR
def replayed_offset(captured: int, shift: int) -> int: return (captured + shift) & 0x7fffffff
