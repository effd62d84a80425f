"""explicit_npu_clamp.py: on Ethos-U a conv + ReLU whose zero point is not int8's minimum (a concat branch)
gets a quantize/dequantize before the activation, so it stays an int8 CLAMP."""

from __future__ import annotations

import torch

from emlkit.passes.explicit_npu_clamp import ExplicitNpuClamp
from pass_graphs import assert_pipelines, installed, lowered

DQ = torch.ops.quantized_decomposed.dequantize_per_tensor.default


class _TwoBranches(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.relu(self.a(x)), self.b(x) - 3.0], 1)


def test_shared_range_relu_gets_explicit_clamp() -> None:
    low, opts = lowered(_TwoBranches(), torch.randn(1, 3, 6, 6), "ethos-u55-128")
    (entry,) = installed(opts, ExplicitNpuClamp).report()["rewritten"]
    assert entry["zero_point"] > entry["qmin"]
    relu = next(n for n in low.quantized.graph.nodes if n.name == entry["node"])
    assert relu.args[0].target == DQ


def test_pipelines() -> None:
    assert_pipelines(ExplicitNpuClamp, on=("ethos-u55-128", "ethos-u85-256"), off=("cortex-m55",))
