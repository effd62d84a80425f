"""Ethos-U quantizer hooks that give the NPU's int8 tensors the ranges the CPU's have:
npu_hardswish_floor.py (hardswish inputs observed from -3 up) and npu_softmax_ranges.py (the decomposed
softmax's sum over [0, N])."""

from __future__ import annotations

import json

import pytest
import torch

from emlkit import numerics, reference
from emlkit.compile import make_options
from emlkit.lower import ethos_u
from emlkit.passes.npu_hardswish_floor import NpuHardswishFloor
from emlkit.passes.npu_softmax_ranges import NpuSoftmaxRanges
from emlkit.targets import get_target
from scripts import parity

U55 = "ethos-u55-128"
Q = torch.ops.quantized_decomposed.quantize_per_tensor.default


def _lower(mod: torch.nn.Module, x: torch.Tensor, target: str = U55) -> tuple[object, object]:
    torch.manual_seed(0)
    data = [(x,)] + [(torch.randn_like(x) * 2,) for _ in range(3)]
    opts = make_options()
    with torch.no_grad():
        low = ethos_u.lower(mod.eval(), (x,), data, get_target(target), opts)
    return low, opts


def _hook(opts: object, cls: type) -> object:
    return next(h for h in opts.quantizer_hooks if isinstance(h, cls))  # type: ignore[attr-defined]


def _quantize_of(gm: torch.fx.GraphModule, target: object) -> torch.fx.Node:
    """The quantize node right after the first call of TARGET."""
    n = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target == target)
    return next(u for u in n.users if u.target == Q)


class _TwoHardswish(torch.nn.Module):
    """a: conv -> hardswish (floored); b: conv -> hardswish and also an output (left alone)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.b = torch.nn.Conv2d(8, 8, 1)
        with torch.no_grad():
            self.a.weight.mul_(8.0)  # its outputs reach far below -3

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b = self.b(torch.nn.functional.hardswish(self.a(x)))
        return torch.nn.functional.hardswish(b), b


def test_hardswish_input_observed_from_minus_three() -> None:
    x = torch.randn(1, 3, 8, 8)
    low, opts = _lower(_TwoHardswish(), x)
    hook = _hook(opts, NpuHardswishFloor)
    gm = low.quantized
    convs = [n for n in gm.graph.nodes if n.target == torch.ops.aten.conv2d.default]
    # The first conv only feeds a hardswish: its int8 range starts at -3 (within a step).
    q = next(u for u in convs[0].users if u.target == Q)
    scale, zp = q.args[1], q.args[2]
    assert abs((-128 - zp) * scale + 3.0) <= scale, (scale, zp)
    # The second also is an output: left alone (its own range starts below -3).
    assert hook.done == [convs[0].name], hook.done          # type: ignore[attr-defined]
    qb = next(u for u in convs[1].users if u.target == Q)
    assert (-128 - qb.args[2]) * qb.args[1] < -3.0 - qb.args[1]
    # The program computes what its quantized model does.
    names = reference.delegate_names(low.edge.exported_program().graph_module)
    tosa = {n: p.tosa for n, p in zip(names, low.extra["vela_partitions"])}
    with torch.no_grad():
        got = reference.run_lowered(low.edge, (x,), tosa, [])
        fq = numerics.flatten_outputs(low.quantized(x))
    for g, f in zip(got, fq):
        assert numerics.snr_db(f.float().flatten(), g.float().flatten()) > 40.0


def test_hardswish_floor_is_ethos_u_only() -> None:
    hook = NpuHardswishFloor()
    assert hook.applies(get_target(U55)) and hook.applies(get_target("ethos-u85-256"))
    assert not hook.applies(get_target("cortex-m55"))   # ExecuTorch's Cortex-M flow clamps at -3 itself


class _Softmax(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(x), dim=-1)


def test_softmax_sum_over_zero_to_n() -> None:
    low, opts = _lower(_Softmax(), torch.randn(3, 16))
    q = _quantize_of(low.quantized, torch.ops.aten.sum.dim_IntList)
    assert q.args[1] == pytest.approx(12 / 255.0) and q.args[2] == -128    # [0, N] with N = 12
    assert len(_hook(opts, NpuSoftmaxRanges).done) == 1                     # type: ignore[attr-defined]


def test_softmax_ranges_int8_ethos_u_only() -> None:
    hook = NpuSoftmaxRanges()
    assert hook.applies(get_target(U55))
    assert not hook.applies(get_target("cortex-m55")) and not hook.applies(get_target("ethos-u55-128-a16w8"))


def test_softmax_parity_on_held_out_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    # Before the hook the NPU was 1.2 dB below the CPU on 64 held-out inputs (its sum saturated on
    # flatter rows than calibration saw); after it 0.1-0.8 dB.
    assert parity.main(["--models", "softmax"]) == 0
    row = json.loads(capsys.readouterr().err.splitlines()[0])
    assert abs(row["gap_db"]) <= 1.0, row


@pytest.mark.slow
def test_mobilenet_v3_small_parity(capsys: pytest.CaptureFixture[str]) -> None:
    # Before npu_hardswish_floor the NPU was 1.05 dB below the CPU on 64 held-out inputs; after it 0.5 dB.
    assert parity.main(["--models", "mobilenet_v3_small"]) == 0
    row = json.loads(capsys.readouterr().err.splitlines()[0])
    assert abs(row["gap_db"]) <= 1.0, row
