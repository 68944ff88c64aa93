"""tinygrad programs import these names: helpers, dtypes, Device facts, top-level exports, `function`, TinyJit's
arguments and its handling of non-tensor arguments, and the optimizer's tinygrad behaviour (PYTHON device: no compiler)."""
import gzip, math, pathlib, tempfile
import numpy as np
import pytest
import fusegrad
from fusegrad import Tensor, TinyJit, Context, Variable, nn
from fusegrad.nn import optim

# ======================================================================== top-level names

def test_top_level_names():
  from fusegrad import getenv, fetch, function, Device, GlobalCounters, dtypes, UOp  # noqa: F401
  from fusegrad.dtype import dtypes as d2, DType, DTypeLike, DTYPES_DICT  # noqa: F401
  from fusegrad.device import Device as D2, is_dtype_supported  # noqa: F401
  from fusegrad.helpers import (getenv as g2, fetch as f2, tqdm, trange, get_child, partition, temp, DEV, flatten, dedup, argfix,  # noqa: F401
                                all_same, colored, Timing, prod, round_up, ceildiv, make_tuple, unwrap, to_mv, Context as C2)
  assert fusegrad.getenv is g2 and fusegrad.fetch is f2 and fusegrad.Variable is Variable

def test_helpers_tinygrad_programs_import(tmp_path, monkeypatch):
  from fusegrad.helpers import to_function_name, diskcache_get, diskcache_put, cpu_time_execution, WINO, IMAGE, CACHELEVEL
  assert to_function_name("r_4\x1b[31m_3n1\x1b[0m") == "r_4_3n1" and to_function_name("E 2.b") == "E2022Eb"
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  assert diskcache_put("kernels", {"src": "x", "n": 2}, [1, 2.5]) == [1, 2.5]
  assert diskcache_get("kernels", {"n": 2, "src": "x"}) == [1, 2.5] and diskcache_get("kernels", "other") is None
  diskcache_put("kernels", {"src": "x", "n": 2}, "new")
  assert diskcache_get("kernels", {"src": "x", "n": 2}) == "new"
  with Context(CACHELEVEL=0): assert diskcache_get("kernels", {"src": "x", "n": 2}) is None
  with pytest.raises(ValueError, match="table names"): diskcache_get("bad; table", "k")
  assert cpu_time_execution(lambda: None, enable=True) >= 0 and cpu_time_execution(lambda: None, enable=False) is None
  with Context(WINO=1, IMAGE=0): assert WINO.value == 1 and not IMAGE
  assert CACHELEVEL.value == 2

def test_schedule_lists_the_kernels_without_running_them():
  a = Tensor([1.0, 2.0], device="PYTHON")
  b, c = (a + 1) * 2, a.sum()
  items = b.schedule(c)
  assert len(items) == 2 and all(si.ast.op is fusegrad.uop.ops.Ops.SINK for si in items)
  assert b.tolist() == [4.0, 6.0] and c.item() == 3.0
  assert (a + 0).realize().schedule() == []

def test_nn_datasets_and_xavier_uniform():
  assert nn.datasets.mnist is fusegrad.nn.datasets.mnist
  with pytest.raises(AttributeError): nn.nothing_here  # noqa: B018
  t = Tensor.xavier_uniform(30, 50, device="PYTHON")
  assert t.shape == (30, 50) and abs(t).max().item() <= (6 / 80) ** 0.5

# ======================================================================== helpers

