"""verify_program.py: the last pass refuses float ops left on the CPU (warnings with allow_float)."""

from __future__ import annotations

import pytest
import torch

from emlkit.errors import AotError
from emlkit.passes.verify_program import VerifyProgram
from pass_graphs import assert_pipelines, installed, lowered


def _softmax() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Softmax(dim=-1))


def test_float_island_refused_or_reported() -> None:
    with pytest.raises(AotError, match="float op"):
        lowered(_softmax(), torch.randn(2, 16), "cortex-m55", drop=("EmlkitSoftmax",))
    _, opts = lowered(_softmax(), torch.randn(2, 16), "cortex-m55", drop=("EmlkitSoftmax",), allow_float=True)
    assert "softmax" in str(installed(opts, VerifyProgram).report())


def test_pipelines() -> None:
    assert_pipelines(VerifyProgram, on=("cortex-m55", "cortex-m0plus", "ethos-u55-128", "ethos-u85-256"))
