"""conv1d_as_conv2d.py: Conv1d (+ BatchNorm1d) and 1-D pools as 2-D ops over [N, C, 1, L] (every flow; fed
channels-last on the default Cortex-M flow)."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.conv1d_as_conv2d import Conv1dAsConv2d
from pass_graphs import assert_pipelines, bound, called, graph_of

aten = torch.ops.aten


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv1d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool1d(2)).eval()


@pytest.mark.parametrize("target, channels_last", [("cortex-m55", True), ("ethos-u55-128", False)])
def test_conv1d_becomes_conv2d(target: str, channels_last: bool) -> None:
    m, x = _model(), torch.randn(1, 3, 16)
    p = bound(Conv1dAsConv2d(), target)
    assert p.channels_last == channels_last
    gm = p(graph_of(m, x))
    ops = called(gm)
    assert len(p.report()["rewritten"]) == 2
    assert aten.conv2d.default in ops and aten.conv1d.default not in ops and aten.max_pool1d.default not in ops
    got = gm(x)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, m(x), rtol=1e-5, atol=1e-5)


def test_pipelines() -> None:
    assert_pipelines(Conv1dAsConv2d, on=("cortex-m55", "cortex-m0plus", "ethos-u55-128", "ethos-u85-256"))
