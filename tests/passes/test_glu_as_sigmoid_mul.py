"""glu_as_sigmoid_mul.py: GLU as first half * sigmoid(second half) before quantization (Cortex-M), the same
function, so the program runs it in int8 (a table and an int8 mul)."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.glu_as_sigmoid_mul import GluAsSigmoidMul
from pass_graphs import assert_same_function, assert_pipelines, bound, called, graph_of, lowered, program_ops

aten = torch.ops.aten


@pytest.mark.parametrize("dim, shape", [(-1, (4, 16)), (1, (2, 6, 5)), (0, (4, 3))])
def test_glu_is_its_definition(dim: int, shape: tuple[int, ...]) -> None:
    m, x = torch.nn.GLU(dim).eval(), torch.randn(*shape)
    p = bound(GluAsSigmoidMul(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1 and aten.glu.default not in called(gm)
    assert_same_function(gm, m, x, 1e-6)


def test_the_program_is_int8() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GLU()).eval()
    low, _ = lowered(net, torch.randn(4, 8), "cortex-m55")
    ops = program_ops(low)
    assert not any(o.startswith("aten.") and ("sigmoid" in o or "mul" in o or "glu" in o) for o in ops), ops
    assert low.extra["verify"]["float_islands"] == []


def test_pipelines() -> None:
    assert_pipelines(GluAsSigmoidMul, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
