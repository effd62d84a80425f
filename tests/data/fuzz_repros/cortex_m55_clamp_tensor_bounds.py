"""Random model 'fam:0' from scripts/fuzz_models.py, shrunk (blocks: clamp_t; head: map): a clamp with tensor bounds,
which the Cortex-M quantizer left as a float clamp reading int8 codes ("the lowered program is broken")."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("lo0", -0.1 - 0.9 * torch.rand(1, 4, 1, 1))
        self.register_buffer("hi0", 0.1 + 0.9 * torch.rand(1, 4, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.clamp(x, self.lo0, self.hi0)
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 4, 6, 6),)
