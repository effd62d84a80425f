"""emlkit_avg_pool.py: dq -> whole-window average pool -> q (with its own output qparams) ->
emlkit::quantized_avg_pool2d on Cortex-M."""

from __future__ import annotations

import torch

from emlkit.passes.emlkit_avg_pool import EmlkitAvgPool
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class _PoolHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1).flatten(1))


def test_classifier_pool_lowered_to_emlkit_op() -> None:
    low, opts = lowered(_PoolHead(), torch.randn(1, 3, 8, 8), "cortex-m55")
    lowered_pools = installed(opts, EmlkitAvgPool).report()["lowered"]
    assert len(lowered_pools) == 1
    assert any("emlkit" in op and "avg_pool" in op for op in program_ops(low))


def test_pipelines() -> None:
    assert_pipelines(EmlkitAvgPool, on=("cortex-m55", "cortex-m7"), off=("ethos-u55-128",))
