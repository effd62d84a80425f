"""argmax_on_codes.py: argmax / argmin of a dequantized tensor read its int8 codes (Cortex-M): the same indices
as the float model's quantized program, first index on ties, and no float op."""

from __future__ import annotations

import pytest
import torch

from emlkit import reference
from emlkit.passes.argmax_on_codes import ArgmaxOnCodes
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class Head(torch.nn.Module):
    def __init__(self, fn: str, dim: int | None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.l, self.fn, self.dim = torch.nn.Linear(8, 10), fn, dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.l(x)
        return torch.argmax(y, dim=self.dim) if self.fn == "argmax" else torch.argmin(y, dim=self.dim)


@pytest.mark.parametrize("fn, dim", [("argmax", -1), ("argmin", 0), ("argmax", None)])
def test_indices_from_the_codes(fn: str, dim: int | None) -> None:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3))
    low, opts = lowered(Head(fn, dim), x, "cortex-m55")
    assert installed(opts, ArgmaxOnCodes).report()["rewritten"]
    assert low.extra["verify"]["float_islands"] == [] and not any("dequantize" in o and fn in o for o in program_ops(low))
    ref, _ = lowered(Head(fn, dim), x, "cortex-m55", drop=("ArgmaxOnCodes",), allow_float=True)
    a, b = reference.run_lowered(low.edge, (x,)), reference.run_lowered(ref.edge, (x,))
    assert all(torch.equal(p, q) for p, q in zip(a, b))


def test_pipelines() -> None:
    # on int8 Ethos-U targets only for the argmaxes the partitioner leaves on the CPU (tests/test_npu_cpu_int8.py)
    assert_pipelines(ArgmaxOnCodes, on=("cortex-m55", "cortex-m0plus", "ethos-u55-128"), off=("ethos-u55-128-a16w8",))
