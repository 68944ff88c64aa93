"""The one IR: immutable, hash-consed UOp nodes."""
from __future__ import annotations
import math, struct
from enum import Enum, auto
from typing import Any, Callable
from fusegrad.dtype import DType, dtypes, truncate
from fusegrad.helpers import WeakValueCache, cached_property, prod

class Ops(Enum):
  # tensor level: where data lives and how it is viewed
  DEVICE = auto(); BUFFER = auto(); CONST = auto(); IOTA = auto(); COPY = auto(); CONTIGUOUS = auto(); DETACH = auto(); BIND = auto(); GATHER = auto(); WINDOW = auto()
  RESHAPE = auto(); PERMUTE = auto(); EXPAND = auto(); PAD = auto(); SHRINK = auto(); FLIP = auto()
  REDUCE_AXIS = auto(); SINK = auto()
  # values
  CAST = auto(); BITCAST = auto()
  EXP = auto(); LOG = auto(); EXP2 = auto(); LOG2 = auto(); SIN = auto(); COS = auto(); TAN = auto(); SQRT = auto(); RECIP = auto()
  NEG = auto(); ABS = auto(); TRUNC = auto(); FLOOR = auto(); CEIL = auto(); RINT = auto(); TANH = auto(); ERF = auto(); SIGMOID = auto()
  ADD = auto(); SUB = auto(); MUL = auto(); FDIV = auto(); IDIV = auto(); MOD = auto(); MAX = auto(); POW = auto()
  CMPLT = auto(); CMPNE = auto(); CMPEQ = auto(); AND = auto(); OR = auto(); XOR = auto(); SHL = auto(); SHR = auto()
  WHERE = auto()
  # kernel level
  DEFINE_GLOBAL = auto(); DEFINE_VAR = auto(); RANGE = auto(); REDUCE = auto(); LOAD = auto(); STORE = auto()
  # linear level
  DEFINE_ACC = auto(); ACC_UPDATE = auto(); ENDRANGE = auto(); STAGE = auto()
  def __repr__(self): return f"Ops.{self.name}"
  # members are singletons compared by identity, so the identity hash fits; Enum's own hashes the name in Python code,
  # and every node lookup in the hash-cons cache hashes an op
  __hash__ = object.__hash__

class GroupOp:
  Unary = {Ops.EXP, Ops.LOG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TAN, Ops.SQRT, Ops.RECIP, Ops.NEG, Ops.ABS, Ops.TRUNC,
           Ops.FLOOR, Ops.CEIL, Ops.RINT, Ops.TANH, Ops.ERF, Ops.SIGMOID}
  Binary = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.POW, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ,
            Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR}
  Ternary = {Ops.WHERE}
  ALU = Unary | Binary | Ternary
  Elementwise = ALU | {Ops.CAST, Ops.BITCAST}
  Comparison = {Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ}
  Commutative = {Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR}
  Movement = {Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP, Ops.WINDOW}
  Float = {Ops.SIGMOID, Ops.EXP, Ops.LOG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TAN, Ops.SQRT, Ops.RECIP, Ops.TANH, Ops.ERF, Ops.FDIV, Ops.POW}

# ops whose shape is their first source's: UOp.shape's fall-through case, which WHERE (the shape of its values) is not
_SAME_SHAPE = GroupOp.Elementwise - {Ops.WHERE}

_INTS = object()  # tags a key that is a tuple of plain ints; private, so no other key can equal a tagged one

def _arg_key(arg: Any) -> Any:
  """A hashable key for a node's arg. 1, 1.0 and True hash alike, and so do 0.0 and -0.0: key on the type and exact bits
  so distinct constants stay distinct."""
  if arg is None: return None
  if isinstance(arg, tuple):
    # shapes and axis lists: plain ints are exact already, so the tuple keys as itself instead of one pair per element
    for a in arg:
      if type(a) is not int: return tuple([_arg_key(a) for a in arg])
    return (_INTS, tuple(arg))
  if isinstance(arg, float): return (float, struct.pack("d", arg))
  if isinstance(arg, (bool, int)): return (type(arg), arg)
  return arg

