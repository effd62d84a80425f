"""emlkit/passes/relu6_to_hardtanh.py: F.relu6 -> hardtanh(0, 6), same values; other graphs untouched."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from emlkit.passes.relu6_to_hardtanh import Relu6ToHardtanh
from pass_graphs import assert_pipelines, called, graph_of

aten = torch.ops.aten


class _Relu6(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu6(x * 4.0)


def test_relu6_becomes_hardtanh_with_the_same_values() -> None:
    x = torch.linspace(-10, 10, 41).reshape(1, 41)
    gm = graph_of(_Relu6(), x)
    assert aten.relu6.default in called(gm)
    out = Relu6ToHardtanh()(gm)
    assert aten.relu6.default not in called(out)
    assert [n.args[1:] for n in out.graph.nodes if n.target == aten.hardtanh.default] == [(0.0, 6.0)]
    assert torch.equal(out(x)[0] if isinstance(out(x), (tuple, list)) else out(x), _Relu6()(x))


def test_graph_without_relu6_untouched() -> None:
    gm = graph_of(torch.nn.ReLU(), torch.randn(1, 4))
    before = called(gm)
    assert called(Relu6ToHardtanh()(gm)) == before


def test_pipelines() -> None:
    assert_pipelines(Relu6ToHardtanh, on=("cortex-m55", "cortex-m0plus", "ethos-u55-128", "ethos-u85-256"), off=())
