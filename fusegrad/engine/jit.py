"""TinyJit: run a step function normally once, capture the kernels it launches on the second call, then replay
those kernels directly on later calls (no graph building, scheduling or compiling).

What a replay does with data:
  - Tensor arguments: the captured input buffers are swapped for this call's (shapes/dtypes must match).
  - Other tensors the kernels read (an optimizer's lr, a tensor assigned between calls): each replay reads the buffer
    the tensor holds at that time.
  - State: a tensor that existed before the call and was given a new buffer by it (a parameter after an
    optimizer step, optimizer moments, running stats) is double-buffered: each replay reads its current buffer,
    writes the other one, and rebinds the tensor to the result.
  - Returned tensors view the captured output buffers: the next call overwrites them, so read them first.
  - Random numbers advance as if the function had run (the generator offset is rebased per replay).
  - Non-tensor arguments (ints, floats, strings, tuples of them, objects by identity) select a capture: the jit keeps
    one capture per distinct value (the most recent MAX_CAPTURES), so a call with a new value runs the function
    again instead of replaying kernels built for the old one. An argument that cannot be hashed is an error.
  - Bound Variables (`v.bind(n)`) passed as arguments are not baked in: a replay passes the new value to the kernels.
`function` (tinygrad's graph-function decorator) is defined here too."""
from __future__ import annotations
import collections, dataclasses, functools, inspect, time
from typing import Any, Callable
from fusegrad.device import Buffer, BufferView, Device, write_stamps
from fusegrad.helpers import DEBUG, JIT, GlobalCounters
from fusegrad.engine import realize as _realize, rng
from fusegrad import buffers
from fusegrad.uop.ops import Ops, UOp

MAX_CAPTURES = 16  # captures kept per TinyJit (one per distinct non-tensor arguments); each holds its intermediate buffers

def _tensors_in(x: Any) -> list:
  from fusegrad.tensor import Tensor
  if isinstance(x, Tensor): return [x]
  if isinstance(x, (list, tuple)): return [t for v in x for t in _tensors_in(v)]
  if isinstance(x, dict): return [t for v in x.values() for t in _tensors_in(v)]
  return []

def _rebuild(x: Any, fn: Callable) -> Any:
  from fusegrad.tensor import Tensor
  if isinstance(x, Tensor): return fn(x)
  if isinstance(x, (list, tuple)):
    items = [_rebuild(v, fn) for v in x]
    return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)  # (a named tuple, e.g. max(dim=)'s, takes fields)
  if isinstance(x, dict): return {k: _rebuild(v, fn) for k, v in x.items()}
  return x

def _buffer_node(b: Buffer) -> UOp: return buffers.new_buffer_uop(b.device, b.size, b.dtype, b)

def _buf(t):
  view = buffers.buffer_view(t.uop)
  return buffers.buffer_of(view) if view is not None else None

# ---------------- which capture a call belongs to
class _Identity:
  """Keys an object by identity (a method's `self`: the same model object means the same capture)."""
  __slots__ = ("obj",)
  def __init__(self, obj): self.obj = obj
  def __hash__(self) -> int: return id(self.obj)
  def __eq__(self, o) -> bool: return isinstance(o, _Identity) and o.obj is self.obj

class _Unhashable(TypeError):
  def __init__(self, path: list, x: Any): self.path, self.x = path, x

def _key(x: Any, binds: list, path: list) -> Any:
  """A hashable stand-in for a non-tensor argument: tensors are placeholders (the shape check covers them), bound
  Variables become their variable (their value is collected in `binds` and passed at replay), values are
  (type, value) so 1, 1.0 and True are different captures."""
  from fusegrad.tensor import Tensor
  if isinstance(x, Tensor): return Tensor
  if isinstance(x, (list, tuple)): return (type(x), tuple(_key(v, binds, path + [i]) for i, v in enumerate(x)))
  if isinstance(x, dict): return (dict, tuple((k, _key(v, binds, path + [k])) for k, v in x.items()))
  if isinstance(x, UOp) and x.op is Ops.BIND and x.src[0].op is Ops.DEFINE_VAR:
    binds.append((x.src[0], x.src[1].arg))
    return (Ops.BIND, x.src[0])
  if isinstance(x, _Identity): return x
  try: hash(x)
  except TypeError: raise _Unhashable(path, x) from None
  return (type(x), x)

