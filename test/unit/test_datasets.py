"""nn.datasets: IDX parsing on made-up files, and the real MNIST-10k / Fashion-MNIST data where it is present."""
import gzip, os, struct
import numpy as np
import pytest
from fusegrad import dtypes
from fusegrad.nn import datasets
from fusegrad.nn.datasets import DatasetError, fashion_mnist, mnist, read_idx

DEV = "PYTHON"

def idx_bytes(arr: np.ndarray) -> bytes:
  return bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.astype(np.uint8).tobytes()

def make_set(d, n_train=5, n_test=3, gz=True, seed=0):
  rng = np.random.default_rng(seed)
  arrays = {"train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28)), "train-labels-idx1-ubyte": rng.integers(0, 10, n_train),
            "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28)), "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test)}
  os.makedirs(d, exist_ok=True)
  for name, a in arrays.items():
    raw = idx_bytes(a)
    with open(os.path.join(d, name + (".gz" if gz else "")), "wb") as f: f.write(gzip.compress(raw) if gz else raw)
  return [a.astype(np.uint8) for a in arrays.values()]

@pytest.mark.parametrize("gz", [True, False])
def test_reads_idx_sets(tmp_path, gz):
  ref = make_set(tmp_path, gz=gz)
  out = mnist(tmp_path, device=DEV)
  for o, r in zip(out, ref):
    assert o.dtype == dtypes.uint8 and o.device == DEV
    np.testing.assert_array_equal(o.numpy(), r.reshape(-1, 1, 28, 28) if r.ndim == 3 else r)
  assert out[0].shape == (5, 1, 28, 28) and out[1].shape == (5,) and out[2].shape == (3, 1, 28, 28) and out[3].shape == (3,)
  assert [o.shape for o in fashion_mnist(tmp_path, device=DEV)] == [o.shape for o in out]

def test_env_var_and_defaults(tmp_path, monkeypatch):
  make_set(tmp_path / "m", n_train=2)
  make_set(tmp_path / "f", n_train=4)
  monkeypatch.setenv("MNIST_PATH", str(tmp_path / "m"))
  monkeypatch.setenv("FASHION_MNIST_PATH", str(tmp_path / "f"))
  assert mnist(device=DEV)[0].shape[0] == 2 and fashion_mnist(device=DEV)[0].shape[0] == 4
  assert mnist(device=DEV, fashion=True)[0].shape[0] == 4
  assert mnist(tmp_path / "f", device=DEV)[0].shape[0] == 4  # an explicit path wins over the env var
  assert os.path.isdir(os.path.join(datasets.REPO_ROOT, "fusegrad"))
  assert os.path.normpath(datasets.MNIST_DEFAULT) == os.path.normpath(os.path.join(datasets.REPO_ROOT, "..", "shared", "data", "mnist-10k"))
  assert datasets.FASHION_MNIST_DEFAULT == "/usr/share/datasets/fashion-mnist"

def test_missing_files_say_where_and_how(tmp_path, monkeypatch):
  monkeypatch.delenv("FASHION_MNIST_PATH", raising=False)
  with pytest.raises(FileNotFoundError) as e: fashion_mnist(tmp_path)
  assert str(tmp_path) in str(e.value) and "apt-get install -y dataset-fashion-mnist" in str(e.value) and "train-images-idx3-ubyte" in str(e.value)
  monkeypatch.setenv("MNIST_PATH", str(tmp_path / "nowhere"))
  with pytest.raises(FileNotFoundError) as e: mnist()
  assert "nowhere" in str(e.value) and "$MNIST_PATH" in str(e.value)

