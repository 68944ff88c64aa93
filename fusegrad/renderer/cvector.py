"""SIMD code for the C renderer: a tile loop of an accumulator array (codegen/opt.py VECTOR and LANES) becomes
straight-line code over GCC/clang vector types: the tile is cut into vectors of the widest width that fits, so a tile
of 14 is 8 + 4 + 2 lanes on an AVX-512 machine (16 float32 lanes), 56 is 16 + 16 + 16 + 8.

Inside the loop every node is one of three kinds:
  "v": a float32 vector (f32xW);
  "m": a mask vector (i32xW, -1 or 0 per lane) from comparing float vectors;
  "l": a per-lane scalar (ints, index math, bools from them), rendered lazily lane by lane, so index math that only
       feeds a contiguous load costs one scalar for lane 0 (the C compiler drops lanes nobody reads).
A load whose index moves by a constant step per lane is one vector load (step 1) or a gather of constant offsets;
any other index, or a gate that differs per lane, is gathered lane by lane. Float ops with no vector form are applied
lane by lane, so every float32 kernel body can vectorize; other float dtypes keep the scalar loop."""
from __future__ import annotations
import string
from typing import Callable
from fusegrad.dtype import dtypes
from fusegrad.uop.ops import GroupOp, Ops, UOp
from fusegrad.uop.symbolic import _terms

VECTOR_ALU = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/"}
MASK_OPS = {Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "=="}
# glibc's vector math (libmvec) by the x86 vector ABI's names: _ZGV<isa>N<lanes>v_<function>
VECTOR_MATH = {Ops.EXP: "exp", Ops.LOG: "log", Ops.SIN: "sin", Ops.COS: "cos", Ops.EXP2: "exp2", Ops.LOG2: "log2",
               Ops.TAN: "tan", Ops.TANH: "tanh", Ops.ERF: "erf"}
MVEC_ISA = {4: "b", 8: "d", 16: "e"}
SMALL_INTS = {dtypes.int8: "i8", dtypes.uint8: "u8", dtypes.int16: "i16"}  # their vector types (PRELUDE)

# aligned(4) makes a pointer cast an unaligned load (f32x<W>a: an aligned one). max keeps a NaN of either side, like
# torch.maximum, and where selects, both with bitwise masks (C has no vector ?:).
PRELUDE = string.Template("""typedef float f32x$w __attribute__((vector_size($b), aligned(4)));
typedef _Float16 f16x$w __attribute__((vector_size($h), aligned(2)));
typedef float f32x${w}a __attribute__((vector_size($b)));
typedef int i32x$w __attribute__((vector_size($b), aligned(4)));
typedef short i16x$w __attribute__((vector_size($h), aligned(2)));
typedef char c8v$w __attribute__((vector_size(16), aligned(1)));
typedef long long q64v$w __attribute__((vector_size(16)));
static inline f32x$w where_f32x$w(i32x$w m, f32x$w a, f32x$w b) { return (f32x$w)(((i32x$w)a & m) | ((i32x$w)b & ~m)); }
static inline f32x$w max_f32x$w(f32x$w a, f32x$w b) { return where_f32x$w((a != a) | (a > b), a, b); }
static inline f32x$w fma_f32x$w(f32x$w a, f32x$w b, f32x$w c) { return $fma; }
static inline f32x$w bcast_f32x$w(float x) { return (f32x$w){$lanes}; }
static inline f32x$w ldh_f32x$w(const _Float16* p) { return $half; }
static inline f32x$w mld_f32x$w(const float* p, i32x$w m) { return $masked; }
static inline void mst_f32x$w(float* p, f32x$w v, i32x$w m) { $mstore; }
static inline i16x$w sth_f32x$w(f32x$w x) { return $hstore; }
static inline f32x$w round_f32x$w(f32x$w x, const int mode) { return $round; }
static inline f32x$w ldi8_f32x$w(const signed char* p) { return $i8; }
static inline f32x$w ldu8_f32x$w(const unsigned char* p) { return $u8; }
static inline f32x$w ldi16_f32x$w(const short* p) { return $i16; }
static inline f32x$w ld2_f32x$w(const float* p) { $every_other }
static inline float hsum_f32x$w(f32x$w v) { $hsum }
static inline float hmax_f32x$w(f32x$w v) { $hmax }
""")
# One x86 instruction where the CPU has it (the kernels are built with -march=..., which defines these macros), else
# the generic vector expression: width -> (macro, gcc builtin, intrinsic). gcc gets the builtin its own intrinsic
# wraps: parsing <immintrin.h> took 0.2 of the 0.3 s that gcc spent on a typical kernel. clang includes the header.
# a*b+c with one rounding (explicit, as the kernels are built with -ffp-contract=off)
FMA = {16: ("__AVX512F__", "(f32x16)__builtin_ia32_vfmaddps512_mask((f32x16a)a, (f32x16a)b, (f32x16a)c, (unsigned short)-1, 4)",
            "(f32x16)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c)"),
       8: ("__FMA__", "(f32x8)__builtin_ia32_vfmaddps256((f32x8a)a, (f32x8a)b, (f32x8a)c)", "(f32x8)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c)"),
       4: ("__FMA__", "(f32x4)__builtin_ia32_vfmaddps((f32x4a)a, (f32x4a)b, (f32x4a)c)", "(f32x4)_mm_fmadd_ps((__m128)a, (__m128)b, (__m128)c)")}
