"""Small shared utilities: environment flags, Context, counters, timing."""
from __future__ import annotations
import contextlib, functools, os, sys, time, weakref
from typing import Any, Iterable, Iterator, TypeVar

T = TypeVar("T")

def prod(xs: Iterable[Any], start: Any = 1) -> Any:
  return functools.reduce(lambda a, b: a * b, xs, start)

class cached_property:
  """functools.cached_property without its per-instance lock (Python 3.11 takes one on every first read, which costs
  more than computing a UOp's shape): the value is stored in the instance __dict__, so later reads never get here."""
  def __init__(self, fn): self.fn, self.name, self.__doc__ = fn, fn.__name__, fn.__doc__
  def __set_name__(self, owner, name: str): self.name = name
  def __get__(self, obj, objtype=None):
    if obj is None: return self
    val = obj.__dict__[self.name] = self.fn(obj)
    return val

class WeakValueCache:
  """A dict whose values are held weakly: an entry goes when its value dies. Like weakref.WeakValueDictionary, but its
  get is one dict lookup and a dereference (the stdlib's runs Python code per call, too slow for the hash-cons cache)."""
  def __init__(self): self.refs: dict[Any, weakref.KeyedRef] = {}
  def __len__(self) -> int: return len(self.refs)
  def get(self, key: Any) -> Any:
    return None if (ref := self.refs.get(key)) is None else ref()
  def __setitem__(self, key: Any, value: Any) -> None: self.refs[key] = weakref.KeyedRef(value, self._forget, key)
  def _forget(self, ref: weakref.KeyedRef) -> None:
    if self.refs.get(ref.key) is ref: del self.refs[ref.key]  # unless the key was already rebuilt with a new value

def argsort(xs: list) -> list[int]: return sorted(range(len(xs)), key=xs.__getitem__)
def flatten(xss: Iterable[Iterable[T]]) -> list[T]: return [x for xs in xss for x in xs]
def all_same(xs: list) -> bool: return all(x == xs[0] for x in xs)
def dedup(xs: Iterable[T]) -> list[T]: return list(dict.fromkeys(xs))
def round_up(x: int, m: int) -> int: return (x + m - 1) // m * m
def ceildiv(a: int, b: int) -> int: return -(-a // b)
def make_tuple(x: int | Iterable[int], n: int) -> tuple[int, ...]: return (x,) * n if isinstance(x, int) else tuple(x)

@functools.cache
def getenv(key: str, default: Any = 0) -> Any:
  return type(default)(os.getenv(key, default))

class ContextVar:
  """An integer setting read once from the environment and overridable with `Context(NAME=value)`."""
  registry: dict[str, "ContextVar"] = {}
  def __init__(self, key: str, default: int):
    self.key, self.value = key, getenv(key, default)
    ContextVar.registry[key] = self
  def __bool__(self) -> bool: return bool(self.value)
  def __ge__(self, x: int) -> bool: return self.value >= x
  def __gt__(self, x: int) -> bool: return self.value > x
  def __lt__(self, x: int) -> bool: return self.value < x
  def __le__(self, x: int) -> bool: return self.value <= x
  def __eq__(self, x: object) -> bool: return self.value == x
  __hash__ = object.__hash__
  def __repr__(self) -> str: return f"ContextVar({self.key}={self.value})"

DEBUG, NOOPT, SPEC = ContextVar("DEBUG", 0), ContextVar("NOOPT", 0), ContextVar("SPEC", 0)
BEAM, JIT, CACHELEVEL = ContextVar("BEAM", 0), ContextVar("JIT", 1), ContextVar("CACHELEVEL", 2)
TRAINING = ContextVar("TRAINING", 0)

class Context(contextlib.ContextDecorator):
  """`with Context(DEBUG=2): ...` temporarily sets ContextVars."""
  def __init__(self, **kwargs: int): self.kwargs = kwargs
  def __enter__(self):
    unknown = [k for k in self.kwargs if k not in ContextVar.registry]
    if unknown: raise KeyError(f"unknown Context variable(s) {unknown}; known: {sorted(ContextVar.registry)}")
    self.old = {k: ContextVar.registry[k].value for k in self.kwargs}
    for k, v in self.kwargs.items(): ContextVar.registry[k].value = v
    return self
  def __exit__(self, *exc):
    for k, v in self.old.items(): ContextVar.registry[k].value = v

class GlobalCounters:
  """Counts what the runtime did since the last reset: kernels launched, FLOPs, bytes moved, time in kernels."""
  kernel_count: int = 0
  global_ops: int = 0
  global_mem: int = 0
  time_sum_s: float = 0.0
  mem_used: int = 0   # bytes currently allocated on devices
  mem_peak: int = 0   # highest mem_used since the last reset
  @staticmethod
  def reset():
    GlobalCounters.mem_peak = GlobalCounters.mem_used
    GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s = 0, 0, 0, 0.0

class Timing(contextlib.ContextDecorator):
  def __init__(self, prefix: str = "", on_exit=None, enabled: bool = True): self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled
  def __enter__(self): self.st = time.perf_counter_ns()
  def __exit__(self, *exc):
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et*1e-6:6.2f} ms" + (self.on_exit(self.et) if self.on_exit else ""))

def cache_dir() -> str:
  base = os.getenv("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  path = os.path.join(base, "fusegrad")
  os.makedirs(path, exist_ok=True)
  return path

def colored(s: str, color: str | None) -> str:
  codes = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}
  return f"\u001b[{codes[color]}m{s}\u001b[0m" if color and sys.stdout.isatty() else s

class tqdm:
  """A minimal progress bar used when the real tqdm is not installed."""
  def __init__(self, iterable=None, total=None, desc: str = "", disable: bool = False):
    self.iterable, self.total, self.desc, self.disable = iterable, total if total is not None else (len(iterable) if iterable is not None and hasattr(iterable, "__len__") else None), desc, disable
    self.n, self.st, self.postfix = 0, time.perf_counter(), ""
  def __iter__(self) -> Iterator:
    for x in self.iterable:
      yield x
      self.update(1)
    self.close()
  def set_description(self, desc: str): self.desc = desc; self._draw()
  def update(self, n: int = 1):
    self.n += n
    self._draw()
  def _draw(self):
    if self.disable: return
    el = time.perf_counter() - self.st
    rate = self.n / el if el > 0 else 0
    if self.total:
      frac = self.n / self.total
      bar = "#" * int(frac * 20) + " " * (20 - int(frac * 20))
      sys.stderr.write(f"\r{self.desc} {frac*100:3.0f}%|{bar}| {self.n}/{self.total} [{el:.1f}s, {rate:.2f}it/s]")
    else: sys.stderr.write(f"\r{self.desc} {self.n} [{el:.1f}s, {rate:.2f}it/s]")
    sys.stderr.flush()
  def close(self):
    if not self.disable: sys.stderr.write("\n")
