"""C source from linear UOps (the CPU device; the CUDA renderer will share most of it)."""
from __future__ import annotations
import math
from fusegrad.dtype import DType, dtypes, float_to_bf16
from fusegrad.uop.ops import GroupOp, Ops, UOp
from fusegrad.renderer import ProgramSpec, estimate, kernel_name
from fusegrad.uop.symbolic import _terms

C_TYPES = {dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
           dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
           dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16", dtypes.bfloat16: "unsigned short",
           dtypes.float32: "float", dtypes.float64: "double"}

PRELUDE = """#include <math.h>
#include <string.h>
static inline float bf16_to_f32(unsigned short x) { unsigned int u = ((unsigned int)x) << 16; float f; memcpy(&f, &u, 4); return f; }
static inline unsigned short f32_to_bf16(float f) {
  unsigned int u; memcpy(&u, &f, 4);
  if (f != f) return 0x7fc0;
  return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
#define BITCAST(T, F, x) ({ F _s = (x); T _d; memcpy(&_d, &_s, sizeof(T)); _d; })
"""

def ctype(d: DType) -> str: return C_TYPES[d.base]

def render_const(v, d: DType) -> str:
  if d == dtypes.bool: return "1" if v else "0"
  if dtypes.is_int(d):
    if v == dtypes.min(d) and not dtypes.is_unsigned(d): return f"(({ctype(d)})({v + 1}ll - 1))"
    suffix = {dtypes.int64: "ll", dtypes.uint64: "ull", dtypes.uint32: "u"}.get(d, "")
    return f"(({ctype(d)}){v}{suffix})" if not suffix else f"({v}{suffix})"
  if d == dtypes.bfloat16: return f"((unsigned short){float_to_bf16(v)})"
  if math.isnan(v): s = "NAN"
  elif math.isinf(v): s = "INFINITY" if v > 0 else "(-INFINITY)"
  else: s = float.hex(float(v)) + ("f" if d != dtypes.float64 else "")
  if d == dtypes.float16: return f"(({ctype(d)}){s})"
  return f"({s})" if s.startswith("-") else s  # so `a - -1.5` does not render as `a--1.5`

def _fn(name: str, d: DType) -> str: return name + ("f" if d != dtypes.float64 else "")

def render_alu(op: Ops, d: DType, s: list[str], srcd: DType, const_divisor=None) -> str:
  isf = dtypes.is_float(srcd)
  if op in GroupOp.Unary:
    a = s[0]
    if op is Ops.NEG: return f"(-{a})"
    if op is Ops.RECIP: return f"(1/{a})"
    if op is Ops.SIGMOID: return f"(1/(1+{_fn('exp', d)}(-{a})))"
    if op is Ops.ABS: return f"{_fn('fabs', d)}({a})" if isf else f"({a}<0?-{a}:{a})"
    names = {Ops.EXP: "exp", Ops.LOG: "log", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.COS: "cos", Ops.TAN: "tan",
             Ops.SQRT: "sqrt", Ops.TRUNC: "trunc", Ops.FLOOR: "floor", Ops.CEIL: "ceil", Ops.RINT: "rint", Ops.TANH: "tanh", Ops.ERF: "erf"}
    return f"{_fn(names[op], d)}({a})" if isf else a
  a, b = s[0], s[1] if len(s) > 1 else ""
  if op in (Ops.IDIV, Ops.MOD) and not isf and const_divisor is not None and const_divisor > 0:
    return f"({a}{'/' if op is Ops.IDIV else '%'}{b})"  # a positive constant divisor needs no guard
  if op is Ops.IDIV: return f"({b}==0?0:({b}==-1?-{a}:{a}/{b}))" if not dtypes.is_unsigned(srcd) else f"({b}==0?0:{a}/{b})"
  if op is Ops.MOD:
    if isf: return f"{_fn('fmod', d)}({a},{b})"
    return f"({b}==0?0:({b}==-1?0:{a}%{b}))" if not dtypes.is_unsigned(srcd) else f"({b}==0?0:{a}%{b})"
  if op is Ops.MAX: return f"((({a}!={a})||({a}>{b}))?{a}:{b})" if isf else f"(({a}>{b})?{a}:{b})"
  if op is Ops.POW: return f"{_fn('pow', d)}({a},{b})"
  if op is Ops.WHERE: return f"({a}?{b}:{s[2]})"
  sym = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "==",
         Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>"}[op]
  return f"({a}{sym}{b})"

