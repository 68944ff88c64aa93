"""Byte-level BPE tokenizer read from GGUF metadata or a Hugging Face `tokenizer.json`, a streaming UTF-8 decoder and chat templates.

Text goes through four steps: special tokens found in the text become their ids; the rest is cut into pieces by the
pre-tokenizer the model declares (a list of regex splits: `gpt2`, `llama3`, `qwen2`, `smollm`); each piece's UTF-8 bytes
are spelled with GPT-2's byte-to-character table; BPE merges the characters by merge rank into vocabulary tokens.

Standard library only. The split regexes use `\\p{L}`, `\\p{N}` and Unicode `\\s`, which Python's `re` lacks: they are
rewritten into explicit character classes built once from `unicodedata`. `jinja2` is imported only to render a model's
own chat template; without it (or without a template) a ChatML template is used."""
from __future__ import annotations
import codecs, functools, heapq, json, os, re, unicodedata, warnings
from dataclasses import dataclass
from typing import Any, Iterable

# ---------------------------------------------------------------- Unicode classes and regex translation

# The reference (`tokenizers`, through Oniguruma) reads \s as the Unicode White_Space property. Python's \s also
# matches the separators U+001C..U+001F, so the class is spelled out.
_WHITE_SPACE = ((0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
                (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000))

@functools.cache
def _category_ranges() -> dict[str, list[tuple[int, int]]]:
  """Code point ranges of every two-letter general category (`Lu`, `Nd`, ...): one pass over Unicode, done once per process."""
  out: dict[str, list[tuple[int, int]]] = {}
  category, prev, start = unicodedata.category, "Cc", 0
  for cp in range(1, 0x110000):
    if (c := category(chr(cp))) != prev:
      out.setdefault(prev, []).append((start, cp - 1))
      prev, start = c, cp
  out.setdefault(prev, []).append((start, 0x10FFFF))
  return out

def _property_ranges(name: str) -> list[tuple[int, int]]:
  """`\\p{name}` for a general category, one letter (`L`: every letter) or two (`Lu`), as sorted, merged ranges."""
  rs = sorted(r for cat, ranges in _category_ranges().items() if cat == name or (len(name) == 1 and cat[0] == name) for r in ranges)
  if not rs: raise ValueError(f"regex property \\p{{{name}}} is not supported: only general categories (L, Lu, N, Nd, P, S, Z, ...)")
  merged = [rs[0]]
  for lo, hi in rs[1:]:
    if lo <= merged[-1][1] + 1: merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
    else: merged.append((lo, hi))
  return merged

def _complement(rs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
  out, nxt = [], 0
  for lo, hi in rs:
    if lo > nxt: out.append((nxt, lo - 1))
    nxt = hi + 1
  return out + ([(nxt, 0x10FFFF)] if nxt <= 0x10FFFF else [])

def _esc(cp: int) -> str: return f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"

def _class_body(rs: Iterable[tuple[int, int]]) -> str:
  return "".join(_esc(lo) if lo == hi else f"{_esc(lo)}-{_esc(hi)}" for lo, hi in rs)

_CLASS_ESCAPE = re.compile(r"\\(?:([pP])(?:\{\^?(\w+)\}|(\w))|([sS]))")

def _escape_class(m: re.Match) -> str:
  """The body of a character class for one `\\p{..}`, `\\P{..}`, `\\s` or `\\S` escape."""
  if m.group(4): rs, negate = list(_WHITE_SPACE), m.group(4) == "S"
  else: rs, negate = _property_ranges(m.group(2) or m.group(3)), m.group(1) == "P"
  return _class_body(_complement(rs) if negate else rs)

@functools.cache
def compile_split_regex(pattern: str) -> re.Pattern:
  """Compile a split regex written for Oniguruma/PCRE (as tokenizer.json and GGUF pre-tokenizers are) with Python's `re`:
  `\\p{L}`, `\\P{N}`, `\\s`, `\\S` become explicit character classes, inside `[...]` or on their own."""
  out, i, in_class = [], 0, False
  while i < len(pattern):
    if (m := _CLASS_ESCAPE.match(pattern, i)):
      body = _escape_class(m)
      out.append(body if in_class else f"[{body}]")
      i = m.end()
      continue
    ch = pattern[i]
    if ch == "\\": out.append(pattern[i:i + 2]); i += 2; continue
    if ch == "[" and not in_class:
      in_class, j = True, i + 1 + (pattern[i + 1:i + 2] == "^")
      out.append(pattern[i:j])
      if pattern[j:j + 1] == "]": out.append("\\]"); j += 1  # a `]` right after `[` or `[^` is a literal
      i = j
      continue
    if ch == "]" and in_class: in_class = False
    out.append(ch)
    i += 1
  return re.compile("".join(out))

# ---------------------------------------------------------------- pre-tokenizers

# GPT-2: English contractions, then runs of letters, of digits or of other symbols, each taking at most one space in
# front, then whitespace. `\s+(?!\S)` stops a whitespace run one short of the next word, so that word keeps its space.
_CONTRACTIONS = "'s|'t|'re|'ve|'m|'ll|'d"
_GPT2_SPLIT = _CONTRACTIONS + r"| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

def _llama3_style_split(digits: str) -> str:
  """LLaMA 3 / Qwen2: contractions in any case; a word may take one non-letter, non-digit, non-newline character in
  front (space, `_`, `$`...); numbers in groups matched by `digits`; symbols keep the newlines after them; newlines
  gather the whitespace before them."""
  return "|".join([f"(?i:{_CONTRACTIONS})", r"[^\r\n\p{L}\p{N}]?\p{L}+", r"\p{N}" + digits, r" ?[^\s\p{L}\p{N}]+[\r\n]*", r"\s*[\r\n]+",
                   r"\s+(?!\S)", r"\s+"])

@dataclass(frozen=True)
class Split:
  """One pre-tokenizer stage: cut every piece at the matches of `pattern`; `isolated` keeps matches as their own pieces,
  `removed` drops them. `prefix_space` (ByteLevel's add_prefix_space) puts a space before a piece that lacks one."""
  pattern: str | None  # None: no cut (ByteLevel without its regex)
  behavior: str = "isolated"
  prefix_space: bool = False

PRE_TOKENIZERS: dict[str, tuple[Split, ...]] = {
  "gpt2": (Split(_GPT2_SPLIT),),
  "llama3": (Split(_llama3_style_split("{1,3}")),),  # numbers in groups of up to three digits
  "qwen2": (Split(_llama3_style_split("")),),        # every digit alone
  "smollm": (Split(r"\p{N}"), Split(_GPT2_SPLIT)),    # SmolLM's tokenizer.json: Digits(individual_digits) then ByteLevel
}
# other names GGUF converters write for the same rules
_PRE_ALIASES = {"llama-bpe": "llama3", "llama-v3": "llama3"}

def _split_pieces(rx: re.Pattern, text: str, keep_matches: bool) -> list[str]:
  out, pos = [], 0
  for m in rx.finditer(text):
    if m.start() > pos: out.append(text[pos:m.start()])
    if keep_matches and m.end() > m.start(): out.append(m.group())
    pos = m.end()
  if pos < len(text): out.append(text[pos:])
  return out

# ---------------------------------------------------------------- byte-level alphabet

def _bytes_to_chars() -> dict[int, str]:
  """GPT-2's byte-to-character table: printable Latin-1 bytes stand for themselves, the other 68 bytes (controls,
  space, NBSP, soft hyphen) take the characters from U+0100 up, so every token is a printable string."""
  printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
  table, extra = {b: chr(b) for b in printable}, 0
  for b in range(256):
    if b not in table: table[b], extra = chr(256 + extra), extra + 1
  return table

_B2C = _bytes_to_chars()
_C2B = {c: b for b, c in _B2C.items()}
_LATIN1_TO_B2C = str.maketrans({chr(b): c for b, c in _B2C.items()})  # str.translate runs in C: the fast way to spell a piece

# ---------------------------------------------------------------- tokenizer

@dataclass(frozen=True)
class AddedToken:
  """A token matched whole in the input text before pre-tokenization (`<|im_start|>`); `special` ones are the ones
  `skip_special_tokens` drops. `lstrip`/`rstrip` also swallow the white space on that side, as tokenizer.json allows."""
  content: str
  id: int
  special: bool = True
  lstrip: bool = False
  rstrip: bool = False

class Tokenizer:
  """Byte-level BPE. Build it with `from_gguf_metadata(md)` or `from_tokenizer_json(path)`.

  `encode(text)` -> ids, `decode(ids)` -> text, `stream()` -> an incremental decoder, `apply_chat_template(messages)`."""
  def __init__(self, tokens: list[str | None], merges: Iterable[tuple[str, str]], pre_tokenizer: str | Iterable[Split] = "gpt2",
               added_tokens: Iterable[AddedToken] = (), bos_id: int | None = None, eos_id: int | None = None, prefix_ids: Iterable[int] = (),
               suffix_ids: Iterable[int] = (), normalizer: str | None = None, chat_template: str | None = None, ignore_merges: bool = False,
               unk_id: int | None = None):
    self.tokens, self.bos_id, self.eos_id, self.unk_id = list(tokens), bos_id, eos_id, unk_id
    self.prefix_ids, self.suffix_ids = list(prefix_ids), list(suffix_ids)  # what add_special_tokens puts around the text
    self.normalizer, self.chat_template, self.ignore_merges = normalizer, chat_template, ignore_merges
    self.stages = _resolve_pre_tokenizer(pre_tokenizer)
    self.vocab = {t: i for i, t in enumerate(self.tokens) if t is not None}
    self.ranks = {tuple(pair): r for r, pair in enumerate(merges)}
    self.added = {a.id: a for a in added_tokens}
    self._added_rx, self._added_by_group = _added_token_regex(list(self.added.values()))
    self._cache: dict[str, list[int]] = {}
    self._template = None

  # ------------------------------------------------------------ construction
  @classmethod
  def from_gguf_metadata(cls, md: dict[str, Any]) -> Tokenizer:
    """The tokenizer a GGUF file describes (`tokenizer.ggml.*` keys, see the GGUF spec). Only model `gpt2` (byte-level BPE)."""
    model = md.get("tokenizer.ggml.model")
    if model != "gpt2": raise ValueError(f"GGUF tokenizer model {model!r} is not supported; supported: ['gpt2'] (byte-level BPE)")
    tokens = [str(t) for t in md["tokenizer.ggml.tokens"]]
    types = list(md.get("tokenizer.ggml.token_type", [])) or [1] * len(tokens)
    # token types: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte; control and user-defined tokens are
    # matched whole in the text, and only control tokens count as special
    added = [AddedToken(t, i, special=ty == 3) for i, (t, ty) in enumerate(zip(tokens, types)) if ty in (3, 4)]
    pre = md.get("tokenizer.ggml.pre", "gpt2")
    name = _PRE_ALIASES.get(pre, pre)
    bos, eos = md.get("tokenizer.ggml.bos_token_id"), md.get("tokenizer.ggml.eos_token_id")
    prefix = [bos] if md.get("tokenizer.ggml.add_bos_token", False) and bos is not None else []
    suffix = [eos] if md.get("tokenizer.ggml.add_eos_token", False) and eos is not None else []
    # LLaMA 3 keeps a piece whole when the vocabulary has it (ignore_merges). No unk_id: a byte the vocabulary lacks is
    # dropped, as llama.cpp and `tokenizers` do (SmolLM2's GGUF names <|endoftext|> as its unknown token)
    return cls(tokens, (m.split(" ", 1) for m in md.get("tokenizer.ggml.merges", [])), pre, added, bos, eos, prefix, suffix,
               chat_template=md.get("tokenizer.chat_template"), ignore_merges=name == "llama3")

  @classmethod
  def from_tokenizer_json(cls, path: str | os.PathLike) -> Tokenizer:
    """A Hugging Face tokenizer.json (a file, or a folder holding one) with a BPE model and a byte-level pre-tokenizer.
    A `tokenizer_config.json` beside it supplies the chat template and the BOS/EOS tokens."""
    path = os.fspath(path)
    folder, file = (path, os.path.join(path, "tokenizer.json")) if os.path.isdir(path) else (os.path.dirname(path), path)
    with open(file, encoding="utf-8") as f: tj = json.load(f)
    cfg_file = os.path.join(folder, "tokenizer_config.json")
    cfg = {}
    if os.path.exists(cfg_file):
      with open(cfg_file, encoding="utf-8") as f: cfg = json.load(f)
    return cls._from_json_dict(tj, cfg)

  @classmethod
  def _from_json_dict(cls, tj: dict, cfg: dict) -> Tokenizer:
    model = tj["model"]
    if model.get("type", "BPE") != "BPE": raise ValueError(f"tokenizer.json model {model.get('type')!r} is not supported; supported: ['BPE']")
    if not (_has_type(tj.get("pre_tokenizer"), "ByteLevel") or _has_type(tj.get("decoder"), "ByteLevel")):
      raise ValueError("only byte-level BPE is supported: tokenizer.json has no ByteLevel pre-tokenizer or decoder")
    added = [AddedToken(a["content"], a["id"], a.get("special", False), a.get("lstrip", False), a.get("rstrip", False)) for a in tj.get("added_tokens", [])]
    tokens: list[str | None] = [None] * (max([*model["vocab"].values(), *(a.id for a in added)], default=-1) + 1)
    for t, i in model["vocab"].items(): tokens[i] = t
    for a in added: tokens[a.id] = a.content
    merges = [m.split(" ", 1) if isinstance(m, str) else m for m in model.get("merges", [])]
    prefix, suffix = _post_processor_ids(tj.get("post_processor"))
    vocab = {t: i for i, t in enumerate(tokens) if t is not None}
    bos, eos = (vocab.get(_token_content(cfg.get(k))) for k in ("bos_token", "eos_token"))
    unk = vocab.get(model["unk_token"]) if model.get("unk_token") else None
    return cls(tokens, merges, tuple(_json_stages(tj.get("pre_tokenizer"))), added, bos if bos is not None else (prefix or [None])[0], eos,
               prefix, suffix, _json_normalizer(tj.get("normalizer")), _config_template(cfg.get("chat_template")), model.get("ignore_merges", False), unk)

  # ------------------------------------------------------------ properties
  @property
  def vocab_size(self) -> int: return len(self.tokens)

  def id_to_token(self, tid: int) -> str | None: return self.tokens[tid]
  def token_to_id(self, token: str) -> int | None: return self.vocab.get(token)

  # ------------------------------------------------------------ encoding
  def encode(self, text: str, add_special_tokens: bool = True, parse_special: bool = True) -> list[int]:
    """Token ids of `text`. Added/special tokens written in the text (`<|im_start|>`) become their single ids unless
    `parse_special=False`; `add_special_tokens` adds the BOS/EOS the model asks for (GGUF `add_bos_token`, tokenizer.json's post-processor)."""
    ids = list(self.prefix_ids) if add_special_tokens else []
    for chunk, tid in (self._split_added(text) if parse_special else [(text, None)]):
      if tid is not None: ids.append(tid)
      else:
        for piece in self.pre_tokenize(chunk): ids.extend(self._piece_ids(piece))
    return ids + (self.suffix_ids if add_special_tokens else [])

  def pre_tokenize(self, text: str) -> list[str]:
    """The pieces BPE sees (as text, before the byte spelling), after normalization."""
    if self.normalizer: text = unicodedata.normalize(self.normalizer, text)
    pieces = [text] if text else []
    for st in self.stages:
      if st.prefix_space: pieces = [p if p.startswith(" ") else " " + p for p in pieces]
      if st.pattern is None: continue
      rx = compile_split_regex(st.pattern)
      pieces = [q for p in pieces for q in _split_pieces(rx, p, st.behavior == "isolated")]
    return pieces

  def _split_added(self, text: str) -> list[tuple[str, int | None]]:
    if self._added_rx is None: return [(text, None)]
    out, pos = [], 0
    for m in self._added_rx.finditer(text):
      if m.start() > pos: out.append((text[pos:m.start()], None))
      out.append(("", self._added_by_group[m.lastindex]))
      pos = m.end()
    return out + ([(text[pos:], None)] if pos < len(text) else [])

  def _piece_ids(self, piece: str) -> list[int]:
    if (ids := self._cache.get(piece)) is None:
      if len(self._cache) > 100_000: self._cache.clear()  # bound memory on long streams of unusual text
      ids = self._cache[piece] = self._bpe(piece.encode("utf-8").decode("latin-1").translate(_LATIN1_TO_B2C))
    return ids

  def _bpe(self, word: str) -> list[int]:
    """Merge the word's byte characters pair by pair, always the adjacent pair with the lowest merge rank (the leftmost
    on a tie), as the reference does; a heap with lazy deletion keeps long words (whitespace runs, minified code) fast."""
    vocab, ranks = self.vocab, self.ranks
    if self.ignore_merges and word in vocab: return [vocab[word]]
    # characters the vocabulary lacks become <unk>, or vanish when there is none (the reference does the same)
    syms: list[str | None] = [c for c in word if c in vocab or self.unk_id is not None]
    nxt = [*range(1, len(syms)), -1]
    prv = list(range(-1, len(syms) - 1))
    heap = [(r, i) for i in range(len(syms) - 1) if (r := ranks.get((syms[i], syms[i + 1]))) is not None]
    heapq.heapify(heap)
    while heap:
      r, i = heapq.heappop(heap)
      j = nxt[i]
      if syms[i] is None or j < 0 or ranks.get((syms[i], syms[j])) != r: continue  # stale: a neighbour merged since
      syms[i], syms[j] = syms[i] + syms[j], None
      nxt[i] = nxt[j]
      if nxt[i] >= 0: prv[nxt[i]] = i
      for a in (prv[i], i):
        if a >= 0 and nxt[a] >= 0 and (r2 := ranks.get((syms[a], syms[nxt[a]]))) is not None: heapq.heappush(heap, (r2, a))
    return [vocab.get(s, self.unk_id) for s in syms if s is not None]

  # ------------------------------------------------------------ decoding
  def token_bytes(self, tid: int) -> bytes:
    """The bytes one token stands for: a byte-level token is spelled back to bytes, an added token is its own text."""
    if (added := self.added.get(tid)) is not None: return added.content.encode("utf-8")
    if (tok := self.tokens[tid]) is None: return b""
    try: return bytes(_C2B[c] for c in tok)
    except KeyError: return tok.encode("utf-8")  # not byte-spelled (a hand-added token): its own text

  def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
    """Text of `ids`; bytes that are not valid UTF-8 (a character cut between tokens) become U+FFFD."""
    return b"".join(self.token_bytes(i) for i in ids if not (skip_special_tokens and self._is_special(i))).decode("utf-8", "replace")

  def stream(self, skip_special_tokens: bool = False) -> StreamDecoder:
    """An incremental decoder for generation: `add(id)` returns only the characters completed so far."""
    return StreamDecoder(self, skip_special_tokens)

  def _is_special(self, tid: int) -> bool: return tid in self.added and self.added[tid].special

  # ------------------------------------------------------------ chat
  def apply_chat_template(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **kwargs) -> str:
    """Render `messages` ([{"role": ..., "content": ...}]) with the model's Jinja chat template, as transformers does
    (`bos_token`, `eos_token`, `add_generation_prompt` and `kwargs` such as `tools` are visible to it). Without a
    template, or without `jinja2`, a ChatML template: `<|im_start|>role\\ncontent<|im_end|>\\n`, then `<|im_start|>assistant\\n`."""
    if self.chat_template is None: return chatml(messages, add_generation_prompt)
    if self._template is None:
      try: self._template = _compile_template(self.chat_template)
      except ImportError:
        warnings.warn("jinja2 is not installed (pip install jinja2): the model's chat template cannot be rendered, using the built-in ChatML "
                      "template instead", stacklevel=2)
        return chatml(messages, add_generation_prompt)
    special = {k: self.tokens[i] if i is not None and i < len(self.tokens) else "" for k, i in (("bos_token", self.bos_id), ("eos_token", self.eos_id))}
    return self._template.render(messages=messages, add_generation_prompt=add_generation_prompt, **{**special, **kwargs})

  def __repr__(self) -> str:
    return f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self.ranks)}, added={len(self.added)}, bos_id={self.bos_id}, eos_id={self.eos_id})"

