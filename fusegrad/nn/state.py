"""Model state: collect a model's tensors, load them back, and read/write weight files.

- `get_parameters(obj)`, `get_state_dict(obj)`, `load_state_dict(model, state_dict)`: PyTorch-style dotted names.
- `safe_save` / `safe_load`: the safetensors format. Loading is lazy: each tensor is a byte range of the file on the
  DISK device, read only when it is copied somewhere (`load_state_dict` does that).
- `torch_load`: PyTorch checkpoints (zip and legacy formats) without importing torch. A restricted unpickler imports
  nothing: classes it does not know become inert placeholders.
"""
from __future__ import annotations
import collections, io, itertools, json, os, pickle, struct, types, zipfile
from typing import Any
from fusegrad.device import Buffer, Device
from fusegrad.dtype import DType, dtypes
from fusegrad.helpers import DEBUG, prod
from fusegrad.tensor import Tensor
from fusegrad import buffers

__all__ = ["get_parameters", "get_state_dict", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata", "torch_load"]

# ---------------- collecting tensors
def get_state_dict(obj: Any, prefix: str = "", tensor_type: type = Tensor) -> dict[str, Tensor]:
  """Every tensor reachable through obj's attributes, dicts, lists and tuples, keyed by dotted path ('layers.0.weight')."""
  out: dict[str, Tensor] = {}
  def walk(o: Any, pre: str, path: set[int]):
    if isinstance(o, tensor_type):
      out[pre[:-1] if pre.endswith(".") else pre] = o
      return
    if id(o) in path: return  # a cycle (a child pointing back at its parent)
    if hasattr(o, "_asdict") and isinstance(o, tuple): items = o._asdict().items()
    elif isinstance(o, dict): items = o.items()
    elif isinstance(o, (list, tuple)): items = enumerate(o)
    elif hasattr(o, "__dict__") and not isinstance(o, (type, types.ModuleType, types.FunctionType, types.MethodType)): items = vars(o).items()
    else: return
    path.add(id(o))
    for k, v in list(items): walk(v, f"{pre}{k}.", path)
    path.discard(id(o))
  walk(obj, prefix, set())
  return out

def get_parameters(obj: Any) -> list[Tensor]:
  """The distinct tensors of get_state_dict(obj), in order (a tensor reachable by two names is listed once)."""
  return list({id(t): t for t in get_state_dict(obj).values()}.values())

def _category(d: DType) -> str: return "bool" if d == dtypes.bool else "integer" if dtypes.is_int(d) else "floating-point"

def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, verbose: bool = False, consume: bool = False,
                    realize: bool = True) -> list[Tensor]:
  """Copy state_dict's tensors into the model's tensors of the same name (moved to their device, cast to their dtype) and
  return the model's tensors loaded, as tinygrad's. A () and a (1,) shape load into each other, as in tinygrad.

  Raises one ValueError listing every problem: missing names (when strict), shape mismatches, and dtype mismatches
  across kinds (float vs integer vs bool). Casts within a kind (bfloat16 -> float32, int64 -> int32) are done. Names only
  in state_dict are skipped, as tinygrad does (a checkpoint often carries more than the model uses); verbose or DEBUG>=1
  lists them."""
  model_sd = get_state_dict(model)
  missing = [k for k in model_sd if k not in state_dict]
  unexpected = [k for k in state_dict if k not in model_sd]
  problems = []
  if strict and missing: problems.append(f"{len(missing)} missing key(s) (in the model, not in the state_dict): {', '.join(missing)}")
  pairs = []
  for k, t in model_sd.items():
    if k not in state_dict: continue
    v = state_dict[k]
    if not isinstance(v, Tensor): v = Tensor(v)
    if {tuple(v.shape), tuple(t.shape)} == {(), (1,)}: v = v.reshape(t.shape)
    if tuple(v.shape) != tuple(t.shape): problems.append(f"shape mismatch for {k}: model {tuple(t.shape)}, state_dict {tuple(v.shape)}")
    elif _category(v.dtype) != _category(t.dtype): problems.append(f"dtype mismatch for {k}: model {t.dtype}, state_dict {v.dtype}")
    else: pairs.append((k, t, v))
  if problems: raise ValueError(f"load_state_dict into {type(model).__name__} failed:\n  " + "\n  ".join(problems))
  if verbose or (unexpected and DEBUG >= 1):
    print(f"load_state_dict: loading {len(pairs)} tensor(s)" + (f"; skipping {len(missing)} missing" if missing else "") +
          (f"; unused in the state_dict: {', '.join(unexpected)}" if unexpected else ""))
  for k, t, v in pairs:
    t.uop = v.to(t.device).cast(t.dtype).uop
    if consume: del state_dict[k]
  loaded = list(dict.fromkeys(t for _, t, _ in pairs))
  if realize and loaded: Tensor.realize_all(*loaded)
  return loaded

