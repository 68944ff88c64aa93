"""renderer/cstyle.py and renderer/cvector.py: the C they emit (compiles, scalar under NOOPT, SIMD vector types where
the target has them) and what it computes, against the PYTHON interpreter running the same linear UOps.
test_differential.py already runs broad random graphs over every dtype on CPU vs PYTHON; the property test here aims
at what the C renderer special-cases: vector widths that do not fill a register (sizes 1..40), unaligned and strided
vector loads (shrink offsets, steps), several input dtypes feeding one float32 vector store, narrow-dtype loads and
stores, reduce tiles split into mixed-width vectors then folded into a scalar, and NOOPT (plain scalar C) results."""
import re
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings, strategies as st
from fusegrad import Tensor, Context, dtypes
from fusegrad.device import Device
from fusegrad.schedule import create_schedule
from fusegrad.codegen.lowerer import lower_kernel
from fusegrad.codegen.linearize import linearize
from fusegrad.engine.realize import get_program
from fusegrad.uop.ops import Ops

W = Device["CPU"].renderer.simd_width

@pytest.fixture(autouse=True)
def cpu_device():
  """Sources are inspected on the CPU device whatever DEV says (results() names its devices itself)."""
  prev = Device.DEFAULT
  Device.DEFAULT = "CPU"
  try: yield
  finally: Device.DEFAULT = prev
NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.int32: np.int32,
      dtypes.int64: np.int64, dtypes.float16: np.float16, dtypes.bfloat16: np.float32, dtypes.float32: np.float32, dtypes.float64: np.float64}

def data(rng, shape, dtype) -> np.ndarray:
  """Small values (floats are multiples of 1/4) so every sum and product below is exact in any order."""
  if dtype == dtypes.bool: return rng.random(shape) < 0.5
  if dtypes.is_int(dtype): return rng.integers(0 if dtype == dtypes.uint8 else -4, 5, shape).astype(NP[dtype])
  return (rng.integers(-16, 17, shape) / 4).astype(NP[dtype])

def kernel_sources(t: Tensor, noopt: bool = False) -> list[str]:
  """The C function (without the prelude) of each of t's kernels, as realize would build it."""
  with Context(NOOPT=int(noopt)):
    return [get_program(si.device, si.ast).spec.src.split("void ")[-1] for si in create_schedule([t.uop])[0] if si.ast.src[0].op is not Ops.COPY]

def full_sources(t: Tensor, noopt: bool = False) -> list[str]:
  with Context(NOOPT=int(noopt)):
    return [get_program(si.device, si.ast).spec.src for si in create_schedule([t.uop])[0] if si.ast.src[0].op is not Ops.COPY]

def vector_types(src: str) -> set[str]: return set(re.findall(r"\b[fi]32x\d+a?\b", src))

def widths(src: str) -> set[int]: return {int(m) for m in re.findall(r"\bf32x(\d+)\b", src)}

def results(fn, arrays: list[tuple[np.ndarray, object]]) -> dict[str, np.ndarray]:
  """fn on CPU (default optimizations), CPU with NOOPT=1 and PYTHON, from the same input data."""
  out = {}
  for name, dev, noopt in (("CPU", "CPU", 0), ("CPU NOOPT", "CPU", 1), ("PYTHON", "PYTHON", 0)):
    with Context(NOOPT=noopt):
      out[name] = fn(*[Tensor(a, device=dev, dtype=dt) for a, dt in arrays]).numpy()
  return out

def assert_all_equal(out: dict[str, np.ndarray], msg: str = ""):
  ref = out["PYTHON"]
  for name, got in out.items():
    assert got.dtype == ref.dtype and got.shape == ref.shape, f"{name}: {got.dtype}{got.shape} vs PYTHON {ref.dtype}{ref.shape}{msg}"
    np.testing.assert_array_equal(got, ref, err_msg=f"{name} differs from PYTHON{msg}")

# ---------------- the C source

