"""Differential tests: random op graphs run on "CPU" (C built by $CC) and on the "PYTHON" interpreter, checked against each other and
against numpy. Both devices run the same lowered UOps, so a disagreement is a renderer, interpreter or C compiler bug (gcc 12.2 at -O3
once summed a flipped arange(10) to 53). Graphs chain movement ops into reductions into elementwise ops, over every dtype.
A failure prints the three results and the program, runnable after `sys.path.insert(0, "test/ops"); from test_differential import make`
(plus numpy, Tensor, dtypes; add device= to each Tensor to pick the device)."""
import math
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings, strategies as st
from fusegrad import Tensor, dtypes
from fusegrad.dtype import least_upper_dtype

DEVS = ("CPU", "PYTHON")
MAX_NUMEL = 2048
NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16, dtypes.int32: np.int32,
      dtypes.uint32: np.uint32, dtypes.int64: np.int64, dtypes.float16: np.float16, dtypes.bfloat16: np.float32, dtypes.float32: np.float32,
      dtypes.float64: np.float64}
INTS = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64]
FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]
ALL = [dtypes.bool, *INTS, *FLOATS]
# relative tolerance, of the result's largest finite magnitude (at least 1): CPU vs PYTHON, and either vs numpy
DEV_TOL = {dtypes.float16: 2e-3, dtypes.bfloat16: 1.6e-2, dtypes.float32: 1e-5, dtypes.float64: 1e-12}
NP_TOL = {dtypes.float16: 1e-2, dtypes.bfloat16: 4e-2, dtypes.float32: 1e-4, dtypes.float64: 1e-10}
SETTINGS = dict(deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))

# ---------------- numpy side