def _describe(fxn: Callable, path: list) -> str:
  """'argument lr' / 'argument cfg[2]' for a path of (position or keyword, then indices), by the function's signature."""
  first, rest = path[0], "".join(f"[{p!r}]" for p in path[1:])
  if isinstance(first, int):
    try: first = list(inspect.signature(fxn).parameters)[first]
    except (TypeError, ValueError, IndexError): first = f"#{first}"
  return f"argument {first}{rest}"

class JitError(ValueError):
  """A call TinyJit cannot replay correctly (tinygrad's name; a ValueError, what fusegrad raised before)."""

# ---------------- one capture
class _Capture:
  """The state of one (non-tensor arguments) key: cnt 0 = never run, 1 = ran once, 2 = captured and replaying."""
  def __init__(self): self.cnt, self.captured, self.exact_binds = 0, None, None

  def call(self, fxn: Callable, args, kwargs, inputs: list, binds: list) -> Any:
    from fusegrad.tensor import Tensor
    Tensor.realize_all(*inputs)  # also pending assigns, so the capture (and each replay) reads their values
    binds = binds + [b for t in inputs for b in _shape_binds(t.uop)]
    sig = [(_shape_key(t.uop), t.dtype, t.device) for t in inputs]
    if self.cnt == 2 and self.exact_binds is not None and self.exact_binds != tuple(v for _, v in binds): self.__init__()
    if self.cnt == 0:
      self.cnt = 1
      ret = fxn(*args, **kwargs)
      Tensor.realize_all(*_tensors_in(ret))  # (with no outputs too: the writes the call left pending, `t[1:3] = v`)
      return ret
    if self.cnt == 1: return self._capture(fxn, sig, inputs, binds, args, kwargs)
    if sig != self.sig:
      raise JitError(f"TinyJit: inputs changed since capture: got {sig}, captured {self.sig}; call .reset() to capture again")
    return self._replay(inputs, binds)

  def _capture(self, fxn, sig, inputs, binds, args, kwargs) -> Any:
    from fusegrad.tensor import Tensor
    from fusegrad.tensor.tensor import _live_refs
    before = {}
    for r in _live_refs():
      if (t := r()) is not None and (b := _buf(t)) is not None: before[id(t)] = (r, t.uop, b)
    rng0 = rng.counter()
    self.in_bufs = [_buf(t) for t in inputs]
    # a replay puts each call's buffers where the capture's were: one buffer in two argument slots cannot be told apart
    if len({id(b) for b in self.in_bufs if b is not None}) != sum(b is not None for b in self.in_bufs):
      raise JitError("TinyJit: one tensor (or two views of one buffer) was passed as two arguments of the call being captured, so "
                       "the replays could not tell the arguments apart and would compute with the wrong one; pass a copy (x.clone()) for one")
    with _realize.capture() as captured:
      ret = fxn(*args, **kwargs)
      outs = _tensors_in(ret)
      Tensor.realize_all(*outs)  # (and the writes the call left pending: a replay must make them too)
    self.rng = (rng0, rng.counter() - rng0)
    self.sig, self.captured, self.cnt = sig, captured, 2
    self.exact_binds = None if _binds_replaceable(captured, binds) else tuple(v for _, v in binds)
    # an input the step wrote in place (x += 1) keeps its buffer: the new value is copied into it, now and after each replay
    self.written_inputs = []
    for i, t in enumerate(inputs):
      if (b1 := _buf(t)) is not None and b1 is not self.in_bufs[i] and b1.nbytes == self.in_bufs[i].nbytes:
        self.written_inputs.append((i, b1))
        self.in_bufs[i].copyin(b1.as_memoryview())
        t.uop = before[id(t)][1]
    self.state = []
    for r, view0, b0 in before.values():
      t = r()
      if t is None or any(t is o for o in outs) or any(t is i for i in inputs) or (b1 := _buf(t)) is None or b1 is b0: continue
      if (b1.size, b1.dtype, t.shape) == (b0.size, b0.dtype, view0.shape): self.state.append((r, view0, t.uop, b0, b1))
    # tensors the kernels read but the call did not write (an optimizer's lr, running stats assigned between calls):
    # a replay reads whatever buffer each of them holds at that time
    written = {si.bufs[0] for si, _ in captured}
    read = {b for si, _ in captured for b in si.bufs[1:]} - written
    stateful = {id(r()) for r, *_ in self.state if r() is not None}
    self.implicit = [(r, b0) for r, _, b0 in before.values() if b0 in read and (t := r()) is not None and id(t) not in stateful
                     and not any(t is i for i in inputs)]
    self.ret, self.out_views = ret, [t.uop for t in outs]
    # a returned input, a view of one or of a tensor the kernels read (`return x, x + y`, `x[1:]`) is no kernel's output:
    # the replay views this call's buffer instead of the captured one (it returned the capture's values ever after)
    swapped = {b for b in self.in_bufs if b is not None} | {b0 for _, b0 in self.implicit}
    self.out_reads = [{u: b for u in v.toposort() if u.op is Ops.BUFFER and (b := buffers.buffer_of(u)) in swapped} for v in self.out_views]
    swappable = swapped | {b for *_, b0, b1 in self.state for b in (b0, b1)}
    self.captured = captured = _keep_static_outputs(captured, written, swappable | {_buf(t) for t in outs})
    self.launches = [_Launch(si, prg, swappable, written) for si, prg in captured]
    self.written, self.copies = {si.bufs[0] for si, _ in captured}, {}
    run = [k.prg.spec for k in self.launches if k.run is not None]
    self.counts = (len(run), sum(s.flops for s in run), sum(s.mem_bytes for s in run))
    return ret

  def _unalias(self, subst: dict) -> None:
    """Where a buffer a replay reads in place of a captured one (an input, a tensor read but not written, a state
    tensor's current value) is one that this replay's kernels write, read a private copy of it instead. Such a buffer is
    a previous call's result: an output fed back (`x = step(x)`), or a returned parameter read after its own update.
    Read in place, a kernel saw the value another kernel (or itself, at another element) had just written."""
    writes = {subst.get(o, o) for o in self.written}
    for key in [k for k, cur in subst.items() if cur is not k and cur in writes and k not in self.written]:
      cur = subst[key]
      if (copy := self.copies.get(key)) is None: copy = self.copies[key] = Buffer(cur.device, cur.size, cur.dtype)
      subst[key] = copy.copyin(cur.as_memoryview())

  def _replay(self, inputs, binds) -> Any:
    from fusegrad.tensor import Tensor
    subst = {cap: _buf(t) for cap, t in zip(self.in_bufs, inputs)}
    for r, b0 in self.implicit:
      if (t := r()) is not None and (cur := _buf(t)) is not None and cur is not b0 and (cur.size, cur.dtype) == (b0.size, b0.dtype): subst[b0] = cur
    rebind = []
    for r, v0, v1, b0, b1 in self.state:
      if (t := r()) is None: continue
      cur = b0 if t.uop is v0 else b1 if t.uop is v1 else _buf(t)  # the tensor holds one of its two buffers unless reassigned
      target, subst[b0], subst[b1] = (v0, cur, b0) if cur is b1 else (v1, cur, b1)
      rebind.append((t, target))
    self._unalias(subst)
    rng_shift, new_vals = rng.counter() - self.rng[0], dict(binds)
    # the loop touches as few objects per kernel as it can: after a kernel has streamed megabytes through the caches,
    # each one is a cache miss (Python costs 2-3x more per kernel in a b128 MNIST step than in a b2 one). Without
    # DEBUG>=2 the kernels are counted in GlobalCounters once, after the loop.
    debug, kernel_s, clock, skipped = DEBUG.value >= 2, 0.0, time.perf_counter, []
    for k in self.launches:
      if k.run is None:
        if k.prg is None: _realize.launch(k.si, None, [subst.get(b, b) for b in k.si.bufs], {})  # a copy
        continue  # else nothing to compute (an empty output)
      if k.static:  # its buffers hold what they held after its last run (weights unchanged): its output is still valid
        bufs = [subst.get(b, b) for b in k.si.bufs]
        if (stamps := [b.stamp for b in bufs]) == k.last and not any(b.aliased for b in bufs):
          skipped.append(k.prg.spec)
          continue
      for i, b in k.swaps: k.run.set_buffer(i, subst.get(b, b).ensure_allocated()._mem)
      if k.si.var_vals:
        var_vals = {v: new_vals[v] if v in new_vals else rng.replayed_offset(val, rng_shift) if rng.is_offset_var(v) else val for v, val in k.si.var_vals}
        k.run.set_vars([var_vals[v] for v in k.prg.spec.vars])
      if debug: _realize.timed(k.si, k.prg, k.run)
      else:
        st = clock()
        k.run()
        k.sync()
        kernel_s += clock() - st
      (out := subst.get(k.out, k.out)).stamp = next(write_stamps)
      if k.static: k.last = [out.stamp, *stamps[1:]]
    if not debug:
      n, ops, mem = self.counts
      GlobalCounters.add(n - len(skipped), ops - sum(s.flops for s in skipped), mem - sum(s.mem_bytes for s in skipped), kernel_s)
    rng.advance(self.rng[1])
    for t, view in rebind: t.uop = view
    # (the new value may be another argument's buffer, `x.assign(a)`: this call's a, not the capture's)
    for i, b1 in self.written_inputs: _buf(inputs[i]).copyin(subst.get(b1, b1).as_memoryview())
    out_views = self.out_views
    if any(self.out_reads):  # (rare: most outputs are kernels' buffers)
      nodes = {buffers.buffer_of(bv): bv for t in [*inputs, *(r() for r, _ in self.implicit)] if t is not None and (bv := buffers.buffer_view(t.uop)) is not None}
      out_views = [v if not reads else v.substitute({u: nodes.get(nb := subst.get(b, b)) or _buffer_node(nb) for u, b in reads.items()})
                   for v, reads in zip(self.out_views, self.out_reads)]
    outs = iter(out_views)
    if any(v.vshape is not v.shape for v in out_views):  # symbolic sizes of the outputs take this call's values
      fresh = {UOp(Ops.BIND, var.dtype, (var, UOp.const(var.dtype, old))): var.bind(new_vals[var])
               for v in out_views for var, old in _shape_binds(v) if var in new_vals}
      outs = iter([v.substitute(fresh) for v in out_views])
    return _rebuild(self.ret, lambda _: Tensor(next(outs)))

