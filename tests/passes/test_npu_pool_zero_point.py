"""npu_pool_zero_point.py: on Ethos-U average pools keep their real zero points in the TOSA graph (its part
runs inside ExecuTorch's Arm pipeline; the report names the pools ExecuTorch's folding would change)."""

from __future__ import annotations

from pathlib import Path

from emlkit.load import load_model
from emlkit.passes.npu_pool_zero_point import ARM_HOOK, NpuPoolZeroPoint
from pass_graphs import assert_arm_part_off, assert_pipelines, installed, lowered

REPRO = Path(__file__).parents[1] / "data" / "fuzz_repros" / "ethos_u55_128_avg_pool_into_linear.py"


def test_folded_zero_point_reported() -> None:
    model = load_model(str(REPRO))
    (x,) = model.inputs
    low, opts = lowered(model.module, x, "ethos-u55-128")
    (entry,) = installed(opts, NpuPoolZeroPoint).report()["pools"]
    assert entry["node"].startswith("avg_pool2d") and entry["zero_point"] != entry["folded_to"]
    assert ARM_HOOK._installed  # bound to an Ethos-U target: the Arm-pipeline part is registered


def test_arm_part_off_where_it_does_not_apply() -> None:
    assert_arm_part_off(NpuPoolZeroPoint, "cortex-m55")


def test_pipelines() -> None:
    assert_pipelines(NpuPoolZeroPoint, on=("ethos-u55-128", "ethos-u85-256"), off=("cortex-m55",))
