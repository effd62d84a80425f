"""PReLU (per-channel and one slope), ceil-mode max pool and an adaptive 2x2 average pool."""
import torch, torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1); self.a1 = nn.PReLU(8)
        self.p = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.c2 = nn.Conv2d(8, 8, 3); self.a2 = nn.PReLU()
        self.ap = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(32, 5)
    def forward(self, x):
        x = self.p(self.a1(self.c1(x)))
        x = self.ap(self.a2(self.c2(x)))
        return self.fc(x.flatten(1))
torch.manual_seed(0)
ModelUnderTest = Net().eval()
ModelInputs = (torch.randn(1, 3, 15, 15),)
