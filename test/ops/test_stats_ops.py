"""Statistics and data-dependent ops (stats.py) against torch: unique, unique_consecutive, bincount, quantile,
nanquantile, nanmedian, cov, corrcoef, dist, renorm, diagflat, diag_embed's full signature, index_copy, masked_scatter."""
import math
import warnings
import numpy as np
import pytest
import torch
from fusegrad import Tensor, dtypes
from fusegrad.tensor.stats import _diag_embed
from .helpers import TORCH2FG, helper_test_op

nan, inf = math.nan, math.inf

def _t(a, dtype=None) -> torch.Tensor: return torch.tensor(np.asarray(a)) if dtype is None else torch.tensor(np.asarray(a)).to(dtype)

def _same(got, want, exact_dtype=True, rtol=1e-6, atol=0.0):
  """fusegrad result(s) vs torch's: shapes, values (NaN equal); int64 torch index/count results are int32 here."""
  if isinstance(want, (tuple, list)):
    assert isinstance(got, tuple) and len(got) == len(want), (type(got), len(got) if isinstance(got, tuple) else None, len(want))
    for g, w in zip(got, want): _same(g, w, exact_dtype, rtol, atol)
    return
  assert isinstance(got, Tensor), type(got)
  assert got.shape == tuple(want.shape), (got.shape, tuple(want.shape))
  if exact_dtype: assert got.dtype == TORCH2FG[want.dtype] or (got.dtype, want.dtype) == (dtypes.int32, torch.int64), (got.dtype, want.dtype)
  w = want.detach().float().numpy() if want.dtype == torch.bfloat16 else want.detach().numpy()
  np.testing.assert_allclose(got.numpy().astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)

# ---------------- unique, unique_consecutive

UNIQUE_DATA = [
  [3.0, 1.0, 2.0, 1.0, 3.0, 3.0],
  [[2, 1, 2], [0, 2, 1]],
  [3.0, nan, 1.0, nan, 3.0, -0.0, 0.0],
  [[1.0, nan], [1.0, nan], [0.0, 2.0]],
  [True, False, True, True],
  5.0,
  [[[1, 2], [1, 2]], [[0, 5], [1, 2]], [[1, 2], [1, 2]]],
]

@pytest.mark.parametrize("data", UNIQUE_DATA)
@pytest.mark.parametrize("inv,cnt", [(False, False), (True, False), (False, True), (True, True)])
def test_unique_flat(data, inv, cnt):
  a = np.asarray(data)
  for s in (True, False):
    _same(Tensor(a).unique(sorted=s, return_inverse=inv, return_counts=cnt), torch.unique(_t(a), sorted=True, return_inverse=inv, return_counts=cnt))

@pytest.mark.parametrize("data,dims", [(UNIQUE_DATA[1], (0, 1, -1)), (UNIQUE_DATA[3], (0, 1)), (UNIQUE_DATA[6], (0, 1, 2, -2)),
                                       ([[3, 1], [1, 1], [3, 1], [1, 0]], (0, 1)), ([[True, False], [True, False]], (0, 1))])
def test_unique_dim(data, dims):
  a = np.asarray(data)
  for d in dims:
    _same(Tensor(a).unique(return_inverse=True, return_counts=True, dim=d), torch.unique(_t(a), return_inverse=True, return_counts=True, dim=d))
    _same(Tensor(a).unique(dim=d), torch.unique(_t(a), dim=d))

def test_unique_random_and_dtypes():
  rng = np.random.default_rng(0)
  for dt, tdt in ((dtypes.int8, torch.int8), (dtypes.float16, torch.float16), (dtypes.int64, torch.int64), (dtypes.uint8, torch.uint8)):
    a = rng.integers(0, 6, size=(4, 7))
    t = _t(a, tdt)
    _same(Tensor(a, dtype=dt).unique(return_inverse=True, return_counts=True), torch.unique(t, return_inverse=True, return_counts=True))
    _same(Tensor(a, dtype=dt).unique_consecutive(return_inverse=True, return_counts=True),
          torch.unique_consecutive(t, return_inverse=True, return_counts=True))
  out, inv, cnt = Tensor([1, 2, 1]).unique(return_inverse=True, return_counts=True)
  assert inv.dtype == dtypes.int32 and cnt.dtype == dtypes.int32  # fusegrad's index dtype (torch: int64)
  assert not Tensor([1.0, 2.0], requires_grad=True).unique().requires_grad

