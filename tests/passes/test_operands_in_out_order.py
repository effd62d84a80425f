"""operands_in_out_order.py: an add (or mul) of a channels-last value and a same-size value ExecuTorch left
contiguous (a maximum against a per-channel constant) gets a copy of the odd operand to the output's dim order, so
the firmware accepts the program; without the pass its load check refuses the add."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.operands_in_out_order import OperandsInOutOrder
from pass_graphs import assert_pipelines, installed, lowered

OPS = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b}


class MaxThen(torch.nn.Module):
    def __init__(self, op: str) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, 1, 1)
        self.lo = -0.5 * torch.rand(1, 4, 1, 1)
        self.op = op

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return OPS[self.op](torch.maximum(y, self.lo), torch.sigmoid(y))


def _orders(low: object, name: str) -> list[list[list[int]]]:
    gm = low.edge.exported_program().graph_module  # type: ignore[attr-defined]
    slots = {"quantized_add": (0, 4), "quantized_mul": (0, 2)}[name]
    return [[list(n.args[i].meta["val"].dim_order()) for i in slots] + [list(n.meta["val"].dim_order())]
            for n in gm.graph.nodes if n.op == "call_function" and f"cortex_m.{name}." in str(n.target)]


@pytest.mark.parametrize("op", ["add", "mul"])
def test_operands_get_the_output_order(op: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(1, 4, 6, 6)
    name = f"quantized_{op}"
    before, _ = lowered(MaxThen(op).eval(), x, "cortex-m55", drop=("OperandsInOutOrder",))
    assert any(len({tuple(o) for o in orders}) > 1 for orders in _orders(before, name)), _orders(before, name)
    low, opts = lowered(MaxThen(op).eval(), x, "cortex-m55")
    assert installed(opts, OperandsInOutOrder).report()["copied"] >= 1
    orders = _orders(low, name)
    assert orders and all(len({tuple(o) for o in per_op}) == 1 for per_op in orders), orders


def test_pipelines() -> None:
    assert_pipelines(OperandsInOutOrder, on=("cortex-m55", "cortex-m4", "cortex-m0plus"), off=("ethos-u55-128",))