def render_cast(x: str, src: DType, dst: DType) -> str:
  if src == dtypes.bfloat16: x, src = f"bf16_to_f32({x})", dtypes.float32
  if dst == dtypes.bfloat16: return f"f32_to_bf16((float){x})"
  if dst == dtypes.bool: return f"({x}!=0)"
  if dtypes.is_float(src) and dtypes.is_int(dst) and dst.itemsize < 8: return f"(({ctype(dst)})(long long)({x}))"
  return f"(({ctype(dst)})({x}))"

VECTOR_ALU = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/"}
VECTOR_OPS = {*VECTOR_ALU, Ops.NEG, Ops.RECIP, Ops.MAX, Ops.ABS}

def _lane_stride(idx: UOp, lane: UOp) -> int | None:
  """idx = (terms free of lane) + c*lane: c, else None (then one lane's index says nothing of the others)."""
  terms = _terms(idx)
  if any(n is not None and n is not lane and lane in n.toposort() for n, _ in terms): return None
  return sum(c for n, c in terms if n is lane)

def _loop_body(uops: list[UOp], rng: UOp) -> list[UOp]:
  start = uops.index(rng)
  end = next(i for i in range(start, len(uops)) if uops[i].op is Ops.ENDRANGE and uops[i].src[0] is rng)
  return uops[start + 1:end]

def _vectorizable(body: list[UOp], lane: UOp, math: bool) -> bool:
  """Can this tile loop run as SIMD vectors? Every float value in it must be float32 math that C vector types (or,
  with `math`, glibc's vector math library) support, and every load/store index must move by a constant step per lane."""
  f32, ops = dtypes.float32, VECTOR_OPS | (set(VECTOR_MATH) | {Ops.SIGMOID} if math else set())
  for u in body:
    if u.op is Ops.LOAD: ok = u.dtype == f32 and _lane_stride(u.src[1], lane) is not None and (len(u.src) < 3 or lane not in u.src[2].toposort())
    elif u.op is Ops.STORE: ok = u.src[2].dtype == f32 and _lane_stride(u.src[1], lane) is not None
    elif u.op is Ops.ACC_UPDATE: ok = u.dtype == f32 and (len(u.src) == 2 or u.src[2] is lane) and u.arg in (Ops.ADD, Ops.MUL, Ops.MAX)
    elif u.op is Ops.REDUCE: ok = u.dtype == f32 and isinstance(u.arg, tuple) and u.arg[1] is lane
    elif dtypes.is_int(u.dtype): ok = u.op in GroupOp.ALU  # index math: rendered once per vector, for its first lane
    else: ok = u.op in ops and u.dtype == f32 and all(s.dtype == f32 for s in u.src)
    if not ok: return False
  return True

def vector_loops(uops: list[UOp], simd_width: int, math: bool = False) -> dict[UOp, int]:
  """The tile loops of accumulator arrays (codegen/opt.py VECTOR) with their vector width (the widest of
  simd_width, simd_width/2, ... down to 4 that divides the tile), when all of them can run as SIMD vectors."""
  tiles = {u.src[2] for u in uops if u.op is Ops.ACC_UPDATE and len(u.src) == 3} | \
          {u.arg[1] for u in uops if u.op is Ops.REDUCE and isinstance(u.arg, tuple)}
  widths = {t: next((w for w in (simd_width >> s for s in range(4)) if w >= 4 and t.src[0].arg % w == 0), 0) for t in tiles}
  if not all(w and _vectorizable(_loop_body(uops, t), t, math) for t, w in widths.items()): return {}
  return widths

