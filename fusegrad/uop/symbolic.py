"""Simplification of integer index arithmetic (and safe constant folding) with value bounds."""
from __future__ import annotations
import math
from fusegrad.dtype import LOW_FLOATS, dtypes
from fusegrad.uop.ops import GroupOp, Ops, UOp, exec_alu
from fusegrad.uop.pattern import PatternMatcher, UPat, graph_rewrite

def _is_int(u: UOp) -> bool: return dtypes.is_int(u.dtype) or u.dtype == dtypes.bool

def fold_constants(a: UOp) -> UOp | None:
  if a.op in GroupOp.ALU and all(s.op is Ops.CONST for s in a.src):
    # transcendentals are left to the device so folded and computed values agree bit for bit
    if dtypes.is_float(a.dtype) and a.op not in {Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.NEG, Ops.WHERE}: return None
    if a.dtype in LOW_FLOATS: return None  # (computed in float32, rounded once)
    return UOp.const(a.dtype, exec_alu(a.op, a.dtype, [s.arg for s in a.src]))
  if a.op is Ops.CAST and a.src[0].op is Ops.CONST and a.dtype != dtypes.bfloat16: return UOp.const(a.dtype, a.src[0].arg)
  return None

def fold_by_bounds(x: UOp) -> UOp | None:
  if x.op in GroupOp.ALU and x.op is not Ops.CONST and _is_int(x) and x.vmin == x.vmax: return UOp.const(x.dtype, x.vmin)
  return None

def conjuncts(c: UOp) -> frozenset:
  """c and, where c is an AND, the conditions it joins, recursively (nested pads AND their gates): c implies each one."""
  return frozenset([c]).union(*(conjuncts(s) for s in c.src)) if c.op is Ops.AND else frozenset([c])

def _terms(x: UOp) -> list[tuple[UOp | None, int]]:
  """x as a sum of (node, coefficient); node None is the constant term."""
  if x.op is Ops.ADD: return _terms(x.src[0]) + _terms(x.src[1])
  if x.op is Ops.CONST: return [(None, x.arg)]
  if x.op is Ops.MUL and x.src[1].op is Ops.CONST: return [(n, c * x.src[1].arg) for n, c in _terms(x.src[0])]
  return [(x, 1)]

def _sum(dtype, terms: list[tuple[UOp | None, int]]) -> UOp:
  const = sum(c for n, c in terms if n is None)
  out: UOp | None = None
  for n, c in terms:
    if n is None or c == 0: continue
    t = n if c == 1 else n * UOp.const(dtype, c)
    out = t if out is None else out + t
  if out is None: return UOp.const(dtype, const)
  return out + UOp.const(dtype, const) if const else out

