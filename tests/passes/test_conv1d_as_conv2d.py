"""conv1d_as_conv2d.py: Conv1d (+ BatchNorm1d) and 1-D pools as 2-D ops over [N, C, 1, L] (every flow; fed
channels-last on the default Cortex-M flow)."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.conv1d_as_conv2d import Conv1dAsConv2d
from pass_graphs import assert_same_function, assert_pipelines, bound, called, graph_of

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
    assert_same_function(gm, m, x, 1e-5)


def test_pipelines() -> None:
    assert_pipelines(Conv1dAsConv2d, on=("cortex-m55", "cortex-m0plus", "ethos-u55-128", "ethos-u85-256"))


@pytest.mark.parametrize("kw", [dict(stride=1), dict(stride=2, padding=1, output_padding=1), dict(groups=2, dilation=2)])
def test_conv_transpose1d_becomes_conv_transpose2d(kw: dict) -> None:
    torch.manual_seed(0)
    m, x = torch.nn.ConvTranspose1d(4, 6, 3, **kw).eval(), torch.randn(1, 4, 10)
    p = bound(Conv1dAsConv2d(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1 and aten.conv_transpose1d.default not in called(gm)
    assert_same_function(gm, m, x, 1e-5)


def test_adaptive_max_pool1d_becomes_a_max_pool() -> None:
    m, x = torch.nn.AdaptiveMaxPool1d(5).eval(), torch.randn(1, 4, 20)
    p = bound(Conv1dAsConv2d(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1 and aten.max_pool2d.default in called(gm)
    assert_same_function(gm, m, x, 0)
