"""sum_as_mean.py: a sum over any dims (trailing, leading, all of them) as mean * count before quantization
(Cortex-M), the same function, and a program without float ops; a sum over size-1 dims only is a reshape."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.sum_as_mean import SumAsMean
from pass_graphs import assert_pipelines, assert_same_function, bound, called, graph_of, lowered, program_ops

aten = torch.ops.aten


class Sum(torch.nn.Module):
    def __init__(self, dims: tuple[int, ...], keepdim: bool) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, 1, 1)
        self.dims, self.keepdim = dims, keepdim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(torch.relu(self.conv(x)), self.dims, keepdim=self.keepdim)


class SumAll(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x).sum() + x.sum((0, 1, 2))


@pytest.mark.parametrize("dims, keepdim, mean", [((3,), True, True), ((2, 3), True, True), ((-1,), False, True),
                                                 ((1,), True, True), ((2,), True, True), ((1, 2), False, True),
                                                 ((0,), False, False), ((0, 1), True, True)])
def test_sum_is_mean_times_count(dims: tuple[int, ...], keepdim: bool, mean: bool) -> None:
    torch.manual_seed(0)
    m, x = Sum(dims, keepdim).eval(), torch.randn(1, 3, 6, 5)
    p = bound(SumAsMean(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert p.report()["rewritten"]
    assert aten.sum.dim_IntList not in called(gm)
    assert (aten.mean.dim in called(gm)) == mean  # over the batch of 1 alone: a reshape
    assert_same_function(gm, m, x, 1e-5)


def test_sum_of_every_element() -> None:
    m, x = SumAll().eval(), torch.randn(2, 3, 4)
    p = bound(SumAsMean(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert aten.sum.default not in called(gm) and aten.sum.dim_IntList not in called(gm)
    assert_same_function(gm, m, x, 1e-4)


@pytest.mark.parametrize("dims", [(3,), (2, 3), (1,), (1, 2), (0, 1)])
def test_the_program_is_int8(dims: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    low, _ = lowered(Sum(dims, True), torch.randn(1, 3, 6, 8), "cortex-m55")
    ops = program_ops(low)
    assert not any(o.startswith("aten.") and ("sum" in o or "mean" in o) for o in ops), ops
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []


def test_pipelines() -> None:
    assert_pipelines(SumAsMean, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
