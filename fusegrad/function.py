"""`from fusegrad.function import function`, where tinygrad programs import it from (defined in engine/jit.py)."""
from fusegrad.engine.jit import function

__all__ = ["function"]
