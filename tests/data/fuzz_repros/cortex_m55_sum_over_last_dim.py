"""Random model 'fam:26' from scripts/fuzz_models.py, shrunk (blocks: upconv, reduce; head: map): a sum over the
last dim, which the Cortex-M flow left as a float op (refused; now a mean, an int8 pool, times the count)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b0 = nn.ConvTranspose2d(3, 3, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.b0(x)
        x = torch.sum(x, (3,), keepdim=True)
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 3, 8, 4),)
