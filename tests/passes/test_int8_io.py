"""int8_io.py: with --io int8 the program takes its float inputs as int8 codes (the leading quantize removed), with
--io int8-all it also gives int8 outputs (the trailing dequantize removed); the qparams are reported."""

from __future__ import annotations

import pytest
import torch

from emlkit import reference
from emlkit.compile import int8_io_inputs, make_options
from emlkit.errors import EXIT_UNSUPPORTED, AotError
from emlkit.passes.int8_io import Int8Io
from pass_graphs import assert_pipelines, bound, lowered, program_ops


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1))


def _quant_args(low: object, op: str) -> list[tuple[float, int]]:
    gm = low.edge.exported_program().graph_module  # type: ignore[attr-defined]
    return [(float(n.args[1]), int(n.args[2])) for n in gm.graph.nodes
            if n.op == "call_function" and getattr(n.target, "_schema", None) is not None
            and n.target._schema.name == f"cortex_m::{op}"]


def _user_input(low: object) -> torch.fx.Node:
    ep = low.edge.exported_program()  # type: ignore[attr-defined]
    return next(n for n in ep.graph.nodes if n.name == ep.graph_signature.user_inputs[0])


def test_int8_inputs_compute_what_the_float_program_did() -> None:
    x = torch.randn(1, 3, 8, 8)
    ref, _ = lowered(_net(), x, "cortex-m55")
    low, _ = lowered(_net(), x, "cortex-m55", io="int8")
    (scale, zp), = _quant_args(ref, "quantize_per_tensor")
    assert _quant_args(low, "quantize_per_tensor") == []
    assert _user_input(low).meta["val"].dtype == torch.int8
    entry, = low.extra["int8_io"]["inputs"]
    assert (entry["scale"], entry["zero_point"], entry["dtype"]) == (scale, zp, "int8") and low.extra["int8_io"]["outputs"] == []
    low.inputs = int8_io_inputs(low)
    assert low.inputs[0].dtype == torch.int8 and low.inputs[0].is_contiguous(memory_format=torch.channels_last)
    (a,), (b,) = reference.run_lowered(ref.edge, ref.inputs), reference.run_lowered(low.edge, low.inputs)
    assert b.dtype == torch.float32 and torch.equal(a, b)


def test_int8_all_gives_the_codes_of_the_float_output() -> None:
    x = torch.randn(1, 3, 8, 8)
    ref, _ = lowered(_net(), x, "cortex-m55")
    low, _ = lowered(_net(), x, "cortex-m55", io="int8-all")
    (scale, zp), = _quant_args(ref, "dequantize_per_tensor")
    assert not any("quantize_per_tensor" in o for o in program_ops(low))
    out, = low.extra["int8_io"]["outputs"]
    assert (out["index"], out["scale"], out["zero_point"]) == (0, scale, zp)
    low.inputs = int8_io_inputs(low)
    (a,), (codes,) = reference.run_lowered(ref.edge, ref.inputs), reference.run_lowered(low.edge, low.inputs)
    assert codes.dtype == torch.int8
    # the float program's output is exactly its dequantize of these codes
    assert torch.equal(torch.round(a / scale).to(torch.int32) + zp, codes.to(torch.int32))


def test_input_read_as_float_is_refused() -> None:
    from executorch.exir.dialects._ops import ops as exir_ops

    low, _ = lowered(_net(), torch.randn(1, 3, 8, 8), "cortex-m55")  # --io float: the quantize is there
    ep = low.edge.exported_program()
    x = _user_input(low)
    with ep.graph.inserting_after(x):
        ep.graph.call_function(exir_ops.edge.aten.abs.default, (x,))
    with pytest.raises(AotError) as err:
        bound(Int8Io(), "cortex-m55", io="int8")(ep)
    assert err.value.exit_code == EXIT_UNSUPPORTED
    assert "input 0 (input_1) is not quantized at its first use (it is read as float by aten::abs)" in str(err.value)


def test_nothing_changes_without_the_option() -> None:
    low, _ = lowered(_net(), torch.randn(1, 3, 8, 8), "cortex-m55")
    assert low.extra["int8_io"] == {} and _user_input(low).meta["val"].dtype == torch.float32
    assert make_options().io == "float"


def test_pipelines() -> None:
    assert_pipelines(Int8Io, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",), io="int8")
    assert_pipelines(Int8Io, on=(), off=("cortex-m55", "cortex-m4"))


class _TwoInputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.c, self.l = torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.Linear(6, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(self.c(x)), self.l(y)


def test_every_float_input_with_its_own_qparams_and_strides() -> None:
    xs = (torch.randn(1, 1, 8, 8), torch.randn(2, 6))
    ref, _ = lowered(_TwoInputs(), xs, "cortex-m55")
    low, _ = lowered(_TwoInputs(), xs, "cortex-m55", io="int8-all")
    io = low.extra["int8_io"]
    assert [e["index"] for e in io["inputs"]] == [0, 1] and [e["index"] for e in io["outputs"]] == [0, 1]
    assert sorted((e["scale"], e["zero_point"]) for e in io["inputs"]) == sorted(_quant_args(ref, "quantize_per_tensor"))
    low.inputs = int8_io_inputs(low)
    assert [t.stride() for t in low.inputs] == [t.stride() for t in ref.inputs]
    want = reference.run_lowered(ref.edge, ref.inputs)
    for e, codes, a in zip(io["outputs"], reference.run_lowered(low.edge, low.inputs), want):
        assert codes.dtype == torch.int8
        assert torch.equal(torch.round(a / e["scale"]).to(torch.int32) + e["zero_point"], codes.to(torch.int32))