class StreamDecoder:
  """Decodes ids one at a time; `add` returns only complete UTF-8 characters, holding back the first bytes of a
  character whose remaining bytes come in a later token. `flush()` ends the stream (U+FFFD for a dangling partial character)."""
  def __init__(self, tok: Tokenizer, skip_special_tokens: bool = False):
    self.tok, self.skip_special_tokens = tok, skip_special_tokens
    self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

  def add(self, tid: int) -> str:
    if self.skip_special_tokens and self.tok._is_special(tid): return ""
    return self._utf8.decode(self.tok.token_bytes(tid))

  def flush(self) -> str: return self._utf8.decode(b"", final=True)

# ---------------------------------------------------------------- helpers for construction

def _resolve_pre_tokenizer(pre: str | Iterable[Split]) -> tuple[Split, ...]:
  if not isinstance(pre, str): return tuple(pre)
  name = _PRE_ALIASES.get(pre, pre)
  if name not in PRE_TOKENIZERS:
    raise ValueError(f"pre-tokenizer {pre!r} is not supported; supported: {sorted([*PRE_TOKENIZERS, *_PRE_ALIASES])}")
  return PRE_TOKENIZERS[name]

def _added_token_regex(added: list[AddedToken]) -> tuple[re.Pattern | None, dict[int, int]]:
  """One regex for all added tokens, longest first so the leftmost-longest token wins (`<|im_start|>` before `<|im`);
  each token has its own group, so `match.lastindex` names the id."""
  if not added: return None, {}
  ws = f"[{_class_body(_WHITE_SPACE)}]*"
  alts, by_group = [], {}
  for g, a in enumerate(sorted(added, key=lambda a: -len(a.content)), start=1):
    alts.append((ws if a.lstrip else "") + f"({re.escape(a.content)})" + (ws if a.rstrip else ""))
    by_group[g] = a.id
  return re.compile("|".join(alts)), by_group