class _Launch:
  """One captured kernel or copy, ready to replay. A kernel keeps its arguments bound between replays (a launcher from
  its device): a replay rewrites only the buffers it may swap (`swaps`: inputs, state, tensors read but not written).
  A `static` kernel takes no variables and reads only buffers no kernel of the capture shares or rewrites (weights,
  constants, inputs, and results _keep_static_outputs gave a buffer of their own): a replay skips it while every buffer
  it touches still carries the write stamp of its last run, which is what makes a skip correct."""
  def __init__(self, si, prg, swappable: set, written: set):
    self.si, self.prg, self.out, self.last = si, prg, si.bufs[0], None
    self.static = _is_static(si, prg, written)
    self.swaps = [(i, b) for i, b in enumerate(si.bufs) if b in swappable]
    vals, self.sync = dict(si.var_vals), Device[si.device].synchronize
    self.run = None if prg is None or si.bufs[0].size == 0 else \
      _realize.launcher(prg, [b.ensure_allocated()._mem for b in si.bufs], [vals[v] for v in prg.spec.vars])

def _is_static(si, prg, written: set) -> bool:
  """A kernel worth checking for a skip: it takes no variables (the random number offset is one) and reads nothing in
  `written` (the buffers the captured kernels write, as memory planning left them)."""
  return prg is not None and not si.var_vals and not any(b in written or isinstance(b, BufferView) for b in si.bufs[1:])

