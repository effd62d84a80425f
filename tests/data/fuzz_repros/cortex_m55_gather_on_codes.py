"""Random model '71:21' from scripts/fuzz_models.py (blocks: gather; head: map): torch.gather, which the quantizer
runs on the int8 codes with its input's qparams, was refused as a float kernel reading codes (it copies elements,
exact on codes)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("i0", torch.randint(0, 16, (1, 4, 8, 16)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 3, self.i0)


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 4, 8, 16),)