def _has_type(node: dict | None, kind: str) -> bool:
  if not node: return False
  return node.get("type") == kind or any(_has_type(n, kind) for n in node.get("pretokenizers", []) + node.get("decoders", []))

def _json_stages(node: dict | None) -> list[Split]:
  """tokenizer.json's pre_tokenizer as regex splits: Sequence, ByteLevel, Split and Digits."""
  if node is None: return []
  kind = node.get("type")
  if kind == "Sequence": return [s for n in node["pretokenizers"] for s in _json_stages(n)]
  if kind == "ByteLevel":
    return [Split(_GPT2_SPLIT if node.get("use_regex", True) else None, prefix_space=node.get("add_prefix_space", False))]
  if kind == "Digits": return [Split(r"\p{N}" if node.get("individual_digits", False) else r"\p{N}+")]
  if kind == "Split":
    behavior, pat = node.get("behavior", "Isolated").lower(), node["pattern"]
    if behavior not in ("isolated", "removed") or node.get("invert", False):
      raise ValueError(f"Split pre-tokenizer with behavior {node.get('behavior')!r}, invert={node.get('invert')} is not supported; "
                       "supported: Isolated, Removed, invert=false")
    return [Split(pat["Regex"] if "Regex" in pat else re.escape(pat["String"]), behavior)]
  raise ValueError(f"pre-tokenizer {kind!r} is not supported; supported: ['ByteLevel', 'Digits', 'Sequence', 'Split']")