STATIC_KEEP_BYTES = 512 << 20  # the most memory one capture adds to keep static kernels' results between replays

def _keep_static_outputs(captured: list, written: set, fixed: set) -> list:
  """Memory planning lets intermediates share buffers, so a static kernel's output (a conv's channels-last weight copy) is
  often overwritten later in the step, and every replay would have to compute it again. Give such an output a buffer of
  its own (its kernel and the readers of that value use it), where the result is no larger than its inputs (a new
  layout, not an expansion such as dequantized weights), within STATIC_KEEP_BYTES: the replay can then skip it."""
  writes = collections.Counter(si.bufs[0] for si, _ in captured)
  out, budget = list(captured), STATIC_KEEP_BYTES
  for i, (si, prg) in enumerate(out):
    o = si.bufs[0]
    if writes[o] < 2 or o in fixed or not _is_static(si, prg, written) or o.nbytes > min(budget, sum(b.nbytes for b in si.bufs[1:])): continue
    budget -= o.nbytes
    own = Buffer(o.device, o.size, o.dtype)
    out[i] = (dataclasses.replace(si, bufs=(own, *si.bufs[1:])), prg)
    for j in range(i + 1, len(out)):  # the readers of this value, until the next kernel that writes the shared buffer
      sj, pj = out[j]
      if o in sj.bufs[1:]: out[j] = (dataclasses.replace(sj, bufs=(sj.bufs[0], *(own if b is o else b for b in sj.bufs[1:]))), pj)
      if sj.bufs[0] is o: break
  return out

