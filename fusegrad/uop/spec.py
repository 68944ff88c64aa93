"""What a well-formed graph is.

`verify_tensor_graph` checks the lazy graph that Tensor methods build; `verify_kernel` checks one kernel AST as the
scheduler hands it to codegen (SINK of STOREs into DEFINE_GLOBALs, movement ops still present). Both walk the graph
once and raise ValueError naming the offending op, its shapes and dtypes. They are run when SPEC=1 (see engine/realize.py)
and by the tests; they never change the graph."""
from __future__ import annotations
from typing import Callable
from fusegrad.dtype import PtrDType, dtypes
from fusegrad.helpers import prod
from fusegrad.uop.ops import GroupOp, Ops, UOp

REDUCE_OPS = (Ops.ADD, Ops.MUL, Ops.MAX)

# ops that only exist in one of the two graph levels
TENSOR_ONLY = {Ops.DEVICE, Ops.BUFFER, Ops.COPY, Ops.BIND}
KERNEL_ONLY = {Ops.DEFINE_GLOBAL, Ops.STORE}
LOWERED = {Ops.RANGE, Ops.REDUCE, Ops.LOAD, Ops.DEFINE_ACC, Ops.ACC_UPDATE, Ops.ENDRANGE, Ops.STAGE, Ops.SPECIAL, Ops.DEFINE_LOCAL, Ops.BARRIER}

class _Fail(Exception): pass

def _err(u: UOp, msg: str):
  raise _Fail(f"{u.op.name} ({u.dtype}): {msg}")

def _shape_of(u: UOp) -> tuple[int, ...]:
  try: return u.shape
  except Exception as e: raise _Fail(f"{u.op.name} ({u.dtype}): its shape cannot be computed ({type(e).__name__}: {e})") from None

def _check_const(u: UOp):
  v, d = u.arg, u.dtype
  if isinstance(d, PtrDType) or d == dtypes.void: _err(u, "a constant needs a scalar dtype")
  if d == dtypes.bool: ok = isinstance(v, bool)
  elif dtypes.is_int(d): ok = isinstance(v, int) and not isinstance(v, bool) and dtypes.min(d) <= v <= dtypes.max(d)
  else: ok = isinstance(v, float)
  if not ok: _err(u, f"value {v!r} ({type(v).__name__}) is not a {d} value")

def _check_elementwise(u: UOp):
  shapes = [_shape_of(s) for s in u.src]
  if any(s != shapes[0] for s in shapes): _err(u, f"sources have different shapes {shapes}")
  srcd = [s.dtype.base for s in u.src]
  if u.op is Ops.CAST: return
  if u.op is Ops.BITCAST:
    if srcd[0].itemsize != u.dtype.itemsize: _err(u, f"bitcast from {srcd[0]} to {u.dtype} changes the item size")
    return
  want = {Ops.WHERE: 3}.get(u.op, 1 if u.op in GroupOp.Unary else 2)
  if len(u.src) != want: _err(u, f"takes {want} source(s), got {len(u.src)}")
  if u.op is Ops.WHERE:
    if srcd[0] != dtypes.bool: _err(u, f"the condition must be bool, got {srcd[0]}")
    if not (srcd[1] == srcd[2] == u.dtype): _err(u, f"both branches and the result need one dtype, got {srcd[1]}, {srcd[2]} -> {u.dtype}")
    return
  if any(d != srcd[0] for d in srcd): _err(u, f"sources have mismatched dtypes {srcd}")
  if u.op in GroupOp.Comparison:
    if u.dtype != dtypes.bool: _err(u, f"a comparison returns bool, not {u.dtype}")
    return
  if u.dtype != srcd[0]: _err(u, f"result dtype {u.dtype} differs from the source dtype {srcd[0]}")
  if u.op in GroupOp.Float and not dtypes.is_float(u.dtype): _err(u, f"needs a float dtype, got {u.dtype}")
  if u.op in (Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR) and dtypes.is_float(u.dtype): _err(u, f"needs an int or bool dtype, got {u.dtype}")

