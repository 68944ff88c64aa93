"""Every kernel the op suite builds is also rendered for CUDA and compiled, NVRTC to PTX and ptxas to sm_80 and sm_90
machine code, so the CUDA renderer is proven on the whole op suite without a GPU. Kernels are compiled in batches (one
translation unit each); a kernel that does not compile fails the test during which its batch was compiled, with the
NVRTC or ptxas error, the kernel's source and the tests that built it.

CUDA_COMPILE_CHECK=0 turns this off, =1 (CI) makes a missing NVRTC or ptxas an error; unset, it runs where both exist."""
from __future__ import annotations
import os
import pytest
from fusegrad.codegen import program

BATCH = 128
ARCHS = ("sm_80", "sm_90")

def _tools():
  """(nvrtc_compile, ptxas) or the reason they cannot run here."""
  from fusegrad.runtime import ops_cuda
  try: ops_cuda.nvrtc_compile('extern "C" __global__ void probe(float* a) { a[0] = 1.0f; }')
  except RuntimeError as e: return str(e)
  if ops_cuda.find_ptxas() is None: return "ptxas not found (set CUDA_HOME or put the CUDA toolkit's bin on PATH)"
  return ops_cuda.nvrtc_compile, ops_cuda.ptxas

class CudaCompileCheck:
  def __init__(self, nvrtc_compile, ptxas):
    from fusegrad.renderer.cuda import CUDARenderer
    self.nvrtc_compile, self.ptxas, self.renderer = nvrtc_compile, ptxas, CUDARenderer("CUDA")
    self.pending: dict[str, tuple[str, set[str]]] = {}  # kernel body -> (its name, the tests that built it)
    self.done: set[str] = set()
    self.test = "?"

  def record(self, ast) -> None:
    from fusegrad.codegen.linearize import linearize
    from fusegrad.codegen.lowerer import lower_kernel
    spec = self.renderer.render(linearize(lower_kernel(ast), self.renderer))
    body = spec.src[len(self.renderer.prelude):]
    if body not in self.done: self.pending.setdefault(body, (spec.name, set()))[1].add(self.test)

  def flush(self) -> None:
    """Compile the pending kernels as one unit; on an error, find the kernels that fail on their own and report them."""
    if not self.pending: return
    batch, self.pending = self.pending, {}
    self.done.update(batch)
    if self._compile_error(list(batch.items())) is None: return
    failures = [(err, body, tests) for body, (name, tests) in batch.items() if (err := self._compile_error([(body, (name, tests))])) is not None]
    raise AssertionError("\n\n".join(f"CUDA kernel from {sorted(tests)} does not compile:\n{err}\n--- kernel ---\n{body}" for err, body, tests in failures[:3])
                         or "a batch of CUDA kernels does not compile together, though each one does alone")

  def _compile_error(self, kernels) -> str | None:
    # kernels are renamed k<i>_<name>: two with one name (an E_1 of each dtype) would clash in one unit
    src = self.renderer.prelude + "".join(body.replace(f"void {name}(", f"void k{i}_{name}(", 1) for i, (body, (name, _)) in enumerate(kernels))
    try:
      ptx = self.nvrtc_compile(src)
      for arch in ARCHS: self.ptxas(ptx, arch)
    except RuntimeError as e: return str(e)
    return None

_check: CudaCompileCheck | None = None

def pytest_configure(config):
  global _check
  if (want := os.getenv("CUDA_COMPILE_CHECK", "")) == "0": return
  tools = _tools()
  if isinstance(tools, str):
    if want == "1": raise pytest.UsageError(f"CUDA_COMPILE_CHECK=1 but the CUDA compile check cannot run: {tools}")
    return
  _check = CudaCompileCheck(*tools)
  real = program._render
  def render_and_record(device, ast, opt):
    spec = real(device, ast, opt)  # first: a kernel the device itself rejects raises its own error (tests check them)
    _check.record(ast)
    return spec
  program._render = render_and_record

@pytest.fixture(autouse=True)
def _cuda_compile_check(request):
  if _check is None:
    yield
    return
  _check.test = request.node.nodeid
  yield
  if len(_check.pending) >= BATCH: _check.flush()

@pytest.fixture(autouse=True, scope="session")
def _cuda_compile_check_last():
  yield
  if _check is not None: _check.flush()
