"""`python -m emlkit compile`: every zoo model x target compiles, loads, has the right ops and numerics."""

from __future__ import annotations

import json
import math

import pytest

from emlkit import models

TARGETS = ["cortex-m55", "cortex-m85", "ethos-u55-128", "ethos-u85-256"]

# aten ops that only move data; anything else left on the CPU is a float (or unquantized) compute op.
DATA_MOVEMENT = {
    "aten::view_copy", "aten::permute_copy", "aten::squeeze_copy", "aten::unsqueeze_copy", "aten::cat",
    "aten::slice_copy", "aten::expand_copy", "aten::clone", "dim_order_ops::_clone_dim_order",
    "dim_order_ops::_to_dim_order_copy", "aten::_to_copy", "aten::select_copy",
}

# SNR floors (dB) of the lowered int8 program against the float model on ModelInputs.
# One int8 quantization of a well-scaled tensor gives ~40 dB; each requantizing layer
# adds noise, so the floor drops with depth. Floors sit ~5 dB under the measured figure
# (docs/results.md lists the measured ones) so a real regression fails, run-to-run noise doesn't.
SNR_FLOOR = {
    "add": 30.0, "mul": 30.0, "conv_relu": 30.0, "dw_separable": 25.0, "mlp": 25.0,
    "pool": 30.0, "softmax": 25.0, "lut_activations": 25.0, "mobilenet_v2": 30.0,
    # The AOT-robustness models (tests/test_robustness.py has the per-target detail).
    "conv_hardsigmoid": 40.0, "relu6_net": 35.0, "scalar_arith": 30.0, "attention": 25.0,
    "fc_autoencoder": 25.0, "global_avgpool": 35.0,
}


def _params():
    # The newer zoo models (models.NEW_MODELS) has its own per-target expectations in tests/test_zoo_targets.py.
    # Cortex-M85 programs are the Cortex-M55 ones byte for byte (one flow, one ISA; the test below checks it on
    # M85_FAST): the other M85 rows compile them again, so they run in the slow pass.
    for m in (m for m in models.ZOO if m not in models.NEW_MODELS):
        for t in TARGETS:
            slow = m == "mobilenet_v2" or t == "ethos-u85-256" or (t == "cortex-m85" and m not in M85_FAST)
            yield pytest.param(m, t, marks=[pytest.mark.slow] if slow else [], id=f"{m}-{t}")


M85_FAST = ("conv_relu", "softmax")


@pytest.mark.parametrize("model", M85_FAST)
def test_cortex_m85_program_is_the_cortex_m55_program(compiled, model: str) -> None:
    m55, m85 = compiled(model, "cortex-m55"), compiled(model, "cortex-m85")
    assert m85.pte.read_bytes() == m55.pte.read_bytes()
    assert m85.report["ops"] == m55.report["ops"] and m85.report["target"] == "cortex-m85"


@pytest.mark.parametrize("model,target", list(_params()))
def test_zoo_compiles(compiled, model: str, target: str) -> None:
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
    from executorch.exir._serialize._program import deserialize_pte_binary

    res = compiled(model, target)
    pte = res.pte.read_bytes()
    assert pte[4:8] == b"ET12"
    prog = deserialize_pte_binary(pte)
    prog = getattr(prog, "program", prog)
    assert prog.execution_plan[0].name == "forward"
    bp = deserialize_from_flatbuffer_to_bundled_program(res.bpte.read_bytes())
    suite = bp.method_test_suites[0]
    assert suite.method_name == "forward" and len(suite.test_cases) >= 1
    assert len(suite.test_cases[0].expected_outputs) == len(res.report["outputs"])

    report = json.loads(res.report_path.read_text())
    ops = report["ops"]
    cpu_compute = sorted(op for op in ops if not op.startswith(("cortex_m::", "emlkit::", "delegate:")) and op not in DATA_MOVEMENT)
    assert cpu_compute == [], f"ops left in float/unquantized on the CPU: {cpu_compute}"
    if target.startswith("ethos"):
        assert report["partitions"] == 1, f"expected one NPU partition, got {report['partitions']}"
        assert report["vela"]["npu_only_cycles_estimate"] > 0
    else:
        assert report["partitions"] == 0
        assert any(op.startswith(("cortex_m::quantized", "emlkit::")) or op == "cortex_m::softmax" for op in ops)
    snr = report["numerics"]["snr_db"]
    snr = math.inf if snr == "inf" else float(snr)
    assert snr >= SNR_FLOOR[model], f"SNR {snr:.1f} dB below the floor {SNR_FLOOR[model]} dB"
    mem = report["memory"]
    assert mem["program_bytes"] == len(pte) and mem["arena_total"] > 0


def test_input_offsets_folded_and_kernels_reported(compiled) -> None:
    """dw_separable's pointwise convolution reads no padding: its input offset is folded into the bias at
    compile time (input_offset 0 in the program), and the report names the kernel variant of every
    conv-family node and the scratch added for our kernels."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    res = compiled("dw_separable", "cortex-m55")
    report = json.loads(res.report_path.read_text())
    assert report["fold_input_offset"]["folded_convolutions"] >= 1
    kernels = report["kernel_scratch"]["kernels"]
    assert sum(kernels.values()) >= 2 and any(k.startswith("dw_") for k in kernels)
    prog = deserialize_pte_binary(res.pte.read_bytes())
    prog = getattr(prog, "program", prog)
    plan = prog.execution_plan[0]
    convs = [i for i in plan.chains[0].instructions
             if hasattr(i.instr_args, "op_index")
             and plan.operators[i.instr_args.op_index].name == "cortex_m::quantized_conv2d"]
    offsets = [plan.values[i.instr_args.args[6]].val.int_val for i in convs]
    assert 0 in offsets, offsets
