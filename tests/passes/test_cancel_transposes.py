"""cancel_transposes.py: cortex_m::transpose pairs that undo each other are removed from the program."""

from __future__ import annotations

import torch

from emlkit.passes.cancel_transposes import CancelTransposes
from pass_graphs import QKScores, assert_pipelines, installed, lowered, program_ops


def test_transpose_pairs_removed() -> None:
    x = torch.randn(1, 8, 16)
    low, opts = lowered(QKScores(), x, "cortex-m55")
    removed = installed(opts, CancelTransposes).report()["removed_pairs"]
    assert removed >= 1
    low2, _ = lowered(QKScores(), x, "cortex-m55", drop=("CancelTransposes",))
    count = lambda lw: sum("transpose" in op for op in program_ops(lw))  # noqa: E731
    assert count(low2) - count(low) == 2 * removed


def test_pipelines() -> None:
    assert_pipelines(CancelTransposes, on=("cortex-m55", "ethos-u55-128"))
