"""The PYTHON device's 'source': the linear UOps themselves, turned into a list of small Python steps."""
from __future__ import annotations
import struct
from fusegrad.dtype import FP8S, dtypes, truncate, bf16_to_float, float_to_bf16, float_to_fp8, fp8_to_float
from fusegrad.uop.ops import GroupOp, Ops, UOp, exec_alu
from fusegrad.renderer import ProgramSpec, Renderer, estimate, kernel_name, launch_size

class PythonRenderer(Renderer):
  """The interpreter runs any kernel; it takes the kernel optimizer's shapes of an AVX-512 CPU (16 lanes, 32 registers),
  so that the CPU's optimized kernels, interpreted, are checked against the CPU's compiled ones. With a GPU's facts
  (renderer/cuda.py's GPU_FACTS, DEV=PYTHON:CUDA) it gets the GPU lowering instead and runs each kernel once per thread of its launch."""
  simd_width, vector_registers = 16, 32
  def render(self, uops: list[UOp]) -> ProgramSpec:
    name, shape = kernel_name(uops)
    written = {u.src[0].arg for u in uops if u.op is Ops.STORE}
    globals_ = sorted((u.arg, u.arg in written) for u in uops if u.op is Ops.DEFINE_GLOBAL)
    vars_ = [u for u in uops if u.op is Ops.DEFINE_VAR]
    flops, mem = estimate(uops)
    src = "\n".join(f"{i}: {u.op.name} {u.dtype} {u.arg if u.op is not Ops.DEFINE_ACC else ''}" for i, u in enumerate(uops))
    grid, block = launch_size(uops, self.block_size) if self.has_threads else (None, None)
    return ProgramSpec(name, src, uops, globals_, vars_, flops, mem, shape, global_size=grid, local_size=block)

def bitcast(v, src, dst):
  # bfloat16 and fp8 have no struct format: they go through their bits (words and bytes)
  sf = "H" if src == dtypes.bfloat16 else "B" if src in FP8S else src.fmt
  df = "H" if dst == dtypes.bfloat16 else "B" if dst in FP8S else dst.fmt
  if src == dtypes.bfloat16 or src in FP8S: v = to_word(v, src)
  out = struct.unpack(df, struct.pack(sf, v))[0]
  return from_word(out, dst) if dst == dtypes.bfloat16 or dst in FP8S else out

def cast(v, src, dst):
  if dtypes.is_float(src) and dtypes.is_int(dst):
    if v != v or v in (float("inf"), float("-inf")): return truncate(dst, dtypes.min(dtypes.int64))
    return truncate(dst, int(v))
  return truncate(dst, v)

def from_word(v, dtype):
  if dtype == dtypes.bfloat16: return bf16_to_float(v)
  if dtype == dtypes.float16: return struct.unpack("e", struct.pack("H", v))[0]
  if dtype in FP8S: return fp8_to_float(v, dtype)
  return v

def to_word(v, dtype):
  if dtype == dtypes.bfloat16: return float_to_bf16(v)
  if dtype == dtypes.float16: return struct.unpack("H", struct.pack("e", v))[0]
  if dtype in FP8S: return float_to_fp8(v, dtype)
  return v

def run_python(uops: list[UOp], mems: list, var_vals: list[int]):
  """Interpret the linear program. mems: memoryviews cast to each buffer's format, in DEFINE_GLOBAL order."""
  for _ in run_thread(uops, mems, var_vals, {}, {}): raise RuntimeError("a barrier in a kernel run without a GPU launch")

