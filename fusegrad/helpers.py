"""Small shared utilities: environment flags, Context, counters, timing, progress bars, local file lookup.

Names follow tinygrad.helpers, so `from tinygrad.helpers import getenv, tqdm, fetch, ...` works with fusegrad."""
from __future__ import annotations
import contextlib, ctypes, functools, hashlib, math, os, pathlib, platform, re, shutil, sys, tempfile, time, weakref
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")
U = TypeVar("U")
OSX, WIN = platform.system() == "Darwin", sys.platform == "win32"
CI = os.getenv("CI", "") != ""

class TensorError(RuntimeError, ValueError):
  """A tensor op called with arguments that do not fit (shapes, sizes, dims): a RuntimeError, the type torch raises for
  the same mistake, and a ValueError, so code written against earlier fusegrad or tinygrad still catches it."""

class DTypeError(TypeError, RuntimeError):
  """An op given a dtype it does not take (bitwise ops of floats, subtraction of bools, a float index): a TypeError, and
  a RuntimeError, the type torch raises for the same mistake."""

def prod(xs: Iterable[Any], start: Any = 1) -> Any: return math.prod(xs, start=start)  # (symbolic sizes multiply as UOps)

class cached_property:
  """functools.cached_property without its per-instance lock (Python 3.11 takes one on every first read, which costs
  more than computing a UOp's shape): the value is stored in the instance __dict__, so later reads never get here."""
  def __init__(self, fn): self.fn, self.name, self.__doc__ = fn, fn.__name__, fn.__doc__
  def __set_name__(self, owner, name: str): self.name = name
  def __get__(self, obj, objtype=None):
    if obj is None: return self
    val = obj.__dict__[self.name] = self.fn(obj)
    return val

class KeyRef(weakref.ref):
  """A weak reference that carries a key, for a callback that removes it from a dict. weakref.KeyedRef does the same, but
  its constructor is Python code (two calls per reference); this one is built in C."""
  __slots__ = ("key",)

class WeakValueCache:
  """A dict whose values are held weakly: an entry goes when its value dies. Like weakref.WeakValueDictionary, but its
  get is one dict lookup and a dereference (the stdlib's runs Python code per call, too slow for the hash-cons cache)."""
  def __init__(self):
    self.refs: dict[Any, KeyRef] = {}
    self.forget = self._forget  # one bound method for every reference's callback
  def __len__(self) -> int: return len(self.refs)
  def get(self, key: Any) -> Any:
    return None if (ref := self.refs.get(key)) is None else ref()
  def __setitem__(self, key: Any, value: Any) -> None:
    ref = self.refs[key] = KeyRef(value, self.forget)
    ref.key = key
  def _forget(self, ref: KeyRef) -> None:
    if self.refs.get(ref.key) is ref: del self.refs[ref.key]  # unless the key was already rebuilt with a new value

def argsort(xs: list) -> list[int]: return sorted(range(len(xs)), key=xs.__getitem__)
def flatten(xss: Iterable[Iterable[T]]) -> list[T]: return [x for xs in xss for x in xs]
def fully_flatten(x: Any) -> list:
  """Every scalar in a nested list/tuple (or array-like with __len__/__getitem__), in order; strings are scalars."""
  if isinstance(x, str) or not (hasattr(x, "__len__") and hasattr(x, "__getitem__")): return [x]
  if getattr(x, "shape", None) == (): return [x[()]]
  return [v for xi in x for v in fully_flatten(xi)]
