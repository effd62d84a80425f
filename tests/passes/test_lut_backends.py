"""lut_backends.py: the declared LutFusion pass, pointwise chains -> one table with the target's backend
(Cortex-M or Ethos-U); off with --no-lut-fusion."""

from __future__ import annotations

import torch

from emlkit.passes.lut_backends import CortexMLut, LutFusion, backend_for
from emlkit.targets import get_target
from pass_graphs import assert_pipelines, installed, lowered


class _Chain(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.conv(x)) * 2.0 + 0.5


def test_chain_fused_into_one_table() -> None:
    low, opts = lowered(_Chain(), torch.randn(1, 3, 6, 6), "cortex-m55")
    rep = installed(opts, LutFusion).report()
    assert rep["regions_fused"] == 1 and rep["ops_after"] < rep["ops_before"]
    assert low.extra["lut_fusion"]["regions_fused"] == 1


def test_backend_per_flow() -> None:
    from emlkit.passes.lut_ethos_u import EthosULut

    assert isinstance(backend_for(get_target("cortex-m55"), None), CortexMLut)
    assert isinstance(backend_for(get_target("ethos-u55-128"), None), EthosULut)


def test_pipelines() -> None:
    assert_pipelines(LutFusion, on=("cortex-m55", "ethos-u55-128", "ethos-u85-256"))
    assert_pipelines(LutFusion, on=(), off=("cortex-m55", "ethos-u55-128"), lut_fusion=False)
