"""Linear layer followed by softmax over the last dimension."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Softmax(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(x), dim=-1)


ModelUnderTest = Softmax().eval()
ModelInputs = (torch.randn(2, 32),)