def test_unique_long_input_sorts_by_the_network():
  # more than SORT_NETWORK_MIN values: sorted as sort() does (a bitonic network), the inverse the argsort of the order;
  # by ranks this compared every pair (a million values took hours)
  rng = np.random.default_rng(1)
  for a in (rng.integers(-50, 50, size=(3, 1700)), rng.standard_normal(2600).astype(np.float32).round(1), rng.integers(0, 2, 3000).astype(bool)):
    for inv, cnt in ((False, False), (True, True)):
      _same(Tensor(a).unique(return_inverse=inv, return_counts=cnt), torch.unique(_t(a), return_inverse=inv, return_counts=cnt))
    _same(Tensor(a.reshape(-1)).unique(dim=0, return_inverse=True), torch.unique(_t(a.reshape(-1)), dim=0, return_inverse=True))

def test_unique_empty_and_errors():
  for shape in ((0,), (0, 3), (2, 0)):
    _same(Tensor.zeros(*shape).unique(return_inverse=True, return_counts=True),
          torch.unique(torch.zeros(shape), return_inverse=True, return_counts=True))
  _same(Tensor.zeros(0, 3).unique(return_inverse=True, return_counts=True, dim=0),
        torch.unique(torch.zeros(0, 3), return_inverse=True, return_counts=True, dim=0))
  _same(Tensor.zeros(0, 3).unique_consecutive(return_counts=True, dim=0), torch.unique_consecutive(torch.zeros(0, 3), return_counts=True, dim=0))
  for shape, d in (((2, 0), 0), ((0, 3), 1), ((0, 0), 0)):
    with pytest.raises(RuntimeError): torch.unique(torch.zeros(shape), dim=d)
    with pytest.raises(RuntimeError): Tensor.zeros(*shape).unique(dim=d)
  with pytest.raises(IndexError): Tensor(5.0).unique(dim=0)
  with pytest.raises(IndexError): Tensor([[1, 2]]).unique(dim=2)
  with pytest.raises(IndexError): Tensor(5.0).unique_consecutive(dim=0)

@pytest.mark.parametrize("data,dim", [([1.0, nan, nan, 2.0, 2.0, 1.0], None), ([3, 3, 1, 1, 3], None), ([[1, 2], [1, 2], [3, 3], [1, 2]], 0),
                                      ([[1, 2], [1, 2], [3, 3]], -2), ([[1, 1, 2], [1, 1, 3]], 1), (7, None), ([[True, True], [False, True]], None)])
def test_unique_consecutive(data, dim):
  a = np.asarray(data)
  for inv in (False, True):
    for cnt in (False, True):
      _same(Tensor(a).unique_consecutive(return_inverse=inv, return_counts=cnt, dim=dim),
            torch.unique_consecutive(_t(a), return_inverse=inv, return_counts=cnt, dim=dim))

# ---------------- bincount

@pytest.mark.parametrize("vals,minlength", [([1, 5, 2, 1], 0), ([1, 5, 2, 1], 9), ([0], 0), ([], 3), ([], 0), ([4, 4, 4], 2)])
def test_bincount(vals, minlength):
  a = np.asarray(vals, dtype=np.int64)
  got = Tensor(a, dtype=dtypes.int64).bincount(minlength=minlength)
  assert got.dtype == dtypes.int32
  _same(got, torch.bincount(_t(a), minlength=minlength))
  w = np.linspace(-1, 2, len(vals))
  if not vals:  # torch gives int64 zeros for an empty input whatever the weights; here the weights' float dtype
    assert Tensor(a, dtype=dtypes.int64).bincount(Tensor(w), minlength).tolist() == [0.0] * minlength
    return
  for wdt, tdt in ((dtypes.float32, torch.float32), (dtypes.float64, torch.float64), (dtypes.float16, torch.float16), (dtypes.int32, torch.int32)):
    _same(Tensor(a, dtype=dtypes.int64).bincount(Tensor(w, dtype=wdt), minlength), torch.bincount(_t(a), _t(w, tdt), minlength), rtol=1e-3)

