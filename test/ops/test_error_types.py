"""A mistake raises the exception type torch raises for it (fusegrad's TensorError is a RuntimeError and a ValueError)."""
import pytest
import torch
from fusegrad import Tensor

CASES = {
 "matmul": (lambda T: T.ones(2,3) @ T.ones(4,5)),
 "matmul1d": (lambda T: T.ones(3) @ T.ones(4)),
 "reshape": (lambda T: T.ones(2,3).reshape(4,2)),
 "reshape_neg": (lambda T: T.ones(2,3).reshape(-1,-1)),
 "view": (lambda T: T.ones(2,3).view(5)),
 "flip_dup": (lambda T: T.ones(2,3).flip((0,0))),
 "flip_axis": (lambda T: T.ones(2,3).flip(3)),
 "permute": (lambda T: T.ones(2,3).permute(0,0)),
 "permute_len": (lambda T: T.ones(2,3).permute(0,)),
 "transpose": (lambda T: T.ones(2,3).transpose(0,5)),
 "sum_axis": (lambda T: T.ones(2,3).sum(5)),
 "expand": (lambda T: T.ones(2,3).expand(4,3)),
 "add_bcast": (lambda T: T.ones(2,3) + T.ones(4,3)),
 "cat": (lambda T: T.cat([T.ones(2,3), T.ones(2,4)])),
 "stack": (lambda T: T.stack([T.ones(2,3), T.ones(2,4)])),
 "gather": (lambda T: T.ones(2,3).gather(0, T.zeros(2,3,4).long() if T is torch else T.zeros(2,3,4).int())),
 "gather_dim": (lambda T: T.ones(2,3).gather(5, T.zeros(2,3).long() if T is torch else T.zeros(2,3).int())),
 "scatter": (lambda T: T.ones(2,3).scatter(0, (T.zeros(2,3,4).long() if T is torch else T.zeros(2,3,4).int()), T.ones(2,3,4))),
 "einsum": (lambda T: T.einsum("ij,jk->ik", T.ones(2,3), T.ones(4,5))),
 "einsum_bad": (lambda T: T.einsum("ij,jk", T.ones(2,3))),
 "conv": (lambda T: (torch.nn.functional.conv2d(T.ones(1,3,5,5), T.ones(2,4,3,3)) if T is torch else T.ones(1,3,5,5).conv2d(T.ones(2,4,3,3)))),
 "squeeze": (lambda T: T.ones(2,3).squeeze(4)),
 "unsqueeze": (lambda T: T.ones(2,3).unsqueeze(4)),
 "index": (lambda T: T.ones(2,3)[5]),
 "index_many": (lambda T: T.ones(2,3)[0,0,0]),
 "split": (lambda T: T.ones(4).split([1,2])),
 "chunk0": (lambda T: T.ones(4).chunk(0)),
 "where": (lambda T: T.where(T.ones(2,3)>0, T.ones(4,3), T.ones(2,3))),
 "pad": (lambda T: (torch.nn.functional.pad(T.ones(2,3),(1,1,1)) if T is torch else T.ones(2,3).pad((1,1,1)))),
 "repeat": (lambda T: T.ones(2,3).repeat(2)),
 "linear": (lambda T: (torch.nn.functional.linear(T.ones(2,3), T.ones(4,5)) if T is torch else T.ones(2,3).linear(T.ones(5,4)))),
 "item": (lambda T: T.ones(2).item()),
 "softmax_dim": (lambda T: T.ones(2,3).softmax(4)),
 "cross_entropy_shape": (lambda T: (torch.nn.functional.cross_entropy(T.ones(2,3), T.zeros(3).long()) if T is torch else T.ones(2,3).cross_entropy(T.zeros(3).int()))),
 "bool_ambig": (lambda T: bool(T.ones(2))),
 "dot": (lambda T: T.ones(2,3).dot(T.ones(2,3))),
 "masked_fill": (lambda T: T.ones(2,3).masked_fill(T.ones(4,3)>0, 1.0)),
 "max_pool": (lambda T: (torch.nn.functional.max_pool2d(T.ones(3), 2) if T is torch else T.ones(3).max_pool2d(2))),
}

@pytest.mark.parametrize("name", list(CASES))
def test_same_exception_type_as_torch(name):
  with pytest.raises(Exception) as want: CASES[name](torch)
  with pytest.raises(Exception) as got: CASES[name](Tensor)
  assert isinstance(got.value, want.type), f"{name}: torch raises {want.type.__name__}, fusegrad {type(got.value).__name__}: {got.value}"

# ======================================================================== tinygrad's test_ops expectations: dtype misuse is a RuntimeError too
@pytest.mark.parametrize("fn", [lambda: Tensor([1.0]) & Tensor([1.0]), lambda: Tensor([1.0]) | 1, lambda: Tensor([1.0]) ^ Tensor([2.0]),
                                lambda: ~Tensor([1.0]), lambda: Tensor([True]) - Tensor([True]), lambda: -Tensor([True]),
                                lambda: Tensor([1.0, 2.0]).gather(0, Tensor([0.0])), lambda: Tensor.linspace(5, 10, 3, dtype="bool")])
def test_dtype_misuse_is_runtime_and_type_error(fn):
  with pytest.raises(RuntimeError): fn()
  with pytest.raises(TypeError): fn()

def test_stack_and_cat_refuse_a_sequence_plus_more_tensors():
  with pytest.raises(ValueError, match="not both"): Tensor.stack((Tensor([1, 2]), Tensor([3, 4])), Tensor([5, 6]))
  with pytest.raises(ValueError, match="not both"): Tensor.cat([Tensor([1, 2])], Tensor([3]))
  assert Tensor.stack((Tensor([1, 2]), Tensor([3, 4])), 1).tolist() == [[1, 3], [2, 4]]  # torch's (seq, dim)
