"""Random model 'fam:0' from scripts/fuzz_models.py (shrunk to its embedding block) on ethos-u55-128: the embedding's
index is cast by dim_order_ops::_to_dim_order_copy.out (5 arguments, fewer than the default overload's 7: the host
executor indexed past them, an IndexError) and flattened by a static view (no instruction, the cast's bytes at the
same planned address: the host executor read zeros there, 112 steps off). The device ran it right all along."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b0 = nn.Embedding(16, 1)

    def forward(self, x: torch.Tensor, e0: torch.Tensor) -> torch.Tensor:
        x = x + self.b0(e0).transpose(1, 2).reshape(1, 1, 6, 6)
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 1, 6, 6), torch.randint(0, 16, (1, 36)),)
