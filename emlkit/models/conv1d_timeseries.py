"""A Conv1d time-series classifier (sensor / keyword features): 8 channels x 64 steps -> 6 classes.

Conv1d + BatchNorm + ReLU layers (one dilated), a max pool over time, a
strided Conv1d, global average pooling over time and a Linear classifier:
the shape of small 1-D CNNs for accelerometer or audio-feature data.
"""
import torch
import torch.nn as nn

from emlkit.models._init import settle_batchnorm, trained_like

torch.manual_seed(0)


class Conv1dNet(nn.Module):
    def __init__(self, cin: int = 8, classes: int = 6) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(cin, 16, 5, padding=2), nn.BatchNorm1d(16), nn.ReLU(),
            nn.Conv1d(16, 16, 3, padding=2, dilation=2), nn.BatchNorm1d(16), nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 3, stride=2, padding=1), nn.BatchNorm1d(32), nn.ReLU(),
        )
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


ModelUnderTest = trained_like(Conv1dNet())
ModelInputs = (torch.randn(1, 8, 64),)
settle_batchnorm(ModelUnderTest, ModelInputs)
