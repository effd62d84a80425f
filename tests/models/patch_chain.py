"""High-resolution first stages for patch-based execution (emlkit/passes/patch_stages.py; tests/passes): a
strided 3x3 convolution, a depthwise 3x3 and a pointwise convolution with a residual add at full resolution,
then a strided convolution after which the maps are small, and a classifier."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ModelUnderTest(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.pw = nn.Conv2d(32, 32, 1)
        self.down = nn.Conv2d(32, 16, 3, stride=2, padding=1)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.relu6(self.stem(x))
        y = s + self.pw(F.relu6(self.dw(s)))
        z = torch.relu(self.down(y))
        return self.head(z.mean((2, 3)))


ModelInputs = (torch.randn(1, 3, 40, 24),)
