"""Block copies (aten::cat, aten::slice_copy) on the Cortex-M55 under QEMU: bit-exact on rows of many lengths,
and within issue 16's budget of 0.25 instructions per byte per operator on branch_concat's channel concat."""

from __future__ import annotations

from pathlib import Path

from emlkit.run import execute

ROOT = Path(__file__).resolve().parent.parent


def _run(compiled, model: str):
    out = execute(compiled(model, "cortex-m55"), "corstone-300", "qemu", 600.0, "mve", None)
    assert out.status == "PASS", (out.status, out.reason)
    return {op.op: op for op in out.result.per_op}


def test_cat_and_slice_rows_of_many_lengths(compiled) -> None:
    """NHWC rows of 3-40 bytes over 63 pixels (partial loop steps), inputs of different row lengths in one cat
    (the scatter plan is remade between them) and a channel slice: the device matches the host bit for bit."""
    ops = _run(compiled, str(ROOT / "tests" / "models" / "cat_rows.py"))
    assert ops["aten::cat"].calls == 3 and ops["aten::slice_copy"].calls == 1


def test_channel_concat_within_a_quarter_instruction_per_byte(compiled) -> None:
    """branch_concat's cat of three 8-channel branches (16x16 maps, 6,144 bytes): the adapter plans its rows at
    load, so the profiled count (the profiler's own timer reads included) stays under 0.25 per byte."""
    cat = _run(compiled, "branch_concat")["aten::cat"]
    assert cat.calls == 1
    assert cat.count <= 0.25 * 3 * 8 * 16 * 16, cat.count
