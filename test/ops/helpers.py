"""One helper that checks a fusegrad op against PyTorch: values, shape, dtype and (once autograd lands) gradients."""
from __future__ import annotations
from typing import Any, Callable, Sequence
import numpy as np
import torch
from fusegrad import Tensor, dtypes

# Gradients are compared as soon as Tensor has backward(); until then every helper call checks the forward pass only.
BACKWARD = hasattr(Tensor, "backward")

DTYPE_NAMES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
               "float16", "bfloat16", "float32", "float64")
FG2TORCH = {getattr(dtypes, n): getattr(torch, n) for n in DTYPE_NAMES}
TORCH2FG = {v: k for k, v in FG2TORCH.items()}
FG2NP = {getattr(dtypes, n): np.dtype(n) for n in DTYPE_NAMES if n != "bfloat16"}
FLOAT_DTYPES = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
INT_DTYPES = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.int64)

def np_dtype(dt) -> np.dtype:
  """numpy dtype that carries the data of a fusegrad dtype (bfloat16 travels as float32 rounded to bf16)."""
  return np.dtype(np.float32) if dt == dtypes.bfloat16 else np.dtype(FG2NP[dt])

def _gen(rng: np.random.Generator, shape, dt, low, high) -> np.ndarray:
  if dt == dtypes.bool: return rng.random(shape) < 0.5
  if dtypes.is_int(dt):
    lo = max(int(low), 0) if dtypes.is_unsigned(dt) else int(low)
    hi = max(int(high), lo + 1)
    return rng.integers(lo, hi, size=shape, endpoint=False).astype(np_dtype(dt))
  x = rng.uniform(low, high, size=shape)
  if dt == dtypes.bfloat16: return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).float().numpy()
  return x.astype(np_dtype(dt))

def to_numpy_torch(t: torch.Tensor) -> np.ndarray:
  t = t.detach()
  if t.dtype == torch.bfloat16: t = t.float()
  if t.dtype in (torch.uint16, torch.uint32, torch.uint64): return t.to(torch.int64).numpy().astype(FG2NP[TORCH2FG[t.dtype]])
  return t.numpy()

def make_inputs(shapes, vals, dtype, low, high, device, requires_grad: bool, seed: int = 0):
  """Build the same data as torch tensors and fusegrad tensors."""
  rng = np.random.default_rng(seed)
  n = len(vals) if vals is not None else len(shapes)
  dts = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * n
  if len(dts) != n: raise ValueError(f"got {len(dts)} dtypes for {n} inputs")
  arrs = []
  for i, dt in enumerate(dts):
    if vals is not None:
      a = np.array(vals[i], dtype=np_dtype(dt))
      if dt == dtypes.bfloat16: a = torch.from_numpy(a).to(torch.bfloat16).float().numpy()
    else: a = _gen(rng, shapes[i], dt, low, high)
    arrs.append(a)
  tts, fts = [], []
  for a, dt in zip(arrs, dts):
    grad = requires_grad and dt in (dtypes.float32, dtypes.float64)
    if dt == dtypes.bfloat16: tt = torch.from_numpy(a.copy()).to(torch.bfloat16)
    elif dt in (dtypes.uint16, dtypes.uint32, dtypes.uint64): tt = torch.from_numpy(a.astype(np.int64)).to(FG2TORCH[dt])
    else: tt = torch.from_numpy(a.copy())
    tt.requires_grad_(grad)
    ft = Tensor(a, device=device, dtype=dt, requires_grad=True if grad else None)
    tts.append(tt); fts.append(ft)
  return tts, fts

def _flat_outputs(o) -> list:
  return [x for y in o for x in _flat_outputs(y)] if isinstance(o, (list, tuple)) else [o]

def compare(name: str, fg_out: Tensor, t_out: torch.Tensor, atol: float, rtol: float, check_dtype: bool = True):
  assert isinstance(fg_out, Tensor), f"{name}: fusegrad returned {type(fg_out).__name__}, expected a Tensor"
  assert tuple(fg_out.shape) == tuple(t_out.shape), f"{name}: shape {fg_out.shape} != torch {tuple(t_out.shape)}"
  if check_dtype:
    assert fg_out.dtype == TORCH2FG.get(t_out.dtype), f"{name}: dtype {fg_out.dtype} != torch {t_out.dtype}"
  got, want = fg_out.numpy(), to_numpy_torch(t_out)
  assert got.shape == want.shape, f"{name}: numpy() shape {got.shape} != {want.shape}"
  if t_out.dtype.is_floating_point or fg_out.dtype in FLOAT_DTYPES:
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=rtol, equal_nan=True, err_msg=name)
  else:
    np.testing.assert_array_equal(got.astype(np.int64) if got.dtype != np.uint64 else got, want.astype(got.dtype), err_msg=name)

def helper_test_op(shapes: Sequence[tuple[int, ...]] | None, torch_fxn: Callable, fusegrad_fxn: Callable | None = None,
                   atol: float = 1e-6, rtol: float = 1e-3, grad_atol: float = 1e-4, grad_rtol: float = 1e-3, vals: Sequence[Any] | None = None,
                   low: float = -2, high: float = 2, forward_only: bool = False, dtype=dtypes.float32, device: str | None = None,
                   check_dtype: bool = True, seed: int = 0):
  """Run torch_fxn on torch tensors and fusegrad_fxn (default: torch_fxn) on fusegrad tensors built from the same data.

  shapes: one shape per input (or vals: explicit values per input). dtype: one fusegrad dtype or one per input.
  Compares shape, dtype (check_dtype) and values; then, when autograd exists and forward_only is False, the gradients
  of every float32/float64 input for a random upstream gradient."""
  if fusegrad_fxn is None: fusegrad_fxn = torch_fxn
  do_bw = BACKWARD and not forward_only
  tts, fts = make_inputs(shapes, vals, dtype, low, high, device, do_bw, seed)
  t_out = torch_fxn(*tts)
  f_out = fusegrad_fxn(*fts)
  t_outs, f_outs = _flat_outputs(t_out), _flat_outputs(f_out)
  assert len(t_outs) == len(f_outs), f"fusegrad returned {len(f_outs)} outputs, torch {len(t_outs)}"
  # build and run backward before the forward values are read: reading realizes the outputs
  bw_error, diff = None, []
  if do_bw and (diff := [(f, t) for f, t in zip(f_outs, t_outs) if t.requires_grad]):
    rng = np.random.default_rng(seed + 1)
    t_loss, f_loss = 0, 0
    for f, t in diff:
      g = rng.standard_normal(tuple(t.shape))
      t_loss = t_loss + (t * torch.from_numpy(g).to(t.dtype)).sum()
      f_loss = f_loss + (f * Tensor(g, device=device, dtype=f.dtype)).sum()
    t_loss.backward()
    try: f_loss.backward()
    except Exception as e: bw_error = e
  for i, (f, t) in enumerate(zip(f_outs, t_outs)):
    if device is not None: assert f.device == Tensor(0, device=device).device, f"output on {f.device}, expected {device}"
    compare(f"forward output {i}", f, t, atol, rtol, check_dtype)
  if not diff: return
  if bw_error is not None: raise AssertionError(f"forward matches, but fusegrad backward() raised {bw_error!r}") from bw_error
  for i, (ft, tt) in enumerate(zip(fts, tts)):
    if not tt.requires_grad: continue
    if tt.grad is None: tt.grad = torch.zeros_like(tt)
    assert ft.grad is not None, f"input {i}: fusegrad has no gradient"
    compare(f"gradient of input {i}", ft.grad, tt.grad, grad_atol, grad_rtol)
