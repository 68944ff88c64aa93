"""C-family source from linear UOps. `CStyleRenderer` is the language, built from tables (types, operators, math
function names) and one small method per statement kind, so a dialect (CUDA C) overrides types, indexing and launch
instead of copying the walk. `ClangRenderer` is C for a CPU: SIMD vector types (renderer/cvector.py) and an outer loop
split across threads."""
from __future__ import annotations
import math
from fusegrad.dtype import FP8S, DType, dtypes, float_to_bf16, float_to_fp8
from fusegrad.helpers import NOOPT
from fusegrad.uop.ops import GroupOp, Ops, UOp
from fusegrad.uop.symbolic import _terms, conjuncts
from fusegrad.renderer import ProgramSpec, Renderer, estimate, kernel_name
from fusegrad.renderer.cvector import VECTOR_MATH, VectorLoop, inner_vector_loops, loop_body, prelude as vector_prelude, vector_loops

C_TYPES = {dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
           dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
           dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16", dtypes.bfloat16: "unsigned short",
           dtypes.float32: "float", dtypes.float64: "double", dtypes.fp8e4m3: "unsigned char", dtypes.fp8e5m2: "unsigned char"}

# The C library functions a kernel may call, declared here instead of #include <math.h> and <string.h>: parsing those
# headers was a third of compiling a small kernel (10-15 ms each, about 1 s of a cold MNIST step's 156 kernels on 2 cores)
_LIBM = ["exp", "log", "exp2", "log2", "sin", "cos", "tan", "sqrt", "trunc", "floor", "ceil", "rint", "tanh", "erf", "fabs"]
PRELUDE = "".join(f"float {f}f(float); double {f}(double);\n" for f in _LIBM) + """float powf(float, float); double pow(double, double);
float fmodf(float, float); double fmod(double, double);
#define NAN __builtin_nanf("")
#define INFINITY __builtin_inff()
#define memcpy __builtin_memcpy
static inline float bf16_to_f32(unsigned short x) { unsigned int u = ((unsigned int)x) << 16; float f; memcpy(&f, &u, 4); return f; }
static inline unsigned short f32_to_bf16(float f) {
  unsigned int u; memcpy(&u, &f, 4);
  if (f != f) return 0x7fc0;
  return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
#define BITCAST(T, F, x) ({ F _s = (x); T _d; memcpy(&_d, &_s, sizeof(T)); _d; })
"""

# fp8 <-> float conversions, written out for each format: (exponent bits, mantissa bits, bias, largest finite code,
# what infinity becomes). A kernel that uses fp8 gets them after its prelude, in an include guard so that kernels
# compiled together (the CUDA compile check's batches) define them once.
FP8_FORMATS = {dtypes.fp8e4m3: ("fp8e4m3", 4, 3, 7, 0x7e, 0x7f), dtypes.fp8e5m2: ("fp8e5m2", 5, 2, 15, 0x7b, 0x7c)}

def _fp8_from(name: str, src: str, ubits: int, fbits: int, fbias: int, m: int, bias: int, maxcode: int, infcode: int, qual: str) -> str:
  """C for float or double -> fp8 code: round to nearest, ties to even, in integer arithmetic on src's bits (so it is
  exact for double input too: no rounding to float32 first); a finite value past the largest finite saturates to it."""
  u = "unsigned int" if ubits == 32 else "unsigned long long"
  one = "1u" if ubits == 32 else "1ull"
  emax = (maxcode >> m) - bias  # the exponent of the largest finite value
  return f"""{qual} unsigned char {src}_to_{name}({'float' if ubits == 32 else 'double'} f) {{
  {u} u; memcpy(&u, &f, sizeof(u));
  unsigned char s = (unsigned char)((u >> {ubits - 8}) & 0x80u);
  {u} mag = u & ~({one} << {ubits - 1}), inf = (({one} << {ubits - 1 - fbits}) - {one}) << {fbits};
  if (mag > inf) return s | 0x7f;
  if (mag == inf) return s | {infcode:#x};
  int e = (int)(mag >> {fbits}) - {fbias};
  {u} sig = mag & (({one} << {fbits}) - {one});
  if (e == -{fbias}) e = {1 - fbias}; else sig |= {one} << {fbits};
  if (e > {emax}) return s | {maxcode:#x};
  int eb = e < {1 - bias} ? {1 - bias} : e, sh = {fbits - m} + eb - e;
  if (sh > {fbits + 1}) return s;
  {u} q = sig >> sh, rem = sig & (({one} << sh) - {one}), half = {one} << (sh - 1);
  q += (rem > half || (rem == half && (q & 1))) ? 1 : 0;
  {u} code = ((({u})(eb + {bias - 1})) << {m}) + q;
  return s | (unsigned char)(code > {maxcode:#x} ? {maxcode:#x} : code);
}}
"""

