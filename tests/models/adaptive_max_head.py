"""An adaptive max pool to a size that does not divide its input, which the Ethos-U partitioner leaves on the CPU of
both NPUs and the Cortex-M flow runs on int8 codes."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_max_pool2d(self.a(x), (3, 5))


ModelUnderTest = Head().eval()
ModelInputs = (torch.randn(1, 3, 8, 9),)
