"""Freed device memory is kept per (device, size) for the next buffer of that size, up to ALLOC_CACHE_BYTES, the
memory freed into the least recently used size dropped first."""
import pytest
from fusegrad import device
from fusegrad.device import Buffer
from fusegrad.dtype import dtypes

@pytest.fixture
def small_cache(monkeypatch):
  monkeypatch.setattr(device, "ALLOC_CACHE_BYTES", 64)
  monkeypatch.setattr(device, "_free_lists", {})
  monkeypatch.setattr(device, "_lru", {})
  monkeypatch.setattr(device, "_cached_bytes", 0)

def _alloc(*sizes: int) -> list:
  return [Buffer("PYTHON", n, dtypes.uint8).ensure_allocated() for n in sizes]

def test_a_freed_buffer_is_reused_by_the_next_of_its_size(small_cache):
  bufs = _alloc(16)
  mem = bufs[0]._mem
  del bufs[:]
  assert device._cached_bytes == 16
  again = _alloc(16)
  assert again[0]._mem is mem and device._cached_bytes == 0 and not device._lru

def test_the_cache_stays_under_its_cap_dropping_the_least_recently_freed_size(small_cache):
  bufs = _alloc(32, 16, 32, 48)
  a, b, c = (x._mem for x in bufs[:3])
  dev = bufs[0].device
  for i in range(3): bufs[i] = None  # freed in order: 32, 16, 32 (80 bytes > 64: the 16, freed into least recently, goes)
  assert device._cached_bytes == 64 and device._free_lists[(dev, 32)] == [a, c] and not device._free_lists[(dev, 16)]
  bufs[3] = None  # 48 more: the 32s go, oldest first, until it fits
  assert device._cached_bytes == 48 and device._free_lists[(dev, 32)] == [] and list(device._lru) == [(dev, 48)]
  assert b is not None
