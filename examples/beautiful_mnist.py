"""Train a small CNN on real Fashion-MNIST (default) or MNIST digits and report test accuracy.

  python examples/beautiful_mnist.py                               # Fashion-MNIST (apt-get install dataset-fashion-mnist)
  python examples/beautiful_mnist.py --data ../shared/data/mnist-10k  # MNIST digits from an IDX directory
"""
import argparse, math, time
from fusegrad import Tensor, TinyJit, nn
from fusegrad.nn import optim
from fusegrad.nn.state import get_parameters
from fusegrad.nn.datasets import fashion_mnist, mnist

try: from tqdm import trange
except ImportError:
  from fusegrad.helpers import tqdm as _tqdm
  def trange(n, **kw): return _tqdm(range(n), total=n, **kw)

class Model:
  def __init__(self):
    self.layers = [
      nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm(16), Tensor.relu, Tensor.max_pool2d,   # 16 x 14 x 14
      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm(32), Tensor.relu, Tensor.max_pool2d,  # 32 x 7 x 7
      lambda x: x.flatten(1), nn.Linear(32 * 7 * 7, 10)]
  def __call__(self, x: Tensor) -> Tensor: return x.sequential(self.layers)

def main(argv: list[str] | None = None) -> float:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--data", help="directory of MNIST-format IDX files (default: Fashion-MNIST from the Debian package)")
  p.add_argument("--steps", type=int, default=1500)
  p.add_argument("--batch", type=int, default=256)
  p.add_argument("--lr", type=float, default=3e-3)
  p.add_argument("--seed", type=int, default=42)
  args = p.parse_args(argv)

  X_train, Y_train, X_test, Y_test = mnist(args.data) if args.data else fashion_mnist()
  # normalise once; images stay on the device and batches are gathered there
  X_train, X_test = (X_train.float() / 255 - 0.5).realize(), (X_test.float() / 255 - 0.5).realize()
  Y_train, Y_test = Y_train.int().realize(), Y_test.int().realize()
  Tensor.manual_seed(args.seed)
  model = Model()
  opt = optim.Adam(get_parameters(model), lr=args.lr)
  n_train = X_train.shape[0]

  @TinyJit
  @Tensor.train()
  def train_step(idx: Tensor) -> Tensor:
    opt.zero_grad()
    x, y = X_train[idx], Y_train[idx]
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    # the loss and the update in one schedule, so the forward pass is computed once
    return loss.realize(*opt.schedule_step())

  @TinyJit
  def correct(x: Tensor, y: Tensor) -> Tensor: return (model(x).argmax(axis=1) == y).sum()

  st = time.perf_counter()
  bar = trange(args.steps)
  for i in bar:
    # cosine learning-rate decay; the lr lives in a tensor, so the jitted step picks it up without recompiling
    opt.lr.assign(Tensor([args.lr * 0.5 * (1 + math.cos(math.pi * i / args.steps))])).realize()
    loss = train_step(Tensor.randint(args.batch, high=n_train))
    if i % 50 == 0 or i == args.steps - 1: bar.set_description(f"loss {loss.item():6.3f}")
  hits, chunk = 0, 1000
  for s in range(0, X_test.shape[0] - chunk + 1, chunk): hits += correct(X_test[s:s + chunk], Y_test[s:s + chunk]).item()
  rest = X_test.shape[0] % chunk
  if rest: hits += (model(X_test[-rest:]).argmax(axis=1) == Y_test[-rest:]).sum().item()
  acc = hits / X_test.shape[0]
  print(f"test accuracy: {acc*100:.2f}% ({time.perf_counter() - st:.1f} s, {args.steps} steps of batch {args.batch})")
  return acc

if __name__ == "__main__":
  main()
