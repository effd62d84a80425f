"""MLPerf Tiny v1 image classification: ResNet-8 on 32x32 CIFAR-10 images (He et al. 2016, as MLPerf Tiny sizes it).

A 3x3 conv to 16 channels, three residual stacks of one basic block each
(16, 32 and 64 channels; the last two halve the resolution and take a 1x1
conv shortcut), global average pooling and a 10-way classifier.
"""
import torch
import torch.nn as nn

from emlkit.models._init import settle_batchnorm, trained_like

torch.manual_seed(0)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.shortcut = nn.Conv2d(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + self.shortcut(x))


class ResNet8(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU())
        self.stacks = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.stacks(self.stem(x))), 1))


ModelUnderTest = trained_like(ResNet8())
ModelInputs = (torch.randn(1, 3, 32, 32),)
settle_batchnorm(ModelUnderTest, ModelInputs)