def test_bincount_int_dtypes_and_errors():
  rng = np.random.default_rng(1)
  a = rng.integers(0, 20, size=50)
  for dt, tdt in ((dtypes.uint8, torch.uint8), (dtypes.int8, torch.int8), (dtypes.int16, torch.int16), (dtypes.int32, torch.int32)):
    _same(Tensor(a, dtype=dt).bincount(), torch.bincount(_t(a, tdt)))
  with pytest.raises(ValueError): Tensor([1, -5, 2]).bincount()  # (a TensorError: also a RuntimeError, torch's type)
  with pytest.raises(RuntimeError): Tensor([1, -5, 2]).bincount()
  with pytest.raises(TypeError): Tensor([1.0, 2.0]).bincount()
  with pytest.raises(TypeError): Tensor([True, False]).bincount()
  with pytest.raises(RuntimeError): Tensor([[1]]).bincount()
  with pytest.raises(RuntimeError): Tensor(1).bincount()
  with pytest.raises(RuntimeError): Tensor([1]).bincount(minlength=-1)
  with pytest.raises(RuntimeError): Tensor([1, 2]).bincount(Tensor([1.0]))

# ---------------- quantile, nanquantile, nanmedian

MODES = ["linear", "lower", "higher", "midpoint", "nearest"]

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,dim,keepdim", [((7,), None, False), ((3, 5), 0, True), ((2, 3, 4), -2, False), ((2, 3, 4), None, True),
                                               ((), 0, True), ((1, 6), 1, False)])
def test_quantile_forward_and_grad(mode, shape, dim, keepdim):
  q = [0.0, 0.1, 0.25, 0.5, 1 / 3, 0.75, 0.9, 1.0]
  for qa in (0.3, q):
    for fn in ("quantile", "nanquantile"):
      helper_test_op([shape], lambda x, fn=fn, qa=qa: getattr(x, fn)(torch.tensor(qa), dim=dim, keepdim=keepdim, interpolation=mode),
                     lambda x, fn=fn, qa=qa: getattr(x, fn)(qa, dim=dim, keepdim=keepdim, interpolation=mode), atol=1e-6, grad_atol=1e-6)
  if len(shape) != 3: return
  # a q tensor (0-d and 1-d) and float64
  helper_test_op([shape], lambda x: x.quantile(torch.tensor(q, dtype=torch.float64), dim=dim, keepdim=keepdim, interpolation=mode),
                 lambda x: x.quantile(Tensor(q, dtype=dtypes.float64), dim=dim, keepdim=keepdim, interpolation=mode), dtype=dtypes.float64)
  helper_test_op([shape], lambda x: x.nanquantile(torch.tensor(0.6), dim=dim, keepdim=keepdim, interpolation=mode),
                 lambda x: x.nanquantile(Tensor(0.6), dim=dim, keepdim=keepdim, interpolation=mode))

@pytest.mark.parametrize("mode", MODES)
def test_quantile_nan_ties_inf(mode):
  x = np.array([[1.0, 5, 2, 8, 2, 2], [3, nan, 1, 0, 4, 4], [nan, nan, nan, nan, nan, nan], [inf, -inf, 1, 1, 1, 0], [2, 2, 2, 2, 2, 2]], np.float32)
  q = [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0]
  for fn in ("quantile", "nanquantile"):
    for dim in (1, 0, None):
      _same(getattr(Tensor(x), fn)(Tensor(q), dim=dim, interpolation=mode), getattr(torch, fn)(_t(x), torch.tensor(q), dim=dim, interpolation=mode))
  # 'nearest' rounds half to even, as torch: ranks 0.5, 1.5, 2.5, 3.5, 4.5
  _same(Tensor([0.0, 1, 2, 3, 4, 5]).quantile([0.1, 0.3, 0.5, 0.7, 0.9], interpolation=mode),
        torch.quantile(torch.tensor([0.0, 1, 2, 3, 4, 5]), torch.tensor([0.1, 0.3, 0.5, 0.7, 0.9]), interpolation=mode))

