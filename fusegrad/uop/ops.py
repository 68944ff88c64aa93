"""The one IR: immutable, hash-consed UOp nodes."""
from __future__ import annotations
import math, struct
from enum import Enum, auto
from typing import Any, Callable
from fusegrad.dtype import FLOATS, LOW_FLOATS, DType, dtypes, category, least_upper_dtype, result_dtype, truncate
from fusegrad.helpers import DTypeError, KeyRef, TensorError, WeakValueCache, cached_property, prod

class Ops(Enum):
  # tensor level: where data lives and how it is viewed
  DEVICE = auto(); BUFFER = auto(); CONST = auto(); IOTA = auto(); COPY = auto(); CONTIGUOUS = auto(); DETACH = auto(); BIND = auto(); GATHER = auto(); WINDOW = auto()
  # ASSIGN(target buffer view, value, *starts), arg dims: the target with the box of value's shape that starts at starts
  # (one per dim in dims; the other dims start at 0) overwritten by value, in place (schedule/kernel.py stores only
  # value's elements into the target's buffer)
  ASSIGN = auto()
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
  # SKIP(gate, range): the rest of this iteration of range adds nothing where gate is false, so a renderer may go on to
  # the next one (C: continue); ignoring it is correct too
  SKIP = auto()
  # GPU level (codegen/gpu.py): a hardware thread index, arg (name, count), threads at or past count do nothing; a
  # block's shared memory; a barrier (all the block's threads reach it; it stands for its memory after the stores it waits for)
  SPECIAL = auto(); DEFINE_LOCAL = auto(); BARRIER = auto()
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

# ---- symbolic sizes. A dim's size may be an int expression of bound Variables (`pos + 1`): a "symbolic dim". Its
# storage is the expression's upper bound (`shape`, what kernels loop over and buffers hold); `vshape` holds the
# expression. Positions past its value are unspecified, so everything that could observe them masks them: a reduction
# over the dim skips them, a pad after it writes zeros there. Each compiled kernel thus serves every value of the
# Variables, which are passed at launch. A movement op takes the expressions as extra sources, named in its arg by Sym.
class Sym:
  """In a movement op's arg: the size or offset given by the op's source i (an int expression of bound Variables)."""
  __slots__ = ("i",)
  def __init__(self, i: int): self.i = i
  def __eq__(self, other): return type(other) is Sym and other.i == self.i
  def __hash__(self): return hash((Sym, self.i))
  def __repr__(self): return f"Sym({self.i})"

class Capturing:
  """Set by engine.realize.capture while TinyJit captures a step: a shape derived from a Variable's current value (a
  reshape that does not keep each symbolic dim whole) would be baked into every replay, so it raises then instead."""
  active = False

def _by_value(what: str) -> None:
  if Capturing.active: raise TypeError(f"{what} depends on the Variables' current values, which a TinyJit replay would reuse for every value; "
                                       "keep each symbolic dim whole (reshape only the int dims around it), or do this outside the jitted function")

def smax(x: Any) -> int: return x.vmax if isinstance(x, UOp) else x

def sym_value(x: Any) -> int:
  """The value a size has under its Variables' bindings (an int as it is)."""
  if not isinstance(x, UOp): return x
  if x.op is Ops.BIND: return x.src[1].arg
  if x.op is Ops.CONST: return x.arg
  if x.op is Ops.DEFINE_VAR: raise ValueError(f"Variable {x.arg[0]} in a shape is not bound: use {x.arg[0]}.bind(value)")
  if x.op is Ops.CAST: return truncate(x.dtype, sym_value(x.src[0]))
  return exec_alu(x.op, x.dtype, [sym_value(s) for s in x.src])