def run_thread(uops: list[UOp], mems: list, var_vals: list[int], thread: dict[str, int], shared: dict[str, list], aligned: dict | None = None):
  """Interpret the program as one thread of a GPU launch, yielding at each barrier (so the caller runs every thread of
  the block up to it before any goes on) and at each warp collective, a BARRIER whose arg names it (yields (arg, the
  values of its sources); the caller sends back the lane's result: a shuffle's partner value, a matrix product's value).
  thread: each SPECIAL index's value; shared: the block's shared memory; aligned: loads that start a vector load ->
  the multiple their index must be (an error here is a misaligned vector load on the GPU)."""
  slot = {u: i for i, u in enumerate(uops)}
  vals: list = [None] * len(uops)
  def get(u: UOp):
    if u.op is Ops.CONST: return u.arg
    return vals[slot[u]]
  ends = {}
  stack = []
  for i, u in enumerate(uops):
    if u.op is Ops.RANGE: stack.append(i)
    elif u.op is Ops.ENDRANGE: ends[stack.pop()] = i
  starts = {v: k for k, v in ends.items()}
  accs = {u.arg: i for i, u in enumerate(uops) if u.op is Ops.DEFINE_ACC}
  var_iter = iter(var_vals)
  pc, n = 0, len(uops)
  while pc < n:
    u = uops[pc]
    op = u.op
    if op is Ops.DEFINE_GLOBAL: vals[pc] = mems[u.arg]
    elif op is Ops.DEFINE_VAR: vals[pc] = next(var_iter)
    elif op is Ops.SPECIAL:
      vals[pc] = thread.get(u.arg[0], 0)
      if vals[pc] >= u.arg[1]: return  # a thread past the last element does nothing
    elif op is Ops.DEFINE_LOCAL: vals[pc] = shared.setdefault(u.arg, [0] * u.dtype.size)
    elif op is Ops.BARRIER and isinstance(u.arg, tuple): vals[pc] = yield (u.arg, [get(s) for s in u.src])  # a warp collective
    elif op is Ops.BARRIER:
      yield
      vals[pc] = get(u.src[0])
    elif op is Ops.RANGE:
      vals[pc] = 0
      if get(u.src[0]) <= 0: pc = ends[pc]
    elif op is Ops.ENDRANGE:
      r = starts[pc]
      vals[r] += 1
      if vals[r] < get(uops[r].src[0]): pc = r
    elif op is Ops.LOAD:
      if len(u.src) == 3 and not get(u.src[2]): vals[pc] = truncate(u.dtype, 0)
      elif u.src[0].op is Ops.BARRIER: vals[pc] = get(u.src[0])[get(u.src[1])]  # shared memory holds Python values
      else:
        if aligned and u in aligned and get(u.src[1]) % aligned[u]: raise RuntimeError(f"vector load at index {get(u.src[1])}, not a multiple of {aligned[u]}")
        vals[pc] = from_word(get(u.src[0])[get(u.src[1])], u.dtype)
    elif op is Ops.STORE:  # STORE(buffer, index, value[, gate])
      if len(u.src) < 4 or get(u.src[3]):
        v = get(u.src[2])
        get(u.src[0])[get(u.src[1])] = v if u.src[0].op is Ops.DEFINE_LOCAL else to_word(v, u.src[2].dtype)
    elif op is Ops.STAGE: vals[pc] = [0] * u.arg
    elif op is Ops.DEFINE_ACC:
      vals[pc] = [get(u.src[0])] * u.arg.src[-1].src[0].arg if isinstance(u.arg.arg, tuple) else get(u.src[0])
    elif op is Ops.ACC_UPDATE:
      a = slot[u.src[0]]
      if len(u.src) == 3:
        i = get(u.src[2])
        vals[a][i] = exec_alu(u.arg, u.dtype, [vals[a][i], get(u.src[1])])
      else: vals[a] = exec_alu(u.arg, u.dtype, [vals[a], get(u.src[1])])
    elif op is Ops.REDUCE:
      acc = vals[accs[u]]
      vals[pc] = acc[get(u.arg[1])] if isinstance(u.arg, tuple) else acc
    elif op is Ops.CAST: vals[pc] = cast(get(u.src[0]), u.src[0].dtype, u.dtype)
    elif op is Ops.BITCAST: vals[pc] = bitcast(get(u.src[0]), u.src[0].dtype, u.dtype)
    elif op in GroupOp.ALU: vals[pc] = exec_alu(op, u.dtype, [get(s) for s in u.src])
    elif op in (Ops.CONST, Ops.SKIP): pass  # (SKIP is an optimization: this reference adds the zeros)
    else: raise NotImplementedError(f"PYTHON device cannot run {op}")
    pc += 1
