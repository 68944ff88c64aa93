"""A kernel AST (SINK of STOREs over a tensor-level graph) becomes scalar code over loop ranges.

Walking from each store back to the loads, movement ops rewrite the index expression instead of moving data:
reshape regroups dims (div/mod of a flat index), permute reorders, expand drops a range, shrink adds an offset,
flip maps i -> n-1-i and pad adds a validity condition that gates the load and selects 0 outside the source."""
from __future__ import annotations
from fusegrad.dtype import DType, dtypes
from fusegrad.helpers import prod
from fusegrad.uop.ops import GroupOp, Ops, UOp
from fusegrad.uop.symbolic import conjuncts

REDUCE_IDENTITY = {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: -float("inf")}

def reduce_identity(op: Ops, dtype: DType):
  if op is Ops.MAX: return dtypes.min(dtype)
  return REDUCE_IDENTITY[op]

def strides_for(shape: tuple[int, ...]) -> list[int]:
  out, acc = [], 1
  for s in reversed(shape):
    out.append(acc)
    acc *= s
  return out[::-1]

def flat_index(idx: list[UOp], shape: tuple[int, ...], idt: DType) -> UOp:
  out = UOp.const(idt, 0)
  for i, st in zip(idx, strides_for(shape)):
    if st and not (i.op is Ops.CONST and i.arg == 0): out = out + i * UOp.const(idt, st)
  return out

def _groups(old: tuple[int, ...], new: tuple[int, ...]) -> list[tuple[list[int], list[int]]] | None:
  """Pair runs of old dims with runs of new dims of the same product, so most reshapes need no div/mod."""
  i = j = 0
  out = []
  while i < len(old) or j < len(new):
    gi, gj, po, pn = [], [], 1, 1
    if i < len(old): gi.append(i); po *= old[i]; i += 1
    if j < len(new): gj.append(j); pn *= new[j]; j += 1
    while po != pn:
      if po < pn and i < len(old): gi.append(i); po *= old[i]; i += 1
      elif pn < po and j < len(new): gj.append(j); pn *= new[j]; j += 1
      else: return None
    # trailing size-1 dims join the current group
    while i < len(old) and old[i] == 1 and (j >= len(new) or new[j] != 1): gi.append(i); i += 1
    while j < len(new) and new[j] == 1 and (i >= len(old) or old[i] != 1): gj.append(j); j += 1
    out.append((gi, gj))
  return out

