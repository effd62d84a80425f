"""One pre-norm transformer encoder block (Vaswani et al. 2017): 16 tokens of width 32, 2 heads.

LayerNorm, multi-head self-attention written out (one Linear for q, k and v,
reshape and permute into heads, q @ k^T scaled, softmax, @ v, output Linear),
a residual add, LayerNorm, an MLP (Linear, GELU, Linear) and a second residual.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class EncoderBlock(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 2, hidden: int = 64) -> None:
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.hd), dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


ModelUnderTest = EncoderBlock().eval()
ModelInputs = (torch.randn(1, 16, 32),)
