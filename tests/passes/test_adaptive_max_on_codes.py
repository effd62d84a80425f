"""adaptive_max_on_codes.py: an adaptive max pool of a dequantized tensor is taken on its int8 codes (Cortex-M), at
output sizes that do and do not divide the input: the same outputs as the program with the float op, and no
float op; one whose indices are used is left alone."""

from __future__ import annotations

import pytest
import torch

from emlkit import reference
from emlkit.passes.adaptive_max_on_codes import AdaptiveMaxOnCodes
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class AdaptiveMax(torch.nn.Module):
    def __init__(self, size: tuple[int, int], indices: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.c, self.indices = torch.nn.Conv2d(3, 4, 3), indices
        self.p = torch.nn.AdaptiveMaxPool2d(size, return_indices=indices)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c(x)
        if self.indices:
            v, i = self.p(y)
            return v + i.to(v.dtype)
        return self.p(y)


X = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("size", [(5, 5), (3, 4), (6, 1)])
def test_adaptive_max_from_the_codes(size: tuple[int, int]) -> None:
    low, opts = lowered(AdaptiveMax(size), X, "cortex-m55")
    assert installed(opts, AdaptiveMaxOnCodes).report()["rewritten"]
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    ref, _ = lowered(AdaptiveMax(size), X, "cortex-m55", drop=("AdaptiveMaxOnCodes",), allow_float=True)
    assert any("adaptive_max" in o for o in program_ops(ref))
    a, b = reference.run_lowered(low.edge, (X,)), reference.run_lowered(ref.edge, (X,))
    assert all(torch.equal(p, q) for p, q in zip(a, b))


def test_used_indices_keep_the_float_op() -> None:
    low, opts = lowered(AdaptiveMax((5, 5), indices=True), X, "cortex-m55", allow_float=True)
    assert installed(opts, AdaptiveMaxOnCodes).report()["rewritten"] == []
    assert any(f["op"] == "aten::adaptive_max_pool2d" for f in low.extra["verify"]["float_islands"])


def test_pipelines() -> None:
    assert_pipelines(AdaptiveMaxOnCodes, on=("cortex-m55", "cortex-m4", "ethos-u55-128"), off=("ethos-u55-128-a16w8",))