@pytest.mark.parametrize("case", ["bad_magic", "wrong_dtype", "truncated", "trailing", "bad_gzip", "label_count", "label_value", "image_size", "empty"])
def test_malformed_files(tmp_path, case):
  make_set(tmp_path, gz=False)
  img, lab = tmp_path / "train-images-idx3-ubyte", tmp_path / "train-labels-idx1-ubyte"
  if case == "bad_magic": img.write_bytes(b"\x08\x03\0\0" + img.read_bytes()[4:])
  elif case == "wrong_dtype": img.write_bytes(b"\0\0\x0d\x03" + img.read_bytes()[4:])
  elif case == "truncated": img.write_bytes(img.read_bytes()[:-1])
  elif case == "trailing": img.write_bytes(img.read_bytes() + b"\0")
  elif case == "bad_gzip": img.unlink(); (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(b"x" * 100)[:-5])
  elif case == "label_count": lab.write_bytes(idx_bytes(np.zeros(4)))
  elif case == "label_value": lab.write_bytes(idx_bytes(np.array([1, 2, 3, 4, 10])))
  elif case == "image_size": img.write_bytes(idx_bytes(np.zeros((5, 28, 27))))
  else: img.write_bytes(b"")
  with pytest.raises(DatasetError) as e: mnist(tmp_path, device=DEV)
  assert str(tmp_path) in str(e.value)

def test_read_idx_dims(tmp_path):
  p = tmp_path / "x"
  p.write_bytes(idx_bytes(np.arange(24).reshape(2, 3, 4)))
  dims, data = read_idx(str(p))
  assert dims == (2, 3, 4) and bytes(data) == bytes(range(24))

MNIST_DIR = os.getenv("MNIST_PATH") or datasets.MNIST_DEFAULT
FASHION_DIR = os.getenv("FASHION_MNIST_PATH") or datasets.FASHION_MNIST_DEFAULT

def _independent(path):  # parse with numpy alone, to check the loader against
  with gzip.open(path) as f: raw = f.read()
  return np.frombuffer(raw, np.uint8, offset=16 if "images" in path else 8)

@pytest.mark.skipif(not os.path.isfile(os.path.join(MNIST_DIR, "train-images-idx3-ubyte.gz")), reason=f"MNIST-10k not found in {MNIST_DIR}")
def test_real_mnist_10k():
  X, Y, x, y = mnist(device=DEV)
  assert X.shape == (8000, 1, 28, 28) and Y.shape == (8000,) and x.shape == (2000, 1, 28, 28) and y.shape == (2000,)
  Xn, Yn = X.numpy(), Y.numpy()
  np.testing.assert_array_equal(Xn.ravel(), _independent(os.path.join(MNIST_DIR, "train-images-idx3-ubyte.gz")))
  np.testing.assert_array_equal(y.numpy(), _independent(os.path.join(MNIST_DIR, "t10k-labels-idx1-ubyte.gz")))
  assert set(np.unique(Yn)) == set(range(10)) and min(np.bincount(Yn)) > 600  # every digit, roughly balanced
  assert 25 < Xn.mean() < 40 and Xn.max() == 255 and (Xn[:, 0, 0, :] == 0).mean() > 0.95  # dark background, bright strokes

@pytest.mark.skipif(not os.path.isfile(os.path.join(FASHION_DIR, "train-images-idx3-ubyte.gz")),
                    reason=f"Fashion-MNIST not found in {FASHION_DIR} (apt-get install dataset-fashion-mnist)")
def test_real_fashion_mnist():
  X, Y, x, y = fashion_mnist(device=DEV)
  assert X.shape == (60000, 1, 28, 28) and Y.shape == (60000,) and x.shape == (10000, 1, 28, 28) and y.shape == (10000,)
  assert np.bincount(Y.numpy()).tolist() == [6000] * 10 and np.bincount(y.numpy()).tolist() == [1000] * 10
  assert abs(X.numpy().mean() / 255 - 0.2860) < 1e-3  # the well-known training-set mean
  np.testing.assert_array_equal(y.numpy(), _independent(os.path.join(FASHION_DIR, "t10k-labels-idx1-ubyte.gz")))
