"""Where the native core can be built (a C compiler and Python's headers, as on CI's machines) it is, and without it
(NATIVE=0) the Python versions run."""
import os, shutil, subprocess, sys, sysconfig
from fusegrad import native

def test_the_core_is_built_where_a_compiler_and_headers_are():
  have = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) and any(shutil.which(c) for c in ("cc", "gcc", "clang"))
  if have and os.getenv("NATIVE", "1") != "0": assert native.core is not None, native.why_not

def test_python_versions_run_without_the_core():
  code = ("from fusegrad import Tensor, native; assert native.core is None and native.why_not == 'NATIVE=0';"
          "x = Tensor([1.0, -2.0, 3.0]); print(((x * 2 + 1).relu() - x).clamp(max=2.5).tolist())")
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "NATIVE": "0"}, capture_output=True, text=True, check=True)
  assert out.stdout.strip() == "[2.0, 2.0, 2.5]"