def fp8_source(qual: str) -> str:
  """The fp8 conversion functions, each declared with qual ("static inline" in C, "__device__ inline" in CUDA)."""
  out = "#ifndef FG_FP8\n#define FG_FP8\n"
  for name, e, m, bias, maxcode, infcode in FP8_FORMATS.values():
    special = f"e == {(1 << e) - 1} && m == {(1 << m) - 1}" if infcode == 0x7f else f"e == {(1 << e) - 1}"
    inf = "0x7fc00000u" if infcode == 0x7f else "(m ? 0x7fc00000u : 0x7f800000u)"
    out += f"""{qual} float {name}_to_f32(unsigned char x) {{
  unsigned int s = ((unsigned int)x & 0x80u) << 24, e = ((unsigned int)x >> {m}) & {(1 << e) - 1}u, m = (unsigned int)x & {(1 << m) - 1}u, u;
  float f;
  if (e == 0) {{ f = (float)m * {2.0 ** (1 - bias - m)!r}f; return s ? -f : f; }}
  u = {special} ? {inf} : ((e + {127 - bias}u) << 23) | (m << {23 - m});
  u |= s;
  memcpy(&f, &u, 4);
  return f;
}}
"""
    out += _fp8_from(name, "f32", 32, 23, 127, m, bias, maxcode, infcode, qual)
    out += _fp8_from(name, "f64", 64, 52, 1023, m, bias, maxcode, infcode, qual)
  return out + "#endif\n"

INFIX = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "==",
         Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>"}
# float math by C library name (declared in PRELUDE); float32 takes the "f" suffix (expf)
MATH = {Ops.EXP: "exp", Ops.LOG: "log", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.COS: "cos", Ops.TAN: "tan",
        Ops.SQRT: "sqrt", Ops.TRUNC: "trunc", Ops.FLOOR: "floor", Ops.CEIL: "ceil", Ops.RINT: "rint", Ops.TANH: "tanh", Ops.ERF: "erf",
        Ops.ABS: "fabs"}

