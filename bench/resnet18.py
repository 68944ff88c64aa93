"""ResNet-18 inference, batch 1, 224x224, random weights, eval mode: fusegrad under TinyJit vs the same weights in PyTorch
(CPU, fusegrad's thread count).

Both models are written here from torchvision's architecture (conv 7x7/2 + BN + ReLU + maxpool 3x3/2, four stages of two
BasicBlocks with 64/128/256/512 channels and a 1x1 stride-2 conv + BN downsample, global average pool, fc 1000), with the
same parameter names, and load one random state dict (BatchNorm running statistics random too, so eval mode is not an
identity). The logits are compared with a tolerance relative to their scale. Reported: wall ms per image (median).

usage: python bench/resnet18.py"""
from common import Row, check_close, get_torch, median_wall, run_standalone, PROBLEMS  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
import numpy as np
from fusegrad import Tensor, TinyJit, nn
from fusegrad.nn.state import get_state_dict, load_state_dict
from fusegrad.runtime.ops_cpu import cpu_count

H = W = 224
STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # (channels, first block's stride)

class BasicBlock:
  def __init__(self, cin: int, cout: int, stride: int):
    self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm(cout)
    self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm(cout)
    self.downsample = [nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm(cout)] if stride != 1 or cin != cout else []
  def __call__(self, x: Tensor) -> Tensor:
    out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
    return (out + x.sequential(self.downsample)).relu()

class ResNet18:
  def __init__(self, num_classes: int = 1000):
    self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm(64)
    cin = 64
    for i, (c, s) in enumerate(STAGES):
      setattr(self, f"layer{i + 1}", [BasicBlock(cin, c, s), BasicBlock(c, c, 1)]); cin = c
    self.fc = nn.Linear(512, num_classes)
  def __call__(self, x: Tensor) -> Tensor:
    x = self.bn1(self.conv1(x)).relu().max_pool2d(3, 2, padding=1)
    x = x.sequential(self.layer1 + self.layer2 + self.layer3 + self.layer4)
    return self.fc(x.mean((2, 3)))

def _torch_model(torch):
  tnn = torch.nn
  class TBlock(tnn.Module):
    def __init__(self, cin, cout, stride):
      super().__init__()
      self.conv1, self.bn1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False), tnn.BatchNorm2d(cout)
      self.conv2, self.bn2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False), tnn.BatchNorm2d(cout)
      down = stride != 1 or cin != cout
      self.downsample = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False), tnn.BatchNorm2d(cout)) if down else tnn.Identity()
    def forward(self, x): return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))) + self.downsample(x))
  class TResNet18(tnn.Module):
    def __init__(self):
      super().__init__()
      self.conv1, self.bn1 = tnn.Conv2d(3, 64, 7, 2, 3, bias=False), tnn.BatchNorm2d(64)
      cin = 64
      for i, (c, s) in enumerate(STAGES):
        setattr(self, f"layer{i + 1}", tnn.Sequential(TBlock(cin, c, s), TBlock(c, c, 1))); cin = c
      self.fc = tnn.Linear(512, 1000)
    def forward(self, x):
      x = tnn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 3, 2, 1)
      x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
      return self.fc(x.mean((2, 3)))
  return TResNet18()

def _random_state(model) -> dict[str, np.ndarray]:
  """Kaiming-normal (fan_out) convs as torchvision initialises them; random BN affine and running statistics."""
  rng, out = np.random.default_rng(0), {}
  for k, t in get_state_dict(model).items():
    shape, leaf = t.shape, k.rsplit(".", 1)[-1]
    if leaf == "num_batches_tracked": v = np.zeros(shape, np.int64)
    elif len(shape) == 4: v = rng.standard_normal(shape) * np.sqrt(2 / (shape[0] * shape[2] * shape[3]))
    elif k.startswith("fc."): v = rng.uniform(-1, 1, shape) / np.sqrt(512)
    elif leaf == "weight": v = rng.uniform(0.5, 1.5, shape)
    elif leaf in ("bias", "running_mean"): v = rng.standard_normal(shape) * 0.1
    elif leaf == "running_var": v = rng.uniform(0.5, 1.5, shape)
    else: raise RuntimeError(f"resnet18: no init for {k}")
    out[k] = v.astype(np.float32) if v.dtype != np.int64 else v
  return out

def rows(reps: int = 10, warmup: int = 2) -> list[Row]:
  x = np.random.default_rng(1).standard_normal((1, 3, H, W), dtype=np.float32)
  model = ResNet18()
  state = _random_state(model)
  load_state_dict(model, {k: Tensor(v) for k, v in state.items()})

  @TinyJit
  def fwd(t: Tensor) -> Tensor: return model(t).realize()
  tx = Tensor(x).realize()
  got = fwd(tx).numpy()  # run; later calls capture and replay
  fg_ms = median_wall(lambda: fwd(tx).numpy(), reps, warmup) * 1e3

  ref_ms, torch = None, get_torch()
  if torch is not None:
    torch.set_num_threads(cpu_count())  # the threads fusegrad runs kernels on
    tm = _torch_model(torch)
    tm.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    tm.eval()
    px = torch.from_numpy(x)
    with torch.inference_mode():
      want = tm(px).numpy()
      scale = float(np.abs(want).max())
      check_close(f"ResNet-18 224x224 b1 logits (scale {scale:.3g}), first call", got, want, rtol=1e-3, atol=1e-3 * scale)
      check_close(f"ResNet-18 224x224 b1 logits (scale {scale:.3g}), JIT replay", fwd(tx).numpy(), want, rtol=1e-3, atol=1e-3 * scale)
      ref_ms = median_wall(lambda: tm(px), reps, warmup) * 1e3
  if not np.all(np.isfinite(got)): PROBLEMS.append("ResNet-18: non-finite fusegrad logits")
  return [Row(f"ResNet-18 inference {H}x{W} b1 (JIT)", fg_ms, ref_ms, "ms/image", False, "PyTorch")]

if __name__ == "__main__":
  run_standalone(rows)
