"""norms_as_layer_norm.py: InstanceNorm2d and GroupNorm as a layer norm (+ per-channel scale and shift) before
quantization (Cortex-M): the same function, and a program without float ops (emlkit::quantized_layer_norm)."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.norms_as_layer_norm import NormsAsLayerNorm
from pass_graphs import assert_pipelines, assert_same_function, bound, called, graph_of, lowered, program_ops

aten = torch.ops.aten


def _norm(kind: str, affine: bool, groups: int = 1) -> torch.nn.Module:
    torch.manual_seed(0)
    m = torch.nn.InstanceNorm2d(4, affine=affine) if kind == "instance" else torch.nn.GroupNorm(groups, 4, affine=affine)
    if affine:  # not the identity a fresh norm has
        torch.nn.init.uniform_(m.weight, 0.5, 1.5)
        torch.nn.init.uniform_(m.bias, -0.5, 0.5)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, 1, 1), m).eval()


@pytest.mark.parametrize("kind, affine, groups", [("instance", False, 1), ("instance", True, 1), ("group", True, 1),
                                                  ("group", True, 2), ("group", False, 4)])
def test_norm_is_its_definition(kind: str, affine: bool, groups: int) -> None:
    m, x = _norm(kind, affine, groups), torch.randn(1, 3, 6, 5)
    p = bound(NormsAsLayerNorm(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1
    assert not {aten.instance_norm.default, aten.group_norm.default} & set(called(gm))
    assert called(gm).count(aten.layer_norm.default) == 1
    assert_same_function(gm, m, x, 1e-5)


def test_running_statistics_are_left_alone() -> None:
    """InstanceNorm2d(track_running_stats=True) in eval normalises with its running statistics: not a layer norm."""
    m = torch.nn.InstanceNorm2d(4, track_running_stats=True).eval()
    m.running_mean.uniform_(-0.5, 0.5)
    x = torch.randn(1, 4, 6, 5)
    p = bound(NormsAsLayerNorm(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert p.report()["rewritten"] == [] and aten.layer_norm.default not in called(gm)


@pytest.mark.parametrize("kind, groups", [("instance", 1), ("group", 2)])
def test_the_program_is_int8(kind: str, groups: int) -> None:
    low, _ = lowered(_norm(kind, True, groups), torch.randn(1, 3, 6, 6), "cortex-m55")
    ops = program_ops(low)
    assert any("quantized_layer_norm" in o for o in ops), ops
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []


def test_pipelines() -> None:
    assert_pipelines(NormsAsLayerNorm, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
