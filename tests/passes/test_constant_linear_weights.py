"""constant_linear_weights.py: a Linear whose weight or bias is computed from parameters (nn.MultiheadAttention's
cross-attention slices in_proj_weight) reads a parameter of that value instead: the same function, and
ExecuTorch's Cortex-M lowering takes it."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from emlkit.passes.constant_linear_weights import ConstantLinearWeights
from pass_graphs import assert_pipelines, bound, graph_of, lowered

aten = torch.ops.aten


class SlicedWeights(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.w, self.b = torch.nn.Parameter(torch.randn(24, 8)), torch.nn.Parameter(torch.randn(24))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wq, wkv = self.w.split([8, 16])
        return F.linear(x, wq, self.b[:8]) + F.linear(x, wkv, self.b[8:])[..., :8]


def _linear_weight_ops(gm: torch.fx.GraphModule) -> list[str]:
    return [a.op for n in gm.graph.nodes if n.target == aten.linear.default for a in n.args[1:3]]


def test_computed_weights_become_parameters() -> None:
    m, x = SlicedWeights().eval(), torch.randn(3, 8)
    p = bound(ConstantLinearWeights(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 2 and _linear_weight_ops(gm) == ["get_attr"] * 4
    assert not any(n.target in (aten.split.Tensor, aten.split_with_sizes.default) for n in gm.graph.nodes)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x))


def test_weights_from_inputs_are_left() -> None:
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return F.linear(x, w * 2)

    p = bound(ConstantLinearWeights(), "cortex-m55")
    p(graph_of(M().eval(), torch.randn(3, 8), torch.randn(4, 8)))
    assert p.report()["rewritten"] == []


def test_cross_attention_lowers_to_int8() -> None:
    class Cross(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.mha(x, x[:, :3], x[:, :3], need_weights=False)[0]

    low, _ = lowered(Cross(), torch.randn(1, 5, 16), "cortex-m55")
    assert low.extra["verify"]["float_islands"] == []


def test_pipelines() -> None:
    assert_pipelines(ConstantLinearWeights, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