# float16 -> float32 on load (gcc 12 converts a generic vector lane by lane)
HALF = {16: ("__AVX512F__", "(f32x16)__builtin_ia32_vcvtph2ps512_mask(*(const i16x16*)p, (f32x16a){}, (unsigned short)-1, 4)",
             "(f32x16)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p))"),
        8: ("__F16C__", "(f32x8)__builtin_ia32_vcvtph2ps256(*(const i16x8*)p)", "(f32x8)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p))"),
        4: ("__F16C__", "(f32x4)__builtin_ia32_vcvtph2ps((short __attribute__((vector_size(16)))){((const short*)p)[0], ((const short*)p)[1], ((const short*)p)[2], ((const short*)p)[3]})",
            "(f32x4)_mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)p))")}

# a gated contiguous load: lanes whose gate is off read nothing (the hardware suppresses their faults) and give 0
MASKED = {16: ("__AVX512F__", "(f32x16)__builtin_ia32_loadups512_mask(p, (f32x16a){}, __builtin_ia32_ptestmd512(m, m, (unsigned short)-1))",
               "(f32x16)_mm512_maskz_loadu_ps(_mm512_test_epi32_mask((__m512i)m, (__m512i)m), p)"),
          8: ("__AVX__", "(f32x8)__builtin_ia32_maskloadps256((const f32x8a*)p, m)", "(f32x8)_mm256_maskload_ps(p, (__m256i)m)"),
          4: ("__AVX__", "(f32x4)__builtin_ia32_maskloadps((const f32x4a*)p, m)", "(f32x4)_mm_maskload_ps(p, (__m128i)m)")}

# a store of the lanes whose mask is on (a tile's last, partly used vector): the others' memory is not touched
MASKED_STORE = {16: ("__AVX512F__", "__builtin_ia32_storeups512_mask(p, (f32x16a)v, __builtin_ia32_ptestmd512(m, m, (unsigned short)-1))",
                     "_mm512_mask_storeu_ps(p, _mm512_test_epi32_mask((__m512i)m, (__m512i)m), (__m512)v)")}

# 8- and 16-bit ints -> float32 on load (quantized weights): a widening load and a conversion (gcc 12 converts a
# generic vector lane by lane); the AVX2 forms load only the 8 or 16 bytes they use
def _widen(op: str, intr: str, bits: int) -> dict[int, tuple[str, str, str]]:
  if bits == 8: full, half, full_intr, half_intr = "*(const c8v16*)p", _LOAD8, "_mm_loadu_si128", "_mm_loadl_epi64"
  else: full, half, full_intr, half_intr = "*(const i16x16*)p", "*(const i16x8*)p", "_mm256_loadu_si256", "_mm_loadu_si128"
  return {16: ("__AVX512F__", f"__builtin_convertvector(__builtin_ia32_{op}512_mask({full}, (i32x16){{}}, (unsigned short)-1), f32x16)",
               f"(f32x16)_mm512_cvtepi32_ps(_mm512_{intr}({full_intr}((const void*)p)))"),
          8: ("__AVX2__", f"__builtin_convertvector(__builtin_ia32_{op}256({half}), f32x8)",
              f"(f32x8)_mm256_cvtepi32_ps(_mm256_{intr}({half_intr}((const void*)p)))")}
_LOAD8 = "({ long long q; __builtin_memcpy(&q, p, 8); (c8v8)(q64v8){q, 0}; })"  # 8 bytes into a 16-byte vector
WIDEN = {"i8": _widen("pmovsxbd", "cvtepi8_epi32", 8), "u8": _widen("pmovzxbd", "cvtepu8_epi32", 8), "i16": _widen("pmovsxwd", "cvtepi16_epi32", 16)}

# float32 -> float16 bits on store, rounding to nearest even as C's (_Float16) cast does (imm 0)
HALF_STORE = {16: ("__AVX512F__", "(i16x16)__builtin_ia32_vcvtps2ph512_mask((f32x16a)x, 0, (i16x16){}, (unsigned short)-1)",
                   "(i16x16)_mm512_cvtps_ph((__m512)x, 0)"),
              8: ("__F16C__", "(i16x8)__builtin_ia32_vcvtps2ph256((f32x8a)x, 0)", "(i16x8)_mm256_cvtps_ph((__m256)x, 0)")}
# floor, ceil, trunc, rint (to nearest even): one rounding instruction where the target has one; its mode is its imm8
# (0 nearest, 1 down, 2 up, 3 toward zero; +8 keeps the precision exception quiet)
ROUND = {16: ("__AVX512F__", "(f32x16)__builtin_ia32_rndscaleps_mask((f32x16a)x, mode | 8, (f32x16a)x, (unsigned short)-1, 4)",
              "(f32x16)_mm512_roundscale_ps((__m512)x, mode | 8)"),
         8: ("__AVX__", "(f32x8)__builtin_ia32_roundps256((f32x8a)x, mode | 8)", "(f32x8)_mm256_round_ps((__m256)x, mode | 8)"),
         4: ("__SSE4_1__", "(f32x4)__builtin_ia32_roundps((f32x4a)x, mode | 8)", "(f32x4)_mm_round_ps((__m128)x, mode | 8)")}
ROUND_MODE = {Ops.RINT: 0, Ops.FLOOR: 1, Ops.CEIL: 2, Ops.TRUNC: 3}
_ROUND_FN = {0: "rintf", 1: "floorf", 2: "ceilf", 3: "truncf"}

def _best(table: dict[int, tuple[str, str, str]], width: int, generic: str) -> str:
  if width not in table: return generic
  macro, builtin, intrinsic = table[width]
  return f"\n#if defined({macro}) && !defined(__clang__)\n  {builtin}\n#elif defined({macro})\n  {intrinsic}\n#else\n  {generic}\n#endif\n"

def _mvec(fn: str, width: int) -> str: return f"_ZGV{MVEC_ISA[width]}N{width}v_{fn}f"

