"""emlkit_floor_divide.py: floor_divide (and div with rounding_mode="floor") of a quantized tensor by another of the
same or a broadcasting shape (either side the larger), or by a scalar (a Python int or float, either sign, or a
one-element constant) -> emlkit::floor_divide on Cortex-M with no float op left; its floor is the exact floor of the
dequantized quotient (checked with Python fractions), which the float program reaches too except where float32
rounding lands on the other side of an integer."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from emlkit import reference
from emlkit.passes.emlkit_floor_divide import EmlkitFloorDivide, floor_divide_constants
import emlkit.emlkit_ops as eo
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class _FloorDiv(torch.nn.Module):
    def __init__(self, as_div: bool) -> None:
        super().__init__()
        self.as_div = as_div

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.div(x, y, rounding_mode="floor") if self.as_div else torch.floor_divide(x, y)


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 9, generator=g) * 3, torch.rand(4, 9, generator=g) * 2 - 1


@pytest.mark.parametrize("as_div", [False, True])
def test_floor_divide_lowered(as_div: bool) -> None:
    x, y = _inputs(5)
    model = _FloorDiv(as_div)
    low, opts = lowered(model, (x, y), "cortex-m55")
    assert len(installed(opts, EmlkitFloorDivide).report()["lowered"]) == 1
    assert any("emlkit.floor_divide" in o for o in program_ops(low))
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    ref, _ = lowered(model, (x, y), "cortex-m55", drop=("EmlkitFloorDivide",), allow_float=True)
    assert any("aten.div" in o for o in program_ops(ref))
    (a,), (b,) = reference.run_lowered(low.edge, (x, y)), reference.run_lowered(ref.edge, (x, y))
    step = [float(n.args[1]) for n in low.quantized.graph.nodes if n.op == "call_function"
            and n.target is torch.ops.quantized_decomposed.dequantize_per_tensor.default][-1]
    assert a.shape == b.shape == model(x, y).shape
    same = (a - b).abs() <= step * (1 + 1e-5)
    assert same.float().mean() >= 0.97, (a - b).abs().max()


class _Divisors(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("c", torch.tensor(1.5))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x // 0.7, torch.floor_divide(x, 2), torch.div(x, -3, rounding_mode="floor"),
                torch.floor_divide(x, self.c), torch.floor_divide(x, y[:1]), torch.floor_divide(y[:, :1], x))


def test_scalar_and_broadcast_divisors_lowered() -> None:
    x, y = _inputs(7)
    y = torch.where(y.abs() < 0.2, torch.full_like(y, 0.5), y)
    model = _Divisors()
    low, opts = lowered(model, (x, y), "cortex-m55")
    kinds = [e["divisor"] for e in installed(opts, EmlkitFloorDivide).report()["lowered"]]
    assert kinds == ["scalar"] * 4 + ["broadcast"] * 2, kinds
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    ref, _ = lowered(model, (x, y), "cortex-m55", drop=("EmlkitFloorDivide",), allow_float=True)
    steps = [float(n.args[1]) for n in low.quantized.graph.nodes if n.op == "call_function"
             and n.target is torch.ops.quantized_decomposed.dequantize_per_tensor.default]
    for a, b, f in zip(reference.run_lowered(low.edge, (x, y)), reference.run_lowered(ref.edge, (x, y)), model(x, y)):
        assert a.shape == b.shape == f.shape
        assert ((a - b).abs() <= max(steps) * (1 + 1e-5)).float().mean() >= 0.95, (a - b).abs().max()


@pytest.mark.parametrize("c", [0.7, -3.0, 2.0, 1e-3])
def test_scalar_divisor_floor_is_exact(c: float) -> None:
    """A scalar divisor as the one-element code sign(c) with scale |c| in float32: the exact floor of A * s_a / c."""
    s_a, c32 = float(np.float32(0.037)), float(np.float32(c))
    consts = floor_divide_constants(s_a, abs(c32), 1.0)
    assert consts is not None
    a = torch.arange(-128, 128, dtype=torch.int8)
    got = eo.floor_divide_reference(a, torch.tensor([1 if c32 > 0 else -1], dtype=torch.int8), 3, 0, *consts[:3], 0,
                                    *consts[3:])
    want = [max(-128, min(127, math.floor(Fraction(s_a) * (q - 3) / Fraction(c32)))) for q in a.tolist()]
    assert got.tolist() == want


@pytest.mark.parametrize("seed", range(6))
def test_floor_is_exact(seed: int) -> None:
    """The reference's floor, before requantization, equals Fraction arithmetic on the dequantized codes."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-128, 128, (300,), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (300,), generator=g, dtype=torch.int8)
    s_a, s_b = float(torch.rand(1, generator=g)) * 0.5 + 1e-3, float(torch.rand(1, generator=g)) * 0.05 + 1e-3
    zp_a, zp_b = int(torch.randint(-20, 20, (1,), generator=g)), int(torch.randint(-20, 20, (1,), generator=g))
    s_a, s_b = float(torch.tensor(s_a, dtype=torch.float32)), float(torch.tensor(s_b, dtype=torch.float32))
    consts = floor_divide_constants(s_a, s_b, 1.0)   # s_out = 1: the codes are the floors (saturated)
    assert consts is not None
    m_a, m_b, e, mult, shift = consts
    got = eo.floor_divide_reference(a, b, zp_a, zp_b, m_a, m_b, e, 0, mult, shift)
    for qa, qb, y in zip(a.tolist(), b.tolist(), got.tolist()):
        A, B = qa - zp_a, qb - zp_b
        want = (127 if A > 0 else -128 if A < 0 else 0) if B == 0 else \
            max(-128, min(127, math.floor(Fraction(s_a) * A / (Fraction(s_b) * B))))
        assert y == want, (qa, qb)


def test_pipelines() -> None:
    assert_pipelines(EmlkitFloorDivide, on=("cortex-m55", "cortex-m4", "cortex-m0plus"), off=("ethos-u55-128",))