def _shape_binds(u: UOp) -> list:
  """(Variable, value) for each bound Variable in u's symbolic sizes."""
  return [(b.src[0], b.src[1].arg) for s in u.vshape if isinstance(s, UOp) for b in s.toposort() if b.op is Ops.BIND] if u.vshape is not u.shape else []

def _shape_key(u: UOp) -> tuple:
  """u's shape with each symbolic size as its expression of unbound Variables: the same for every binding."""
  if u.vshape is u.shape: return u.shape
  return tuple(s.substitute({b: b.src[0] for b in s.toposort() if b.op is Ops.BIND}) if isinstance(s, UOp) else s for s in u.vshape)

def _binds_replaceable(captured: list, binds: list) -> bool:
  """Whether each Variable bound in the arguments reaches the kernels under its own name with the captured value, so a
  replay can pass a new value. Not when a kernel also saw a second binding of it (the scheduler renames one of them):
  then the capture is only reused for the same values."""
  for var, val in binds:
    name, bounds = var.arg[0], var.arg[1:]
    for si, _ in captured:
      for v, x in si.var_vals:
        if (v is var and x != val) or (v is not var and v.arg[0].startswith(name + "_") and v.arg[1:] == bounds): return False
  return True

class TinyJit:
  """Capture the kernels of a step function and replay them (see the module docstring for what a replay does).

  Takes tinygrad's arguments: TinyJit(fxn, captured=None, prune=False, optimize=False). `prune` and `optimize` are
  accepted and change nothing: prune (tinygrad runs kernels that do not depend on the inputs only once) is an
  optimisation, and every captured kernel is replayed instead, which gives the same results. `captured` (a pickled
  capture) is not supported."""
  def __init__(self, fxn: Callable | None = None, captured: Any = None, prune: bool = False, optimize: bool = False):
    if captured is not None: raise NotImplementedError("TinyJit(captured=...) is not supported: pass the function and let it capture")
    self.fxn, self.prune, self.optimize = fxn, prune, optimize
    self._captures: dict[Any, _Capture] = {}
    self._last: _Capture | None = None
  def __get__(self, obj, objtype=None):  # decorating a method binds self; captures are per instance
    return functools.partial(self.__call__, _Identity(obj)) if obj is not None else self
  def reset(self): self._captures, self._last = {}, None
  @property
  def cnt(self) -> int: return self._last.cnt if self._last is not None else 0
  @property
  def captured(self) -> list | None: return self._last.captured if self._last is not None else None

  def __call__(self, *args, **kwargs) -> Any:
    if self.fxn is None: raise TypeError("TinyJit needs a function: use @TinyJit or TinyJit(fn)")
    bound = bool(args) and isinstance(args[0], _Identity)
    call_args = (args[0].obj,) + args[1:] if bound else args
    # inside another TinyJit's capture this one runs its function: the kernels go into that capture (replaying its own
    # would hide them from it, and the outer replays would return stale values)
    if not JIT or _realize.is_capturing(): return self.fxn(*call_args, **kwargs)
    from fusegrad.tensor import Tensor
    if not kwargs and all(type(a) is Tensor or type(a) is _Identity for a in args):  # the usual step(x, y): no walk over the arguments
      key, binds, inputs = (tuple(a if type(a) is _Identity else Tensor for a in args), ()), [], [a for a in args if type(a) is Tensor]
    else:  # (keyword tensors in the key's sorted order: in call order, f(b=x, a=y) then f(a=x, b=y) swapped the buffers)
      (key, binds), inputs = self._key(args, kwargs), _tensors_in(call_args) + _tensors_in([kwargs[k] for k in sorted(kwargs)])
    if (entry := self._captures.get(key)) is None or entry is not self._last:  # keep the most recently used last
      entry = self._captures.pop(key, None) or _Capture()
      self._captures[key] = entry
      while len(self._captures) > MAX_CAPTURES: del self._captures[next(iter(self._captures))]
    self._last = entry
    return entry.call(self.fxn, call_args, kwargs, inputs, binds)

  def _key(self, args, kwargs) -> tuple[Any, list]:
    binds: list = []
    try: return (tuple(_key(a, binds, [i]) for i, a in enumerate(args)), tuple(sorted((k, _key(v, binds, [k])) for k, v in kwargs.items()))), binds
    except _Unhashable as e:  # positions count the method's self, as the unbound function's parameters do
      raise TypeError(f"TinyJit: {_describe(self.fxn, e.path)} is a {type(e.x).__name__}, which cannot be hashed, so the jit cannot tell whether it "
                      "changed since the capture. Pass it as a Tensor or as a hashable value (a tuple, number or string).") from None

