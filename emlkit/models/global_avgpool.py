"""Global average pooling written as AvgPool2d over the whole feature map (stride = kernel = 8)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GlobalAvgPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.relu = nn.ReLU6()
        self.pool = nn.AvgPool2d(8)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(self.relu(self.conv(x)))
        return self.fc(torch.flatten(y, 1))


ModelUnderTest = GlobalAvgPool().eval()
ModelInputs = (torch.randn(1, 3, 8, 8),)