def all_same(xs: Sequence) -> bool: return all(x == xs[0] for x in xs)
def all_int(xs: Sequence) -> bool: return all(isinstance(x, int) for x in xs)
def dedup(xs: Iterable[T]) -> list[T]: return list(dict.fromkeys(xs))
def round_up(x: int, m: int) -> int: return (x + m - 1) // m * m
def round_down(x: int, m: int) -> int: return x // m * m
def ceildiv(a: int, b: int) -> int: return -(-a // b)
def next_power2(x: int) -> int: return 1 if x <= 1 else 1 << (x - 1).bit_length()
def cdiv(x: int, y: int) -> int:
  """C-style integer division (truncates toward zero); 0 for a zero divisor, as the kernels give."""
  return 0 if y == 0 else abs(x) // abs(y) * (-1 if (x < 0) != (y < 0) else 1)
def cmod(x: int, y: int) -> int: return x - cdiv(x, y) * y
def make_tuple(x: int | Iterable[int], n: int) -> tuple[int, ...]: return (x,) * n if isinstance(x, int) else tuple(x)
def argfix(*x: Any) -> tuple:
  """f(1, 2) and f((1, 2)) both give (1, 2): how shape arguments are taken."""
  if x and isinstance(x[0], (tuple, list)):
    if len(x) != 1: raise ValueError(f"argfix: pass either one tuple/list or loose values, got {x!r}")
    return tuple(x[0])
  return x
def partition(xs: Iterable[T], fxn: Callable[[T], bool]) -> tuple[list[T], list[T]]:
  """(items where fxn is true, items where it is false), each in input order."""
  yes: list[T] = []
  no: list[T] = []
  for x in xs: (yes if fxn(x) else no).append(x)
  return yes, no
def unwrap(x: T | None) -> T:
  if x is None: raise AssertionError("unwrap: got None where a value was required")
  return x
def get_single_element(xs: Sequence[T]) -> T:
  if len(xs) != 1: raise AssertionError(f"expected exactly one element, got {len(xs)}: {xs!r}")
  return xs[0]
def merge_dicts(ds: Iterable[dict[T, U]]) -> dict[T, U]:
  """One dict from several; a key given two different values is an error, not a silent overwrite."""
  out: dict[T, U] = {}
  for d in ds:
    for k, v in d.items():
      if k in out and out[k] != v: raise RuntimeError(f"merge_dicts: key {k!r} has two values, {out[k]!r} and {v!r}")
      out[k] = v
  return out
def get_child(obj: Any, key: str) -> Any:
  """Follow a dotted path such as "layers.0.attn.weight": a numeric part indexes a list, a part of a dict is a key,
  anything else is an attribute (tinygrad's rule: numbers index even a dict)."""
  for k in key.split("."):
    try:
      if k.isnumeric(): obj = obj[int(k)]
      elif isinstance(obj, dict): obj = obj[k]
      else: obj = getattr(obj, k)
    except (KeyError, IndexError, AttributeError, TypeError) as e:
      raise type(e)(f"get_child({key!r}): cannot take {k!r} from a {type(obj).__name__}: {e}") from None
  return obj
def strip_parens(s: str) -> str:
  """'(a+b)' -> 'a+b', but '(a)+(b)' stays: only parentheses that enclose the whole string go."""
  if not (s[:1] == "(" and s[-1:] == ")"): return s
  depth = 0
  for c in s[1:-1]:
    depth += (c == "(") - (c == ")")
    if depth < 0: return s
  return s[1:-1] if depth == 0 else s
def pluralize(word: str, n: int) -> str: return f"{n} {word}" + ("" if n == 1 else "s")
def polyN(x: T, coeffs: Sequence[float]) -> T:
  """coeffs[0]*x**(n-1) + ... + coeffs[-1], by Horner's rule (x may be a Tensor)."""
  return functools.reduce(lambda acc, c: acc * x + c, coeffs, 0.0)  # type: ignore[return-value,operator]
def ansistrip(s: str) -> str: return re.sub("\x1b\\[(K|.*?m)", "", s)
def ansilen(s: str) -> int: return len(ansistrip(s))
def time_to_str(t: float, w: int = 8) -> str:
  if t > 10: return f"{t:{w}.2f}s "
  if t > 10e-3: return f"{t*1e3:{w}.2f}ms"
  return f"{t*1e6:{w}.2f}us"
def size_to_str(n: int) -> str:
  for d, unit in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
    if n >= d: return f"{n / d:.2f} {unit}"
  return f"{n} B"
def temp(x: str, append_user: bool = False) -> str:
  """A path named x in the system temp directory (with the user name appended when asked, so users do not collide)."""
  import getpass
  return (pathlib.Path(tempfile.gettempdir()) / (f"{x}.{getpass.getuser()}" if append_user else x)).as_posix()

# ctypes views of raw memory (used by programs that hand buffers to C code)
def to_mv(ptr: int, size: int) -> memoryview: return memoryview((ctypes.c_uint8 * size).from_address(ptr)).cast("B")
def from_mv(mv: memoryview, to_type: Any = ctypes.c_char) -> ctypes.Array:
  return ctypes.cast(ctypes.addressof(to_type.from_buffer(mv)), ctypes.POINTER(to_type * len(mv))).contents
def mv_address(mv: memoryview) -> int: return ctypes.addressof(ctypes.c_char.from_buffer(mv))
def flat_mv(mv: memoryview) -> memoryview: return mv if len(mv) == 0 else mv.cast("B", shape=(mv.nbytes,))

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
# tinygrad's switches for Winograd convolutions and image dtypes, accepted so programs that set them run; fusegrad picks
# its convolution algorithm itself (docs/performance.md) and has no image dtypes
WINO, IMAGE = ContextVar("WINO", 0), ContextVar("IMAGE", 0)
# and for its transcendental-function approximations and out-of-bounds index checks: fusegrad's math is always its own
# few-ulp code, and an out-of-range index tensor always reads 0 (docs/ops.md)
TRANSCENDENTAL, IGNORE_OOB = ContextVar("TRANSCENDENTAL", 1), ContextVar("IGNORE_OOB", 1)
# and its reduce-splitting and atomics switches: fusegrad splits long reductions itself (docs/performance.md)
SPLIT_REDUCEOP, USE_ATOMICS = ContextVar("SPLIT_REDUCEOP", 1), ContextVar("USE_ATOMICS", 0)

@dataclass(frozen=True)
class Target:
  """A device and, optionally, the code generator for it: DEV=CPU:CLANG is Target("CPU", "CLANG")."""
  device: str
  renderer: str = ""
  @staticmethod
  def parse(s: str) -> "Target":
    dev, _, renderer = str(s).partition(":")
    return Target(dev.upper(), renderer.upper())
  def __repr__(self) -> str: return self.device + (":" + self.renderer if self.renderer else "")

class _DEV(ContextVar):
  """DEV=DEVICE[:RENDERER], the default device (Device.DEFAULT reads it); `Context(DEV="PYTHON")` switches it for a block.
  Its value is a Target; DEV.device and DEV.renderer are its parts ("" when unset)."""
  @property  # type: ignore[override]
  def value(self) -> Target: return self._value
  @value.setter
  def value(self, v: Any): self._value = v if isinstance(v, Target) else Target.parse(v)
  @property
  def device(self) -> str: return self._value.device
  @property
  def renderer(self) -> str: return self._value.renderer
  def __bool__(self) -> bool: return bool(self._value.device)

DEV = _DEV("DEV", "")

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
  def add(kernels: int, ops: int, mem: int, seconds: float):
    GlobalCounters.kernel_count += kernels
    GlobalCounters.global_ops += ops
    GlobalCounters.global_mem += mem
    GlobalCounters.time_sum_s += seconds
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

def _cache_db(table: str):
  """The sqlite table `table` (key TEXT, value BLOB) of the disk cache, in cache_dir()."""
  import sqlite3
  db = sqlite3.connect(os.path.join(cache_dir(), "cache.db"), timeout=30)
  if not re.fullmatch(r"\w+", table): raise ValueError(f"disk cache table names are letters, digits and _, got {table!r}")
  db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value BLOB)")
  return db
