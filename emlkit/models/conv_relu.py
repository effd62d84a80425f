"""Two 3x3 convolutions, each followed by ReLU."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ConvRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv2(torch.relu(self.conv1(x))))


ModelUnderTest = ConvRelu().eval()
ModelInputs = (torch.randn(1, 3, 16, 16),)