def fmt_shape(shape: tuple) -> str:
  return "(" + ", ".join(_fmt_size(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
def _fmt_size(s: Any) -> str:
  if not isinstance(s, UOp): return str(s)
  if s.op is Ops.BIND: return f"{s.src[0].arg[0]}={s.src[1].arg}"
  if s.op is Ops.CONST: return str(s.arg)
  if s.op is Ops.DEFINE_VAR: return s.arg[0]
  names = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*"}
  if s.op in names and len(s.src) == 2: return f"({_fmt_size(s.src[0])}{names[s.op]}{_fmt_size(s.src[1])})"
  return f"{s.op.name.lower()}({', '.join(_fmt_size(x) for x in s.src)})"

def check_size(s: Any) -> None:
  """A size in a shape: an int >= 0, or an int expression of bound Variables that cannot be negative."""
  if isinstance(s, UOp):
    if not dtypes.is_int(s.dtype) or s.shape != (): raise TypeError(f"a symbolic size must be an int expression of Variables, got {s.dtype} of shape {s.shape}")
    if s.vmin < 0: raise TensorError(f"symbolic size {_fmt_size(s)} can be negative (its smallest value is {s.vmin})")
    sym_value(s)  # every Variable in it is bound
  elif not isinstance(s, int) or isinstance(s, bool): raise TypeError(f"shape entries must be ints or bound Variables, got {s!r}")
  elif s < 0: raise TensorError(f"negative size {s} in a shape")

def sym_node(op: Ops, x: UOp, arg: tuple, dtype: DType | None = None) -> UOp:
  """A movement node whose arg may hold size expressions: each becomes a source, named in the arg by Sym."""
  srcs = [x]
  def conv(a):
    if isinstance(a, tuple): return tuple(conv(b) for b in a)
    if not isinstance(a, UOp): return a
    for i, s in enumerate(srcs[1:], 1):
      if s is a: return Sym(i)
    srcs.append(a)
    return Sym(len(srcs) - 1)
  new_arg = conv(arg)  # before srcs is read: conv appends to it
  return UOp(op, x.dtype if dtype is None else dtype, tuple(srcs), new_arg)

def _int_runs(shape: tuple) -> list[list]:
  """The runs of int sizes before, between and after the symbolic ones."""
  runs: list[list] = [[]]
  for s in shape:
    if isinstance(s, UOp): runs.append([])
    else: runs[-1].append(s)
  return runs

def _broadcast_vshape(a: tuple, b: tuple) -> tuple:
  """broadcast_shape for shapes with symbolic dims: a symbolic dim meets only itself or 1."""
  n = max(len(a), len(b))
  a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
  out = []
  for x, y in zip(a, b):
    if x is y or (not isinstance(y, UOp) and y == 1): out.append(x)
    elif not isinstance(x, UOp) and x == 1: out.append(y)
    elif not isinstance(x, UOp) and not isinstance(y, UOp) and x == y: out.append(x)
    else: raise TensorError(f"shapes {fmt_shape(a)} and {fmt_shape(b)} cannot be broadcast together: {_fmt_size(x)} and {_fmt_size(y)} differ")
  return tuple(out)

def _merge_vshapes(shapes) -> tuple:
  """The symbolic sizes of sources already broadcast to one storage shape: a dim is symbolic if any source's is."""
  out = None
  for vs in shapes:
    if out is None: out = vs
    elif any(isinstance(s, UOp) for s in vs): out = tuple(b if isinstance(b, UOp) and not isinstance(a, UOp) else a for a, b in zip(out, vs))
  return out

def _set_facts(d: dict, shape: tuple, device: str | None, tensor_level: bool) -> None:
  """A concrete node's shape, vshape, device and tensor_level, into its __dict__ (where the cached properties look first);
  item by item, which is a third of the time of a dict.update with keywords."""
  d["shape"] = d["vshape"] = shape
  d["device"], d["tensor_level"] = device, tensor_level

def _known_facts(u: UOp) -> None:
  """A new elementwise node whose sources are concrete tensor-level nodes of one shape: its shape, vshape, device and
  tensor_level are theirs, set now. Eager code reads all four of every node it builds, and deriving them lazily (a
  cached property each, vshape walking back to the last node that had one) was a third of building a small graph."""
  src = u.src
  shape, device = src[0].shape, None
  for s in src:
    if not s.tensor_level or s.vshape is not s.shape or s.shape != shape: return
    if device is None: device = s.device
  d = u.__dict__  # (_set_facts, inlined: this runs for every elementwise node built)
  d["shape"] = d["vshape"] = shape
  d["device"], d["tensor_level"] = device, True

def _elementwise(op: Ops, dtype: DType, src: tuple, shape: tuple, device: str | None) -> UOp:
  """A tensor-level elementwise node whose sources are known to be concrete, of `shape` and on `device`: alu and
  _known_facts in one call, for the builders every eager op runs."""
  u = UOp(op, dtype, src)
  if "shape" not in (d := u.__dict__):
    d["shape"] = d["vshape"] = shape
    d["device"], d["tensor_level"] = device, True
  return u

def _movement(op: Ops, x: UOp, shape: tuple[int, ...], arg: Any = None) -> UOp:
  """A movement op (or a REDUCE_AXIS) of a node without symbolic dims to `shape` (arg: RESHAPE and EXPAND's is the
  shape), with its facts set now (as _known_facts does)."""
  u = UOp(op, x.dtype, (x,), shape if arg is None else arg)
  if "shape" not in (d := u.__dict__): _set_facts(d, shape, x.device, x.tensor_level)
  return u

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

PERMUTED_STORE = "permuted store"  # the arg of permuted_contiguous's CONTIGUOUS

class UOpMeta(type):
  ucache = WeakValueCache()  # key -> node, held weakly: a graph nobody uses is freed
  def __call__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple = (), arg: Any = None):
    key = (op, dtype, src, None if arg is None else _arg_key(arg))  # most nodes (ALU ops) have no arg
    # the cache's get and set, and the node's fields, inlined (no __init__): this runs for every node built
    cache = UOpMeta.ucache
    if (ref := cache.refs.get(key)) is not None and (ret := ref()) is not None: return ret
    ret = cls.__new__(cls)
    ret.op, ret.dtype, ret.src, ret.arg = op, dtype, src, arg
    ref = cache.refs[key] = KeyRef(ret, cache.forget)
    ref.key = key
    return ret

# ---- op builders: the one implementation of Tensor's ops. Tensor's methods convert their arguments and wrap what these
# build (`Tensor(self.uop.add(x))`), and code written on UOps (the derivative rules of gradient.py) makes the same graphs
# as Tensor code, so they hash-cons and fuse with the forward graph.
#
# One class, two levels. A tensor-level node (`tensor_level`: it has a device, or a bound variable) broadcasts, promotes
# dtypes as torch does, makes a Python number a constant of its shape (CONST(DEVICE) -> RESHAPE -> EXPAND) and raises
# Tensor's errors. A kernel-level node (the index arithmetic of codegen and symbolic) keeps plain arithmetic: a number is
# a bare CONST of its dtype, and nothing is promoted or broadcast. Equality is `eq`/`ne`: `==` on UOps is identity, which
# hash-consing relies on.

# OpBuilder._reduce_in_groups: partial results per output, the shortest reduction split, and the most outputs (with 8 or
# more the one-pass kernel already gives every core work; batchnorm's per-channel sums measured slower split)
REDUCE_GROUPS, REDUCE_GROUP_MIN, REDUCE_GROUP_MAX_OUT, REDUCE_CHUNK = 64, 1 << 16, 8, 4096

def _sum_groups(n: int) -> int:
  """How many partial sums a long float sum of n values takes (n a multiple of REDUCE_GROUPS, 2**16 or more): parts of about
  REDUCE_CHUNK values, so each SIMD accumulator adds a few dozen values, not thousands (a float32 sum of 1e7 0.1s was
  999850, torch's pairwise sum 999999.6). Odd factors of n go into the count first: the parts keep n's powers of 2,
  whole vectors."""
  groups = 1
  for f in (3, 3, 5, 5, 5, 5, 5, 7, 7, *(2,) * 24):
    if n // groups > REDUCE_CHUNK and n % (groups * f) == 0: groups *= f
  return max(groups, REDUCE_GROUPS)  # (at least as many as before, for the threads; REDUCE_GROUPS divides n)

def sum_dtype(dt: DType) -> DType:
  """The dtype sum() and prod() return by default, as torch: bool and small ints widen to the default int."""
  if dt == dtypes.bool or (dtypes.is_int(dt) and not dtypes.is_unsigned(dt)): return least_upper_dtype(dt, dtypes.default_int) if dt != dtypes.bool else dtypes.default_int
  if dtypes.is_unsigned(dt): return least_upper_dtype(dt, dtypes.uint32)
  return dt

def wide_dtype(dt: DType) -> DType:
  """16- and 8-bit floats accumulate in float32 and round once at the end (a float16 sum of 20,000 tens would overflow)."""
  return dtypes.float32 if dt in LOW_FLOATS else dt

def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  if len(shapes) == 2 and shapes[0] == shapes[1]: return tuple(shapes[0])  # the common case
  n = max((len(s) for s in shapes), default=0)
  out = []
  for dims in zip(*[(1,) * (n - len(s)) + tuple(s) for s in shapes]):
    big = {d for d in dims if d != 1}
    if len(big) > 1: raise TensorError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together (dims {dims} differ)")
    out.append(big.pop() if big else 1)
  return tuple(out)

def promote_types(x, y) -> DType:
  """PyTorch's rule for two tensors (UOps or Tensors): a 0-d one only raises the result's category (int -> float), like
  a Python scalar does, but with its own dtype; between tensors of the same kind of rank the usual lattice applies."""
  if (len(x.shape) == 0) != (len(y.shape) == 0):
    dim, zero = (y, x) if len(x.shape) == 0 else (x, y)
    return zero.dtype if category(zero.dtype) > category(dim.dtype) else dim.dtype
  return least_upper_dtype(x.dtype, y.dtype)

def checked_dtype(values: list, dtype: DType | None) -> DType:
  """The dtype for Python numbers: given, or inferred as torch does (ints that need it widen to int64). An int that
  does not fit an integer dtype raises instead of wrapping silently (negative ints into unsigned dtypes wrap, as torch)."""
  ints = [v for v in values if type(v) is int]
  if dtype is None:
    dtype = dtypes.from_py(values)
    if dtype == dtypes.default_int and ints and not all(dtypes.min(dtype) <= v <= dtypes.max(dtype) for v in ints): dtype = dtypes.int64
  if dtypes.is_int(dtype) and ints:
    lo, hi = (-dtypes.max(dtype) if dtypes.is_unsigned(dtype) else dtypes.min(dtype)), dtypes.max(dtype)  # (torch: -255 wraps into uint8, -256 raises)
    if bad := next((v for v in ints if not lo <= v <= hi), None):
      raise RuntimeError(f"value {bad} cannot be converted to type {dtype} without overflow" if dtype != dtypes.int64 or abs(bad) < 2**64 else
                         f"value {bad} does not fit any integer dtype (the widest is int64)")
  return dtype

def check_numel(shape: tuple[int, ...]) -> tuple[int, ...]:
  """Kernels index with 64-bit integers: a larger tensor would wrap around and give wrong answers, so it is refused."""
  if prod(shape) >= 2**63: raise RuntimeError(f"shape {shape} has {prod(shape)} elements, more than 64-bit indexing can address (2**63 - 1)")
  return shape

def norm_axis(axis: int, ndim: int, name: str = "dim") -> int:
  """axis in [-ndim, ndim) (a 0-d tensor takes -1 and 0) as a non-negative index."""
  if not isinstance(axis, int) or isinstance(axis, bool): raise TypeError(f"{name} must be an int, got {type(axis).__name__}")
  lo, hi = (-ndim, ndim - 1) if ndim else (-1, 0)
  if not lo <= axis <= hi: raise IndexError(f"{name} {axis} is out of range for a tensor with {ndim} dimension(s) (expected in [{lo}, {hi}])")
  return axis % max(ndim, 1)

def _plain_sizes(shape: tuple) -> bool:
  """Are these sizes (or dims) all non-negative ints? (No bools, no Variables, no -1: the fast paths of reshape and
  permute, which every model calls many times a step.)"""
  return all(type(s) is int for s in shape) and (not shape or min(shape) >= 0)

def _sizes(shape, args) -> tuple:
  """Tensor's spellings of a shape argument: f((2, 3)) or f(2, 3)."""
  return tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + tuple(args)

# a node's own vector-Jacobian product, in its __dict__ under this name: (input nodes, vjp(g, *inputs, needs) -> one gradient
# or None per input), used instead of the derivative of its graph (gradient.py's with_gradient sets it)
DERIVATIVE = "derivative"

def _relu_vjp(g: UOp, x: UOp, needs: tuple) -> tuple: return (((x < 0) | x.eq(0)).where(0, g),)

# OpBuilder.tensor_const's nodes, the most recent CONSTS_KEPT held strongly: an eager program's scalars (`x * 1.01`) recur
# call after call, and rebuilding the CONST -> RESHAPE -> EXPAND chain each time was over half the cost of such an op
CONSTS_KEPT = 1024
_consts: dict = {}
_FLOAT_DTYPES, _SCALARS = frozenset(FLOATS), frozenset((int, float))
_pack_double = struct.Struct("d").pack
_device_nodes: dict = {}  # DEVICE nodes, kept for good (there are only a few devices): every constant needs one

class OpBuilder:
  """The builder methods of UOp (it inherits them). `self` is always a UOp. Each method checks its level first
  (`tensor_level`): kernel-level nodes get plain arithmetic, tensor-level ones Tensor's semantics and error messages."""

  # ---- constants
  @staticmethod
  def device_node(device: str | None) -> UOp:
    if (u := _device_nodes.get(device)) is None: u = _device_nodes[device] = UOp(Ops.DEVICE, arg=device)
    return u
  @staticmethod
  def tensor_const(value: Any, dtype: DType, device: str | None, shape: tuple[int, ...]) -> UOp:
    """A tensor-level constant: CONST(DEVICE), reshaped to shape's rank and expanded to shape (Tensor's scalar operand)."""
    # the same scalars recur op after op: one memo lookup instead of three node lookups and a truncate
    # keyed on the value's type and the value, except where equal values differ (0.0 and -0.0) or a value is not equal
    # to itself (NaN): those key on the exact bits
    if value and value == value: key = (type(value), value, dtype, device, shape)
    else: key = ((float, _pack_double(value)) if type(value) is float else _arg_key(value), dtype, device, shape)
    if (c := _consts.get(key)) is None:
      c = UOp(Ops.CONST, dtype, (UOp.device_node(device),), truncate(dtype, value))
      # its facts set now, as _movement's: derived lazily they were over half the cost of `x * 1.01` (23.5 -> 10.4 us)
      if "shape" not in (d := c.__dict__): _set_facts(d, (), device, True)
      if shape:
        c = _movement(Ops.RESHAPE, c, (1,) * len(shape))
        if c.shape != shape: c = _movement(Ops.EXPAND, c, shape)
      if len(_consts) >= CONSTS_KEPT: del _consts[next(iter(_consts))]  # the oldest
      _consts[key] = c
    return c
  def _fast_alu(self, op: Ops, x, reverse: bool = False):
    """self op x (x op self if reverse), an arithmetic op or a comparison, for the commonest operands of eager code: self
    a float node of concrete shape and x a Python int or float, or a node of self's shape, dtype and device. The node
    that _broadcasted and alu build, in one call; None for other operands (or nodes without their facts set yet): the
    caller takes the general path."""
    d = self.__dict__
    if (shape := d.get("shape")) is None or d.get("vshape") is not shape or not d.get("tensor_level") or (dtype := self.dtype) not in _FLOAT_DTYPES: return None
    device = d["device"]
    if type(x) is UOp:
      xd = x.__dict__
      if x.dtype is not dtype or (xs := xd.get("shape")) != shape or xd.get("vshape") is not xs or not xd.get("tensor_level") or xd["device"] != device: return None
    elif type(x) in _SCALARS:
      # (tensor_const's memo lookup, inlined)
      if not (x and x == x) or (c := _consts.get((type(x), x, dtype, device, shape))) is None: c = UOp.tensor_const(x, dtype, device, shape)
      x = c
    else: return None
    return _elementwise(op, dtypes.bool if op in GroupOp.Comparison else dtype, (x, self) if reverse else (self, x), shape, device)
  def const_like(self, value: Any, dtype: DType | None = None):
    """value as a constant (of self's dtype unless given) that combines with self: of its shape and device at tensor level,
    a bare CONST in a kernel."""
    dtype = self.dtype if dtype is None else dtype
    return UOp.tensor_const(value, dtype, self.device, self.shape) if self.tensor_level else UOp.const(dtype, value)
  def _c(self, x): return x if isinstance(x, UOp) else self.const_like(x)
  def _kc(self, x): return x if isinstance(x, UOp) else UOp.const(self.dtype, x)  # _c, known to be in a kernel
  @staticmethod
  def arange(start: int, stop: int | None = None, step: int = 1, device: str | None = None) -> UOp:
    """Tensor.arange for ints: IOTA * step + start, in the default int (int64 when the values need it)."""
    if stop is None: start, stop = 0, start
    n = max(0, -(-(stop - start) // step))
    ends = [start, start + (n - 1) * step] if n else [start]
    dt = dtypes.default_int if all(dtypes.min(dtypes.default_int) <= v <= dtypes.max(dtypes.default_int) for v in ends) else dtypes.int64
    iota = UOp(Ops.IOTA, dtypes.int32 if n < 2**31 else dtypes.int64, (UOp.device_node(device),), n)
    return (iota.cast(dt) * step + start).cast(dt)

  # ---- broadcasting and promotion (tensor level). An operand is a UOp or a Python number (bool, int, float): Tensor
  # turns its other spellings (lists, numpy scalars, Tensors) into one of those, and checks devices
  def _broadcast_to(self, shape: tuple[int, ...]):
    if self.shape == shape and self.vshape is self.shape: return self  # the common case (a UOp never equals an int)
    if self.vshape is not self.shape or any(isinstance(s, UOp) for s in shape): return self._sym_broadcast_to(tuple(shape))
    if len(self.shape) > len(shape): raise TensorError(f"cannot broadcast shape {self.shape} to {shape}")
    x = _movement(Ops.RESHAPE, self, (1,) * (len(shape) - len(self.shape)) + self.shape) if len(self.shape) < len(shape) else self
    if any(a != b and a != 1 for a, b in zip(x.shape, shape)):
      broadcast_shape(x.shape, shape)  # sizes that differ, neither 1: its message names both shapes
      raise TensorError(f"cannot broadcast shape {self.shape} to {shape}")
    return _movement(Ops.EXPAND, x, check_numel(tuple(shape))) if x.shape != shape else x
  def _sym_broadcast_to(self, shape: tuple):
    """_broadcast_to with symbolic dims. An int target equal to a symbolic dim's storage keeps the dim (callers that
    broadcast by storage shapes); otherwise only a size-1 dim takes a new size."""
    vs = self.vshape
    if len(vs) > len(shape): raise TensorError(f"cannot broadcast shape {fmt_shape(vs)} to {fmt_shape(shape)}")
    vs = (1,) * (len(shape) - len(vs)) + vs
    out = []
    for a, t in zip(vs, shape):
      if a is t or (not isinstance(a, UOp) and not isinstance(t, UOp) and a == t) or (isinstance(a, UOp) and not isinstance(t, UOp) and t == a.vmax): out.append(a)
      elif not isinstance(a, UOp) and a == 1:
        check_size(t)
        out.append(t)
      else: raise TensorError(f"cannot broadcast shape {fmt_shape(self.vshape)} to {fmt_shape(shape)}")
    x = sym_node(Ops.RESHAPE, self, vs) if len(vs) != len(self.shape) else self
    return x if all(a is o for a, o in zip(vs, out)) else sym_node(Ops.EXPAND, x, tuple(out))
  def _broadcasted(self, y, reverse: bool = False) -> tuple:
    """(self, y) as two nodes of one dtype (torch's promotion) and shape (broadcast); reverse: (y, self)."""
    if isinstance(y, (bool, int, float)):
      # a Python scalar is weak: result_dtype, and self's shape is already the broadcast shape
      dt = result_dtype(self.dtype, y)
      x = self.cast(dt)
      c = UOp.tensor_const(y, dt, x.device, x.shape)
      return (c, x) if reverse else (x, c)
    x = self
    if y.shape == x.shape and y.dtype is x.dtype and y.vshape == x.vshape: return (y, x) if reverse else (x, y)  # nothing to promote or broadcast
    if reverse: x, y = y, x
    dt = promote_types(x, y)
    x, y = x.cast(dt), y.cast(dt)
    shape = broadcast_shape(x.shape, y.shape)
    if x.vshape is not x.shape or y.vshape is not y.shape: shape = _broadcast_vshape(x.vshape, y.vshape)
    return x._broadcast_to(shape), y._broadcast_to(shape)
  def _binary(self, op: Ops, y, reverse: bool = False):
    if not self.tensor_level: return self._kc(y).alu(op, self) if reverse else self.alu(op, self._kc(y))  # no promotion, no broadcasting
    a, b = self._broadcasted(y, reverse)
    return a.alu(op, b)

  # ---- elementwise (Tensor's semantics at tensor level)
  def add(self, x):
    if not self.tensor_level: return self.alu(Ops.ADD, self._kc(x))
    if type(x) is int and x == 0 and self.device is None and self.shape == (): return self  # a symbolic size: n + 0 stays n's node
    a, b = self._broadcasted(x)
    return a.alu(Ops.OR if a.dtype == dtypes.bool else Ops.ADD, b)
  def sub(self, x, reverse: bool = False):
    if not self.tensor_level: return self._binary(Ops.SUB, x, reverse)
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: raise DTypeError("subtraction of bool tensors is not supported; use logical_xor() or ^")
    return a.alu(Ops.SUB, b)
  def mul(self, x, reverse: bool = False):
    if not self.tensor_level: return self._binary(Ops.MUL, x, reverse)
    if type(x) is int and x == 1 and self.device is None and self.shape == (): return self  # (so shapes built from it match n)
    a, b = self._broadcasted(x, reverse)
    return a.alu(Ops.AND if a.dtype == dtypes.bool else Ops.MUL, b)
  def div(self, x, reverse: bool = False, rounding_mode: str | None = None):
    if not self.tensor_level: return self._binary(Ops.FDIV, x, reverse)
    a, b = self._broadcasted(x, reverse)
    if rounding_mode == "trunc": return a.alu(Ops.IDIV, b) if dtypes.is_int(a.dtype) else a.alu(Ops.FDIV, b).trunc()
    if rounding_mode == "floor": return a._floordiv(b)
    if rounding_mode is not None: raise TensorError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    return a.alu(Ops.FDIV, b)
  def _floordiv(self, b):
    """self // b rounding down, for two operands of one dtype and shape."""
    if dtypes.is_float(self.dtype): return self._float_floordiv(b)
    if self.dtype == dtypes.bool: raise DTypeError("floor division of bool tensors is not supported")
    q = self.alu(Ops.IDIV, b)
    if dtypes.is_unsigned(self.dtype): return q
    # C truncates toward zero; floor division rounds down when the signs differ and there is a remainder
    fix = self.alu(Ops.MOD, b).ne(0) & (self < 0).ne(b < 0)
    return q - fix.cast(self.dtype)
  def _float_floordiv(self, b):
    """Python's and torch's float floor division: from the exact remainder fmod(a, b), so it agrees with % (floor(a / b)
    rounds the quotient first: 1.0 // 0.1 was 10, not 9, and inf // 2 was inf, not NaN). b == 0 gives a / b."""
    q, mod = self.alu(Ops.FDIV, b), self.alu(Ops.MOD, b)
    div = (self - mod).alu(Ops.FDIV, b)  # an integer up to the rounding of the division
    div = (mod.ne(0) & (b < 0).ne(mod < 0)).where(div - 1, div)  # the remainder takes b's sign: one less
    fl = div.floor()
    fl = (div - fl > 0.5).where(fl + 1, fl)  # div rounded to the nearest integer
    out = b.eq(0).where(q, div.eq(0).where(q * 0, fl))  # a zero quotient has the sign of a / b (finite there)
    # torch's gradient: zeros for both (not 0 * inf: the where above would pass g / b where b == 0)
    out.__dict__[DERIVATIVE] = ((self, b), lambda g, a, b, needs: (a.const_like(0), b.const_like(0)))
    return out
  def idiv(self, x, reverse: bool = False):
    """Floor division (Python's and torch's //); `//` on UOps is C's, at both levels."""
    if not self.tensor_level: return self._binary(Ops.IDIV, x, reverse)
    a, b = self._broadcasted(x, reverse)
    return a._floordiv(b)
  def mod(self, x, reverse: bool = False):
    """The remainder with the divisor's sign (Python's and torch's %); `%` on UOps is C's, at both levels."""
    if not self.tensor_level: return self._binary(Ops.MOD, x, reverse)
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: raise DTypeError("remainder of bool tensors is not supported")
    r = a.alu(Ops.MOD, b)
    if dtypes.is_unsigned(a.dtype): return r
    return (r.ne(0) & (r < 0).ne(b < 0)).where(r + b, r)
  def fmod(self, x):
    """The remainder with the dividend's sign (C's)."""
    if not self.tensor_level: return self._binary(Ops.MOD, x)
    a, b = self._broadcasted(x)
    return a.alu(Ops.MOD, b)
  def pow(self, x, reverse: bool = False):
    if not self.tensor_level: return self._binary(Ops.POW, x, reverse)
    if type(x) is int and not reverse and self.dtype != dtypes.bool and not dtypes.is_float(self.dtype): return self._ipow_const(x)
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: return a | b.logical_not()  # x**0 is 1 and x**1 is x
    if not dtypes.is_float(a.dtype): return a._ipow(b)
    if reverse or type(x) not in _SCALARS: return a.alu(Ops.POW, b)
    return a._pow_scalar(x, b)
  def _pow_scalar(self, e: int | float, c):
    """A float tensor to a Python number power e (c: e's node), with torch's gradient e * x ** (e - 1) taken with this
    same pow (so x ** 1.5 at -inf is NaN as torch's: it takes sqrt)."""
    if e == 0.5 and self.dtype != dtypes.float16: return self.alu(Ops.SQRT)  # sqrt's own gradient 1 / (2 sqrt(x)) is that one
    y = self._pow_half(e) if e in (0.5, -0.5) else self.alu(Ops.POW, c)
    # (torch: zeros for e == 0, also where the upstream gradient is inf or NaN)
    y.__dict__[DERIVATIVE] = ((self,), lambda g, x, needs: (x.const_like(0) if e == 0 else g * (x.pow(e - 1) * e),))
    return y
  def _pow_half(self, e: float):
    """x ** 0.5 and x ** -0.5 as torch computes them, sqrt and 1 / sqrt (-0.0 and NaN at -0.0 and -inf, -inf and NaN for
    -0.5), built in the graph: C compilers fold pow(x, 0.5) into sqrt in some kernels and not in others. torch's float16
    kernel calls pow instead: +0.0 and inf (inf and 0 for -0.5) there."""
    s = self.alu(Ops.SQRT)
    # (1 / sqrt, not reciprocal: rsqrt's node keeps rsqrt's gradient, +inf at -0.0 where this one is -inf)
    y = s if e > 0 else self.const_like(1).alu(Ops.FDIV, s)
    if self.dtype != dtypes.float16: return y
    at_zero, at_ninf = (0.0, math.inf) if e > 0 else (math.inf, 0.0)
    return self.eq(-math.inf).where(at_ninf, self.eq(0).where(at_zero, y))
  def _ipow_const(self, e: int):
    """An integer tensor to a Python int power, exactly in its dtype (wrapping as torch), by binary exponentiation."""
    if e < 0: raise RuntimeError(f"Integers to negative integer powers are not allowed. ({self.dtype} tensor ** {e})")
    # in n-bit arithmetic an even base to a power >= n is 0 and an odd one repeats with a period of 2^(n-2): a huge e
    # reduced to m + e % m (m = 2^(n-2)) keeps the value and takes at most n - 1 squarings
    if e >= (m := 1 << (8 * self.dtype.itemsize - 2)): e = m + e % m
    out, p = None, self
    while True:
      if e & 1: out = p if out is None else out * p
      if not (e := e >> 1): return self.const_like(1) if out is None else out
      p = p * p
  def _ipow(self, b):
    """An integer tensor to an integer tensor's powers (one dtype and shape), exactly in the dtype (wrapping as torch): a
    square-and-multiply step per value bit of b. A negative b (signed dtypes) gives torch's 1 / self ** -b truncated."""
    signed = not dtypes.is_unsigned(self.dtype)
    bits = 8 * self.dtype.itemsize - signed
    out, p = self.const_like(1), self
    for k in range(bits):
      out = (b & (1 << k)).ne(0).where(out * p, out)
      if k < bits - 1: p = p * p
    if not signed: return out
    # 1 ** -e is 1, (-1) ** -e is -1 for odd e and 1 for even, any other base (0 too) truncates to 0
    one, zero = self.const_like(1), self.const_like(0)
    neg = self.eq(1).where(one, self.eq(-1).where((b & 1).ne(0).where(-one, one), zero))
    return (b < 0).where(neg, out)
  def maximum(self, x):
    if not self.tensor_level: return self.alu(Ops.MAX, self._kc(x))
    a, b = self._broadcasted(x)
    return a.alu(Ops.OR if a.dtype == dtypes.bool else Ops.MAX, b)
  def minimum(self, x):
    if not self.tensor_level: return -(-self).alu(Ops.MAX, -self._kc(x))
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a.alu(Ops.AND, b)
    # floats: -max(-a, -b) keeps NaN propagation and splits the gradient of ties as torch does;
    # ints select instead (negation overflows at the minimum value and wraps for unsigned)
    if dtypes.is_float(a.dtype): return -((-a).alu(Ops.MAX, -b))
    return (a < b).where(a, b)
  def eq(self, x): return self._binary(Ops.CMPEQ, x)
  def ne(self, x): return self._binary(Ops.CMPNE, x)
  def where(self, x, y):
    if not self.tensor_level: return self.alu(Ops.WHERE, x, y)
    cond = self if self.dtype == dtypes.bool else self.ne(0)
    if not isinstance(x, UOp) and not isinstance(y, UOp): x, y = UOp.tensor_const(x, checked_dtype([x], None), self.device, ())._broadcasted(y)
    elif not isinstance(x, UOp): x, y = y._broadcasted(x, reverse=True)
    else: x, y = x._broadcasted(y)
    shape = x.shape if cond.shape == x.shape else broadcast_shape(cond.shape, x.shape)  # equal shapes: nothing to broadcast
    return cond._broadcast_to(shape).alu(Ops.WHERE, x._broadcast_to(shape), y._broadcast_to(shape))
  def _bitwise(self, op: Ops, x, reverse: bool = False):
    if not self.tensor_level: return self._binary(op, x, reverse)
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype): raise DTypeError(f"bitwise {op.name.lower()} needs integer or bool tensors, got {a.dtype}")
    if op not in (Ops.SHL, Ops.SHR) or a.dtype == dtypes.bool: return a.alu(op, b)
    # a shift by a negative count or by the width or more is undefined in C (x86 takes the count modulo the width: x >> 32
    # was x); torch gives what shifting bit by bit would, 0 (or -1 shifting a negative right). A number count is checked
    # here, so the common case stays one node
    width = 8 * a.dtype.itemsize
    if type(x) is int and not reverse and 0 <= x < width: return a.alu(op, b)
    past = a.const_like(0) if op is Ops.SHL or dtypes.is_unsigned(a.dtype) else (a < 0).where(-1, 0)
    if type(x) is int and not reverse: return past
    inside = (b >= 0) & (b < width)
    return inside.where(a.alu(op, inside.where(b, 0)), past)
  def logical_not(self): return self.ne(True) if self.dtype == dtypes.bool else self.eq(0)

  def _float(self): return self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)
  def exp(self): return self._float().alu(Ops.EXP)
  def exp2(self): return self._float().alu(Ops.EXP2)
  def log(self): return self._float().alu(Ops.LOG)
  def log2(self): return self._float().alu(Ops.LOG2)
  def sin(self): return self._float().alu(Ops.SIN)
  def cos(self): return self._float().alu(Ops.COS)
  def tan(self): return self._float().alu(Ops.TAN)
  def sqrt(self): return self._float().alu(Ops.SQRT)
  def reciprocal(self): return self._float().alu(Ops.RECIP)
  def tanh(self): return self._float().alu(Ops.TANH)
  def erf(self): return self._float().alu(Ops.ERF)
  def sigmoid(self): return self._float().alu(Ops.SIGMOID)
  def neg(self):
    if self.dtype is dtypes.bool and self.tensor_level: raise DTypeError("negation of a bool tensor is not supported; use logical_not()")
    return self.alu(Ops.NEG)
  def abs(self): return self.alu(Ops.ABS) if self.dtype != dtypes.bool and not dtypes.is_unsigned(self.dtype) else self
  def trunc(self): return self.alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self
  def floor(self): return self.alu(Ops.FLOOR) if dtypes.is_float(self.dtype) else self
  def ceil(self): return self.alu(Ops.CEIL) if dtypes.is_float(self.dtype) else self
  def round(self): return self.alu(Ops.RINT) if dtypes.is_float(self.dtype) else self
  def square(self): return self * self
  def relu(self):
    if not self.tensor_level or self.dtype == dtypes.bool or self.vshape is not self.shape: return ((self < 0) | self.eq(0)).where(0, self)
    # where(x < 0, 0, x), built directly (promoting the zeros was half of a small eager graph's building time): torch's
    # value (relu(NaN) is NaN, relu(-0.0) is -0.0) in half the nodes of (x < 0) | (x == 0). torch's gradient, none where
    # x <= 0 (and all of it at NaN), is the node's own rule: the where's would pass it at 0. A float compares against
    # -0.0, the same test: clamp(min=0) builds where(x < 0.0, 0.0, x) with its own rule (all of the gradient at 0), and
    # one node for both would give both one rule
    dtype, device, shape = self.dtype, self.device, self.shape
    zero = UOp.tensor_const(0, dtype, device, shape)
    below = UOp.tensor_const(-0.0, dtype, device, shape) if dtype in _FLOAT_DTYPES else zero
    y = _elementwise(Ops.WHERE, dtype, (_elementwise(Ops.CMPLT, dtypes.bool, (self, below), shape, device), zero, self), shape, device)
    y.__dict__[DERIVATIVE] = ((self,), _relu_vjp)
    return y
  def sign(self):
    if self.dtype == dtypes.bool: return self
    return (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)  # sign(nan) is 0, as in torch

  # ---- operators: Tensor's at tensor level, plain arithmetic in a kernel (symbolic simplification builds index math with
  # them, so the hot ones spell the kernel case out: one check, no extra call)
  def __add__(self, x): return self.add(x) if self.tensor_level else self.alu(Ops.ADD, self._kc(x))
  def __radd__(self, x): return self.add(x) if self.tensor_level else self._kc(x).alu(Ops.ADD, self)
  def __sub__(self, x): return self.sub(x) if self.tensor_level else self.alu(Ops.SUB, self._kc(x))
  def __rsub__(self, x): return self.sub(x, True)
  def __mul__(self, x): return self.mul(x) if self.tensor_level else self.alu(Ops.MUL, self._kc(x))
  def __rmul__(self, x): return self.mul(x, True)
  def __truediv__(self, x): return self.div(x)
  def __rtruediv__(self, x): return self.div(x, True)
  # C's truncating division and remainder at both levels (Tensor's floor and take the divisor's sign: idiv and mod)
  def __floordiv__(self, x): return self.alu(Ops.IDIV, self._c(x))
  def __mod__(self, x): return self.alu(Ops.MOD, self._c(x))
  __neg__ = neg
  def __lt__(self, x): return self._binary(Ops.CMPLT, x) if self.tensor_level else self.alu(Ops.CMPLT, self._kc(x))
  def __gt__(self, x): return self._binary(Ops.CMPLT, x, True)
  # at tensor level not `not <`: every comparison with NaN is False (IEEE, as torch)
  def __le__(self, x): return (self < x) | self.eq(x) if self.tensor_level else self._kc(x) >= self
  def __ge__(self, x):
    if self.tensor_level: return (self > x) | self.eq(x)
    return self.alu(Ops.CMPLT, self._kc(x)).alu(Ops.CMPEQ, UOp.const(dtypes.bool, False))
  def __and__(self, x): return self._bitwise(Ops.AND, x)
  def __or__(self, x): return self._bitwise(Ops.OR, x)
  def __xor__(self, x): return self._bitwise(Ops.XOR, x)

  # ---- movement (tensor level); each returns self when it would change nothing, as Tensor's do
  def reshape(self, shape, *args):
    shape = _sizes(shape, args)
    if self.vshape is self.shape and _plain_sizes(shape):  # the common case, checked in one pass
      if shape == self.shape: return self
      if prod(shape) == self.size: return _movement(Ops.RESHAPE, self, shape)
    if self.vshape is not self.shape or any(isinstance(s, UOp) for s in shape): return self._sym_reshape(shape)
    if shape.count(-1) > 1: raise TensorError(f"only one dimension can be inferred (-1) in reshape {shape}")
    if any(s < -1 for s in shape): raise TensorError(f"invalid size in reshape {shape}")
    if -1 in shape:
      known = prod(s for s in shape if s != -1)
      if known == 0 or self.size % known: raise TensorError(f"cannot reshape tensor of shape {self.shape} ({self.size} elements) into {shape}")
      shape = tuple(self.size // known if s == -1 else s for s in shape)
    if prod(shape) != self.size:
      raise TensorError(f"cannot reshape tensor of shape {self.shape} ({self.size} elements) into {shape} ({prod(shape)} elements)")
    return self if shape == self.shape else _movement(Ops.RESHAPE, self, shape)
  def expand(self, shape, *args):
    shape = _sizes(shape, args)
    if len(shape) < len(self.shape): raise TensorError(f"expand to {shape} has fewer dims than the tensor's shape {self.shape}")
    padded = (None,) * (len(shape) - len(self.shape)) + self.vshape
    new = tuple(p if not isinstance(s, UOp) and s == -1 else s for s, p in zip(shape, padded))
    if None in new: raise TensorError(f"-1 is not allowed for new leading dims in expand {shape}")
    return self._broadcast_to(new)
  def permute(self, order, *args):
    n = len(self.shape)
    order = _sizes(order, args)
    if not (_plain_sizes(order) and max(order, default=-1) < n): order = tuple(norm_axis(o, n) for o in order)  # (negative dims)
    if sorted(order) != list(range(n)): raise TensorError(f"permute order {order} is not a permutation of the {n} dims of shape {self.shape}")
    # a permute of a permute is one (none where they cancel: a channels-last buffer viewed channels first, then back)
    if self.op is Ops.PERMUTE and len(self.src) == 1: return self.src[0].permute(tuple(self.arg[o] for o in order))
    if order == tuple(range(n)): return self
    if self.vshape is not self.shape: return UOp(Ops.PERMUTE, self.dtype, (self,), order)  # symbolic dims: derived later
    return _movement(Ops.PERMUTE, self, tuple(self.shape[i] for i in order), order)
  def transpose(self, dim0: int = 1, dim1: int = 0):
    if len(self.shape) < 2 and dim0 == 1 and dim1 == 0: return self
    order = list(range(len(self.shape)))
    a, b = norm_axis(dim0, len(order)), norm_axis(dim1, len(order))
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  def flip(self, axis, *args):
    axes = [norm_axis(a, len(self.shape)) for a in _sizes(axis, args)]
    if len(set(axes)) != len(axes): raise TensorError(f"dim appears multiple times in flip {axis}")
    if any(isinstance(self.vshape[a], UOp) for a in axes): raise TypeError(f"flip of a symbolic dim of {fmt_shape(self.vshape)} is not supported")
    if not axes: return self
    arg = tuple(i in axes for i in range(len(self.shape)))
    return _movement(Ops.FLIP, self, self.shape, arg) if self.vshape is self.shape else UOp(Ops.FLIP, self.dtype, (self,), arg)
  def shrink(self, arg):
    """One (start, end) pair (or None: the whole dim) per dim."""
    if len(arg) != len(self.shape): raise TensorError(f"shrink needs one (start, end) per dim of {self.shape}, got {arg}")
    if self.vshape is not self.shape or any(isinstance(b, UOp) for a in arg if a is not None for b in a): return self._sym_shrink(arg)
    arg = tuple((0, s) if a is None else tuple(a) for a, s in zip(arg, self.shape))
    if any(not 0 <= b <= e <= s for (b, e), s in zip(arg, self.shape)): raise TensorError(f"shrink {arg} out of bounds for shape {self.shape}")
    return self if all(a == (0, s) for a, s in zip(arg, self.shape)) else _movement(Ops.SHRINK, self, tuple(e - b for b, e in arg), arg)
  def pad(self, padding):
    """One (before, after) pair (or None) per dim, with zeros; a negative amount crops."""
    pairs = [(0, 0) if p is None else tuple(p) for p in padding]
    if any(isinstance(b, UOp) for p in pairs for b in p): return self._sym_pad(pairs)
    x = self
    crop = [(-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pairs, self.shape)]
    if any(c != (0, s) for c, s in zip(crop, self.shape)):
      if any(e < b for b, e in crop): raise TensorError(f"negative padding {padding} crops more than shape {self.shape}")
      x = x.shrink(crop)
    pos = tuple((max(b, 0), max(a, 0)) for b, a in pairs)
    if all(p == (0, 0) for p in pos): return x
    shape = check_numel(tuple(s + b + a for s, (b, a) in zip(x.shape, pos)))
    # (with symbolic dims its facts are derived when read)
    return _movement(Ops.PAD, x, shape, pos) if x.vshape is x.shape else UOp(Ops.PAD, x.dtype, (x,), pos)
  def unsqueeze(self, dim: int):
    d = norm_axis(dim, len(self.shape) + 1)
    return self.reshape(self.vshape[:d] + (1,) + self.vshape[d:])

  # ---- movement with symbolic dims (see Sym)
  def _sym_reshape(self, shape: tuple):
    for s in shape:
      if not (s == -1 and not isinstance(s, UOp)): check_size(s)
    vs = self.vshape
    mine, theirs = [s for s in vs if isinstance(s, UOp)], [s for s in shape if isinstance(s, UOp)]
    if len(mine) == 1 and not theirs and shape.count(-1) == 1:  # the -1 stands for the symbolic dim (times an int)
      n, known = prod(s for s in vs if not isinstance(s, UOp)), prod(s for s in shape if s != -1)
      if known and n % known == 0: shape, theirs = tuple(mine[0] * (n // known) if s == -1 else s for s in shape), [mine[0] * (n // known)]
    if mine and len(mine) == len(theirs) and all(a is b for a, b in zip(mine, theirs)):
      # the same symbolic dims in the same order: the int dims between each two regroup among themselves
      src_runs, dst_runs = _int_runs(vs), _int_runs(shape)
      out = []
      for a, b in zip(src_runs, dst_runs):
        n, known = prod(a), prod(x for x in b if x != -1)
        if -1 in b and known and n % known == 0: b = [n // known if x == -1 else x for x in b]
        if prod(b) != n or -1 in b: raise TensorError(f"cannot reshape tensor of shape {fmt_shape(vs)} into {fmt_shape(shape)}")
        out.append(b)
      new = tuple(x for run, sym in zip(out, theirs + [None]) for x in run + ([sym] if sym is not None else []))
      return self if all(a is b for a, b in zip(new, vs)) and len(new) == len(vs) else sym_node(Ops.RESHAPE, self, new)
    # otherwise by value: self's symbolic dims cut to their values, the target's padded up to their storage
    _by_value(f"reshaping {fmt_shape(vs)} to {fmt_shape(shape)}")
    x = self.shrink(tuple((0, sym_value(s)) for s in vs)) if mine else self
    x = x.reshape(tuple(s if not isinstance(s, UOp) else sym_value(s) for s in shape))
    if not theirs: return x
    x = x.pad(tuple((0, s.vmax - n) if isinstance(s, UOp) else None for s, n in zip(shape, x.shape)))
    return sym_node(Ops.RESHAPE, x, tuple(s if isinstance(s, UOp) else n for s, n in zip(shape, x.shape)))
  def _sym_shrink(self, arg):
    vs, out = self.vshape, []
    for d, (a, s, n) in enumerate(zip(arg, vs, self.shape)):
      b, e = (0, s) if a is None else a
      if isinstance(b, UOp): raise TypeError(f"dim {d}: a shrink starting at a Variable needs a constant length: x[..., pos:pos+n, ...]")
      if e is s and b == 0: out.append((0, s))  # the whole dim
      elif isinstance(e, UOp):
        check_size(e)
        if isinstance(s, UOp):  # (b, s) of a symbolic dim s, b below its smallest size: what x[:, b:] takes of it
          if e is not s or not 0 <= b <= s.vmin:
            raise TypeError(f"dim {d}: shrinking the symbolic dim {_fmt_size(s)} to ({b}, {_fmt_size(e)}) is not supported")
        elif not 0 <= b <= e.vmin or e.vmax > n:
          raise IndexError(f"dim {d}: shrink ({b}, {_fmt_size(e)}) with {_fmt_size(e)} in [{e.vmin}, {e.vmax}] can leave the dim's {n} positions")
        out.append((b, e))
      elif not 0 <= b <= e <= sym_value(s): raise TensorError(f"shrink {tuple(arg)} out of bounds for shape {fmt_shape(vs)}")
      else:
        if isinstance(s, UOp) and e > s.vmin: _by_value(f"shrinking the symbolic dim {_fmt_size(s)} to {e}")
        out.append((b, e))
    # (the whole dim only from 0: `e is s` alone took (4, 8) of a dim of 8 for it, ints being cached objects)
    return self if all(b == 0 and (e is s or e == s) for (b, e), s in zip(out, vs)) else sym_node(Ops.SHRINK, self, tuple(out))
  def _sym_pad(self, pairs):
    for p in pairs:
      for b in p:
        if isinstance(b, UOp): check_size(b)
        elif b < 0: raise TypeError(f"padding {pairs}: a negative amount beside a symbolic one is not supported")
    return sym_node(Ops.PAD, self, tuple(pairs))
  def flatten(self, start_dim: int = 0, end_dim: int = -1):
    if not self.shape: return self.reshape(1)
    s, e = norm_axis(start_dim, len(self.shape)), norm_axis(end_dim, len(self.shape))
    if s > e: raise TensorError(f"flatten start_dim {start_dim} comes after end_dim {end_dim}")
    vs = self.vshape
    return self.reshape(vs[:s] + (prod(vs[s:e + 1]),) + vs[e + 1:])

  # ---- data placement (tensor level)
  def contiguous(self):
    """CONTIGUOUS, unless self already is a whole buffer (a BUFFER or a CONTIGUOUS, or reshapes of one)."""
    u = self
    while u.op is Ops.RESHAPE: u = u.src[0]
    return self if u.op in (Ops.BUFFER, Ops.CONTIGUOUS) else UOp(Ops.CONTIGUOUS, self.dtype, (self,))
  def permuted_contiguous(self, order: tuple[int, ...]):
    """self.permute(order) in a buffer of its own, computed in self's loop order with the stores moving through the
    permutation (a weight gradient computed with the output channels innermost, in vector lanes, stores the weight's
    (cout, cin, *k) layout directly)."""
    return UOp(Ops.CONTIGUOUS, self.dtype, (self.permute(order),), PERMUTED_STORE)
  def to(self, device: str | None):
    return self if device == self.device else UOp(Ops.COPY, self.dtype, (self.contiguous(), UOp.device_node(device)))

  # ---- reductions (tensor level)
  def _axes(self, axis) -> tuple[int, ...]:
    if axis is None: return tuple(range(len(self.shape)))
    axes = tuple(norm_axis(a, len(self.shape)) for a in ((axis,) if isinstance(axis, int) else axis))
    if len(set(axes)) != len(axes): raise TensorError(f"dim {axis} appears multiple times in the list of dims")
    return axes if self.shape else ()  # a 0-d tensor takes dim 0 or -1 (as torch) and has no dim to reduce
  def _reduce_in_groups(self, op: Ops, axes: tuple[int, ...]):
    """REDUCE_AXIS over `axes`, keepdim shape. A kernel's threads split its output loop, so a long reduction into under
    8 outputs would run on one core: it runs in two passes instead, REDUCE_GROUPS partial results per output (a kernel
    the threads share), then a short reduction of those (the sum's order changes, as with LANES)."""
    shape = self.shape
    if self.vshape is not shape: return UOp(Ops.REDUCE_AXIS, self.dtype, (self,), (op, tuple(sorted(axes))))  # regrouping would merge symbolic dims
    n_red = prod(shape[a] for a in axes)
    n_out = prod(s for i, s in enumerate(shape) if i not in axes)
    if n_out >= REDUCE_GROUP_MAX_OUT or n_red < REDUCE_GROUP_MIN or n_red % REDUCE_GROUPS:
      return _movement(Ops.REDUCE_AXIS, self, tuple(1 if i in axes else s for i, s in enumerate(shape)), (op, tuple(sorted(axes))))
    keep = [i for i in range(len(shape)) if i not in axes]
    groups = REDUCE_GROUPS
    if op is Ops.ADD and dtypes.is_float(self.dtype): groups = _sum_groups(n_red)
    x = self.permute(*keep, *sorted(axes)).reshape(*(shape[i] for i in keep), groups, n_red // groups)
    # the partials get a kernel of their own, or they would fuse back into one
    partial = UOp(Ops.CONTIGUOUS, x.dtype, (UOp(Ops.REDUCE_AXIS, x.dtype, (x,), (op, (len(x.shape) - 1,))),))
    if groups > REDUCE_GROUPS:  # many partials (a long float sum) are added in short runs too: one loop over thousands of
      # them kept its precision only where the kernel's opts happened to split it (a 4e6-value mean was off by 25 under AVX2)
      g = max(d for d in range(1, math.isqrt(groups) + 1) if groups % d == 0)
      p = partial.reshape(*(shape[i] for i in keep), groups // g, g)
      partial = UOp(Ops.CONTIGUOUS, p.dtype, (UOp(Ops.REDUCE_AXIS, p.dtype, (p,), (op, (len(p.shape) - 1,))),))
    return UOp(Ops.REDUCE_AXIS, x.dtype, (partial,), (op, (len(x.shape) - 2,))).reshape(tuple(1 if i in axes else s for i, s in enumerate(shape)))
  def _reduce(self, op: Ops, axis=None, keepdim: bool = False):
    axes = self._axes(axis)
    if not self.shape: return self
    red = self._reduce_in_groups(op, axes) if axes else self
    return red if keepdim else red.reshape(tuple(s for i, s in enumerate(self.vshape) if i not in axes))
  def sum(self, axis=None, keepdim: bool = False, dtype: DType | None = None):
    x = self.cast(sum_dtype(self.dtype) if dtype is None else dtype)
    return x.cast(wide_dtype(x.dtype))._reduce(Ops.ADD, axis, keepdim).cast(x.dtype)
  def prod(self, axis=None, keepdim: bool = False, dtype: DType | None = None):
    x = self.cast(sum_dtype(self.dtype) if dtype is None else dtype)
    return x.cast(wide_dtype(x.dtype))._reduce(Ops.MUL, axis, keepdim).cast(x.dtype)
  def max(self, axis=None, keepdim: bool = False):
    if self.dtype == dtypes.bool: return self.cast(dtypes.uint8)._reduce(Ops.MAX, axis, keepdim).cast(dtypes.bool)
    return self._reduce(Ops.MAX, axis, keepdim)

class UOp(OpBuilder, metaclass=UOpMeta):
  """An immutable node: op, dtype, src (its source nodes) and arg, set by UOpMeta. Building the same node twice returns
  the same object, so `is`/`==` is structural equality."""
  op: Ops
  dtype: DType
  src: tuple[UOp, ...]
  arg: Any
  def __reduce__(self): return UOp, (self.op, self.dtype, self.src, self.arg)
  def __bool__(self):
    # `if n < 0:` with n a symbolic size builds a comparison node, which would always be true. Its bounds decide it
    # where they can (`if start_pos > 0:` for a Variable in [1, 10], as tinygrad); otherwise it has no truth value
    if self.dtype == dtypes.bool and self.shape == () and self.tensor_level and self.device is None:
      if self.vmin == self.vmax: return bool(self.vmin)
      raise TypeError("a comparison of symbolic sizes (Variables) has no truth value before the kernel runs: its bounds do not "
                      "decide it; compare their bound values")
    return True
  # tinygrad's names on Variables: the name, and a bound one's (Variable, value) and value
  @property
  def expr(self) -> str: return (self.src[0] if self.op is Ops.BIND else self).arg[0]
  def unbind(self) -> tuple[UOp, int]:
    if self.op is not Ops.BIND: raise TypeError(f"unbind() needs a bound Variable (Variable(...).bind(v)), got {self.op}")
    return self.src[0], self.src[1].arg
  @property
  def val(self) -> int: return self.unbind()[1]
  def __repr__(self) -> str:
    # a symbolic size (an int expression of bound Variables) prints as one, so that shapes holding one read well
    if self.tensor_level and self.device is None and self.shape == () and dtypes.is_int(self.dtype): return f"<{_fmt_size(self)}>"
    return pretty(self)
  def replace(self, **kw) -> UOp:
    new = dict(op=self.op, dtype=self.dtype, src=self.src, arg=self.arg) | kw
    return UOp(new["op"], new["dtype"], tuple(new["src"]), new["arg"])

  # ---- graph walking
  def toposort(self, stop: Callable[[UOp], bool] | None = None, srcs: Callable[[UOp], tuple] | None = None) -> list[UOp]:
    """Sources before users; an iterative DFS so deep graphs do not hit the recursion limit. `stop(u)`: do not walk
    below u; `srcs(u)`: the sources to follow instead of u.src (to add ordering constraints the graph lacks)."""
    # a None on the stack means "the node under it has all its sources done"; sources are pushed even when already seen
    # and skipped when popped (cheaper than filtering them, the same order). Codegen walks each kernel's graph dozens
    # of times: this is a large part of rendering it.
    seen: set[UOp] = set()
    order: list[UOp] = []
    stack: list = [self]
    pop, push, see, plain = stack.pop, stack.append, seen.add, stop is None and srcs is None
    while stack:
      if (u := pop()) is None:
        order.append(pop())
        continue
      if u in seen: continue
      see(u)
      push(u)
      push(None)
      if plain: stack += u.src[::-1]  # the common case: one test per node instead of three
      elif stop is None or not stop(u): stack += (u.src if srcs is None else srcs(u))[::-1]
    return order
  def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
    cache: dict[UOp, UOp] = {}
    for u in self.toposort():
      cache[u] = mapping[u] if u in mapping else (u.replace(src=tuple(cache[s] for s in u.src)) if u.src else u)
    return cache[self]

  # ---- node builders; the arithmetic, movement and reduce builders come from OpBuilder (above)
  @staticmethod
  def const(dtype: DType, value: Any) -> UOp: return UOp(Ops.CONST, dtype, (), truncate(dtype, value))
  def alu(self, op: Ops, *src: UOp) -> UOp:
    dtype = dtypes.bool if op in GroupOp.Comparison else (src[-1].dtype if op is Ops.WHERE else self.dtype)
    u = UOp(op, dtype, (self,) + src)
    if "shape" not in u.__dict__ and self.tensor_level: _known_facts(u)  # (a kernel's index arithmetic never needs them)
    return u
  def cast(self, dtype: DType) -> UOp:
    if self.dtype == dtype: return self
    u = UOp(Ops.CAST, dtype, (self,))
    if "shape" not in u.__dict__ and self.tensor_level: _known_facts(u)
    return u

  # ---- tensor-level properties
  @cached_property
  def shape(self) -> tuple[int, ...]:
    op, arg, src = self.op, self.arg, self.src
    if op in _SAME_SHAPE: return src[0].shape  # checked first: the commonest case (none of the ops below is in it)
    if op is Ops.BUFFER: return (arg[1],)
    if op in (Ops.CONST, Ops.BIND, Ops.DEFINE_VAR): return ()
    if op is Ops.IOTA: return (arg,)
    if op is Ops.DEFINE_GLOBAL: return (self.dtype.size,)
    if len(src) > 1 and op in GroupOp.Movement:  # sizes given by expressions: storage is their upper bound
      m = lambda a: src[a.i].vmax if type(a) is Sym else a  # noqa: E731
      if op is Ops.PAD: return tuple(s + m(b) + m(a) for s, (b, a) in zip(src[0].shape, arg))
      if op is Ops.SHRINK: return tuple(m(e) - b for b, e in arg)
      return tuple(m(a) for a in arg)
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
  @cached_property
  def vshape(self) -> tuple:
    """The shape with symbolic dims as their size expressions (see Sym); `shape` itself when there are none."""
    op, src, shape = self.op, self.src, self.shape
    if op in _SAME_SHAPE or op is Ops.WHERE:
      vs = _merge_vshapes([s.vshape for s in src if s.shape == shape])
      return shape if vs is None or vs == shape else vs
    if not src or op in (Ops.BUFFER, Ops.DEVICE, Ops.SINK, Ops.IOTA): return shape
    if op in GroupOp.Movement and len(src) > 1: arg = self.sym_arg
    else: arg = self.arg
    inner = src[0].vshape
    if op in (Ops.RESHAPE, Ops.EXPAND): vs = tuple(arg)
    elif op is Ops.PERMUTE: vs = tuple(inner[i] for i in arg)
    elif op is Ops.PAD: vs = tuple(s + b + a if any(isinstance(x, UOp) for x in (s, b, a)) else n for s, (b, a), n in zip(inner, arg, shape))
    elif op is Ops.SHRINK: vs = tuple(e - b if b else e for b, e in arg)
    elif op is Ops.REDUCE_AXIS: vs = tuple(1 if i in arg[1] else s for i, s in enumerate(inner))
    elif op is Ops.GATHER: vs = src[1].vshape
    elif op is Ops.WINDOW: vs = inner[:len(inner) - len(arg[0])] + shape[len(inner) - len(arg[0]):]
    elif op in (Ops.FLIP, Ops.CONTIGUOUS, Ops.DETACH, Ops.COPY, Ops.ASSIGN): vs = inner
    else: return shape
    return shape if vs == shape else vs
  @property
  def sym_arg(self) -> Any:
    """The arg with each Sym replaced by the size expression it names."""
    def res(a): return tuple(res(b) for b in a) if isinstance(a, tuple) else self.src[a.i] if type(a) is Sym else a
    return res(self.arg)
  @property
  def size(self) -> int: return prod(self.shape)
  @cached_property
  def device(self) -> str | None:
    if self.op is Ops.DEVICE: return self.arg
    if self.op is Ops.COPY: return self.src[1].arg
    for s in self.src:
      if (d := s.device) is not None: return d
    return None
  @cached_property
  def tensor_level(self) -> bool:
    """Built by Tensor code (OpBuilder then gives it Tensor's semantics): it has a DEVICE below it, or a bound variable
    (BIND, which only the tensor graph holds: `Tensor(v.bind(3))` has no device). Kernel and index nodes have neither."""
    if self.op is Ops.DEVICE or self.op is Ops.BIND: return True
    for s in self.src:
      if s.tensor_level: return True
    return False
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
UOp.variable = staticmethod(Variable)  # type: ignore[attr-defined]  # tinygrad's spelling: UOp.variable("start_pos", 0, 1023)

def _bounds(u: UOp) -> tuple[Any, Any]:
  d = u.dtype
  full = (dtypes.min(d), dtypes.max(d)) if (dtypes.is_int(d) or d == dtypes.bool) else (-math.inf, math.inf)
  if u.op is Ops.CONST: return (u.arg, u.arg)
  if u.op is Ops.RANGE: return (0, max(0, u.src[0].vmax - 1))
  if u.op is Ops.SPECIAL: return (0, max(0, u.arg[1] - 1))
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
  if u.op is Ops.WHERE: return s[1] if s[0] == (True, True) else s[2] if s[0] == (False, False) else (min(s[1][0], s[2][0]), max(s[1][1], s[2][1]))
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
  # (C's fmod: NaN for an infinite dividend, where math.fmod raises)
  if isinstance(a, float) or isinstance(b, float): return math.fmod(a, b) if b != 0 and not math.isinf(a) else math.nan
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
