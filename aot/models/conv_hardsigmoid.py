"""A conv followed by F.hardsigmoid (the gate of squeeze-excite / MobileNetV3 blocks)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ConvHardsigmoid(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardsigmoid(self.conv(x))


ModelUnderTest = ConvHardsigmoid().eval()
# Small activations: the conv output never reaches -3 or +3, where hardsigmoid saturates.
ModelInputs = (0.25 * torch.randn(1, 4, 12, 12),)
