"""median_on_codes.py: the median of a dequantized tensor is taken on its int8 codes (Cortex-M): the same outputs
as the program with the float median, and no float op; a median whose indices are used is left alone."""

from __future__ import annotations

import pytest
import torch

from emlkit import reference
from emlkit.passes.median_on_codes import MedianOnCodes
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class Median(torch.nn.Module):
    def __init__(self, dim: int | None, keepdim: bool = False, indices: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.l, self.dim, self.keepdim, self.indices = torch.nn.Linear(8, 9), dim, keepdim, indices

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.l(x)
        if self.dim is None:
            return torch.median(y)
        v, i = torch.median(y, dim=self.dim, keepdim=self.keepdim)
        return v + i.to(v.dtype) if self.indices else v


@pytest.mark.parametrize("dim, keepdim", [(None, False), (-1, False), (0, True)])
def test_median_from_the_codes(dim: int | None, keepdim: bool) -> None:
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(3))
    low, opts = lowered(Median(dim, keepdim), x, "cortex-m55")
    assert installed(opts, MedianOnCodes).report()["rewritten"]
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    ref, _ = lowered(Median(dim, keepdim), x, "cortex-m55", drop=("MedianOnCodes",), allow_float=True)
    assert any("median" in o for o in program_ops(ref))
    a, b = reference.run_lowered(low.edge, (x,)), reference.run_lowered(ref.edge, (x,))
    assert all(torch.equal(p, q) for p, q in zip(a, b))


def test_used_indices_keep_the_float_median() -> None:
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(3))
    low, opts = lowered(Median(-1, indices=True), x, "cortex-m55", allow_float=True)
    assert installed(opts, MedianOnCodes).report()["rewritten"] == []
    assert any(f["op"] == "aten::median" for f in low.extra["verify"]["float_islands"])


def test_pipelines() -> None:
    assert_pipelines(MedianOnCodes, on=("cortex-m55", "cortex-m4", "ethos-u55-128"), off=("ethos-u55-128-a16w8",))
