"""emlkit/passes/window_bias.py: the folded bias of windows inside the input (bias + input_offset *
sum(weights)) is computed at compile time and carried after the multipliers (convolutions: padded to a
multiple of 4 channels; depthwise: then the MVE 16-channel blocks); the reference ignores it, the
runtime checks it at load (and so at compile time: the compiler runs the firmware's load on the host), the
kernels use it."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

# the passes package first: it avoids a circular import inside the wheel and registers cortex_m::
import executorch.backends.cortex_m.passes  # noqa: F401
from emlkit.passes.window_bias import conv_extension, dw_blocks, window_bias


def _rand(shape: tuple[int, ...], lo: int, hi: int, g: torch.Generator, dtype: torch.dtype = torch.int8) -> torch.Tensor:
    return torch.randint(lo, hi, shape, dtype=dtype, generator=g)


@pytest.mark.parametrize("depthwise, groups", [(False, 1), (False, 2), (True, 1)])
def test_reference_reads_one_multiplier_per_channel(depthwise: bool, groups: int) -> None:
    """The premise: ExecuTorch's references give the same outputs with the extended multipliers tensor
    in the forms the pass writes (odd sizes, padding, strides, grouped, per-channel requantization)."""
    g = torch.Generator().manual_seed(3)
    c, oc = (18, 18) if depthwise else (6, 10)
    x = _rand((1, c, 9, 7), -128, 128, g).to(memory_format=torch.channels_last)
    w = _rand((1, 3, 3, oc), -127, 128, g) if depthwise else _rand((oc, 3, 3, c // groups), -127, 128, g)
    b = _rand((oc,), -5000, 5000, g, torch.int32)
    m = _rand((oc,), 1 << 29, (1 << 31) - 1, g, torch.int32)
    s = _rand((oc,), -9, -5, g, torch.int32)
    beff = window_bias(w, b, 17, depthwise)
    ext = torch.cat([m, beff, dw_blocks(beff, m, s)]) if depthwise else torch.cat([m, conv_extension(beff)])
    assert ext.numel() == (2 * oc + 2 * 48 if depthwise else oc + 12)
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


def test_extension_layouts() -> None:
    """Conv: the start values zero-padded to 4 channels; depthwise blocks: per 16 channels 16 start values,
    16 multipliers, 16 shifts, zero past the last channel."""
    assert conv_extension(torch.tensor([5, -6], dtype=torch.int32)).tolist() == [5, -6, 0, 0]
    assert conv_extension(torch.tensor([1, 2, 3, 4], dtype=torch.int32)).tolist() == [1, 2, 3, 4]
    n = 18
    beff, m, s = (torch.arange(n, dtype=torch.int32) + k for k in (100, 1000, -40))
    blk = dw_blocks(beff, m, s).reshape(2, 3, 16)
    assert blk[0, 0].tolist() == list(range(100, 116)) and blk[0, 1].tolist() == list(range(1000, 1016))
    assert blk[0, 2].tolist() == list(range(-40, -24))
    assert blk[1, 0].tolist() == [116, 117] + [0] * 14 and blk[1, 2].tolist() == [-24, -23] + [0] * 14


def test_window_bias_arithmetic() -> None:
    """bias + off * sum over every tap of the channel, wrapped to int32 (conv OHWI, depthwise 1HWO)."""
    w = torch.tensor([[[[1, -2]], [[3, 4]]]], dtype=torch.int8)          # conv [1][2][1][2]: sum 6
    assert window_bias(w, torch.tensor([10], dtype=torch.int32), 5, False).tolist() == [40]
    dw = torch.tensor([[[[1, 2]], [[3, -4]]]], dtype=torch.int8)         # depthwise [1][2][1][2]: sums 4, -2
    assert window_bias(dw, None, -3, True).tolist() == [-12, 6]
    big = torch.full((1, 1, 1, 1), 127, dtype=torch.int8)
    assert window_bias(big, torch.tensor([2**31 - 1], dtype=torch.int32), 1, False).tolist() == [-(2**31) + 126]


def _conv_nodes(program, op: str) -> list[dict]:
    """Every call of cortex_m::OP: its constants (weights, bias, multipliers, shifts as tensors), input offset,
    input channels and the multipliers' buffer index."""
    from executorch.exir.schema import KernelCall

    plan = program.execution_plan[0]
    dw = "depthwise" in op
    m_i = 9 if dw else 8

    def const(v, dtype):
        n = int(torch.tensor([int(d) for d in v.sizes]).prod())    # the storage may be padded
        return torch.frombuffer(bytearray(program.constant_buffer[v.data_buffer_idx].storage), dtype=dtype)[:n]

    found = []
    for ins in plan.chains[0].instructions:
        a = ins.instr_args
        if not isinstance(a, KernelCall) or plan.operators[a.op_index].name != op:
            continue
        x, w, b = plan.values[a.args[0]].val, plan.values[a.args[1]].val, plan.values[a.args[2]].val
        m, s = plan.values[a.args[m_i]].val, plan.values[a.args[m_i + 1]].val
        found.append({"w": const(w, torch.int8).reshape([int(d) for d in w.sizes]),
                      "b": const(b, torch.int32) if type(b).__name__ == "Tensor" else None,
                      "m": const(m, torch.int32), "s": const(s, torch.int32), "m_idx": m.data_buffer_idx,
                      "off": plan.values[a.args[m_i - 2]].val.int_val, "in_c": int(x.sizes[1]),
                      "in_sizes": [int(d) for d in x.sizes]})
    return found


