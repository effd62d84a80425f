"""npu_pool_as_depthwise.py: whole-map average pools -> depthwise convs with weights 1/(H*W) on Ethos-U (same
float function); Cortex-M keeps the pool."""

from __future__ import annotations

import torch

from emlkit.passes.npu_pool_as_depthwise import NpuPoolAsDepthwise
from pass_graphs import assert_pipelines, bound, called, graph_of

aten = torch.ops.aten


class _Global(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.adaptive_avg_pool2d(x, 1)


def test_global_pool_becomes_depthwise_conv() -> None:
    x = torch.randn(1, 4, 6, 6)
    p = bound(NpuPoolAsDepthwise(), "ethos-u55-128")
    gm = p(graph_of(_Global(), x))
    assert len(p.report()["rewritten"]) == 1
    conv = next(n for n in gm.graph.nodes if n.target == aten.conv2d.default)
    assert conv.args[-1] == 4  # groups = C: depthwise
    assert aten.adaptive_avg_pool2d.default not in called(gm)
    got = gm(x)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, _Global()(x))


def test_pipelines() -> None:
    assert_pipelines(NpuPoolAsDepthwise, on=("ethos-u55-128", "ethos-u85-256"), off=("cortex-m55",))
