"""Calls the memory planner puts in place (tests/test_memory_plan.py): the float input quantized over itself,
a table activation, an add and a mul each writing over an input whose last use they are."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ModelUnderTest(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(4, 8, 3, padding=1)
        self.b = nn.Conv2d(4, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(self.a(x))
        z = self.b(x)
        s = y + z
        return torch.tanh(s) * z


ModelInputs = (torch.randn(1, 4, 12, 12),)
