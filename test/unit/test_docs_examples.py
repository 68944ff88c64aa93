"""Every ```python block of docs/porting.md and docs/weights.md runs, so the pages cannot rot.

Each block runs on its own (fresh globals) in an empty temporary directory, on the PYTHON device (conftest.py), with the
line numbers of the page, so a traceback points at the doc. The outputs the pages show are checked too:
  - a comment on a `print(...)` line, or comment lines right below it, must be a line the block printed; text after
    ': ' may explain it (`# 3: the default`), and a comment starting with '... ' matches the end of a line;
  - a plain ``` block introduced by the single word "prints" right after a python block must equal what it printed.
Blocks that import torch are skipped when torch is not installed."""
from __future__ import annotations
import pathlib, re
import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
PAGES = ("porting.md", "weights.md")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.S | re.M)

def blocks(page: str) -> list[tuple[int, str, str | None]]:
  """(first line of the code, code, the output shown after it in a "prints" block or None) for each python block."""
  text = (DOCS / page).read_text()
  fences = list(_FENCE.finditer(text))
  out = []
  for i, m in enumerate(fences):
    if m.group(1) != "python": continue
    shown = None
    if i + 1 < len(fences) and fences[i + 1].group(1) == "" and text[m.end():fences[i + 1].start()].strip() == "prints":
      shown = fences[i + 1].group(2)
    out.append((text.count("\n", 0, m.start()) + 2, m.group(2), shown))
  return out

def expected_comments(src: str) -> list[tuple[int, str]]:
  """(line within the block, comment) for each comment that shows a print's output."""
  lines, out = src.splitlines(), []
  for i, line in enumerate(lines):
    if "print(" not in line: continue
    code, sep, comment = line.partition("  # ")
    if sep and "#" not in code: out.append((i, comment.strip()))
    j = i + 1
    while j < len(lines) and lines[j].lstrip().startswith("# "):
      out.append((j, lines[j].lstrip()[2:].strip()))
      j += 1
  return out

def comment_matches(comment: str, printed: list[str]) -> bool:
  for line in printed:
    line = line.rstrip()
    if not line: continue
    if comment == line or comment.startswith(line + ": "): return True
    if comment.startswith("... ") and line.endswith(comment[4:]): return True
  return False

EXAMPLES = [pytest.param(page, line, src, shown, id=f"{page}:{line}") for page in PAGES for line, src, shown in blocks(page)]

def test_pages_have_examples():
  for page in PAGES: assert len(blocks(page)) >= 5, f"{page}: expected its python examples"

@pytest.mark.parametrize("page,line,src,shown", EXAMPLES)
def test_doc_example(page, line, src, shown, tmp_path, monkeypatch, capsys):
  if re.search(r"^\s*(import|from) torch\b", src, re.M): pytest.importorskip("torch")
  from fusegrad import Tensor
  from fusegrad.dtype import dtypes
  monkeypatch.chdir(tmp_path)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # fetch's cache, so no example sees the user's files
  saved = (Tensor.training, Tensor.no_grad, dtypes.default_float, dtypes.default_int)
  code = compile("\n" * (line - 1) + src, str(DOCS / page), "exec")
  try: exec(code, {"__name__": "__doc_example__"})
  finally: Tensor.training, Tensor.no_grad, dtypes.default_float, dtypes.default_int = saved
  printed = capsys.readouterr().out
  lines = printed.splitlines()
  wrong = [f"line {line + i}: # {c}" for i, c in expected_comments(src) if not comment_matches(c, lines)]
  assert not wrong, f"{page}: output comments that do not match what the example printed:\n  " + "\n  ".join(wrong) + f"\nprinted:\n{printed}"
  if shown is not None: assert printed.strip() == shown.strip(), f"{page}:{line}: the 'prints' block differs from the output:\n{printed}"

def test_comment_rules():
  assert expected_comments('x = 1\nprint(x)   # 1: one\n# 2\ny = 2  # not output\n') == [(1, "1: one"), (2, "2")]
  assert comment_matches("3: the default", ["3"]) and comment_matches("[]: renamed", ["[]"])
  assert comment_matches("... e.g. t.to('CPU')", ["long message, e.g. t.to('CPU')"])
  assert not comment_matches("4", ["3"]) and not comment_matches("3", ["", "30"])
