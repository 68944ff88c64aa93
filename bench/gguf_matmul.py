"""GGUF weights in a matmul, three ways, for a 1536x576 weight (SmolLM2's ffn_up/ffn_gate; its torch shape, 576 inputs)
times a 1x576 activation (one decoded token) and a 64x576 one (a prompt):
  raw:      the file's bytes, dequantized inside the matmul (nn.gguf.dequantize fused);
  packed:   codes (4-bit types: two a byte) and per-block scales made once at load (nn.gguf.pack), expanded inside the matmul (the model's
            default where the CPU widens 8-bit ints to floats in one instruction);
  float16:  unpacked once at load into float16 (the model's other choice), the reference column.
The "from DRAM" rows cycle through 32 such weights, more than the caches hold, as decoding a whole model does once per token.

usage: python bench/gguf_matmul.py [Q8_0 Q4_1 ...]   (default Q8_0 Q4_1; fusegrad times are kernel time, GlobalCounters.time_sum_s)"""
import sys
from common import Row, fg_times, check_close, print_table, print_problems, env_info  # first: drops OPENBLAS_* before numpy loads
import numpy as np
from fusegrad import Tensor, GlobalCounters, dtypes
from fusegrad.llm.gguf import dequantize, pack

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

def packed(raw: Tensor, qt: str) -> Tensor:
  """The weight as the model keeps it packed: codes and scales realized, expanded lazily where it is read."""
  return pack(raw, qt, (OUT, IN)).realize().expand()

def dram_rows(qt: str, q: np.ndarray, rng) -> list[Row]:
  raws = [Tensor(q.copy()).realize() for _ in range(CYCLE)]
  packs = [packed(r, qt) for r in raws]
  halves = [dequantize(r, qt).cast(dtypes.float16).realize() for r in raws]
  x = Tensor(rng.standard_normal((1, IN), dtype=np.float32)).realize()
  fused, pk, half = (cycled_s(lambda i: x @ ws[i].T, CYCLE) for ws in ([dequantize(r, qt) for r in raws], packs, halves))
  mb = (CYCLE * q.nbytes / 1e6, CYCLE * OUT * IN * 2 / 1e6)
  return [Row(f"{qt} 1x{IN}, from DRAM: raw ({mb[0]:.0f} MB) vs float16 ({mb[1]:.0f} MB)", fused * 1e6, half * 1e6, "us", False, "float16"),
          Row(f"{qt} 1x{IN}, from DRAM: packed vs float16", pk * 1e6, half * 1e6, "us", False, "float16")]

def rows(qtypes=("Q8_0", "Q4_1"), batches=(1, 64)) -> list[Row]:
  out, rng = [], np.random.default_rng(0)
  for qt in qtypes:
    q = quantized(qt, rng)
    raw = Tensor(q).realize()  # the file's bytes on the device: (1536, bytes per row) uint8
    _, unpack_s, _ = fg_times(lambda: dequantize(raw, qt).cast(dtypes.float16).realize(), 5)
    _, pack_s, _ = fg_times(lambda: pack(raw, qt, (OUT, IN)).realize(), 5)
    half, pk = dequantize(raw, qt).cast(dtypes.float16).realize(), packed(raw, qt)
    want = dequantize(raw, qt).numpy().astype(np.float64)
    for b in batches:
      x = Tensor(rng.standard_normal((b, IN), dtype=np.float32)).realize()
      ways = {"raw": lambda: (x @ dequantize(raw, qt).T).realize(), "packed": lambda: (x @ pk.T).realize(), "float16": lambda: (x @ half.T).realize()}
      for name, f in ways.items(): check_close(f"{qt} {b}x{IN} {name}", f().numpy(), x.numpy().astype(np.float64) @ want.T, rtol=1e-3, atol=1e-3)
      reps = 50 if b == 1 else 10
      times = {name: fg_times(f, reps) for name, f in ways.items()}
      for name in ("raw", "packed"):
        out.append(Row(f"{qt} {b}x{IN} @ {IN}x{OUT}: {name} ({times[name][2]} kernel) vs float16", times[name][1] * 1e6, times["float16"][1] * 1e6, "us", False, "float16"))
    out += dram_rows(qt, q, rng)
    out.append(Row(f"{qt} at load: packing {OUT}x{IN} vs unpacking it to float16", pack_s * 1e6, unpack_s * 1e6, "us", False, "float16"))
  return out

if __name__ == "__main__":
  print(env_info())
  print(cpu_line())
  print_table(rows(tuple(sys.argv[1:]) or ("Q8_0", "Q4_1")))
  print("ratio > 1: that way is faster than reading the weight unpacked to float16 at load")
  print_problems()