def _cache_key(key: Any) -> str: return repr(sorted(key.items())) if isinstance(key, dict) else str(key)
def diskcache_get(table: str, key: Any) -> Any:
  """tinygrad's disk cache: the value stored under key in table (key a str or a dict), None if absent or CACHELEVEL=0."""
  if CACHELEVEL.value == 0: return None
  import pickle
  with contextlib.closing(_cache_db(table)) as db:
    row = db.execute(f"SELECT value FROM {table} WHERE key = ?", (_cache_key(key),)).fetchone()
  return None if row is None else pickle.loads(row[0])
def diskcache_put(table: str, key: Any, value: Any) -> Any:
  """Store value (pickled) under key in table, replacing what was there; returns value. Nothing with CACHELEVEL=0."""
  if CACHELEVEL.value == 0: return value
  import pickle
  with contextlib.closing(_cache_db(table)) as db, db:
    db.execute(f"INSERT OR REPLACE INTO {table} (key, value) VALUES (?, ?)", (_cache_key(key), pickle.dumps(value)))
  return value

def cpu_time_execution(cb: Callable[[], Any], enable: bool) -> float | None:
  """Run cb; with enable, return the seconds it took (tinygrad's timing helper for CPU runtimes)."""
  st = time.perf_counter()
  cb()
  return time.perf_counter() - st if enable else None
def to_function_name(s: str) -> str:
  """s (a kernel's display name, maybe colored) as a C identifier: other characters become their hex code."""
  return "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"{ord(c):02X}" for c in ansistrip(s))