def test_quantile_dtypes():
  """torch takes float32/float64 only; here ints and bool give float32, 16-bit floats are computed in float32 and rounded."""
  rng = np.random.default_rng(2)
  a = rng.integers(-10, 10, size=(3, 8))
  for dt in (dtypes.int32, dtypes.int8, dtypes.uint8, dtypes.int64):
    got = Tensor(np.abs(a), dtype=dt).quantile([0.2, 0.5], dim=1, interpolation="midpoint")
    assert got.dtype == dtypes.float32
    _same(got, torch.quantile(_t(np.abs(a), torch.float32), torch.tensor([0.2, 0.5]), dim=1, interpolation="midpoint"))
  f = rng.standard_normal((3, 8)).astype(np.float16)
  for dt, tdt in ((dtypes.float16, torch.float16), (dtypes.bfloat16, torch.bfloat16)):
    got = Tensor(f, dtype=dt).nanquantile(0.37, dim=-1)
    assert got.dtype == dt
    _same(got, torch.nanquantile(_t(f, tdt).float(), 0.37, dim=-1).to(tdt))
  _same(Tensor([True, False, True]).quantile(0.5), torch.tensor(1.0))

def test_quantile_errors():
  x = Tensor([1.0, 2.0])
  for bad in (1.5, -0.1, nan, [0.5, 2.0], Tensor([0.5, nan])):
    with pytest.raises(RuntimeError): x.quantile(bad)
  with pytest.raises(RuntimeError): x.quantile(Tensor([[0.5]]))
  with pytest.raises(RuntimeError): x.quantile(0.5, interpolation="foo")
  with pytest.raises(RuntimeError): Tensor([]).quantile(0.5)
  with pytest.raises(RuntimeError): Tensor.zeros(2, 0).nanquantile(0.5, dim=0)
  with pytest.raises(IndexError): x.quantile(0.5, dim=1)
  _same(x.quantile(Tensor([])), torch.quantile(torch.tensor([1.0, 2.0]), torch.tensor([])))

@pytest.mark.parametrize("shape,dim,keepdim", [((7,), 0, False), ((3, 6), 1, True), ((3, 6), 0, False), ((2, 3, 4), -1, False), ((), 0, False)])
def test_nanmedian_grad(shape, dim, keepdim):
  helper_test_op([shape], lambda x: x.nanmedian(dim, keepdim), check_dtype=False)
  helper_test_op([shape], lambda x: x.nanmedian())
  got = Tensor.ones(*shape).nanmedian(dim, keepdim)
  assert got.values.dtype == dtypes.float32 and got.indices.dtype == dtypes.int32

