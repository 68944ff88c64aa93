"""print(t) shows values laid out as torch prints them; repr stays tinygrad's summary."""
import torch
import pytest
from fusegrad import Tensor, dtypes

@pytest.mark.parametrize("make", [
  lambda T: T.tensor([[1.5, 2, 3], [4, 5, 6e-5]]), lambda T: T.tensor([1., 2.]), lambda T: T.tensor([True, False]),
  lambda T: T.tensor(3.5), lambda T: T.tensor([1e10, 1.0]), lambda T: T.tensor([0.1234567, 2.5]), lambda T: T.tensor([[-1, 20], [3, 4]]),
  lambda T: T.arange(24).reshape(2, 3, 4), lambda T: T.arange(2000).reshape(40, 50), lambda T: T.tensor([]),
  lambda T: T.zeros(0, 3),
], ids=["sci", "integral", "bool", "scalar", "big", "4dp", "ints", "3d", "summarized", "empty", "empty2d"])
def test_str_matches_torch(make):
  class T:
    tensor = staticmethod(lambda x: Tensor(x))
    arange = staticmethod(lambda n: Tensor.arange(n).realize())
    zeros = staticmethod(lambda *s: Tensor.zeros(*s))
  assert str(make(T)) == str(make(torch)).replace("dtype=torch.", "dtype=dtypes.")

def test_str_names_a_non_default_dtype_and_device():
  assert str(Tensor([1, 2], dtype=dtypes.int64)) == "tensor([1, 2], dtype=dtypes.long)"
  assert str(Tensor([1.0], device="PYTHON")) == "tensor([1.], device='PYTHON')"

def test_large_lazy_tensors_print_their_summary_and_repr_is_unchanged():
  t = Tensor.rand(100, 100)
  assert str(t) == repr(t) == "<Tensor (100, 100) dtypes.float on CPU with grad None>"
