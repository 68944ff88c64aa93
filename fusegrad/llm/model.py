"""Decoder-only transformers: the LLaMA family (LLaMA 2/3, SmolLM, TinyLlama), Qwen2 (q/k/v bias), Qwen3 (q/k norm) and
Qwen3-MoE (a mixture of experts in place of the feed-forward).

RMSNorm, rotary position embedding (with LLaMA 3's frequency scaling), grouped-query attention, a SwiGLU feed-forward,
tied or separate output embeddings. Each layer keeps a preallocated KV cache of `max_context` positions. The position
is a bound Variable inside a TinyJit, never a shape: a step writes its keys and values into
`cache[:, :, start_pos:start_pos+T]` (a fixed-size slice at a Variable, written in place) and attends over the first
`attend` positions of the cache under a causal mask, so one compiled step serves every position up to `attend`."""
from __future__ import annotations
import math
from dataclasses import dataclass, field
from typing import Any
from fusegrad import Tensor, dtypes
from fusegrad.uop.ops import Ops
from fusegrad.buffers import buffer_view

@dataclass(frozen=True)
class Config:
  arch: str
  dim: int
  n_layers: int
  n_heads: int
  n_kv_heads: int
  hidden_dim: int
  vocab_size: int
  head_dim: int = 0            # 0: dim // n_heads
  norm_eps: float = 1e-5
  rope_theta: float = 10000.0
  rope_scaling: dict = field(default_factory=dict)  # LLaMA 3: {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}
  rope_interleaved: bool = False  # GGUF's LLaMA weights rotate adjacent pairs; Hugging Face's rotate the two halves
  qkv_bias: bool = False
  qk_norm: bool = False
  tied_embeddings: bool = False
  max_context: int = 2048
  n_experts_used: int = 0        # mixture of experts: experts per token (the expert count is in the weights' shapes)
  norm_topk: bool = True         # the chosen experts' router weights are renormalized to sum to 1

  @property
  def hd(self) -> int: return self.head_dim or self.dim // self.n_heads

  @staticmethod
  def from_gguf(md: dict[str, Any], max_context: int, tied: bool) -> Config:
    arch = md["general.architecture"]
    if arch not in ("llama", "qwen2", "qwen3", "qwen3moe"): raise ValueError(f"GGUF architecture {arch!r} is not supported (supported: llama, qwen2, qwen3, qwen3moe)")
    g = lambda k, d=None: md.get(f"{arch}.{k}", d)  # noqa: E731
    n_heads = g("attention.head_count")
    scaling = {}
    if g("rope.scaling.type") == "llama3" or g("rope.scaling.factor") and arch == "llama" and g("rope.scaling.original_context_length"):
      scaling = {"factor": g("rope.scaling.factor"), "low_freq_factor": g("rope.scaling.low_freq_factor", 1.0),
                 "high_freq_factor": g("rope.scaling.high_freq_factor", 4.0), "original_max_position_embeddings": g("rope.scaling.original_context_length")}
    return Config(arch, g("embedding_length"), g("block_count"), n_heads, g("attention.head_count_kv", n_heads), g("feed_forward_length"),
                  len(md["tokenizer.ggml.tokens"]) if "tokenizer.ggml.tokens" in md else g("vocab_size"), g("attention.key_length", 0),
                  g("attention.layer_norm_rms_epsilon", 1e-5), g("rope.freq_base", 10000.0), scaling, arch == "llama",
                  arch == "qwen2", arch in ("qwen3", "qwen3moe"), tied, min(max_context, g("context_length", max_context)), g("expert_used_count", 0),
                  g("expert_weights_norm", True))

  @staticmethod
  def from_hf(cfg: dict[str, Any], max_context: int) -> Config:
    kind = cfg.get("model_type", "llama")
    if kind not in ("llama", "qwen2", "qwen3", "qwen3_moe"): raise ValueError(f"model_type {kind!r} is not supported (supported: llama, qwen2, qwen3, qwen3_moe)")
    if kind == "qwen3_moe" and (cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1):
      raise ValueError("qwen3_moe with dense layers (mlp_only_layers, decoder_sparse_step != 1) is not supported")
    # transformers 5 writes rope_parameters (with the theta inside); older configs rope_scaling and rope_theta
    rs = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    kind_of_rope = rs.get("rope_type", rs.get("type", "default"))
    if kind_of_rope not in ("default", "llama3"): raise ValueError(f"rope type {kind_of_rope!r} is not supported (supported: default, llama3)")
    scaling = {k: rs[k] for k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")} if kind_of_rope == "llama3" else {}
    return Config(kind, cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
                  cfg["intermediate_size"], cfg["vocab_size"], cfg.get("head_dim") or 0, cfg.get("rms_norm_eps", 1e-6), cfg.get("rope_theta", rs.get("rope_theta", 10000.0)),
                  scaling, False, kind == "qwen2" or cfg.get("attention_bias", False), kind in ("qwen3", "qwen3_moe"), cfg.get("tie_word_embeddings", False),
                  min(max_context, cfg.get("max_position_embeddings", max_context)), cfg.get("num_experts_per_tok", 0), cfg.get("norm_topk_prob", True))

def rope_frequencies(cfg: Config) -> list[float]:
  """The rotation frequency of each pair of a head's dims, with LLaMA 3's scaling of the long wavelengths."""
  freqs = [cfg.rope_theta ** (-2 * i / cfg.hd) for i in range(cfg.hd // 2)]
  if not cfg.rope_scaling: return freqs
  s = cfg.rope_scaling
  lo, hi = s["original_max_position_embeddings"] / s["low_freq_factor"], s["original_max_position_embeddings"] / s["high_freq_factor"]
  def scale(f: float) -> float:
    wavelen = 2 * math.pi / f
    if wavelen < hi: return f
    if wavelen > lo: return f / s["factor"]
    smooth = (s["original_max_position_embeddings"] / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
    return (1 - smooth) * f / s["factor"] + smooth * f
  return [scale(f) for f in freqs]

def rms_norm(x: Tensor, w: Tensor, eps: float) -> Tensor: return x.float().rms_norm(eps=eps).cast(x.dtype) * w

def rotate(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
  """x (B, H, T, hd) rotated by the angles whose cos/sin are (T, hd/2)."""
  if interleaved:  # pairs (2i, 2i+1)
    pairs = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    return (a * cos - b * sin).unsqueeze(-1).cat((a * sin + b * cos).unsqueeze(-1), dim=-1).flatten(-2)
  half = x.shape[-1] // 2  # halves (i, i + hd/2)
  a, b = x[..., :half], x[..., half:]
  return (a * cos - b * sin).cat(b * cos + a * sin, dim=-1)

class Transformer:
  """`model(tokens, start_pos) -> logits of the last position` (B, vocab). tokens: (B, T) int Tensor; start_pos: int or
  bound Variable. The weights are a dict of Tensors by GGUF names (`blk.0.attn_q.weight`, ...)."""
  def __init__(self, cfg: Config, weights: dict[str, Tensor], batch: int = 1, cache_dtype=dtypes.float32):
    self.cfg, self.w = cfg, weights
    if "output.weight" not in weights: self.w["output.weight"] = weights["token_embd.weight"]  # tied embeddings
    dev = weights["token_embd.weight"].device
    freqs = Tensor(rope_frequencies(cfg), device=dev)
    angles = Tensor.arange(cfg.max_context, device=dev).float().reshape(-1, 1) * freqs.reshape(1, -1)
    self.cos, self.sin = angles.cos().contiguous().realize(), angles.sin().contiguous().realize()
    shape = (batch, cfg.n_kv_heads, cfg.max_context, cfg.hd)
    self.cache_k = [Tensor.zeros(*shape, dtype=cache_dtype, device=dev).contiguous().realize() for _ in range(cfg.n_layers)]
    self.cache_v = [Tensor.zeros(*shape, dtype=cache_dtype, device=dev).contiguous().realize() for _ in range(cfg.n_layers)]

  def attend_len(self, end: int) -> int:
    """The cache positions a step whose tokens end at position `end` (exclusive) attends over: `end` rounded up to a power
    of two (at least 64), so a conversation passes through a few sizes, each one set of compiled kernels."""
    return min(self.cfg.max_context, max(64, 1 << max(end - 1, 0).bit_length()))

  @staticmethod
  def from_gguf(path: str, max_context: int = 2048, device: str | None = None) -> Transformer: return load_gguf(path, max_context, device)[0]
  @staticmethod
  def from_hf(folder: str, max_context: int = 2048, device: str | None = None) -> Transformer: return load_hf(folder, max_context, device)

  def weight_bytes(self) -> int:
    """The bytes the weights take in memory (a packed weight's codes and scales, not its expanded values)."""
    from fusegrad.buffers import buffer_of
    bufs = {id(b): b for w in self.w.values() for u in w.uop.toposort() if u.op is Ops.BUFFER and (b := buffer_of(u)) is not None}
    return sum(b.nbytes for b in bufs.values())
  def linear(self, x: Tensor, name: str) -> Tensor:
    w = self.w[f"{name}.weight"]
    # a packed weight (lazy: expanded where it is read) is expanded into a buffer first for several tokens, whose matmul
    # would otherwise expand each block once per tile of tokens (float32: that kernel runs as SIMD vectors)
    if x.shape[-2] > 1 and buffer_view(w.uop) is None: w = w.contiguous()
    y = x @ w.T
    return y + self.w[f"{name}.bias"] if f"{name}.bias" in self.w else y

  def attention(self, i: int, x: Tensor, start_pos, cos: Tensor, sin: Tensor, mask: Tensor) -> Tensor:
    """Attends over the first mask.shape[-1] cache positions (all of them, or a bucket that covers the filled part)."""
    cfg, p = self.cfg, f"blk.{i}"
    B, T, _ = x.shape
    q = self.linear(x, f"{p}.attn_q").reshape(B, T, cfg.n_heads, cfg.hd).transpose(1, 2)
    k = self.linear(x, f"{p}.attn_k").reshape(B, T, cfg.n_kv_heads, cfg.hd).transpose(1, 2)
    v = self.linear(x, f"{p}.attn_v").reshape(B, T, cfg.n_kv_heads, cfg.hd).transpose(1, 2)
    if cfg.qk_norm: q, k = rms_norm(q, self.w[f"{p}.attn_q_norm.weight"], cfg.norm_eps), rms_norm(k, self.w[f"{p}.attn_k_norm.weight"], cfg.norm_eps)
    q, k = rotate(q, cos, sin, cfg.rope_interleaved), rotate(k, cos, sin, cfg.rope_interleaved)
    self.cache_k[i][:, :, start_pos:start_pos + T].assign(k)  # at a bound Variable: one kernel for every position
    self.cache_v[i][:, :, start_pos:start_pos + T].assign(v)
    rep, L = cfg.n_heads // cfg.n_kv_heads, mask.shape[-1]
    keys = self.cache_k[i][:, :, :L].float().reshape(B, cfg.n_kv_heads, 1, L, cfg.hd).expand(B, cfg.n_kv_heads, rep, L, cfg.hd).reshape(B, cfg.n_heads, L, cfg.hd)
    vals = self.cache_v[i][:, :, :L].float().reshape(B, cfg.n_kv_heads, 1, L, cfg.hd).expand(B, cfg.n_kv_heads, rep, L, cfg.hd).reshape(B, cfg.n_heads, L, cfg.hd)
    scores = (q @ keys.transpose(2, 3)) * (1 / math.sqrt(cfg.hd))
    out = mask.where(scores, -math.inf).softmax(-1) @ vals
    return self.linear(out.transpose(1, 2).reshape(B, T, cfg.n_heads * cfg.hd), f"{p}.attn_output")

  def feed_forward(self, i: int, x: Tensor) -> Tensor:
    p = f"blk.{i}"
    if f"{p}.ffn_gate_inp.weight" in self.w: return self.experts(i, x)
    return self.linear(self.linear(x, f"{p}.ffn_gate").silu() * self.linear(x, f"{p}.ffn_up"), f"{p}.ffn_down")

  def experts(self, i: int, x: Tensor) -> Tensor:
    """Mixture of experts: the router picks n_experts_used experts per token (softmax, top-k, renormalized), and only
    those experts' weights are read (gathered by the chosen ids), each a SwiGLU feed-forward."""
    p, (B, T, D), k = f"blk.{i}", x.shape, self.cfg.n_experts_used
    xs = x.reshape(B * T, D)
    probs = (xs @ self.w[f"{p}.ffn_gate_inp.weight"].T).float().softmax(-1)
    weight, chosen = probs.topk(k, -1)                                            # (N, k)
    if self.cfg.norm_topk: weight = weight / weight.sum(-1, keepdim=True)
    def apply(name: str, v: Tensor) -> Tensor:  # v (N, k, in) through each token's chosen experts' (out, in) weights
      return (v.unsqueeze(2) * self.w[f"{p}.{name}.weight"][chosen]).sum(-1)      # (N, k, 1, in) * (N, k, out, in)
    xk = xs.unsqueeze(1).expand(B * T, k, D)
    h = apply("ffn_gate_exps", xk).silu() * apply("ffn_up_exps", xk)
    return (apply("ffn_down_exps", h) * weight.unsqueeze(-1).cast(x.dtype)).sum(1).reshape(B, T, D)

  def __call__(self, tokens: Tensor, start_pos, attend: int | None = None, logits: bool = True) -> Tensor:
    """attend: how many cache positions attention reads (default: all of them); at least the last token's position + 1.
    Reading only the filled part (rounded up, see attend_len) keeps a short chat from paying for the whole context.
    logits=False fills the cache and returns the last position's normed hidden state, without the output matmul (a
    prompt step whose logits nobody reads)."""
    cfg = self.cfg
    B, T = tokens.shape
    L = cfg.max_context if attend is None else attend
    if not 0 < L <= cfg.max_context: raise ValueError(f"attend={attend} must be in [1, max_context={cfg.max_context}]")
    positions = Tensor.arange(T, device=tokens.device) + Tensor(start_pos, device=tokens.device)
    cos, sin = self.cos[positions], self.sin[positions]
    mask = Tensor.arange(L, device=tokens.device).reshape(1, -1) <= positions.reshape(-1, 1)  # (T, L): causal over the cache
    h = self.w["token_embd.weight"][tokens].float()
    # the residual stream gets a buffer at each add: fused, every later kernel that reads h would recompute the sum of
    # all the layers' outputs before it (the 30th layer's norms added 60 terms per element)
    for i in range(cfg.n_layers):
      h = (h + self.attention(i, rms_norm(h, self.w[f"blk.{i}.attn_norm.weight"], cfg.norm_eps), start_pos, cos, sin, mask)).contiguous()
      h = (h + self.feed_forward(i, rms_norm(h, self.w[f"blk.{i}.ffn_norm.weight"], cfg.norm_eps))).contiguous()
    last = rms_norm(h[:, -1, :], self.w["output_norm.weight"], cfg.norm_eps)
    return self.linear(last, "output").float() if logits else last

# Hugging Face parameter names -> GGUF's (the model keeps one naming)
HF_NAMES = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
HF_LAYER = {"mlp.gate": "ffn_gate_inp", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
            "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
            "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}

def gguf_name(hf: str) -> str:
  """model.layers.3.self_attn.q_proj.weight -> blk.3.attn_q.weight; one expert's weight (mlp.experts.E.gate_proj) names
  its slice of the stacked experts: blk.3.ffn_gate_exps.weight.E"""
  base, _, kind = hf.rpartition(".")
  if base in HF_NAMES: return f"{HF_NAMES[base]}.{kind}"
  parts = base.split(".")
  if parts[:2] == ["model", "layers"] and parts[3:5] == ["mlp", "experts"] and len(parts) == 7:
    return f"blk.{parts[2]}.ffn_{parts[6].removesuffix('_proj')}_exps.{kind}.{parts[5]}"
  if parts[:2] != ["model", "layers"] or ".".join(parts[3:]) not in HF_LAYER: raise KeyError(f"unexpected parameter {hf!r}")
  return f"blk.{parts[2]}.{HF_LAYER['.'.join(parts[3:])]}.{kind}"

def load_hf(folder: str, max_context: int = 2048, device: str | None = None) -> Transformer:
  """A Hugging Face checkpoint folder: config.json and model.safetensors (or shards listed in model.safetensors.index.json)."""
  import json, os
  from fusegrad.nn.state import safe_load
  with open(os.path.join(folder, "config.json")) as f: cfg = Config.from_hf(json.load(f), max_context)
  index = os.path.join(folder, "model.safetensors.index.json")
  if os.path.exists(index):
    with open(index) as f: files = sorted(set(json.load(f)["weight_map"].values()))
  else: files = ["model.safetensors"]
  weights, experts = {}, {}
  for name in files:
    for k, v in safe_load(os.path.join(folder, name)).items():
      if k.endswith("rotary_emb.inv_freq"): continue
      base, _, e = (n := gguf_name(k)).rpartition(".")
      if "_exps." in n: experts.setdefault(base, {})[int(e)] = v.to(device).float()
      else: weights[n] = v.to(device).float().realize()
  for base, parts in experts.items(): weights[base] = Tensor.stack(*[parts[e] for e in range(len(parts))]).realize()  # (experts, out, in), as GGUF stores them
  return Transformer(cfg, weights)

def load_gguf(path: str, max_context: int = 2048, device: str | None = None, dtype=None, packed: bool | None = None) -> tuple[Transformer, dict]:
  """A GGUF file (or the first of split files): the model and the file's metadata (which holds the tokenizer).
  packed (default: where the target converts 8-bit ints to float vectors in one instruction, as it does halves): the
  quantized matrices stay packed, 0.6 to 1.1 bytes a value (`nn.gguf.pack`), and each matmul expands the blocks it reads,
  so a decoded token reads a third to a half of the bytes of float16 weights; a prompt's matmuls expand them into
  float32 buffers first. Otherwise they are unpacked once, here, into dtype (default float16 where the target loads
  half vectors in one instruction, else float32). Norms and biases stay float32, and all math is float32."""
  import os, sys
  from fusegrad.helpers import tqdm
  from fusegrad.llm.gguf import PACKED_TYPES, pack, read_gguf
  from fusegrad import Device
  f, fast = read_gguf(path), Device[device or Device.DEFAULT].renderer.half_loads
  if dtype is None: dtype = dtypes.float16 if fast else dtypes.float32
  if packed is None: packed = fast
  def weight(name: str) -> Tensor:
    info = f.tensors[name]
    if packed and len(info.shape) >= 2 and info.ggml_type.name in PACKED_TYPES:
      return pack(f.raw(name, device), info.ggml_type, info.shape).realize().expand()
    return f.load(name, device).cast(dtype if len(info.shape) >= 2 else dtypes.float32).realize()
  weights = {k: weight(k) for k in tqdm(f.tensors, desc=f"loading {os.path.basename(path)}", disable=not sys.stderr.isatty())}
  cfg = Config.from_gguf(f.metadata, max_context, tied="output.weight" not in weights)
  return Transformer(cfg, weights), f.metadata
