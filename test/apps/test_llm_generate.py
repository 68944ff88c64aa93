"""fusegrad.llm.generate: greedy decoding equals transformers', the cache is reused for a shared prefix, sampling options."""
import random
import pytest
from fusegrad import Tensor
from fusegrad.llm.generate import Generator, Sampling, sample
from fusegrad.llm.model import load_hf

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

@pytest.fixture(scope="module")
def models(tmp_path_factory):
  path = tmp_path_factory.mktemp("llama")
  torch.manual_seed(1)
  cfg = transformers.LlamaConfig(vocab_size=61, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True)
  ref = transformers.AutoModelForCausalLM.from_config(cfg).eval()
  ref.save_pretrained(path, safe_serialization=True)
  return ref, load_hf(str(path), max_context=48)

PROMPT = [5, 9, 33, 2, 17, 40, 1]

def greedy_reference(ref, prompt, n):
  ids = list(prompt)
  with torch.no_grad():
    for _ in range(n): ids.append(int(ref(torch.tensor([ids])).logits[0, -1].argmax()))
  return ids[len(prompt):]

def test_greedy_matches_transformers_with_chunked_prefill(models):
  ref, model = models
  gen = Generator(model, chunks=(4, 1))  # 7 prompt tokens: one chunk of 4, then 3 single steps
  assert list(gen.generate(PROMPT, Sampling(max_tokens=8))) == greedy_reference(ref, PROMPT, 8)

def test_prompt_steps_before_the_last_skip_the_output_matmul(models):
  # 7 prompt tokens in chunks (4, 1): four steps, and only the last one's logits are read, so only it runs the
  # vocab x dim output matmul (the others return the normed hidden state)
  _, model = models
  gen = Generator(model, chunks=(4, 1))
  heads = []
  real = model.linear
  model.linear = lambda x, name: (heads.append(name), real(x, name))[1]  # type: ignore[method-assign]
  try: logits = gen.prefill(PROMPT)
  finally: del model.linear
  assert heads.count("output") == 1 and logits.shape == (1, model.cfg.vocab_size)
  assert model(Tensor([PROMPT[:4]]), 0, logits=False).shape == (1, model.cfg.dim)

def test_attention_reads_the_filled_part_of_the_cache(tmp_path):
  torch.manual_seed(2)
  cfg = transformers.LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2,
                                 num_key_value_heads=1, max_position_embeddings=256, tie_word_embeddings=True)
  ref = transformers.AutoModelForCausalLM.from_config(cfg).eval()
  ref.save_pretrained(tmp_path, safe_serialization=True)
  model = load_hf(str(tmp_path), max_context=160)  # 64 positions, then 128, then all 160: three attention lengths
  assert [model.attend_len(e) for e in (1, 64, 65, 128, 129, 160)] == [64, 64, 128, 128, 160, 160]
  gen = Generator(model, chunks=(4, 1))
  assert list(gen.generate(PROMPT, Sampling(max_tokens=130))) == greedy_reference(ref, PROMPT, 130)  # as the whole cache gives
  assert len(gen._steps[1]._captures) == 3  # decoding ran at three attention lengths (one capture each)
  with pytest.raises(ValueError, match="attend"): model(Tensor([[1]]), 0, 161)

def test_shared_prefix_is_not_recomputed(models):
  ref, model = models
  gen = Generator(model, chunks=(4, 1))
  first = list(gen.generate(PROMPT, Sampling(max_tokens=3)))
  steps = []
  real = gen._step
  gen._step = lambda toks, start, logits=True: steps.append((len(toks), start, logits)) or real(toks, start, logits)
  follow = PROMPT + first + [7]
  assert list(gen.generate(follow, Sampling(max_tokens=4))) == greedy_reference(ref, follow, 4)
  # only the last generated token (not yet in the cache) and the new one ran before decoding; the first step's logits
  # are not needed, so it only fills the cache
  assert steps[:2] == [(1, len(PROMPT) + 2, False), (1, len(PROMPT) + 3, True)]

def test_stop_ids_and_context_end(models):
  _, model = models
  gen = Generator(model, chunks=(4, 1))
  s = Sampling(temperature=2.0, seed=5, max_tokens=12)  # a tiny random model repeats itself greedily
  want = list(gen.generate(PROMPT, s))
  j = next(j for j in range(1, 12) if want[j] not in want[:j])  # a token not generated before it
  assert list(gen.generate(PROMPT, s, stop_ids={want[j]})) == want[:j]
  assert len(list(gen.generate(PROMPT, Sampling(max_tokens=1000)))) == 48 - len(PROMPT) + 1  # the last token fits, its logits do not

def test_seeded_sampling_repeats(models):
  _, model = models
  s = Sampling(temperature=1.0, top_k=20, top_p=0.9, seed=3, max_tokens=6)
  a, b = (list(Generator(model, chunks=(4, 1)).generate(PROMPT, s)) for _ in range(2))
  assert a == b

def test_sample_rules():
  rng = random.Random(0)
  logits = [0.0, 5.0, 4.9, -1.0]
  assert sample(logits, Sampling(), set(), rng) == 1
  assert sample(logits, Sampling(repetition_penalty=2.0), {1}, rng) == 2  # 5/2 < 4.9
  assert {sample(logits, Sampling(temperature=1.0, top_k=1), set(), rng) for _ in range(20)} == {1}
  assert {sample(logits, Sampling(temperature=1.0, top_p=0.3), set(), rng) for _ in range(20)} == {1}
  assert {sample(logits, Sampling(temperature=1.0, min_p=0.5), set(), rng) for _ in range(50)} == {1, 2}

@pytest.mark.parametrize("bad", [dict(temperature=-1), dict(top_p=0), dict(top_p=1.5), dict(top_k=-2), dict(min_p=2), dict(max_tokens=-1),
                                 dict(repetition_penalty=0), dict(temperature=float("nan"))])
def test_bad_sampling_values_raise(bad):
  with pytest.raises(ValueError, match=next(iter(bad))): Sampling(**bad).check()
