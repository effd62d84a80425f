"""Benchmark-only shapes for scripts/bench_cmsis_nn.py (mul and max pool against CMSIS-NN): two 1x1
convolutions whose 24x24x32 outputs are multiplied elementwise, the product going through a 2x2/2
and a 3x3/2 (pad 1) max pool, and the two pooled maps added."""
import torch
import torch.nn as nn

torch.manual_seed(3)


class M(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 1)
        self.c2 = nn.Conv2d(3, 32, 1)
        self.p1 = nn.MaxPool2d(2, 2)
        self.p2 = nn.MaxPool2d(3, 2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.c1(x), self.c2(x)
        m = a * b
        return self.p1(m) + self.p2(m)


ModelUnderTest = M().eval()
ModelInputs = (torch.randn(1, 3, 24, 24),)
