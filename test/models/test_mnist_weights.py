"""Weights of the MNIST CNN: a PyTorch-saved .pth of the same model loads with torch_load, and safe_save round-trips."""
import os, sys
import numpy as np
import torch
from fusegrad import Tensor
from fusegrad.nn.state import get_state_dict, load_state_dict, safe_load, safe_save, torch_load

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from beautiful_mnist import Model

def torch_model() -> torch.nn.Sequential:
  return torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                             torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                             torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))

def test_torch_checkpoint_of_the_same_model_loads(tmp_path):
  torch.manual_seed(0)
  tm = torch_model()
  with torch.no_grad():  # non-trivial running statistics
    for m in tm:
      if isinstance(m, torch.nn.BatchNorm2d): m.running_mean.uniform_(-0.5, 0.5); m.running_var.uniform_(0.5, 2.0)
  tm.eval()
  path = tmp_path / "mnist.pth"
  torch.save(tm.state_dict(), path)
  ours = Model()
  # torch's Sequential numbers its layers; ours keeps only the layers with state in `layers`: map by position
  sd = torch_load(str(path))
  mine = get_state_dict(ours)
  assert len(sd) == len(mine)
  renamed = {k_ours: sd[k_torch] for k_ours, k_torch in zip(mine, sd)}
  load_state_dict(ours, renamed)
  x = np.random.default_rng(1).standard_normal((4, 1, 28, 28)).astype(np.float32)
  with torch.no_grad(): ref = tm(torch.tensor(x)).numpy()
  np.testing.assert_allclose(ours(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-4)

def test_safe_save_roundtrip_is_bit_exact(tmp_path):
  Tensor.manual_seed(3)
  model = Model()
  sd = get_state_dict(model)
  path = str(tmp_path / "mnist.safetensors")
  safe_save(sd, path)
  back = safe_load(path)
  assert set(back) == set(sd)
  for k, v in sd.items():
    assert back[k].dtype == v.dtype and back[k].shape == v.shape
    assert bytes(back[k].to("CPU").contiguous().realize()._buffer().as_memoryview()) == bytes(v.contiguous().realize()._buffer().as_memoryview()), k