def bf16_round(a):
  a = np.asarray(a, np.float32)
  b = a.view(np.uint32).astype(np.uint64)
  r = (((b + 0x7fff + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
  return np.where(np.isnan(a), np.float32("nan"), r)

def fit(a, dtype):
  """a numpy value as a fusegrad `dtype` holds it: ints wrap, bfloat16 is float32 rounded to bfloat16"""
  with np.errstate(all="ignore"): return bf16_round(a) if dtype == dtypes.bfloat16 else np.asarray(a).astype(NP[dtype])

def acc(dtype):
  """numpy dtype to reduce a fusegrad result dtype in: 16-bit floats accumulate in float32 and round once"""
  return np.float32 if dtype in (dtypes.float16, dtypes.bfloat16) else NP[dtype]

def cast_ref(a, src, dst):
  """numpy version of t.cast(dst); None where C leaves it undefined (NaN, inf, |x| >= 2**63 to an int)"""
  if not (dtypes.is_float(src) and dtypes.is_int(dst)): return fit(fit(a, src), dst)
  v = np.trunc(np.asarray(a, np.float64))
  if not np.isfinite(v).all() or (np.abs(v) >= 2.0**63).any(): return None
  return v.astype(np.int64).astype(NP[dst])  # CPU: (T)(long long)x keeps the low bits

def make(rng, shape, dtype, special=False, wide=None):
  """test data: full-range ints (plus edge values), floats that are multiples of 1/4 so sums are exact in any order"""
  if dtype == dtypes.bool: return np.asarray(rng.random(shape) < 0.5)
  if dtypes.is_int(dtype):
    info = np.iinfo(NP[dtype])
    wide = dtype.itemsize <= 2 or rng.random() < 0.5 if wide is None else wide
    lo, hi = (int(info.min), int(info.max)) if wide else (max(int(info.min), -20), min(int(info.max), 20))
    a = np.asarray(rng.integers(lo, hi, shape, endpoint=True, dtype=NP[dtype]))
    if wide:
      # special: int64 values whose float32 rounding needs all 64 bits (rounding through float64 first gets it wrong)
      edges = [info.min, info.max, 0, 1, info.max // 2 + 1] + ([2**60 + 2**36 + 1, -2**53 - 3] if special and dtype == dtypes.int64 else [])
      flat = a.reshape(-1)
      flat[rng.integers(0, flat.size, min(3, flat.size))] = rng.choice(np.array(edges, NP[dtype]), min(3, flat.size))
    return a
  a = np.asarray(rng.integers(-16, 17, shape) / 4)
  if special:
    m = np.asarray(rng.random(shape) < 0.25)
    a[m] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0], int(m.sum()))
  return a.astype(NP[dtype])

# ---------------- one graph, built on every device and in numpy side by side

class Graph:
  def __init__(self, seed, shape, dtype, special=False, wide=None):
    self.rng, self.special = np.random.default_rng(seed), special
    arr = make(self.rng, shape, dtype, special, wide)
    self.ts = {d: Tensor(arr, device=d, dtype=dtype) for d in DEVS}
    # inexact: a transcendental ran, so no comparisons or casts to int after it; exact: CPU and PYTHON must agree bit for bit
    self.ref, self.inexact, self.exact, self.tol_dtype = fit(arr, dtype), False, True, dtype
    self.pre = [f"rng = np.random.default_rng({seed})", f"x = Tensor(make(rng, {shape}, {dtype!r}, {special}, {wide}), dtype={dtype!r})"]
    self.code: list[str] = []
  @property
  def t(self) -> Tensor: return self.ts["CPU"]
  def op(self, code, f, g=None):
    """f(tensor, device) -> tensor on each device; g(numpy array) -> numpy array (None: no numpy reference from here on)"""
    self.ts = {d: f(t, d) for d, t in self.ts.items()}
    with np.errstate(all="ignore"):
      r = None if g is None or self.ref is None else g(self.ref)
    self.ref = None if r is None else fit(r, self.t.dtype)
    if DEV_TOL.get(self.t.dtype, 0) > DEV_TOL.get(self.tol_dtype, 0): self.tol_dtype = self.t.dtype  # the loosest float on the way
    self.code.append(code)
  def operand(self, shape, dtype, special=None):
    """a fresh input: (code, per-device tensor maker, numpy value)"""
    special = self.special if special is None else special
    arr = make(self.rng, shape, dtype, special)
    self.pre.append(f"y{len(self.pre) - 1} = Tensor(make(rng, {tuple(shape)}, {dtype!r}, {special}), dtype={dtype!r})")
    return f"y{len(self.pre) - 2}", lambda d: Tensor(arr, device=d, dtype=dtype), fit(arr, dtype)

def close(a, b, dtype, tol, tol_dtype=None):
  if dtype not in tol: return np.testing.assert_array_equal(a, b)
  rtol = max(tol[dtype], tol.get(tol_dtype, 0))
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  scale = max(1.0, float(np.max(np.abs(b[np.isfinite(b)]), initial=0)))
  np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, equal_nan=True)

def check(g: Graph):
  prog = "\n".join(g.pre + [f"x = {c}" for c in g.code])
  note(prog)
  cpu, py = (g.ts[d].numpy() for d in DEVS)
  msg = f"\n{prog}\ndtype {g.t.dtype}\nCPU:    {cpu.tolist()}\nPYTHON: {py.tolist()}\nnumpy:  {None if g.ref is None else g.ref.tolist()}"
  assert cpu.shape == py.shape == g.t.shape, msg
  try: np.testing.assert_array_equal(cpu, py) if g.exact else close(cpu, py, g.t.dtype, DEV_TOL, g.tol_dtype)
  except AssertionError as e: raise AssertionError("CPU and PYTHON disagree" + msg) from e
  if g.ref is None: return
  assert g.ref.shape == cpu.shape, msg
  for dev, out in zip(DEVS, (cpu, py)):
    try: close(out, g.ref, g.t.dtype, NP_TOL, g.tol_dtype)
    except AssertionError as e: raise AssertionError(f"{dev} disagrees with numpy" + msg) from e

# ---------------- strategies

SIZES = st.one_of(st.integers(1, 5), st.sampled_from([1, 1, 7, 8, 10, 14, 17, 33, 64]))

@st.composite
def shapes(draw, max_dims=4, max_numel=512):
  s = draw(st.lists(SIZES, min_size=1, max_size=max_dims))
  while math.prod(s) > max_numel: s[s.index(max(s))] //= 2
  return tuple(s)

def start(data, dtypes_=ALL, special=False, wide=None) -> Graph:
  dtype = data.draw(st.sampled_from(dtypes_), label="dtype")
  return Graph(data.draw(st.integers(0, 2**16), label="seed"), data.draw(shapes(), label="shape"), dtype, special, wide)

def axes(data, nd, min_size=1):
  return tuple(data.draw(st.lists(st.integers(0, nd - 1), min_size=min_size, max_size=nd, unique=True)))

# ---------------- movement ops

def mv_reshape(data, g):
  s, n = g.t.shape, g.t.numel()
  cands = [(n,), s + (1,), (1,) + s, tuple(x for x in s if x != 1)]
  cands += [s[:i] + (s[i] * s[i + 1],) + s[i + 2:] for i in range(len(s) - 1)]
  cands += [s[:i] + (k, s[i] // k) + s[i + 1:] for i in range(len(s)) for k in range(2, s[i]) if s[i] % k == 0]
  new = data.draw(st.sampled_from([c for c in cands if len(c) <= 5]))
  g.op(f"x.reshape({new})", lambda t, d: t.reshape(new), lambda a: a.reshape(new))

def mv_permute(data, g):
  perm = tuple(data.draw(st.permutations(range(g.t.ndim))))
  g.op(f"x.permute({perm})", lambda t, d: t.permute(perm), lambda a: np.transpose(a, perm))

def mv_transpose(data, g):
  nd = g.t.ndim
  a0, a1 = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
  g.op(f"x.transpose({a0}, {a1})", lambda t, d: t.transpose(a0, a1), lambda a: np.swapaxes(a, a0, a1))

def mv_expand(data, g):
  s, k = g.t.shape, data.draw(st.integers(2, 4))
  if g.t.numel() * k > MAX_NUMEL: return
  p = data.draw(st.integers(0, len(s)))
  s1 = s[:p] + (1,) + s[p:]
  s2 = tuple(k if x == 1 and (i == p or data.draw(st.booleans())) else x for i, x in enumerate(s1))
  if math.prod(s2) > MAX_NUMEL: s2 = s1[:p] + (k,) + s1[p + 1:]
  g.op(f"x.reshape({s1}).expand({s2})", lambda t, d: t.reshape(s1).expand(s2), lambda a: np.broadcast_to(a.reshape(s1), s2))

def mv_shrink(data, g):
  arg = []
  for s in g.t.shape:
    b = data.draw(st.integers(0, s - 1))
    arg.append((b, data.draw(st.integers(b + 1, s))))
  arg = tuple(arg)
  g.op(f"x.shrink({arg})", lambda t, d: t.shrink(arg), lambda a: a[tuple(slice(b, e) for b, e in arg)])

def mv_slice(data, g):
  idx = []
  for s in g.t.shape:
    kind = data.draw(st.sampled_from(["full", "slice", "slice", "int"]))
    if kind == "int": idx.append(data.draw(st.integers(-s, s - 1)))
    elif kind == "full": idx.append(slice(None))
    else:
      step = data.draw(st.sampled_from([1, 2, 3, -1, -2, -3]))
      sl = slice(data.draw(st.none() | st.integers(-s - 2, s + 1)), data.draw(st.none() | st.integers(-s - 2, s + 1)), step)
      idx.append(sl if len(range(*sl.indices(s))) else slice(None, None, step))
  idx = tuple(idx)
  def fmt(v): return "" if v is None else str(v)
  code = ", ".join(str(i) if isinstance(i, int) else f"{fmt(i.start)}:{fmt(i.stop)}:{fmt(i.step)}" for i in idx)
  g.op(f"x[{code}]", lambda t, d: t[idx], lambda a: a[idx])

def mv_flip(data, g):
  ax = tuple(a - g.t.ndim if data.draw(st.booleans()) else a for a in axes(data, g.t.ndim))
  g.op(f"x.flip({ax})", lambda t, d: t.flip(ax), lambda a: np.flip(a, ax))

def mv_pad(data, g):
  pairs = tuple((data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))) for _ in g.t.shape)
  if math.prod(s + b + e for s, (b, e) in zip(g.t.shape, pairs)) > MAX_NUMEL: return
  dt = g.t.dtype
  value = data.draw(st.sampled_from([0, True] if dt == dtypes.bool else [0, 3, 100] if dtypes.is_int(dt) else [0, -1.5, 2.25]))
  g.op(f"x.pad({pairs}, value={value})", lambda t, d: t.pad(pairs, value=value), lambda a: np.pad(a, pairs, constant_values=value))

def mv_cat(data, g):
  nd, s = g.t.ndim, g.t.shape
  dim = data.draw(st.integers(-nd, nd - 1))
  if data.draw(st.booleans()):
    if 2 * g.t.numel() > MAX_NUMEL: return
    g.op(f"x.cat(x.flip({dim}), dim={dim})", lambda t, d: t.cat(t.flip(dim), dim=dim), lambda a: np.concatenate([a, np.flip(a, dim)], dim))
    return
  s2 = s[:dim % nd] + (data.draw(st.integers(1, 4)),) + s[dim % nd + 1:]
  if g.t.numel() + math.prod(s2) > MAX_NUMEL: return
  code, y, b = g.operand(s2, data.draw(st.sampled_from([g.t.dtype, g.t.dtype, *ALL])))
  cd = least_upper_dtype(g.t.dtype, y("CPU").dtype)
  g.op(f"x.cat({code}, dim={dim})", lambda t, d: t.cat(y(d), dim=dim), lambda a: np.concatenate([fit(a, cd), fit(b, cd)], dim))

def mv_contiguous(data, g): g.op("x.contiguous()", lambda t, d: t.contiguous(), lambda a: a)

MOVEMENT = [mv_reshape, mv_permute, mv_transpose, mv_expand, mv_shrink, mv_slice, mv_slice, mv_flip, mv_flip, mv_pad, mv_cat, mv_contiguous]

def movement(data, g):
  if g.t.ndim == 0: return mv_reshape(data, g)
  fn = data.draw(st.sampled_from(MOVEMENT if g.t.ndim > 1 else [m for m in MOVEMENT if m not in (mv_permute, mv_transpose)]))
  fn(data, g)

# ---------------- reductions

def reduce(data, g, ops=("sum", "max", "min", "mean", "prod")):
  nd, op, keepdim = g.t.ndim, data.draw(st.sampled_from(ops)), data.draw(st.booleans())
  kind = "none" if nd == 0 else data.draw(st.sampled_from(["none", "int", "tuple"]))
  axis = None if kind == "none" else data.draw(st.integers(-nd, nd - 1)) if kind == "int" else axes(data, nd)
  n = math.prod(g.t.shape[a] for a in ((axis,) if isinstance(axis, int) else range(nd) if axis is None else axis))
  def ref(a):
    rd = g.t.dtype  # the result's dtype: g.op has already built it
    if op in ("max", "min"): return getattr(np, op)(a, axis, keepdims=keepdim)
    if op == "prod": return np.prod(a.astype(acc(rd)), axis, keepdims=keepdim)
    s = np.sum(a.astype(acc(rd)), axis, keepdims=keepdim)
    return s if op == "sum" else fit(fit(s, rd).astype(acc(rd)) / acc(rd)(n), rd)
  g.op(f"x.{op}(axis={axis}, keepdim={keepdim})", lambda t, d: getattr(t, op)(axis=axis, keepdim=keepdim), ref)
  if op in ("sum", "mean", "prod") and dtypes.is_float(g.t.dtype): g.exact = False  # float sums may be ordered differently
  if op in ("mean", "prod") and dtypes.is_float(g.t.dtype): g.inexact = True

# ---------------- elementwise

BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
          "<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal}
FG_BINARY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "maximum": lambda a, b: a.maximum(b),
             "minimum": lambda a, b: a.minimum(b), "<": lambda a, b: a < b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b,
             ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
CMP = ("<", ">", "<=", ">=", "==", "!=")

def operand_shape(data, s):
  kind = data.draw(st.sampled_from(["same", "same", "bcast", "lead"]))
  if kind == "bcast": return tuple(1 if data.draw(st.booleans()) else x for x in s)
  if kind == "lead" and s: return s[data.draw(st.integers(1, len(s))):]
  return s

def ew_binary(data, g, ops=tuple(BINARY)):
  op = data.draw(st.sampled_from([o for o in ops if not (g.inexact and o in CMP)]))
  dt = data.draw(st.sampled_from([g.t.dtype, g.t.dtype, *ALL]))
  code, y, b = g.operand(operand_shape(data, g.t.shape), dt)
  cd = least_upper_dtype(g.t.dtype, dt)
  if cd == dtypes.bool and op == "-": op = "+"
  f, nf = FG_BINARY[op], BINARY[op]
  if data.draw(st.booleans()):
    g.op(f"x {op} {code}" if len(op) < 3 else f"x.{op}({code})", lambda t, d: f(t, y(d)), lambda a: nf(fit(a, cd), fit(b, cd)))
  else:
    g.op(f"{code} {op} x" if len(op) < 3 else f"{code}.{op}(x)", lambda t, d: f(y(d), t), lambda a: nf(fit(b, cd), fit(a, cd)))

def ew_scalar(data, g):
  dt = g.t.dtype
  v = data.draw(st.sampled_from([True, False] if dt == dtypes.bool else [0, 1, 3, 7] if dtypes.is_int(dt) else [0.0, -1.5, 0.25, 3.0]))
  op = data.draw(st.sampled_from([o for o in BINARY if not (g.inexact and o in CMP) and not (dt == dtypes.bool and o == "-")]))
  g.op(f"x {op} {v}" if len(op) < 3 else f"x.{op}({v})", lambda t, d: FG_BINARY[op](t, v), lambda a: BINARY[op](a, np.asarray(v, a.dtype)))

def ew_where(data, g):
  s = g.t.shape
  if g.inexact or data.draw(st.booleans()):
    ccode, c, cv = g.operand(operand_shape(data, s), dtypes.bool)
    ycode, y, b = g.operand(operand_shape(data, s), data.draw(st.sampled_from([g.t.dtype, *ALL])))
    cd = least_upper_dtype(g.t.dtype, y("CPU").dtype)
    g.op(f"{ccode}.where(x, {ycode})", lambda t, d: c(d).where(t, y(d)), lambda a: np.where(cv, fit(a, cd), fit(b, cd)))
  else:
    ycode, y, b = g.operand(operand_shape(data, s), data.draw(st.sampled_from(ALL)))
    zcode, z, c = g.operand(operand_shape(data, s), data.draw(st.sampled_from(ALL)))
    cd = least_upper_dtype(y("CPU").dtype, z("CPU").dtype)
    g.op(f"x.where({ycode}, {zcode})", lambda t, d: t.where(y(d), z(d)), lambda a: np.where(a != 0, fit(b, cd), fit(c, cd)))

def ew_unary(data, g):
  src = g.t.dtype
  fd = src if dtypes.is_float(src) else dtypes.float32
  ops = ["exp", "log", "cast", "cast"] + ([] if src == dtypes.bool else ["neg"])
  op = data.draw(st.sampled_from(ops))
  if op == "neg": g.op("x.neg()", lambda t, d: t.neg(), lambda a: np.negative(a))
  elif op == "exp":
    g.op(f"x.cast({fd!r}).clip(-4, 4).exp()", lambda t, d: t.cast(fd).clip(-4, 4).exp(), lambda a: np.exp(np.clip(fit(a, fd), -4, 4)))
    g.inexact, g.exact = True, False
  elif op == "log":
    g.op(f"(x.cast({fd!r}).abs() + 1).log()", lambda t, d: (t.cast(fd).abs() + 1).log(), lambda a: np.log(np.abs(fit(a, fd)) + 1))
    g.inexact, g.exact = True, False
  else:
    dst = data.draw(st.sampled_from(FLOATS if g.inexact else ALL))
    g.op(f"x.cast({dst!r})", lambda t, d: t.cast(dst), lambda a: cast_ref(a, src, dst))

def elementwise(data, g):
  data.draw(st.sampled_from([ew_binary, ew_binary, ew_scalar, ew_where, ew_unary, ew_unary]))(data, g)

# ---------------- the property tests

@settings(max_examples=250, **SETTINGS)
@given(st.data())
def test_movement_reduce_elementwise(data):
  """the shape of graph that exposed the gcc bug: movement ops feed a reduction feeds elementwise ops (and maybe again)"""
  g = start(data)
  for _ in range(data.draw(st.integers(1, 3))): movement(data, g)
  reduce(data, g)
  for _ in range(data.draw(st.integers(1, 2))): elementwise(data, g)
  if data.draw(st.booleans()):
    movement(data, g)
    reduce(data, g)
  check(g)

@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_random_graph(data):
  g = start(data)
  for _ in range(data.draw(st.integers(1, 6))):
    data.draw(st.sampled_from([movement, movement, reduce, elementwise, elementwise]))(data, g)
  check(g)

@settings(max_examples=80, **SETTINGS)
@given(st.data())
def test_nan_inf(data):
  """NaN, inf and -0.0 through comparisons, maximum/minimum, where and max/min/sum reductions"""
  g = start(data, FLOATS, special=True)
  if data.draw(st.booleans()): movement(data, g)
  ew_binary(data, g, ops=("maximum", "minimum", "<", ">", "<=", ">=", "==", "!=", "+", "*"))
  if data.draw(st.booleans()): reduce(data, g, ops=("sum", "max", "min"))
  check(g)

@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_int_wraparound(data):
  """integer overflow wraps on both devices (C: -fwrapv and truncating stores; PYTHON: truncate per op), as in numpy"""
  g = start(data, INTS, wide=True)
  if data.draw(st.booleans()): movement(data, g)
  for _ in range(data.draw(st.integers(1, 3))):
    op = data.draw(st.sampled_from(["+", "-", "*", "neg", "sum", "prod"]))
    if op == "neg": g.op("x.neg()", lambda t, d: t.neg(), lambda a: np.negative(a))
    elif op in ("sum", "prod"): reduce(data, g, ops=(op,))
    else:
      code, y, b = g.operand(g.t.shape, g.t.dtype, special=False)
      g.op(f"x {op} {code}", lambda t, d, op=op, y=y: FG_BINARY[op](t, y(d)), lambda a, op=op, b=b: BINARY[op](a, b))
  check(g)

@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_casts(data):
  """chains of casts between every pair of dtypes (NaN and inf too: the two devices must agree even where numpy is not the judge)"""
  g = start(data, special=data.draw(st.booleans()))
  for _ in range(data.draw(st.integers(1, 3))):
    if data.draw(st.booleans()): movement(data, g)
    src, dst = g.t.dtype, data.draw(st.sampled_from(ALL))
    g.op(f"x.cast({dst!r})", lambda t, d, dst=dst: t.cast(dst), lambda a, src=src, dst=dst: cast_ref(a, src, dst))
  if data.draw(st.booleans()): reduce(data, g, ops=("sum", "max"))
  check(g)

# ---------------- explicit regressions

def run_both(fn, arr):
  out = {d: fn(Tensor(arr, device=d)).numpy() for d in DEVS}
  return out["CPU"], out["PYTHON"]

LENGTHS = {np.float32: range(1, 80), np.int32: [*range(1, 18), 31, 32, 33, 64], np.float64: [*range(1, 18), 31, 32, 33, 64]}

@pytest.mark.parametrize("dtype", list(LENGTHS))
def test_flip_sum_lengths(dtype):
  """gcc 12.2 -O3 miscompiled the reversed loads of flip(0).sum(): arange(10) summed to 53 (each length is a new kernel)"""
  bad = []
  for n in LENGTHS[dtype]:
    a = np.arange(n, dtype=dtype)
    cpu, py = run_both(lambda t: t.flip(0).sum(), a)
    if not cpu == py == a.sum(): bad.append((n, cpu.item(), py.item(), a.sum().item()))
  assert not bad, f"flip(0).sum() wrong for (n, CPU, PYTHON, numpy) = {bad}"

REGRESSIONS = {
  "arange10_flip_sum": ((10,), lambda t: t.flip(0).sum(), lambda a: a[::-1].sum()),
  "6x2_flip1_sum": ((6, 2), lambda t: t.flip(1).sum(), lambda a: a[:, ::-1].sum()),
  "6x2_flip0_sum": ((6, 2), lambda t: t.flip(0).sum(), lambda a: a[::-1].sum()),
  "6x2_flip1_sum_axis1": ((6, 2), lambda t: t.flip(1).sum(1), lambda a: a[:, ::-1].sum(1)),
  "64x64_flip0_sum": ((64, 64), lambda t: t.flip(0).sum(), lambda a: a[::-1].sum()),
  "64x64_flip1_sum": ((64, 64), lambda t: t.flip(1).sum(), lambda a: a[:, ::-1].sum()),
  "64x64_flip01_sum_axis0": ((64, 64), lambda t: t.flip((0, 1)).sum(0), lambda a: a[::-1, ::-1].sum(0)),
  "64x64_flip1_sum_axis1": ((64, 64), lambda t: t.flip(1).sum(1), lambda a: a[:, ::-1].sum(1)),
  "64x64_flip0_mean": ((64, 64), lambda t: t.flip(0).mean(), lambda a: a[::-1].mean()),
  "64x64_flip1_mean_axis1": ((64, 64), lambda t: t.flip(1).mean(1), lambda a: a[:, ::-1].mean(1)),
  "arange10_flip_mean": ((10,), lambda t: t.flip(0).mean(), lambda a: a[::-1].mean()),
  "neg_step_slice_sum": ((33,), lambda t: t[::-2].sum(), lambda a: a[::-2].sum()),
  "flip_max": ((14,), lambda t: t.flip(0).max(), lambda a: a[::-1].max()),
  "flip_sum_plus_one": ((14,), lambda t: t.flip(0).sum() + 1, lambda a: a[::-1].sum() + 1),
}

def test_flip_sum_two_pass():
  """2**16 elements into one output reduce in two kernels (REDUCE_GROUPS partial results, then their sum)"""
  a = (np.arange(2**16) % 7).astype(np.float32)
  for fn, want in ((lambda t: t.flip(0).sum(), a.sum()), (lambda t: t[::-1].max(), a.max()), (lambda t: t.flip(0).mean(), a.mean())):
    cpu, py = run_both(fn, a)
    assert cpu == py == want, (cpu, py, want)

@pytest.mark.parametrize("name", list(REGRESSIONS))
def test_regression(name):
  shape, fn, ref = REGRESSIONS[name]
  a = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
  cpu, py = run_both(fn, a)
  want = ref(a.astype(np.float64)).astype(np.float32)
  np.testing.assert_array_equal(py, want, err_msg="PYTHON")
  np.testing.assert_array_equal(cpu, want, err_msg="CPU")

@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.bfloat16, dtypes.float64, dtypes.float16])
def test_int64_to_float_rounding(dtype):
  """int64 -> float rounds once, to nearest even: 2**60 + 2**36 + 1 is just above a float32 midpoint, so it rounds up (C does);
  rounding through float64 first (2**60 + 2**36, a tie) rounds it down to 2**60"""
  vals = [2**60 + 2**36 + 1, -(2**60 + 2**36 + 1), 2**53 + 1, 2**62 + 2**38 + 1, 2**31 - 1, -2**63, 2**63 - 1, 65519, 65520]
  a = np.array(vals, np.int64)
  want = fit(a.astype(np.float32) if dtype == dtypes.bfloat16 else a, dtype)  # bfloat16 converts through float32 (docs/dtypes.md)
  for dev in DEVS:
    np.testing.assert_array_equal(Tensor(a, device=dev).cast(dtype).numpy(), want, err_msg=dev)
    # a constant is cast at graph build time (dtype.truncate), not by the device: the same rounding applies
    np.testing.assert_array_equal(Tensor.full((1,), vals[0], dtype=dtypes.int64, device=dev).cast(dtype).numpy(), want[:1], err_msg=f"{dev} folded")
