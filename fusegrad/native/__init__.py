"""The native core: the hottest loops of eager graph building and realizing (core.c) in C.

Each C function is the exact equivalent of a Python function that stays in the package: the node cache's constructor
and weak-reference callbacks (UOpMeta.__call__, WeakValueCache._forget), elementwise and movement nodes with their facts
(ops._elementwise, ops._movement), scalar constants (OpBuilder.tensor_const), relu and clamp of float tensors, Tensor's
arithmetic dunders with a number or a same-shaped tensor (elementwise._fast_binary), Tensor(node) and the live-tensor
registry's callback (tensor._unregister), the schedule cache's walk (cache._walk) and the CPU kernel launch
(ops_cpu._run_task). install() swaps them in and keeps the Python ones in python_versions. The module is compiled on
first import with the C compiler ($CC, else cc, gcc or clang) and Python's headers, and cached in cache_dir()/native;
where either is missing, or with NATIVE=0, the Python versions run and give the same results (test/unit/test_native.py
checks that they do)."""
from __future__ import annotations
import functools, hashlib, importlib.machinery, importlib.util, os, shutil, subprocess, sys, sysconfig, tempfile
from types import ModuleType
from fusegrad.helpers import cache_dir, getenv

SOURCE = os.path.join(os.path.dirname(__file__), "core.c")
core: ModuleType | None = None  # the loaded module, or None where the Python versions run
why_not = ""  # why core is None
python_versions: dict = {}  # (owner, name) -> the Python function install() replaced there

def _compiler() -> str:
  for cc in [os.environ["CC"]] if os.getenv("CC") else ["cc", "gcc", "clang"]:
    if path := shutil.which(cc): return path
  raise RuntimeError("no C compiler found (tried $CC, cc, gcc, clang)")

def build() -> str:
  """The compiled module's path, compiling it first if this source, compiler and Python have none yet."""
  include = sysconfig.get_paths()["include"]
  if not os.path.exists(os.path.join(include, "Python.h")): raise RuntimeError(f"Python's headers are not installed (no {include}/Python.h)")
  cc = _compiler()
  with open(SOURCE, "rb") as f: src = f.read()
  tag = hashlib.sha256(b"\0".join([src, cc.encode(), sys.version.encode(), include.encode()])).hexdigest()[:24]
  folder = os.path.join(cache_dir(), "native")  # (not beside the kernels, whose disk cache is trimmed)
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, f"core_{tag}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}")
  if os.path.exists(path): return path
  fd, tmp = tempfile.mkstemp(dir=folder, suffix=".so")
  os.close(fd)
  try:
    r = subprocess.run([cc, "-O2", "-DNDEBUG", "-shared", "-fPIC", "-I", include, SOURCE, "-o", tmp], capture_output=True, text=True)
    if r.returncode: raise RuntimeError(f"compiling {SOURCE} failed:\n{r.stderr[-2000:]}")
    os.replace(tmp, path)  # (another process may be building the same file: each renames a whole one)
  finally:
    if os.path.exists(tmp): os.remove(tmp)
  return path

def load() -> ModuleType:
  path = build()
  loader = importlib.machinery.ExtensionFileLoader("fusegrad.native._fgcore", path)
  spec = importlib.util.spec_from_file_location("fusegrad.native._fgcore", path, loader=loader)
  assert spec is not None
  mod = importlib.util.module_from_spec(spec)
  loader.exec_module(mod)
  return mod

def install() -> None:
  """Load the C module and swap its functions in for the Python ones (once, when fusegrad is imported)."""
  global core, why_not
  if not getenv("NATIVE", 1):
    why_not = "NATIVE=0"
    return
  try: mod = load()
  except (RuntimeError, OSError, ImportError) as e:
    why_not = str(e)
    if getenv("DEBUG"): print(f"fusegrad: the native core is not available, the Python versions run: {e}")
    return
  from fusegrad import buffers
  from fusegrad.uop import ops
  from fusegrad.dtype import dtypes
  from fusegrad.tensor import tensor, elementwise, indexing
  from fusegrad.schedule import cache
  from fusegrad.runtime import ops_cpu
  forget = mod.forgetter(ops.UOpMeta.ucache.refs)
  mod.setup(dict(UOp=ops.UOp, Tensor=tensor.Tensor, KeyRef=ops.KeyRef, TensorRef=tensor._TensorRef, ucache_refs=ops.UOpMeta.ucache.refs,
                 ucache_forget=forget, INTS=ops._INTS, void=dtypes.void, bool=dtypes.bool, op_values={op: op._value_ for op in ops.Ops},
                 BUFFER=ops.Ops.BUFFER, RESHAPE=ops.Ops.RESHAPE, BIND=ops.Ops.BIND, CONST=ops.Ops.CONST, COPY=ops.Ops.COPY, SHRINK=ops.Ops.SHRINK,
                 REALIZED=cache.REALIZED, float_dtypes=ops._FLOAT_DTYPES, comparisons=frozenset(ops.GroupOp.Comparison),
                 consts=ops._consts, lazy=tensor._lazy, tensor_const=ops.OpBuilder.tensor_const, tensor_unregister=mod.unregister,
                 CMPLT=ops.Ops.CMPLT, WHERE=ops.Ops.WHERE, DERIVATIVE=ops.DERIVATIVE, relu_vjp=ops._relu_vjp, relu_py=ops.OpBuilder.relu,
                 tensor_relu_py=elementwise.ElementwiseMixin.relu, tensor_clip_py=elementwise.ElementwiseMixin.clip, partial=functools.partial,
                 clamp_vjp=elementwise._clamp_vjp, ops_cpu=ops_cpu, plain_view_py=indexing._plain_view,
                 run_task_py=ops_cpu._run_task))
  swaps = [
    (ops.UOpMeta, "__call__", mod.uop_new),  # (a builtin is not bound: it is called without cls)
    (ops.UOpMeta.ucache, "forget", forget),
    (buffers._realized, "forget", mod.forgetter(buffers._realized.refs)),
    (ops, "_elementwise", mod.elementwise), (elementwise, "_elementwise", mod.elementwise),
    (ops, "_movement", mod.movement), (indexing, "_movement", mod.movement),
    (ops, "_plain_sizes", mod.plain_sizes),
    (indexing, "_plain_view", mod.plain_view),
    (ops.OpBuilder, "tensor_const", staticmethod(mod.tensor_const)),
    (ops.UOp, "relu", mod.method("uop_relu", ops.UOp)),
    (tensor._TensorMeta, "__call__", mod.method("tensor_call", tensor._TensorMeta)),
    (tensor, "_unregister", mod.unregister),
    (tensor.Tensor, "relu", mod.method("tensor_relu", tensor.Tensor)),
    (tensor.Tensor, "clip", mod.method("tensor_clip", tensor.Tensor)), (tensor.Tensor, "clamp", mod.method("tensor_clip", tensor.Tensor)),
    (elementwise, "_fast_binary", mod.fast_binary),
    (cache, "_walk", mod.walk),
    (ops_cpu, "_run_task", mod.run_task)]
  for owner, name, fn in swaps:
    python_versions[(owner, name)] = owner.__dict__.get(name, getattr(owner, name))
    setattr(owner, name, fn)
  mixin = elementwise.ElementwiseMixin
  for name, fn in mod.dunders(tensor.Tensor, {op.name: op for op in ops.Ops}, dict(vars(mixin))).items():
    python_versions[(tensor.Tensor, name)] = getattr(mixin, name)
    setattr(tensor.Tensor, name, fn)
  core = mod
