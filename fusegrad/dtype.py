"""Data types, PyTorch-style type promotion, and value conversions."""
from __future__ import annotations
import math, os, struct
from dataclasses import dataclass
from typing import Any

@dataclass(frozen=True, eq=False)
class DType:
  """A scalar type. The instances in `dtypes` are the only ones, so equality is identity (fast: promotion and every
  op compare dtypes); PtrDType, made per buffer size, compares by value."""
  priority: int      # order used for sorting/printing only
  itemsize: int
  name: str
  fmt: str | None    # struct/memoryview format character
  # tinygrad prints the short alias: dtypes.float, dtypes.int, dtypes.long, dtypes.half, dtypes.uchar ...
  def __repr__(self) -> str: return f"dtypes.{INVERSE_DTYPES_DICT.get(self.name, self.name)}"
  def __lt__(self, o: "DType") -> bool: return self.priority < o.priority
  def ptr(self, size: int = -1) -> "PtrDType": return PtrDType(self.priority, self.itemsize, self.name, self.fmt, self, size)
  def __reduce__(self): return (_dtype_named, (self.name,))  # unpickles to the one instance (equality is identity)
  @property
  def base(self) -> "DType": return self
  @property
  def bitsize(self) -> int: return self.itemsize * 8
  # scalar types only (no vector dtypes at this level): what tinygrad programs ask of a dtype's lanes
  @property
  def count(self) -> int: return 1
  @property
  def vcount(self) -> int: return 1
  def scalar(self) -> "DType": return self.base
  @property
  def min(self) -> Any:
    """The smallest value: the range's end for ints, -inf for floats, False for bool (as tinygrad's DType.min)."""
    return dtypes.min(self.base)
  @property
  def max(self) -> Any:
    """The largest value: the range's end for ints, inf for floats, True for bool (as tinygrad's DType.max)."""
    return dtypes.max(self.base)

@dataclass(frozen=True, eq=True)  # value equality: equal pointer types must give equal (hash-consed) kernel nodes
class PtrDType(DType):
  elem: DType = None  # type: ignore
  size: int = -1
  def __repr__(self) -> str: return f"{self.elem}.ptr({self.size})"
  def __reduce__(self): return (_ptr_dtype, (self.elem, self.size))
  @property
  def base(self) -> DType: return self.elem

def _dtype_named(name: str) -> DType: return next(d for d in vars(dtypes).values() if isinstance(d, DType) and d.name == name)
def _ptr_dtype(elem: DType, size: int) -> PtrDType: return elem.ptr(size)

class dtypes:
  void = DType(-1, 0, "void", None)
  bool = DType(0, 1, "bool", "?")
  int8 = DType(1, 1, "char", "b")
  uint8 = DType(2, 1, "unsigned char", "B")
  int16 = DType(3, 2, "short", "h")
  uint16 = DType(4, 2, "unsigned short", "H")
  int32 = DType(5, 4, "int", "i")
  uint32 = DType(6, 4, "unsigned int", "I")
  int64 = DType(7, 8, "long", "q")
  uint64 = DType(8, 8, "unsigned long", "Q")
  # OCP 8-bit floats (tinygrad's names): stored as one byte, no struct format; math runs in float32 and rounds to them
  fp8e4m3 = DType(9, 1, "float8_e4m3", None)
  fp8e5m2 = DType(10, 1, "float8_e5m2", None)
  float16 = DType(11, 2, "half", "e")
  bfloat16 = DType(12, 2, "__bf16", None)
  float32 = DType(13, 4, "float", "f")
  float64 = DType(14, 8, "double", "d")
  # aliases
  half, float, double = float16, float32, float64
  char, uchar, short, ushort, int, uint, long, ulong = int8, uint8, int16, uint16, int32, uint32, int64, uint64
  default_float: DType = float32
  default_int: DType = int32

  @staticmethod
  def is_float(x: DType) -> bool: return x.base in _FLOAT_SET
  @staticmethod
  def is_int(x: DType) -> bool: return x.base in _INT_SET
  @staticmethod
  def is_unsigned(x: DType) -> bool: return x.base in _UINT_SET
  @staticmethod
  def is_bool(x: DType) -> bool: return x.base == dtypes.bool
  @staticmethod
  def from_py(x: Any) -> DType:
    if isinstance(x, bool): return dtypes.bool
    if isinstance(x, int): return dtypes.default_int
    if isinstance(x, float): return dtypes.default_float
    if isinstance(x, (list, tuple)): return max((dtypes.from_py(v) for v in x), default=dtypes.default_float, key=lambda d: d.priority)
    raise TypeError(f"cannot infer a dtype from {type(x).__name__} {x!r}")
  @staticmethod
  def min(d: DType) -> Any:
    if dtypes.is_int(d): return 0 if dtypes.is_unsigned(d) else -2**(d.bitsize - 1)
    return False if d == dtypes.bool else -448.0 if d == dtypes.fp8e4m3 else -math.inf  # (E4M3 has no infinity: its largest finite)
  @staticmethod
  def max(d: DType) -> Any:
    if dtypes.is_int(d): return 2**d.bitsize - 1 if dtypes.is_unsigned(d) else 2**(d.bitsize - 1) - 1
    return True if d == dtypes.bool else 448.0 if d == dtypes.fp8e4m3 else math.inf
  @staticmethod
  def finfo(d: DType) -> tuple[int, int]:
    """(exponent bits, mantissa bits) of a float dtype."""
    return {dtypes.fp8e4m3: (4, 3), dtypes.fp8e5m2: (5, 2), dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7), dtypes.float32: (8, 23),
            dtypes.float64: (11, 52)}[d]
  @staticmethod
  def fields() -> dict[str, DType]: return DTYPES_BY_NAME

