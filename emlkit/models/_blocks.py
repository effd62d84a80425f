"""Module shapes several zoo models share; each model keeps its own layer sizes, seed and inputs."""
from typing import Callable

import torch
import torch.nn as nn


class PooledClassifier(nn.Module):
    """`features`, global average pooling and a linear classifier: the MLPerf Tiny CNNs' head. The layers are
    registered (and so created and initialised) in that order, as the models wrote them before."""

    def __init__(self, features: list[nn.Module], channels: int, classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(*features)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


class ConvThen(nn.Module):
    """A 3x3 conv (padding 1) whose output `after` transforms: the zoo's activation-lowering models."""

    def __init__(self, cin: int, cout: int, after: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.after = after

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.after(self.conv(x))
