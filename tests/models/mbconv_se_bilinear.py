"""An MBConv block with squeeze-excite and a bilinear-upsampling decoder: two NPU partitions on Ethos-U."""
import torch, torch.nn as nn, torch.nn.functional as F
class MBConv(nn.Module):
    def __init__(self, c, e=4):
        super().__init__()
        h = c * e
        self.exp = nn.Sequential(nn.Conv2d(c, h, 1), nn.BatchNorm2d(h), nn.SiLU())
        self.dw = nn.Sequential(nn.Conv2d(h, h, 3, padding=1, groups=h), nn.BatchNorm2d(h), nn.SiLU())
        self.se1 = nn.Conv2d(h, h // 4, 1); self.se2 = nn.Conv2d(h // 4, h, 1)
        self.proj = nn.Sequential(nn.Conv2d(h, c, 1), nn.BatchNorm2d(c))
    def forward(self, x):
        y = self.dw(self.exp(x))
        s = torch.sigmoid(self.se2(F.silu(self.se1(y.mean((2, 3), keepdim=True)))))
        return x + self.proj(y * s)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.b = MBConv(8)
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.up = nn.Conv2d(16, 8, 1)
        self.head = nn.Conv2d(8, 2, 1)
    def forward(self, x):
        a = self.b(self.stem(x))
        d = F.relu(self.down(a))
        u = F.interpolate(self.up(d), scale_factor=2, mode="bilinear", align_corners=False)
        return self.head(u + a)
torch.manual_seed(0)
ModelUnderTest = Net().eval()
ModelInputs = (torch.randn(1, 3, 32, 32),)
