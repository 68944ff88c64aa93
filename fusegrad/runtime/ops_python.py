"""PYTHON device: interprets linear UOps in pure Python. Slow, but needs no compiler: the reference for tests."""
from __future__ import annotations
from fusegrad.dtype import dtypes
from fusegrad.renderer import ProgramSpec
from fusegrad.renderer.python import PythonRenderer, run_python, run_thread

class PythonAllocator:
  def alloc(self, nbytes: int): return bytearray(nbytes)
  def copyin(self, mem, mv: memoryview): mem[:] = mv
  def as_memoryview(self, mem, nbytes: int) -> memoryview: return memoryview(mem)

class PythonProgram:
  def __init__(self, spec: ProgramSpec, warp: int = 32):
    self.spec, self.warp = spec, warp
    # a GPU launch checks, thread by thread, that the CUDA renderer's float4 loads start at a multiple of 4
    from fusegrad.renderer.cuda import VEC, vector_loads
    self.aligned = {lead: VEC for lead, _ in vector_loads(spec.uops).values()} if spec.global_size is not None else {}
  def __call__(self, mems: list, var_vals: list[int]):
    from fusegrad.uop.ops import Ops
    views = {}
    for u in self.spec.uops:
      if u.op is Ops.DEFINE_GLOBAL:
        d = u.dtype.base
        # memoryview has no half or bfloat16 format: both are read as raw 16-bit words and converted per element
        views[u.arg] = memoryview(mems[u.arg]).cast("H" if d in (dtypes.bfloat16, dtypes.float16) else d.fmt)
    if self.spec.global_size is None: return run_python(self.spec.uops, views, var_vals)
    # a GPU launch, one block at a time; a block's threads run in turns from barrier to barrier (run_thread yields at
    # each), so every one of them has stored before any reads the block's shared memory
    (blocks, _, _), (block, _, _) = self.spec.global_size, self.spec.local_size
    for b in range(blocks):
      shared: dict = {}
      threads = [run_thread(self.spec.uops, views, var_vals, {"gidx0": b * block + t, "bidx0": b, "lidx0": t}, shared, self.aligned)
                 for t in range(block)]
      self._run_block(threads)

  def _run_block(self, threads: list) -> None:
    """Every thread up to its next barrier or warp shuffle, round after round. At a shuffle every thread of the block
    has yielded (value, mask) and gets back the value of lane ^ mask of its own warp."""
    live, replies = dict(enumerate(threads)), {}
    while live:
      msgs = {}
      for i, t in live.items():
        try: msgs[i] = t.send(replies.get(i))
        except StopIteration: pass
      if msgs and len(msgs) != len(live): raise RuntimeError(f"{self.spec.name}: some threads of a block skipped a barrier or shuffle")
      live = {i: live[i] for i in msgs}
      replies = shuffle(msgs, self.warp) if any(m is not None for m in msgs.values()) else {}

def shuffle(msgs: dict[int, tuple], warp: int) -> dict[int, object]:
  """A warp shuffle of every thread of a block: thread i gets the value of thread i ^ mask (its warp's lane ^ mask)."""
  if any(m is None for m in msgs.values()): raise RuntimeError("some threads of a block are at a barrier, others at a shuffle")
  out = {}
  for i, (_, mask) in msgs.items():
    if (i // warp) * warp + (i % warp ^ mask) not in msgs: raise RuntimeError(f"thread {i} shuffles with lane {i % warp ^ mask}, which is not running")
    out[i] = msgs[(i // warp) * warp + (i % warp ^ mask)][0]
  return out

class PythonDevice:
  def __init__(self, name: str, gpu: bool = False):
    """gpu (or DEV=PYTHON:CUDA): lower kernels as for CUDA (renderer/cuda.py's facts) and emulate their launch."""
    from fusegrad.device import Device
    if gpu or Device.renderer_override == "CUDA":
      from fusegrad.renderer.cuda import GPU_FACTS
      self.renderer = PythonRenderer(name, **GPU_FACTS)
    else: self.renderer = PythonRenderer(name)
    self.name, self.allocator = name, PythonAllocator()
  def compile(self, spec: ProgramSpec) -> PythonProgram: return PythonProgram(spec, self.renderer.warp_size or 32)
  def synchronize(self): pass

def open_device(name: str) -> PythonDevice: return PythonDevice(name)
