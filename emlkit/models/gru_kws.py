"""A GRU keyword model (Cho et al. 2014 cell), unrolled over 8 frames of 10 features, 4 classes.

The cell is written out as MCU ports write it: one Linear for the input and
one for the hidden state, each producing the reset, update and candidate
gates; sigmoid and tanh; h = (1 - z) * n + z * h, with h0 = 0 folded into the first
step. Frames are taken with a slice + reshape. The last hidden state goes
to a Linear classifier.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GruKws(nn.Module):
    def __init__(self, features: int = 10, hidden: int = 16, classes: int = 4, steps: int = 8) -> None:
        super().__init__()
        self.hidden, self.steps = hidden, steps
        self.x2g = nn.Linear(features, 3 * hidden)
        self.h2g = nn.Linear(hidden, 3 * hidden)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hd = self.hidden
        h = None                       # h0 = 0: the first step skips the hidden-state terms
        for t in range(self.steps):
            gx = self.x2g(x[:, t : t + 1].reshape(x.shape[0], -1))
            if h is None:
                z = torch.sigmoid(gx[:, hd : 2 * hd])
                h = (1 - z) * torch.tanh(gx[:, 2 * hd :])
                continue
            gh = self.h2g(h)
            r = torch.sigmoid(gx[:, :hd] + gh[:, :hd])
            z = torch.sigmoid(gx[:, hd : 2 * hd] + gh[:, hd : 2 * hd])
            n = torch.tanh(gx[:, 2 * hd :] + r * gh[:, 2 * hd :])
            h = (1 - z) * n + z * h
        return self.fc(h)


ModelUnderTest = GruKws().eval()
ModelInputs = (torch.randn(1, 8, 10),)
