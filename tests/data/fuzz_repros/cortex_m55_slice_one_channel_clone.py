"""Random model '7:3' from scripts/fuzz_models.py (blocks: slice; head: map)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Fuzz(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, :1]
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 4, 6, 4),)
# cortex-m55: run-error: ERROR: instruction 9 (dim_order_ops::_clone_dim_order.out): dim_order_ops::_clone_dim_order: dim_order disagrees with the output tensor (fixed: dim_order arguments compared up to size-1 dims, firmware/ops/aten_copy.c; regression test in tests/test_fuzz_models.py)
