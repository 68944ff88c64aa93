"""Patterns over UOps and the rewrite engine every lowering stage uses."""
from __future__ import annotations
import itertools
from typing import Any, Callable
from fusegrad.dtype import DType
from fusegrad.uop.ops import GroupOp, Ops, UOp

class UPat:
  """Matches a UOp by op, dtype, arg and sources; `name` captures the matched node for the rewrite function.
  src: a tuple matches sources in order, a list matches them in any order (commutative), a single UPat matches every source."""
  def __init__(self, op: Ops | tuple[Ops, ...] | set[Ops] | None = None, dtype: DType | tuple[DType, ...] | None = None,
               src: UPat | tuple[UPat, ...] | list[UPat] | None = None, arg: Any = None, name: str | None = None,
               allow_any_len: bool = False, custom: Callable[[UOp], bool] | None = None):
    self.op = None if op is None else (op,) if isinstance(op, Ops) else tuple(op)
    self.dtype = None if dtype is None else (dtype,) if isinstance(dtype, DType) else tuple(dtype)
    self.arg, self.name, self.allow_any_len, self.custom = arg, name, allow_any_len, custom
    if src is None: self.srcs = None
    elif isinstance(src, UPat): self.srcs, self.repeat = [(src,)], True
    elif isinstance(src, list): self.srcs, self.repeat = list(itertools.permutations(src)), False
    else: self.srcs, self.repeat = [tuple(src)], False

  @staticmethod
  def var(name: str | None = None, dtype=None) -> UPat: return UPat(dtype=dtype, name=name)
  @staticmethod
  def cvar(name: str | None = None, dtype=None) -> UPat: return UPat(Ops.CONST, dtype=dtype, name=name)
  def __repr__(self) -> str: return f"UPat({self.op}, {self.dtype}, name={self.name})"

  # operator sugar so rules read like the math they rewrite
  def _bin(self, op: Ops, x: UPat) -> UPat: return UPat(op, src=[self, x] if op in GroupOp.Commutative else (self, x))
  def __add__(self, x): return self._bin(Ops.ADD, x)
  def __mul__(self, x): return self._bin(Ops.MUL, x)
  def __floordiv__(self, x): return self._bin(Ops.IDIV, x)
  def __mod__(self, x): return self._bin(Ops.MOD, x)

  def match(self, u: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
    if (self.op is not None and u.op not in self.op) or (self.dtype is not None and u.dtype not in self.dtype and u.dtype.base not in self.dtype) \
       or (self.arg is not None and self.arg != u.arg) or (self.custom is not None and not self.custom(u)): return []
    if self.name is not None:
      if self.name in store and store[self.name] is not u: return []
      store = {**store, self.name: u}
    if self.srcs is None: return [store]
    out: list[dict[str, UOp]] = []
    for pats in self.srcs:
      if self.repeat: pats = pats * len(u.src)
      elif len(pats) != len(u.src) and not (self.allow_any_len and len(u.src) >= len(pats)): continue
      stores = [store]
      for p, s in zip(pats, u.src):
        stores = [m for st in stores for m in p.match(s, st)]
        if not stores: break
      out.extend(stores)
    return out

class PatternMatcher:
  """An ordered list of (UPat, fn). `rewrite` returns the first fn result that is not None."""
  def __init__(self, patterns: list[tuple[UPat, Callable[..., UOp | None]]]):
    self.patterns = patterns
    self.by_op: dict[Ops, list[tuple[UPat, Callable]]] = {}
    for pat, fn in patterns:
      for op in (pat.op if pat.op is not None else tuple(Ops)): self.by_op.setdefault(op, []).append((pat, fn))
  def __add__(self, other: PatternMatcher) -> PatternMatcher: return PatternMatcher(self.patterns + other.patterns)
  def rewrite(self, u: UOp, ctx: Any = None) -> UOp | None:
    for pat, fn in self.by_op.get(u.op, ()):
      for store in pat.match(u, {}):
        ret = fn(ctx, **store) if _wants_ctx(fn) else fn(**store)
        if ret is not None and ret is not u: return ret
    return None

def _wants_ctx(fn: Callable) -> bool:
  if not hasattr(fn, "_wants_ctx"):
    try: fn._wants_ctx = "ctx" in fn.__code__.co_varnames[:fn.__code__.co_argcount]  # type: ignore
    except AttributeError: return False
  return fn._wants_ctx  # type: ignore

def graph_rewrite(sink: UOp, pm: PatternMatcher, ctx: Any = None) -> UOp:
  """Rewrite every node (sources first) until no pattern applies; results are rewritten again, to a fixed point."""
  done: dict[UOp, UOp] = {}
  def rewrite(root: UOp) -> UOp:
    # explicit stack: (node, stage). stage 0: push sources; stage 1: rebuild from rewritten sources and apply patterns
    stack: list[tuple[UOp, int]] = [(root, 0)]
    while stack:
      u, stage = stack.pop()
      if u in done: continue
      if stage == 0:
        stack.append((u, 1))
        stack.extend((s, 0) for s in u.src if s not in done)
        continue
      new = u
      if u.src and any(done[s] is not s for s in u.src): new = UOp(u.op, u.dtype, tuple([done[s] for s in u.src]), u.arg)
      for _ in range(1000):
        nxt = pm.rewrite(new, ctx)
        if nxt is None: break
        if any(s not in done for s in nxt.src) or nxt not in done:
          # the replacement may contain unrewritten nodes: rewrite it fully first
          nxt = rewrite(nxt) if nxt not in done else done[nxt]
          new = nxt
          break
        new = done[nxt]
      else: raise RuntimeError(f"graph_rewrite did not reach a fixed point at {u.op}")
      done[u] = new
      done.setdefault(new, new)
    return done[root]
  return rewrite(sink)