class TestFetch:
  def test_local_paths(self, tmp_path):
    p = tmp_path / "w.bin"
    p.write_bytes(b"abc")
    for arg in (str(p), p, p.as_uri()):
      got = fusegrad.fetch(arg)
      assert isinstance(got, pathlib.Path) and got == p and got.read_bytes() == b"abc"

  def test_missing_local_file(self, tmp_path):
    with pytest.raises(FileNotFoundError, match="no file"): fusegrad.fetch(str(tmp_path / "nope.bin"))

  @pytest.mark.parametrize("url", ["https://example.com/model.safetensors", "http://x.org/a.gz", "s3://bucket/key"])
  def test_network_url_is_never_downloaded(self, url, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(RuntimeError, match="does not download anything") as e: fusegrad.fetch(url)
    assert "fetch('/path/to/file')" in str(e.value) and "name=" in str(e.value)

  def test_network_url_with_a_local_copy(self, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    local = tmp_path / "copy.bin"
    local.write_bytes(b"w")
    assert fusegrad.fetch("https://example.com/w.bin", name=local) == local
    # tinygrad's cache location for a name: a file placed there is used
    cached = tmp_path / "fusegrad" / "downloads" / "sub" / "w.bin"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"c")
    assert fusegrad.fetch("https://example.com/w.bin", name="w.bin", subdir="sub") == cached

  def test_gunzip_local_file(self, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    gz = tmp_path / "d.gz"
    gz.write_bytes(gzip.compress(b"hello" * 100))
    out = fusegrad.fetch(gz, gunzip=True)
    assert out != gz and out.read_bytes() == b"hello" * 100

class TestHelpers:
  def test_trange_and_tqdm(self, capsys):
    from fusegrad.helpers import tqdm, trange
    assert list(trange(4, desc="x")) == [0, 1, 2, 3]
    bar = tqdm(total=10, desc="loss", unit="B", unit_scale=True)
    bar.update(4); bar.set_description("loss 1.0"); bar.update(6); bar.update(close=True)
    assert bar.n == 10 and "loss 1.0" in capsys.readouterr().err
    assert list(tqdm(["a", "b"], disable=True)) == ["a", "b"]
    with tqdm(total=2) as t: t.update(2)

  def test_get_child(self):
    from fusegrad.helpers import get_child
    class M: pass
    m = M()
    m.layers = [{"w": 1}, {"w": {"inner": 5}}]
    assert get_child(m, "layers.1.w.inner") == 5 and get_child(m, "layers.0.w") == 1
    with pytest.raises(AttributeError, match="'nope'"): get_child(m, "nope.x")
    with pytest.raises(IndexError, match="layers.7"): get_child(m, "layers.7")
    with pytest.raises(KeyError, match="'zz'"): get_child(m, "layers.0.zz")

  def test_small_helpers(self):
    from fusegrad.helpers import (partition, temp, argfix, all_same, dedup, flatten, unwrap, make_tuple, round_up, ceildiv, prod, getenv,
                                  merge_dicts, fully_flatten, strip_parens, cdiv, cmod, next_power2, round_down, get_single_element)
    assert partition([1, 2, 3, 4], lambda x: x % 2 == 0) == ([2, 4], [1, 3])
    assert temp("x.bin") == (pathlib.Path(tempfile.gettempdir()) / "x.bin").as_posix()
    assert argfix((1, 2)) == (1, 2) == argfix(1, 2) and argfix() == ()
    with pytest.raises(ValueError): argfix((1,), 2)
    assert all_same([1, 1]) and dedup([3, 1, 3]) == [3, 1] and flatten([[1], [2, 3]]) == [1, 2, 3] and fully_flatten([[1, [2]], 3]) == [1, 2, 3]
    with pytest.raises(AssertionError, match="None"): unwrap(None)
    assert make_tuple(2, 3) == (2, 2, 2) and round_up(5, 4) == 8 and round_down(5, 4) == 4 and ceildiv(5, 4) == 2 and prod([2, 3]) == 6
    assert (cdiv(-7, 2), cmod(-7, 2), cdiv(7, 0), next_power2(5), get_single_element([4])) == (-3, -1, 0, 8, 4)
    assert strip_parens("(a+b)") == "a+b" and strip_parens("(a)+(b)") == "(a)+(b)"
    assert merge_dicts([{"a": 1}, {"b": 2}]) == {"a": 1, "b": 2}
    with pytest.raises(RuntimeError, match="two values"): merge_dicts([{"a": 1}, {"a": 2}])
    assert getenv("FUSEGRAD_SURELY_UNSET_VAR", 3) == 3

  def test_dev_context_var(self):
    from fusegrad.helpers import DEV
    from fusegrad.device import Device
    prev = Device.DEFAULT
    with Context(DEV="NULL"):
      assert DEV.device == "NULL" and Device.DEFAULT == "NULL" and Tensor([1.0]).device == "NULL"
    assert Device.DEFAULT == prev
    with Context(DEV="cpu:clang"): assert (DEV.device, DEV.renderer, Device.renderer_override) == ("CPU", "CLANG", "CLANG")

# ======================================================================== dtypes and devices

class TestDTypes:
  def test_repr_is_tinygrad_s(self):
    from fusegrad.dtype import dtypes
    names = {dtypes.float: "float", dtypes.float32: "float", dtypes.int32: "int", dtypes.int64: "long", dtypes.half: "half", dtypes.double: "double",
             dtypes.uint8: "uchar", dtypes.int8: "char", dtypes.bool: "bool", dtypes.bfloat16: "bfloat16", dtypes.uint64: "ulong"}
    for d, n in names.items(): assert repr(d) == str(d) == f"dtypes.{n}"
    assert eval(repr(dtypes.ushort), {"dtypes": dtypes}) is dtypes.uint16

  def test_min_max(self):
    from fusegrad.dtype import dtypes
    assert (dtypes.int8.min, dtypes.int8.max, dtypes.uint8.min, dtypes.uint8.max) == (-128, 127, 0, 255)
    assert (dtypes.int64.min, dtypes.uint32.max) == (-2**63, 2**32 - 1)
    assert dtypes.float32.min == -math.inf and dtypes.half.max == math.inf and (dtypes.bool.min, dtypes.bool.max) == (False, True)
    assert dtypes.max(dtypes.int16) == dtypes.int16.max  # the older staticmethod form still works

  def test_tables(self):
    from fusegrad.dtype import dtypes, DTYPES_DICT, DTypeLike, DType, to_dtype
    assert DTYPES_DICT["float"] is dtypes.float32 and DTYPES_DICT["half"] is dtypes.float16 and "void" not in DTYPES_DICT
    assert isinstance(dtypes.float, DTypeLike) and isinstance("float", DTypeLike) and to_dtype("long") is dtypes.int64
    assert dtypes.bfloat16 in dtypes.floats and dtypes.uint8 in dtypes.ints and len(dtypes.all) == 15
    assert dtypes.float.scalar() is dtypes.float and dtypes.float.count == 1 and isinstance(dtypes.int, DType)

class TestDevice:
  @pytest.mark.parametrize("dev", ["PYTHON", "CPU", "NULL"])
  def test_renderer_supported_dtypes(self, dev):
    from fusegrad.device import Device, is_dtype_supported
    from fusegrad.dtype import ALL_DTYPES
    r = Device[dev].renderer
    assert set(ALL_DTYPES) <= set(r.supported_dtypes()) and Device[dev].device == dev
    assert all(is_dtype_supported(d, dev) for d in ALL_DTYPES)

  def test_default(self):
    from fusegrad.device import Device
    assert Device.DEFAULT == "PYTHON"  # conftest
    assert Device.default is Device["PYTHON"] and Device.canonicalize("python:0") == "PYTHON"

# ======================================================================== function

def test_function_decorator():
  from fusegrad import function
  @function
  def f(x: Tensor, y: Tensor) -> Tensor: return (x * y + 1).contiguous()
  @function(precompile=True, allow_implicit=True)
  def g(x: Tensor) -> tuple[Tensor, Tensor]: return f(x, x), x.sum()
  a, b = Tensor([1.0, 2.0]), Tensor([3.0, 4.0])
  assert f(a, b).tolist() == [4.0, 9.0] and f(b, a).tolist() == [4.0, 9.0] and f(a, a).tolist() == [2.0, 5.0]
  sq, s = g(b)
  assert sq.tolist() == [10.0, 17.0] and s.item() == 7.0
  class M:
    def __init__(self): self.w = Tensor([2.0])
    @function
    def __call__(self, x: Tensor) -> Tensor: return x * self.w
  assert M()(a).tolist() == [2.0, 4.0]
  x = Tensor([1.0, 2.0], requires_grad=True)
  f(x, x).sum().backward()
  assert x.grad.tolist() == [2.0, 4.0]
  with pytest.raises(RuntimeError, match="must return a Tensor"): function(lambda x: 3)(a)
  with pytest.raises(NotImplementedError, match="grad_fxn"): function(grad_fxn=lambda *a: a)(lambda x: x)

# ======================================================================== TinyJit

class TestJitArguments:
  def test_tinygrad_keywords(self):
    f = TinyJit(lambda x: (x + 1).realize(), prune=True, optimize=True)
    assert [f(Tensor([float(i)])).item() for i in range(4)] == [1.0, 2.0, 3.0, 4.0]
    assert f.prune and f.cnt == 2
    with pytest.raises(NotImplementedError): TinyJit(None, captured=object())

  def test_non_tensor_argument_change_recaptures(self):
    calls = []
    def step(x: Tensor, k: float, mode: str = "mul") -> Tensor:
      calls.append((k, mode))
      return (x * k if mode == "mul" else x + k).realize()
    f, x = TinyJit(step), Tensor([1.0, 2.0])
    seq = [(2.0, "mul"), (2.0, "mul"), (2.0, "mul"), (3.0, "mul"), (3.0, "mul"), (3.0, "mul"), (2.0, "mul"), (3.0, "add"), (3.0, "add"),
           (3.0, "add"), (3, "add")]
    got = [f(x, k, mode=m).tolist() for k, m in seq]
    want = [[k * 1.0, k * 2.0] if m == "mul" else [1.0 + k, 2.0 + k] for k, m in seq]
    assert got == want
    # each key runs eagerly once, captures once, then replays: the 2.0 call after the 3.0 ones replays its own capture
    assert calls.count((2.0, "mul")) == 2 and calls.count((3.0, "mul")) == 2
    # the int 3 is another key than the float 3.0 (its kernels could differ): it runs the function again
    assert calls.count((3.0, "add")) == 3 and type(calls[-1][0]) is int

  def test_bound_variable_argument_is_not_baked_in(self):
    v = Variable("jitpos", 0, 64)
    calls = []
    def step(x: Tensor, pos) -> Tensor:
      calls.append(1)
      return (x + Tensor(pos).cast(x.dtype)).realize()
    f = TinyJit(step)
    assert [f(Tensor([1.0, 2.0]), v.bind(i)).tolist() for i in range(5)] == [[1.0 + i, 2.0 + i] for i in range(5)]
    assert len(calls) == 2 and f.cnt == 2  # replays pass the new value instead of capturing again

  def test_uop_variable_spelling(self):
    from fusegrad.uop.ops import UOp
    v = UOp.variable("pos", 0, 9)
    assert v is Variable("pos", 0, 9) and Tensor(v.bind(4)).item() == 4
    with pytest.raises(ValueError, match="outside its bounds"): v.bind(10)

  def test_unhashable_argument_names_it(self):
    f = TinyJit(lambda x, table: (x * float(table[0])).realize())
    with pytest.raises(TypeError, match="argument table is a ndarray"): f(Tensor([1.0]), np.ones(2))
    with pytest.raises(TypeError, match=r"argument table\[1\] is a ndarray"): f(Tensor([1.0]), [1, np.ones(2)])
    assert f(Tensor([1.0]), (2, 3)).tolist() == [2.0]  # tuples and lists of plain values are fine

  def test_method_capture_is_per_instance(self):
    class Scale:
      def __init__(self, k): self.k = Tensor([k])
      @TinyJit
      def __call__(self, x: Tensor) -> Tensor: return (x * self.k).realize()
    a, b = Scale(2.0), Scale(5.0)
    for _ in range(4): assert a(Tensor([1.0])).item() == 2.0 and b(Tensor([1.0])).item() == 5.0

  def test_jit_disabled_unwraps_self(self):
    class M:
      @TinyJit
      def f(self, x): return (x + 1).realize()
    with Context(JIT=0): assert M().f(Tensor([1.0])).item() == 2.0

# ======================================================================== optimizer: tinygrad behaviour

class TestOptimizer:
  def test_step_needs_training_mode(self):
    w = Tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    (w * 2).sum().backward()
    with pytest.raises(RuntimeError, match="Tensor.training"): opt.step()
    assert w.tolist() == [1.0, 2.0]
    with Tensor.train(): opt.step()
    assert w.tolist() == [0.0, 1.0]

  def test_duplicated_parameters_update_once(self):
    w = Tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w, w], lr=0.5)
    assert len(opt.params) == 1
    (w * 2).sum().backward()
    with Tensor.train(): opt.step()
    assert w.tolist() == [0.0, 1.0]

  def test_non_grad_params_are_buffers(self):
    w, buf = Tensor([1.0], requires_grad=True), Tensor([3.0], requires_grad=False)
    opt = optim.Adam([w, buf], lr=0.1)
    assert opt.params == [w] and any(b is buf for b in opt.buffers)

  def test_group_indexing(self):
    a, b = Tensor([1.0], requires_grad=True), Tensor([1.0], requires_grad=True)
    o1, o2 = optim.SGD([a]), optim.Adam([b])
    assert optim.OptimizerGroup(o1, o2)[1] is o2

