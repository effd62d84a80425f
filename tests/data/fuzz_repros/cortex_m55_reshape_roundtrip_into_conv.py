"""Random model '7:13' from scripts/fuzz_models.py (blocks: reshape, mul; head: map)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b1 = nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(1, 4, 144, 1).reshape(1, 4, 12, 12)
        x = x * torch.sigmoid(self.b1(x))
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 4, 12, 12),)
# cortex-m55: run-error: ERROR: instruction 2 (cortex_m::quantized_conv2d.out): cortex_m::quantized_conv2d: input must be channels-last (dim order 0,2,3,1); got dim order 0,1,2,3 (fixed: emlkit/passes/contiguous_view_base.py copies a 4-D view_copy output to channels-last for its readers; regression test in tests/test_fuzz_models.py)
