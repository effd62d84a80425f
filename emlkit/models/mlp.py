"""Three fully connected layers with ReLU."""
import torch
import torch.nn as nn

torch.manual_seed(0)

ModelUnderTest = nn.Sequential(
    nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)
).eval()
ModelInputs = (torch.randn(1, 64),)