def _json_normalizer(node: dict | None) -> str | None:
  if node is None: return None
  forms = [n.get("type") for n in node.get("normalizers", [])] if node.get("type") == "Sequence" else [node.get("type")]
  if not forms: return None
  if len(forms) > 1 or forms[0] not in ("NFC", "NFD", "NFKC", "NFKD"):
    raise ValueError(f"normalizer {forms} is not supported; supported: one of ['NFC', 'NFD', 'NFKC', 'NFKD'] or none")
  return forms[0]

def _post_processor_ids(node: dict | None) -> tuple[list[int], list[int]]:
  """The ids add_special_tokens puts before and after a single text (TemplateProcessing, RobertaProcessing, BertProcessing)."""
  if node is None or node.get("type") == "ByteLevel": return [], []
  kind = node.get("type")
  if kind == "Sequence":
    pre, post = [], []
    for n in node["processors"]:
      p, s = _post_processor_ids(n)
      pre, post = pre + p, post + s
    return pre, post
  if kind == "TemplateProcessing":
    pre, post, seen = [], [], False
    for item in node["single"]:
      if "Sequence" in item: seen = True
      else: (post if seen else pre).extend(node["special_tokens"][item["SpecialToken"]["id"]]["ids"])
    return pre, post
  if kind in ("RobertaProcessing", "BertProcessing"): return [node["cls"][1]], [node["sep"][1]]
  raise ValueError(f"post-processor {kind!r} is not supported; supported: ['BertProcessing', 'ByteLevel', 'RobertaProcessing', 'Sequence', 'TemplateProcessing']")

