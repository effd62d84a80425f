"""Ops the Ethos-U partitioner leaves on the CPU of both NPUs that the Cortex-M flow runs on int8 codes: a median and
a masked_fill with a scalar (here under a constant mask)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.register_buffer("mask", torch.rand(8, 8) > 0.5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.a(x)
        med = torch.median(y, dim=-1).values
        filled = y.masked_fill(self.mask, -1.0)
        return med, filled


ModelUnderTest = Head().eval()
ModelInputs = (torch.randn(1, 3, 8, 8),)
