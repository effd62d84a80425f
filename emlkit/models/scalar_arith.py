"""Scalar arithmetic and clamps after activations, written the way users write them."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ScalarArith(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        t = torch.sigmoid(y)
        a = t * 2.0 + 0.5
        b = (1 - t) / 4
        c = torch.clamp(torch.tanh(y) - 0.25, -0.5, 0.5)
        return self.conv2(a + b + c)


ModelUnderTest = ScalarArith().eval()
ModelInputs = (torch.randn(1, 3, 16, 16),)