def test_nanmedian_nan_ties_ints():
  x = np.array([[1.0, nan, 3, 2], [nan, nan, 1, nan], [nan, 2, 2, 1], [2, 1, 2, 1], [-inf, inf, nan, 0]], np.float32)
  for dim in (0, 1, -1):
    for keepdim in (False, True):
      _same(Tensor(x).nanmedian(dim, keepdim), torch.nanmedian(_t(x), dim, keepdim))
  _same(Tensor(x).nanmedian(), torch.nanmedian(_t(x)))
  _same(Tensor([2.0, 1, 2, 1, 2, 1]).nanmedian(0), torch.nanmedian(torch.tensor([2.0, 1, 2, 1, 2, 1]), 0))  # ties: torch's index
  # an all-NaN row: NaN (its index is the first NaN; torch's is unspecified)
  v, i = Tensor([[nan, nan, nan, nan], [nan, 1.0, nan, nan]]).nanmedian(1)
  assert math.isnan(v.tolist()[0]) and v.tolist()[1] == 1.0 and i.tolist() == [0, 1]
  assert math.isnan(Tensor([nan, nan]).nanmedian().item()) and math.isnan(Tensor([]).nanmedian().item())
  a = np.array([[3, 1, 2, 1], [5, 5, 0, 7]])
  for dt, tdt in ((dtypes.int32, torch.int32), (dtypes.int8, torch.int8)):
    _same(Tensor(a, dtype=dt).nanmedian(1), torch.nanmedian(_t(a, tdt), 1))
    _same(Tensor(a, dtype=dt).nanmedian(), torch.nanmedian(_t(a, tdt)))
  f = np.array([[1.5, nan, 0.25], [nan, nan, 2.0]], np.float16)
  _same(Tensor(f).nanmedian(1), torch.nanmedian(_t(f), 1))
  _same(Tensor.zeros(0, 2).nanmedian(1), torch.nanmedian(torch.zeros(0, 2), 1))
  with pytest.raises(IndexError): Tensor.zeros(2, 0).nanmedian(1)
  _same(Tensor(2.0).nanmedian(0), torch.nanmedian(torch.tensor(2.0), 0))

# ---------------- cov, corrcoef

@pytest.mark.filterwarnings("ignore:cov")
@pytest.mark.parametrize("shape", [(3, 7), (1, 5), (7,), (4, 2)])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_cov_corrcoef_grad(shape, correction):
  helper_test_op([shape], lambda x: x.cov(correction=correction), atol=1e-5, grad_atol=1e-5)
  helper_test_op([shape], lambda x: x.cov(correction=correction), atol=1e-10, grad_atol=1e-10, dtype=dtypes.float64)
  helper_test_op([shape], lambda x: x.corrcoef(), atol=1e-6, grad_atol=1e-6, dtype=dtypes.float64)

@pytest.mark.parametrize("correction", [0, 1, 3])
def test_cov_weights_grad(correction):
  rng = np.random.default_rng(3)
  fw = rng.integers(0, 4, size=6)
  aw = rng.uniform(0.1, 2, size=6)
  x = rng.standard_normal((3, 6))
  for dt, tol in ((dtypes.float32, 1e-5), (dtypes.float64, 1e-10)):
    helper_test_op([(3, 6)], lambda x: x.cov(correction=correction, fweights=_t(fw)), lambda x: x.cov(correction=correction, fweights=Tensor(fw)),
                   vals=[x], dtype=dt, atol=tol, grad_atol=tol)
    for f in (False, True):
      helper_test_op([(3, 6), (6,)], lambda x, a: x.cov(correction=correction, fweights=_t(fw) if f else None, aweights=a),
                     lambda x, a: x.cov(correction=correction, fweights=Tensor(fw) if f else None, aweights=a),
                     vals=[x, aw], dtype=dt, atol=tol, grad_atol=tol)

def test_cov_dtypes_edges_errors():
  a = np.array([[1, 2, 4], [0, 1, 1]])
  _same(Tensor(a).cov(), torch.cov(_t(a)))
  _same(Tensor(a[0]).cov(), torch.cov(_t(a[0])))
  _same(Tensor(a).corrcoef(), torch.corrcoef(_t(a)))
  _same(Tensor(a, dtype=dtypes.float16).cov(), torch.cov(_t(a, torch.float16)), rtol=1e-3)
  _same(Tensor([1.0, 2, 4]).cov(aweights=Tensor([1.0, 2, 1], dtype=dtypes.float64)),
        torch.cov(torch.tensor([1.0, 2, 4]), aweights=torch.tensor([1.0, 2, 1], dtype=torch.float64)))
  _same(Tensor([[1.0, 2, 4], [1, 1, 1]]).corrcoef(), torch.corrcoef(torch.tensor([[1.0, 2, 4], [1, 1, 1]])))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for t in (torch.tensor(3.0), torch.tensor([3.0]), torch.zeros(0), torch.zeros(2, 0), torch.zeros(0, 3), torch.tensor([1.0, 2, 4])):
      _same(Tensor(t.numpy()).cov(correction=3 if t.numel() == 3 else 1), torch.cov(t, correction=3 if t.numel() == 3 else 1))
      _same(Tensor(t.numpy()).corrcoef(), torch.corrcoef(t))
  x = Tensor([1.0, 2, 4])
  with pytest.raises(RuntimeError): Tensor.ones(2, 2, 2).cov()
  with pytest.raises(TypeError): Tensor([True, False]).cov()
  with pytest.raises(TypeError): x.cov(fweights=Tensor([1.0, 2, 1]))
  with pytest.raises(TypeError): x.cov(aweights=Tensor([1, 2, 1]))
  with pytest.raises(RuntimeError): x.cov(fweights=Tensor([1, -2, 1]))
  with pytest.raises(RuntimeError): x.cov(aweights=Tensor([1.0, -2, 1]))
  with pytest.raises(RuntimeError): x.cov(aweights=Tensor([1.0, 2]))
  with pytest.raises(RuntimeError): x.cov(aweights=Tensor([[1.0, 2, 4]]))
  with pytest.raises(RuntimeError): x.cov(aweights=Tensor([0.0, 0, 0]))