def test_lstm_cell_shapes_and_defaults():
  Tensor.manual_seed(0)
  cell = nn.LSTMCell(3, 4)
  assert cell.weight_ih.shape == (16, 3) and cell.weight_hh.shape == (16, 4) and cell.bias_ih.tolist() == [0.0] * 16
  h, c = cell(Tensor.ones(2, 3))
  assert h.shape == c.shape == (2, 4)
  h1, c1 = cell(Tensor.ones(3), (h[0], c[0]))
  assert h1.shape == (4,)
  assert nn.LSTMCell(3, 4, bias=False).bias_hh is None
  with pytest.raises(ValueError, match="needs x of shape"): cell(Tensor.ones(2, 5))
  with pytest.raises(ValueError, match="hc must be"): cell(Tensor.ones(2, 3), (h, c[:1]))

# ======================================================================== Tensor entry points

def test_a_realized_bound_variable_stays_usable():
  # Tensor(bound Variable) has no device of its own; once realized its buffer had none either, and the next graph
  # reading it crashed in the schedule cache
  t = Tensor(Variable("i", 1, 10).bind(3))
  assert t.item() == 3 and (t * 2).item() == 6 and (t + Tensor(1)).item() == 4

def test_from_uop_from_url_schedule_with_vars_kernelize(tmp_path):
  v = Variable("n", 1, 10).bind(4)
  assert Tensor.from_uop(v).item() == 4 and Tensor.from_uop((v * 3) + 2).item() == 14 and Tensor.from_uop(v - 1).item() == 3
  assert not Tensor.from_uop(v * 2, requires_grad=True).requires_grad
  assert Tensor.from_uop(fusegrad.UOp.const(fusegrad.dtypes.int16, 7)).dtype == fusegrad.dtypes.int16
  assert Tensor.from_uop(fusegrad.UOp.const(fusegrad.dtypes.float32, 2.5)).item() == 2.5
  with pytest.raises(Exception, match="from_uop: a "): Tensor.from_uop(Tensor([1, 2]).uop)
  f = tmp_path / "blob.bin"
  f.write_bytes(bytes([3, 1, 4, 1, 5]))
  assert Tensor.from_url(f.as_uri()).to(None).tolist() == [3, 1, 4, 1, 5]
  gz = tmp_path / "blob.gz"
  gz.write_bytes(gzip.compress(bytes([2, 7])))
  assert Tensor.from_url(str(gz), gunzip=True).to(None).tolist() == [2, 7]
  with pytest.raises(RuntimeError, match="does not download anything"): Tensor.from_url("https://example.invalid/nothing.bin")
  x = Tensor([1.0, 2.0])
  items, var_vals = (x + 1).schedule_with_vars()
  assert len(items) == 1 and var_vals == {}
  assert x.kernelize() is x and x.kernelize(Tensor([3.0])) is x

