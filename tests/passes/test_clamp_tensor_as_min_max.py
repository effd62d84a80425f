"""clamp_tensor_as_min_max.py: torch.clamp with tensor bounds as maximum then minimum before quantization
(Cortex-M), the same function, so the program runs it in int8 instead of a float clamp reading int8 codes."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.clamp_tensor_as_min_max import ClampTensorAsMinMax
from pass_graphs import assert_pipelines, assert_same_function, bound, called, graph_of, lowered, program_ops

aten = torch.ops.aten


class Clamp(torch.nn.Module):
    def __init__(self, lo: bool, hi: bool, shape: tuple[int, ...] = (1, 4, 1, 1)) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, 1, 1)
        self.lo = -0.1 - 0.9 * torch.rand(shape) if lo else None
        self.hi = 0.1 + 0.9 * torch.rand(shape) if hi else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(self.conv(x), self.lo, self.hi)


@pytest.mark.parametrize("lo, hi, shape", [(True, True, (1, 4, 1, 1)), (True, False, (1, 1, 6, 1)),
                                           (False, True, (4, 1, 1)), (True, True, (1, 4, 6, 6))])
def test_clamp_is_max_then_min(lo: bool, hi: bool, shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    m, x = Clamp(lo, hi, shape).eval(), torch.randn(1, 4, 6, 6)
    p = bound(ClampTensorAsMinMax(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1 and aten.clamp.Tensor not in called(gm)
    assert called(gm).count(aten.maximum.default) == int(lo) and called(gm).count(aten.minimum.default) == int(hi)
    assert_same_function(gm, m, x)


def test_crossed_bounds_give_the_upper_one() -> None:
    """torch.clamp's definition where lo > hi: min(max(x, lo), hi) = hi, which the rewrite keeps."""
    m = Clamp(True, True).eval()
    m.lo, m.hi = torch.full((1, 4, 1, 1), 0.5), torch.full((1, 4, 1, 1), -0.5)
    x = torch.randn(1, 4, 6, 6)
    gm = bound(ClampTensorAsMinMax(), "cortex-m55")(graph_of(m, x))
    assert_same_function(gm, m, x)


def test_the_program_is_int8() -> None:
    torch.manual_seed(0)
    low, _ = lowered(Clamp(True, True), torch.randn(1, 4, 6, 6), "cortex-m55")
    ops = program_ops(low)
    assert not any(o.startswith("aten.") and any(k in o for k in ("clamp", "maximum", "minimum")) for o in ops), ops
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []


def test_pipelines() -> None:
    assert_pipelines(ClampTensorAsMinMax, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
