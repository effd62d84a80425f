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


class _Masked(torch.nn.Module):
    """The float masked softmax sdpa_as_matmuls.py emits, over scores with a mask from the input's last column."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import emlkit.emlkit_ops  # noqa: F401  (registers the op)

        return torch.ops.emlkit_float.masked_softmax(self.lin(x), (x[:, -8:] > 0.5), 1)


def test_masked_softmax_lowered_to_emlkit_op() -> None:
    """dq -> emlkit_float::masked_softmax -> q becomes emlkit::masked_softmax, the bool mask passed as it is; left
    float it is refused by name (the verifier counts emlkit_float:: as float compute)."""
    x = torch.randn(4, 16)
    low, opts = lowered(_Masked(), x, "cortex-m55")
    (entry,) = installed(opts, EmlkitSoftmax).report()["lowered"]
    assert entry["dim"] == 1 and entry["out_scale"] > 0
    ops = program_ops(low)
    assert any("emlkit" in op and "masked_softmax" in op for op in ops) and not any("emlkit_float" in op for op in ops)
    with pytest.raises(AotError, match="float op.*emlkit_float::masked_softmax"):
        lowered(_Masked(), x, "cortex-m55", drop=("EmlkitSoftmax",))
