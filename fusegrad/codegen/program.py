"""One kernel AST -> a compiled program for its device: lower, optimize, linearize, render, compile (cached in memory)."""
from __future__ import annotations
import concurrent.futures
from fusegrad.device import Device
from fusegrad.helpers import DEBUG, NOOPT, PROGRAM_CACHE, SPEC
from fusegrad.uop.ops import Ops, UOp

# in least-recently-used order (oldest first), at most PROGRAM_CACHE entries: a program that sees many shapes would
# otherwise keep every compiled kernel loaded forever
_programs: dict[tuple[str, UOp, object, bool], object] = {}

def _bound(cache: dict) -> None:
  """Drop the least recently used entries over PROGRAM_CACHE (0: no bound). A dropped CPU program unloads its library
  when its last reference goes, so a TinyJit capture or a caller still holding one keeps it working."""
  if (cap := PROGRAM_CACHE.value) > 0:
    while len(cache) > cap: del cache[next(iter(cache))]

def _render(device: str, ast: UOp, opt):
  from fusegrad.codegen.lowerer import lower_kernel
  from fusegrad.codegen.linearize import linearize
  if SPEC:
    from fusegrad.uop.spec import verify_kernel
    verify_kernel(ast)
  renderer = Device[device].renderer
  spec = renderer.render(linearize(lower_kernel(ast), renderer, opt))
  if DEBUG >= 4: print(spec.src)
  if DEBUG >= 5:
    for i, u in enumerate(spec.uops): print(f"{i:4d} {u.op.name:12s} {u.dtype} {[spec.uops.index(s) if s in spec.uops else s.arg for s in u.src]} {u.arg if u.op is not Ops.DEFINE_ACC else ''}")
  return spec

def get_program(device: str, ast: UOp, opt=None):
  """The compiled kernel for `ast` with optimization `opt` (None: the heuristic's choice), cached in memory."""
  key = (device, ast, opt, bool(NOOPT))
  # hot path: pop and reinsert moves a hit to the young end (a plain dict does this faster than OrderedDict.move_to_end)
  if (prg := _programs.pop(key, None)) is not None: _programs[key] = prg
  else:
    prg = _programs[key] = Device[device].compile(_render(device, ast, opt))
    _bound(_programs)
  return prg

def compile_ahead(kernels: list[tuple[str, UOp]], workers: int) -> None:
  """Compile the kernels not in the cache yet (heuristic optimization) at once, `workers` compilers in parallel: the
  renderer runs here (Python), each compiler is its own process, so a schedule's cold start takes a fraction of the time.
  A device with compile_many (the CPU) also links them into one library."""
  if workers < 2: return
  todo = list(dict.fromkeys(k for k in kernels if (*k, None, bool(NOOPT)) not in _programs))
  if len(todo) < 2: return
  devices = {d for d, _ in todo}
  if len(devices) == 1 and hasattr(dev := Device[devices.pop()], "compile_many"):
    progs = dev.compile_many((_render(device, ast, None) for device, ast in todo), workers)  # compiles while rendering
  else:
    specs = [_render(device, ast, None) for device, ast in todo]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
      progs = list(pool.map(lambda ds: Device[ds[0]].compile(ds[1]), zip([d for d, _ in todo], specs)))
  for (device, ast), prg in zip(todo, progs): _programs[(device, ast, None, bool(NOOPT))] = prg
  _bound(_programs)
