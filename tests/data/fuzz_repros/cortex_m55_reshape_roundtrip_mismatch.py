"""Random model '18:0' from scripts/fuzz_models.py (blocks: reshape; head: map)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(1, 4, 32, 1).reshape(1, 4, 4, 8)
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 4, 4, 8),)
# cortex-m55: mismatch: FAIL: fail (fixed: emlkit/passes/contiguous_view_base.py; a regression test in tests/test_fuzz_models.py)