def _check_movement(u: UOp):
  if len(u.src) != 1: _err(u, f"takes one source, got {len(u.src)}")
  src = u.src[0]
  s, arg = _shape_of(src), u.arg
  if u.dtype != src.dtype.base: _err(u, f"a movement op keeps the dtype, source is {src.dtype}")
  if u.op is Ops.WINDOW:
    if not (isinstance(arg, tuple) and len(arg) == 3 and all(len(a) == len(arg[0]) for a in arg) and len(arg[0]) <= len(s)):
      _err(u, f"arg {arg!r} must be (kernel, stride, dilation) tuples of equal length <= ndim of {s}")
    return
  if u.op is not Ops.RESHAPE and (not isinstance(arg, tuple) or len(arg) != len(s)):
    _err(u, f"arg {arg!r} needs one entry per dim of the source shape {s}")
  if u.op is Ops.RESHAPE:
    if not isinstance(arg, tuple) or not all(isinstance(x, int) and x >= 0 for x in arg): _err(u, f"arg {arg!r} must be a tuple of sizes >= 0")
    if prod(arg) != prod(s): _err(u, f"changes the element count: {s} ({prod(s)} elements) -> {arg} ({prod(arg)} elements)")
  elif u.op is Ops.PERMUTE:
    if sorted(arg) != list(range(len(s))): _err(u, f"arg {arg} is not a permutation of the {len(s)} dims of {s}")
  elif u.op is Ops.EXPAND:
    for a, b in zip(s, arg):
      if a != b and a != 1: _err(u, f"can only expand dims of size 1: {s} -> {arg}")
  elif u.op is Ops.PAD:
    if not all(isinstance(p, tuple) and len(p) == 2 and all(isinstance(x, int) and x >= 0 for x in p) for p in arg):
      _err(u, f"arg {arg} must be one (before, after) pair of non-negative ints per dim of {s}")
  elif u.op is Ops.SHRINK:
    if not all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], int) and isinstance(p[1], int) and 0 <= p[0] <= p[1] <= n
               for p, n in zip(arg, s)):
      _err(u, f"arg {arg} must be one (start, end) pair with 0 <= start <= end <= size per dim of {s}")
  elif u.op is Ops.FLIP:
    if not all(isinstance(f, bool) for f in arg): _err(u, f"arg {arg} must be one bool per dim of {s}")

def _check_reduce(u: UOp):
  if len(u.src) != 1: _err(u, f"takes one source, got {len(u.src)}")
  s = _shape_of(u.src[0])
  if not (isinstance(u.arg, tuple) and len(u.arg) == 2 and isinstance(u.arg[1], tuple)): _err(u, f"arg {u.arg!r} must be (op, axes)")
  op, axes = u.arg
  if op not in REDUCE_OPS: _err(u, f"{op} is not a reduce op (one of {[o.name for o in REDUCE_OPS]})")
  if any(not isinstance(a, int) or not 0 <= a < len(s) for a in axes): _err(u, f"axes {axes} out of range for shape {s}")
  if len(set(axes)) != len(axes): _err(u, f"axes {axes} repeat")
  if u.dtype != u.src[0].dtype.base: _err(u, f"result dtype differs from the source dtype {u.src[0].dtype}")

def _check_gather(u: UOp):
  if len(u.src) != 2: _err(u, f"takes (source, index), got {len(u.src)} sources")
  x, idx = u.src
  xs, ids = _shape_of(x), _shape_of(idx)
  if not dtypes.is_int(idx.dtype.base): _err(u, f"the index must be an integer, got {idx.dtype}")
  if u.dtype != x.dtype.base: _err(u, f"result dtype differs from the source dtype {x.dtype}")
  if not isinstance(u.arg, int) or not 0 <= u.arg < len(xs): _err(u, f"dim {u.arg!r} out of range for shape {xs}")
  if len(ids) != len(xs) or any(a != b for i, (a, b) in enumerate(zip(xs, ids)) if i != u.arg):
    _err(u, f"index shape {ids} must match the source shape {xs} outside dim {u.arg}")