def div_mod_fold(x: UOp, c: UOp, mod: bool) -> UOp | None:
  """x // c and x % c for non-negative x = sum(k_i * t_i) + const: split every coefficient k = q*c + r; the q parts go
  to the quotient, and when the remainders sum to a value in [0, c) they are exactly x % c."""
  d = c.arg
  if d <= 0 or x.vmin < 0: return None
  if d == 1: return UOp.const(x.dtype, 0) if mod else x
  if x.vmax < d: return x if mod else UOp.const(x.dtype, 0)
  terms = _terms(x)
  if any(k < 0 or (n is not None and n.vmin < 0) for n, k in terms): return None
  quot = [(n, k // d) for n, k in terms if k // d]
  rest = [(n, k % d) for n, k in terms if k % d]
  r = _sum(x.dtype, rest)
  if 0 <= r.vmin and r.vmax < d: return r if mod else _sum(x.dtype, quot)
  g = math.gcd(d, *[k for _, k in rest]) if rest else d
  if g > 1:
    # every remaining term is a multiple of g: (g*r')//(g*d') = r'//d'
    r2, d2 = _sum(x.dtype, [(n, k // g) for n, k in rest]), UOp.const(x.dtype, d // g)
    q_rest, m_rest = r2 // d2, (r2 % d2) * UOp.const(x.dtype, g)
  elif quot: q_rest, m_rest = r // c, r % c
  else: return None
  if mod: return m_rest
  return _sum(x.dtype, quot) + q_rest if quot else q_rest

def _c(u: UOp, v) -> UOp: return UOp.const(u.dtype, v)

def recombine_div_mod(x: UOp) -> UOp | None:
  """In a sum, k*(y%a) + k*a*(y//a) is k*y, and k*(y%a) + k*a*((y//a)%b) is k*(y%(a*b)): what a flatten after a reshape
  leaves (j//49*49 + j//7%7*7 + j%7 is j). Exact for C's truncating division too, since (y/a)/b == y/(a*b)."""
  if not _is_int(x): return None
  terms = _terms(x)
  for i, (n, k) in enumerate(terms):
    if n is None or n.op is not Ops.MOD or n.src[1].op is not Ops.CONST or n.src[1].arg <= 0: continue
    y, a = n.src
    for j, (m, km) in enumerate(terms):
      if m is None or km != k * a.arg: continue
      if m.op is Ops.IDIV and m.src == (y, a): new = y
      elif m.op is Ops.MOD and m.src[1].op is Ops.CONST and m.src[1].arg > 0 and m.src[0].op is Ops.IDIV and m.src[0].src == (y, a):
        new = y % _c(y, a.arg * m.src[1].arg)
      else: continue
      return _sum(x.dtype, [t for t_i, t in enumerate(terms) if t_i not in (i, j)] + [(new, k)])
  return None

def _is_range(u: UOp, r: UOp) -> bool:
  """Is u the loop index r, through casts that keep every value of it?"""
  while u.op is Ops.CAST and dtypes.is_int(u.dtype) and dtypes.min(u.dtype) <= r.vmin and r.vmax <= dtypes.max(u.dtype): u = u.src[0]
  return u is r

def collapse_one_hot_sum(red: UOp) -> UOp | None:
  """sum over r of (r == e ? x(r) : 0), e independent of r, is x(e) where 0 <= e < n (else 0): the loop reads one
  element. A class index picked out by a mask (cross-entropy's nll) had a pass over the whole row for it."""
  if red.arg is not Ops.ADD or len(red.src) != 2 or (body := red.src[0]).op is not Ops.WHERE: return None
  (cond, x, zero), r = body.src, red.src[1]
  if cond.op is not Ops.CMPEQ or zero.op is not Ops.CONST or zero.arg != 0: return None
  e = next((b for a, b in (cond.src, cond.src[::-1]) if _is_range(a, r)), None)
  if e is None or not dtypes.is_int(e.dtype) or r in e.toposort(): return None
  valid = e.alu(Ops.CMPLT, _c(e, r.src[0].arg))
  if not dtypes.is_unsigned(e.dtype): valid = valid.alu(Ops.AND, _c(e, -1).alu(Ops.CMPLT, e))
  idx = valid.alu(Ops.WHERE, e.cast(r.dtype), _c(r, 0))  # a safe address where e is out of range
  return valid.alu(Ops.WHERE, x.substitute({r: idx}), zero)

symbolic = PatternMatcher([
  (UPat(GroupOp.ALU | {Ops.CAST}, name="a"), fold_constants),
  (UPat(GroupOp.ALU, name="x"), fold_by_bounds),
  # identities (ints only: for floats x*0 is not 0 when x is inf or nan)
  (UPat.var("x") + UPat.cvar("c"), lambda x, c: x if c.arg == 0 and _is_int(x) else None),
  (UPat.var("x") * UPat.cvar("c"), lambda x, c: x if c.arg == 1 else (_c(x, 0) if c.arg == 0 and _is_int(x) else None)),
  (UPat(Ops.SUB, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: x + _c(x, -c.arg) if _is_int(x) and x.dtype != dtypes.bool else None),
  (UPat(Ops.SUB, src=(UPat.var("x"), UPat.var("y")), name="s"), lambda x, y, s: _c(s, 0) if x is y and _is_int(x) else None),
  # move constants right and fold chains of them
  (UPat(Ops.ADD, src=(UPat.cvar("c"), UPat.var("x")), name="u"), lambda c, x, u: x + c if x.op is not Ops.CONST else None),
  (UPat(Ops.MUL, src=(UPat.cvar("c"), UPat.var("x")), name="u"), lambda c, x, u: x * c if x.op is not Ops.CONST else None),
  (UPat(Ops.ADD, src=(UPat(Ops.ADD, src=(UPat.var("x"), UPat.cvar("c1"))), UPat.cvar("c2"))),
   lambda x, c1, c2: x + _c(x, c1.arg + c2.arg) if _is_int(x) else None),
  (UPat(Ops.MUL, src=(UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("c1"))), UPat.cvar("c2"))),
   lambda x, c1, c2: x * _c(x, c1.arg * c2.arg) if _is_int(x) else None),
  (UPat(Ops.MUL, src=(UPat(Ops.ADD, src=(UPat.var("x"), UPat.var("y"))), UPat.cvar("c"))),
   lambda x, y, c: x * c + y * c if _is_int(x) and x.dtype != dtypes.bool else None),
  # (x//c)*c + x%c -> x, anywhere in a sum
  (UPat(Ops.ADD, name="x"), recombine_div_mod),
  (UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: div_mod_fold(x, c, False) if _is_int(x) else None),
  (UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: div_mod_fold(x, c, True) if _is_int(x) else None),
  (UPat(Ops.IDIV, src=(UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("a"))), UPat.cvar("b"))),
   lambda x, a, b: x // _c(x, a.arg * b.arg) if a.arg > 0 and b.arg > 0 and x.vmin >= 0 else None),
  (UPat(Ops.MOD, src=(UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("a"))), UPat.cvar("b"))),
   lambda x, a, b: x % b if a.arg > 0 and b.arg > 0 and a.arg % b.arg == 0 and x.vmin >= 0 else None),
  # booleans and selects
  (UPat(Ops.AND, src=[UPat.var("x"), UPat.cvar("c", dtypes.bool)]), lambda x, c: x if c.arg else c),
  (UPat(Ops.OR, src=[UPat.var("x"), UPat.cvar("c", dtypes.bool)]), lambda x, c: c if c.arg else x),
  (UPat(Ops.AND, src=(UPat.var("x"), UPat.var("y"))), lambda x, y: x if x is y else None),
  (UPat(Ops.WHERE, src=(UPat.cvar("c"), UPat.var("a"), UPat.var("b"))), lambda c, a, b: a if c.arg else b),
  (UPat(Ops.WHERE, src=(UPat.var("c"), UPat.var("a"), UPat.var("b"))), lambda c, a, b: a if a is b else None),
  (UPat(Ops.CAST, src=(UPat.var("x"),), name="c"), lambda x, c: x if x.dtype == c.dtype else None),
  # a load whose gate always holds (a window's padded rows, which no index reaches) needs none
  (UPat(Ops.LOAD, src=(UPat.var("b"), UPat.var("i"), UPat.cvar("c", dtypes.bool)), name="ld"), lambda b, i, c, ld: UOp(Ops.LOAD, ld.dtype, (b, i)) if c.arg else None),
  (UPat(Ops.REDUCE, name="red"), collapse_one_hot_sum),
])

def simplify(u: UOp) -> UOp: return graph_rewrite(u, symbolic)
