"""emlkit_log_softmax.py: dq -> log_softmax -> q -> emlkit::log_softmax on Cortex-M (integer, own output scale)."""

from __future__ import annotations

import pytest
import torch

from emlkit.errors import AotError
from emlkit.passes.emlkit_log_softmax import EmlkitLogSoftmax
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class _LogSoftmax(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(16, 24)
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.log_softmax(self.fc(x).reshape(2, 4, 6), dim=self.dim)


@pytest.mark.parametrize("dim", [-1, 1])
def test_log_softmax_lowered_to_emlkit_op(dim: int) -> None:
    low, opts = lowered(_LogSoftmax(dim), torch.randn(2, 16), "cortex-m55")
    (entry,) = installed(opts, EmlkitLogSoftmax).report()["lowered"]
    assert entry["dim"] == dim % 3 and entry["out_scale"] > 0
    ops = program_ops(low)
    assert any("emlkit" in op and "log_softmax" in op for op in ops), ops
    assert not any(op.startswith("aten") and "softmax" in op for op in ops), ops


def test_without_the_pass_log_softmax_stays_float() -> None:
    with pytest.raises(AotError, match="float op"):
        lowered(_LogSoftmax(-1), torch.randn(2, 16), "cortex-m55", drop=("EmlkitLogSoftmax",))


def test_pipelines() -> None:
    assert_pipelines(EmlkitLogSoftmax, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128", "ethos-u85-256"))
