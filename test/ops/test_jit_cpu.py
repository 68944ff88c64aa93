"""TinyJit's capture and replay tests (test/unit/test_jit.py, which run on the PYTHON device) on the CPU device, whose
replays call compiled kernels through launchers that keep their ctypes arguments bound and rewrite only swapped buffers."""
from unit.test_jit import *  # noqa: F401,F403  (pytest collects the imported test classes here, on the default device)
from fusegrad import Device

def test_these_run_on_the_cpu():
  assert Device.DEFAULT == "CPU"  # the PYTHON device's fixture lives in test/unit/conftest.py and does not reach here
