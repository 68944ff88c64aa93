"""GGUF weights in a matmul: dequantized inside the matmul that reads them (fused, the weight stays quantized in memory)
vs dequantized once at load (the weight becomes float32), for a 1536x576 weight (SmolLM2's ffn_up/ffn_gate; its torch
shape, 576 inputs) times a 1x576 activation (one decoded token) and a 64x576 one (a prompt). The "from DRAM" rows cycle
through 32 such weights, more than the caches hold unpacked, as decoding a whole model does once per token.

usage: python bench/gguf_matmul.py [Q8_0 Q4_1 ...]   (default Q8_0 Q4_1; fusegrad times are kernel time, GlobalCounters.time_sum_s)"""
import sys
from common import Row, fg_times, check_close, print_table, print_problems, env_info  # first: drops OPENBLAS_* before numpy loads
import numpy as np
from fusegrad import Tensor, GlobalCounters
from fusegrad.llm.gguf import dequantize

OUT, IN, CYCLE = 1536, 576, 32

def quantized(qtype: str, rng) -> np.ndarray:
  import gguf  # the reference quantizer (pip install gguf)
  w = rng.standard_normal((OUT, IN), dtype=np.float32) * 0.05
  return gguf.quants.quantize(w, gguf.GGMLQuantizationType[qtype])

def cpu_line() -> str:
  """The CPU model and widest x86 vector ISA, so numbers from different machines are not compared blindly."""
  try: info = open("/proc/cpuinfo").read()
  except OSError: return "cpu: unknown"
  model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "unknown")
  isa = next((i for i in ("avx512f", "avx2", "sse4_2") if f" {i}" in info), "other")
  return f"cpu: {model} ({isa})"

def cycled_s(make, n: int, reps: int = 3) -> float:
  """Best kernel seconds per matmul when running make(0), ..., make(n-1) in turn: each weight is evicted before its next use."""
  for i in range(n): make(i).realize()
  best = float("inf")
  for _ in range(reps):
    GlobalCounters.reset()
    for i in range(n): make(i).realize()
    best = min(best, GlobalCounters.time_sum_s / n)
  return best

def dram_row(qt: str, q: np.ndarray, rng) -> Row:
  raws = [Tensor(q.copy()).realize() for _ in range(CYCLE)]
  ws = [dequantize(r, qt).realize() for r in raws]
  x = Tensor(rng.standard_normal((1, IN), dtype=np.float32)).realize()
  fused, once = cycled_s(lambda i: x @ dequantize(raws[i], qt).T, CYCLE), cycled_s(lambda i: x @ ws[i].T, CYCLE)
  mb = (CYCLE * q.nbytes / 1e6, CYCLE * OUT * IN * 4 / 1e6)
  return Row(f"{qt} 1x{IN} @ {IN}x{OUT}, from DRAM ({mb[0]:.0f} MB vs {mb[1]:.0f} MB)", fused * 1e6, once * 1e6, "us", False, "unpacked once")

def rows(qtypes=("Q8_0", "Q4_1"), batches=(1, 64)) -> list[Row]:
  out, rng = [], np.random.default_rng(0)
  for qt in qtypes:
    q = quantized(qt, rng)
    raw = Tensor(q).realize()  # the file's bytes on the device: (1536, bytes per row) uint8
    _, unpack_s, _ = fg_times(lambda: dequantize(raw, qt).realize(), 5)
    w = dequantize(raw, qt).realize()
    wnp = w.numpy()
    for b in batches:
      x = Tensor(rng.standard_normal((b, IN), dtype=np.float32)).realize()
      fused, once = lambda: (x @ dequantize(raw, qt).T).realize(), lambda: (x @ w.T).realize()
      check_close(f"{qt} {b}x{IN} fused", fused().numpy(), x.numpy().astype(np.float64) @ wnp.T.astype(np.float64), rtol=1e-4, atol=1e-4)
      reps = 50 if b == 1 else 10
      _, f_s, f_k = fg_times(fused, reps)
      _, o_s, o_k = fg_times(once, reps)
      out.append(Row(f"{qt} {b}x{IN} @ {IN}x{OUT}: fused ({f_k} kernel) vs unpacked once", f_s * 1e6, o_s * 1e6, "us", False, "unpacked once"))
    out.append(dram_row(qt, q, rng))
    out.append(Row(f"{qt} unpacking {OUT}x{IN} once (at load)", unpack_s * 1e6, None, "us", False, "-"))
  return out

if __name__ == "__main__":
  print(env_info())
  print(cpu_line())
  print_table(rows(tuple(sys.argv[1:]) or ("Q8_0", "Q4_1")))
  print("ratio > 1: fusing the dequantization into the matmul is faster than reading the float32 weight unpacked at load")
  print_problems()
