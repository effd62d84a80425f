"""mean_as_pool.py: means (over trailing dimensions, or others moved last: the token mean of [B, T, D], the mean over
heads of [B, H, L, S]) become one-row average pools with their own output qparams (Cortex-M), the same function; a
4-D spatial mean is left alone."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.graph import MEAN_POOL_KEY
from emlkit.passes.mean_as_pool import MeanAsPool
from pass_graphs import assert_same_function, assert_pipelines, bound, called, graph_of, lowered, program_ops

aten = torch.ops.aten


class Mean(torch.nn.Module):
    def __init__(self, dims: object, keepdim: bool = False) -> None:
        super().__init__()
        self.dims, self.keepdim = dims, keepdim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean() if self.dims is None else x.mean(self.dims, keepdim=self.keepdim)


@pytest.mark.parametrize("dims, keepdim, shape", [(-1, False, (2, 5, 7)), (1, True, (3, 10)), (None, False, (4, 6)),
                                                  ([1, 2, 3], False, (1, 3, 4, 4)), ([-2, -1], True, (2, 3, 5)),
                                                  (1, False, (2, 6, 8)), (0, True, (4, 6)),
                                                  (1, False, (1, 2, 5, 6))])
def test_means_become_row_pools(dims: object, keepdim: bool, shape: tuple[int, ...]) -> None:
    m, x = Mean(dims, keepdim).eval(), torch.randn(*shape)
    p = bound(MeanAsPool(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1
    pools = [n for n in gm.graph.nodes if n.target is aten.avg_pool2d.default]
    assert len(pools) == 1 and pools[0].meta[MEAN_POOL_KEY] and aten.mean.dim not in called(gm)
    assert_same_function(gm, m, x, 1e-6)


@pytest.mark.parametrize("dims, shape", [([2, 3], (1, 3, 4, 4)),   # ExecuTorch lowers the spatial mean itself
                                         (-1, (4, 1))])            # nothing to average
def test_other_means_are_left_alone(dims: object, shape: tuple[int, ...]) -> None:
    p = bound(MeanAsPool(), "cortex-m55")
    p(graph_of(Mean(dims).eval(), torch.randn(*shape)))
    assert p.report()["rewritten"] == []


def test_the_program_has_no_float_mean() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), Mean(-1)).eval()
    ops = program_ops(lowered(net, torch.randn(3, 8), "cortex-m55")[0])
    assert not any("mean" in o for o in ops), ops


def test_pipelines() -> None:
    assert_pipelines(MeanAsPool, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
