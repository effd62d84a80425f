"""Random model 'dec7:5' from scripts/fuzz_models.py (found on cortex-m4, the same on every Cortex-M), shrunk by
hand (blocks: adapool, groupnorm; head: map): a GroupNorm after a non-dividing adaptive average pool reached its
layer norm through a copy to NCHW and a view of the dequantized map, so the layer norm stayed float (refused on
Cortex-M; now int8)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b0 = nn.Conv2d(3, 8, 3, 1, 1)
        self.b2 = nn.GroupNorm(4, 8)
        nn.init.uniform_(self.b2.weight, 0.5, 1.5)
        nn.init.uniform_(self.b2.bias, -0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.b0(x), (5, 5))
        return self.b2(x)


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 3, 6, 8),)
