"""Channel concats and slices with rows of many lengths (block-copy test model).

Seven 1x1 convolutions give 4, 8, 12, 20, 24, 28 and 3 channels of a 7x9 map (63 pixels, so the
copy loops end with partial steps); torch.cat joins them along channels (NHWC rows of 4-28 bytes:
the Helium word-scatter plan for 4-24 and 40-byte rows, the four-rows-per-vector form for 28, bytes
for 3) and a channel slice reads 20 of the 99 channels back; both feed a last convolution.
"""

import torch
from torch import nn

CHANNELS = (4, 8, 12, 20, 24, 28, 3)


class ModelUnderTest(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.heads = nn.ModuleList(nn.Conv2d(6, c, 1) for c in CHANNELS)
        self.pair = nn.Conv2d(6, 40, 1)
        self.tail = nn.Conv2d(sum(CHANNELS) + 40 + 20, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = [torch.relu(h(x)) for h in self.heads]
        y = torch.cat(parts, dim=1)
        z = torch.cat([torch.relu(self.pair(x)), y], dim=1)
        s = z[:, 30:50]
        return self.tail(torch.cat([z, s], dim=1))


ModelInputs = (torch.randn(1, 6, 7, 9, generator=torch.Generator().manual_seed(1)),)