# ---------------- dist, renorm, diagflat, diag_embed

@pytest.mark.parametrize("p", [2, 1, 3, 0.5, inf, -inf, 0, 2.5])
def test_dist(p):
  if p == 0:  # torch's backward of the 0-"norm" raises; ours is 0
    x = Tensor([[1.0, 2], [3, 4]], requires_grad=True)
    x.dist(Tensor([[1.0, 0], [3, 0]]), 0).backward()
    assert x.grad is None or x.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
  helper_test_op([(3, 4), (3, 4)], lambda x, y: x.dist(y, p), atol=1e-5, grad_atol=1e-5, forward_only=p == 0)
  helper_test_op([(2, 1, 4), (3, 1)], lambda x, y: x.dist(y, p), atol=1e-5, grad_atol=1e-5, forward_only=p == 0)
  helper_test_op([(5,), (5,)], lambda x, y: x.dist(y, p), dtype=dtypes.float64, forward_only=p == 0)
  # distance 0: gradient 0 (torch)
  helper_test_op([(4,), (4,)], lambda x, y: x.dist(y, p), vals=[[1.0, 2, 3, 4], [1.0, 2, 3, 4]], forward_only=p == 0)

def test_dist_dtypes():
  _same(Tensor([1.0, 2], dtype=dtypes.float16).dist(Tensor([0.0, 0], dtype=dtypes.float16)),
        torch.tensor([1.0, 2], dtype=torch.float16).dist(torch.zeros(2, dtype=torch.float16)))
  _same(Tensor([1.0, 2]).dist(Tensor([0.0, 0], dtype=dtypes.float64)), torch.tensor([1.0, 2]).dist(torch.zeros(2, dtype=torch.float64)))
  _same(Tensor([1, 2]).dist(Tensor([0, 0])), torch.tensor([1.0, 2]).dist(torch.zeros(2)))  # ints: float32 (torch raises)
  _same(Tensor([1.0, 2]).dist(3.0), torch.tensor([1.0, 2]).dist(torch.tensor(3.0)))
  with pytest.raises(RuntimeError): Tensor.zeros(0).dist(Tensor.zeros(0), inf)

@pytest.mark.parametrize("p,dim,maxnorm", [(2, 0, 1.0), (1, 1, 0.7), (inf, -1, 0.5), (3, 1, 0.0), (0.5, 0, 100.0), (2, 2, 1.5), (2.5, 1, 2.0)])
def test_renorm(p, dim, maxnorm):
  shape = (3, 4) if dim != 2 else (2, 3, 4)
  helper_test_op([shape], lambda x: x.renorm(p, dim, maxnorm), atol=1e-6, grad_atol=1e-5)
  helper_test_op([shape], lambda x: x.renorm(p, dim, maxnorm), dtype=dtypes.float64)
  helper_test_op([shape], lambda x: x.renorm(p, dim, maxnorm), dtype=dtypes.float16, atol=1e-3, rtol=1e-3, forward_only=True)

