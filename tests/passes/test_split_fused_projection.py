"""split_fused_projection.py: a fused q/k/v Linear read part by part -> one Linear per part (Cortex-M and
Ethos-U55/U65; the U85 keeps the fused Linear)."""

from __future__ import annotations

import torch

from emlkit.passes.split_fused_projection import SplitFusedProjection
from pass_graphs import assert_pipelines, bound, called, graph_of

aten = torch.ops.aten


class _FusedQK(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv(x).reshape(1, 16, 3, 2, 16).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def test_fused_projection_split_per_part() -> None:
    m, x = _FusedQK().eval(), torch.randn(1, 16, 32)
    p = bound(SplitFusedProjection(), "ethos-u55-128")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1
    assert called(gm).count(aten.linear.default) == 3
    got = gm(x)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, m(x), rtol=1e-4, atol=1e-5)


def test_pipelines() -> None:
    assert_pipelines(SplitFusedProjection, on=("cortex-m55", "ethos-u55-128", "ethos-u65-256"), off=("ethos-u85-256",))
