"""npu_hardswish_floor.py: on Ethos-U a tensor that only feeds hardswish is observed from -3 up."""

from __future__ import annotations

import torch

from emlkit.passes.npu_hardswish_floor import NpuHardswishFloor
from pass_graphs import assert_pipelines, installed, lowered

Q = torch.ops.quantized_decomposed.quantize_per_tensor.default


class _ConvHardswish(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 4, 1)
        with torch.no_grad():
            self.a.weight.mul_(8.0)  # outputs far below -3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.nn.functional.hardswish(self.a(x)))


def test_hardswish_input_floored() -> None:
    low, opts = lowered(_ConvHardswish(), torch.randn(1, 3, 8, 8), "ethos-u55-128")
    done = installed(opts, NpuHardswishFloor).done
    conv = next(n for n in low.quantized.graph.nodes if n.target == torch.ops.aten.conv2d.default)
    assert done == [conv.name]
    q = next(u for u in conv.users if u.target == Q)
    assert abs((-128 - q.args[2]) * q.args[1] + 3.0) <= q.args[1]  # the int8 range starts at -3


def test_pipelines() -> None:
    assert_pipelines(NpuHardswishFloor, on=("ethos-u55-128", "ethos-u85-256"), off=("cortex-m55",))
