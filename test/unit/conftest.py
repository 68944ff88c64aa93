import pytest
from fusegrad.device import Device

@pytest.fixture(autouse=True)
def python_device():
  """Every unit test runs on the pure-Python interpreter, so no C compiler is needed; other test folders keep their default."""
  prev = Device.DEFAULT
  Device.DEFAULT = "PYTHON"
  try: yield
  finally: Device.DEFAULT = prev