def _check_common(u: UOp, kernel: bool):
  op = u.op
  if op is Ops.CONST:
    _check_const(u)
    if kernel and u.src: _err(u, "a kernel constant has no sources")
    if not kernel and (len(u.src) > 1 or any(s.op is not Ops.DEVICE for s in u.src)): _err(u, "a tensor constant has at most one source, a DEVICE")
  elif op is Ops.DEFINE_VAR:
    if not (isinstance(u.arg, tuple) and len(u.arg) == 3 and isinstance(u.arg[0], str) and u.arg[1] <= u.arg[2]):
      _err(u, f"arg {u.arg!r} must be (name, min, max) with min <= max")
    if not dtypes.is_int(u.dtype): _err(u, "a variable is an integer")
  elif op is Ops.IOTA:
    if not dtypes.is_int(u.dtype) or not isinstance(u.arg, int) or u.arg < 0: _err(u, f"needs an int dtype and a size >= 0, got {u.arg!r}")
  elif op is Ops.GATHER: _check_gather(u)
  elif op in GroupOp.Elementwise: _check_elementwise(u)
  elif op in GroupOp.Movement: _check_movement(u)
  elif op is Ops.REDUCE_AXIS: _check_reduce(u)
  elif op in (Ops.CONTIGUOUS, Ops.DETACH):
    if len(u.src) != 1 or u.dtype != u.src[0].dtype.base: _err(u, "takes one source and keeps its dtype")
  elif op is Ops.SINK:
    if u.dtype != dtypes.void: _err(u, "a SINK is void")

def _walk(sink: UOp, check: Callable[[UOp], None], what: str):
  for u in sink.toposort():
    try: check(u)
    except _Fail as e: raise ValueError(f"invalid {what}: {e}") from None

def verify_kernel(ast: UOp) -> None:
  """Raise ValueError unless ast is SINK(STORE(DEFINE_GLOBAL, value), ...) (or a SINK(COPY) copy kernel) over a
  well-formed kernel-level graph."""
  if ast.op is not Ops.SINK: raise ValueError(f"invalid kernel: the root must be a SINK, got {ast.op.name}")
  if not ast.src: raise ValueError("invalid kernel: the SINK has no sources")
  if len(ast.src) == 1 and ast.src[0].op is Ops.COPY and not ast.src[0].src: return
  stores = set(ast.src)
  for s in ast.src:
    if s.op is not Ops.STORE: raise ValueError(f"invalid kernel: every source of the SINK must be a STORE, got {s.op.name}")
  permuted = {s.src[2] for s in ast.src if len(s.src) == 3 and s.src[2].op is Ops.PERMUTE}  # placements, checked with their STORE
  def check(u: UOp):
    op = u.op
    if u in permuted: return
    if op in TENSOR_ONLY: _err(u, "is a tensor-level op and cannot appear in a kernel")
    if op in LOWERED: _err(u, "is a lowered op; a kernel AST is lowered by codegen")
    if op is Ops.SINK and u is not ast: _err(u, "a SINK can only be the root")
    if op is Ops.STORE:
      if u not in stores: _err(u, "a STORE must be a direct source of the kernel's SINK")
      if len(u.src) not in (2, 3) or u.src[0].op is not Ops.DEFINE_GLOBAL or (len(u.src) == 3 and u.src[2].op not in (Ops.ASSIGN, Ops.PERMUTE)):
        _err(u, "needs (DEFINE_GLOBAL, value[, ASSIGN or PERMUTE placement]) sources")
      buf, val, *place = u.src
      if val.dtype.base != buf.dtype.base: _err(u, f"stores a {val.dtype} value into a {buf.dtype} buffer")
      if place and place[0].op is Ops.PERMUTE:  # value stored permuted: the order must name each of its dims once
        if sorted(place[0].arg) != list(range(len(_shape_of(val)))): _err(u, f"permutes a {_shape_of(val)} value by {place[0].arg}")
      elif place:  # an in-place box write: value has the target's shape but at most its sizes along dims (one start each)
        dims, shape = place[0].arg
        vs = _shape_of(val)
        if len(vs) != len(shape) or len(dims) != len(place[0].src) or prod(shape) != buf.dtype.size or \
           any(a != b if i not in dims else a > b for i, (a, b) in enumerate(zip(vs, shape))):
          _err(u, f"writes a {vs} box along dims {dims} into a buffer of shape {shape} ({buf.dtype.size} elements)")
        return
      if prod(_shape_of(val)) != buf.dtype.size: _err(u, f"stores {prod(_shape_of(val))} elements (shape {val.shape}) into a buffer of {buf.dtype.size}")
      return
    if op is Ops.DEFINE_GLOBAL:
      if not isinstance(u.dtype, PtrDType): _err(u, "a DEFINE_GLOBAL needs a pointer dtype")
      if not isinstance(u.arg, int) or u.arg < 0 or u.src: _err(u, f"needs an int arg >= 0 and no sources, got {u.arg!r}")
      return
    _check_common(u, kernel=True)
  _walk(ast, check, "kernel")
  written = [s.src[0].arg for s in ast.src]
  if len(set(written)) != len(written): raise ValueError(f"invalid kernel: two STOREs write the same buffer {written}")

