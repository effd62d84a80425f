"""roll_as_slices.py: torch.roll as slices and a cat per rolled dim, so it runs on the int8 codes and a pointwise op
before it still becomes a table."""

from __future__ import annotations

import torch

from emlkit.passes.roll_as_slices import RollAsSlices
from pass_graphs import assert_pipelines, graph_of, installed, lowered, program_ops


class SoftplusRoll(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.fc = torch.nn.Conv2d(4, 6, 1), torch.nn.Linear(6 * 5 * 3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.roll(torch.nn.functional.softplus(self.conv(x), beta=2.6), [2, -4, 0], [1, 3, 2])
        return self.fc(torch.flatten(y, 1))


def test_roll_is_slices_and_the_function_is_the_same() -> None:
    m, x = SoftplusRoll().eval(), torch.randn(1, 4, 5, 3)
    gm = graph_of(m, x)
    p = RollAsSlices()
    p.run(gm)
    ops = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.roll.default not in ops and torch.ops.aten.cat.default in ops
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=0, rtol=0)


def test_softplus_then_roll_is_int8() -> None:
    from emlkit import reference

    m, x = SoftplusRoll().eval(), torch.randn(1, 4, 5, 3, generator=torch.Generator().manual_seed(1))
    low, opts = lowered(m, x, "cortex-m55")
    assert len(installed(opts, RollAsSlices).report()["rewritten"]) == 1
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == [], program_ops(low)
    (y,) = reference.run_lowered(low.edge, (x,))
    with torch.no_grad():
        want = m(x)
    assert 10 * torch.log10(want.pow(2).mean() / (y - want).pow(2).mean()) > 30


def test_pipelines() -> None:
    assert_pipelines(RollAsSlices, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
