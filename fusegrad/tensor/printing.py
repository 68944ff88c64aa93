"""str(tensor) / print(tensor): the values, laid out the way PyTorch prints them (repr stays tinygrad's one-line summary)."""
from __future__ import annotations
import math
from typing import Any
from fusegrad.dtype import dtypes

EDGE, SUMMARIZE_OVER = 3, 1000  # like torch: more than 1000 elements show the first and last 3 along each dim

def _number_format(values: list, is_float: bool):
  """One formatter for every element, so columns line up (torch's rules: integral floats print as `1.`, a wide range
  of magnitudes switches to scientific notation)."""
  if not is_float: return str
  finite = [abs(v) for v in values if math.isfinite(v)]
  nonzero = [v for v in finite if v != 0]
  if all(v == int(v) for v in finite) and (not finite or max(finite) < 1e8): return lambda v: f"{v:.0f}." if math.isfinite(v) else str(v)
  if nonzero and (max(nonzero) / min(nonzero) > 1000 or max(nonzero) > 1e8 or min(nonzero) < 1e-4):
    return lambda v: f"{v:.4e}" if math.isfinite(v) else str(v)
  return lambda v: f"{v:.4f}" if math.isfinite(v) else str(v)

def _cut(rows: list, depth: int, cut: tuple) -> list:
  return rows[:EDGE] + [...] + rows[EDGE:] if cut[depth] else rows

def _leaves(x: Any) -> list:
  return [v for r in x for v in _leaves(r)] if isinstance(x, list) else [x]

def _render(x: Any, fmt, width: int, depth: int, cut: tuple) -> str:
  if not isinstance(x, list): return fmt(x).rjust(width)
  last = depth == len(cut) - 1
  parts = [(" ..." if last else "...") if r is ... else _render(r, fmt, width, depth + 1, cut) for r in _cut(x, depth, cut)]
  if last: return "[" + ", ".join(parts) + "]"
  return "[" + ("," + "\n" * (len(cut) - depth - 1) + " " * (len("tensor(") + depth + 1)).join(parts) + "]"

def _edges(t, cut: tuple):
  """t with only the first and last EDGE entries of each cut dim (so a huge tensor is never read whole)."""
  for d, c in enumerate(cut):
    if c: t = t.shrink(tuple((0, EDGE) if i == d else None for i in range(t.ndim))).cat(t.shrink(tuple((t.shape[d] - EDGE, t.shape[d]) if i == d else None for i in range(t.ndim))), dim=d)
  return t

def tensor_str(t) -> str:
  """The values of t as torch prints them: `tensor([[1., 2.], ...])`, with the dtype when it is not the default."""
  cut = tuple(t.numel() > SUMMARIZE_OVER and s > 2 * EDGE for s in t.shape)
  values = _edges(t, cut).tolist() if t.numel() else []
  shown = _leaves(values)
  fmt = str if t.dtype == dtypes.bool else _number_format(shown, dtypes.is_float(t.dtype))
  width = max((len(fmt(v)) for v in shown), default=0)
  body = _render(values, fmt, width, 0, cut) if t.ndim else fmt(values)
  extras = [f"size={t.shape}"] if not t.numel() and t.ndim > 1 else []
  if t.dtype not in (dtypes.float32, dtypes.int32, dtypes.bool): extras.append(f"dtype={t.dtype!r}")
  if t.device != "CPU": extras.append(f"device={t.device!r}")
  return "tensor(" + ", ".join([body, *extras]) + ")"