def _horizontal(width: int, combine: Callable[[str], str]) -> str:
  """The body of hsum_f32x<width> or hmax_f32x<width> (combine: v and the rotated vector's C expression -> the step):
  the vector combined with itself rotated by half, a quarter, ... one lane, so that lane 0 holds the result (a shuffle
  and an op each step). A LANES kernel's accumulators were summed a lane at a time, 16 dependent scalar ops each."""
  steps = []
  k = width // 2
  while k:
    steps.append(f"v = {combine('ROT(v, ' + ', '.join(str((i + k) % width) for i in range(width)) + ')')};")
    k //= 2
  return ("\n#ifdef __clang__\n#define ROT(v, ...) __builtin_shufflevector(v, v, __VA_ARGS__)\n#else\n"
          f"#define ROT(v, ...) __builtin_shuffle(v, (i32x{width}){{__VA_ARGS__}})\n#endif\n  " + " ".join(steps) + " return v[0];\n#undef ROT\n")

def _every_other(width: int) -> str:
  """The body of ld2_f32x<width>: lanes p[0], p[2], ... p[2 * (width - 1)] (a stride-2 conv's row) as two vector loads
  and one shuffle, not one load per lane. The second load ends on the last element, so nothing past it is read."""
  picks = ", ".join(str(2 * i if i < width // 2 else 2 * i + 1) for i in range(width))
  return (f"f32x{width} a = *(const f32x{width}*)p, b = *(const f32x{width}*)(p + {width - 1});\n#ifdef __clang__\n  return __builtin_shufflevector(a, b, {picks});\n"
          f"#else\n  return __builtin_shuffle(a, b, (i32x{width}){{{picks}}});\n#endif\n")

def prelude(width: int, math: bool) -> str:
  intrinsics = "#if defined(__clang__) && (defined(__FMA__) || defined(__F16C__) || defined(__AVX512F__))\n#include <immintrin.h>\n#endif\n" if width in FMA else ""
  out = intrinsics + PRELUDE.substitute(w=width, b=4 * width, h=2 * width, lanes=", ".join(["x"] * width), fma=_best(FMA, width, "a*b+c"),
                                        half=_best(HALF, width, f"__builtin_convertvector(*(const f16x{width}*)p, f32x{width})"),
                                        masked=_best(MASKED, width, f"(f32x{width}){{" + ", ".join(f"m[{i}]?p[{i}]:0.0f" for i in range(width)) + "}"),
                                        mstore=_best(MASKED_STORE, width, " ".join(f"if (m[{i}]) p[{i}] = v[{i}];" for i in range(width))),
                                        **{k: _best(t, width, f"(f32x{width}){{" + ", ".join(f"p[{i}]" for i in range(width)) + "}") for k, t in WIDEN.items()},
                                        hstore=_best(HALF_STORE, width, f"(i16x{width})__builtin_convertvector(x, f16x{width})"), hsum=_horizontal(width, lambda r: f"v + {r}"), every_other=_every_other(width),
                                        hmax=_horizontal(width, lambda r: f"max_f32x{width}(v, {r})"),  # keeps a NaN
                                        round=_best(ROUND, width, "(mode == 0 ? (f32x{w}){{{r0}}} : mode == 1 ? (f32x{w}){{{r1}}} : mode == 2 ? (f32x{w}){{{r2}}} : (f32x{w}){{{r3}}})".format(
                                          w=width, **{f"r{m}": ", ".join(f"__builtin_{fn}(x[{i}])" for i in range(width)) for m, fn in _ROUND_FN.items()})))
  if not (math and width in MVEC_ISA): return out
  decls = "".join(f"f32x{width}a {_mvec(f, width)}(f32x{width}a);\n" for f in VECTOR_MATH.values())
  return out + decls + EXP.substitute(w=width, any=_best(ANY_ABOVE, width, " | ".join(f"!(a[{i}] <= b[{i}])" for i in range(width))))

# "some lane of a is above b, or NaN" (a compare and a mask test)
ANY_ABOVE = {16: ("__AVX512F__", "__builtin_ia32_cmpps512_mask((f32x16a)a, (f32x16a)b, 22, (unsigned short)-1, 4)",
                  "_mm512_cmp_ps_mask((__m512)a, (__m512)b, _CMP_NLE_UQ)"),
             8: ("__AVX__", "__builtin_ia32_movmskps256(__builtin_ia32_cmpps256((f32x8a)a, (f32x8a)b, 22))",
                 "_mm256_movemask_ps(_mm256_cmp_ps((__m256)a, (__m256)b, _CMP_NLE_UQ))"),
             4: ("__AVX__", "__builtin_ia32_movmskps(__builtin_ia32_cmpnleps((f32x4a)a, (f32x4a)b))", "_mm_movemask_ps(_mm_cmpnle_ps((__m128)a, (__m128)b))")}
# e^x in normal-float range (|x| <= 87), inline: x = k ln 2 + r with k = round(x / ln 2), e^r by its Taylor series to
# r^7 (|r| <= ln 2 / 2: the next term is under 1e-8), times 2^k built in the exponent bits. Every float in [-87, 87]
# comes out within 0.94 ulp of e^x with FMA, 1.22 without. It replaced libmvec's expf (a call per vector): 4.2-4.6 ->
# 3.3 ns a vector on an AVX-512 Xeon, 5.3-7.4 -> 5.0 under AVX2, and a softmax is mostly its exps.
# Lanes whose result is not a normal float (|x| above 87, or NaN; a masked softmax's -inf, wide logits) take
# exp_wide: shifted 40 into range (exactly: the result has x's exponent or a smaller one) and scaled back by e^-+40;
# NaN passes through; a vector of masked-out lanes is 0. The test costs about a cycle per vector.
EXP = string.Template("""static inline int any_above_f32x$w(f32x$w a, f32x$w b) { return $any; }
static inline f32x$w exp_normal_f32x$w(f32x$w x) {
  f32x$w t = fma_f32x$w(x, bcast_f32x$w(1.44269504088896341f), bcast_f32x$w(12582912.0f));  /* 1.5 * 2^23 + k */
  f32x$w k = t - 12582912.0f;
  f32x$w r = fma_f32x$w(k, bcast_f32x$w(-0.693359375f), x);  /* ln 2's first 9 bits: exact */
  r = fma_f32x$w(k, bcast_f32x$w(2.12194440e-4f), r);  /* and the rest */
  f32x$w p = fma_f32x$w(bcast_f32x$w(1.0f / 5040), r, bcast_f32x$w(1.0f / 720));
  p = fma_f32x$w(p, r, bcast_f32x$w(1.0f / 120)); p = fma_f32x$w(p, r, bcast_f32x$w(1.0f / 24)); p = fma_f32x$w(p, r, bcast_f32x$w(1.0f / 6));
  p = fma_f32x$w(p, r, bcast_f32x$w(0.5f)); p = fma_f32x$w(p, r, bcast_f32x$w(1.0f)); p = fma_f32x$w(p, r, bcast_f32x$w(1.0f));
  return p * (f32x$w)(((i32x$w)t - (0x4B400000 - 127)) << 23);
}
static __attribute__((noinline)) f32x$w exp_wide_f32x$w(f32x$w x) {
  if (!any_above_f32x$w(x, bcast_f32x$w(-104.0f))) return bcast_f32x$w(0.0f);  /* all masked out: e^x rounds to 0 */
  i32x$w lo = x < -87.0f, hi = x > 87.0f, nan = x != x;
  f32x$w t = where_f32x$w(lo, max_f32x$w(x, bcast_f32x$w(-120.0f)) + 40.0f, where_f32x$w(hi, where_f32x$w(x > 120.0f, bcast_f32x$w(120.0f), x) - 40.0f, where_f32x$w(nan, bcast_f32x$w(0.0f), x)));
  f32x$w y = exp_normal_f32x$w(t);
  return where_f32x$w(lo, y * 4.248354255291589e-18f, where_f32x$w(hi, y * 2.3538526683702e17f, where_f32x$w(nan, x, y)));
}
static inline f32x$w exp_f32x$w(f32x$w x) {
  return __builtin_expect(any_above_f32x$w((f32x$w)((i32x$w)x & 0x7fffffff), bcast_f32x$w(87.0f)), 0) ? exp_wide_f32x$w(x) : exp_normal_f32x$w(x);
}
""")

def vector_step(idx: UOp, lane: UOp, width: int) -> int | None:
  """How much idx moves from lane to lane within one vector (lanes b ... b+width-1, b a multiple of width), or None if
  not by a constant. Besides c*lane terms, a term (x + lane) // d or (x + lane) % d, with x >= 0 a multiple of width and
  d of width, cannot wrap inside a vector: // moves by 0 and % by 1. So a block's scale is one broadcast load and the
  bytes of a regrouped row one vector load (quantized weights), where they would otherwise be read lane by lane."""
  step = 0
  for n, c in _terms(idx):
    if n is lane: step += c
    elif n is None or lane not in n.toposort(): continue
    elif not _cannot_wrap(n, lane, width): return None
    else: step += c if n.op is Ops.MOD else 0
  return step

def _cannot_wrap(n: UOp, lane: UOp, width: int) -> bool:
  """n is (x + lane) // d or (x + lane) % d with d a multiple of width and x >= 0 one in every vector: x's terms are
  multiples of width, or themselves such a % (which is x' + lane again: a 4-bit weight's nibble, (i % 32) // 16)."""
  if n.op not in (Ops.IDIV, Ops.MOD) or n.src[1].op is not Ops.CONST or n.src[1].arg % width or n.src[0].vmin < 0: return False
  lanes = 0
  for m, k in _terms(n.src[0]):
    while m is not None and _keeps_value(m): m = m.src[0]  # (int)i is i
    if m is lane or (m is not None and m.op is Ops.MOD and lane in m.toposort() and _cannot_wrap(m, lane, width)): lanes += k
    elif k % width or (m is not None and lane in m.toposort()): return False
  return lanes == 1

def loop_body(uops: list[UOp], rng: UOp) -> list[UOp]:
  start = uops.index(rng)
  end = next(i for i in range(start, len(uops)) if uops[i].op is Ops.ENDRANGE and uops[i].src[0] is rng)
  return uops[start + 1:end]

# (bfloat16 and fp8 values are neither lanes nor vectors: a loop that loads, computes or stores one stays scalar C)
def _is_lane(d) -> bool: return dtypes.is_int(d) or d == dtypes.bool

def kinds(body: list[UOp], lane: UOp, half: bool = False) -> dict[UOp, str] | None:
  """The kind of each value in the loop ("v", "m", "l"), or None if the loop cannot run as vectors. half: float16 loads
  convert to float32 vectors in one instruction on this target (F16C, AVX-512, NEON); without it they stay scalar."""
  f32, inside = dtypes.float32, set(body) | {lane}
  out: dict[UOp, str] = {lane: "l"}
  def k(s: UOp) -> str | None: return out.get(s) if s in inside else None  # None: a scalar from outside the loop
  for u in body:
    if u.op is Ops.STORE:  # float32 vectors, or float16 ones converted as they are stored ("h")
      if u.src[2].dtype != f32 and out.get(u.src[2]) != "h": return None
      continue
    if u.op is Ops.SKIP: continue  # a lane's own condition: the vector computes every lane
    if u.op is Ops.ACC_UPDATE:
      if u.dtype != f32 or u.arg not in (Ops.ADD, Ops.MUL, Ops.MAX) or (len(u.src) == 3 and u.src[2] is not lane): return None
      continue
    if u.op is Ops.REDUCE:
      if u.dtype != f32 or not isinstance(u.arg, tuple) or u.arg[1] is not lane: return None
      out[u] = "v"
      continue
    srcs = [k(s) for s in u.src]
    # a float16 load is converted to a float32 vector as it is loaded (the kernel computes half math in float32 anyway)
    if u.op is Ops.LOAD: kind = "v" if u.dtype == f32 or (half and u.dtype == dtypes.float16) else "l" if _is_lane(u.dtype) else None
    elif u.dtype == f32: kind = "v" if u.op in GroupOp.ALU or (u.op is Ops.CAST and (_is_lane(u.src[0].dtype) or srcs[0] == "v")) else None
    # a padded half read selects converted values; a value cast to float16 in the loop is bits ("h"), not one of them
    elif half and u.dtype == dtypes.float16 and u.op is Ops.WHERE: kind = "v" if "h" not in srcs else None
    elif half and u.dtype == dtypes.float16 and u.op is Ops.CAST and srcs[0] == "v": kind = "h"  # float16 bits, only stored
    elif u.op in MASK_OPS and u.src[0].dtype == f32: kind = "m"
    elif u.dtype == dtypes.bool and u.op in (Ops.AND, Ops.OR, Ops.XOR, Ops.CMPNE, Ops.CMPEQ): kind = "m" if "m" in srcs else "l"
    elif _is_lane(u.dtype) and u.op in GroupOp.ALU | {Ops.CAST}: kind = "l" if "v" not in srcs and "m" not in srcs else None
    else: kind = None
    if kind is None: return None
    out[u] = kind
  return out

def vector_widths(rng: UOp, simd_width: int) -> tuple[int, ...]:
  """How a loop runs as vectors: (w, *tail). Each iteration takes w lanes, then the tail's vectors take the lanes left
  over (tile_widths), so a padded conv row of 58 is 7 x 8 + 2 rather than 29 x 2. w is simd_width if the rest can be
  such a tail, else the widest of simd_width/2, ... down to 2 lanes that divides the loop (() if none does)."""
  if rng.src[0].op is not Ops.CONST: return ()
  n = rng.src[0].arg
  if n > simd_width >= 2 and n % simd_width and (tail := tile_widths(n % simd_width, simd_width)): return (simd_width, *tail)
  return next(((w,) for w in (simd_width >> s for s in range(4)) if w >= 2 and n % w == 0), ())

def inner_vector_loops(uops: list[UOp], simd_width: int, skip: set[UOp], half: bool = False) -> dict[UOp, tuple[int, ...]]:
  """Innermost loops (no loop inside) that can run a vector of lanes per iteration (vector_widths): gcc leaves loops
  with a division in an index, a comparison or a select scalar, and those are common (pooling, relu and batchnorm
  backward)."""
  out = {}
  for u in uops:
    if u.op is not Ops.RANGE or u in skip or not (w := vector_widths(u, simd_width)): continue
    body = loop_body(uops, u)
    # accumulator arrays belong to tile loops: those vectorize together (vector_loops) or not at all
    arrays = any(b.op is Ops.REDUCE or (b.op is Ops.ACC_UPDATE and len(b.src) == 3) for b in body)
    if not arrays and all(b.op is not Ops.RANGE for b in body) and kinds(body, u, half) is not None: out[u] = w
  return out

def tile_widths(n: int, simd_width: int) -> tuple[int, ...]:
  """n lanes as vectors, widest first (simd_width, then halves down to 2): () if an odd lane would be left over."""
  out, w = [], simd_width
  while n:
    while w > n: w //= 2
    if w < 2: return ()
    out.append(w)
    n -= w
  return tuple(out)

def vector_loops(uops: list[UOp], simd_width: int, half: bool = False, masked_tail: bool = False) -> dict[UOp, tuple[int, ...]]:
  """The tile loops of accumulator arrays with their vector widths, when all of them can run as SIMD vectors: tile_widths,
  or with masked_tail (a target with one-instruction masked loads: AVX2, AVX-512) whole vectors, the last one partly
  used (its lanes past the tile masked), where the tile's remainder would take several narrower vectors or none (a
  14-wide tile on AVX-512: one vector, not 8 + 4 + 2; a 7-wide one: one, not scalar code)."""
  tiles = {u.src[2] for u in uops if u.op is Ops.ACC_UPDATE and len(u.src) == 3} | \
          {u.arg[1] for u in uops if u.op is Ops.REDUCE and isinstance(u.arg, tuple)}
  bodies = {t: loop_body(uops, t) for t in tiles}
  sizes = {t: t.src[0].arg if simd_width >= 2 and t.src[0].op is Ops.CONST else 0 for t in tiles}
  # every tile masked or none: an accumulator array's widths are those of each tile loop that reads or writes it
  masked_tail = masked_tail and all(_maskable(bodies[t], t, simd_width) for t in tiles)
  widths = {t: (simd_width,) * -(-n // simd_width) if masked_tail and n % simd_width and len(tile_widths(n % simd_width, simd_width)) != 1
            else tile_widths(n, simd_width) for t, n in sizes.items()}
  if not all(w and kinds(bodies[t], t, half) is not None for t, w in widths.items()): return {}
  return widths

def _maskable(body: list[UOp], lane: UOp, width: int) -> bool:
  """Can a vector of this tile loop run with its lanes past the tile masked off? Its loads and stores must be float32
  and contiguous or broadcast along the tile (a masked vector load or store; other loads would read the masked lanes'
  addresses one by one), and no accumulator may take the lanes together (the masked ones would join its sum)."""
  for u in body:
    if u.op is Ops.LOAD and (u.dtype != dtypes.float32 or vector_step(u.src[1], lane, width) not in (0, 1)): return False
    if u.op is Ops.STORE and (u.src[2].dtype != dtypes.float32 or vector_step(u.src[1], lane, width) != 1): return False
    if u.op is Ops.ACC_UPDATE and len(u.src) == 2: return False
  return True

def _fits_int32(x: UOp) -> bool: return dtypes.is_int(x.dtype) and -2**31 <= x.vmin and x.vmax < 2**31
def _keeps_value(u: UOp) -> bool:
  """u is a cast between int types of a value that fits in 32 bits and in u's type: it changes no lane's value (a
  narrowing cast that wraps, (i + 120) to int8, would step from 127 to -128 inside a vector)."""
  return u.op is Ops.CAST and dtypes.is_int(u.dtype) and _fits_int32(u.src[0]) and dtypes.min(u.dtype) <= u.src[0].vmin and u.src[0].vmax <= dtypes.max(u.dtype)

class VectorLoop:
  """Renders one loop of kernel k (renderer/cstyle.py CKernel) as vectors of lanes: names, emit and new_name are the
  kernel's; scalar ALU, casts and C types are its renderer's."""
  def __init__(self, k, lane: UOp):
    self.body, self.lane, self.math = loop_body(k.uops, lane), lane, k.renderer.vector_math
    self.names, self.r, self.emit, self.new_name = k.names, k.r, k.emit, k.new_name
    self.prefetch, self.emit_prefetch = k.prefetch, k.emit_prefetch
    self.scalar, self.cast, self.ctype = k.renderer.render_alu, k.renderer.render_cast, k.renderer.ctype
    self.kind, self.accs = kinds(self.body, lane, k.renderer.half_loads) or {}, k.accs

  def render(self, widths: tuple[int, ...], start: int = 0):
    """The whole tile (from lane `start`), unrolled: vector g covers the next widths[g] lanes (acc_g holds its
    accumulators); the last may reach past the tile (vector_loops' masked tail)."""
    for g, w in enumerate(widths):
      base = start + sum(widths[:g])
      self.render_vector(str(base), w, g, self.lane.src[0].arg - base)

  def render_vector(self, base: str, width: int, g: int = 0, valid: int | None = None):
    """One vector of the loop, for lanes base ... base+width-1 (base: a C expression), of which the first `valid` are
    the loop's (the others' loads and stores are masked off)."""
    self.base, self.lanes, self.w, self.vt, self.mt = base, {}, width, f"f32x{width}", f"i32x{width}"
    self.tail = None if valid is None or valid >= width else f"(({self.mt}){{{', '.join('-1' if i < valid else '0' for i in range(width))}}})"
    for u in self.body: self._node(u, g)

  # ---- operands
  def lane_val(self, u: UOp, i: int) -> str:
    """Lane i of u as a C scalar expression (emitting what it needs)."""
    if u is self.lane: return str(int(self.base) + i) if self.base.isdigit() else f"({self.base}+{i})"
    kind = self.kind.get(u)
    if kind is None: return self.r(u)  # a scalar from outside the loop: the same in every lane
    if kind == "v": return f"{self.names[u]}[{i}]"
    if kind == "m": return f"({self.names[u]}[{i}]!=0)"
    if (u, i) not in self.lanes:
      if u.op is Ops.LOAD: expr = self._lane_load(u, i)
      elif u.op is Ops.CAST: expr = self.cast(self.lane_val(u.src[0], i), u.src[0].dtype, u.dtype)
      else:
        cdiv = u.src[1].arg if len(u.src) > 1 and u.src[1].op is Ops.CONST else None
        expr = self.scalar(u.op, u.dtype, [self.lane_val(s, i) for s in u.src], u.src[-1].dtype if u.op is Ops.WHERE else u.src[0].dtype, cdiv)
      self.lanes[(u, i)] = name = self.new_name()
      self.emit(f"{self.ctype(u.dtype)} {name} = {expr};")
    return self.lanes[(u, i)]

  def vec(self, u: UOp) -> str:
    """u as a float vector: a scalar from outside is broadcast."""
    return self.names[u] if self.kind.get(u) == "v" else f"bcast_{self.vt}({self.r(u)})"

  def mask(self, u: UOp) -> str:
    if self.kind.get(u) == "m": return self.names[u]
    if self.kind.get(u) == "l":
      if (u, "mask") not in self.lanes:
        self.lanes[(u, "mask")] = self._lane_mask(u) or f"({self.mt}){{" + ", ".join(f"-(int)({self.lane_val(u, i)})" for i in range(self.w)) + "}"
      return self.lanes[(u, "mask")]
    return f"(({self.mt}){{}}-(int)({self.r(u)}))"

  def _lane_mask(self, u: UOp) -> str | None:
    """A per-lane bool as one vector op where it can be: a comparison of ints that move by a constant from lane to lane
    (a padded read's edge test, a one-hot label test), or logic on such masks; None: lane by lane."""
    if u.op in MASK_OPS and dtypes.is_int(u.src[0].dtype):
      a, b = (self._int_lanes(s) for s in u.src)
      if a is None and b: a = self._clamped_scalar(u.src[0], u.src[1])
      if b is None and a: b = self._clamped_scalar(u.src[1], u.src[0])
      return f"({a}{MASK_OPS[u.op]}{b})" if a and b else None
    if u.op in (Ops.AND, Ops.OR, Ops.XOR, Ops.CMPNE, Ops.CMPEQ) and u.src[0].dtype == dtypes.bool: return self._mask_logic(u)
    return None

  def _mask_logic(self, u: UOp) -> str:
    """Logic on two bools (AND, OR, XOR, CMPNE, CMPEQ) as a mask vector."""
    a, b = self.mask(u.src[0]), self.mask(u.src[1])
    return {Ops.AND: f"({a}&{b})", Ops.OR: f"({a}|{b})", Ops.XOR: f"({a}^{b})", Ops.CMPNE: f"({a}^{b})", Ops.CMPEQ: f"(~({a}^{b}))"}[u.op]

  def _int_lanes(self, u: UOp) -> str | None:
    """An int of the loop as a vector of 32-bit lanes, if all its values fit and it moves by a constant step from lane
    to lane (_lane_step)."""
    if not _fits_int32(u): return None
    if self.kind.get(u) is None: return f"(({self.mt}){{}}+(int)({self.r(u)}))"  # a scalar from outside: every lane
    if (step := self._lane_step(u)) is None or abs(step) * self.w >= 2**31: return None
    return f"((({self.mt}){{{', '.join(str(step * i) for i in range(self.w))}}})+(int)({self.lane_val(u, 0)}))"

  def _clamped_scalar(self, x: UOp, lanes: UOp) -> str | None:
    """x, a signed scalar from outside the loop that may not fit in 32 bits (an int64 class label), compared with 32-bit
    lanes of values in [lo, hi]: x clamped to [lo-1, hi+1] compares with every lane as x does, and fits. (Unsigned x
    stays lane by lane: C would compare it with a negative bound as unsigned.)"""
    lo, hi = lanes.vmin - 1, lanes.vmax + 1
    if self.kind.get(x) is not None or not (dtypes.is_int(x.dtype) and not dtypes.is_unsigned(x.dtype) and -2**31 <= lo and hi < 2**31): return None
    v = self.r(x)
    return f"(({self.mt}){{}}+(int)({v}<{lo}?{lo}:{v}>{hi}?{hi}:{v}))"

  def _lane_step(self, u: UOp) -> int | None:
    """vector_step, also through sums, constant multiples and int casts that keep the value (_keeps_value: index math
    in int32, `(int)lane*3 - 7`)."""
    if _keeps_value(u): return self._lane_step(u.src[0])
    if u.op in (Ops.ADD, Ops.SUB, Ops.MUL):
      a, b = self._lane_step(u.src[0]), self._lane_step(u.src[1])
      if a is None or b is None: return None
      if u.op is Ops.MUL: return a * u.src[1].arg if u.src[1].op is Ops.CONST else b * u.src[0].arg if u.src[0].op is Ops.CONST else None if a or b else 0
      return a + b if u.op is Ops.ADD else a - b
    return vector_step(u, self.lane, self.w)

  def _lanes(self, fn: Callable[[int], str]) -> str: return f"({self.vt}){{" + ", ".join(fn(i) for i in range(self.w)) + "}"

  # ---- nodes
  def _lane_load(self, u: UOp, i: int) -> str:
    expr = f"{self.r(u.src[0])}[{self.lane_val(u.src[1], i)}]"
    return f"({self.lane_val(u.src[2], i)}?{expr}:0)" if len(u.src) == 3 else expr

  def _node(self, u: UOp, g: int):
    kind, vt, w = self.kind.get(u), self.vt, self.w
    if u.op is Ops.SKIP: return
    if u.op is Ops.STORE:
      ptr, step = self.r(u.src[0]), vector_step(u.src[1], self.lane, self.w)
      half = self.kind.get(u.src[2]) == "h"  # float16 bits: stored as shorts, never converted again
      if half: ptr, vt = f"((short*){ptr})", f"i16x{w}"
      val = self.names[u.src[2]] if half else self.vec(u.src[2])
      if step == 1 and self.tail and not half: return self.emit(f"mst_{vt}({ptr}+{self.lane_val(u.src[1], 0)}, {val}, {self.tail});")
      if step == 1: return self.emit(f"*({vt}*)({ptr}+{self.lane_val(u.src[1], 0)}) = {val};")
      return self.emit(" ".join(f"{ptr}[{self.lane_val(u.src[1], i)}] = {val}[{i}];" for i in range(w)))
    if u.op is Ops.ACC_UPDATE:
      if len(u.src) == 2:  # a scalar accumulator takes the lanes: a sum or max as a tree (hsum, hmax), else one by one
        acc = self.names[u.src[0]]
        if (tree := {Ops.ADD: "hsum", Ops.MAX: "hmax"}.get(u.arg)) and u.dtype == dtypes.float32:
          return self.emit(f"{acc} = {self.scalar(u.arg, u.dtype, [acc, f'{tree}_{self.vt}({self.vec(u.src[1])})'], u.dtype)};")
        return self.emit(" ".join(f"{acc} = {self.scalar(u.arg, u.dtype, [acc, f'{self.vec(u.src[1])}[{i}]'], u.dtype)};" for i in range(w)))
      acc, v = f"{self.names[u.src[0]]}_{g}", u.src[1]
      if u.arg is Ops.ADD and v.op is Ops.MUL and self.kind.get(v) == "v":  # a dot product: one rounding per step, as BLAS
        return self.emit(f"{acc} = fma_{self.vt}({self.vec(v.src[0])}, {self.vec(v.src[1])}, {acc});")
      return self.emit(f"{acc} = {self._alu(u.arg, [acc, self.vec(v)], [u.src[0], v])};")
    if u.op is Ops.REDUCE:
      self.names[u] = f"{self.names[self.accs[u]]}_{g}"
      return
    if kind == "l": return  # rendered lane by lane where used
    if u.op is Ops.LOAD: expr = self._load(u)
    elif kind == "h": expr = f"sth_{vt}({self.names[u.src[0]]})"
    elif u.op is Ops.CAST and self.kind.get(u.src[0]) == "v": expr = self.names[u.src[0]]  # a float16 load: already float32
    elif u.op is Ops.CAST and self.kind.get(u.src[0]) == "m": expr = f"(({vt})({self.names[u.src[0]]} & ({self.mt})(({vt}){{}}+1.0f)))"
    elif u.op is Ops.CAST and (small := self._small_int_load(u.src[0])): expr = small
    elif u.op is Ops.CAST and kind == "v" and (ints := self._int_lanes(u.src[0])) is not None: expr = f"__builtin_convertvector({ints}, {vt})"
    elif u.op is Ops.CAST: expr = self._lanes(lambda i: self.cast(self.lane_val(u.src[0], i), u.src[0].dtype, u.dtype))
    elif kind == "m" and u.op in MASK_OPS and u.src[0].dtype == dtypes.float32: expr = f"({self.vec(u.src[0])}{MASK_OPS[u.op]}{self.vec(u.src[1])})"
    elif kind == "m": expr = self._mask_logic(u)  # logic on bools
    else: expr = self._alu(u.op, [self.vec(s) for s in u.src] if u.op is not Ops.WHERE else [self.mask(u.src[0]), self.vec(u.src[1]), self.vec(u.src[2])], list(u.src))
    self.names[u] = name = self.new_name()
    self.emit(f"{self.mt if kind == 'm' else f'i16x{w}' if kind == 'h' else vt} {name} = {expr};")

  def _small_int_load(self, u: UOp) -> str | None:
    """The float32 vector of u if u is an ungated contiguous load of 8- or 16-bit ints: one widening load and a
    conversion (quantized weights), not a load per lane."""
    kind = SMALL_INTS.get(u.dtype)
    if kind is None or u.op is not Ops.LOAD or len(u.src) != 2 or vector_step(u.src[1], self.lane, self.w) != 1: return None
    return f"ld{kind}_{self.vt}({self.r(u.src[0])}+{self.lane_val(u.src[1], 0)})"

  def _load(self, u: UOp) -> str:
    ptr, idx, step = self.r(u.src[0]), u.src[1], vector_step(u.src[1], self.lane, self.w)
    gated = len(u.src) == 3 and self.kind.get(u.src[2]) is not None
    if self.tail and step == 1:  # (float32: _maskable)
      return f"mld_{self.vt}({ptr}+{self.lane_val(idx, 0)}, {self.tail if len(u.src) < 3 else f'({self.mask(u.src[2])}&{self.tail})'})"
    if gated and step == 1 and u.dtype == dtypes.float32: return f"mld_{self.vt}({ptr}+{self.lane_val(idx, 0)}, {self.mask(u.src[2])})"
    if step is None or gated: return self._lanes(lambda i: self._lane_load(u, i))
    if step == 0: return f"bcast_{self.vt}({self._lane_load(u, 0)})"
    i0 = self.lane_val(idx, 0)
    if u in self.prefetch: self.emit_prefetch(u.src[0], i0, self.prefetch[u])
    # a staged block is 64-byte aligned, laid out [..., tile]: where the tile is a multiple of this vector, so is i0
    aligned = u.src[0].op is Ops.STAGE and self.lane.src[0].arg % self.w == 0
    if step == 1 and u.dtype == dtypes.float16: expr = f"ldh_{self.vt}({ptr}+{i0})"
    elif step == 1: expr = f"*(const {self.vt}{'a' if aligned else ''}*)({ptr}+{i0})"
    elif step == 2 and u.dtype == dtypes.float32: expr = f"ld2_{self.vt}({ptr}+{i0})"
    else: expr = self._lanes(lambda i: f"{ptr}[{i0}+{step * i}]")
    return f"({self.r(u.src[2])}?{expr}:({self.vt}){{}})" if len(u.src) == 3 else expr

  def _alu(self, op: Ops, s: list[str], srcs: list[UOp]) -> str:
    vt, w = self.vt, self.w
    if op in VECTOR_ALU: return f"({s[0]}{VECTOR_ALU[op]}{s[1]})"
    if op is Ops.NEG: return f"(-{s[0]})"
    if op is Ops.RECIP: return f"(1.0f/{s[0]})"
    if op is Ops.MAX: return f"max_{vt}({s[0]}, {s[1]})"
    if op is Ops.WHERE: return f"where_{vt}({s[0]}, {s[1]}, {s[2]})"
    if op is Ops.ABS: return f"(({vt})((i32x{w}){s[0]} & 0x7fffffff))"  # clear the sign bit
    if op in ROUND_MODE: return f"round_{vt}({s[0]}, {ROUND_MODE[op]})"
    if op is Ops.EXP and op in self.math and w in MVEC_ISA: return f"exp_{vt}({s[0]})"
    if op in self.math and w in MVEC_ISA: return f"{_mvec(VECTOR_MATH[op], w)}({s[0]})"
    if Ops.EXP in self.math and op is Ops.SIGMOID and w in MVEC_ISA: return f"(1.0f/(1.0f+exp_{vt}(-{s[0]})))"
    # no vector form: lane by lane
    return self._lanes(lambda i: self.scalar(op, dtypes.float32, [self.lane_val(x, i) for x in srcs], dtypes.float32))