def test_every_kernel_compiles_and_declares_its_buffers():
  rng = np.random.default_rng(0)
  x = Tensor(data(rng, (6, 10), dtypes.float32))
  i8 = Tensor(data(rng, (6, 10), dtypes.int8))
  for t in (x * 2 + 1, (x.T @ x).relu(), (x > 0).where(x, i8.cast(dtypes.float32)).max(1), i8 * i8 + 3, x.cast(dtypes.float16) * 3):
    items, _ = create_schedule([t.uop])
    for si in items:
      spec = Device["CPU"].renderer.render(linearize(lower_kernel(si.ast), Device["CPU"].renderer))
      prg = Device["CPU"].compile(spec)  # raises with the compiler's message if the C is invalid
      assert prg.task is not None and spec.name in spec.src
      params = re.search(rf"void {spec.name}\((.*?)\)", spec.src).group(1)
      for idx, written in spec.globals:
        decl = re.search(rf"([\w\s]*?)\*\s*restrict data{idx}\b", params)
        assert decl is not None, f"data{idx} is not a parameter: {params}"
        assert decl.group(1).strip().startswith("const") != written, f"data{idx}: written={written} but declared '{decl.group(0)}'"
      assert params.endswith("int core_id, int n_cores")

def test_variables_are_int_parameters():
  from fusegrad import Variable
  v = Variable("pos", 0, 100)
  t = Tensor(np.arange(8, dtype=np.float32)) * Tensor(v.bind(3)).float()
  (src,) = full_sources(t)
  assert re.search(r"void \w+\(.*\bint pos\b.*\)", src)
  assert t.tolist() == [3.0 * i for i in range(8)]

KERNELS = {
  "elementwise_1024": lambda x: x * 2 + 1,
  "where_max": lambda x: (x > 0).where(x, -x).maximum(x * 0.5),
  "sum_rows": lambda x: x.reshape(32, 32).sum(1),
  "sum_cols": lambda x: x.reshape(32, 32).sum(0),
  "matmul": lambda x: x.reshape(32, 32) @ x.reshape(32, 32),
  "softmax": lambda x: x.reshape(16, 64).softmax(-1),
}

@pytest.mark.parametrize("name", list(KERNELS))
def test_noopt_renders_plain_scalar_c(name):
  x = Tensor(data(np.random.default_rng(1), (1024,), dtypes.float32))
  for src in full_sources(KERNELS[name](x), noopt=True):
    assert not vector_types(src) and "vector_size" not in src, f"NOOPT=1 emitted vector code:\n{src}"
  assert any(vector_types(s) for s in kernel_sources(KERNELS[name](x))), "the default build emitted no vector code"

def test_simd_elementwise_float32_1024():
  x = Tensor(data(np.random.default_rng(2), (1024,), dtypes.float32))
  (src,) = kernel_sources(x * 3 - 1)
  assert widths(src) == {W}, f"expected f32x{W} only:\n{src}"
  assert f"*(f32x{W}*)(data0+" in src, "the store is not one vector store"
  np.testing.assert_array_equal((x * 3 - 1).numpy(), x.numpy() * 3 - 1)

