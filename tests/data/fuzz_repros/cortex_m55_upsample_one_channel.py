"""Random model '7:0' from scripts/fuzz_models.py (blocks: upsample; head: map)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Fuzz(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 1, 12, 8),)
# cortex-m55: run-error: ERROR: instruction 1 (emlkit::upsample_nearest2d.out): emlkit::upsample_nearest2d: input and output must both be NCHW or both channels-last (fixed: the kernel takes any pair of dim orders; regression test in tests/test_fuzz_models.py)
