"""Inception-style branches that meet in a concat: ReLU6, hardsigmoid and hardswish branches.

Each branch's activation follows its conv directly and its output goes
straight into `torch.cat`: the pattern whose Cortex-M lowering left a float
convolution (the concat shares one set of qparams over the branches, so the
activation could not be folded into the conv). Regression model for
emlkit/passes/activation_alone.py.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class BranchConcat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b1 = nn.Conv2d(4, 8, 1)
        self.b2 = nn.Conv2d(4, 8, 3, padding=1)
        self.b3 = nn.Conv2d(4, 8, 3, padding=1)
        self.mix = nn.Conv2d(24, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([F.relu6(self.b1(x)), F.hardsigmoid(self.b2(x)), F.hardswish(self.b3(x))], dim=1)
        return self.mix(y)


ModelUnderTest = BranchConcat().eval()
ModelInputs = (torch.randn(1, 4, 16, 16),)