def test_renorm_edges_errors():
  _same(Tensor([[1.0, nan], [1, 1]]).renorm(2, 0, 0.5), torch.tensor([[1.0, nan], [1, 1]]).renorm(2, 0, 0.5))
  _same(Tensor.ones(0, 3).renorm(2, 0, 0.5), torch.ones(0, 3).renorm(2, 0, 0.5))
  _same(Tensor.ones(0, 3).renorm(2, 1, 0.5), torch.ones(0, 3).renorm(2, 1, 0.5))
  with pytest.raises(RuntimeError): Tensor.ones(0, 3).renorm(inf, 1, 0.5)
  with pytest.raises(RuntimeError): Tensor.ones(3).renorm(2, 0, 1)
  with pytest.raises(RuntimeError): Tensor.ones(2, 3).renorm(0, 0, 1)
  with pytest.raises(RuntimeError): Tensor.ones(2, 3).renorm(-1, 0, 1)
  with pytest.raises(RuntimeError): Tensor.ones(2, 3).renorm(2, 0, -1)
  with pytest.raises(IndexError): Tensor.ones(2, 3).renorm(2, 2, 1)
  with pytest.raises(TypeError): Tensor.ones(2, 3, dtype=dtypes.int32).renorm(2, 0, 1)

@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 1, 2), (), (0,)])
@pytest.mark.parametrize("offset", [0, 1, -2])
def test_diagflat(shape, offset):
  helper_test_op([shape], lambda x: x.diagflat(offset))
  helper_test_op([shape], lambda x: x.diagflat(offset), dtype=dtypes.int32)
  if shape: helper_test_op([shape], lambda x: x.diagflat(offset), dtype=dtypes.bool)  # (the helper cannot build a 0-d bool)

@pytest.mark.parametrize("shape,offset,dim1,dim2", [((3,), 0, -2, -1), ((2, 3), 1, 0, 2), ((2, 3), 1, 2, 0), ((2, 3), -1, 1, 0), ((2, 3, 4), 2, 1, 3),
                                                     ((2, 3, 4), -1, -1, 0), ((2, 0), 1, -2, -1), ((4,), 0, 1, 0), ((2, 2), 0, -3, -1)])
def test_diag_embed_full_signature(shape, offset, dim1, dim2):
  helper_test_op([shape], lambda x: torch.diag_embed(x, offset, dim1, dim2), lambda x: _diag_embed(x, offset, dim1, dim2))
  helper_test_op([shape], lambda x: torch.diag_embed(x, offset, dim1, dim2), lambda x: _diag_embed(x, offset, dim1, dim2), dtype=dtypes.int8)
  if (offset, dim1, dim2) == (0, -2, -1): helper_test_op([shape], lambda x: x.diag_embed())

def test_diag_embed_errors():
  with pytest.raises(RuntimeError): _diag_embed(Tensor.ones(2, 2), 1, 0, 0)
  with pytest.raises(RuntimeError): _diag_embed(Tensor.ones(2, 2), 1, 0, -3)
  with pytest.raises(IndexError): _diag_embed(Tensor.ones(2, 2), 1, 0, 3)
  with pytest.raises(IndexError): _diag_embed(Tensor(1.0), 0, -2, -1)

# ---------------- index_copy, masked_scatter

@pytest.mark.parametrize("shape,dim,index", [((5, 3), 0, [4, 0, 2]), ((5, 3), 1, [2, 0]), ((2, 4, 3), -2, [3]), ((5, 3), 0, []),
                                             ((4,), 0, [1, 3, 0, 2])])
def test_index_copy(shape, dim, index):
  src_shape = tuple(len(index) if i == dim % len(shape) else s for i, s in enumerate(shape))
  helper_test_op([shape, src_shape], lambda x, s: x.index_copy(dim, torch.tensor(index, dtype=torch.int64), s),
                 lambda x, s: x.index_copy(dim, Tensor(index, dtype=dtypes.int32), s), forward_only=not index)  # (no index: source has no grad)
  helper_test_op([shape, src_shape], lambda x, s: x.index_copy(dim, torch.tensor(index, dtype=torch.int64), s),
                 lambda x, s: x.index_copy(dim, Tensor(index, dtype=dtypes.int64), s), dtype=dtypes.int16)

