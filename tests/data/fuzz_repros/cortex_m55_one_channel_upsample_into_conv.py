"""A one-channel upsample feeding a 1x1 conv (found by scripts/fuzz_models.py, seed 100, models 60, 168, 177)."""
import torch
import torch.nn as nn

torch.manual_seed(0)
ModelUnderTest = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(1, 8, 1)).eval()
ModelInputs = (torch.randn(1, 1, 8, 8),)
# cortex-m55: refused: 1 float op(s) left on the CPU: aten::convolution (the upsample's one-channel output had NCHW strides, so the conv was contiguous and ExecuTorch left it in float; fixed in channels_last_everywhere.py; regression test in tests/test_fuzz_models.py)