# ---------------- raw bytes of tensors, and tensors over file byte ranges
def _tensor_bytes(t: Tensor) -> memoryview:
  """t's elements in C order as bytes (computes t on its device if needed; does not change t)."""
  r = Tensor(t.uop)
  r.realize()
  if buffers.buffer_view(r.uop) is None: r = r.contiguous().realize()
  return r._buffer().as_memoryview()

def _file_tensor(base: Buffer, offset: int, dtype: DType, shape: tuple[int, ...]) -> Tensor:
  """A lazy tensor on base's (DISK) device: `shape` elements of `dtype` starting `offset` bytes into base."""
  n = prod(shape)
  u = buffers.view_uop(base, offset, n, dtype)
  return Tensor(u).reshape(shape)

def _disk_base(path: str) -> Buffer:
  """The whole file as a uint8 DISK buffer, mapped now: later views read this file even if path is replaced meanwhile."""
  return Buffer(f"DISK:{os.path.abspath(path)}", os.path.getsize(path), dtypes.uint8).ensure_allocated()

# ---------------- safetensors
SAFETENSORS_DTYPES: dict[str, DType] = {
  "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16, "BF16": dtypes.bfloat16,
  "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8,
  "U64": dtypes.uint64, "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8, "BOOL": dtypes.bool,
  "F8_E4M3": dtypes.fp8e4m3, "F8_E5M2": dtypes.fp8e5m2}
