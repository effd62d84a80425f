"""A conv followed by elementwise chains that a single lookup table can replace."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class LutActivations(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        a = torch.sigmoid(y) * 2.0 + 0.5
        b = torch.tanh(y) - 0.25
        return a + b


ModelUnderTest = LutActivations().eval()
ModelInputs = (torch.randn(1, 3, 16, 16),)
