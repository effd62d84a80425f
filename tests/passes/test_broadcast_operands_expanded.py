"""broadcast_operands_expanded.py: the operand of an add, sub or mul that broadcasts (other than a per-channel
vector) is expanded to the output's shape before quantization (Cortex-M), the same function, so the op lowers to
an int8 quantized_add/quantized_mul instead of a float op."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.broadcast_operands_expanded import BroadcastOperandsExpanded
from pass_graphs import assert_pipelines, assert_same_function, bound, called, graph_of, lowered, program_ops

aten = torch.ops.aten


class Bcast(torch.nn.Module):
    def __init__(self, op: str, take: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(4, 4, 1)
        self.op, self.take = op, take

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        other = {"row": y[:, :, :1], "col": y[:, :, :, -1:], "mean": y.mean(dim=1, keepdim=True),
                 "channel": y.mean(dim=(2, 3), keepdim=True), "same": torch.relu(y)}[self.take]
        return {"sub": torch.sub, "add": torch.add, "mul": torch.mul}[self.op](y, other)


X = torch.randn(1, 4, 6, 8, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("op, take, expanded", [("sub", "row", 1), ("add", "col", 1), ("mul", "mean", 1),
                                                ("add", "channel", 0), ("sub", "same", 0)])
def test_broadcast_operand_is_expanded(op: str, take: str, expanded: int) -> None:
    m = Bcast(op, take).eval()
    p = bound(BroadcastOperandsExpanded(), "cortex-m55")
    gm = p(graph_of(m, X))
    assert called(gm).count(aten.expand.default) == expanded
    assert len(p.report()["rewritten"]) == expanded
    assert_same_function(gm, m, X)


class Seq(torch.nn.Module):
    """3-D: the quantizer takes no per-channel vector there, so [1, 4, 1] is expanded too."""

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return s + s[:, :, 2:3]


def test_three_d_column_is_expanded() -> None:
    s = torch.randn(1, 4, 6, generator=torch.Generator().manual_seed(3))
    gm = bound(BroadcastOperandsExpanded(), "cortex-m55")(graph_of(Seq(), s))
    assert called(gm).count(aten.expand.default) == 1
    assert_same_function(gm, Seq(), s)


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4"])
def test_the_program_is_int8(target: str) -> None:
    low, _ = lowered(Bcast("sub", "row"), X, target)
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    assert any("quantized_add" in o for o in program_ops(low)), program_ops(low)


def test_pipelines() -> None:
    assert_pipelines(BroadcastOperandsExpanded, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
