"""NULL device: allocates nothing real and runs nothing; for counting kernels and testing the scheduler."""
from __future__ import annotations
from fusegrad.renderer import ProgramSpec
from fusegrad.renderer.cstyle import ClangRenderer

class NullAllocator:
  def alloc(self, nbytes: int): return nbytes
  def copyin(self, mem, mv: memoryview): pass
  def as_memoryview(self, mem, nbytes: int) -> memoryview: return memoryview(bytearray(nbytes))

class NullProgram:
  def __init__(self, spec: ProgramSpec): self.spec = spec
  def __call__(self, mems, var_vals): pass

class NullDevice:
  # C for an AVX-512 CPU, never compiled: DEBUG=4 shows the code a CPU would get
  def __init__(self, name: str): self.name, self.allocator, self.renderer = name, NullAllocator(), ClangRenderer(name, simd_width=16, vector_registers=32, half_loads=True)
  def compile(self, spec: ProgramSpec) -> NullProgram: return NullProgram(spec)
  def synchronize(self): pass

def open_device(name: str) -> NullDevice: return NullDevice(name)