_COLORS = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
def colored(s: Any, color: str | None, background: bool = False) -> str:
  """s in an ANSI color (an upper-case name is the bright variant) when stdout is a terminal; plain otherwise, so
  logs and captured output stay readable."""
  if color is None or not sys.stdout.isatty(): return str(s)
  if color.lower() not in _COLORS: raise ValueError(f"colored: unknown color {color!r}; use one of {_COLORS} (upper case for bright)")
  return f"\u001b[{10*background + 60*(color.upper() == color) + 30 + _COLORS.index(color.lower())}m{s}\u001b[0m"
def colorize_float(x: float) -> str: return colored(f"{x:7.2f}x", "green" if x < 0.75 else "red" if x > 1.15 else "yellow")

class Profiling(contextlib.ContextDecorator):
  """`with Profiling():` runs cProfile over the block and prints the top `frac` of functions sorted by `sort`."""
  def __init__(self, enabled: bool = True, sort: str = "cumtime", frac: float = 0.2, fn: str | None = None, ts: float = 1):
    self.enabled, self.sort, self.frac, self.fn = enabled, sort, frac, fn
  def __enter__(self):
    import cProfile
    self.pr = cProfile.Profile()
    if self.enabled: self.pr.enable()
    return self
  def __exit__(self, *exc):
    if not self.enabled: return
    self.pr.disable()
    if self.fn: self.pr.dump_stats(self.fn)
    import pstats
    stats = pstats.Stats(self.pr).strip_dirs().sort_stats(self.sort)
    stats.print_stats(self.frac)

class tqdm(Generic[T]):
  """A progress bar with tinygrad's tqdm signature (the real tqdm is not needed). Iterate over it, or call update(n)
  with a total; drawing is throttled to 10 per second so a fast loop does not spend its time printing."""
  def __init__(self, iterable: Iterable[T] | None = None, desc: str = "", disable: bool = False, unit: str = "it",
               unit_scale: bool = False, total: int | None = None, rate: int = 100):
    self.iterable, self.disable, self.unit, self.unit_scale, self.rate = iterable, disable, unit, unit_scale, rate
    if total is None and iterable is not None and hasattr(iterable, "__len__"): total = len(iterable)  # type: ignore[arg-type]
    self.total = self.t = total or 0
    self.n, self.st, self._drawn, self.postfix = 0, time.perf_counter(), -1.0, ""
    self.set_description(desc, refresh=False)
    self._draw(force=True)
  def __iter__(self) -> Iterator[T]:
    if self.iterable is None: raise TypeError("tqdm: nothing to iterate; pass an iterable, or use update(n) with total=")
    for x in self.iterable:
      yield x
      self.update(1)
    self.update(close=True)
  def __enter__(self): return self
  def __exit__(self, *exc): self.update(close=True)
  def __len__(self) -> int: return self.total
  def set_description(self, desc: str, refresh: bool = True):
    self.desc = f"{desc}: " if desc else ""
    if refresh: self._draw()
  def set_postfix(self, **kwargs: Any):
    self.postfix = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    self._draw()
  def update(self, n: int = 0, close: bool = False):
    self.n += n
    self._draw(force=close or (self.total > 0 and self.n >= self.total), end="\n" if close else "")
  def close(self): self.update(close=True)
  @classmethod
  def write(cls, s: str): print(f"\r\033[K{s}", flush=True, file=sys.stderr)
  def _draw(self, force: bool = False, end: str = ""):
    now = time.perf_counter()
    if self.disable or (not force and now - self._drawn < 0.1): return
    self._drawn, el = now, now - self.st
    rate = f"{self.n / el:.2f}{self.unit}/s" if self.n and el > 0 else f"?{self.unit}/s"
    count = f"{_si(self.n) if self.unit_scale else self.n}" + (f"/{_si(self.total) if self.unit_scale else self.total}" if self.total else self.unit)
    suffix = f" {count} [{_hms(el)}, {rate}{', ' + self.postfix if self.postfix else ''}]"
    if self.total:
      frac = min(self.n / self.total, 1.0)
      width = max(shutil.get_terminal_size().columns - len(self.desc) - len(suffix) - 8, 1)
      filled = int(width * frac)
      line = f"{self.desc}{frac*100:3.0f}%|{'#' * filled}{' ' * (width - filled)}|{suffix}"
    else: line = f"{self.desc.rstrip(': ')}{suffix}"
    print("\r" + line, end=end, file=sys.stderr, flush=True)

def _hms(t: float) -> str:
  h, m, s = int(t) // 3600, int(t) % 3600 // 60, int(t) % 60
  return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"
