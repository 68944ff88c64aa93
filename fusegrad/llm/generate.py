"""Text generation: chunked prefill and single-token decode, each one TinyJit whose position is a bound Variable (one
capture serves every position), sampling on the host, and reuse of the KV cache for a prompt that starts like the
previous one (a chat's history is not recomputed)."""
from __future__ import annotations
import heapq, math, random, time
from dataclasses import dataclass, field
from typing import Iterator
from fusegrad import Tensor, TinyJit, Variable
from fusegrad.llm.model import Transformer

@dataclass
class Sampling:
  temperature: float = 0.0       # 0: greedy
  top_k: int = 0                 # 0: off
  top_p: float = 1.0             # 1: off
  min_p: float = 0.0             # 0: off
  repetition_penalty: float = 1.0
  seed: int | None = None
  max_tokens: int = 256
  stop: list[str] = field(default_factory=list)

  def check(self) -> Sampling:
    """Raise ValueError naming the first value out of range (the server turns it into a 400)."""
    rules = [("temperature", self.temperature >= 0 and math.isfinite(self.temperature), ">= 0"), ("top_k", self.top_k >= 0, ">= 0"),
             ("top_p", 0 < self.top_p <= 1, "in (0, 1]"), ("min_p", 0 <= self.min_p <= 1, "in [0, 1]"),
             ("repetition_penalty", self.repetition_penalty > 0, "> 0"), ("max_tokens", self.max_tokens >= 0, ">= 0")]
    for name, ok, want in rules:
      if not ok: raise ValueError(f"{name} must be {want}, got {getattr(self, name)!r}")
    return self

def sample(logits: list[float], s: Sampling, seen: set[int], rng: random.Random) -> int:
  """One token id from the last position's logits."""
  if s.repetition_penalty != 1.0:  # as in CTRL: seen tokens' logits move toward "less likely"
    logits = list(logits)
    for t in seen: logits[t] = logits[t] / s.repetition_penalty if logits[t] > 0 else logits[t] * s.repetition_penalty
  if s.temperature == 0: return max(range(len(logits)), key=logits.__getitem__)
  cand = heapq.nlargest(s.top_k, range(len(logits)), key=logits.__getitem__) if s.top_k else sorted(range(len(logits)), key=logits.__getitem__, reverse=True)
  top = logits[cand[0]]
  probs = [math.exp((logits[t] - top) / s.temperature) for t in cand]
  total = sum(probs)
  probs = [p / total for p in probs]
  keep, acc = 0, 0.0
  for p in probs:  # top-p: the smallest prefix whose mass reaches top_p; min-p: drop what is below min_p x the best
    if keep and (acc >= s.top_p or p < s.min_p * probs[0]): break
    acc += p
    keep += 1
  return rng.choices(cand[:keep], weights=probs[:keep])[0]

class Generator:
  """Generates with one model and its KV cache (batch 1)."""
  def __init__(self, model: Transformer, chunks: tuple[int, ...] = (32, 8, 1)):
    """chunks: the prompt lengths one step takes, longest first, ending in 1 (each is one TinyJit: one set of kernels)."""
    if chunks[-1] != 1: raise ValueError("the last chunk size must be 1 (decoding takes one token per step)")
    self.model, self.chunks = model, chunks
    # a step of n tokens starts where n tokens still fit in the cache: its position's bounds say so
    self._pos = {n: Variable("start_pos", 0, model.cfg.max_context - n) for n in chunks}
    # one capture per attention length (model.attend_len): a step reads only the filled part of the cache, rounded up
    self._steps = {n: TinyJit(lambda toks, pos, attend: self.model(toks, pos, attend).realize()) for n in chunks}
    # a prompt step before the last only fills the cache: its logits (a vocab x dim matmul, 20 of SmolLM2's 227 ms of
    # prefill kernels for 7 steps) are not computed
    self._fills = {n: TinyJit(lambda toks, pos, attend: self.model(toks, pos, attend, logits=False).realize()) for n in chunks}
    self.cached: list[int] = []  # the tokens whose keys and values the cache holds, in order

  def _step(self, tokens: list[int], start: int, logits: bool = True) -> Tensor:
    if len(tokens) not in self._steps: raise ValueError(f"a step takes {' or '.join(map(str, self.chunks))} tokens")
    step = (self._steps if logits else self._fills)[len(tokens)]
    return step(Tensor([tokens]), self._pos[len(tokens)].bind(start), self.model.attend_len(start + len(tokens)))

  def prefill(self, tokens: list[int]) -> Tensor:
    """Fill the cache with tokens (after the prefix it already holds); the logits after the last one."""
    if not tokens: raise ValueError("the prompt is empty")
    if len(tokens) > self.model.cfg.max_context: raise ValueError(f"prompt of {len(tokens)} tokens is longer than the context ({self.model.cfg.max_context})")
    # the cache is reused up to the first token that differs (at least one token is run: its logits are needed)
    same = next((i for i, (a, b) in enumerate(zip(self.cached, tokens)) if a != b), min(len(self.cached), len(tokens)))
    start = min(same, len(tokens) - 1)
    self.cached = tokens[:start]
    logits = None
    while start < len(tokens):
      n = next(c for c in self.chunks if c <= len(tokens) - start)
      logits = self._step(tokens[start:start + n], start, logits=start + n == len(tokens))
      self.cached += tokens[start:start + n]
      start += n
    return logits  # type: ignore[return-value]

  def reset(self) -> None:
    """Forget what the cache holds: the next prompt runs whole."""
    self.cached = []

  def measure(self, prompt: list[int], n_decode: int) -> tuple[float, float, float]:
    """(prefill tokens/s, decode tokens/s, seconds to the first token) of greedy generation after `prompt`, once a
    warm-up has captured every step (so compiling is not timed). Decoding is timed from the first token to the last."""
    for _ in range(2):  # run, then capture, every step the timed runs take (from an empty cache: no prefix reuse)
      self.reset()
      list(self.generate(prompt, Sampling(max_tokens=n_decode)))
    self.reset()
    st = time.perf_counter()
    self.prefill(prompt)
    prefill = time.perf_counter() - st
    self.reset()
    st, first, n = time.perf_counter(), 0.0, 0
    for n, _ in enumerate(self.generate(prompt, Sampling(max_tokens=n_decode)), 1):
      if n == 1: first = time.perf_counter() - st
    return len(prompt) / prefill, (n - 1) / max(time.perf_counter() - st - first, 1e-9), first

  def generate(self, prompt: list[int], s: Sampling, stop_ids: set[int] = frozenset()) -> Iterator[int]:  # type: ignore[assignment]
    """Token ids after the prompt, until a stop id, max_tokens, or the end of the context."""
    s.check()
    rng, seen = random.Random(s.seed), set(prompt)
    logits = self.prefill(prompt)
    for i in range(s.max_tokens):
      tok = int(logits.argmax(-1).item()) if s.temperature == 0 and s.repetition_penalty == 1.0 else sample(logits.tolist()[0], s, seen, rng)
      if tok in stop_ids: return
      yield tok
      seen.add(tok)
      if i == s.max_tokens - 1 or len(self.cached) >= self.model.cfg.max_context: return  # no logits needed after the last one
      logits = self._step([tok], len(self.cached))
      self.cached.append(tok)

def filler_prompt(n: int, first: int) -> list[int]:
  """n fixed, valid token ids (a benchmark's prompt): `first`, then ids in [100, 1100)."""
  return [first] + [(i * 7919) % 1000 + 100 for i in range(n - 1)]
