"""Random model 'fam:0' from scripts/fuzz_models.py (shrunk to its LSTM block) on ethos-u85-256: the bidirectional layers
run on the CPU (emlkit::lstm), their reverse direction as flip -> lstm -> flip; the partitioner gave the flips to
the NPU, where Vela runs them as a POOL with OFM reverse, which the firmware's stream checker and our NPU model do
not take: the load check refused the program. flip stays on the CPU on the U85 now (emlkit/lower/ethos_u.py)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b0 = nn.LSTM(1, 4, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(288, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.b0(x.flatten(2).transpose(1, 2))[0].transpose(1, 2).reshape(1, 8, 6, 6)
        x = self.fc(torch.flatten(x, 1))
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 1, 6, 6),)
