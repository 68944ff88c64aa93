"""The main demo, shortened: the CNN from examples/beautiful_mnist.py trained briefly on real MNIST digits."""
import os, sys, pytest
from fusegrad.nn.datasets import MNIST_DEFAULT

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

@pytest.mark.skipif(not os.path.isdir(MNIST_DEFAULT), reason=f"MNIST IDX files not found at {MNIST_DEFAULT}")
def test_beautiful_mnist_learns(capsys):
  import beautiful_mnist
  acc = beautiful_mnist.main(["--data", MNIST_DEFAULT, "--steps", "60", "--batch", "64", "--lr", "3e-3"])
  out = capsys.readouterr().out
  assert "test accuracy:" in out
  assert acc > 0.5, f"60 steps should already be far above chance (10%), got {acc:.2%}"
