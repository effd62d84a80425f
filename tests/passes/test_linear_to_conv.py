"""linear_to_conv.py: Cortex-M Linear layers -> 1x1 convs (per-output-channel weight scales); mode "off"
keeps them."""

from __future__ import annotations

import pytest
import torch

from emlkit.errors import AotError
from emlkit.passes.linear_to_conv import LinearToConv
from pass_graphs import assert_pipelines, bound, called, graph_of

aten = torch.ops.aten


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 4)).eval()


def test_linears_become_1x1_convs() -> None:
    m, x = _model(), torch.randn(2, 8)
    p = bound(LinearToConv(mode="all"), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 2 and p.report()["mode"] == "all"
    assert aten.linear.default not in called(gm) and aten.conv2d.default in called(gm)
    got = gm(x)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, m(x), rtol=1e-5, atol=1e-5)


def test_mode_off_and_unknown_mode() -> None:
    m, x = _model(), torch.randn(2, 8)
    p = bound(LinearToConv(mode="off"), "cortex-m55")
    gm = p(graph_of(m, x))
    assert p.report()["rewritten"] == [] and aten.linear.default in called(gm)
    with pytest.raises(AotError, match="not known"):
        LinearToConv(mode="sometimes")(graph_of(m, x))


def test_pipelines() -> None:
    assert_pipelines(LinearToConv, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128", "ethos-u85-256"))
