"""Random model '100:255' from scripts/fuzz_models.py (blocks: conv, reshape, upsample, conv; head: map)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b0 = nn.Conv2d(3, 12, 3, 1, 1)
        self.b3 = nn.Conv2d(12, 12, 1, 1, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.b0(x))
        x = x.reshape(1, 12, 48, 1).reshape(1, 12, 4, 12)
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        x = F.relu6(self.b3(x))
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 3, 4, 12),)
# cortex-m55: refused: the firmware would refuse the program at load (conv/pool input must be channels-last; got 0,1,2,3) after a reshape, then an upsample (view_copy output contiguous, the upsample inherited NCHW) (fixed in channels_last_everywhere.py; regression test in tests/test_fuzz_models.py)
