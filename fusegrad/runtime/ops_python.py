"""PYTHON device: interprets linear UOps in pure Python. Slow, but needs no compiler: the reference for tests."""
from __future__ import annotations
import math
from fusegrad.dtype import dtypes, truncate
from fusegrad.renderer import ProgramSpec
from fusegrad.renderer.python import PythonRenderer, run_python, run_thread

class PythonAllocator:
  def alloc(self, nbytes: int): return bytearray(nbytes)
  def offset(self, mem, byte_offset: int, nbytes: int): return memoryview(mem)[byte_offset:byte_offset + nbytes]
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
        # memoryview has no half, bfloat16 or fp8 format: they are read as raw 16-bit words or bytes and converted per element
        views[u.arg] = memoryview(mems[u.arg]).cast("H" if d in (dtypes.bfloat16, dtypes.float16) else "B" if d in dtypes.fp8s else d.fmt)
    if self.spec.global_size is None: return run_python(self.spec.uops, views, var_vals)
    # a GPU launch, one block at a time; a block's threads run in turns from barrier to barrier (run_thread yields at
    # each), so every one of them has stored before any reads the block's shared memory
    (blocks, _, _), (block, _, _) = self.spec.global_size, self.spec.local_size
    # the last block's spare threads (past gidx0's count) return at once, at no barrier: they are not run here, so a
    # thread that skips a barrier the others reach is still an error
    count = next((u.arg[1] for u in self.spec.uops if u.op is Ops.SPECIAL and u.arg[0] == "gidx0"), blocks * block)
    for b in range(blocks):
      shared: dict = {}
      threads = [run_thread(self.spec.uops, views, var_vals, {"gidx0": b * block + t, "bidx0": b, "lidx0": t}, shared, self.aligned)
                 for t in range(min(block, count - b * block))]
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
      replies = warp_collective(msgs, self.warp) if any(m is not None for m in msgs.values()) else {}

def warp_collective(msgs: dict[int, tuple | None], warp: int) -> dict[int, object]:
  """Every thread of a block at one warp collective ((arg, source values) each, arg naming it): each thread's result."""
  if any(m is None for m in msgs.values()): raise RuntimeError("some threads of a block are at a barrier, others at a warp collective")
  if len(args := {m[0] for m in msgs.values()}) != 1: raise RuntimeError(f"the threads of a block are at different warp collectives: {sorted(args)}")
  kind, *rest = args.pop()
  if kind == "shfl_xor": return shuffle({i: (v[0], rest[0]) for i, (_, v) in msgs.items()}, warp)
  if kind == "mma": return mma_sync({i: v for i, (_, v) in msgs.items()}, warp, rest[0])
  raise NotImplementedError(f"no warp collective {kind!r}")

def shuffle(msgs: dict[int, tuple], warp: int) -> dict[int, object]:
  """A warp shuffle of every thread of a block: thread i gets the value of thread i ^ mask (its warp's lane ^ mask)."""
  if any(m is None for m in msgs.values()): raise RuntimeError("some threads of a block are at a barrier, others at a shuffle")
  out = {}
  for i, (_, mask) in msgs.items():
    if (i // warp) * warp + (i % warp ^ mask) not in msgs: raise RuntimeError(f"thread {i} shuffles with lane {i % warp ^ mask}, which is not running")
    out[i] = msgs[(i // warp) * warp + (i % warp ^ mask)][0]
  return out

def mma_sync(frags: dict[int, list], warp: int, which: int) -> dict[int, float]:
  """PTX mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.f32 of each warp with C = 0: thread i's sources are its
  lane's fragments a0..a7 of A (16 x 16) and b0..b3 of B (16 x 8); it gets element c<which> of D = A @ B. The layout is
  the PTX ISA's ("Matrix Fragments for mma.m16n8k16 with floating point type"), written here from it and not from the
  lowering, so that a lowering that puts a value in the wrong place computes a wrong product here too. With
  groupID = lane >> 2 and threadID_in_group = lane % 4:
    A: row groupID for a0, a1, a4, a5 and groupID + 8 for a2, a3, a6, a7; column threadID_in_group * 2 + (i & 1) for
       a0..a3, and 8 more for a4..a7
    B: row threadID_in_group * 2 + (i & 1) for b0, b1, and 8 more for b2, b3; column groupID
    D: row groupID for c0, c1 and groupID + 8 for c2, c3; column threadID_in_group * 2 + (i & 1)
  The 16-bit inputs' products are exact in float32; the sum is exact here, rounded once to float32 (the hardware's
  accumulation order and rounding may differ in the last bits)."""
  out = {}
  for w in sorted({i // warp for i in frags}):
    if warp != 32 or any(w * 32 + lane not in frags for lane in range(32)): raise RuntimeError(f"mma.sync needs all 32 lanes of warp {w} running")
    a, b = [[None] * 16 for _ in range(16)], [[None] * 8 for _ in range(16)]
    for lane in range(32):
      group, tig, f = lane >> 2, lane % 4, frags[w * 32 + lane]
      if len(f) != 12: raise RuntimeError(f"mma.sync takes 8 values of A and 4 of B a lane, got {len(f)}")
      for i in range(8): a[group if i in (0, 1, 4, 5) else group + 8][tig * 2 + (i & 1) + (8 if i >= 4 else 0)] = f[i]
      for i in range(4): b[tig * 2 + (i & 1) + (8 if i >= 2 else 0)][group] = f[8 + i]
    for lane in range(32):
      row, col = (lane >> 2) + (8 if which >= 2 else 0), (lane % 4) * 2 + (which & 1)
      out[w * 32 + lane] = truncate(dtypes.float32, math.fsum(a[row][j] * b[j][col] for j in range(16)))
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
