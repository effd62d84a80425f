"""Random model '100:54' from scripts/fuzz_models.py (blocks: reshape, avgpool, permute, cat, permute; head: map)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b3a = nn.Conv2d(8, 4, 1)
        self.b3b = nn.Conv2d(8, 8, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(1, 8, 192, 1).reshape(1, 8, 12, 16)
        x = F.avg_pool2d(x, 2)
        x = x.permute(0, 1, 3, 2)
        x = torch.cat([F.hardtanh(self.b3a(x), -1.0, 1.0), F.relu(self.b3b(x))], dim=1)
        x = x.permute(0, 1, 3, 2)
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 8, 12, 16),)
# cortex-m55: refused: the firmware would refuse the program at load (conv/pool input must be channels-last; got 0,1,2,3) after a reshape into an avg pool (the pool's zero pad inherited NCHW from the view_copy) (fixed in channels_last_everywhere.py; regression test in tests/test_fuzz_models.py)
