"""Conv followed by average pooling and max pooling."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Pool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.avg = nn.AvgPool2d(2, stride=2)
        self.max = nn.MaxPool2d(3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.max(self.avg(torch.relu(self.conv(x))))


ModelUnderTest = Pool().eval()
ModelInputs = (torch.randn(1, 3, 16, 16),)
