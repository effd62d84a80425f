"""Random model 'dec7c:3' from scripts/fuzz_models.py, shrunk to its LSTMCell: on ethos-u55-128 and ethos-u85-256
Vela fails reading the TOSA graph of the cell's partition ("TOSA FB Reader error"), which refused the model; with
the cell's selects (aten::select_copy) kept on the CPU every partition compiles (emlkit/lower/ethos_u.py), and it
PASSes bit-exactly on the host runtime and under QEMU (44.3 dB on ethos-u85-256). The host runtime was 54 steps off
until it wrote both outputs of a CPU op with two (the second cell reads the first one's c_n)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b6 = nn.LSTMCell(4, 4)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        s = self.b6(t)
        s = self.b6(t, s)
        return s[0]


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(9, 4),)
