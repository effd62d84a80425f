"""A fully connected autoencoder (anomaly-detection style, as in the MLPerf Tiny AD benchmark)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class FcAutoencoder(nn.Module):
    def __init__(self, dim: int = 128, hidden: int = 64, code: int = 8) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, code), nn.ReLU(),
            nn.Linear(code, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, dim),
        )
        with torch.no_grad():
            # Uneven output-channel ranges, as trained layers have: per-tensor scales waste bits on them.
            for m in self.net:
                if isinstance(m, nn.Linear):
                    m.weight.mul_(torch.logspace(-1, 0.5, m.out_features).unsqueeze(1)[torch.randperm(m.out_features)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


ModelUnderTest = FcAutoencoder().eval()
ModelInputs = (torch.randn(4, 128),)
