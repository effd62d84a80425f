"""A small CNN with ops that stay in float under --allow-float: a cumulative sum (no int8 kernel on the CPU) on the
Cortex-M targets, and on the a16w8 Ethos-U targets an adaptive max pool to an uneven 2x3 grid (not on the NPU; the
int8 Ethos-U targets and Cortex-M run it on codes, and the int8 NPUs take the cumsum and the PReLU)."""
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
        return self.head(torch.cumsum(y.flatten(1), 1))


torch.manual_seed(0)
ModelUnderTest = Net()
ModelInputs = (torch.randn(1, 3, 7, 7),)
