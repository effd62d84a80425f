"""A dilated causal TCN: left-padded Conv1d with dilation 1, 2, 4 and residual adds."""
import torch, torch.nn as nn, torch.nn.functional as F
class Block(nn.Module):
    def __init__(self, c, d):
        super().__init__()
        self.pad = 2 * d
        self.conv = nn.Conv1d(c, c, 3, dilation=d)
        self.conv2 = nn.Conv1d(c, c, 3, dilation=d)
    def forward(self, x):
        y = F.relu(self.conv(F.pad(x, (self.pad, 0))))
        y = F.relu(self.conv2(F.pad(y, (self.pad, 0))))
        return x + y
class TCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Conv1d(4, 16, 1)
        self.blocks = nn.Sequential(Block(16, 1), Block(16, 2), Block(16, 4))
        self.out = nn.Linear(16, 3)
    def forward(self, x):
        y = self.blocks(self.inp(x))
        return self.out(y[:, :, -1])
torch.manual_seed(0)
ModelUnderTest = TCN().eval()
ModelInputs = (torch.randn(1, 4, 40),)
