"""GGUF files, where tinygrad's LLM app keeps them: the reader and the dequantizing Tensor ops live in fusegrad/nn/gguf.py
(below this package, so nn.state.gguf_load can use them)."""
from fusegrad.nn.gguf import (GGML_TYPES, PACKED_TYPES, SUPPORTED_TYPES, GGMLType, GGUFError, GGUFFile, GGUFTensorInfo, dequantize, gguf_load,
                              Packed, pack, read_gguf, to_ggml_type)

__all__ = ["GGUFError", "GGMLType", "GGML_TYPES", "GGUFTensorInfo", "GGUFFile", "read_gguf", "gguf_load", "dequantize", "to_ggml_type", "SUPPORTED_TYPES",
           "pack", "Packed", "PACKED_TYPES"]
