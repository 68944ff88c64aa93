"""DISK device: `DISK:/path/to/file` is a memory-mapped file.

A buffer on DISK is the first `nbytes` of the file, mapped read-only on first use (a missing or shorter file is created or
extended with zeros). A tensor that is a byte range of the file is a `BufferView` (device.py) of that buffer: copying it
to another device reads only those bytes, through the page cache, without loading the whole file into Python memory.
Writes (copyin) go to the file with pwrite, so the shared read-only mapping sees them.

DISK runs no kernels: compute on a DISK tensor raises; move it first with `.to("CPU")`.

`disk_view(uop)` is the scheduler's hook: it turns RESHAPE/SHRINK/BITCAST chains over a DISK buffer that cover one
contiguous byte range into a BUFFER uop naming a view of that range (or returns None)."""
from __future__ import annotations
import mmap, os, weakref
from fusegrad.uop.ops import Ops, UOp

class DiskMem:
  """A mapping of a file (None when empty) and the byte range [offset, offset + nbytes) of it that a buffer holds."""
  __slots__ = ("mm", "offset", "nbytes", "path")
  def __init__(self, mm: mmap.mmap | None, offset: int, nbytes: int, path: str):
    self.mm, self.offset, self.nbytes, self.path = mm, offset, nbytes, path

class DiskAllocator:
  def __init__(self, path: str): self.path = path
  def alloc(self, nbytes: int) -> DiskMem:
    if not self.path: raise ValueError("a DISK device needs a file: use DISK:/path/to/file")
    try:
      size = os.path.getsize(self.path)
      if size < nbytes:
        with open(self.path, "r+b") as f: f.truncate(nbytes)
    except FileNotFoundError:
      with open(self.path, "wb") as f: f.truncate(nbytes)
    except OSError as e: raise OSError(f"DISK:{self.path}: cannot open the file for a {nbytes}-byte buffer: {e}") from e
    if nbytes == 0: return DiskMem(None, 0, 0, self.path)
    with open(self.path, "rb") as f: mm = mmap.mmap(f.fileno(), nbytes, access=mmap.ACCESS_READ)
    return DiskMem(mm, 0, nbytes, self.path)
  def offset(self, mem: DiskMem, offset: int, nbytes: int) -> DiskMem:
    if offset + nbytes > mem.nbytes: raise ValueError(f"DISK:{self.path}: view [{offset}, {offset + nbytes}) is past the {mem.nbytes}-byte buffer")
    return DiskMem(mem.mm, mem.offset + offset, nbytes, mem.path)
  def copyin(self, mem: DiskMem, mv: memoryview):
    if mv.nbytes == 0: return
    fd = os.open(mem.path, os.O_WRONLY)
    try:
      done = 0
      while done < mv.nbytes: done += os.pwrite(fd, mv[done:], mem.offset + done)
    finally: os.close(fd)
  def as_memoryview(self, mem: DiskMem, nbytes: int) -> memoryview:
    if mem.mm is None or nbytes == 0: return memoryview(b"")
    return memoryview(mem.mm)[mem.offset:mem.offset + nbytes]

class DiskDevice:
  def __init__(self, name: str):
    self.name, self.path = name, name.partition(":")[2]
    self.allocator = DiskAllocator(self.path)
  def render(self, uops):
    raise RuntimeError(f"{self.name} is a file and runs no kernels; move the tensor to a compute device first, e.g. t.to('CPU')")
  def compile(self, spec): raise RuntimeError(f"{self.name} is a file and runs no kernels")
  def synchronize(self): pass

def open_device(name: str) -> DiskDevice: return DiskDevice(name)

# ---------------- byte-range views for the scheduler
_views: "weakref.WeakKeyDictionary[UOp, UOp]" = weakref.WeakKeyDictionary()

def _contiguous_start(shape: tuple[int, ...], arg: tuple[tuple[int, int], ...]) -> int | None:
  """Element offset of SHRINK(arg) of a C-contiguous `shape` if the kept elements are one contiguous run, else None."""
  if any(e == b for b, e in arg): return 0  # empty: any start will do
  # contiguous iff: after the first dim that keeps more than one element, every dim is kept whole
  partial = False
  for (b, e), s in zip(arg, shape):
    if partial and (b, e) != (0, s): return None
    if e - b > 1: partial = True
  start, stride = 0, 1
  for (b, _), s in zip(reversed(arg), reversed(shape)):
    start += b * stride
    stride *= s
  return start

def disk_view(u: UOp) -> UOp | None:
  """A BUFFER uop for u's bytes if u is RESHAPE/SHRINK/BITCAST of a DISK buffer that covers one contiguous byte range."""
  if u.op not in (Ops.RESHAPE, Ops.SHRINK, Ops.BITCAST): return None
  if (hit := _views.get(u)) is not None: return hit
  chain, x = [], u
  while x.op in (Ops.RESHAPE, Ops.SHRINK, Ops.BITCAST):
    chain.append(x)
    x = x.src[0]
  if x.op is not Ops.BUFFER or not str(x.device).startswith("DISK:"): return None
  from fusegrad.device import BufferView
  from fusegrad import schedule as sched
  offset, shape = 0, x.shape  # element offset into the base buffer, current (C-contiguous) shape
  for y in reversed(chain):
    if y.op is Ops.BITCAST and y.dtype.itemsize != y.src[0].dtype.itemsize: return None
    if y.op is Ops.SHRINK:
      if (start := _contiguous_start(shape, y.arg)) is None: return None
      offset += start
    shape = y.shape
  base = sched.buffers.get(x)
  if base is None: return None
  view = BufferView(base, offset * x.dtype.itemsize, u.size, u.dtype)
  ret = _views[u] = sched.new_buffer_uop(u.device, u.size, u.dtype, view)
  return ret
