"""Random model 'fam:0' from scripts/fuzz_models.py, shrunk (blocks: clamp_t, embedding; head: map): a clamp with
tensor bounds (a maximum and a minimum against (1, C, 1, 1) constants, which ExecuTorch writes contiguous) added to a
channels-last value; the firmware refused the add at load ("out must have the sizes and dim order of the larger
operand"), on cortex-m4 and cortex-m55."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("lo0", -0.1 - 0.9 * torch.rand(1, 8, 1, 1))
        self.register_buffer("hi0", 0.1 + 0.9 * torch.rand(1, 8, 1, 1))
        self.b1 = nn.Embedding(16, 8)

    def forward(self, x: torch.Tensor, e1: torch.Tensor) -> torch.Tensor:
        x = torch.clamp(x, self.lo0, self.hi0)
        x = x + self.b1(e1).transpose(1, 2).reshape(1, 8, 6, 6)
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 8, 6, 6), torch.randint(0, 16, (1, 36)),)
