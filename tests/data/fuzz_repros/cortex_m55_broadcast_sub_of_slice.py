"""A map minus its first row, broadcast over the height (found by scripts/fuzz_models.py, seed 72, model 32)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Repro(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        return x - x[:, :, :1]


ModelUnderTest = Repro().eval()
ModelInputs = (torch.randn(1, 4, 8, 8),)
# cortex-m55: refused: 1 float op(s) left on the CPU: aten::sub (ExecuTorch's quantizer annotates an add/sub/mul only without broadcasting, other than a per-channel vector; fixed in broadcast_operands_expanded.py; regression test in tests/test_fuzz_models.py)
