"""Neural-network layers (filled in by the autograd/nn issue)."""
