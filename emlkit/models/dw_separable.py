"""Depthwise-separable block: depthwise 3x3 + BN + ReLU6, pointwise 1x1 + BN + ReLU6."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class DwSeparable(nn.Module):
    def __init__(self, cin: int = 16, cout: int = 32) -> None:
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.act = nn.ReLU6()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.bn1(self.dw(x)))
        return self.act(self.bn2(self.pw(x)))


ModelUnderTest = DwSeparable().eval()
ModelInputs = (torch.randn(1, 16, 16, 16),)
