"""GGUF, the model file of llama.cpp and ggml: header, metadata, tensor directory and split files, with dequantization
written as Tensor ops, so quantized blocks are unpacked by kernels on the device (or inside the matmul that reads them).

  read_gguf(path or uint8 Tensor)   -> GGUFFile: metadata (and each value's GGUF type), tensor infos, alignment, data offset
  gguf_load(path or uint8 Tensor, device=None, dequantize=True) -> (metadata, {name: Tensor})
  dequantize(raw, ggml_type, shape) -> float32 Tensor: the blocks in `raw` (uint8, as stored in the file) unpacked

Shapes are torch order: GGUF lists a tensor's dims fastest-varying first, so a (rows, cols) weight is stored as [cols, rows].
Every malformed file raises GGUFError, a ValueError whose message names the file and the problem."""
from __future__ import annotations
import os, re, struct
from dataclasses import dataclass, field
from typing import Any, Callable
from fusegrad import buffers
from fusegrad.device import Buffer, canonicalize
from fusegrad.dtype import DType, dtypes
from fusegrad.helpers import prod
from fusegrad.tensor import Tensor
from fusegrad.uop.ops import Ops

__all__ = ["GGUFError", "GGMLType", "GGML_TYPES", "GGUFTensorInfo", "GGUFFile", "read_gguf", "gguf_load", "dequantize", "to_ggml_type",
           "SUPPORTED_TYPES"]

class GGUFError(ValueError):
  """A file that is not a readable GGUF file: truncated, corrupt, or using a feature fusegrad does not read."""

# ---------------- the ggml tensor types: id -> (elements per block, bytes per block)
@dataclass(frozen=True)
class GGMLType:
  id: int
  name: str
  block_size: int  # elements in one block
  type_size: int   # bytes of one block

# every type id ggml has assigned, so a type fusegrad cannot dequantize is still sized (and reported by name), while an
# id not in this table is corrupt: 4, 5, 31-33 and 36-38 were removed from ggml and are not valid in a file.
GGML_TYPES: dict[int, GGMLType] = {t.id: t for t in (GGMLType(*a) for a in [
  (0, "F32", 1, 4), (1, "F16", 1, 2), (2, "Q4_0", 32, 18), (3, "Q4_1", 32, 20), (6, "Q5_0", 32, 22), (7, "Q5_1", 32, 24),
  (8, "Q8_0", 32, 34), (9, "Q8_1", 32, 36), (10, "Q2_K", 256, 84), (11, "Q3_K", 256, 110), (12, "Q4_K", 256, 144),
  (13, "Q5_K", 256, 176), (14, "Q6_K", 256, 210), (15, "Q8_K", 256, 292), (16, "IQ2_XXS", 256, 66), (17, "IQ2_XS", 256, 74),
  (18, "IQ3_XXS", 256, 98), (19, "IQ1_S", 256, 50), (20, "IQ4_NL", 32, 18), (21, "IQ3_S", 256, 110), (22, "IQ2_S", 256, 82),
  (23, "IQ4_XS", 256, 136), (24, "I8", 1, 1), (25, "I16", 1, 2), (26, "I32", 1, 4), (27, "I64", 1, 8), (28, "F64", 1, 8),
  (29, "IQ1_M", 256, 56), (30, "BF16", 1, 2), (34, "TQ1_0", 256, 54), (35, "TQ2_0", 256, 66), (39, "MXFP4", 32, 17),
  (40, "NVFP4", 64, 36), (41, "Q1_0", 128, 18)])}
_BY_NAME = {t.name: t for t in GGML_TYPES.values()}
# unquantized types: loaded as their own dtype (one element per block)
PLAIN_DTYPES: dict[str, DType] = {"F32": dtypes.float32, "F16": dtypes.float16, "BF16": dtypes.bfloat16, "F64": dtypes.float64,
                                  "I8": dtypes.int8, "I16": dtypes.int16, "I32": dtypes.int32, "I64": dtypes.int64}

def to_ggml_type(t: int | str | GGMLType) -> GGMLType:
  """The GGMLType for a type id (8), a name ("Q8_0") or a GGMLType (an IntEnum such as gguf.GGMLQuantizationType works too)."""
  if isinstance(t, GGMLType): return t
  if isinstance(t, str) and t.upper() in _BY_NAME: return _BY_NAME[t.upper()]
  if isinstance(t, int) and int(t) in GGML_TYPES: return GGML_TYPES[int(t)]
  raise ValueError(f"unknown ggml type {t!r} (known: {', '.join(_BY_NAME)})")