def test_index_copy_edges_errors():
  x = np.zeros((3, 2), np.float32)
  src = np.array([[1.0, 2], [3, 4]], np.float32)
  t = torch.from_numpy(x)
  _same(Tensor(x).index_copy(0, Tensor([2, 2]), Tensor(src)), t.index_copy(0, torch.tensor([2, 2]), torch.from_numpy(src)))  # the last write wins
  _same(Tensor(x).index_copy(1, Tensor(1), Tensor([[1.0], [2], [3]])), t.index_copy(1, torch.tensor(1), torch.tensor([[1.0], [2], [3]])))
  _same(Tensor(5.0).index_copy(0, Tensor(0), Tensor(1.0)), torch.tensor(5.0).index_copy(0, torch.tensor(0), torch.tensor(1.0)))
  _same(Tensor(5.0).index_copy(0, Tensor([0]), Tensor([1.0])), torch.tensor(5.0).index_copy(0, torch.tensor([0]), torch.tensor([1.0])))
  with pytest.raises(RuntimeError): Tensor(x).index_copy(0, Tensor([2, 0]), Tensor(src, dtype=dtypes.float64))
  with pytest.raises(TypeError): Tensor(x).index_copy(0, Tensor([2.0, 0]), Tensor(src))
  with pytest.raises(IndexError): Tensor(x).index_copy(0, Tensor([[2, 0]]), Tensor(src))
  with pytest.raises(RuntimeError): Tensor(x).index_copy(0, Tensor([1]), Tensor([[1.0, 2, 3]]))
  with pytest.raises(IndexError): Tensor(x).index_copy(2, Tensor([1]), Tensor([[1.0, 2]]))

@pytest.mark.parametrize("shape,mask_shape,src_shape", [((2, 3), (2, 3), (5,)), ((2, 3), (3,), (2, 4)), ((3,), (2, 3), (6,)),
                                                         ((2, 3), (2, 3), (2, 3)), ((4, 1), (1, 5), (20,)), ((0, 3), (3,), (2,))])
def test_masked_scatter(shape, mask_shape, src_shape):
  rng = np.random.default_rng(4)
  m = rng.random(mask_shape) < 0.6
  helper_test_op([shape, src_shape], lambda x, s: x.masked_scatter(torch.from_numpy(m), s), lambda x, s: x.masked_scatter(Tensor(m), s),
                 forward_only=0 in shape)  # (an empty self: source has no grad)
  helper_test_op([shape, src_shape], lambda x, s: x.masked_scatter(torch.from_numpy(m), s), lambda x, s: x.masked_scatter(Tensor(m), s),
                 dtype=dtypes.int32)

def test_masked_scatter_edges_errors():
  m = np.array([True, False, True])
  _same(Tensor.zeros(2, 3).masked_scatter(Tensor(m), Tensor([1.0, 2, 3, 4])),
        torch.zeros(2, 3).masked_scatter(torch.from_numpy(m), torch.tensor([1.0, 2, 3, 4])))
  _same(Tensor.zeros(2, 3).masked_scatter(Tensor([False] * 3), Tensor.zeros(0)),
        torch.zeros(2, 3).masked_scatter(torch.tensor([False] * 3), torch.zeros(0)))
  with pytest.raises(RuntimeError): Tensor.zeros(2, 3).masked_scatter(Tensor(m), Tensor([1.0, 2, 3]))
  with pytest.raises(RuntimeError): Tensor.zeros(2, 3).masked_scatter(Tensor(m), Tensor(1.0))
  with pytest.raises(TypeError): Tensor.zeros(2, 3).masked_scatter(Tensor([1, 0, 1]), Tensor([1.0, 2, 3, 4]))
  with pytest.raises(RuntimeError): Tensor.zeros(2, 3).masked_scatter(Tensor(m), Tensor([1, 2, 3, 4]))
