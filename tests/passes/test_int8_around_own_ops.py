"""int8_around_own_ops.py: PReLU, adaptive pools and floor divisions the Cortex-M quantizer leaves unannotated get a
quantize where a neighbour gave none, so a per-channel PReLU feeding both an adaptive average pool and a transposed
conv (the defect), an adaptive pool feeding a PReLU, an adaptive max pool and a floor division feeding an adaptive pool all
lower to int8; a one-slope PReLU chained into a pointwise op stays in one table. (Bags: test_emlkit_embedding_bag.)"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from emlkit import reference
from emlkit.passes.int8_around_own_ops import Int8AroundOwnOps
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class _PreluTwoReaders(torch.nn.Module):
    """The fresh model that found the defect: conv -> PReLU(8) -> {AdaptiveAvgPool2d((3, 5)), ConvTranspose2d}."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.c, self.p = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.PReLU(8)
        self.t = torch.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        with torch.no_grad():
            self.p.weight.copy_(torch.linspace(-0.5, 1.5, 8))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.p(self.c(x))
        return F.adaptive_avg_pool2d(y, (3, 5)), self.t(y)


class _PoolsThenPrelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.c, self.p8, self.p1 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.PReLU(8), torch.nn.PReLU()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.c(x)
        return (self.p8(F.adaptive_avg_pool2d(h, (3, 5))), torch.sigmoid(self.p1(F.adaptive_max_pool2d(h, (3, 5)))),
                F.adaptive_avg_pool2d(torch.floor_divide(h, 0.5), (3, 5)))


X = torch.randn(1, 3, 10, 14, generator=torch.Generator().manual_seed(1))


def _op_names(low: object) -> list[str]:
    """The program's ops as 'namespace.op' ('cortex_m.quantized_conv2d')."""
    return [o.split(":", 1)[-1].split(">", 1)[0].strip().rsplit(".", 1)[0] for o in program_ops(low)]


def _step_of(low: object, op: object) -> float:
    """The output step of the (one) call of OP in the lowered program: the scale of the dequantize reading it."""
    (n,) = [n for n in low.quantized.graph.nodes if n.target is op]  # type: ignore[attr-defined]
    (dq,) = [u for u in n.users if u.target is torch.ops.quantized_decomposed.dequantize_per_tensor.default]
    return float(dq.args[1])


def test_prelu_feeding_adaptive_pool_and_transpose_conv_is_int8() -> None:
    model = _PreluTwoReaders().eval()
    low, opts = lowered(model, X, "cortex-m4")
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    ops = _op_names(low)
    assert "emlkit.prelu" in ops and "emlkit.adaptive_avg_pool2d" in ops, ops
    assert installed(opts, Int8AroundOwnOps).report()["annotated"] == ["prelu"]
    # Without the hook the same model keeps gt/mul/where and the pool in float (the defect); both compute the same
    # function within one output step (the hook moves no qparams, it adds the quantize the pool lacked).
    ref, _ = lowered(model, X, "cortex-m4", drop=("Int8AroundOwnOps",), allow_float=True)
    assert {i["op"] for i in ref.extra["verify"]["float_islands"]} >= {"aten::where", "aten::_adaptive_avg_pool2d"}
    got, want = reference.run_lowered(low.edge, (X,)), reference.run_lowered(ref.edge, (X,))
    step = _step_of(low, torch.ops.emlkit.adaptive_avg_pool2d.default)
    assert (got[0] - want[0]).abs().max() <= step * (1 + 1e-5)
    torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)


def test_pools_feeding_prelu() -> None:
    low, opts = lowered(_PoolsThenPrelu().eval(), X, "cortex-m4")
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    ops = _op_names(low)
    assert {"emlkit.prelu", "emlkit.adaptive_avg_pool2d", "emlkit.floor_divide"} <= set(ops), ops
    # The one-slope PReLU and the sigmoid after it stay one table: the hook gave that PReLU no output of its own.
    assert ops.count("cortex_m.quantized_activation") == 1, ops
    assert installed(opts, Int8AroundOwnOps).report()["annotated"] == ["adaptive_avg_pool2d", "adaptive_max_pool2d",
                                                                        "floor_divide"]


def test_pipelines() -> None:
    assert_pipelines(Int8AroundOwnOps, on=("cortex-m55", "cortex-m4", "cortex-m0plus"), off=("ethos-u55-128",))


class _HardsigmoidPermutePool(torch.nn.Module):
    """Random model 72:32's head: hardsigmoid on the input, permuted into an adaptive pool of uneven windows."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(F.hardsigmoid(x).permute(0, 1, 3, 2), (8, 8))


def test_data_movement_before_an_own_op_shares_its_qparams() -> None:
    """The quantizer's shared-qparams step ran before the pool had an int8 input: the permute and its channels-last
    copy stayed float, no quantize followed the hardsigmoid, and it was a float op. Run again, it gives them the
    pool's input qparams, so the hardsigmoid becomes a table."""
    x = torch.randn(1, 4, 12, 12, generator=torch.Generator().manual_seed(2))
    for target in ("cortex-m55", "cortex-m4"):
        low, _ = lowered(_HardsigmoidPermutePool().eval(), x, target)
        assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == [], target
        ops = _op_names(low)
        assert "cortex_m.quantized_activation" in ops and "emlkit.adaptive_avg_pool2d" in ops, ops
