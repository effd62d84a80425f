"""DS-CNN keyword spotting (the "small" network of Zhang et al., Hello Edge, 2017), written here from
the paper's description, not taken from any zoo: a 10x4 strided convolution on a 49x10 MFCC map
(one input channel), four depthwise-separable blocks of 64 channels with batch norm and ReLU,
global average pooling and a 12-way classifier. Its first layer, a convolution with one input
channel, is lowered as a depthwise convolution with depth multiplier 64."""

import torch
import torch.nn as nn

torch.manual_seed(5)


class Separable(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.pw = nn.Conv2d(c, c, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.dw(x)))
        return torch.relu(self.bn2(self.pw(x)))


class DsCnn(nn.Module):
    def __init__(self, c: int = 64, classes: int = 12) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, c, (10, 4), stride=(2, 2), padding=(5, 1), bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.blocks = nn.Sequential(*[Separable(c) for _ in range(4)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv(x)))
        x = self.blocks(x)
        return self.fc(torch.flatten(self.pool(x), 1))


def _trained_looking(m: nn.Module) -> nn.Module:
    # non-trivial batch-norm statistics, so that folding them is exercised
    g = torch.Generator().manual_seed(6)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(mod.num_features, generator=g) * 0.5 + 0.75)
            mod.weight.data.copy_(torch.rand(mod.num_features, generator=g) * 0.5 + 0.75)
            mod.bias.data.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
    return m.eval()


ModelUnderTest = _trained_looking(DsCnn())
ModelInputs = (torch.randn(1, 1, 49, 10),)