def test_shard_on_one_device_moves_and_on_several_says_why():
  x = Tensor([1.0, 2.0])
  assert x.shard((x.device,)).tolist() == [1.0, 2.0] and x.to([x.device]).device == x.device
  assert x.shard_like(x).device == x.device and x.shard_((x.device,), axis=0) is x
  with pytest.raises(NotImplementedError, match="no multi-device tensors"): x.shard((x.device, x.device), axis=0)
  with pytest.raises(NotImplementedError, match="no multi-device tensors"): x.to((x.device, x.device))
  with pytest.raises(IndexError): x.shard((x.device,), axis=3)

def test_default_float_env_sets_the_float_dtype_at_import():
  import os, subprocess, sys
  run = lambda v: subprocess.run([sys.executable, "-c", "from fusegrad import Tensor, dtypes; print(dtypes.default_float, Tensor([1.5]).dtype, Tensor.rand(2).dtype)"],  # noqa: E731
                                 capture_output=True, text=True, env={**os.environ, "DEFAULT_FLOAT": v})
  assert run("HALF").stdout.split() == ["dtypes.half"] * 3 and run("bfloat16").stdout.split()[0] == "dtypes.bfloat16"
  bad = run("int32")
  assert bad.returncode != 0 and "DEFAULT_FLOAT='int32' is not a float dtype" in bad.stderr
