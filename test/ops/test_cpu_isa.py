"""CPU_ISA compiles the kernels for a narrower ISA than the host's, so the AVX2 path is tested on an AVX-512 machine."""
import os, subprocess, sys
import pytest
from fusegrad.runtime import ops_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOST = ops_cpu._cpu_flags()

def in_subprocess(isa: str, code: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env={**os.environ, "CPU_ISA": isa})

@pytest.mark.parametrize("isa,march,lanes", [("avx2", "x86-64-v3", 8), ("sse", "x86-64-v2", 4)])
def test_narrower_isa_sets_march_and_vector_width(isa, march, lanes):
  if f" {ops_cpu.CPU_ISAS[isa][-1]}" not in HOST: pytest.skip(f"this CPU has no {ops_cpu.CPU_ISAS[isa][-1]}")
  out = in_subprocess(isa, "from fusegrad.runtime import ops_cpu as o; from fusegrad import Tensor; import numpy as np\n"
                           "print(o.compiler_flags(o.find_compiler())[3], o.CPURenderer('CPU').simd_width)\n"
                           "x = np.arange(40, dtype=np.float32); print(float((Tensor(x).exp() * 2).sum().item() / (np.exp(x) * 2).sum()))")
  flags, ratio = out.stdout.split("\n")[:2]
  assert flags == f"-march={march} {lanes}" and abs(float(ratio) - 1) < 1e-5, out.stderr[-2000:]

def test_unknown_or_unsupported_isa_raises_clearly():
  assert "is not one of native, avx512, avx2, sse" in in_subprocess("avx9", "from fusegrad import Tensor; (Tensor([1.0]) + 1).realize()").stderr
  if " avx512f" not in HOST:
    assert "needs an x86-64 CPU with avx512f" in in_subprocess("avx512", "from fusegrad import Tensor; (Tensor([1.0]) + 1).realize()").stderr

@pytest.mark.skipif(" avx2" not in HOST, reason="this CPU has no AVX2")
def test_kernel_suite_under_avx2():
  # every legal kernel optimization against scalar NOOPT, the known compiler bugs, the random-graph CPU vs PYTHON suite
  # (a compiler can be wrong at one ISA level only) and matmul/conv/reduce ops vs torch, with the kernels built for AVX2
  # (8 lanes) whatever the host has
  files = ["test/ops/test_kernel_opts.py", "test/ops/test_compiler_bugs.py", "test/ops/test_differential.py", "test/ops/test_ops.py",
           "test/ops/test_quantized_loads.py", "test/ops/test_symbolic_shapes.py"]
  out = subprocess.run([sys.executable, "-m", "pytest", *files, "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        "-k", "not test_ops.py or matmul or conv or sum or max or softmax or mean"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "CPU_ISA": "avx2"})
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]

@pytest.mark.skipif(" avx512f" not in HOST, reason="needs a host wider than AVX2")
def test_beam_cache_keys_name_the_target_isa():
  # a kernel BEAM timed on AVX-512 is not the pick for the same kernel built for AVX2: the disk cache keys on the flags
  code = ("from fusegrad import Tensor; from fusegrad.schedule import create_schedule; from fusegrad.codegen.search import ast_key\n"
          "a = Tensor.ones(64, 64).contiguous().realize(); print(ast_key('CPU', create_schedule([(a @ a).uop])[0][-1].ast))")
  keys = {isa: in_subprocess(isa, code).stdout.strip() for isa in ("native", "avx2")}
  assert all(len(k) == 64 for k in keys.values()) and keys["native"] != keys["avx2"], keys
