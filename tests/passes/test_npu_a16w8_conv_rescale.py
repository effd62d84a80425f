"""npu_a16w8_conv_rescale.py: on int16 Ethos-U targets an int16 conv's int32 consumers (add) read its int16
output, not its accumulator (inside ExecuTorch's Arm pipeline; Vela refuses int32 conv outputs on the U55)."""

from __future__ import annotations

from pathlib import Path

from emlkit.load import load_model
from emlkit.passes.npu_a16w8_conv_rescale import ARM_HOOK, NpuA16w8ConvRescale
from pass_graphs import assert_arm_part_off, assert_pipelines, installed, lowered

REPRO = Path(__file__).parents[1] / "data" / "fuzz_repros" / "ethos_u55_128_a16w8_conv_into_mul_add.py"


def test_int32_rescales_read_the_int16_output() -> None:
    model = load_model(str(REPRO))
    low, opts = lowered(model.module, model.inputs[0], "ethos-u55-128-a16w8")
    done = installed(opts, NpuA16w8ConvRescale).report()["rescales"]
    assert done, "no int32 RESCALE of a conv accumulator was split"
    assert low.extra["npu_a16w8_conv_rescale"] == {"rescales": done}


def test_arm_part_off_where_it_does_not_apply() -> None:
    assert_arm_part_off(NpuA16w8ConvRescale, "ethos-u55-128")


def test_pipelines() -> None:
    assert_pipelines(NpuA16w8ConvRescale, on=("ethos-u55-128-a16w8",), off=("ethos-u55-128", "cortex-m55"))
