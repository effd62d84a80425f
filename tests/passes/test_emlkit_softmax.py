"""emlkit_softmax.py: dq -> softmax -> q -> emlkit::softmax on Cortex-M (integer, own output scale)."""

from __future__ import annotations

import pytest
import torch

from emlkit.errors import AotError
from emlkit.passes.emlkit_softmax import EmlkitSoftmax
from pass_graphs import assert_pipelines, installed, lowered, program_ops


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Softmax(dim=-1))


def test_softmax_lowered_to_emlkit_op() -> None:
    low, opts = lowered(_model(), torch.randn(2, 16), "cortex-m55")
    (entry,) = installed(opts, EmlkitSoftmax).report()["lowered"]
    assert entry["dim"] == 1 and entry["out_scale"] > 0
    assert any("emlkit" in op and "softmax" in op for op in program_ops(low))
    with pytest.raises(AotError, match="float op"):  # without it the softmax stays float: refused
        lowered(_model(), torch.randn(2, 16), "cortex-m55", drop=("EmlkitSoftmax",))


def test_pipelines() -> None:
    assert_pipelines(EmlkitSoftmax, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128", "ethos-u85-256"))