SINTS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
UINTS = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
INTS = SINTS + UINTS
FP8S = (dtypes.fp8e4m3, dtypes.fp8e5m2)
FLOATS = FP8S + (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
# the floats whose math runs in float32, each result rounded back (as torch does for float16 and bfloat16)
LOW_FLOATS = (dtypes.float16, dtypes.bfloat16) + FP8S
ALL_DTYPES = (dtypes.bool,) + INTS + FLOATS
# sets for the membership tests above: scalar dtypes hash by identity, so a lookup is one hash instead of a scan
_INT_SET, _UINT_SET, _FLOAT_SET = frozenset(INTS), frozenset(UINTS), frozenset(FLOATS)
_CATEGORY = {dtypes.bool: 0, **{d: 1 for d in INTS}, **{d: 2 for d in FLOATS}}
_CANONICAL_NAMES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float8_e4m3", "float8_e5m2", "float16", "bfloat16",
                    "float32", "float64")
DTYPES_BY_NAME = {"bool": dtypes.bool, "int8": dtypes.int8, "uint8": dtypes.uint8, "int16": dtypes.int16, "uint16": dtypes.uint16,
                  "int32": dtypes.int32, "uint32": dtypes.uint32, "int64": dtypes.int64, "uint64": dtypes.uint64,
                  "float8_e4m3": dtypes.fp8e4m3, "float8_e5m2": dtypes.fp8e5m2, "fp8e4m3": dtypes.fp8e4m3, "fp8e5m2": dtypes.fp8e5m2,
                  "float16": dtypes.float16, "bfloat16": dtypes.bfloat16, "float32": dtypes.float32, "float64": dtypes.float64,
                  "half": dtypes.half, "float": dtypes.float, "double": dtypes.double, "long": dtypes.long, "int": dtypes.int,
                  "uchar": dtypes.uchar, "char": dtypes.char, "short": dtypes.short, "ushort": dtypes.ushort,
                  "uint": dtypes.uint, "ulong": dtypes.ulong}

# tinygrad's tables: every name a dtype is reachable by (aliases included), and the name each dtype prints as; a
# dtype with an alias prints as the alias, which is how tinygrad shows them
DTYPES_DICT: dict[str, DType] = dict(DTYPES_BY_NAME)
_ALIAS = {"int8": "char", "uint8": "uchar", "int16": "short", "uint16": "ushort", "int32": "int", "uint32": "uint", "int64": "long",
          "uint64": "ulong", "float8_e4m3": "fp8e4m3", "float8_e5m2": "fp8e5m2", "float16": "half", "float32": "float", "float64": "double"}
INVERSE_DTYPES_DICT: dict[str, str] = {**{d.name: _ALIAS.get(n, n) for n, d in DTYPES_BY_NAME.items() if n in _CANONICAL_NAMES}, "void": "void"}
_TORCH_NAMES = {"float8_e4m3fn": dtypes.fp8e4m3}  # torch's spellings that differ from ours (its float8_e5m2 is ours)
DTypeLike = str | DType  # what a dtype= argument accepts: a DType or its name

dtypes.floats, dtypes.uints, dtypes.sints, dtypes.fp8s = FLOATS, UINTS, SINTS, FP8S  # type: ignore[attr-defined]
dtypes.ints, dtypes.all = UINTS + SINTS, FLOATS + UINTS + SINTS + (dtypes.bool,)  # type: ignore[attr-defined]

