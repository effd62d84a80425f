"""Random model '100:186' from scripts/fuzz_models.py (blocks: add, dwconv, conv, permute, permute, mul; head: map)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b0 = nn.Conv2d(3, 3, 3, 1, 1)
        self.b1 = nn.Conv2d(3, 3, 3, 1, 1, groups=3)
        self.b2 = nn.Conv2d(3, 8, 3, 1, 1)
        self.b5 = nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.b0(x)
        x = F.relu6(self.b1(x))
        x = F.relu(self.b2(x))
        x = x.permute(0, 1, 3, 2)
        x = x.permute(0, 1, 3, 2)
        x = x * torch.sigmoid(self.b5(x))
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 3, 8, 6),)
# cortex-m55: refused: the firmware would refuse the program at load (conv/pool input must be channels-last; got 0,1,2,3) after a permute round trip (the second permute looked channels-last in the export's strides) (fixed in channels_last_everywhere.py; regression test in tests/test_fuzz_models.py)