_SAFETENSORS_NAMES = {v: k for k, v in SAFETENSORS_DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024

def _write_atomic(path: str, chunks) -> None:
  """Write chunks to a temporary file beside path, fsync, then rename over path: readers see the old file or the new one."""
  path = os.fspath(path)
  d, name = os.path.split(os.path.abspath(path))
  for i in itertools.count():
    tmp = os.path.join(d, f".{name}.{os.getpid()}.{i}.tmp")
    try: fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError: continue
    break
  try:
    with os.fdopen(fd, "wb") as f:
      for c in chunks: f.write(c)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    try: os.unlink(tmp)
    except OSError: pass
    raise

def safe_save(tensors: dict[str, Tensor], fn: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
  """Write tensors to file fn in the safetensors format (optional string->string metadata). The write is atomic."""
  header: dict[str, Any] = {}
  if metadata:
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
      raise TypeError(f"safetensors metadata must map str to str, got {metadata!r}")
    header["__metadata__"] = dict(metadata)
  datas, off = [], 0
  for k, t in tensors.items():
    if not isinstance(k, str) or k == "__metadata__": raise ValueError(f"invalid tensor name {k!r} for safetensors")
    if not isinstance(t, Tensor): raise TypeError(f"safe_save: {k} is a {type(t).__name__}, not a Tensor")
    if t.dtype not in _SAFETENSORS_NAMES: raise TypeError(f"safe_save: {k} has dtype {t.dtype}, which safetensors cannot store")
    mv = _tensor_bytes(t)
    header[k] = {"dtype": _SAFETENSORS_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + mv.nbytes]}
    datas.append(mv)
    off += mv.nbytes
  js = json.dumps(header, separators=(",", ":")).encode()
  js += b" " * (-len(js) % 8)  # pad so the data starts 8-byte aligned
  _write_atomic(os.fspath(fn), [struct.pack("<Q", len(js)), js, *datas])

def _safe_header(base: Buffer, path: str) -> tuple[int, dict]:
  """(the JSON header's length, the parsed header) of the safetensors bytes in base."""
  size, mv = base.nbytes, base.as_memoryview()
  if size < 8: raise ValueError(f"{path}: not a safetensors file: {size} bytes is too short for the 8-byte header length")
  n = struct.unpack("<Q", mv[:8])[0]
  if n > min(_MAX_HEADER, size - 8): raise ValueError(f"{path}: not a safetensors file, or truncated: header length {n} but the file has {size} bytes")
  try: header = json.loads(bytes(mv[8:8 + n]))
  except (UnicodeDecodeError, json.JSONDecodeError) as e: raise ValueError(f"{path}: corrupt safetensors header (invalid JSON: {e})") from None
  if not isinstance(header, dict): raise ValueError(f"{path}: corrupt safetensors header: expected a JSON object")
  return n, header

def _safetensors_bytes(src: str | os.PathLike | Tensor) -> tuple[Buffer, str]:
  """(a uint8 buffer of the safetensors bytes, a name for messages): a file (_disk_base), or, as tinygrad takes, a uint8
  tensor holding them (a DISK tensor of a file, or bytes in memory)."""
  if not isinstance(src, Tensor): return _disk_base(path := os.fspath(src)), path
  if src.dtype != dtypes.uint8 or src.ndim != 1: raise ValueError(f"safe_load takes a path or a 1-d uint8 tensor of the file's bytes, got {src.dtype} of shape {src.shape}")
  view = buffers.buffer_view(src.uop) if src.device.startswith("DISK") else None
  return (buffers.buffer_of(view) if view is not None else src.to(Device.DEFAULT).contiguous()._buffer()).ensure_allocated(), f"tensor on {src.device}"

def safe_load_metadata(fn: str | os.PathLike | Tensor) -> tuple[Tensor, int, dict]:
  """(the whole file as a uint8 tensor, on DISK for a path, the JSON header's length, the parsed header)."""
  base, name = _safetensors_bytes(fn)
  n, header = _safe_header(base, name)
  return Tensor(buffers.new_buffer_uop(base.device, base.size, dtypes.uint8, base)), n, header

def safe_load(fn: str | os.PathLike | Tensor) -> dict[str, Tensor]:
  """name -> Tensor on the DISK device (lazy: bytes are read when a tensor is copied, e.g. by load_state_dict or .to());
  from a tensor of the bytes, views of that tensor's memory."""
  base, path = _safetensors_bytes(fn)
  n, header = _safe_header(base, path)
  size, data_start = base.nbytes, 8 + n
  out, spans = {}, []
  for k, info in header.items():
    if k == "__metadata__": continue
    try:
      dt, shape, (b, e) = info["dtype"], tuple(int(s) for s in info["shape"]), info["data_offsets"]
    except (KeyError, TypeError, ValueError): raise ValueError(f"{path}: corrupt safetensors header entry for {k!r}: {info!r}") from None
    if dt not in SAFETENSORS_DTYPES: raise ValueError(f"{path}: tensor {k!r} has dtype {dt!r}, not supported (supported: {', '.join(SAFETENSORS_DTYPES)})")
    dtype = SAFETENSORS_DTYPES[dt]
    if any(s < 0 for s in shape) or not isinstance(b, int) or not isinstance(e, int) or not 0 <= b <= e:
      raise ValueError(f"{path}: corrupt safetensors header entry for {k!r}: {info!r}")
    if e - b != prod(shape) * dtype.itemsize:
      raise ValueError(f"{path}: tensor {k!r}: data_offsets [{b}, {e}) hold {e - b} bytes but shape {shape} of {dt} needs {prod(shape) * dtype.itemsize}")
    if data_start + e > size:
      raise ValueError(f"{path}: truncated: tensor {k!r} ends at byte {data_start + e} but the file has {size} bytes")
    spans.append((b, e, k))
    out[k] = _file_tensor(base, data_start + b, dtype, shape)
  spans.sort()
  for (b0, e0, k0), (b1, e1, k1) in zip(spans, spans[1:]):
    if b1 < e0 and b1 != e1 and b0 != e0: raise ValueError(f"{path}: corrupt: the data of tensors {k0!r} and {k1!r} overlap")
  return out

# ---------------- PyTorch checkpoints
_TORCH_MAGIC = 0x1950A86A20F9469CFC6C
_TORCH_PROTOCOL = 1001
_STORAGE_DTYPES = {
  "DoubleStorage": dtypes.float64, "FloatStorage": dtypes.float32, "HalfStorage": dtypes.float16, "BFloat16Storage": dtypes.bfloat16,
  "LongStorage": dtypes.int64, "IntStorage": dtypes.int32, "ShortStorage": dtypes.int16, "CharStorage": dtypes.int8,
  "ByteStorage": dtypes.uint8, "BoolStorage": dtypes.bool, "UntypedStorage": dtypes.uint8,
  "UInt16Storage": dtypes.uint16, "UInt32Storage": dtypes.uint32, "UInt64Storage": dtypes.uint64,
  "Float8_e4m3fnStorage": dtypes.fp8e4m3, "Float8_e5m2Storage": dtypes.fp8e5m2}
_TORCH_DTYPES = {
  "float64": dtypes.float64, "double": dtypes.float64, "float32": dtypes.float32, "float": dtypes.float32,
  "float16": dtypes.float16, "half": dtypes.float16, "bfloat16": dtypes.bfloat16, "int64": dtypes.int64, "long": dtypes.int64,
  "int32": dtypes.int32, "int": dtypes.int32, "int16": dtypes.int16, "short": dtypes.int16, "int8": dtypes.int8,
  "uint8": dtypes.uint8, "bool": dtypes.bool, "uint16": dtypes.uint16, "uint32": dtypes.uint32, "uint64": dtypes.uint64,
  "float8_e4m3fn": dtypes.fp8e4m3, "float8_e5m2": dtypes.fp8e5m2}

class CheckpointError(ValueError):
  """A file that is not a readable PyTorch checkpoint (truncated, corrupt, or using an unsupported feature)."""

class _StorageType:
  def __init__(self, name: str): self.name, self.dtype = name, _STORAGE_DTYPES.get(name)

class _Storage:
  """numel elements of dtype; the bytes are at file_offset in the file (base: a DISK buffer of the file) or in `data`."""
  def __init__(self, dtype: DType, numel: int, name: str):
    self.dtype, self.numel, self.name = dtype, numel, name
    self.base: Buffer | None = None
    self.file_offset: int | None = None
    self.data: bytes | None = None
    self.parent: tuple[_Storage, int] | None = None  # (root storage, element offset) for a legacy storage view
  def locate(self) -> tuple[_Storage, int]:
    return (self.parent[0], self.parent[1]) if self.parent is not None else (self, 0)

class _Placeholder:
  """Stands in for a class the checkpoint names that is not on the allow-list; nothing is imported or run."""
  _origin = "?"
  def __init__(self, *args, **kwargs): self.args, self.kwargs = args, kwargs
  def __setstate__(self, state):
    if isinstance(state, dict): self.__dict__.update({str(k): v for k, v in state.items()})
    else: self.state = state
  def __repr__(self) -> str: return f"<unpickled {self._origin}>"

def _placeholder(module: str, name: str) -> type: return type(name, (_Placeholder,), {"_origin": f"{module}.{name}", "__module__": "fusegrad.nn.state"})

class _TorchUnpickler(pickle.Unpickler):
  def __init__(self, file, path: str, persistent):
    super().__init__(file, encoding="utf-8")
    self.path, self._persistent, self.pending = path, persistent, []
  def persistent_load(self, pid): return self._persistent(pid)
  def find_class(self, module: str, name: str):
    if module == "collections" and name == "OrderedDict": return collections.OrderedDict
    if module == "builtins" and name in ("set", "frozenset", "slice", "complex", "bytearray", "range", "list", "dict", "tuple"):
      return {"set": set, "frozenset": frozenset, "slice": slice, "complex": complex, "bytearray": bytearray, "range": range,
              "list": list, "dict": dict, "tuple": tuple}[name]
    if module.startswith("torch"):
      if name in ("_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3"): return getattr(self, name)
      if name in ("_rebuild_parameter", "_rebuild_parameter_with_state"): return lambda data, *args: data
      if name in ("_rebuild_from_type", "_rebuild_from_type_v2"): return lambda func, typ, args, state=None: func(*args)
      if name.endswith("Storage"): return _StorageType(name)
      if module == "torch" and name == "Size": return tuple
      if module == "torch" and name in _TORCH_DTYPES: return _TORCH_DTYPES[name]
      if name.startswith("_rebuild_"):
        raise CheckpointError(f"{self.path}: holds a tensor kind fusegrad cannot load ({module}.{name}: quantized, sparse, nested or a subclass)")
    return _placeholder(module, name)
  def _new_tensor(self, storage, offset, size, stride, dtype=None) -> Tensor:
    if not isinstance(storage, _Storage): raise CheckpointError(f"{self.path}: corrupt: a tensor refers to {storage!r}, not a storage")
    t = Tensor()  # its data is filled in by _finish_tensors once every storage is located
    self.pending.append((t, storage, int(offset), tuple(int(s) for s in size), tuple(int(s) for s in stride), dtype or storage.dtype))
    return t
  def _rebuild_tensor(self, storage, offset, size, stride): return self._new_tensor(storage, offset, size, stride)
  def _rebuild_tensor_v2(self, storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None):
    return self._new_tensor(storage, offset, size, stride)
  def _rebuild_tensor_v3(self, storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
    if not isinstance(dtype, DType): raise CheckpointError(f"{self.path}: holds a tensor of dtype {dtype!r}, which fusegrad does not support")
    return self._new_tensor(storage, offset, size, stride, dtype)

def _storage_pid(path: str, pid, storages: dict, locate) -> _Storage:
  """Decode a ('storage', type, key, location, numel[, view_metadata]) persistent id."""
  if not isinstance(pid, tuple) or not pid: raise CheckpointError(f"{path}: corrupt: unexpected persistent id {pid!r}")
  kind = pid[0].decode() if isinstance(pid[0], bytes) else pid[0]
  if kind == "module": return _placeholder("torch.nn", "Module")()
  if kind != "storage" or len(pid) not in (5, 6): raise CheckpointError(f"{path}: corrupt: unexpected persistent id {pid!r}")
  stype, key, _location, numel = pid[1:5]
  view = pid[5] if len(pid) == 6 else None
  if not isinstance(stype, _StorageType): raise CheckpointError(f"{path}: corrupt: storage type {stype!r}")
  if stype.dtype is None: raise CheckpointError(f"{path}: holds a storage of type {stype.name}, which fusegrad does not support")
  key = str(key)
  if key not in storages:
    st = storages[key] = _Storage(stype.dtype, int(numel), key)
    locate(st)
  st = storages[key]
  if view is not None:
    vkey, voff, vsize = view
    if str(vkey) not in storages:
      if int(voff) < 0 or int(voff) + int(vsize) > st.numel: raise CheckpointError(f"{path}: corrupt: storage view {vkey!r} is outside storage {key!r}")
      v = storages[str(vkey)] = _Storage(st.dtype, int(vsize), str(vkey))
      v.parent = (st, int(voff))
    st = storages[str(vkey)]
  return st

def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
  out, acc = [], 1
  for s in reversed(shape):
    out.append(acc)
    acc *= s
  return tuple(reversed(out))

def _gather(src: memoryview, offset: int, size: tuple[int, ...], stride: tuple[int, ...], itemsize: int) -> bytes:
  """The elements src[offset + sum(i*stride)] in C order, as bytes (src: one byte per element's itemsize, as 'B')."""
  fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[itemsize]
  s = src.cast(fmt)
  out = bytearray(prod(size) * itemsize)
  d = memoryview(out).cast(fmt)
  n, st = size[-1], stride[-1]
  pos = 0
  for idx in itertools.product(*[range(k) for k in size[:-1]]):
    b = offset + sum(i * k for i, k in zip(idx, stride))
    if st == 0: d[pos:pos + n] = memoryview(bytes(s[b:b + 1]) * n).cast(fmt)
    else: d[pos:pos + n] = s[b:b + (n - 1) * st + 1:st]
    pos += n
  return bytes(out)

def _finish_tensors(path: str, pending: list) -> None:
  """Give each unpickled tensor its data: a lazy DISK view when its elements are one run of the file, else a gathered copy."""
  for t, storage, offset, size, stride, dtype in pending:
    root, elem_off = storage.locate()
    if len(size) != len(stride): raise CheckpointError(f"{path}: corrupt: tensor size {size} and stride {stride} differ in length")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0: raise CheckpointError(f"{path}: corrupt: tensor size {size}, stride {stride}, offset {offset}")
    numel = prod(size)
    span = 1 + sum((n - 1) * s for n, s in zip(size, stride)) if numel else 0
    if (offset + span) * dtype.itemsize > storage.numel * storage.dtype.itemsize:
      raise CheckpointError(f"{path}: corrupt: a tensor of size {size}, stride {stride}, offset {offset} reaches past its storage {storage.name!r} of {storage.numel} elements")
    byte_off = elem_off * root.dtype.itemsize + offset * dtype.itemsize
    contiguous = all(n == 1 or s == c for n, s, c in zip(size, stride, _c_strides(size)))
    if root.file_offset is not None and root.base is not None:
      if contiguous or numel == 0: t.uop = _file_tensor(root.base, root.file_offset + byte_off, dtype, size).uop
      else:
        raw = _file_tensor(root.base, root.file_offset + byte_off, dtypes.uint8, (span * dtype.itemsize,))
        t.uop = Tensor._from_bytes(_gather(_tensor_bytes(raw), 0, size, stride, dtype.itemsize), dtype, Device.DEFAULT, size)
    else:
      assert root.data is not None
      raw = memoryview(root.data)[byte_off:byte_off + span * dtype.itemsize]
      data = bytes(raw) if contiguous or numel == 0 else _gather(raw, 0, size, stride, dtype.itemsize)
      t.uop = Tensor._from_bytes(data, dtype, Device.DEFAULT, size)

def _torch_load_zip(path: str) -> Any:
  try: zf = zipfile.ZipFile(path)
  except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e: raise CheckpointError(f"{path}: truncated or corrupt zip archive: {e}") from None
  with zf:
    pkls = [n for n in zf.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
    if not pkls: raise CheckpointError(f"{path}: a zip archive without data.pkl, so not a PyTorch checkpoint (a TorchScript archive needs torch.jit.load)")
    pkl = min(pkls, key=len)
    prefix = pkl[:-len("data.pkl")]
    if prefix + "byteorder" in zf.namelist() and zf.read(prefix + "byteorder").strip() not in (b"little", b""):
      raise CheckpointError(f"{path}: a big-endian checkpoint, which fusegrad does not support")
    base = _disk_base(path)
    size = base.nbytes
    with open(path, "rb") as f:
      def locate(st: _Storage):
        name = f"{prefix}data/{st.name}"
        try: info = zf.getinfo(name)
        except KeyError: raise CheckpointError(f"{path}: corrupt: storage record {name} is missing from the archive") from None
        nbytes = st.numel * st.dtype.itemsize
        if info.file_size < nbytes: raise CheckpointError(f"{path}: corrupt: {name} has {info.file_size} bytes, the storage needs {nbytes}")
        if info.compress_type == zipfile.ZIP_STORED:
          f.seek(info.header_offset)
          hdr = f.read(30)
          if len(hdr) < 30 or hdr[:4] != b"PK\x03\x04": raise CheckpointError(f"{path}: corrupt zip local header for {name}")
          nlen, elen = struct.unpack("<HH", hdr[26:30])
          st.file_offset, st.base = info.header_offset + 30 + nlen + elen, base
          if st.file_offset + nbytes > size: raise CheckpointError(f"{path}: truncated: {name} ends past the end of the file")
        else: st.data = zf.read(name)
      storages: dict[str, _Storage] = {}
      up = _TorchUnpickler(io.BytesIO(zf.read(pkl)), path, lambda pid: _storage_pid(path, pid, storages, locate))
      result = up.load()
    _finish_tensors(path, up.pending)
    return result

def _torch_load_legacy(path: str) -> Any:
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    def no_pid(pid): raise CheckpointError(f"{path}: corrupt: unexpected persistent id {pid!r} outside the data pickle")
    def plain(): return _TorchUnpickler(f, path, no_pid).load()
    try: magic = plain()
    except Exception: magic = None
    if magic != _TORCH_MAGIC:
      raise CheckpointError(f"{path}: not a PyTorch checkpoint: neither a zip archive nor the legacy format (no magic number at the start)")
    if (proto := plain()) != _TORCH_PROTOCOL: raise CheckpointError(f"{path}: unsupported legacy checkpoint protocol {proto!r} (expected {_TORCH_PROTOCOL})")
    sys_info = plain()
    if isinstance(sys_info, dict) and sys_info.get("little_endian") is False: raise CheckpointError(f"{path}: a big-endian checkpoint, which fusegrad does not support")
    storages: dict[str, _Storage] = {}
    up = _TorchUnpickler(f, path, lambda pid: _storage_pid(path, pid, storages, lambda st: None))
    result = up.load()
    keys = plain()
    if not isinstance(keys, list): raise CheckpointError(f"{path}: corrupt: expected the list of storage keys after the data, got {type(keys).__name__}")
    base, pos = _disk_base(path), f.tell()
    for key in keys:
      st = storages.get(str(key))
      if st is None: raise CheckpointError(f"{path}: corrupt: storage {key!r} is listed but never used")
      f.seek(pos)
      raw = f.read(8)
      if len(raw) < 8: raise CheckpointError(f"{path}: truncated: the file ends before storage {key!r}")
      count = struct.unpack("<q", raw)[0]
      if count != st.numel: raise CheckpointError(f"{path}: corrupt: storage {key!r} records {count} elements, the checkpoint expects {st.numel}")
      st.file_offset, st.base = pos + 8, base
      pos += 8 + count * st.dtype.itemsize
      if pos > size: raise CheckpointError(f"{path}: truncated: storage {key!r} needs bytes up to {pos}, the file has {size}")
    for st in storages.values():
      if st.parent is None and st.file_offset is None: raise CheckpointError(f"{path}: corrupt: the data of storage {st.name!r} is missing")
  _finish_tensors(path, up.pending)
  return result

def _file_of(t: Tensor) -> str:
  """The path of the file a DISK tensor maps whole (the checkpoint readers map files themselves)."""
  path = t.device[len("DISK:"):] if t.device.startswith("DISK:") else ""
  if not (os.path.isfile(path) and buffers.buffer_view(t.uop) is not None and t.dtype == dtypes.uint8 and t.shape == (os.path.getsize(path),)):
    raise ValueError(f"torch_load takes a path or a DISK tensor of a whole file (Tensor(pathlib.Path(p))), got a {t.dtype} tensor of shape "
                     f"{t.shape} on {t.device}: save the bytes to a file first")
  return path

def torch_load(fn: str | os.PathLike | Tensor) -> Any:
  """Load a PyTorch checkpoint (torch.save's zip format or the legacy format) without torch, from a path or, as tinygrad
  takes, a DISK tensor of the whole file (`Tensor(pathlib.Path(p))`).

  Returns what was saved (usually an OrderedDict name -> Tensor). A tensor whose elements are one contiguous run of the
  file is a lazy DISK tensor; a strided one is gathered into a tensor on Device.DEFAULT. Raises ValueError (CheckpointError)
  naming the file and the problem for truncated, corrupt or unsupported files."""
  path = _file_of(fn) if isinstance(fn, Tensor) else os.fspath(fn)
  if not os.path.isfile(path): raise FileNotFoundError(f"torch_load: no such file: {path}")
  with open(path, "rb") as f: head = f.read(4)
  try:
    if head == b"PK\x03\x04" or zipfile.is_zipfile(path): return _torch_load_zip(path)
    return _torch_load_legacy(path)
  except CheckpointError: raise
  except (pickle.UnpicklingError, EOFError, struct.error, KeyError, IndexError, TypeError, AttributeError, ValueError,
          UnicodeDecodeError, zipfile.BadZipFile, RecursionError, MemoryError, OverflowError) as e:
    raise CheckpointError(f"{path}: truncated or corrupt PyTorch checkpoint ({type(e).__name__}: {e})") from e

# ---------------- GGUF (llama.cpp's format): the parser and the dequantizing Tensor ops are fusegrad/nn/gguf.py
__all__ += ["gguf_load"]

def gguf_load(tensor: Tensor | str | os.PathLike, device: str | None = None, dequantize: bool = True) -> tuple[dict[str, Any], dict[str, Tensor]]:
  """tinygrad's gguf_load: (metadata, {name: Tensor}) of a GGUF file, given as a uint8 Tensor of the file's bytes (the
  tensors live on its device, or Device.DEFAULT for a DISK one) or as a path (which also reads every part of a split
  model). Quantized tensors are dequantized to float32 by Tensor ops; see fusegrad.nn.gguf and docs/gguf.md."""
  from fusegrad.nn.gguf import gguf_load as load  # on use: `import fusegrad.nn.state` stays light
  return load(tensor, device=device, dequantize=dequantize)
