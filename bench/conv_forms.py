"""conv2d in the other forms networks use, against torch.nn.functional.conv2d, as wall clock per call: ResNet's
stride-2 downsampling 3x3 and its 1x1 expansion, MobileNetV2's depthwise 3x3 (stride 1 and 2), a depthwise layer on
small images, a grouped 3x3 (ResNeXt), and a training step (forward, then input and weight gradients) of the 3x3
(stride 1 and 2) and of the depthwise conv. The cases and timers are bench/conv2d.py's (FORMS, TRAINED).

run_all.py runs these after the other rows: PyTorch's slow forms (its AVX2 depthwise conv takes 12-19 ms) kept this
VM's cores slow for a second or more after, which showed in the rows timed next.

usage: python bench/conv_forms.py"""
from common import run_standalone  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
from conv2d import form_rows as rows

if __name__ == "__main__":
  run_standalone(rows)
