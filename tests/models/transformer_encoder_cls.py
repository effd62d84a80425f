"""A classifier on nn.TransformerEncoderLayer (its eval-mode fast path exports one fused op unless disabled)."""
import torch, torch.nn as nn
class Cls(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(12, 32)
        self.enc = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(32, 3)
    def forward(self, x):
        return self.head(self.enc(self.emb(x)).mean(1))
torch.manual_seed(0)
ModelUnderTest = Cls().eval()
ModelInputs = (torch.randn(1, 6, 12),)
