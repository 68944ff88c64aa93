"""A fast subset of the op tests on the PYTHON (interpreter) device: tiny tensors, one case per op family."""
import math
import pytest
import torch
import torch.nn.functional as F
from fusegrad import Tensor, dtypes
from .helpers import helper_test_op

DEV = "PYTHON"

CASES = {
  "add_broadcast": ([(3, 1), (1, 4)], lambda a, b: a + b, {}),
  "sub_mul_div": ([(2, 3), (2, 3)], lambda a, b: (a - b) * b / (b.abs() + 1), {}),
  "exp_log": ([(2, 3)], lambda x: x.exp().log(), dict(atol=1e-5)),
  "exp2_log2": ([(2, 3)], lambda x: x.exp2().log2(), dict(atol=1e-5)),
  "sin_cos_tan": ([(2, 3)], lambda x: x.sin() + x.cos() + (x / 2).tan(), {}),
  "sqrt_rsqrt": ([(2, 3)], lambda x: x.sqrt() + x.rsqrt(), dict(low=0.5, high=3)),
  "reciprocal": ([(4,)], lambda x: x.reciprocal(), dict(low=0.5, high=2)),
  "tanh_sigmoid_erf": ([(2, 3)], lambda x: x.tanh() + x.sigmoid() + x.erf(), {}),
  "relu_abs_sign_neg": ([(2, 3)], lambda x: x.relu() + x.abs() * x.sign() - (-x), {}),
  "rounding": ([(2, 4)], lambda x: x.floor() + x.ceil() * 2 + x.round() * 3 + x.trunc() * 4, dict(low=-5, high=5)),
  "square_pow": ([(2, 3)], lambda x: x.square() + x ** 1.5, dict(low=0.1, high=2)),
  "maximum_minimum": ([(2, 3), (2, 3)], lambda a, b: a.maximum(b) - a.minimum(b), {}),
  "compare": ([(2, 3), (2, 3)], lambda a, b: (a < b).float() + (a >= b).float() * 2 + (a == a).float(), {}),
  "where": ([(2, 3), (2, 3)], lambda a, b: torch.where(a > b, a, b * 2), dict(fusegrad_fxn=lambda a, b: (a > b).where(a, b * 2))),
  "clip": ([(6,)], lambda x: x.clip(-0.5, 0.5), {}),
  "int_floordiv_mod": (None, lambda a, b: a // b + a % b * 100, dict(vals=[[7, -7, 7, -7], [2, 2, -2, -3]], dtype=dtypes.int32)),
  "int_wrap": (None, lambda a, b: a * b + a, dict(vals=[[100, -128, 127], [3, 1, 1]], dtype=dtypes.int8)),
  "bitwise": ([(2, 3), (2, 3)], lambda a, b: (a & b) | (a ^ ~b), dict(dtype=dtypes.int32, low=-50, high=50)),
  "shifts": (None, lambda a: (a << 2) + (a >> 1), dict(vals=[[1, -8, 100]], dtype=dtypes.int32)),
  "sum_axes": ([(2, 3, 4)], lambda x: x.sum((0, 2)), {}),
  "max_min_keepdim": ([(3, 4)], lambda x: torch.amax(x, 1, keepdim=True) + torch.amin(x, 0, keepdim=True),
                      dict(fusegrad_fxn=lambda x: x.max(1, keepdim=True) + x.min(0, keepdim=True))),
  "mean_var_std": ([(3, 4)], lambda x: x.mean(0) + x.var(0) + x.std(0), {}),
  "prod": ([(2, 3)], lambda x: x.prod(1), {}),
  "argmax_argmin": ([(3, 4)], lambda x: x.argmax(1) * 10 + x.argmin(1), dict(check_dtype=False)),
  "any_all": ([(3, 4)], lambda x: x.any(1) & x.all(1).logical_not(), dict(dtype=dtypes.bool)),
  "reshape_permute_expand": ([(2, 3)], lambda x: x.reshape(3, 2).permute(1, 0).reshape(1, 2, 3).expand(2, 2, 3), {}),
  "flip_pad": ([(2, 3)], lambda x: F.pad(x.flip(1), (1, 2, 0, 1), value=0.5), dict(fusegrad_fxn=lambda x: x.flip(1).pad((1, 2, 0, 1), value=0.5))),
  "getitem": ([(4, 5)], lambda x: x[1:3, ::2][:, None] + x[-1, 1:4], dict(fusegrad_fxn=lambda x: x[1:3, ::2][:, None] + x[-1, 1:4])),
  "cat_stack": ([(2, 3), (1, 3)], lambda a, b: torch.cat([a, b, a]).sum(0) + torch.stack([a[0], b[0]]).sum(0),
                dict(fusegrad_fxn=lambda a, b: a.cat(b, a).sum(0) + a[0].stack(b[0]).sum(0))),
  "split_chunk": ([(4, 3)], lambda x: x.split([1, 3]), {}),
  "matmul": ([(3, 4), (4, 2)], lambda a, b: a @ b, dict(atol=1e-5)),
  "matmul_batched": ([(2, 2, 3), (3, 2)], lambda a, b: a @ b, dict(atol=1e-5)),
  "softmax_logsoftmax": ([(2, 4)], lambda x: x.softmax(-1) + x.log_softmax(0), {}),
  "cast_half": ([(2, 3)], lambda x: x.half() * 3, dict(atol=1e-2, rtol=1e-2, forward_only=True)),
  "cast_int": ([(6,)], lambda x: x.to(torch.int32), dict(fusegrad_fxn=lambda x: x.cast(dtypes.int32), low=-10, high=10, forward_only=True)),
  "bitcast": ([(4,)], lambda x: x.view(torch.int32), dict(fusegrad_fxn=lambda x: x.bitcast(dtypes.int32), forward_only=True)),
  "nan_inf": (None, lambda x: x.exp() + x.sqrt() + x.relu(), dict(vals=[[math.inf, -1.0, math.nan, 0.0]], forward_only=True)),
  "float64": ([(2, 3)], lambda x: x.exp() * x.sin(), dict(dtype=dtypes.float64, atol=1e-12, rtol=1e-12)),
}

@pytest.mark.parametrize("name", list(CASES))
def test_python_device(name):
  shapes, fn, kw = CASES[name]
  helper_test_op(shapes, fn, device=DEV, **kw)

def test_python_device_creation():
  assert Tensor.arange(5, device=DEV).tolist() == [0, 1, 2, 3, 4]
  assert Tensor.eye(2, device=DEV).tolist() == [[1.0, 0.0], [0.0, 1.0]]
  Tensor.manual_seed(3)
  r = Tensor.rand(16, device=DEV).numpy()
  assert r.min() >= 0 and r.max() < 1
  assert Tensor.full((2,), 7, device=DEV).device == DEV
