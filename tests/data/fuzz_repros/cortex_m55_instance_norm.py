"""Random model 'fam:22' from scripts/fuzz_models.py, shrunk (blocks: dwconv, instnorm; head: map): an InstanceNorm2d,
which the Cortex-M flow left as a float batch norm (refused; now a layer norm over H, W)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b0 = nn.Conv2d(3, 3, 3, 1, 1, groups=3)
        self.b1 = nn.InstanceNorm2d(3, affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.b0(x)
        x = self.b1(x)
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 3, 12, 8),)