class UOpMeta(type):
  ucache = WeakValueCache()  # key -> node, held weakly: a graph nobody uses is freed
  def __call__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple = (), arg: Any = None):
    key = (op, dtype, src, None if arg is None else _arg_key(arg))  # most nodes (ALU ops) have no arg
    if (ret := UOpMeta.ucache.get(key)) is not None: return ret
    ret = super().__call__(op, dtype, src, arg)
    UOpMeta.ucache[key] = ret
    return ret

class UOp(metaclass=UOpMeta):
  """An immutable node. Building the same node twice returns the same object, so `is`/`==` is structural equality."""
  def __init__(self, op: Ops, dtype: DType = dtypes.void, src: tuple = (), arg: Any = None):
    self.op, self.dtype, self.src, self.arg = op, dtype, src, arg
  def __reduce__(self): return UOp, (self.op, self.dtype, self.src, self.arg)
  def __repr__(self) -> str: return pretty(self)
  def replace(self, **kw) -> UOp:
    new = dict(op=self.op, dtype=self.dtype, src=self.src, arg=self.arg) | kw
    return UOp(new["op"], new["dtype"], tuple(new["src"]), new["arg"])

  # ---- graph walking
  def toposort(self, stop: Callable[[UOp], bool] | None = None, srcs: Callable[[UOp], tuple] | None = None) -> list[UOp]:
    """Sources before users; an iterative DFS so deep graphs do not hit the recursion limit. `stop(u)`: do not walk
    below u; `srcs(u)`: the sources to follow instead of u.src (to add ordering constraints the graph lacks)."""
    seen: set[int] = set()
    order: list[UOp] = []
    stack: list[tuple[UOp, bool]] = [(self, False)]
    while stack:
      u, expanded = stack.pop()
      if expanded: order.append(u); continue
      if id(u) in seen: continue
      seen.add(id(u))
      stack.append((u, True))
      if stop is None or not stop(u): stack.extend((s, False) for s in reversed(u.src if srcs is None else srcs(u)) if id(s) not in seen)
    return order
  def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
    cache: dict[UOp, UOp] = {}
    for u in self.toposort():
      cache[u] = mapping[u] if u in mapping else (u.replace(src=tuple(cache[s] for s in u.src)) if u.src else u)
    return cache[self]

  # ---- constants and arithmetic builders (used by codegen and symbolic)
  @staticmethod
  def const(dtype: DType, value: Any) -> UOp: return UOp(Ops.CONST, dtype, (), truncate(dtype, value))
  def const_like(self, value: Any) -> UOp: return UOp.const(self.dtype, value)
  def alu(self, op: Ops, *src: UOp) -> UOp:
    dtype = dtypes.bool if op in GroupOp.Comparison else (src[-1].dtype if op is Ops.WHERE else self.dtype)
    return UOp(op, dtype, (self,) + src)
  def _c(self, x: UOp | Any) -> UOp: return x if isinstance(x, UOp) else self.const_like(x)
  def __add__(self, x): return self.alu(Ops.ADD, self._c(x))
  def __radd__(self, x): return self._c(x).alu(Ops.ADD, self)
  def __sub__(self, x): return self.alu(Ops.SUB, self._c(x))
  def __mul__(self, x): return self.alu(Ops.MUL, self._c(x))
  def __rmul__(self, x): return self._c(x).alu(Ops.MUL, self)
  def __floordiv__(self, x): return self.alu(Ops.IDIV, self._c(x))
  def __mod__(self, x): return self.alu(Ops.MOD, self._c(x))
  def __neg__(self): return self.alu(Ops.NEG)
  def __lt__(self, x): return self.alu(Ops.CMPLT, self._c(x))
  def __ge__(self, x): return self.alu(Ops.CMPLT, self._c(x)).alu(Ops.CMPEQ, UOp.const(dtypes.bool, False))
  def __and__(self, x): return self.alu(Ops.AND, self._c(x))
  def __or__(self, x): return self.alu(Ops.OR, self._c(x))
  def ne(self, x): return self.alu(Ops.CMPNE, self._c(x))
  def eq(self, x): return self.alu(Ops.CMPEQ, self._c(x))
  def maximum(self, x): return self.alu(Ops.MAX, self._c(x))
  def where(self, a, b): return self.alu(Ops.WHERE, a, b)
  def cast(self, dtype: DType) -> UOp: return self if self.dtype == dtype else UOp(Ops.CAST, dtype, (self,))

  # ---- tensor-level properties
  @cached_property
  def shape(self) -> tuple[int, ...]:
    op, arg, src = self.op, self.arg, self.src
    if op in _SAME_SHAPE: return src[0].shape  # checked first: the commonest case (none of the ops below is in it)
    if op is Ops.BUFFER: return (arg[1],)
    if op in (Ops.CONST, Ops.BIND, Ops.DEFINE_VAR): return ()
    if op is Ops.IOTA: return (arg,)
    if op is Ops.DEFINE_GLOBAL: return (self.dtype.size,)
    if op in (Ops.RESHAPE, Ops.EXPAND): return tuple(arg)
    if op is Ops.PERMUTE: return tuple(src[0].shape[i] for i in arg)
    if op is Ops.PAD: return tuple(s + b + a for s, (b, a) in zip(src[0].shape, arg))
    if op is Ops.SHRINK: return tuple(e - b for b, e in arg)
    if op is Ops.WINDOW:  # (..., *i) -> (..., *o, *k): sliding windows of size k, stride s, dilation d over the last dims
      k_, s_, d_ = arg
      n, sh = len(k_), src[0].shape
      return sh[:-n] + tuple((i - d * (k - 1) - 1) // st + 1 for i, k, st, d in zip(sh[-n:], k_, s_, d_)) + tuple(k_)
    if op is Ops.REDUCE_AXIS: return tuple(1 if i in arg[1] else s for i, s in enumerate(src[0].shape))
    if op is Ops.WHERE: return src[1].shape
    if op is Ops.GATHER: return src[1].shape
    if op in (Ops.SINK, Ops.DEVICE): return ()
    return src[0].shape
  @property
  def size(self) -> int: return prod(self.shape)
  @cached_property
  def device(self) -> str | None:
    if self.op is Ops.DEVICE: return self.arg
    if self.op is Ops.COPY: return self.src[1].arg
    for s in self.src:
      if (d := s.device) is not None: return d
    return None
  @property
  def base(self) -> UOp:
    return self.src[0].base if self.op in GroupOp.Movement else self

  # ---- integer value bounds (for symbolic simplification)
  @cached_property
  def vmin_vmax(self) -> tuple[Any, Any]: return _bounds(self)
  @property
  def vmin(self): return self.vmin_vmax[0]
  @property
  def vmax(self): return self.vmin_vmax[1]

def Variable(name: str, vmin: int, vmax: int) -> UOp:
  """A symbolic integer (e.g. a sequence position) with known bounds; `.bind(value)` gives it a value for one launch."""
  if not name.isidentifier(): raise ValueError(f"Variable name {name!r} must be a valid identifier")
  if vmin > vmax: raise ValueError(f"Variable {name}: vmin {vmin} > vmax {vmax}")
  return UOp(Ops.DEFINE_VAR, dtypes.int32, (), (name, vmin, vmax))

def _bind(self: UOp, value: int) -> UOp:
  if self.op is not Ops.DEFINE_VAR: raise TypeError("only a Variable can be bound")
  if not self.arg[1] <= value <= self.arg[2]: raise ValueError(f"{self.arg[0]}={value} is outside its bounds [{self.arg[1]}, {self.arg[2]}]")
  return UOp(Ops.BIND, self.dtype, (self, UOp.const(self.dtype, value)))
UOp.bind = _bind  # type: ignore[attr-defined]

def _bounds(u: UOp) -> tuple[Any, Any]:
  d = u.dtype
  full = (dtypes.min(d), dtypes.max(d)) if (dtypes.is_int(d) or d == dtypes.bool) else (-math.inf, math.inf)
  if u.op is Ops.CONST: return (u.arg, u.arg)
  if u.op is Ops.RANGE: return (0, max(0, u.src[0].vmax - 1))
  if u.op is Ops.DEFINE_VAR: return u.arg[1], u.arg[2]
  if u.op is Ops.BIND: return u.src[0].vmin_vmax
  if not (dtypes.is_int(d) or d == dtypes.bool): return full
  s = [x.vmin_vmax for x in u.src]
  def clamp(lo, hi): return (lo, hi) if full[0] <= lo and hi <= full[1] else full
  if u.op is Ops.ADD: return clamp(s[0][0] + s[1][0], s[0][1] + s[1][1])
  if u.op is Ops.SUB: return clamp(s[0][0] - s[1][1], s[0][1] - s[1][0])
  if u.op is Ops.NEG: return clamp(-s[0][1], -s[0][0])
  if u.op is Ops.MUL:
    vals = [a * b for a in s[0] for b in s[1]]
    return clamp(min(vals), max(vals))
  if u.op is Ops.MAX: return (max(s[0][0], s[1][0]), max(s[0][1], s[1][1]))
  if u.op is Ops.IDIV and s[1][0] == s[1][1] and s[1][0] > 0 and s[0][0] >= 0: return (s[0][0] // s[1][0], s[0][1] // s[1][0])
  if u.op is Ops.MOD and s[1][0] == s[1][1] and s[1][0] > 0:
    if s[0][0] >= 0: return (0, min(s[0][1], s[1][0] - 1))
    return (-(s[1][0] - 1), s[1][0] - 1)
  if u.op is Ops.CAST and (dtypes.is_int(u.src[0].dtype) or u.src[0].dtype == dtypes.bool) and full[0] <= s[0][0] and s[0][1] <= full[1]: return s[0]
  if u.op is Ops.WHERE: return (min(s[1][0], s[2][0]), max(s[1][1], s[2][1]))
  if u.op is Ops.CMPLT:
    if s[0][1] < s[1][0]: return (True, True)
    if s[0][0] >= s[1][1]: return (False, False)
    return (False, True)
  if u.op is Ops.AND and d == dtypes.bool: return (s[0][0] and s[1][0], s[0][1] and s[1][1])
  if u.op is Ops.OR and d == dtypes.bool: return (s[0][0] or s[1][0], s[0][1] or s[1][1])
  if u.op is Ops.CMPEQ and d == dtypes.bool and s[0][0] == s[0][1] and s[1][0] == s[1][1]: return (s[0][0] == s[1][0],) * 2
  if u.op is Ops.CMPNE and d == dtypes.bool and s[0][0] == s[0][1] and s[1][0] == s[1][1]: return (s[0][0] != s[1][0],) * 2
  if u.op in (Ops.CMPEQ, Ops.CMPNE): return (False, True)
  return full

def pretty(u: UOp, max_lines: int = 40) -> str:
  lines, names = [], {}
  for i, x in enumerate(u.toposort()):
    names[x] = f"%{i}"
    arg = "" if x.arg is None else f", arg={x.arg!r}"
    lines.append(f"%{i} = {x.op.name}({x.dtype}{', ' if x.src else ''}{', '.join(names[s] for s in x.src)}{arg})")
  if len(lines) > max_lines: lines = lines[:max_lines // 2] + [f"... {len(lines) - max_lines} more ..."] + lines[-max_lines // 2:]
  return "\n".join(lines)

def exec_alu(op: Ops, dtype: DType, operands: list) -> Any:
  """Evaluate one ALU op on Python values with the C renderer's semantics; the PYTHON device and constant folding share it."""
  return truncate(dtype, PYTHON_ALU[op](*operands)) if op not in GroupOp.Comparison else bool(PYTHON_ALU[op](*operands))

def _safe(f):
  def g(*x):
    try: return f(*x)
    except (ValueError, OverflowError, ZeroDivisionError): return _special(f, *x)
  return g

def _special(f, *x):
  a = x[0]
  if any(isinstance(v, float) and math.isnan(v) for v in x): return math.nan
  if f is math.exp: return math.inf if a > 0 else 0.0
  if f in (math.log, math.log2): return -math.inf if a == 0 else math.nan
  if f is math.sqrt: return math.nan
  if f in (math.sin, math.cos, math.tan): return math.nan
  if f is _pow: return _pow_special(*x)
  if f is _exp2: return math.inf if a > 0 else 0.0
  return math.nan

def _exp2(x): return 2.0 ** x
def _pow(a, b): return a ** b if not (a < 0 and b != int(b)) else math.nan
def _pow_special(a, b):
  if a == 0: return math.inf if b < 0 else 0.0
  try: return math.copysign(math.inf, a if (b == int(b) and int(b) % 2) else 1.0)
  except Exception: return math.nan

def _fdiv(a, b):
  if b == 0: return math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1.0, b)
  return a / b
def _idiv(a, b):
  if isinstance(a, float) or isinstance(b, float): return math.trunc(a / b) if b != 0 else _fdiv(a, b)
  if b == 0: return 0
  q = abs(a) // abs(b)
  return q if (a >= 0) == (b > 0) else -q
def _mod(a, b):
  if isinstance(a, float) or isinstance(b, float): return math.fmod(a, b) if b != 0 else math.nan
  return 0 if b == 0 else a - b * _idiv(a, b)
def _max(a, b):
  if isinstance(a, float) and math.isnan(a): return a
  return a if a > b else b
def _rint(x): return float(round(x)) if math.isfinite(x) else x
def _trunc(x): return float(math.trunc(x)) if math.isfinite(x) else x
def _floor(x): return float(math.floor(x)) if math.isfinite(x) else x
def _ceil(x): return float(math.ceil(x)) if math.isfinite(x) else x
def _recip(x): return _fdiv(1.0, x)
def _shl(a, b): return a << b
def _shr(a, b): return a >> b

PYTHON_ALU: dict[Ops, Callable] = {
  Ops.EXP: _safe(math.exp), Ops.LOG: _safe(math.log), Ops.EXP2: _safe(_exp2), Ops.LOG2: _safe(math.log2), Ops.SIN: _safe(math.sin),
  Ops.COS: _safe(math.cos), Ops.TAN: _safe(math.tan), Ops.SQRT: _safe(math.sqrt), Ops.RECIP: _recip, Ops.NEG: lambda x: -x,
  Ops.ABS: abs, Ops.TRUNC: _trunc, Ops.FLOOR: _floor, Ops.CEIL: _ceil, Ops.RINT: _rint, Ops.TANH: math.tanh, Ops.ERF: math.erf, Ops.SIGMOID: lambda x: 1.0 / (1.0 + _safe(math.exp)(-x)),
  Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b, Ops.FDIV: _fdiv, Ops.IDIV: _idiv,
  Ops.MOD: _mod, Ops.MAX: _max, Ops.POW: _safe(_pow), Ops.CMPLT: lambda a, b: a < b, Ops.CMPNE: lambda a, b: a != b,
  Ops.CMPEQ: lambda a, b: a == b, Ops.AND: lambda a, b: a & b, Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b,
  Ops.SHL: _shl, Ops.SHR: _shr, Ops.WHERE: lambda c, a, b: a if c else b,
}
