"""Datasets read from local files; nothing is downloaded.

`mnist()` and `fashion_mnist()` read the standard IDX files (`train-images-idx3-ubyte[.gz]`, `train-labels-idx1-ubyte[.gz]`,
`t10k-images-idx3-ubyte[.gz]`, `t10k-labels-idx1-ubyte[.gz]`) from a directory and return
`X_train, Y_train, X_test, Y_test`: X uint8 of shape (N, 1, 28, 28), Y uint8 labels 0..9 of shape (N,).

Where the files are looked for, first match wins: the `path` argument, then $MNIST_PATH / $FASHION_MNIST_PATH, then
- MNIST: `../shared/data/mnist-10k` beside the repository (10,000 real digits, split 8,000 / 2,000);
- Fashion-MNIST: `/usr/share/datasets/fashion-mnist`, where `apt-get install dataset-fashion-mnist` puts it (60,000 / 10,000).
"""
from __future__ import annotations
import gzip, os, struct, zlib
from fusegrad.helpers import prod
from fusegrad.tensor import Tensor

__all__ = ["mnist", "fashion_mnist", "read_idx"]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the directory holding `fusegrad/`
MNIST_DEFAULT = os.path.join(REPO_ROOT, "..", "shared", "data", "mnist-10k")
FASHION_MNIST_DEFAULT = "/usr/share/datasets/fashion-mnist"
FASHION_INSTALL = "apt-get update && apt-get install -y dataset-fashion-mnist"
_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")

class DatasetError(ValueError):
  """A dataset file that exists but is not what it should be (wrong magic, size, or a corrupt archive)."""

def read_idx(path: str) -> tuple[tuple[int, ...], memoryview]:
  """Parse an IDX file of unsigned bytes (gzip'd or not): (dims, data). Checks the magic number and the data size."""
  try:
    with open(path, "rb") as f: raw = f.read()
    if raw[:2] == b"\x1f\x8b": raw = gzip.decompress(raw)
  except (OSError, EOFError, zlib.error) as e:
    if isinstance(e, FileNotFoundError): raise
    raise DatasetError(f"{path}: cannot read the (gzip'd) IDX file: {e}") from None
  if len(raw) < 4: raise DatasetError(f"{path}: not an IDX file: only {len(raw)} bytes")
  if raw[0:2] != b"\0\0" or raw[2] != 0x08 or not 1 <= raw[3] <= 4:
    raise DatasetError(f"{path}: not an IDX file of unsigned bytes: magic number 0x{raw[:4].hex()} (expected 0x000008NN, NN = number of dims)")
  ndim = raw[3]
  if len(raw) < 4 + 4 * ndim: raise DatasetError(f"{path}: truncated IDX header")
  dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
  data = memoryview(raw)[4 + 4 * ndim:]
  if len(data) != prod(dims): raise DatasetError(f"{path}: IDX header says {dims} = {prod(dims)} bytes of data, the file has {len(data)} (truncated or corrupt)")
  return dims, data

def _find(directory: str, name: str, what: str, origin: str, install: str) -> str:
  for cand in (name, name + ".gz", name.replace("-idx", ".idx"), name.replace("-idx", ".idx") + ".gz"):
    if os.path.isfile(p := os.path.join(directory, cand)): return p
  raise FileNotFoundError(f"{what}: {name}[.gz] not found in {os.path.abspath(directory)} ({origin}). {install}")

def _load(path: str | None, env: str, default: str, what: str, install: str, device: str | None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  if path is not None: directory, origin = os.fspath(path), "the path argument"
  elif os.getenv(env): directory, origin = os.environ[env], f"from ${env}"
  else: directory, origin = default, f"the default; set ${env} or pass path= to look elsewhere"
  out, counts = [], {}
  for name in _FILES:
    p = _find(directory, name, what, origin, install)
    dims, data = read_idx(p)
    split = name.split("-")[0]
    if "images" in name:
      if len(dims) != 3 or dims[1:] != (28, 28): raise DatasetError(f"{p}: expected images of shape (N, 28, 28), got {dims}")
      out.append(Tensor(data, device=device).reshape(dims[0], 1, 28, 28))
    else:
      if len(dims) != 1: raise DatasetError(f"{p}: expected a 1-d label file, got shape {dims}")
      if dims[0] and max(data) > 9: raise DatasetError(f"{p}: labels must be 0..9, found {max(data)}")
      if dims[0] != counts[split]: raise DatasetError(f"{p}: {dims[0]} labels for {counts[split]} images")
      out.append(Tensor(data, device=device))
    counts[split] = dims[0]
  return out[0], out[1], out[2], out[3]

def mnist(path: str | None = None, device: str | None = None, fashion: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """X_train, Y_train, X_test, Y_test of MNIST from IDX files (see the module docstring for where they are looked for)."""
  if fashion: return fashion_mnist(path, device)
  return _load(path, "MNIST_PATH", MNIST_DEFAULT, "MNIST", "Put the four MNIST IDX files there, set $MNIST_PATH to their directory, "
               f"or use fashion_mnist() (install it with: {FASHION_INSTALL}).", device)

def fashion_mnist(path: str | None = None, device: str | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """X_train, Y_train, X_test, Y_test of Fashion-MNIST (60,000 / 10,000) from IDX files."""
  return _load(path, "FASHION_MNIST_PATH", FASHION_MNIST_DEFAULT, "Fashion-MNIST", f"Install it with: {FASHION_INSTALL}", device)