def _default_float_from_env() -> DType:
  """tinygrad's DEFAULT_FLOAT: the float dtype of float data with no dtype given (HALF, FLOAT16, BFLOAT16, FLOAT, ...),
  read once at import. Anything else stops the import with the names it accepts."""
  name = os.environ.get("DEFAULT_FLOAT", "").strip().lower()
  if not name: return dtypes.float32
  if (d := DTYPES_BY_NAME.get(name)) is None or not dtypes.is_float(d):
    raise ValueError(f"DEFAULT_FLOAT={name!r} is not a float dtype; use one of {sorted(n for n, d in DTYPES_BY_NAME.items() if dtypes.is_float(d))}")
  return d
dtypes.default_float = _default_float_from_env()

def to_dtype(x: Any) -> DType:
  """Accept a DType, a name ('float32'), a numpy dtype or a torch dtype."""
  if isinstance(x, DType): return x
  name = getattr(x, "name", None) if not isinstance(x, str) else x
  if name is None and hasattr(x, "__str__"): name = str(x)
  name = str(name).replace("torch.", "").replace("dtypes.", "")
  if name in DTYPES_BY_NAME: return DTYPES_BY_NAME[name]
  if name in _TORCH_NAMES: return _TORCH_NAMES[name]
  if x is bool: return dtypes.bool
  if x is int: return dtypes.default_int
  if x is float: return dtypes.default_float
  raise TypeError(f"unknown dtype {x!r}; use one of {sorted(set(DTYPES_BY_NAME))}")

def least_upper_float(d: DType) -> DType:
  """d if it is a float dtype, else the default float (what a float op on an int tensor computes in)."""
  return d if dtypes.is_float(d) else least_upper_dtype(d, dtypes.default_float)

def category(d: DType) -> int:
  """0 bool, 1 integer, 2 floating point: promotion never goes down a category."""
  if (c := _CATEGORY.get(d)) is not None: return c  # the scalar dtypes; pointer types and void take the rule below
  return 0 if d == dtypes.bool else 1 if dtypes.is_int(d) else 2

def least_upper_dtype(*ds: DType) -> DType:
  """The dtype PyTorch's promotion gives for tensors of these dtypes (no weak scalars)."""
  ds = tuple(dict.fromkeys(d.base for d in ds))
  if len(ds) == 1: return ds[0]
  top = max(category(d) for d in ds)
  ds = tuple(d for d in ds if category(d) == top)
  if len(ds) == 1: return ds[0]
  if top == 2:
    if dtypes.float64 in ds: return dtypes.float64
    if dtypes.float32 in ds or (dtypes.float16 in ds and dtypes.bfloat16 in ds): return dtypes.float32
    # an fp8 with a 16-bit float is that float; the two fp8 formats together are float16 (tinygrad's lattice)
    if (wide := [d for d in ds if d not in FP8S]): return wide[0]
    return dtypes.float16
  signed = [d for d in ds if d in SINTS]
  unsigned = [d for d in ds if d in UINTS]
  if not signed: return max(unsigned, key=lambda d: d.itemsize)
  s = max(signed, key=lambda d: d.itemsize)
  if not unsigned: return s
  u = max(unsigned, key=lambda d: d.itemsize)
  if s.itemsize > u.itemsize: return s
  # a signed type that holds every value of the unsigned one; int64 is as wide as it gets
  return {1: dtypes.int16, 2: dtypes.int32}.get(u.itemsize, dtypes.int64)

def result_dtype(tensor_dtype: DType, scalar: Any) -> DType:
  """Promotion of a tensor with a weak Python scalar, as PyTorch does it: the scalar only raises the category."""
  sc = 0 if isinstance(scalar, bool) else 1 if isinstance(scalar, int) else 2
  if sc <= category(tensor_dtype): return tensor_dtype
  return dtypes.default_int if sc == 1 else dtypes.default_float

def _round_int(x: int, bits: int) -> int:
  """x rounded to `bits` significant bits, half to even, in one step: float(x) first would round to 53 bits and then
  the narrow float rounds again (2**60 + 2**36 + 1 became 2**60 in float32, not 2**60 + 2**37)."""
  n, shift = abs(x), abs(x).bit_length() - bits
  q, r = divmod(n, 1 << shift)
  if r > 1 << (shift - 1) or (r == 1 << (shift - 1) and q & 1): q += 1
  return (q << shift) * (1 if x > 0 else -1)

