"""symmetric_weight_range.py: Cortex-M int8 weights quantized over [-127, 127], not [-128, 127]."""

from __future__ import annotations

import torch

from emlkit.passes.symmetric_weight_range import SymmetricWeightRange
from pass_graphs import assert_pipelines, installed, lowered

QC = torch.ops.quantized_decomposed.quantize_per_channel.default


def _weight_qmins(gm: torch.fx.GraphModule) -> list[int]:
    return [int(n.args[5]) for n in gm.graph.nodes if n.op == "call_function" and n.target == QC]


def test_weights_narrowed() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 1))
    low, opts = lowered(net, torch.randn(1, 3, 8, 8), "cortex-m55")
    assert installed(opts, SymmetricWeightRange).report() == {"range": [-127, 127], "weights": 2}
    low2, _ = lowered(net, torch.randn(1, 3, 8, 8), "cortex-m55", drop=("SymmetricWeightRange",))
    assert installed(opts, SymmetricWeightRange).report()["weights"] == 2
    assert low.extra["symmetric_weight_range"]["weights"] == 2 and "symmetric_weight_range" not in low2.extra


def test_pipelines() -> None:
    assert_pipelines(SymmetricWeightRange, on=("cortex-m55", "cortex-m33"), off=("ethos-u55-128", "ethos-u85-256"))
