"""A segmentation-style head the Ethos-U partitioner leaves partly on the CPU: a bilinear resize with
align_corners=True (no TOSA RESIZE on the U55) between two convs, and an argmax over the flattened map (int64
indices): both run as the Cortex-M flow's int8 kernels on the CPU of an int8 Ethos-U program."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = F.interpolate(torch.relu(self.a(x)), scale_factor=2, mode="bilinear", align_corners=True)
        z = self.b(y)
        return z, torch.argmax(torch.flatten(z, 1), dim=1)


ModelUnderTest = Head().eval()
ModelInputs = (torch.randn(1, 3, 8, 8),)