def expected_widths(n: int) -> set[int]:
  """W-wide vectors and a tail of halves for the lanes left over (58 = 7 x 8 + 2), if that tail is whole vectors;
  else the widest of W, W/2, W/4, W/8 (at least 2) that divides n; empty: scalar."""
  if n > W and n % W and (n % W) % 2 == 0: return {W} | {w for w in (W // 2, W // 4, W // 8) if w >= 2 and n % W & w}
  return next(({w} for w in (W, W // 2, W // 4, W // 8) if w >= 2 and n % w == 0), set())

@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 10, 12, 14, 17, 20, 24, 28, 31, 36, 40, 58, 62, 100002])
def test_vector_width_follows_the_size(n):
  # elementwise over n: vectors of the widest width that divides n, or W-wide ones and a tail, unaligned by a shrink
  # offset of 1 (100002: threads split the vectors and the last one does the tail)
  rng = np.random.default_rng(n)
  a, b = data(rng, (n + 3,), dtypes.float32), data(rng, (n,), dtypes.float32)
  def fn(x, y):
    return x[1:n + 1] * y + (x[1:n + 1] < y).where(y, x[2:n + 2])
  x, y = Tensor(a), Tensor(b)
  (src,) = kernel_sources(fn(x, y))
  assert widths(src) == expected_widths(n), f"n={n}:\n{src}"
  want = a[1:n + 1] * b + np.where(a[1:n + 1] < b, b, a[2:n + 2])
  assert_all_equal(results(fn, [(a, dtypes.float32), (b, dtypes.float32)]))
  np.testing.assert_array_equal(fn(x, y).numpy(), want)

@pytest.mark.parametrize("dtype", [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.int64])
def test_lane_loads_of_other_dtypes_feed_a_float_vector(dtype):
  # integer and bool loads are read lane by lane into a float32 vector: one kernel, vector store, exact values
  rng = np.random.default_rng(3)
  a, b = data(rng, (4, 24), dtypes.float32), data(rng, (4, 25), dtype)
  def fn(x, y):
    return x * y[:, 1:].cast(dtypes.float32) + x.maximum(y[:, :24].cast(dtypes.float32))
  (src,) = kernel_sources(fn(Tensor(a), Tensor(b)))
  assert widths(src), f"no vector code for {dtype} loads:\n{src}"
  out = results(fn, [(a, dtypes.float32), (b, dtype)])
  assert_all_equal(out)
  bf = b.astype(np.float32)
  np.testing.assert_array_equal(out["CPU"], a * bf[:, 1:] + np.maximum(a, bf[:, :24]))

def test_float16_loads_convert_as_vectors():
  # a float16 operand (LLM weights) is loaded a vector at a time and converted to float32 in one instruction where the
  # target has it (renderer.half_loads: F16C, AVX-512); contiguous, strided and gated reads, and a matvec's reduce
  rng = np.random.default_rng(5)
  a, h = data(rng, (4, 40), dtypes.float32), data(rng, (4, 81), dtypes.float16)
  def fn(x, y): return x * y[:, :80:2].float() + y[:, 1:41].float().relu() + y[:, 41:].pad(((0, 0), (1, 0)))[:, :40].float()
  (src,) = kernel_sources(fn(Tensor(a), Tensor(h)))
  assert ("ldh_f32x" in src) == Device["CPU"].renderer.half_loads and (not Device["CPU"].renderer.half_loads or widths(src)), src
  out = results(fn, [(a, dtypes.float32), (h, dtypes.float16)])
  assert_all_equal(out)
  hf = h.astype(np.float32)
  np.testing.assert_array_equal(out["CPU"], a * hf[:, :80:2] + np.maximum(hf[:, 1:41], 0) + np.pad(hf[:, 41:], ((0, 0), (1, 0)))[:, :40])
  w, x = data(rng, (96, 64), dtypes.float16), data(rng, (1, 64), dtypes.float32)
  np.testing.assert_array_equal((Tensor(x) @ Tensor(w).T).numpy(), x @ w.astype(np.float32).T)

@pytest.mark.parametrize("dtype", [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int64, dtypes.float16, dtypes.bfloat16])
def test_narrow_and_wide_stores_stay_scalar_and_exact(dtype):
  # only float32 stores vectorize: a store of another dtype keeps the scalar loop, with a strided, flipped read
  rng = np.random.default_rng(4)
  a = data(rng, (3, 34), dtypes.float32)
  def fn(x):
    return (x[:, ::2].flip(1) * 2 - 1).cast(dtype)
  srcs = kernel_sources(fn(Tensor(a)))
  assert not any(widths(s) for s in srcs), "\n".join(srcs)
  assert_all_equal(results(fn, [(a, dtypes.float32)]))

@pytest.mark.parametrize("shape,axis", [((8, 14), 0), ((6, 10), 0), ((5, 40), 0), ((4, 7), 0), ((3, 56), 1), ((2, 96), 1), ((4, 20), 1)])
def test_reduce_tiles_and_lanes_match_python(shape, axis):
  # sum/max over rows (VECTOR tiles of mixed widths, e.g. 14 = 8 + 4 + 2) or along rows (LANES vectors folded into a scalar)
  rng = np.random.default_rng(sum(shape))
  a, b = data(rng, shape, dtypes.float32), data(rng, shape, dtypes.int8)
  def fn(x, y):
    return (x * y.cast(dtypes.float32)).sum(axis) + x.max(axis)
  srcs = kernel_sources(fn(Tensor(a), Tensor(b)))
  red = [s for s in srcs if s.startswith("r_")]
  assert red
  if shape[1] % 2 == 0: assert any(widths(s) for s in red), "\n".join(red)
  out = results(fn, [(a, dtypes.float32), (b, dtypes.int8)])
  assert_all_equal(out)
  np.testing.assert_array_equal(out["CPU"], (a * b).sum(axis) + a.max(axis))

# ---------------- property test: random renderer-shaped kernels, CPU vs CPU NOOPT vs PYTHON

LEAF_DTYPES = [dtypes.float32] * 6 + [dtypes.float16, dtypes.bfloat16, dtypes.int8, dtypes.uint8, dtypes.int32,
               dtypes.int64, dtypes.bool]
OUT_DTYPES = [dtypes.float32] * 8 + [dtypes.int8, dtypes.uint8, dtypes.int64, dtypes.float16, dtypes.bfloat16, dtypes.bool]

@st.composite
def kernels(draw):
  """(description, fn(*tensors) -> tensor, [(array, dtype)]): a few leaves read through offsets, steps, flips or broadcasts,
  combined by elementwise ops, maybe reduced, cast to the output dtype."""
  rng = np.random.default_rng(draw(st.integers(0, 2**16)))
  rows = draw(st.sampled_from([1, 1, 2, 3]))
  n = draw(st.one_of(st.integers(1, 40), st.integers(1, 20).map(lambda h: 2 * h)))  # even sizes vectorize: more of them
  arrays, readers, desc = [], [], []
  for i in range(draw(st.integers(1, 3))):
    dt = draw(st.sampled_from(LEAF_DTYPES))
    view = draw(st.sampled_from(["plain", "offset", "offset", "step2", "flip", "row", "col"]))
    off = draw(st.integers(1, 3))
    shape = {"plain": (rows, n), "offset": (rows, n + off + 1), "step2": (rows, 2 * n + 1), "flip": (rows, n), "row": (1, n), "col": (rows, 1)}[view]
    arrays.append((data(rng, shape, dt), dt))
    readers.append({"plain": lambda t: t, "offset": lambda t, o=off: t[:, o:o + n], "step2": lambda t: t[:, 1::2][:, :n],
                    "flip": lambda t: t.flip(1), "row": lambda t: t.expand(rows, n), "col": lambda t: t.expand(rows, n)}[view])
    desc.append(f"x{i}: {dt} {view} {shape} off={off}")
  ops = [draw(st.sampled_from(["add", "mul", "sub", "maximum", "minimum", "where_lt", "where_bool", "cmp_cast", "neg_abs", "cast_f32"]))
         for _ in range(len(arrays) + draw(st.integers(0, 1)))]
  red = draw(st.sampled_from([None, None, "sum_last", "max_last", "sum_rows"]))
  out_dt = draw(st.sampled_from(OUT_DTYPES))
  desc.append(f"ops {ops} reduce {red} out {out_dt}")
  def num(t): return t.cast(dtypes.int8) if t.dtype == dtypes.bool else t
  def fn(*ts):
    vals = [r(t) for r, t in zip(readers, ts)]
    acc = vals[0]
    for k, op in enumerate(ops):
      other = vals[(k + 1) % len(vals)]
      if op == "add": acc = num(acc) + num(other)
      elif op == "mul": acc = num(acc) * num(other)
      elif op == "sub": acc = num(acc) - num(other)
      elif op == "maximum": acc = num(acc).maximum(num(other))
      elif op == "minimum": acc = num(acc).minimum(num(other))
      elif op == "where_lt": acc = (num(acc) < num(other)).where(acc, other)
      elif op == "where_bool": acc = (other if other.dtype == dtypes.bool else other != 0).where(acc, num(acc) * 2)
      elif op == "cmp_cast": acc = (num(acc) == num(other)).cast(dtypes.float32) + (num(acc) != 0).cast(dtypes.float32) * 0.5
      elif op == "neg_abs": acc = (-num(acc)).abs() if acc.dtype != dtypes.uint8 else acc
      elif op == "cast_f32": acc = acc.cast(dtypes.float32)
    if red == "sum_last": acc = num(acc).sum(-1)
    elif red == "max_last": acc = num(acc).max(-1)
    elif red == "sum_rows": acc = num(acc).sum(0)
    return acc.cast(out_dt)
  return "\n".join(desc), fn, arrays

@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(kernels())
def test_c_renderer_matches_python_interpreter(k):
  desc, fn, arrays = k
  note(desc)
  out = results(fn, arrays)
  assert_all_equal(out, "\n" + desc + "\ninputs:\n" + "\n".join(f"{a.tolist()}" for a, _ in arrays))

def test_gcc_kernels_do_not_parse_immintrin():
  # <immintrin.h> took 0.2 s of gcc's 0.3 s per kernel (a cold MNIST step compiles ~165): gcc gets the builtins instead
  import subprocess
  from fusegrad.runtime import ops_cpu
  from fusegrad.schedule import create_schedule
  from fusegrad.codegen.program import _render
  cc = ops_cpu.find_compiler()
  if ops_cpu.is_clang(cc): pytest.skip("clang includes the header")
  a = Tensor(np.ones((8, 40), np.float16)).realize()
  si = create_schedule([(a.float() @ Tensor.ones(40, 48)).uop])[0][-1]
  src = _render(si.device, si.ast, None).src
  assert "fma_f32x" in src and "ldh_f32x" in src
  pre = subprocess.run([cc, *ops_cpu.compiler_flags(cc)[1:], "-E", "-x", "c", "-"], input=src, capture_output=True, text=True)
  assert pre.returncode == 0 and "immintrin.h" not in pre.stdout, pre.stderr[-2000:]

@pytest.mark.parametrize("n", [3, 8, 13, 16, 24, 37])
def test_gated_contiguous_loads_are_masked_vector_loads(n):
  # a padded read is a contiguous load whose edge lanes are off: one masked vector load (off lanes read nothing, so a
  # lane before the buffer's start or past its end cannot fault) instead of one scalar load per lane
  from fusegrad.schedule import create_schedule
  from fusegrad.codegen.program import _render
  x = np.arange(1, 2 * n + 1, dtype=np.float32).reshape(2, n)
  for pads in [(1, 0), (0, 3), (4, 5), (n, 1)]:
    t = Tensor(x).realize()
    out = t.pad(((0, 0), pads)) * 2 + t.pad(((0, 0), pads[::-1]))
    np.testing.assert_array_equal(out.numpy(), np.pad(x, ((0, 0), pads)) * 2 + np.pad(x, ((0, 0), pads[::-1])))
  wide = Tensor(np.ones((2, 16), np.float32)).realize().pad(((0, 0), (4, 4))) * 2  # rows of 24: vectors of 16 and 8
  assert re.search(r"= mld_f32x\d+\(data1", _render("CPU", create_schedule([wide.uop])[0][-1].ast, None).src)

@pytest.mark.parametrize("n", [2, 5, 8, 16, 24, 37])
def test_stride2_loads_are_two_vector_loads_and_a_shuffle(n):
  # every other element (a stride-2 conv's row) is two vector loads and a shuffle, not a load per lane; the second load
  # ends on the last element read, so a row that ends the buffer is not read past its end
  from fusegrad.schedule import create_schedule
  from fusegrad.codegen.program import _render
  x = np.arange(1, 3 * (2 * n - 1) + 1, dtype=np.float32).reshape(3, 2 * n - 1)
  for read in (lambda t: t[:, ::2], lambda t: t[:, 1::2][:, :n - 1], lambda t: t.flip(1)[:, ::2]):
    out = read(Tensor(x).realize()) * 2 + 1
    np.testing.assert_array_equal(out.numpy(), read(Tensor(x, device="PYTHON")).numpy() * 2 + 1)
  src = _render("CPU", create_schedule([(Tensor(x).realize()[:, ::2] * 2).uop])[0][-1].ast, None).src
  assert bool(re.search(r"ld2_f32x\d+\(data1", src)) == (n % 2 == 0), src.split("void ")[-1]  # even rows run as vectors, odd ones lane by lane

LANE_TESTS = {  # (fn of (x, labels), shape of x): per-lane bools from ints that move by a constant from lane to lane
  "one_hot": (lambda x, y: (Tensor.arange(40, device=x.device)[None, :] == y[:, None]).where(x, 0.0), (6, 40)),
  "causal": (lambda x, y: (Tensor.arange(24, device=x.device)[:, None] >= Tensor.arange(24, device=x.device)[None, :]).where(x, -1.0), (24, 24)),
  "stepped": (lambda x, y: ((Tensor.arange(26, device=x.device) * 3 - 7 < 20) | (y[:1] > 30)).where(x, 1.5), (3, 26)),
  "padded": (lambda x, y: x.pad(((0, 0), (1, 1))) * 2, (4, 56)),
  "int64_far": (lambda x, y: (Tensor.arange(16, device=x.device, dtype=dtypes.int64) + 2**40 < 2**40 + 5).where(x, 0.0), (2, 16)),
}

@pytest.mark.parametrize("name", list(LANE_TESTS))
def test_lane_comparisons_are_vector_compares(name):
  # a comparison of lane indices (a mask, a one-hot label, a causal mask, a pad's edge) is one 32-bit int vector
  # compare, not a scalar test per lane; ints that may not fit in 32 bits stay lane by lane
  fn, shape = LANE_TESTS[name]
  rng = np.random.default_rng(7)
  a, labels = data(rng, shape, dtypes.float32), rng.integers(0, 40, shape[0]).astype(np.int32)
  assert_all_equal(results(fn, [(a, dtypes.float32), (labels, dtypes.int32)]), f" ({name})")
  src = "\n".join(kernel_sources(fn(Tensor(a), Tensor(labels))))
  vector_compare = re.search(rf"\(\(i32x{W}\){{0, -?\d", src) is not None
  assert vector_compare == (name != "int64_far"), src

@pytest.mark.parametrize("op", ["eq", "lt", "gt"])
def test_int64_labels_compare_with_lanes_as_vectors(op):
  # an int64 label (torch's default for class indices) against 32-bit lane indices: clamped just outside the lanes'
  # range it compares as itself, so the one-hot test of cross-entropy is one vector compare, even for labels far outside
  # 32 bits
  labels = np.array([3, 2**40, -2**40, 39, -1, 0, 2**31, -2**31 - 1], dtype=np.int64)
  cmp = {"eq": lambda a, b: a == b, "lt": lambda a, b: a < b, "gt": lambda a, b: a > b}[op]
  def fn(x, y): return cmp(Tensor.arange(40, device=x.device)[None, :], y[:, None]).where(x, -1.0)
  a = data(np.random.default_rng(3), (8, 40), dtypes.float32)
  out = results(fn, [(a, dtypes.float32), (labels, dtypes.int64)])
  assert_all_equal(out)
  np.testing.assert_array_equal(out["CPU"], np.where(cmp(np.arange(40)[None, :], labels[:, None]), a, -1.0))
  src = "\n".join(kernel_sources(fn(Tensor(a), Tensor(labels))))
  assert re.search(rf"\(\(i32x{W}\){{0, 1, 2", src), src
  # unsigned labels against unsigned lanes compare as unsigned (lane by lane: a bound of -1 would compare as 2**64 - 1)
  ulabels = np.array([0, 3, 39, 40, 2**63 + 3, 2**40, 7, 1], dtype=np.uint64)
  def ufn(x, y): return cmp(Tensor.arange(40, device=x.device).cast(dtypes.uint64)[None, :], y[:, None]).where(x, -1.0)
  uout = results(ufn, [(a, dtypes.float32), (ulabels, dtypes.uint64)])
  assert_all_equal(uout)
  np.testing.assert_array_equal(uout["CPU"], np.where(cmp(np.arange(40, dtype=np.uint64)[None, :], ulabels[:, None]), a, -1.0))
