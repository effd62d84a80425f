"""Elementwise mul of two tensors."""
import torch

torch.manual_seed(0)


class Mul(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * b


ModelUnderTest = Mul().eval()
ModelInputs = (torch.randn(1, 8, 16, 16), torch.randn(1, 8, 16, 16))