# ---------------- metadata value types: id -> (name, struct format)
_SCALARS: dict[int, tuple[str, str]] = {0: ("uint8", "B"), 1: ("int8", "b"), 2: ("uint16", "H"), 3: ("int16", "h"), 4: ("uint32", "I"),
                                        5: ("int32", "i"), 6: ("float32", "f"), 7: ("bool", "B"), 10: ("uint64", "Q"), 11: ("int64", "q"),
                                        12: ("float64", "d")}
_STRING, _ARRAY, _BOOL = 8, 9, 7
# the fewest bytes a value of each type can take: counts are checked against the bytes left before looping over them,
# so a corrupt count (2**60 tensors) fails at once instead of allocating or looping
_MIN_BYTES = {**{k: struct.calcsize(f) for k, (_, f) in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}
_MAX_NESTING = 32  # arrays of arrays deeper than this are corrupt (and would overflow the Python stack)
_MAX_DIMS = 4      # GGML_MAX_DIMS
_DEFAULT_ALIGNMENT = 32

# ---------------- where the bytes come from: a file, or a uint8 Tensor holding a file's bytes (tinygrad's gguf_load(tensor))
class _Source:
  name: str
  size: int
  def error(self, msg: str) -> GGUFError: return GGUFError(f"{self.name}: {msg}")
  def read(self, offset: int, n: int) -> bytes: raise NotImplementedError
  def view(self, offset: int, n: int, dtype: DType) -> Tensor | None: raise NotImplementedError

class _FileSource(_Source):
  def __init__(self, path: str):
    self.name, self.path = path, os.path.abspath(path)
    self.size = os.path.getsize(path)  # FileNotFoundError for a missing file, as open() gives
    self._base: Buffer | None = None
  def read(self, offset: int, n: int) -> bytes:
    with open(self.path, "rb") as f:
      f.seek(offset)
      return f.read(n)
  def map(self) -> None:
    """Map the file now, as safe_load does: tensors read this file even if the path is replaced later."""
    if self._base is None and self.size: self._base = Buffer(f"DISK:{self.path}", self.size, dtypes.uint8).ensure_allocated()
  def view(self, offset: int, n: int, dtype: DType) -> Tensor | None:
    """n elements of dtype at byte `offset`, a lazy tensor on the DISK device (bytes are read when it is moved)."""
    if offset % dtype.itemsize: return None  # a DISK read of a typed view wants whole elements; the caller bitcasts bytes
    self.map()
    assert self._base is not None
    return Tensor(buffers.view_uop(self._base, offset, n, dtype))

class _TensorSource(_Source):
  def __init__(self, t: Tensor):
    if t.dtype != dtypes.uint8: raise TypeError(f"gguf: expected a uint8 tensor of the file's bytes, got {t.dtype}")
    # a lazy tensor is computed once here, not once per header chunk read below
    if not t.device.startswith("DISK") and buffers.buffer_view(t.uop) is None: t.realize()
    self.t = t.reshape(-1)
    self.size = self.t.shape[0]
    self.name = t.device[len("DISK:"):] if t.device.startswith("DISK:") else f"<{t.device} tensor of {self.size} bytes>"
  def read(self, offset: int, n: int) -> bytes:
    return self.t[offset:min(offset + n, self.size)].numpy().tobytes() if offset < self.size else b""
  def view(self, offset: int, n: int, dtype: DType) -> Tensor | None:
    return self.t[offset:offset + n] if dtype == dtypes.uint8 else None

# ---------------- parsing
class _Cursor:
  """Reads a GGUF header front to back, a chunk at a time. Every read says what it reads, so running out of bytes is an
  error naming the file, the field and the byte offset, never a bare struct.error."""
  CHUNK = 1 << 20
  def __init__(self, src: _Source):
    self.src, self.pos, self.buf, self.buf_at = src, 0, b"", 0
  def left(self) -> int: return self.src.size - self.pos
  def take(self, n: int, what: str) -> memoryview:
    if n > self.left():
      raise self.src.error(f"truncated: the file ends inside {what} (it needs {n} bytes at byte {self.pos}, the file has {self.src.size})")
    lo = self.pos - self.buf_at
    if lo < 0 or lo + n > len(self.buf):
      self.buf, self.buf_at, lo = self.src.read(self.pos, max(n, self.CHUNK)), self.pos, 0
      if len(self.buf) < n: raise self.src.error(f"truncated: the file ends inside {what} (it changed while being read)")
    self.pos += n
    return memoryview(self.buf)[lo:lo + n]
  def unpack(self, fmt: str, what: str) -> Any: return struct.unpack_from("<" + fmt, self.take(struct.calcsize(fmt), what))[0]
  def check_count(self, n: int, min_bytes: int, what: str) -> None:
    if n * min_bytes > self.left():
      raise self.src.error(f"corrupt or truncated: {what} is {n}, but only {self.left()} bytes follow (each needs at least {min_bytes})")
  def string(self, what: str) -> str:
    n = self.unpack("Q", f"the length of {what}")
    # surrogateescape: bytes that are not UTF-8 (some tokenizers store them) survive, str.encode('utf-8', 'surrogateescape')
    return bytes(self.take(n, what)).decode("utf-8", "surrogateescape")

  # ---- metadata values: (value, type name)
  def value(self, vtype: int, what: str, depth: int = 0) -> tuple[Any, str]:
    if vtype in _SCALARS:
      name, fmt = _SCALARS[vtype]
      v = self.unpack(fmt, what)
      return (self._bools([v], what)[0] if vtype == _BOOL else v), name
    if vtype == _STRING: return self.string(what), "string"
    if vtype == _ARRAY: return self.array(what, depth)
    raise self.src.error(f"corrupt: {what} has unknown value type {vtype} (GGUF value types are 0 to 12)")
  def _bools(self, vals: list[int], what: str) -> list[bool]:
    if any(v > 1 for v in vals): raise self.src.error(f"corrupt: {what} holds a bool that is neither 0 nor 1")
    return [bool(v) for v in vals]
  def array(self, what: str, depth: int) -> tuple[list, str]:
    if depth >= _MAX_NESTING: raise self.src.error(f"corrupt: {what} nests arrays more than {_MAX_NESTING} deep")
    etype = self.unpack("I", f"the element type of {what}")
    if etype not in _MIN_BYTES: raise self.src.error(f"corrupt: {what} has unknown element type {etype} (GGUF value types are 0 to 12)")
    n = self.unpack("Q", f"the length of {what}")
    self.check_count(n, _MIN_BYTES[etype], f"the length of {what}")
    if etype in _SCALARS:
      name, fmt = _SCALARS[etype]
      vals = list(struct.unpack_from(f"<{n}{fmt}", self.take(n * _MIN_BYTES[etype], f"the {n} elements of {what}")))
      return (self._bools(vals, what) if etype == _BOOL else vals), f"array[{name}]"
    if etype == _STRING: return [self.string(f"element {i} of {what}") for i in range(n)], "array[string]"
    items = [self.array(f"element {i} of {what}", depth + 1) for i in range(n)]
    return [v for v, _ in items], f"array[{items[0][1] if items else 'array'}]"

  # ---- tensor infos: (name, dims as stored, type, offset from the data start)
  def tensor_info(self, i: int, n: int) -> tuple[str, tuple[int, ...], GGMLType, int]:
    name = self.string(f"the name of tensor {i} of {n}")
    what = f"the info of tensor {name!r}"
    nd = self.unpack("I", what)
    if nd > _MAX_DIMS: raise self.src.error(f"corrupt: tensor {name!r} has {nd} dims (GGUF tensors have at most {_MAX_DIMS})")
    dims = struct.unpack_from(f"<{nd}Q", self.take(8 * nd, what))
    tid = self.unpack("I", what)
    if tid not in GGML_TYPES: raise self.src.error(f"tensor {name!r} has unknown ggml type id {tid} (known ids: {sorted(GGML_TYPES)})")
    return name, dims, GGML_TYPES[tid], self.unpack("Q", what)

@dataclass(frozen=True)
class GGUFTensorInfo:
  name: str
  shape: tuple[int, ...]   # torch order (the file's dims reversed)
  ggml_type: GGMLType
  offset: int              # absolute byte offset of the data in its file
  nbytes: int
  part: int = 0            # which file of a split model holds it (GGUFFile.paths[part])
  @property
  def raw_shape(self) -> tuple[int, ...]:
    """The shape of the raw bytes with rows kept: (*shape[:-1], bytes per row), so rows can be sliced before unpacking."""
    if not self.shape: return (self.nbytes,)
    return (*self.shape[:-1], self.shape[-1] // self.ggml_type.block_size * self.ggml_type.type_size)

@dataclass
class GGUFFile:
  """What a GGUF file (or the parts of a split model) holds; `load`/`raw` build lazy tensors of its data."""
  path: str
  version: int
  metadata: dict[str, Any]
  metadata_types: dict[str, str]   # key -> GGUF type name: "uint32", "string", "array[int32]", "array[array[string]]", ...
  alignment: int
  data_offset: int                 # where the tensor data starts (of the first part, for a split model)
  tensors: dict[str, GGUFTensorInfo]
  paths: list[str] = field(default_factory=list)
  _sources: list[_Source] = field(default_factory=list, repr=False)

  def raw(self, name: str, device: str | None = None) -> Tensor:
    """The tensor's bytes as stored, a lazy uint8 tensor on `device` of shape info.raw_shape."""
    info = self.tensors[name]
    src = self._sources[info.part]
    return _checked_view(src, info.offset, info.nbytes, dtypes.uint8).to(canonicalize(device)).reshape(info.raw_shape)

  def load(self, name: str, device: str | None = None, dequantize: bool = True) -> Tensor:
    """A lazy tensor on `device`: unquantized types in their own dtype (F16 stays float16), quantized ones dequantized to
    float32 by Tensor ops (dequantize=False: their raw bytes, as `raw`)."""
    info, device = self.tensors[name], canonicalize(device)
    if info.ggml_type.name in PLAIN_DTYPES: return self._plain(info, device)
    if not dequantize: return self.raw(name, device)
    if info.ggml_type.name not in _DEQUANT:
      raise self._sources[info.part].error(f"tensor {name!r} is {info.ggml_type.name}, which fusegrad cannot dequantize (supported: "
                                           f"{', '.join(SUPPORTED_TYPES)}); gguf_load(..., dequantize=False) gives its raw bytes")
    return _dequant(self.raw(name, device), info.ggml_type, info.shape)

  def _plain(self, info: GGUFTensorInfo, device: str) -> Tensor:
    dt, src = PLAIN_DTYPES[info.ggml_type.name], self._sources[info.part]
    n = info.nbytes // dt.itemsize
    typed = src.view(info.offset, n, dt)
    if typed is not None: return typed.to(device).reshape(info.shape)
    # no typed view of this source (a tensor of the file's bytes, or an offset that is not a multiple of the element size):
    # move the bytes, then bitcast them on the device
    return _checked_view(src, info.offset, info.nbytes, dtypes.uint8).to(device).bitcast(dt).reshape(info.shape)

def _checked_view(src: _Source, offset: int, n: int, dtype: DType) -> Tensor:
  t = src.view(offset, n, dtype)
  assert t is not None, "every source has uint8 views"
  return t

def _parse_header(cur: _Cursor) -> tuple[int, int, int]:
  """(version, tensor count, metadata count)."""
  magic = bytes(cur.take(4, "the magic number"))
  if magic != b"GGUF": raise cur.src.error(f"not a GGUF file: it starts with {magic!r}, not b'GGUF'")
  version = cur.unpack("I", "the version")
  if version == 1: raise cur.src.error("GGUF version 1 (the 2023 draft with 32-bit counts) is not supported; convert the model again")
  if version not in (2, 3):
    if int.from_bytes(version.to_bytes(4, "little"), "big") in (2, 3): raise cur.src.error("big-endian GGUF files are not supported")
    raise cur.src.error(f"unsupported GGUF version {version} (fusegrad reads versions 2 and 3)")
  n_tensors, n_kv = cur.unpack("Q", "the tensor count"), cur.unpack("Q", "the metadata count")
  cur.check_count(n_kv, 8 + 4 + 1, "the metadata count")  # a key's length, its value type and a 1-byte value at the least
  cur.check_count(n_tensors, 8 + 4 + 4 + 8, "the tensor count")  # name length, n_dims, type, offset
  return version, n_tensors, n_kv

def _parse_metadata(cur: _Cursor, n_kv: int) -> tuple[dict[str, Any], dict[str, str]]:
  metadata, types = {}, {}
  for i in range(n_kv):
    key = cur.string(f"the key of metadata entry {i} of {n_kv}")
    if key in metadata: raise cur.src.error(f"corrupt: metadata key {key!r} appears twice")
    vtype = cur.unpack("I", f"the value type of metadata {key!r}")
    metadata[key], types[key] = cur.value(vtype, f"the value of metadata {key!r}")
  return metadata, types

def _alignment(src: _Source, metadata: dict[str, Any]) -> int:
  a = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
  if isinstance(a, bool) or not isinstance(a, int) or a <= 0 or a & (a - 1):
    raise src.error(f"corrupt: general.alignment is {a!r}; it must be a power of two")
  return a

def _tensor_infos(cur: _Cursor, n_tensors: int, alignment: int) -> tuple[dict[str, GGUFTensorInfo], int]:
  raw = [cur.tensor_info(i, n_tensors) for i in range(n_tensors)]
  data_offset = -(-cur.pos // alignment) * alignment
  out: dict[str, GGUFTensorInfo] = {}
  for name, dims, t, off in raw:
    if name in out: raise cur.src.error(f"corrupt: two tensors are named {name!r}")
    out[name] = _checked_info(cur.src, name, dims, t, off, data_offset, alignment)
  return out, data_offset

def _checked_info(src: _Source, name: str, dims: tuple[int, ...], t: GGMLType, off: int, data_offset: int, alignment: int) -> GGUFTensorInfo:
  shape = tuple(reversed(dims))
  if t.block_size > 1 and (not dims or dims[0] % t.block_size):
    raise src.error(f"corrupt: tensor {name!r} of shape {shape} is {t.name}, whose blocks hold {t.block_size} elements, "
                    f"but its rows have {dims[0] if dims else 0}")
  if off % alignment: raise src.error(f"corrupt: tensor {name!r} starts at data offset {off}, not a multiple of the alignment {alignment}")
  nbytes = prod(dims) // t.block_size * t.type_size
  start = data_offset + off
  if start + nbytes > src.size:
    raise src.error(f"truncated or corrupt: the data of tensor {name!r} ({t.name}, shape {shape}) is bytes {start} to {start + nbytes}, "
                    f"past the end of the file ({src.size} bytes)")
  return GGUFTensorInfo(name, shape, t, start, nbytes)

def _parse(src: _Source) -> GGUFFile:
  cur = _Cursor(src)
  version, n_tensors, n_kv = _parse_header(cur)
  metadata, types = _parse_metadata(cur, n_kv)
  alignment = _alignment(src, metadata)
  tensors, data_offset = _tensor_infos(cur, n_tensors, alignment)
  return GGUFFile(src.name, version, metadata, types, alignment, data_offset, tensors, [src.name], [src])

# ---------------- split models: NAME-00001-of-00003.gguf, ...
_SPLIT_NAME = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")

def _split_info(f: GGUFFile) -> tuple[int, int]:
  """(split.no, split.count); (0, 1) for a file that is not part of a split model."""
  no, count = f.metadata.get("split.no", 0), f.metadata.get("split.count", 1)
  if not all(isinstance(v, int) and not isinstance(v, bool) for v in (no, count)) or count < 1 or not 0 <= no < count:
    raise f._sources[0].error(f"corrupt: split.no={no!r}, split.count={count!r}")
  return no, count

def _part_paths(path: str, no: int, count: int) -> list[str]:
  d, base = os.path.split(path)
  m = _SPLIT_NAME.match(base)
  if m is None or int(m["count"]) != count or int(m["no"]) != no + 1:
    raise GGUFError(f"{path}: is part {no + 1} of a model split in {count} files, but its name is not NAME-{no + 1:05d}-of-{count:05d}.gguf, "
                    "so the other parts cannot be found")
  return [os.path.join(d, f"{m['stem']}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]

def _read_part(p: str, i: int, count: int) -> GGUFFile:
  if not os.path.isfile(p): raise FileNotFoundError(f"{p}: part {i + 1} of {count} of a split GGUF model is missing")
  part = _parse(_FileSource(p))
  no, n = _split_info(part)
  if (no, n) != (i, count): raise GGUFError(f"{p}: says it is part {no + 1} of {n}, its name says part {i + 1} of {count}")
  return part

def _merge(parts: list[GGUFFile]) -> GGUFFile:
  first, tensors = parts[0], {}
  for i, p in enumerate(parts):
    for name, info in p.tensors.items():
      if name in tensors: raise GGUFError(f"{p.path}: tensor {name!r} is also in {parts[tensors[name].part].path}")
      tensors[name] = GGUFTensorInfo(info.name, info.shape, info.ggml_type, info.offset, info.nbytes, i)
  want = first.metadata.get("split.tensors.count", len(tensors))
  if want != len(tensors): raise GGUFError(f"{first.path}: split.tensors.count is {want}, but the {len(parts)} parts hold {len(tensors)} tensors")
  return GGUFFile(first.path, first.version, first.metadata, first.metadata_types, first.alignment, first.data_offset, tensors,
                  [p.path for p in parts], [s for p in parts for s in p._sources])

def read_gguf(src: str | os.PathLike | Tensor) -> GGUFFile:
  """Parse a GGUF file's header: metadata, tensor infos, alignment and data offset (no tensor data is read).

  `src` is a path, or a uint8 Tensor of a whole file's bytes (on DISK or any device). A path that is one part of a split
  model (NAME-00002-of-00003.gguf) reads every part and merges their tensors; the metadata is the first part's."""
  if isinstance(src, Tensor):
    f = _parse(_TensorSource(src))
    if _split_info(f)[1] > 1: raise f._sources[0].error("is one part of a split GGUF model; pass the path of a part to read them all")
    return f
  path = os.fspath(src)
  f = _parse(_FileSource(path))
  no, count = _split_info(f)
  if count > 1: f = _merge([f if i == no else _read_part(p, i, count) for i, p in enumerate(_part_paths(path, no, count))])
  for s in f._sources:
    if isinstance(s, _FileSource): s.map()
  return f

def gguf_load(src: str | os.PathLike | Tensor, device: str | None = None, dequantize: bool = True) -> tuple[dict[str, Any], dict[str, Tensor]]:
  """(metadata, {name: Tensor}) of a GGUF file (or split model), tensors lazy on `device` (default Device.DEFAULT).

  Nothing is read until a tensor is realized. Quantized tensors come dequantized to float32 by Tensor ops on the device;
  with dequantize=False they are their raw bytes, uint8 of shape (*shape[:-1], bytes per row), for `dequantize` to unpack
  inside the kernel that reads them. F32/F16/BF16/F64 and integer tensors keep their dtype either way."""
  f = read_gguf(src)
  if device is None and isinstance(src, Tensor) and not src.device.startswith("DISK"): device = src.device
  return f.metadata, {name: f.load(name, device, dequantize) for name in f.tensors}

# ---------------- dequantization as Tensor ops: blocks (n, type_size) uint8 -> (n, block_size) float32
def _f16(b: Tensor, at: int) -> Tensor:
  """The float16 at byte `at` of each block, as float32 (n, 1): exact."""
  return b[:, at:at + 2].bitcast(dtypes.float16).cast(dtypes.float32)

def _f16h(b: Tensor, at: int) -> Tensor:
  """The float16 at byte `at` of each block (n, 1), kept float16 (a packed weight's scale: 2 bytes, exact)."""
  return b[:, at:at + 2].bitcast(dtypes.float16)

def _fields(x: Tensor, n: int, width: int) -> Tensor:
  """x (..., k) bytes -> (..., n, k) with [..., i, j] = (x[..., j] >> width*i) & (2**width - 1): the i-th bit field of each byte.
  One load per output element, shifted by an index-derived amount, so it fuses into whatever reads it."""
  xs = x.unsqueeze(-2).expand(*x.shape[:-1], n, x.shape[-1])
  shifts = Tensor.arange(0, n * width, width, dtype=x.dtype, device=x.device).reshape(n, 1).expand(xs.shape)
  # (the counts are below the byte's width: the plain shift, without >>'s check of each count, inside every matmul)
  return Tensor(xs.uop.alu(Ops.SHR, shifts.uop)) & ((1 << width) - 1)

def _nibbles(x: Tensor) -> Tensor:
  """(n, k) bytes -> (n, 2k): the k low nibbles, then the k high ones (the order Q4/Q5 blocks store their 2k values in)."""
  return _fields(x, 2, 4).reshape(x.shape[0], -1)

def _bits(x: Tensor) -> Tensor:
  """(n, k) bytes -> (n, 8k): bit j of the little-endian bit string, bit 0 of byte 0 first."""
  return _fields(x, 8, 1).transpose(-1, -2).reshape(x.shape[0], -1)

# Each quantized type packed for keeping in memory: one code a value (int8 or uint8; the 4-bit types two codes a byte,
# as the file has them) and a scale (and min) a block, value = scale * (code + offset) (+ min), in float32. The arithmetic
# is the reference's, operation for operation (d * q + m, d * (q - 8), not d * (q + m/d)), so the values are bit-exact;
# a K-quant's (d * sub-scale) is its block scale. A weight kept so is read at 0.6 to 1.1 bytes a value and expanded
# inside the matmul that reads it.
@dataclass(frozen=True)
class Packed:
  """codes (..., G, m): m codes each for G groups (nibbles: m bytes holding 2m codes, the low nibbles first); scales and
  mins (..., K), one per block of G*m (nibbles: 2*G*m) / K values; mins None for symmetric types."""
  codes: Tensor
  scales: Tensor
  mins: Tensor | None = None
  nibbles: bool = False
  offset: int = 0
  def tensors(self) -> list[Tensor]: return [t for t in (self.codes, self.scales, self.mins) if t is not None]
  def realize(self) -> Packed:
    """The three tensors computed into buffers of their own (a packed weight to keep)."""
    p = Packed(self.codes.contiguous(), self.scales.contiguous(), None if self.mins is None else self.mins.contiguous(), self.nibbles, self.offset)
    Tensor.realize_all(*p.tensors())
    return p
  def reshape(self, lead: tuple[int, ...]) -> Packed:
    """Rows of `lead` (a weight's shape without its last dim), each holding its blocks."""
    return Packed(self.codes.reshape(*lead, -1, self.codes.shape[-1]), self.scales.reshape(*lead, -1),
                  None if self.mins is None else self.mins.reshape(*lead, -1), self.nibbles, self.offset)
  def expand(self) -> Tensor:
    """The float32 values (..., K * block): lazy, so a matmul reading them expands them in its own kernel."""
    q = self.codes.cast(dtypes.float32)
    if self.nibbles:  # low nibble b - 16*floor(b/16), high floor(b/16): float math that runs as SIMD vectors
      hi = (q * 0.0625).floor()
      sel = Tensor.arange(2, device=q.device).float().reshape(2, 1)
      q = (q - hi * 16).unsqueeze(-2) * (1 - sel) + hi.unsqueeze(-2) * sel  # (..., G, 2, m)
    if self.offset: q = q + self.offset
    k = self.scales.shape[-1]
    v = q.reshape(*self.scales.shape, -1) * self.scales.cast(dtypes.float32).unsqueeze(-1)
    if self.mins is not None: v = v + self.mins.cast(dtypes.float32).unsqueeze(-1)
    return v.reshape(*self.scales.shape[:-1], k * v.shape[-1])

def _i8(x: Tensor) -> Tensor: return x.bitcast(dtypes.int8)
def _p4_0(b: Tensor) -> Packed: return Packed(b[:, 2:18].unsqueeze(1), _f16h(b, 0), None, True, -8)
def _p4_1(b: Tensor) -> Packed: return Packed(b[:, 4:20].unsqueeze(1), _f16h(b, 0), _f16h(b, 2), True)
def _p5_0(b: Tensor) -> Packed: return Packed(((_nibbles(b[:, 6:22]) | (_bits(b[:, 2:6]) << 4)).cast(dtypes.int8) - 16).unsqueeze(1), _f16h(b, 0))
def _p5_1(b: Tensor) -> Packed: return Packed((_nibbles(b[:, 8:24]) | (_bits(b[:, 4:8]) << 4)).unsqueeze(1), _f16h(b, 0), _f16h(b, 2))
def _p8_0(b: Tensor) -> Packed: return Packed(_i8(b[:, 2:34]).unsqueeze(1), _f16h(b, 0))

def _k_scales(s: Tensor) -> tuple[Tensor, Tensor]:
  """The 12 scale bytes of a Q4_K/Q5_K block -> 8 six-bit scales and 8 six-bit mins (n, 8), as float32. Bytes 0-3 hold
  scales 0-3 (low 6 bits), 4-7 mins 0-3; scales and mins 4-7 are the nibbles of bytes 8-11 plus the top 2 bits of 0-7."""
  a, b, c = s[:, 0:4], s[:, 4:8], s[:, 8:12]
  sc = (a & 63).cat((c & 15) | ((a >> 6) << 4), dim=1)
  m = (b & 63).cat((c >> 4) | ((b >> 6) << 4), dim=1)
  return sc.cast(dtypes.float32), m.cast(dtypes.float32)

def _k_affine(b: Tensor, q: Tensor, nibbles: bool) -> Packed:
  """Q4_K/Q5_K: 8 sub-blocks of 32, value = (d * scale) * q - (dmin * min)."""
  sc, m = _k_scales(b[:, 4:16])
  return Packed(q, _f16(b, 0) * sc, -(_f16(b, 2) * m), nibbles)
def _k_low(qs: Tensor) -> Tensor:
  """128 bytes -> (n, 8, 32): four 32-byte chunks, each the low nibbles (sub-block 2i) then the high ones (2i + 1)."""
  return _fields(qs.reshape(-1, 4, 32), 2, 4).reshape(-1, 8, 32)
def _p4_k(b: Tensor) -> Packed: return _k_affine(b, b[:, 16:144].reshape(-1, 4, 32), True)  # chunk i: sub-blocks 2i, 2i + 1
def _p5_k(b: Tensor) -> Packed: return _k_affine(b, _k_low(b[:, 48:176]) | (_fields(b[:, 16:48], 8, 1) << 4), False)  # bit i of byte l: sub-block i

def _p6_k(b: Tensor) -> Packed:
  """Two halves of 128; in half h, value 32k + l takes a nibble of ql[64h + 32(k % 2) + l] (high if k >= 2) and bits 2k, 2k+1
  of qh[32h + l]; each 16 consecutive values share an int8 scale."""
  lo = _fields(b[:, 0:128].reshape(-1, 2, 2, 32), 2, 4).transpose(-3, -2).reshape(-1, 2, 4, 32)
  hi = _fields(b[:, 128:192].reshape(-1, 2, 32), 4, 2)
  q = ((lo | (hi << 4)).cast(dtypes.int8) - 32).reshape(-1, 16, 16)
  return Packed(q, _f16(b, 208) * _i8(b[:, 192:208]).cast(dtypes.float32))

_PACK: dict[str, Callable[[Tensor], Packed]] = {"Q4_0": _p4_0, "Q4_1": _p4_1, "Q5_0": _p5_0, "Q5_1": _p5_1, "Q8_0": _p8_0,
                                               "Q4_K": _p4_k, "Q5_K": _p5_k, "Q6_K": _p6_k}

def _bf16(b: Tensor) -> Tensor: return (b.bitcast(dtypes.uint16).cast(dtypes.uint32) << 16).bitcast(dtypes.float32)

_DEQUANT: dict[str, Callable[[Tensor], Tensor]] = {
  "F32": lambda b: b.bitcast(dtypes.float32), "F16": lambda b: b.bitcast(dtypes.float16).cast(dtypes.float32), "BF16": _bf16,
  **{name: (lambda p: lambda b: p(b).expand())(p) for name, p in _PACK.items()}}
SUPPORTED_TYPES = tuple(_DEQUANT)

def _dequant(raw: Tensor, t: GGMLType, shape: tuple[int, ...]) -> Tensor:
  return _DEQUANT[t.name](raw.reshape(-1, t.type_size)).reshape(shape)

PACKED_TYPES = tuple(_PACK)

def pack(raw: Tensor, ggml_type: int | str | GGMLType, shape: tuple[int, ...]) -> Packed:
  """A quantized tensor's raw bytes (as stored) as a Packed weight whose rows are shape[:-1]: `pack(...).expand()` is
  `dequantize(raw, ggml_type, shape)` bit for bit. Lazy Tensor ops: `.realize()` it to keep a weight at 0.6 (4-bit types)
  to 1.1 bytes a value, expanded inside each kernel that reads it."""
  t = to_ggml_type(ggml_type)
  if t.name not in _PACK: raise ValueError(f"pack: {t.name} is not a packed type (packed: {', '.join(PACKED_TYPES)})")
  if not shape or shape[-1] % t.block_size: raise ValueError(f"pack: the last dim of {shape} must hold whole blocks of {t.block_size}")
  return _PACK[t.name](raw.reshape(-1, t.type_size)).reshape(tuple(shape[:-1]))

def dequantize(raw: Tensor, ggml_type: int | str | GGMLType, shape: tuple[int, ...] | None = None) -> Tensor:
  """The float32 values of quantized blocks: `raw` is uint8 bytes as stored in a GGUF file (any shape; rows may be sliced
  first, e.g. the rows of an embedding a batch looks up), `shape` the result's shape (default: raw's with the last dim
  unpacked). Lazy Tensor ops: realize the result to unpack once, or use it inside a matmul to unpack on every read."""
  t = to_ggml_type(ggml_type)
  if t.name not in _DEQUANT: raise ValueError(f"dequantize: {t.name} is not supported (supported: {', '.join(SUPPORTED_TYPES)})")
  if raw.dtype != dtypes.uint8: raise TypeError(f"dequantize: expected the raw uint8 bytes, got a {raw.dtype} tensor")
  if raw.ndim == 0 or raw.shape[-1] % t.type_size:
    raise ValueError(f"dequantize: the last dim of {raw.shape} must hold whole {t.name} blocks of {t.type_size} bytes")
  n = raw.numel() // t.type_size * t.block_size
  shape = tuple(shape) if shape is not None else (*raw.shape[:-1], raw.shape[-1] // t.type_size * t.block_size)
  if prod(shape) != n: raise ValueError(f"dequantize: {raw.shape} bytes of {t.name} hold {n} values, not shape {shape}")
  return _dequant(raw, t, shape)
