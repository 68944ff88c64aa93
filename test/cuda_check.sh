#!/usr/bin/env bash
# The CUDA check on a machine with an NVIDIA GPU (docs/cuda.md), under 8 minutes: device status, the op suite on CUDA,
# tensor-core matmuls against PyTorch,
# then bench/cuda.py (matmul 4096 fp32/fp16 TFLOP/s and the beautiful_mnist training step, beside PyTorch CUDA where
# torch with CUDA is installed). Needs the repository, Python 3.11 with numpy, pytest (pytest-xdist to use all cores),
# torch for the op references, and `pip install "nvidia-cuda-nvrtc==13.0.*"`.
# usage: bash test/cuda_check.sh
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python -c "from fusegrad import Device; s = Device.status(); print('devices:', s); assert s.get('CUDA') == 'ok', s.get('CUDA')" || exit 1
workers=$(python -c "import xdist" 2>/dev/null && echo "-n $(nproc)" || echo "")
# the op suite with CUDA as the default device; the CUDA compile check of the CPU run is not needed here
DEV=CUDA CUDA_COMPILE_CHECK=0 timeout 300 python -m pytest -q -p no:cacheprovider -o addopts="" $workers test/ops/test_ops.py test/ops/test_ops_python.py
suite=$?
# tensor cores (float16/bfloat16 matmuls, forward and backward) against the hardware's mma.sync fragment layout
CUDA_COMPILE_CHECK=0 timeout 50 python -m pytest -q -p no:cacheprovider -o addopts="" test/ops/test_gpu_tensor_cores.py -k real_gpu || suite=1
timeout 100 python bench/cuda.py
bench=$?
echo "op suite exit $suite, bench exit $bench"
[ $suite -eq 0 ] && [ $bench -eq 0 ]
