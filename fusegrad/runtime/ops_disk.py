"""DISK device: `DISK:/path/to/file` is a memory-mapped file.

A buffer on DISK is the first `nbytes` of the file, mapped read-only on first use (a missing or shorter file is created or
extended with zeros). A tensor that is a byte range of the file is a `BufferView` (device.py) of that buffer: copying it
to another device reads only those bytes, through the page cache, without loading the whole file into Python memory.
Writes (copyin) go to the file with pwrite, so the shared read-only mapping sees them.

DISK runs no kernels: compute on a DISK tensor raises; move it first with `.to("CPU")`.

Which tensors are byte ranges of a file is decided with the buffer state (fusegrad/buffers.py)."""
from __future__ import annotations
import mmap, os
from fusegrad.renderer import Renderer

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

class DiskRenderer(Renderer):
  def render(self, uops):
    raise RuntimeError(f"{self.device} is a file and runs no kernels; move the tensor to a compute device first, e.g. t.to('CPU')")

class DiskDevice:
  def __init__(self, name: str):
    self.name, self.path = name, name.partition(":")[2]
    self.allocator, self.renderer = DiskAllocator(self.path), DiskRenderer(name)
  def compile(self, spec): raise RuntimeError(f"{self.name} is a file and runs no kernels")
  def synchronize(self): pass

def open_device(name: str) -> DiskDevice: return DiskDevice(name)