def verify_tensor_graph(sink: UOp) -> None:
  """Raise ValueError unless the lazy tensor graph under sink is well formed."""
  def check(u: UOp):
    op = u.op
    if op in KERNEL_ONLY or op in LOWERED: _err(u, "is a kernel-level op and cannot appear in a tensor graph")
    if op is Ops.SINK and u is not sink: _err(u, "a SINK can only be the root")
    if op is Ops.DEVICE:
      if not isinstance(u.arg, str) or u.src: _err(u, f"needs a device name and no sources, got {u.arg!r}")
      return
    if op is Ops.BUFFER:
      if len(u.src) != 1 or u.src[0].op is not Ops.DEVICE: _err(u, "needs one DEVICE source")
      if not (isinstance(u.arg, tuple) and len(u.arg) == 2 and isinstance(u.arg[1], int) and u.arg[1] >= 0): _err(u, f"arg {u.arg!r} must be (id, size)")
      if isinstance(u.dtype, PtrDType) or u.dtype == dtypes.void: _err(u, "needs an element dtype")
      return
    if op is Ops.COPY:
      if len(u.src) != 2 or u.src[1].op is not Ops.DEVICE: _err(u, "needs (value, DEVICE) sources")
      if u.dtype != u.src[0].dtype: _err(u, f"copies a {u.src[0].dtype} value")
      return
    if op is Ops.BIND:
      if len(u.src) != 2 or u.src[0].op is not Ops.DEFINE_VAR or u.src[1].op is not Ops.CONST: _err(u, "needs (DEFINE_VAR, CONST) sources")
      var, val = u.src
      if not var.arg[1] <= val.arg <= var.arg[2]: _err(u, f"value {val.arg} is outside the bounds [{var.arg[1]}, {var.arg[2]}] of {var.arg[0]}")
      if u.dtype != var.dtype or val.dtype != var.dtype: _err(u, "variable, value and bind need one dtype")
      return
    srcs = u.src if op is not Ops.IOTA else ()
    if op is not Ops.CONST and any(s.op is Ops.DEVICE for s in srcs): _err(u, "only CONST, IOTA, BUFFER and COPY take a DEVICE source")
    _check_common(u, kernel=False)
  _walk(sink, check, "tensor graph")
  # elementwise ops must not mix devices: each node's sources agree on one device (COPY is the only bridge)
  for u in sink.toposort():
    if u.op in GroupOp.Elementwise and len({s.device for s in u.src if s.device is not None}) > 1:
      raise ValueError(f"invalid tensor graph: {u.op.name} mixes devices {sorted({s.device for s in u.src if s.device is not None})}")
