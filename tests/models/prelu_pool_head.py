"""A small CNN with ops that stay in float under --allow-float on every target: PReLU (gt/mul/where on
Cortex-M) and an adaptive max pool to an uneven 2x3 grid (no int8 kernel on the CPU, none on the NPU)."""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.act = nn.PReLU(4)
        self.head = nn.Linear(24, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.conv(x))
        y = nn.functional.adaptive_max_pool2d(y, (2, 3))
        return self.head(y.flatten(1))


torch.manual_seed(0)
ModelUnderTest = Net()
ModelInputs = (torch.randn(1, 3, 7, 7),)
