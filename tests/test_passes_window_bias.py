"""aot/passes/window_bias.py: the folded bias of windows inside the input (bias + input_offset *
sum(weights)) is computed at compile time and carried after the multipliers; the reference ignores
it, the runtime checks it at load, the kernels use it."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

# the passes package first: it avoids a circular import inside the wheel and registers cortex_m::
import executorch.backends.cortex_m.passes  # noqa: F401
from aot.passes.window_bias import window_bias


def _rand(shape: tuple[int, ...], lo: int, hi: int, g: torch.Generator, dtype: torch.dtype = torch.int8) -> torch.Tensor:
    return torch.randint(lo, hi, shape, dtype=dtype, generator=g)


@pytest.mark.parametrize("depthwise", [False, True])
def test_reference_reads_one_multiplier_per_channel(depthwise: bool) -> None:
    """The premise: ExecuTorch's references give the same outputs with the extended multipliers tensor
    (odd sizes, padding, strides, per-channel requantization)."""
    g = torch.Generator().manual_seed(3)
    c, oc = 6, 6 if depthwise else 10
    x = _rand((1, c, 9, 7), -128, 128, g).to(memory_format=torch.channels_last)
    w = _rand((1, 3, 3, oc), -127, 128, g) if depthwise else _rand((oc, 3, 3, c), -127, 128, g)
    b = _rand((oc,), -5000, 5000, g, torch.int32)
    m = _rand((oc,), 1 << 29, (1 << 31) - 1, g, torch.int32)
    s = _rand((oc,), -9, -5, g, torch.int32)
    ext = torch.cat([m, window_bias(w, b, 17, depthwise)])
    scratch = torch.empty(0, dtype=torch.uint8)
    outs = []
    for mult in (m, ext):
        if depthwise:
            outs.append(torch.ops.cortex_m.quantized_depthwise_conv2d(x, w, b, [2, 1], [1, 1], [1, 1], 1, 17, -3, mult,
                                                                      s, -128, 127, scratch))
        else:
            outs.append(torch.ops.cortex_m.quantized_conv2d(x, w, b, [2, 1], [1, 1], [1, 1], 17, -3, mult, s, -128,
                                                            127, scratch))
    assert torch.equal(outs[0], outs[1])


def test_window_bias_arithmetic() -> None:
    """bias + off * sum over every tap of the channel, wrapped to int32 (conv OHWI, depthwise 1HWO)."""
    w = torch.tensor([[[[1, -2]], [[3, 4]]]], dtype=torch.int8)          # conv [1][2][1][2]: sum 6
    assert window_bias(w, torch.tensor([10], dtype=torch.int32), 5, False).tolist() == [40]
    dw = torch.tensor([[[[1, 2]], [[3, -4]]]], dtype=torch.int8)         # depthwise [1][2][1][2]: sums 4, -2
    assert window_bias(dw, None, -3, True).tolist() == [-12, 6]
    big = torch.full((1, 1, 1, 1), 127, dtype=torch.int8)
    assert window_bias(big, torch.tensor([2**31 - 1], dtype=torch.int32), 1, False).tolist() == [-(2**31) + 126]


def _dw_tails(program) -> list[tuple[int, int]]:
    """(multipliers buffer index, out_c) of every depthwise node whose multipliers carry a tail."""
    from executorch.exir.schema import KernelCall

    plan = program.execution_plan[0]
    found = []
    for ins in plan.chains[0].instructions:
        a = ins.instr_args
        if not isinstance(a, KernelCall) or plan.operators[a.op_index].name != "cortex_m::quantized_depthwise_conv2d":
            continue
        w, m = plan.values[a.args[1]].val, plan.values[a.args[9]].val
        oc = int(w.sizes[3])
        if int(m.sizes[0]) == 2 * oc:
            b = plan.values[a.args[2]].val
            off = plan.values[a.args[7]].val.int_val
            wt = torch.frombuffer(bytearray(program.constant_buffer[w.data_buffer_idx].storage), dtype=torch.int8)
            bt = torch.frombuffer(bytearray(program.constant_buffer[b.data_buffer_idx].storage), dtype=torch.int32)
            mt = torch.frombuffer(bytearray(program.constant_buffer[m.data_buffer_idx].storage), dtype=torch.int32)
            want = window_bias(wt.reshape([int(d) for d in w.sizes]), bt, off, True)
            assert torch.equal(mt[oc:2 * oc], want)
            found.append((m.data_buffer_idx, oc))
    return found


def test_ds_cnn_depthwise_carry_checked_tails(compiled, tmp_path: Path) -> None:
    """mlperf_kws_dscnn's padded depthwise layers carry the folded bias (equal to what the program's own
    weights and bias give); the bundle passes on the host runner, and the same program with one wrong
    entry is refused at load with a one-line reason."""
    from executorch.devtools.bundled_program.serialize import (
        _bundled_program_schema_to_flatbuffer, deserialize_from_flatbuffer_to_bundled_program)
    from executorch.exir._serialize._flatbuffer_program import _program_to_flatbuffer
    from executorch.exir._serialize._program import deserialize_pte_binary

    from test_runtime import _run_raw
    from aot.deploy.sim_host import build_host_runner

    res = compiled("mlperf_kws_dscnn", "cortex-m55")
    report = json.loads(res.report_path.read_text())
    assert report["window_bias"]["nodes_with_folded_window_bias"] >= 4
    schema = deserialize_from_flatbuffer_to_bundled_program(res.bpte.read_bytes())
    program = deserialize_pte_binary(schema.program).program
    tails = _dw_tails(program)
    assert len(tails) >= 4
    runner = build_host_runner("Debug", sanitize=True)
    rc, out, _ = _run_raw(runner, res.bpte)
    assert (rc, out["status"]) == (0, "pass"), out

    idx, oc = tails[0]
    buf = bytearray(program.constant_buffer[idx].storage)
    v = struct.unpack_from("<i", buf, 4 * oc)[0]
    struct.pack_into("<i", buf, 4 * oc, v + 1)
    program.constant_buffer[idx].storage = bytes(buf)
    schema.program = _program_to_flatbuffer(program).data
    bad = tmp_path / "bad.bpte"
    bad.write_bytes(_bundled_program_schema_to_flatbuffer(schema))
    rc, out, _ = _run_raw(runner, bad)
    assert rc == 2 and out["status"] == "error" and out["stage"] == "load", out
    assert "folded window bias of channel 0" in out["error"], out
