"""NULL device: allocates nothing real and runs nothing; for counting kernels and testing the scheduler."""
from __future__ import annotations
from fusegrad.renderer import ProgramSpec
from fusegrad.renderer.cstyle import render_c

class NullAllocator:
  def alloc(self, nbytes: int): return nbytes
  def copyin(self, mem, mv: memoryview): pass
  def as_memoryview(self, mem, nbytes: int) -> memoryview: return memoryview(bytearray(nbytes))

class NullProgram:
  def __init__(self, spec: ProgramSpec): self.spec = spec
  def __call__(self, mems, var_vals): pass

class NullDevice:
  def __init__(self, name: str): self.name, self.allocator = name, NullAllocator()
  def render(self, uops) -> ProgramSpec: return render_c(uops)
  def compile(self, spec: ProgramSpec) -> NullProgram: return NullProgram(spec)
  def synchronize(self): pass

def open_device(name: str) -> NullDevice: return NullDevice(name)
