"""C source from linear UOps (the CPU device; the CUDA renderer will share most of it)."""
from __future__ import annotations
import math
from fusegrad.dtype import DType, dtypes, float_to_bf16
from fusegrad.uop.ops import GroupOp, Ops, UOp
from fusegrad.renderer import ProgramSpec, estimate, kernel_name
from fusegrad.renderer.cvector import VectorLoop, inner_vector_loops, loop_body, prelude as vector_prelude, vector_loops

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
  vloops = vector_loops(uops, simd_width)
  vec_accs = {u.src[0]: vloops[u.src[2]] for u in uops if u.op is Ops.ACC_UPDATE and len(u.src) == 3 and u.src[2] in vloops}  # acc -> widths
  # only an output loop at the top level can be split across threads (a reduce loop would race on its accumulator)
  first = next((u for u in uops if u.op in (Ops.RANGE, Ops.STORE, Ops.DEFINE_ACC)), None)
  parallel = first if first is not None and first.op is Ops.RANGE and first.src[0].op is Ops.CONST and first.src[0].arg > 1 else None
  vinner = inner_vector_loops(uops, simd_width, set(vloops))
  def r(u: UOp) -> str: return names[u] if u in names else render_const(u.arg, u.dtype)
  def emit(s: str): lines.append("  " * depth + s)
  counter = 0
  def new_name(prefix="v") -> str:
    nonlocal counter
    counter += 1
    return f"{prefix}{counter - 1}"
  def vector_loop(rng: UOp) -> VectorLoop:
    return VectorLoop(loop_body(uops, rng), rng, vector_math, names, r, emit, new_name, render_alu, render_cast, ctype)

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
      vector_loop(u).render(vloops[u], accs)
      skip_until = u
    elif u.op is Ops.RANGE and u in vinner:  # a loop over vectors of lanes
      names[u] = f"ridx{sum(1 for x in names if x.op is Ops.RANGE)}"
      n = u.src[0].arg // vinner[u]
      lo, hi = (f"core_id*{n}ll/n_cores", f"(core_id+1)*{n}ll/n_cores") if u is parallel else ("0", str(n))  # threads split the vectors
      emit(f"for ({ctype(u.dtype)} {names[u]} = {lo}; {names[u]} < {hi}; {names[u]}++) {{")
      depth += 1
      vector_loop(u).render_vector(f"{names[u]}*{vinner[u]}", vinner[u])
      depth -= 1
      emit("}")
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
      emit(" ".join(f"f32x{w} {names[u]}_{g} = bcast_f32x{w}({r(u.src[0])});" for g, w in enumerate(vec_accs[u])))
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
  widths = {w for ws in vloops.values() for w in ws} | set(vinner.values())
  prelude = PRELUDE + "".join(vector_prelude(w, vector_math) for w in sorted(widths))
  src = prelude + f"void {fn_prefix}{name}({sig}) {{\n" + "\n".join(lines) + "\n}\n"
  flops, mem = estimate(uops)
  return ProgramSpec(fn_prefix + name, src, uops, sorted(globals_), vars_, flops, mem, shape, parallel is not None)