def _si(x: float) -> str:
  """1234567 -> '1.23M' (what unit_scale shows)."""
  for i, p in enumerate(" kMGTPEZY"):
    if abs(x) < 1000 or i == 8: return f"{x:.3g}{p}".strip() if i else f"{x:g}"
    x /= 1000
  return str(x)

def trange(n: int, **kwargs: Any) -> tqdm[int]: return tqdm(range(n), total=n, **kwargs)

# ---------------- fetch: local files only
_NO_DOWNLOAD = ("fusegrad does not download anything, and {url!r} is a network URL with no local copy. Download it yourself, "
                "then pass the local file: fetch('/path/to/file'), fetch(pathlib.Path(...)), fetch('file:///path/to/file'), "
                "or fetch(url, name='/path/to/file'); or put it where fetch looks for this URL: {fp}")

def _downloads_dir() -> pathlib.Path: return pathlib.Path(cache_dir()) / "downloads"

def _local_path(url: str | pathlib.Path) -> pathlib.Path | None:
  """The file a path or file:// URL names; None for a network URL."""
  if isinstance(url, pathlib.PurePath): return pathlib.Path(url)
  if not isinstance(url, str): raise TypeError(f"fetch: expected a str path, pathlib.Path or URL, got {type(url).__name__}")
  parsed = urllib.parse.urlparse(url)
  if parsed.scheme == "file":
    if parsed.netloc not in ("", "localhost"): raise RuntimeError(f"fetch: file URL {url!r} names another host ({parsed.netloc}); use a local path")
    from urllib.request import url2pathname  # slow to import (it loads http and email): only for file URLs
    return pathlib.Path(url2pathname(parsed.path))
  # "C:\\x" parses with scheme "c": a one-letter scheme is a Windows drive, not a protocol
  return None if "://" in url and len(parsed.scheme) > 1 else pathlib.Path(url).expanduser()

def _gunzipped(fp: pathlib.Path) -> pathlib.Path:
  """fp decompressed into the cache (once per file version) if it is gzip data; fp itself otherwise."""
  with open(fp, "rb") as f:
    if f.read(2) != b"\x1f\x8b": return fp
  st = fp.stat()
  key = hashlib.md5(f"{fp.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
  out = _downloads_dir() / f"{key}.gunzip"
  if not out.is_file():
    import gzip
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    with gzip.open(fp, "rb") as src, open(tmp, "wb") as dst: shutil.copyfileobj(src, dst)
    os.replace(tmp, out)  # atomic: another process never reads a half-written file
  return out

def fetch(url: str | pathlib.Path, name: str | pathlib.Path | None = None, subdir: str | None = None, gunzip: bool = False,
          allow_caching: bool = True, headers: dict[str, str] | None = None) -> pathlib.Path:
  """tinygrad's fetch, without the network: returns the pathlib.Path of a local file.

  - a path (str or pathlib.Path) or a file:// URL: that file (FileNotFoundError if it is missing).
  - a network URL (http, https, ...): the file already at `name` (a path) or at tinygrad's cache location
    (<cache>/fusegrad/downloads/<subdir>/<name or md5(url)>[.gunzip]); if there is none, a RuntimeError explains how
    to pass a local copy. Nothing is ever downloaded.
  gunzip=True decompresses a gzip file into the cache and returns the decompressed copy (a file that is not gzip data
  is returned as it is). allow_caching and headers are accepted for compatibility and change nothing."""
  if (fp := _local_path(url)) is None:
    if name is not None and (isinstance(name, pathlib.PurePath) or "/" in str(name)): fp = pathlib.Path(name).expanduser()
    else:
      fname = (str(name) if name is not None else hashlib.md5(str(url).encode("utf-8")).hexdigest()) + (".gunzip" if gunzip else "")
      fp = _downloads_dir() / (subdir or "") / fname
    if not fp.is_file(): raise RuntimeError(_NO_DOWNLOAD.format(url=str(url), fp=fp))
  elif not fp.is_file():
    raise FileNotFoundError(f"fetch: no file at {fp}" + (" (it is a directory)" if fp.is_dir() else ""))
  return _gunzipped(fp) if gunzip else fp

# bounds on the compiled-kernel caches, 0 for none: programs kept loaded in memory (engine/realize.py) and MiB of kernel
# libraries on disk (runtime/ops_cpu.py); without them a program that sees many shapes grows without limit
PROGRAM_CACHE, DISK_CACHE_MB = ContextVar("PROGRAM_CACHE", 4096), ContextVar("DISK_CACHE_MB", 512)