class CStyleRenderer(Renderer):
  """Scalar C: one statement per UOp, loops as `for`. Subclasses change the tables and the hooks below."""
  types: dict[DType, str] = C_TYPES
  prelude: str = PRELUDE
  kernel_prefix: str = "void "
  pointer_qualifier: str = "restrict"

  # ---- expressions
  fn_qualifier: str = "static inline"  # of the helper functions a kernel's source defines (fp8 conversions)
  def ctype(self, d: DType) -> str: return self.types[d.base]
  def fp8_prelude(self, k: CKernel) -> str:
    """The fp8 conversions, for a kernel with an fp8 value (most kernels have none: they are not parsed for nothing)."""
    return fp8_source(self.fn_qualifier) if any(u.dtype.base in FP8S for u in k.uops) else ""
  def fn(self, name: str, d: DType) -> str: return name + ("f" if d != dtypes.float64 else "")

  def render_const(self, v, d: DType) -> str:
    if d == dtypes.bool: return "1" if v else "0"
    if dtypes.is_int(d):
      if v == dtypes.min(d) and not dtypes.is_unsigned(d): return f"(({self.ctype(d)})({v + 1}ll - 1))"
      suffix = {dtypes.int64: "ll", dtypes.uint64: "ull", dtypes.uint32: "u"}.get(d, "")
      return f"(({self.ctype(d)}){v}{suffix})" if not suffix else f"({v}{suffix})"
    if d == dtypes.bfloat16: return f"((unsigned short){float_to_bf16(v)})"
    if d in FP8S: return f"((unsigned char){float_to_fp8(v, d)})"
    if math.isnan(v): s = "NAN"
    elif math.isinf(v): s = "INFINITY" if v > 0 else "(-INFINITY)"
    else: s = float.hex(float(v)) + ("f" if d != dtypes.float64 else "")
    if d == dtypes.float16: return f"(({self.ctype(d)}){s})"
    return f"({s})" if s.startswith("-") else s  # so `a - -1.5` does not render as `a--1.5`

  def render_alu(self, op: Ops, d: DType, s: list[str], srcd: DType, const_divisor=None) -> str:
    isf, unsigned = dtypes.is_float(srcd), dtypes.is_unsigned(srcd)
    a, b = s[0], s[1] if len(s) > 1 else ""
    if op is Ops.NEG: return f"(-{a})"
    if op is Ops.RECIP: return f"(1/{a})"
    if op is Ops.SIGMOID: return f"(1/(1+{self.fn('exp', d)}(-{a})))"
    if op is Ops.ABS and not isf: return f"({a}<0?-{a}:{a})"
    if op is Ops.POW: return f"{self.fn('pow', d)}({a},{b})"
    if op in MATH and op is not Ops.MOD: return f"{self.fn(MATH[op], d)}({a})" if isf else a  # rounding an int is itself
    if op in (Ops.IDIV, Ops.MOD) and not isf and const_divisor is not None and const_divisor > 0:
      return f"({a}{'/' if op is Ops.IDIV else '%'}{b})"  # a positive constant divisor needs no guard
    # C's / and % trap on 0 and on MIN/-1: fusegrad defines x/0 = 0, x/-1 = -x, x%0 = x%-1 = 0
    if op is Ops.IDIV: return f"({b}==0?0:{a}/{b})" if unsigned else f"({b}==0?0:({b}==-1?-{a}:{a}/{b}))"
    if op is Ops.MOD:
      if isf: return f"{self.fn('fmod', d)}({a},{b})"
      return f"({b}==0?0:{a}%{b})" if unsigned else f"({b}==0?0:({b}==-1?0:{a}%{b}))"
    if op is Ops.MAX: return f"((({a}!={a})||({a}>{b}))?{a}:{b})" if isf else f"(({a}>{b})?{a}:{b})"  # a NaN wins, as torch
    if op is Ops.WHERE: return f"({a}?{b}:{s[2]})"
    return f"({a}{INFIX[op]}{b})"

  def render_cast(self, x: str, src: DType, dst: DType) -> str:
    if src == dtypes.bfloat16: x, src = f"bf16_to_f32({x})", dtypes.float32
    if src in FP8S: x, src = f"{FP8_FORMATS[src][0]}_to_f32({x})", dtypes.float32
    if dst == dtypes.bfloat16: return f"f32_to_bf16((float){x})"
    # float64 is rounded to fp8 from its own bits (through float32 it would round twice); any other value is exact in
    # float32 or past fp8's range (an int beyond 2**24 saturates either way)
    if dst in FP8S: return f"f64_to_{FP8_FORMATS[dst][0]}({x})" if src == dtypes.float64 else f"f32_to_{FP8_FORMATS[dst][0]}((float)({x}))"
    if dst == dtypes.bool: return f"({x}!=0)"
    # a float to a narrow int goes through 64 bits: C leaves out-of-range conversions undefined, this wraps like torch
    if dtypes.is_float(src) and dtypes.is_int(dst) and dst.itemsize < 8: return f"(({self.ctype(dst)})(long long)({x}))"
    return f"(({self.ctype(dst)})({x}))"

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str: return f"BITCAST({self.ctype(dst)}, {self.ctype(src)}, {x})"

  # ---- kernel structure (what a dialect overrides)
  def param(self, g: UOp, written: bool) -> str:
    return f"{'' if written else 'const '}{self.ctype(g.dtype)}* {self.pointer_qualifier} data{g.arg}"
  def extra_params(self, k: CKernel) -> list[str]: return []
  def loop_bounds(self, k: CKernel, u: UOp) -> tuple[str, str]: return "0", k.r(u.src[0])
  def kernel_prelude(self, k: CKernel) -> str: return self.prelude + self.fp8_prelude(k)
  def render_kernel(self, k: CKernel, name: str, params: list[str]) -> str:
    return self.kernel_prelude(k) + f"{self.kernel_prefix}{name}({', '.join(params)}) {{\n" + "\n".join(k.lines) + "\n}\n"
  def render_loop(self, k: CKernel, u: UOp) -> bool:
    """Render RANGE u some special way (then the loop body is done too and True is returned), or return False."""
    return False
  def render_acc(self, k: CKernel, u: UOp) -> bool:
    """Define accumulator u some special way (vector registers) and return True, or return False."""
    return False
  def render_load(self, k: CKernel, u: UOp) -> bool:
    """Render LOAD u some special way (a lane of a vector load) and return True, or return False."""
    return False
  def prepare(self, k: CKernel) -> None:
    """Look over the whole kernel before the walk (which loops become vector code, which one threads split)."""
  # a GPU dialect's thread indices, shared memory and barriers (codegen/gpu.py); a CPU has none
  def render_special(self, k: CKernel, u: UOp) -> None: self._no_gpu(u)
  def render_local(self, k: CKernel, u: UOp) -> None: self._no_gpu(u)
  def render_barrier(self, k: CKernel, u: UOp) -> None: self._no_gpu(u)
  def _no_gpu(self, u: UOp):
    raise NotImplementedError(f"{type(self).__name__} has no thread indices, shared memory or barriers ({u.op}): the kernel was lowered for a GPU")

  def render(self, uops: list[UOp]) -> ProgramSpec:
    k = CKernel(self, uops)
    self.prepare(k)
    k.walk()
    name, shape = kernel_name(uops)
    written = {u.src[0].arg for u in uops if u.op is Ops.STORE}
    gl = sorted((u for u in uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
    params = [self.param(g, g.arg in written) for g in gl] + [f"{self.ctype(v.dtype)} {v.arg[0]}" for v in k.vars] + self.extra_params(k)
    flops, mem = estimate(uops)
    return ProgramSpec(name, self.render_kernel(k, name, params), uops, [(g.arg, g.arg in written) for g in gl], k.vars, flops, mem, shape,
                       k.parallel is not None)

class CKernel:
  """The state of rendering one kernel: a C name for each rendered UOp, the lines so far, the indentation."""
  def __init__(self, renderer: CStyleRenderer, uops: list[UOp]):
    self.renderer, self.uops = renderer, uops
    self.names: dict[UOp, str] = {}
    self.lines: list[str] = []
    self.vars: list[UOp] = []
    self.depth, self.counter = 1, 0
    self.accs = {u.arg: u for u in uops if u.op is Ops.DEFINE_ACC}
    self.parallel: UOp | None = None  # the loop split across threads, if the renderer splits one
    # SIMD (ClangRenderer.prepare): tile loops -> vector widths, innermost loops -> width, vector accumulators -> widths
    self.vloops: dict[UOp, tuple[int, ...]] = {}
    self.vinner: dict[UOp, tuple[int, ...]] = {}
    self.vec_accs: dict[UOp, tuple[int, ...]] = {}
    self.prefetch: dict[UOp, int] = {}  # load -> elements ahead to prefetch (ClangRenderer.prepare: next_row_prefetches)
    self.bounded: dict[UOp, tuple[UOp, list, list]] = {}  # loop -> (its SKIP, the ranges its test allows) (ClangRenderer.prepare: bounded_loops)
    self.peeled: dict[UOp, dict[UOp, str]] = {}  # loop -> tests constant in its middle iterations (peeled_loops)
    self.folded: dict[UOp, str] = {}  # while rendering a peeled loop's middle iterations: its tests
  def r(self, u: UOp) -> str: return self.names[u] if u in self.names else self.renderer.render_const(u.arg, u.dtype)
  def emit(self, s: str): self.lines.append("  " * self.depth + s)
  def emit_prefetch(self, buf: UOp, index: str, ahead: int):
    # address arithmetic on integers: the last row's prefetch points past the buffer (harmless, it never faults)
    self.emit(f"__builtin_prefetch((const void*)((unsigned long long)({self.r(buf)}+{index})+{ahead * buf.dtype.itemsize}ull));")
  def new_name(self, prefix: str = "v") -> str:
    self.counter += 1
    return f"{prefix}{self.counter - 1}"
  def open_loop(self, u: UOp, lo: str, hi: str) -> str:
    """`for (...) {` over RANGE u from lo to hi; returns the loop variable's name."""
    # numbered by appearance: the same kernel gives the same source (and hits the compile cache)
    self.names[u] = name = f"ridx{sum(1 for x in self.names if x.op is Ops.RANGE)}"
    self.emit(f"for ({self.renderer.ctype(u.dtype)} {name} = {lo}; {name} < {hi}; {name}++) {{")
    self.depth += 1
    return name
  def close_loop(self):
    self.depth -= 1
    self.emit("}")

  def walk(self, uops: list[UOp] | None = None):
    R, skip_until = self.renderer, None
    for u in self.uops if uops is None else uops:
      if skip_until is not None:  # the body of a loop the renderer rendered itself
        if u.op is Ops.ENDRANGE and u.src[0] is skip_until: skip_until = None
        continue
      if u in self.folded: continue  # a test that a peeled loop's middle iterations pass (ClangRenderer.render_loop)
      if u.op is Ops.RANGE and R.render_loop(self, u): skip_until = u
      elif u.op is Ops.DEFINE_ACC and R.render_acc(self, u): pass
      elif u.op in STATEMENTS: STATEMENTS[u.op](self, u)
      else: self.value(u)

  def value(self, u: UOp):
    R = self.renderer
    if u.op is Ops.LOAD and R.render_load(self, u): return
    if u.op is Ops.LOAD:
      expr = f"{self.r(u.src[0])}[{self.r(u.src[1])}]"
      if u in self.prefetch: self.emit_prefetch(u.src[0], self.r(u.src[1]), self.prefetch[u])
      if len(u.src) == 3: expr = f"({self.r(u.src[2])}?{expr}:{R.render_const(0, u.dtype)})"
    elif u.op is Ops.CAST: expr = R.render_cast(self.r(u.src[0]), u.src[0].dtype, u.dtype)
    elif u.op is Ops.BITCAST: expr = R.render_bitcast(self.r(u.src[0]), u.src[0].dtype, u.dtype)
    elif u.op in GroupOp.ALU:
      cdiv = u.src[1].arg if u.op in (Ops.IDIV, Ops.MOD) and u.src[1].op is Ops.CONST else None
      expr = R.render_alu(u.op, u.dtype, [self.r(s) for s in u.src], u.src[-1].dtype if u.op is Ops.WHERE else u.src[0].dtype, cdiv)
    else: raise NotImplementedError(f"{type(R).__name__} has no rule for {u.op}")
    self.names[u] = self.new_name()
    self.emit(f"{R.ctype(u.dtype)} {self.names[u]} = {expr};")

def _define_global(k: CKernel, u: UOp): k.names[u] = f"data{u.arg}"
def _define_var(k: CKernel, u: UOp):
  k.names[u] = u.arg[0]
  k.vars.append(u)
def _range(k: CKernel, u: UOp): k.open_loop(u, *k.renderer.loop_bounds(k, u))
def _endrange(k: CKernel, u: UOp): k.close_loop()
def _store(k: CKernel, u: UOp):  # STORE(buffer, index, value[, gate])
  k.emit(("" if len(u.src) < 4 else f"if ({k.r(u.src[3])}) ") + f"{k.r(u.src[0])}[{k.r(u.src[1])}] = {k.r(u.src[2])};")
def _stage(k: CKernel, u: UOp):
  k.names[u] = k.new_name("stage")
  k.emit(f"{k.renderer.ctype(u.dtype)} {k.names[u]}[{u.arg}] __attribute__((aligned(64)));")
def _define_acc(k: CKernel, u: UOp):
  k.names[u] = name = k.new_name("acc")
  t = k.renderer.ctype(u.dtype)
  if isinstance(u.arg.arg, tuple):  # an accumulator array over a tile loop
    n = u.arg.src[-1].src[0].arg
    k.emit(f"{t} {name}[{n}];")
    k.emit(f"for (int i = 0; i < {n}; i++) {name}[i] = {k.r(u.src[0])};")
  else: k.emit(f"{t} {name} = {k.r(u.src[0])};")
def _acc_update(k: CKernel, u: UOp):
  acc = k.r(u.src[0]) + (f"[{k.r(u.src[2])}]" if len(u.src) == 3 else "")
  k.emit(f"{acc} = {k.renderer.render_alu(u.arg, u.dtype, [acc, k.r(u.src[1])], u.dtype)};")
def _skip(k: CKernel, u: UOp):  # SKIP(test, loop)
  if k.bounded.get(u.src[1], (None,))[0] is not u: return k.emit(f"if (!{k.r(u.src[0])}) continue;")
  # the loop's bounds keep the test true: where it gates a load, the load is plain (with AVX2 a broadcast from memory)
  for c in conjuncts(u.src[0]): k.names[c] = "1"
def _reduce(k: CKernel, u: UOp):
  acc = k.names[k.accs[u]]
  if isinstance(u.arg, tuple):
    k.names[u] = k.new_name()
    k.emit(f"{k.renderer.ctype(u.dtype)} {k.names[u]} = {acc}[{k.r(u.arg[1])}];")
  else: k.names[u] = acc

# one rule per statement kind; every other UOp is a value (CKernel.value)
STATEMENTS = {Ops.DEFINE_GLOBAL: _define_global, Ops.DEFINE_VAR: _define_var, Ops.CONST: lambda k, u: None, Ops.RANGE: _range,
              Ops.ENDRANGE: _endrange, Ops.STORE: _store, Ops.STAGE: _stage, Ops.DEFINE_ACC: _define_acc, Ops.ACC_UPDATE: _acc_update,
              Ops.REDUCE: _reduce, Ops.SKIP: _skip, Ops.SPECIAL: lambda k, u: k.renderer.render_special(k, u),
              Ops.DEFINE_LOCAL: lambda k, u: k.renderer.render_local(k, u), Ops.BARRIER: lambda k, u: k.renderer.render_barrier(k, u)}

def peeled_loops(uops: list[UOp], vector: set[UOp], bounded: dict[UOp, tuple[UOp, list, list]]) -> dict[UOp, dict[UOp, str]]:
  """Output loops of n iterations whose middle ones (1 ... n-2) pass a bounds test of a gated load that the first or
  last fails (a padded conv's tiles of columns reading its input in place): loop -> the tests (bool nodes of its body)
  that are constant in the middle iterations, as C constants. The renderer writes such a loop three times: the first
  iteration, the middle ones with those tests folded away (their loads are plain: AVX2 broadcasts them from memory;
  a 64-channel 3x3 conv read in place 8.1 -> 7.3-7.4 ms), and the last. Not peeled: loops inside a peeled one; not
  folded: tests that a bounded loop keeps true, and tests computed inside a vector loop. vector: the loops rendered as
  vectors, and the threads' loop."""
  out: dict[UOp, dict[UOp, str]] = {}
  bounded_skips = {skip for skip, _, _ in bounded.values()}
  inside: UOp | None = None  # the peeled loop whose body this is
  for u in uops:
    if u.op is Ops.ENDRANGE and u.src[0] is inside: inside = None
    if u.op is not Ops.RANGE or inside is not None or u in vector or u.src[0].op is not Ops.CONST or u.src[0].arg < 3: continue
    body = loop_body(uops, u)
    if not any(x.op is Ops.STORE for x in body): continue  # a reduce loop (a conv's taps): too short to pay for a copy
    vector_bodies = {x for v in body if v in vector for x in loop_body(uops, v)}
    kept = {c for x in body if x in bounded_skips for c in conjuncts(x.src[0])}
    tests = {c for x in body if x.op is Ops.LOAD and len(x.src) == 3 for c in conjuncts(x.src[2])} - kept
    middle = UOp(Ops.DEFINE_VAR, u.dtype, (), ("peel", 1, u.src[0].arg - 2))
    moves = {u}  # the body's values that depend on u (uops are in dependency order)
    folded: dict[UOp, str] = {}
    for x in body:
      if not any(s in moves for s in x.src): continue
      moves.add(x)
      if x.dtype == dtypes.bool and x.op is not Ops.LOAD and x not in vector_bodies and x not in kept:
        lo, hi = x.substitute({u: middle}).vmin_vmax
        if lo == hi: folded[x] = "1" if lo else "0"
    if any(t in folded for t in tests): out[u], inside = folded, u
  return out

PURE = GroupOp.ALU | {Ops.CONST, Ops.CAST, Ops.BITCAST, Ops.LOAD}

def bounded_loops(uops: list[UOp], vector: set[UOp]) -> dict[UOp, tuple[UOp, list, list]]:
  """Loops with a SKIP whose test is a range of the loop's index (a padded conv's tap rows inside the image: i + row
  >= 1, i + row < 57), with only values computed before it in the iteration: loop -> (that SKIP, lower bounds, upper
  bounds), each bound a (constant, terms) pair meaning constant - sum(coefficient * node) for nodes computed outside the
  loop. The renderer makes those the loop's bounds and drops that test (AVX2's 3x3 conv read in place: its `continue`
  kept gcc from scheduling the taps together, 8.1 -> 7.3 ms); the loop's other SKIPs (a strided transposed conv's
  zeros between pixels) stay."""
  out: dict[UOp, tuple[UOp, list, list]] = {}
  where = {u: i for i, u in enumerate(uops)}
  for u in uops:
    if u.op is not Ops.SKIP or (r := u.src[1]) in vector or r in out or r.src[0].op is not Ops.CONST: continue
    if any(x.op not in PURE for x in uops[where[r] + 1:where[u]]): continue
    bounds: tuple[list, list] = ([(0, [])], [(r.src[0].arg, [])])
    for c in conjuncts(u.src[0]):
      if c.op is Ops.AND: continue
      lower = c.op is Ops.CMPEQ and c.src[0].op is Ops.CMPLT and c.src[1].op is Ops.CONST and c.src[1].arg is False
      cmp = c.src[0] if lower else c
      if cmp.op is not Ops.CMPLT or cmp.src[1].op is not Ops.CONST: break
      terms = _terms(cmp.src[0])
      rest = [(n, m) for n, m in terms if n is not r]
      if (r, 1) not in terms or len(rest) != len(terms) - 1 or any(n is not None and where.get(n, len(uops)) > where[r] for n, _ in rest): break
      bounds[0 if lower else 1].append((cmp.src[1].arg - sum(m for n, m in rest if n is None), [(n, m) for n, m in rest if n is not None]))
    else: out[r] = (u, *bounds)
  return out

PREFETCH_ROW_BYTES = 16384  # a row prefetched a whole pass ahead must still be in L1/L2 when the next row is read

def next_row_prefetches(uops: list[UOp], rows: UOp) -> dict[UOp, int]:
  """Loads that read a row of a buffer again, in a later pass over the row than the one that first read it: each is
  to prefetch the same element of the next row. A row kernel (softmax, log_softmax, layernorm) reads its row from
  memory in its first pass and from cache in the others, which compute (exp): without this, memory idles while
  they run (softmax 4096x1024: 1.20 -> 0.97 ms on an AVX-512 Xeon)."""
  out: dict[UOp, int] = {}
  first_pass: dict[tuple, UOp] = {}  # (buffer, row stride) -> the innermost loop that read it first
  loops: list[UOp] = []
  for u in uops:
    if u.op is Ops.RANGE: loops.append(u)
    elif u.op is Ops.ENDRANGE: loops.pop()
    elif u.op is Ops.LOAD and u.src[0].op is Ops.DEFINE_GLOBAL and loops and loops[-1] is not rows:
      stride = sum(c for n, c in _terms(u.src[1]) if n is rows)
      if not 0 < stride * u.dtype.itemsize <= PREFETCH_ROW_BYTES: continue
      if first_pass.setdefault((u.src[0], stride), loops[-1]) is not loops[-1]: out[u] = stride
  return out

class ClangRenderer(CStyleRenderer):
  """C for a CPU: loops whose values are float32 become SIMD vector code (renderer/cvector.py), and the outermost
  output loop is split across the threads that call the kernel (core_id of n_cores). simd_width 0 renders plain C."""
  vector_math_lib: bool = False  # glibc's libmvec is linked: exp/log/sin/... of a whole vector are one call
  @property
  def vector_math(self) -> frozenset[Ops]: return frozenset(VECTOR_MATH) if self.vector_math_lib else frozenset()

  @property
  def masked_tails(self) -> bool:
    """Can a tile's last, partly used vector be one masked vector (renderer/cvector.py vector_loops)? With AVX (vmaskmovps)
    and AVX-512 (masked vmovups) a masked load is one instruction, and a tail's constant mask makes its store plain
    stores of the used lanes."""
    return self.simd_width >= 8
  def extra_params(self, k: CKernel) -> list[str]: return ["int core_id", "int n_cores"]
  def kernel_prelude(self, k: CKernel) -> str:
    widths = {w for loops in (k.vloops, k.vinner) for ws in loops.values() for w in ws}
    return self.prelude + self.fp8_prelude(k) + "".join(vector_prelude(w, bool(self.vector_math)) for w in sorted(widths))

  def prepare(self, k: CKernel) -> None:
    uops, width = k.uops, 0 if NOOPT else self.simd_width  # NOOPT: plain scalar C
    k.vloops = vector_loops(uops, width, self.half_loads, self.masked_tails)
    k.vinner = inner_vector_loops(uops, width, set(k.vloops), self.half_loads)
    # acc -> its vectors' widths
    k.vec_accs = {u.src[0]: k.vloops[u.src[2]] for u in uops if u.op is Ops.ACC_UPDATE and len(u.src) == 3 and u.src[2] in k.vloops}
    # only an output loop at the top level can be split across threads (a reduce loop would race on its accumulator)
    first = next((u for u in uops if u.op in (Ops.RANGE, Ops.STORE, Ops.DEFINE_ACC)), None)
    if first is not None and first.op is Ops.RANGE and first.src[0].op is Ops.CONST and first.src[0].arg > 1: k.parallel = first
    if k.parallel is not None and not NOOPT: k.prefetch = next_row_prefetches(uops, k.parallel)
    if not NOOPT:
      vector = set(k.vloops) | set(k.vinner)
      k.bounded = bounded_loops(uops, vector)
      k.peeled = peeled_loops(uops, vector | {k.parallel}, k.bounded)

  def loop_bounds(self, k: CKernel, u: UOp) -> tuple[str, str]:
    if u in k.bounded:  # the range its SKIP's test allows: the largest lower bound, the smallest upper one
      t = self.ctype(u.dtype)
      def bound(b) -> str: return f"({b[0]}" + "".join(f"-{k.r(n)}" if m == 1 else f"-({t}){m}*{k.r(n)}" for n, m in b[1]) + ")"
      def fold(bs, cmp: str) -> str:  # the max (cmp ">") or min ("<") of the bounds
        e = bound(bs[0])
        for b in map(bound, bs[1:]): e = f"({e}{cmp}{b}?{e}:{b})"
        return e
      _, lo, hi = k.bounded[u]
      return fold(lo, ">"), fold(hi, "<")
    if u is not k.parallel: return super().loop_bounds(k, u)
    # the outermost loop is split evenly across the threads that call this kernel
    n, t = u.src[0].arg, self.ctype(u.dtype)
    return f"(({t})((long long)core_id*{n}/n_cores))", f"(({t})((long long)(core_id+1)*{n}/n_cores))"

  def render_loop(self, k: CKernel, u: UOp) -> bool:
    if u in k.peeled:  # the first iteration as it is, the middle ones with their bounds tests folded, then the last
      body, names, n = loop_body(k.uops, u), dict(k.names), u.src[0].arg
      for lo, hi, folded in ((0, 1, {}), (1, n - 1, k.peeled[u]), (n - 1, n, {})):
        k.open_loop(u, str(lo), str(hi))
        k.names.update(folded)
        k.folded = folded
        k.walk(body)
        k.names.clear()
        k.names.update(names)
        k.close_loop()
      k.folded = {}
      return True
    if u in k.vloops:  # a tile loop of accumulator arrays: straight-line vector code
      VectorLoop(k, u).render(k.vloops[u])
      return True
    if u not in k.vinner: return False
    # a loop over vectors of lanes, then the lanes left over as shorter vectors (by the last thread, if threads split it)
    w, *tail = k.vinner[u]
    n = u.src[0].arg // w
    name = k.open_loop(u, *((f"core_id*{n}ll/n_cores", f"(core_id+1)*{n}ll/n_cores") if u is k.parallel else ("0", str(n))))  # threads split the vectors
    VectorLoop(k, u).render_vector(f"{name}*{w}", w)
    k.close_loop()
    if tail:
      if u is k.parallel: k.emit("if (core_id == n_cores-1) {")
      VectorLoop(k, u).render(tuple(tail), n * w)
      if u is k.parallel: k.emit("}")
    return True

  def render_acc(self, k: CKernel, u: UOp) -> bool:
    if u not in k.vec_accs: return False
    k.names[u] = name = k.new_name("acc")
    k.emit(" ".join(f"f32x{w} {name}_{g} = bcast_f32x{w}({k.r(u.src[0])});" for g, w in enumerate(k.vec_accs[u])))
    return True