def render_c(uops: list[UOp], fn_prefix: str = "", simd_width: int = 0, vector_math: bool = False) -> ProgramSpec:
  """simd_width: float32 lanes of the target's vector registers (0: emit no vector types); vector_math: glibc's
  libmvec is linked, so exp/log/sin/... of a whole vector are one call."""
  name, shape = kernel_name(uops)
  names: dict[UOp, str] = {}
  lines: list[str] = []
  params, globals_, vars_ = [], [], []
  written = {u.src[0].arg for u in uops if u.op is Ops.STORE}
  depth = 1
  accs = {u.arg: u for u in uops if u.op is Ops.DEFINE_ACC}
  vloops = vector_loops(uops, simd_width, vector_math)
  vec_accs = {u.src[0]: vloops[u.src[2]] for u in uops if u.op is Ops.ACC_UPDATE and len(u.src) == 3 and u.src[2] in vloops}
  # only an output loop at the top level can be split across threads (a reduce loop would race on its accumulator)
  first = next((u for u in uops if u.op in (Ops.RANGE, Ops.STORE, Ops.DEFINE_ACC)), None)
  parallel = first if first is not None and first.op is Ops.RANGE and first.src[0].op is Ops.CONST and first.src[0].arg > 1 else None
  def r(u: UOp) -> str: return names[u] if u in names else render_const(u.arg, u.dtype)
  def emit(s: str): lines.append("  " * depth + s)
  counter = 0
  def new_name(prefix="v") -> str:
    nonlocal counter
    counter += 1
    return f"{prefix}{counter - 1}"

  def render_vector_loop(body: list[UOp], lane: UOp, width: int):
    """The tile loop unrolled into vectors: in vector g, index math is computed for lane g*width (each index moves by
    a constant step per lane, checked by _vectorizable) and float values are whole vectors."""
    vt = f"f32x{width}"
    for g in range(lane.src[0].arg // width):
      names[lane] = str(g * width)
      vec: set[UOp] = set()
      def vr(u: UOp) -> str: return r(u) if u in vec else f"(({vt}){{}}+{r(u)})"  # a scalar operand is broadcast
      for u in body:
        if u.op is Ops.STORE:
          ptr, idx, step = r(u.src[0]), r(u.src[1]), _lane_stride(u.src[1], lane)
          if step == 1: emit(f"*({vt}*)({ptr}+{idx}) = {vr(u.src[2])};")
          else: emit(" ".join(f"{ptr}[{idx}+{step * i}] = {r(u.src[2])}[{i}];" for i in range(width)))
          continue
        if u.op is Ops.ACC_UPDATE and len(u.src) == 2:  # a scalar accumulator takes the lanes one by one, in order
          acc = names[u.src[0]]
          emit(" ".join(f"{acc} = {render_alu(u.arg, u.dtype, [acc, f'{r(u.src[1])}[{i}]'], u.dtype)};" for i in range(width)))
          continue
        if u.op is Ops.ACC_UPDATE:
          acc = f"{names[u.src[0]]}_{g}"
          emit(f"{acc} = {_vector_alu(u.arg, [acc, vr(u.src[1])], vt)};")
          continue
        if u.op is Ops.REDUCE:
          names[u] = f"{names[accs[u]]}_{g}"
          vec.add(u)
          continue
        if dtypes.is_int(u.dtype):
          expr = render_alu(u.op, u.dtype, [r(s) for s in u.src], u.src[0].dtype, u.src[1].arg if len(u.src) > 1 and u.src[1].op is Ops.CONST else None)
          names[u] = new_name()
          emit(f"{ctype(u.dtype)} {names[u]} = {expr};")
          continue
        if u.op is Ops.LOAD:
          ptr, idx, step = r(u.src[0]), r(u.src[1]), _lane_stride(u.src[1], lane)
          # a staged block is 64-byte aligned and its tile is a multiple of the vector: an aligned load
          aligned = "a" if u.src[0].op is Ops.STAGE else ""
          expr = f"*(const {vt}{aligned}*)({ptr}+{idx})" if step == 1 else "(" + vt + "){" + ", ".join(f"{ptr}[{idx}+{step * i}]" for i in range(width)) + "}"
          if len(u.src) == 3: expr = f"({r(u.src[2])}?{expr}:({vt}){{}})"
        else: expr = _vector_alu(u.op, [vr(s) for s in u.src], vt)
        names[u] = new_name()
        vec.add(u)
        emit(f"{vt} {names[u]} = {expr};")

  skip_until: UOp | None = None
  for u in uops:
    if skip_until is not None:
      if u.op is Ops.ENDRANGE and u.src[0] is skip_until: skip_until = None
      continue
    if u.op is Ops.DEFINE_GLOBAL:
      names[u] = f"data{u.arg}"
      params.append((u.arg, f"{'' if u.arg in written else 'const '}{ctype(u.dtype)}* restrict data{u.arg}"))
      globals_.append((u.arg, u.arg in written))
    elif u.op is Ops.DEFINE_VAR:
      names[u] = u.arg[0]
      vars_.append(u)
    elif u.op is Ops.CONST: continue
    elif u.op is Ops.RANGE and u in vloops:
      render_vector_loop(_loop_body(uops, u), u, vloops[u])
      skip_until = u
    elif u.op is Ops.RANGE:
      names[u] = f"ridx{sum(1 for x in names if x.op is Ops.RANGE)}"  # numbered by appearance: same kernel, same source
      lo, hi = "0", r(u.src[0])
      if u is parallel:
        # the outermost loop is split evenly across the threads that call this kernel
        n = u.src[0].arg
        lo, hi = f"(({ctype(u.dtype)})((long long)core_id*{n}/n_cores))", f"(({ctype(u.dtype)})((long long)(core_id+1)*{n}/n_cores))"
      emit(f"for ({ctype(u.dtype)} {names[u]} = {lo}; {names[u]} < {hi}; {names[u]}++) {{")
      depth += 1
    elif u.op is Ops.ENDRANGE:
      depth -= 1
      emit("}")
    elif u.op is Ops.STORE: emit(f"{r(u.src[0])}[{r(u.src[1])}] = {r(u.src[2])};")
    elif u.op is Ops.STAGE:
      names[u] = new_name("stage")
      emit(f"{ctype(u.dtype)} {names[u]}[{u.arg}] __attribute__((aligned(64)));")
    elif u.op is Ops.DEFINE_ACC and u in vec_accs:
      names[u] = new_name("acc")
      vt, init = f"f32x{vec_accs[u]}", f"((f32x{vec_accs[u]}){{}}+{r(u.src[0])})"
      emit(f"{vt} " + ", ".join(f"{names[u]}_{g} = {init}" for g in range(u.arg.src[-1].src[0].arg // vec_accs[u])) + ";")
    elif u.op is Ops.DEFINE_ACC:
      names[u] = new_name("acc")
      if isinstance(u.arg.arg, tuple):
        n = u.arg.src[-1].src[0].arg
        emit(f"{ctype(u.dtype)} {names[u]}[{n}];")
        emit(f"for (int i = 0; i < {n}; i++) {names[u]}[i] = {r(u.src[0])};")
      else: emit(f"{ctype(u.dtype)} {names[u]} = {r(u.src[0])};")
    elif u.op is Ops.ACC_UPDATE:
      acc, v = r(u.src[0]) + (f"[{r(u.src[2])}]" if len(u.src) == 3 else ""), r(u.src[1])
      emit(f"{acc} = {render_alu(u.arg, u.dtype, [acc, v], u.dtype)};")
    elif u.op is Ops.REDUCE:
      acc = names[accs[u]]
      if isinstance(u.arg, tuple):
        names[u] = new_name()
        emit(f"{ctype(u.dtype)} {names[u]} = {acc}[{r(u.arg[1])}];")
      else: names[u] = acc
    else:
      if u.op is Ops.LOAD:
        expr = f"{r(u.src[0])}[{r(u.src[1])}]"
        if len(u.src) == 3: expr = f"({r(u.src[2])}?{expr}:{render_const(0, u.dtype)})"
      elif u.op is Ops.CAST: expr = render_cast(r(u.src[0]), u.src[0].dtype, u.dtype)
      elif u.op is Ops.BITCAST: expr = f"BITCAST({ctype(u.dtype)}, {ctype(u.src[0].dtype)}, {r(u.src[0])})"
      elif u.op in GroupOp.ALU:
        cdiv = u.src[1].arg if u.op in (Ops.IDIV, Ops.MOD) and u.src[1].op is Ops.CONST else None
        expr = render_alu(u.op, u.dtype, [r(s) for s in u.src], u.src[-1].dtype if u.op is Ops.WHERE else u.src[0].dtype, cdiv)
      else: raise NotImplementedError(f"C renderer has no rule for {u.op}")
      names[u] = new_name()
      emit(f"{ctype(u.dtype)} {names[u]} = {expr};")
  sig = ", ".join([p for _, p in sorted(params)] + [f"{ctype(v.dtype)} {v.arg[0]}" for v in vars_] + ["int core_id", "int n_cores"])
  vector_types = "".join(VECTOR_PRELUDE.replace("W", str(w)).replace("B", str(4 * w)) + (_vector_math_decls(w) if vector_math else "")
                         for w in sorted(set(vloops.values())))
  prelude = PRELUDE + vector_types
  src = prelude + f"void {fn_prefix}{name}({sig}) {{\n" + "\n".join(lines) + "\n}\n"
  flops, mem = estimate(uops)
  return ProgramSpec(fn_prefix + name, src, uops, sorted(globals_), vars_, flops, mem, shape, parallel is not None, fused_multiply_add=bool(vloops))

# GCC/clang vector extensions: arithmetic on whole vectors, a scalar operand broadcast; aligned(4) makes a pointer
# cast an unaligned load (f32xWa: an aligned one). max keeps a NaN of either side, like torch.maximum, via a bitwise select.
VECTOR_PRELUDE = """typedef float f32xW __attribute__((vector_size(B), aligned(4)));
typedef float f32xWa __attribute__((vector_size(B)));
typedef int i32xW __attribute__((vector_size(B), aligned(4)));
static inline f32xW max_f32xW(f32xW a, f32xW b) { i32xW m = (a != a) | (a > b); return (f32xW)(((i32xW)a & m) | ((i32xW)b & ~m)); }
"""

# glibc's vector math (libmvec) by the x86 vector ABI's names: _ZGV<isa>N<lanes>v_<function>
VECTOR_MATH = {Ops.EXP: "exp", Ops.LOG: "log", Ops.SIN: "sin", Ops.COS: "cos", Ops.EXP2: "exp2", Ops.LOG2: "log2",
               Ops.TAN: "tan", Ops.TANH: "tanh", Ops.ERF: "erf"}
MVEC_ISA = {4: "b", 8: "d", 16: "e"}

def _mvec(fn: str, width: int) -> str: return f"_ZGV{MVEC_ISA[width]}N{width}v_{fn}f"
def _vector_math_decls(w: int) -> str: return "".join(f"f32x{w}a {_mvec(f, w)}(f32x{w}a);\n" for f in VECTOR_MATH.values())

def _vector_alu(op: Ops, s: list[str], vt: str) -> str:
  width = int(vt[4:])
  if op in VECTOR_MATH: return f"{_mvec(VECTOR_MATH[op], width)}({s[0]})"
  if op is Ops.SIGMOID: return f"(1.0f/(1.0f+{_mvec('exp', width)}(-{s[0]})))"
  if op is Ops.NEG: return f"(-{s[0]})"
  if op is Ops.ABS: return f"(({vt})((i32x{width}){s[0]} & 0x7fffffff))"  # clear the sign bit
  if op is Ops.RECIP: return f"(1.0f/{s[0]})"
  if op is Ops.MAX: return f"max_{vt}({s[0]}, {s[1]})"
  return f"({s[0]}{VECTOR_ALU[op]}{s[1]})"