def _token_content(tok: str | dict | None) -> str | None: return tok.get("content") if isinstance(tok, dict) else tok

def _config_template(t: str | list | None) -> str | None:
  """tokenizer_config.json holds one template, or a list of named ones of which `default` is the chat template."""
  if isinstance(t, list): return next((x["template"] for x in t if x.get("name") == "default"), None)
  return t

# ---------------------------------------------------------------- chat templates

def chatml(messages: list[dict[str, Any]], add_generation_prompt: bool = True) -> str:
  """The built-in template (ChatML, which SmolLM and Qwen use)."""
  body = "".join(f"<|im_start|>{m['role']}\n{_message_text(m.get('content'))}<|im_end|>\n" for m in messages)
  return body + ("<|im_start|>assistant\n" if add_generation_prompt else "")

def _message_text(content: Any) -> str:
  """OpenAI-style content may be a list of parts: keep the text ones."""
  if content is None: return ""
  if isinstance(content, str): return content
  return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")

def _compile_template(source: str):
  """Compile a chat template the way transformers renders them: sandboxed, `trim_blocks` and `lstrip_blocks` on, loop
  controls, a `tojson` that keeps non-ASCII text, and the `raise_exception` / `strftime_now` helpers templates call."""
  import datetime
  from jinja2.exceptions import TemplateError
  from jinja2.sandbox import ImmutableSandboxedEnvironment  # ImportError here: the caller falls back to ChatML
  def raise_exception(message): raise TemplateError(message)
  def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
  env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
  env.filters["tojson"] = tojson
  env.globals.update(raise_exception=raise_exception, strftime_now=lambda fmt: datetime.datetime.now().strftime(fmt))
  return env.from_string(source)
