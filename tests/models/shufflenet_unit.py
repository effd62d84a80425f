"""A ShuffleNet unit: grouped 1x1 convs, channel shuffle (view/transpose/view), depthwise, residual."""
import torch, torch.nn as nn, torch.nn.functional as F
def shuffle(x, g):
    n, c, h, w = x.shape
    return x.view(n, g, c // g, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 3, 2, 1, bias=False), nn.BatchNorm2d(24), nn.ReLU(inplace=True))
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.g1 = nn.Conv2d(24, 24, 1, groups=3, bias=False); self.b1 = nn.BatchNorm2d(24)
        self.dw = nn.Conv2d(24, 24, 3, 1, 1, groups=24, bias=False); self.b2 = nn.BatchNorm2d(24)
        self.g2 = nn.Conv2d(24, 24, 1, groups=3, bias=False); self.b3 = nn.BatchNorm2d(24)
        self.fc = nn.Linear(24, 10)
    def forward(self, x):
        x = self.pool(self.stem(x))
        y = F.relu(self.b1(self.g1(x)))
        y = shuffle(y, 3)
        y = self.b3(self.g2(self.b2(self.dw(y))))
        x = F.relu(x + y)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))
torch.manual_seed(0)
ModelUnderTest = Net().eval()
ModelInputs = (torch.randn(1, 3, 32, 32),)
