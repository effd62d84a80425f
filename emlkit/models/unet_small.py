"""A small U-Net (Ronneberger et al. 2015) for 32x32 segmentation into 3 classes.

Two encoder levels (two 3x3 conv + ReLU, then 2x2 max pooling), a bottleneck,
and two decoder levels that upsample (nearest, x2), concatenate the encoder
feature map of the same size (the skip connection) and apply two 3x3 conv +
ReLU; a 1x1 conv gives the class scores per pixel.
"""
import torch
import torch.nn as nn

from emlkit.models._init import trained_like

torch.manual_seed(0)


def _double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU())


class UNetSmall(nn.Module):
    def __init__(self, c: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.enc1, self.enc2 = _double_conv(3, c), _double_conv(c, 2 * c)
        self.mid = _double_conv(2 * c, 4 * c)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec2, self.dec1 = _double_conv(4 * c + 2 * c, 2 * c), _double_conv(2 * c + c, c)
        self.head = nn.Conv2d(c, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up(m), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up(d2), e1], dim=1))
        return self.head(d1)


ModelUnderTest = trained_like(UNetSmall())
ModelInputs = (torch.randn(1, 3, 32, 32),)
