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
  - Non-tensor arguments are not part of the capture: changing them does not change what is replayed."""
from __future__ import annotations
import functools
from typing import Any, Callable
from fusegrad.helpers import JIT
from fusegrad.engine import realize as _realize
from fusegrad import schedule as sched

def _tensors_in(x: Any) -> list:
  from fusegrad.tensor import Tensor
  if isinstance(x, Tensor): return [x]
  if isinstance(x, (list, tuple)): return [t for v in x for t in _tensors_in(v)]
  if isinstance(x, dict): return [t for v in x.values() for t in _tensors_in(v)]
  return []

def _rebuild(x: Any, fn: Callable) -> Any:
  from fusegrad.tensor import Tensor
  if isinstance(x, Tensor): return fn(x)
  if isinstance(x, (list, tuple)): return type(x)(_rebuild(v, fn) for v in x)
  if isinstance(x, dict): return {k: _rebuild(v, fn) for k, v in x.items()}
  return x

def _buf(t):
  view = sched.buffer_view(t.uop)
  return sched.buffers[view] if view is not None else None

def _view_buf(view): return sched.buffers[sched.buffer_view(view)]

class TinyJit:
  def __init__(self, fxn: Callable | None = None):
    self.fxn, self.cnt, self.captured = fxn, 0, None
  def __get__(self, obj, objtype=None):  # decorating a method binds self
    return functools.partial(self.__call__, obj) if obj is not None else self
  def reset(self): self.cnt, self.captured = 0, None

  def __call__(self, *args, **kwargs) -> Any:
    from fusegrad.tensor import Tensor
    if self.fxn is None: raise TypeError("TinyJit needs a function: use @TinyJit or TinyJit(fn)")
    inputs = _tensors_in(args) + _tensors_in(kwargs)
    if not JIT: return self.fxn(*args, **kwargs)
    if inputs: Tensor.realize_all(*inputs)
    sig = [(t.shape, t.dtype, t.device) for t in inputs]
    if self.cnt == 0:
      self.cnt = 1
      ret = self.fxn(*args, **kwargs)
      if outs := _tensors_in(ret): Tensor.realize_all(*outs)
      return ret
    if self.cnt == 1: return self._capture(sig, inputs, args, kwargs)
    if sig != self.sig:
      raise ValueError(f"TinyJit: inputs changed since capture: got {sig}, captured {self.sig}; call .reset() to capture again")
    return self._replay(inputs)

  def _capture(self, sig, inputs, args, kwargs) -> Any:
    from fusegrad.tensor import Tensor, _all_tensors
    before = {}
    for r in list(_all_tensors.values()):
      if (t := r()) is not None and (b := _buf(t)) is not None: before[id(t)] = (r, t.uop, b)
    rng0 = Tensor._rng_counter
    _realize.capturing = []
    try:
      ret = self.fxn(*args, **kwargs)
      outs = _tensors_in(ret)
      if outs: Tensor.realize_all(*outs)
    finally: captured, _realize.capturing = _realize.capturing, None
    self.rng = (rng0, Tensor._rng_counter - rng0)
    self.sig, self.captured, self.cnt = sig, captured, 2
    self.in_bufs = [_buf(t) for t in inputs]
    self.state = []
    for r, view0, b0 in before.values():
      t = r()
      if t is None or any(t is o for o in outs) or (b1 := _buf(t)) is None or b1 is b0: continue
      if (b1.size, b1.dtype, t.shape) == (b0.size, b0.dtype, view0.shape): self.state.append((r, view0, t.uop))
    # tensors the kernels read but the call did not write (an optimizer's lr, running stats assigned between calls):
    # a replay reads whatever buffer each of them holds at that time
    written = {si.bufs[0] for si, _ in captured}
    read = {b for si, _ in captured for b in si.bufs[1:]} - written
    stateful = {id(r()) for r, _, _ in self.state if r() is not None}
    self.implicit = [(r, b0) for r, _, b0 in before.values() if b0 in read and (t := r()) is not None and id(t) not in stateful
                     and not any(t is i for i in inputs)]
    self.ret, self.out_views = ret, [t.uop for t in outs]
    return ret

  def _replay(self, inputs) -> Any:
    from fusegrad.tensor import Tensor
    subst = {cap: _buf(t) for cap, t in zip(self.in_bufs, inputs)}
    for r, b0 in self.implicit:
      if (t := r()) is not None and (cur := _buf(t)) is not None and cur is not b0 and (cur.size, cur.dtype) == (b0.size, b0.dtype): subst[b0] = cur
    rebind = []
    for r, v0, v1 in self.state:
      t = r()
      if t is None: continue
      b0, b1, cur = _view_buf(v0), _view_buf(v1), _buf(t)
      target = v0 if cur is b1 else v1
      subst[b0], subst[b1] = cur, _view_buf(target)
      rebind.append((t, target))
    rng_shift = Tensor._rng_counter - self.rng[0]
    for si, prg in self.captured:
      var_vals = {v: ((val + rng_shift) & 0x7fffffff if v.arg[0] == "rng_offset" else val) for v, val in si.var_vals}
      _realize.launch(si, prg, [subst.get(b, b) for b in si.bufs], var_vals)
    Tensor._rng_counter += self.rng[1]
    for t, view in rebind: t.uop = view
    outs = iter(self.out_views)
    return _rebuild(self.ret, lambda _: Tensor(next(outs)))