def _corrupt_and_load(runner, schema, program, idx: int, entry: int, tmp_path: Path) -> dict:
    """The bundle with int32 entry ENTRY of constant buffer IDX increased by one, run on the host runner."""
    from executorch.devtools.bundled_program.serialize import _bundled_program_schema_to_flatbuffer
    from executorch.exir._serialize._flatbuffer_program import _program_to_flatbuffer

    from test_runtime import _run_raw

    good = program.constant_buffer[idx].storage
    buf = bytearray(good)
    struct.pack_into("<i", buf, 4 * entry, struct.unpack_from("<i", buf, 4 * entry)[0] + 1)
    program.constant_buffer[idx].storage = bytes(buf)
    schema.program = _program_to_flatbuffer(program).data
    program.constant_buffer[idx].storage = good
    bad = tmp_path / f"bad_{idx}_{entry}.bpte"
    bad.write_bytes(_bundled_program_schema_to_flatbuffer(schema))
    rc, out, _ = _run_raw(runner, bad)
    assert rc == 2 and out["status"] == "error" and out["stage"] == "load", out
    return out


def _load(res):
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
    from executorch.exir._serialize._program import deserialize_pte_binary

    schema = deserialize_from_flatbuffer_to_bundled_program(res.bpte.read_bytes())
    return schema, deserialize_pte_binary(schema.program).program


def test_ds_cnn_depthwise_carry_checked_blocks(compiled, tmp_path: Path) -> None:
    """mlperf_kws_dscnn's padded depthwise layers carry the folded bias and the 16-channel blocks (equal to
    what the program's own weights, bias, multipliers and shifts give); the bundle passes on the host runner;
    the same program with one wrong start value or one wrong block entry is refused at load with a one-line
    reason."""
    from emlkit.hostfw import build_host_runner
    from test_runtime import _run_raw

    op = "cortex_m::quantized_depthwise_conv2d"
    res = compiled("mlperf_kws_dscnn", "cortex-m55")
    report = json.loads(res.report_path.read_text())
    assert report["window_bias"]["nodes_with_folded_window_bias"] >= 4
    assert report["window_bias"]["depthwise_with_16_channel_blocks"] >= 4
    schema, program = _load(res)
    nodes = [d for d in _conv_nodes(program, op) if d["m"].numel() > d["w"].shape[3]]
    assert len(nodes) >= 4
    for d in nodes:
        oc = d["w"].shape[3]
        want = window_bias(d["w"], d["b"], d["off"], True)
        assert torch.equal(d["m"], torch.cat([d["m"][:oc], want, dw_blocks(want, d["m"][:oc], d["s"])]))
    runner = build_host_runner("Debug", sanitize=True)
    rc, out, _ = _run_raw(runner, res.bpte)
    assert (rc, out["status"]) == (0, "pass"), out

    d = nodes[0]
    oc = d["w"].shape[3]
    # entry oc: channel 0's start value; 2 oc + 32 + 1: the first block's shift of channel 1
    for entry, part in ((oc, "folded window bias of channel 0"), (2 * oc + 33, "16-channel block of channel 1: shift")):
        out = _corrupt_and_load(runner, schema, program, d["m_idx"], entry, tmp_path)
        assert part in out["error"], out


def test_grouped_conv_folded_and_padded(compiled, tmp_path: Path) -> None:
    """tests/models/grouped_conv.py: its grouped convolutions (4 and 2 groups, padded) carry the folded bias
    padded to 4 channels (42 -> 44 entries), its 42-channel depthwise the blocks (3 blocks); the bundle passes
    on the host runner and a nonzero padding entry is refused at load."""
    from emlkit.hostfw import build_host_runner
    from test_runtime import _run_raw

    op = "cortex_m::quantized_conv2d"
    res = compiled(str(Path(__file__).resolve().parent.parent / "models" / "grouped_conv.py"), "cortex-m55")
    report = json.loads(res.report_path.read_text())
    assert report["window_bias"]["nodes_with_folded_window_bias"] == 3
    assert report["kernel_scratch"]["kernels"].get("conv_mve_general") == 2
    schema, program = _load(res)
    grouped = [d for d in _conv_nodes(program, op) if d["w"].shape[3] < d["in_c"]]
    assert sorted(d["w"].shape[0] for d in grouped) == [32, 42]
    for d in grouped:
        oc = d["w"].shape[0]
        assert torch.equal(d["m"][oc:], conv_extension(window_bias(d["w"], d["b"], d["off"], False)))
    dw = _conv_nodes(program, "cortex_m::quantized_depthwise_conv2d")
    assert [d["m"].numel() for d in dw] == [2 * 42 + 3 * 48]
    runner = build_host_runner("Debug", sanitize=True)
    rc, out, _ = _run_raw(runner, res.bpte)
    assert (rc, out["status"]) == (0, "pass"), out
    d = next(d for d in grouped if d["w"].shape[0] == 42)
    out = _corrupt_and_load(runner, schema, program, d["m_idx"], 42 + 43, tmp_path)
    assert "folded window bias of padding channel 43 is 1, not 0" in out["error"], out


def test_scratch_planner_reads_the_forms_by_length() -> None:
    """emlkit/passes/kernel_scratch.py tells the forms apart as the runtime's conv_point_ext does: a convolution's
    padded start values (the older unpadded 2 x out_c form is checked at load but not read in place), a
    depthwise's start values alone or with the blocks."""
    from emlkit.passes.kernel_scratch import multiplier_forms

    assert multiplier_forms(42 + 44, 42, False) == (True, False)
    assert multiplier_forms(2 * 42, 42, False) == (False, False)
    assert multiplier_forms(2 * 40, 40, False) == (True, False)
    assert multiplier_forms(42, 42, False) == (False, False)
    assert multiplier_forms(2 * 42, 42, True) == (True, False)
    assert multiplier_forms(2 * 42 + 3 * 48, 42, True) == (True, True)
    assert multiplier_forms(42 + 3 * 48, 42, True) == (False, False)