class Lowerer:
  def __init__(self, idt: DType):
    self.idt, self.range_count, self.memo = idt, 0, {}
  def new_range(self, size: int) -> UOp:
    if size == 1: return UOp.const(self.idt, 0)
    r = UOp(Ops.RANGE, self.idt, (UOp.const(self.idt, size),), self.range_count)
    self.range_count += 1
    return r
  def c(self, v: int) -> UOp: return UOp.const(self.idt, v)
  def size(self, s) -> UOp:
    """A size or offset as an index expression: an int, or a symbolic size (an expression of DEFINE_VARs)."""
    return self.lower(s, (), None).cast(self.idt) if isinstance(s, UOp) else self.c(s)

  def index_through(self, u: UOp, idx: list[UOp]) -> tuple[list[UOp], UOp | None]:
    """Index expressions for u.src[0] given indices into the movement op u, plus a validity condition (pad)."""
    src_shape, arg = u.src[0].shape, u.arg
    if u.op is Ops.PERMUTE:
      out = [None] * len(idx)
      for i, p in enumerate(arg): out[p] = idx[i]
      return out, None  # type: ignore
    if u.op is Ops.EXPAND: return [self.c(0) if s == 1 and n != 1 else i for i, s, n in zip(idx, src_shape, u.shape)], None
    if u.op is Ops.SHRINK: return [i + self.c(b) if b else i for i, (b, _) in zip(idx, arg)], None
    if u.op is Ops.FLIP: return [self.c(s - 1) - i if f else i for i, s, f in zip(idx, src_shape, arg)], None
    if u.op is Ops.WINDOW:
      k_, s_, d_ = arg
      n = len(k_)
      lead, o_idx, k_idx = idx[:len(idx) - 2 * n], idx[len(idx) - 2 * n:len(idx) - n], idx[len(idx) - n:]
      return lead + [o * self.c(st) + k * self.c(d) for o, k, st, d in zip(o_idx, k_idx, s_, d_)], None
    if u.op is Ops.PAD:
      valid, out = None, []
      pairs = u.sym_arg if len(u.src) > 1 else arg
      for i, s, (b, a) in zip(idx, u.src[0].vshape, pairs):
        if isinstance(b, UOp) or isinstance(a, UOp) or b or a:
          # a symbolic source dim ends at its size's value: past it, its storage holds no data
          end = self.c(b + s) if not isinstance(b, UOp) and not isinstance(s, UOp) else self.size(b) + self.size(s)
          cond = i < end
          if isinstance(b, UOp) or b: cond = (i >= self.size(b)) & cond
          valid = cond if valid is None else valid & cond
          if isinstance(b, UOp) or b: i = i - self.size(b)
        out.append(i)
      return out, valid
    assert u.op is Ops.RESHAPE
    groups = _groups(src_shape, u.shape) if prod(src_shape) else None
    if groups is None: groups = [(list(range(len(src_shape))), list(range(len(u.shape))))]
    out = [self.c(0)] * len(src_shape)
    for gi, gj in groups:
      if len(gi) == 1 and len(gj) == 1: out[gi[0]] = idx[gj[0]]; continue
      flat = flat_index([idx[j] for j in gj], tuple(u.shape[j] for j in gj), self.idt)
      for k, st in zip(gi, strides_for(tuple(src_shape[k] for k in gi))):
        if src_shape[k] == 1: continue
        v = flat // self.c(st) if st != 1 else flat
        out[k] = v % self.c(src_shape[k]) if k != gi[0] else v
    return out, None

  def lower(self, u: UOp, idx: tuple[UOp, ...], valid: UOp | None) -> UOp:
    key = (u, idx, valid)
    if key in self.memo: return self.memo[key]
    ret = self._lower(u, idx, valid)
    self.memo[key] = ret
    return ret

  def _lower(self, u: UOp, idx: tuple[UOp, ...], valid: UOp | None) -> UOp:
    if u.op is Ops.DEFINE_GLOBAL:
      return UOp(Ops.LOAD, u.dtype.base, (u, idx[0]) + ((valid,) if valid is not None else ()))
    if u.op is Ops.DEFINE_VAR: return u
    if u.op is Ops.CONST: return u
    if u.op is Ops.IOTA: return idx[0].cast(u.dtype)
    if u.op in GroupOp.Movement:
      new_idx, cond = self.index_through(u, list(idx))
      if cond is None: return self.lower(u.src[0], tuple(new_idx), valid)
      gate = cond if valid is None else valid & cond
      inner = self.lower(u.src[0], tuple(new_idx), gate)
      # a load under this gate (or a stricter one) is already 0 wherever cond is false: no select (a padded conv's every
      # tap had one)
      if inner.op is Ops.LOAD and len(inner.src) == 3 and gate in conjuncts(inner.src[2]): return inner
      return cond.where(inner, UOp.const(u.dtype, 0))
    if u.op is Ops.REDUCE_AXIS:
      op, axes = u.arg
      # an empty reduce is its identity: lowering its body would fold the size-0 range to 0 and read element 0
      if any(u.src[0].shape[a] == 0 for a in axes): return UOp.const(u.dtype, reduce_identity(op, u.dtype))
      new_idx = list(idx)
      rngs = []
      for a in axes:
        new_idx[a] = self.new_range(u.src[0].shape[a])
        if new_idx[a].op is Ops.RANGE: rngs.append(new_idx[a])
      inner = self.lower(u.src[0], tuple(new_idx), valid)
      for a in axes:  # a symbolic dim: the positions past its size's value are not part of the reduction
        if isinstance(n := u.src[0].vshape[a], UOp): inner = (new_idx[a] < self.size(n)).where(inner, UOp.const(u.dtype, reduce_identity(op, u.dtype)))
      if not rngs: return inner
      return UOp(Ops.REDUCE, u.dtype, (inner, *rngs), op)
    if u.op in (Ops.CONTIGUOUS, Ops.DETACH): return self.lower(u.src[0], idx, valid)
    if u.op is Ops.GATHER:
      # a data-dependent index: read it, then index the source with it (out-of-range reads give 0)
      dim, n = u.arg, u.src[0].shape[u.arg]
      at = self.lower(u.src[1], idx, valid).cast(self.idt)
      inside = (at >= self.c(0)) & (at < self.c(n))
      new_idx = tuple(at if i == dim else x for i, x in enumerate(idx))
      return inside.where(self.lower(u.src[0], new_idx, inside if valid is None else valid & inside), UOp.const(u.dtype, 0))
    if u.op in GroupOp.Elementwise:
      return u.replace(src=tuple(self.lower(s, idx, valid) for s in u.src))
    raise NotImplementedError(f"cannot lower {u.op} inside a kernel")

def lower_kernel(ast: UOp) -> UOp:
  """SINK(STORE(DEFINE_GLOBAL, value)) at tensor level -> SINK of scalar STOREs over RANGEs."""
  # 64-bit index math: the C kernels are compiled with -fwrapv (integer tensors wrap like torch's), under which a
  # 32-bit index could wrap before its sign extension, so gcc would turn contiguous accesses into gathers
  lw = Lowerer(dtypes.int64)
  stores = []
  for st in ast.src:
    buf, val, *place = st.src
    idx = tuple(lw.new_range(s) for s in val.shape)
    if place and place[0].op is Ops.PERMUTE:  # stored permuted: the loops follow value's dims, the index the buffer's
      order = place[0].arg
      at = flat_index([idx[d] for d in order], tuple(val.shape[d] for d in order), lw.idt)
    elif place:  # an in-place write of a box: each of dims' indices moves by its start (a bound variable), into the target's shape
      (dims, shape), starts = place[0].arg, [lw.lower(s, (), None).cast(lw.idt) for s in place[0].src]
      start = dict(zip(dims, starts))
      at = flat_index([i + start[k] if k in start else i for k, i in enumerate(idx)], shape, lw.idt)
    else: at = flat_index(list(idx), val.shape, lw.idt)
    stores.append(UOp(Ops.STORE, dtypes.void, (buf, at, lw.lower(val, idx, None))))
  return UOp(Ops.SINK, dtypes.void, tuple(stores), ast.arg)

