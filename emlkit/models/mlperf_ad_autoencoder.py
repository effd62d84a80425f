"""MLPerf Tiny v1 anomaly detection: the DCASE 2020 task 2 baseline autoencoder (Koizumi et al. 2020).

Input: 5 frames x 128 log-mel bins = 640 features. Four Dense(128) + BatchNorm
+ ReLU layers, a Dense(8) + BatchNorm + ReLU bottleneck, four Dense(128) +
BatchNorm + ReLU layers and a Dense(640) reconstruction. Evaluated on a batch
of 4 frames-windows at once, as the benchmark scores a clip.
"""
import torch
import torch.nn as nn

from emlkit.models._init import settle_batchnorm, trained_like

torch.manual_seed(0)


def _dense(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Linear(cin, cout), nn.BatchNorm1d(cout), nn.ReLU()]


class DcaseAutoencoder(nn.Module):
    def __init__(self, dim: int = 640, hidden: int = 128, code: int = 8) -> None:
        super().__init__()
        sizes = [dim, hidden, hidden, hidden, hidden, code, hidden, hidden, hidden, hidden]
        layers: list[nn.Module] = []
        for a, b in zip(sizes, sizes[1:]):
            layers += _dense(a, b)
        layers.append(nn.Linear(hidden, dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


ModelUnderTest = trained_like(DcaseAutoencoder())
ModelInputs = (torch.randn(4, 640),)
settle_batchnorm(ModelUnderTest, ModelInputs)
