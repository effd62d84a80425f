"""int8_upsample.py: integer nearest upsampling in the program -> emlkit::upsample_nearest2d (Cortex-M)."""

from __future__ import annotations

import torch

from emlkit.passes.int8_upsample import Int8Upsample
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class _Up(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.nn.functional.interpolate(self.a(x), scale_factor=2, mode="nearest"))


def test_upsample_replaced() -> None:
    low, opts = lowered(_Up(), torch.randn(1, 3, 4, 4), "cortex-m55")
    assert len(installed(opts, Int8Upsample).done) == 1
    ops = program_ops(low)
    assert any("emlkit" in op and "upsample_nearest2d" in op for op in ops)
    assert not any(op.startswith("aten.upsample_nearest2d") for op in ops)


def test_pipelines() -> None:
    assert_pipelines(Int8Upsample, on=("cortex-m55", "ethos-u55-128"))
