"""An independently written gated MLP (not in the zoo): two parallel linear branches, one through a
sigmoid gate, multiplied, then a residual linear head. Batch of 2."""

import torch
import torch.nn as nn

torch.manual_seed(5)


class GatedMlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(32, 48)
        self.g = nn.Linear(32, 48)
        self.out = nn.Linear(48, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x) * torch.sigmoid(self.g(x))
        return self.out(h) + x


ModelUnderTest = GatedMlp().eval()
ModelInputs = (torch.randn(2, 32),)
