"""An independently written keyword-spotting style network (not in the zoo): strided conv stem on a
1x49x10 feature map, two residual depthwise-separable blocks with a skip add, channel concat, global
average pool and a classifier. Used to check Ethos-U programs end to end through the firmware."""

import torch
import torch.nn as nn

torch.manual_seed(11)


class Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.pw = nn.Conv2d(c, c, 1)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.pw(self.act(self.dw(x))) + x)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 24, (5, 3), stride=(2, 1), padding=(2, 1))
        self.b1 = Block(24)
        self.b2 = Block(24)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(48, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        a = self.b1(x)
        b = self.b2(a)
        y = torch.cat([a, b], dim=1)
        return self.fc(torch.flatten(self.pool(y), 1))


ModelUnderTest = Net().eval()
ModelInputs = (torch.randn(1, 1, 49, 10),)
