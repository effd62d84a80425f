"""A ConvTranspose1d's output unsqueezed into a 1x1 conv (found by scripts/fuzz_models.py, seed 72, model 18)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Repro(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose1d(12, 8, 2, stride=3)
        self.conv = nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.up(x).unsqueeze(-1))


ModelUnderTest = Repro().eval()
ModelInputs = (torch.randn(1, 12, 48),)
# cortex-m55: defect: the firmware would refuse the program at load (quantized_conv2d: input must be channels-last; got 0,1,2,3): the unsqueeze of the 1-D layer's squeezed channels-last output looked channels-last in the export but is an unsqueeze_copy with a contiguous output in the edge program (fixed in channels_last_everywhere.py; regression test in tests/test_fuzz_models.py)