def truncate(dtype: DType, x: Any) -> Any:
  """Convert a Python value to what a `dtype` element holds (wrap ints, round floats)."""
  if dtype == dtypes.bool: return bool(x)
  if dtypes.is_int(dtype):
    if isinstance(x, float):
      # like the CPU kernels (a cast through int64 on x86): NaN, inf and out-of-range values become -2**63, then wrap
      x = int(x) if math.isfinite(x) and -2**63 <= x < 2**63 else -2**63
    x = int(x) & (2**dtype.bitsize - 1)
    if not dtypes.is_unsigned(dtype) and x >= 2**(dtype.bitsize - 1): x -= 2**dtype.bitsize
    return x
  if type(x) is int and abs(x) >= 2**53: x = _round_int(x, {dtypes.float32: 24, dtypes.bfloat16: 8}.get(dtype, 53))
  x = float(x)
  if dtype == dtypes.float64: return x
  if dtype == dtypes.float32: return _round_via("f", x)
  if dtype == dtypes.float16: return _round_via("e", x)
  if dtype in _FP8: return fp8_to_float(float_to_fp8(x, dtype), dtype)
  return bf16_to_float(float_to_bf16(x))

def _round_via(fmt: str, x: float) -> float:
  try: return struct.unpack(fmt, struct.pack(fmt, x))[0]
  except OverflowError: return math.copysign(math.inf, x)

def float_to_bf16(x: float) -> int:
  """bfloat16 bits of x with round-to-nearest-even (NaN stays NaN)."""
  if math.isnan(x): return 0x7fc0
  bits = struct.unpack("I", struct.pack("f", _round_via("f", x)))[0]
  return ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) & 0xffff

def bf16_to_float(b: int) -> float: return struct.unpack("f", struct.pack("I", (b & 0xffff) << 16))[0]

# ---- fp8 (OCP 8-bit floats): (exponent bits, mantissa bits, bias, largest finite code) per format. E4M3 ("fn") has no
# infinity and one NaN pattern per sign (S.1111.111); E5M2 is IEEE-like (S.11111.00 is infinity, S.11111.xx NaN).
_FP8 = {dtypes.fp8e4m3: (4, 3, 7, 0x7e), dtypes.fp8e5m2: (5, 2, 15, 0x7b)}

def float_to_fp8(x: float, dtype: DType) -> int:
  """The fp8 code of x: round to nearest, ties to even (subnormals included). A finite value beyond the largest finite
  one saturates to it; NaN is 0x7f with NaN's sign; infinity is E5M2's infinity, E4M3's NaN (it has no infinity)."""
  if dtype not in _FP8: raise ValueError(f"float_to_fp8 needs one of {FP8S}, got {dtype}")
  ebits, mbits, bias, maxcode = _FP8[dtype]
  x = float(x)
  sign = 0x80 if math.copysign(1.0, x) < 0 else 0
  if math.isnan(x): return sign | 0x7f
  if math.isinf(x): return sign | (0x7f if dtype == dtypes.fp8e4m3 else 0x7c)
  a, emin = abs(x), 1 - bias
  if a == 0: return sign
  e = max(math.frexp(a)[1] - 1, emin)        # the exponent of a's binade (the subnormal one below 2**emin)
  q = round(math.ldexp(a, mbits - e))        # a in units of the binade's step, ties to even (exact: a power-of-2 scaling)
  # exponent field e + bias (0 for subnormals, whose q has no implicit bit) and mantissa q - 2**mbits in one sum: a q that
  # rounded up to 2**(mbits + 1) carries into the exponent, a subnormal that rounded up to 2**mbits becomes the smallest normal
  code = ((e + bias - 1) << mbits) + q
  return sign | min(code, maxcode)

def fp8_to_float(x: int, dtype: DType) -> float:
  """The value of fp8 code x (exact)."""
  if dtype not in _FP8: raise ValueError(f"fp8_to_float needs one of {FP8S}, got {dtype}")
  ebits, mbits, bias, _ = _FP8[dtype]
  sign, e, m = -1.0 if x & 0x80 else 1.0, (x >> mbits) & ((1 << ebits) - 1), x & ((1 << mbits) - 1)
  if dtype == dtypes.fp8e4m3 and e == 15 and m == 7: return math.copysign(math.nan, sign)  # (the sign kept: float_to_fp8 gives it back)
  if dtype == dtypes.fp8e5m2 and e == 31: return sign * math.inf if m == 0 else math.copysign(math.nan, sign)
  if e == 0: return sign * math.ldexp(m, 1 - bias - mbits)
  return sign * math.ldexp((1 << mbits) + m, e - bias - mbits)
