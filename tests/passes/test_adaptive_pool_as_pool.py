"""adaptive_pool_as_pool.py: adaptive average / max pools whose output divides the input become plain pools
with kernel = stride (Cortex-M), the same function; other adaptive pools are left alone."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.adaptive_pool_as_pool import AdaptivePoolAsPool
from pass_graphs import assert_same_function, assert_pipelines, bound, called, graph_of, lowered, program_ops

aten = torch.ops.aten


@pytest.mark.parametrize("pool, size, plain", [(torch.nn.AdaptiveAvgPool2d, (5, 4), aten.avg_pool2d.default),
                                               (torch.nn.AdaptiveMaxPool2d, (10, 2), aten.max_pool2d.default)])
def test_divisible_adaptive_pool_becomes_a_plain_pool(pool: type, size: tuple[int, int], plain: object) -> None:
    m, x = pool(size).eval(), torch.randn(1, 3, 20, 16)
    p = bound(AdaptivePoolAsPool(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1 and plain in called(gm)
    assert_same_function(gm, m, x, 0)


@pytest.mark.parametrize("m", [torch.nn.AdaptiveAvgPool2d((3, 3)),   # 20 is no multiple of 3
                               torch.nn.AdaptiveAvgPool2d(1),        # global: ExecuTorch lowers it already
                               torch.nn.AdaptiveMaxPool2d(5, return_indices=True)])  # the indices are read
def test_other_adaptive_pools_are_left_alone(m: torch.nn.Module) -> None:
    p = bound(AdaptivePoolAsPool(), "cortex-m55")
    p(graph_of(m.eval(), torch.randn(1, 3, 20, 20)))
    assert p.report()["rewritten"] == []


def test_the_program_runs_the_int8_pools() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.AdaptiveAvgPool2d(4),
                              torch.nn.AdaptiveMaxPool2d(2)).eval()
    ops = program_ops(lowered(net, torch.randn(1, 3, 16, 16), "cortex-m55")[0])
    assert not any("adaptive" in o for o in ops), ops


def test_pipelines() -> None:
    assert_pipelines(AdaptivePoolAsPool, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