class _function:
  """A function of Tensors used as one reusable graph piece (tinygrad's `@function`).

  Differences from tinygrad, none of which changes results:
    - The body runs on every call and its lazy graph is used as it is; tinygrad wraps it in a CALL node so a repeated
      body is scheduled once. Here the scheduler's cache makes a repeated identical graph cheap instead.
    - precompile, precompile_backward and rematerialize are accepted and change nothing (they are about when kernels
      are compiled and which intermediates are kept).
    - allow_implicit is not enforced: a body that reads tensors other than its arguments (captured weights) works
      with either setting, where tinygrad raises unless allow_implicit=True.
    - realizing inside the body is allowed (tinygrad forbids device use there).
    - grad_fxn (a custom backward) is not supported and raises, because ignoring it could change the gradients.
  As in tinygrad, the body must return a Tensor or a tuple of Tensors."""
  def __init__(self, fxn: Callable, precompile: bool = False, precompile_backward: bool = False, allow_implicit: bool = False,
               grad_fxn: Callable | None = None, rematerialize: bool = False):
    if not callable(fxn): raise TypeError(f"function needs a callable, got {type(fxn).__name__}")
    if grad_fxn is not None: raise NotImplementedError("function(grad_fxn=...) is not supported: gradients come from differentiating the body")
    self.fxn, self.precompile, self.precompile_backward, self.allow_implicit = fxn, precompile, precompile_backward, allow_implicit
    functools.update_wrapper(self, fxn)
  def __get__(self, obj, objtype=None): return functools.partial(self.__call__, obj) if obj is not None else self
  def __call__(self, *args, **kwargs) -> Any:
    from fusegrad.tensor import Tensor
    ret = self.fxn(*args, **kwargs)
    if isinstance(ret, Tensor) or (isinstance(ret, tuple) and all(isinstance(x, Tensor) for x in ret)): return ret
    name = getattr(self.fxn, "__qualname__", type(self.fxn).__name__)
    raise RuntimeError(f"function {name} returned a {type(ret).__name__}; it must return a Tensor or a tuple of Tensors")

def function(fxn: Callable | None = None, *, precompile: bool = False, precompile_backward: bool = False, allow_implicit: bool = False,
             grad_fxn: Callable | None = None, rematerialize: bool = False) -> Any:
  """`@function` or `@function(precompile=True, ...)`: mark a function of Tensors as a reusable graph function
  (see _function for what differs from tinygrad)."""
  opts = dict(precompile=precompile, precompile_backward=precompile_backward, allow_implicit=allow_implicit, grad_fxn=grad_fxn,
              rematerialize=rematerialize)
  return _function(fxn, **opts) if fxn is not None else lambda f: _function(f, **opts)
