"""MobileNet-style stack written with F.relu6 (exports as aten.relu6, not hardtanh)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Relu6Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 24, 1)
        self.dw2 = nn.Conv2d(24, 24, 3, stride=2, padding=1, groups=24)
        self.pw2 = nn.Conv2d(24, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(self.stem(x))
        x = F.relu6(self.dw(x))
        x = F.relu6(self.pw(x))
        x = F.relu6(self.dw2(x))
        return self.pw2(x)


ModelUnderTest = Relu6Net().eval()
ModelInputs = (torch.randn(1, 3, 32, 32),)
