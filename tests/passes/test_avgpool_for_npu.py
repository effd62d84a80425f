"""emlkit/passes/avgpool_for_npu.py: on Ethos-U an average pool with stride > 3 becomes a mean (whole map) or a
cascade of small pools (same values); Cortex-M keeps the pool."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.avgpool_for_npu import AvgPoolForNpu
from pass_graphs import assert_pipelines, bound, called, graph_of

aten = torch.ops.aten


@pytest.mark.parametrize("kernel, map_size, becomes", [(8, 8, aten.mean.dim), (4, 8, aten.avg_pool2d.default)])
def test_large_stride_pool_rewritten_on_ethos_u(kernel: int, map_size: int, becomes: object) -> None:
    m, x = torch.nn.AvgPool2d(kernel), torch.randn(1, 3, map_size, map_size)
    p = bound(AvgPoolForNpu(), "ethos-u85-256")
    out = p(graph_of(m, x))
    assert p.report()["rewritten"] and becomes in called(out)
    if becomes is aten.avg_pool2d.default:  # the 4x4 window as two 2x2 stages
        assert [n.args[1] for n in out.graph.nodes if n.target == becomes] == [[2, 2], [2, 2]]
    got = out(x)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, m(x))


def test_cortex_m_keeps_the_pool() -> None:
    m, x = torch.nn.AvgPool2d(8), torch.randn(1, 3, 8, 8)
    gm = graph_of(m, x)
    before = called(gm)
    p = bound(AvgPoolForNpu(), "cortex-m55")
    assert called(p(gm)) == before and p.report() == {"rewritten": [], "skipped": []}


def test_pipelines() -> None:
    assert_pipelines(AvgPoolForNpu, on=("ethos-u55-128", "ethos-u85-256"), off=("cortex-m55",))
