"""Grouped convolutions with padding (not depthwise; one with 42 output channels, not a multiple of 4)
and a depthwise layer whose channel count is not a multiple of 16: layers whose folded window bias
(emlkit/passes/window_bias.py) the MVE general path and the depthwise 16-channel blocks read from the
program."""

import torch
import torch.nn as nn

torch.manual_seed(16)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.g4 = nn.Conv2d(16, 32, 3, padding=1, groups=4)
        self.g2 = nn.Conv2d(32, 42, 3, stride=2, padding=1, groups=2)
        self.dw = nn.Conv2d(42, 42, 3, padding=1, groups=42)
        self.pw = nn.Conv2d(42, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in (self.g4, self.g2, self.dw):
            x = torch.relu(layer(x))
        return self.pw(x)


ModelUnderTest = Net().eval()
ModelInputs = (torch.randn(1, 16, 16, 16),)
