"""Devices are plug-ins: fusegrad/runtime/ops_<name>.py is device NAME, found by module; one that cannot run says why."""
import pytest
import fusegrad.runtime
from fusegrad import Device, Tensor
from fusegrad import device as device_mod

@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
  monkeypatch.setattr(fusegrad.runtime, "__path__", [*fusegrad.runtime.__path__, str(tmp_path)])
  device_mod.device_names.cache_clear()
  yield tmp_path
  device_mod.device_names.cache_clear()
  for name in ("FAKE", "BROKEN"): Device._opened.pop(name, None)

def test_a_new_runtime_module_is_a_new_device(plugin_dir):
  (plugin_dir / "ops_fake.py").write_text("from fusegrad.runtime.ops_python import PythonDevice\n"
                                          "def open_device(name): return PythonDevice(name)\n")
  assert "FAKE" in device_mod.device_names() and "FAKE" in Device.get_available_devices()
  assert (Tensor([1.0, 2.0], device="fake") * 3).tolist() == [3.0, 6.0]

def test_a_device_that_cannot_run_is_listed_with_its_reason(plugin_dir):
  (plugin_dir / "ops_broken.py").write_text("def unavailable(): return 'BROKEN needs libbroken.so: install it'\n"
                                            "def open_device(name): raise RuntimeError(unavailable())\n")
  assert "BROKEN" not in Device.get_available_devices()
  assert Device.status()["BROKEN"] == "BROKEN needs libbroken.so: install it"
  with pytest.raises(RuntimeError, match="libbroken"): Tensor([1.0], device="BROKEN").realize()

def test_cpu_without_a_compiler_says_so(monkeypatch):
  monkeypatch.setenv("CC", "/nonexistent/cc")
  assert "no C compiler" in Device.status()["CPU"] and "CPU" not in Device.get_available_devices()

def test_unknown_device_lists_the_real_ones():
  with pytest.raises(ValueError, match="available: CPU, CUDA, DISK, NULL, PYTHON"): Device["NOPE"]
