"""masked_fill_on_codes.py: masked_fill / where with a scalar or full fill select int8 codes (Cortex-M): the same outputs
as the program with the float select, no float op, and a fill outside the input's range is not clipped."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.utils._pytree as pytree

from emlkit import reference
from emlkit.passes.masked_fill_on_codes import MaskedFillOnCodes
from pass_graphs import installed, assert_pipelines, lowered, program_ops


class Fill(torch.nn.Module):
    def __init__(self, form: str, value: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.l, self.form, self.value = torch.nn.Linear(8, 12), form, value
        self.register_buffer("mask", torch.rand(5, 12, generator=torch.Generator().manual_seed(1)) > 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.l(x)
        if self.form == "masked_fill":
            return y.masked_fill(self.mask, self.value)
        if self.form == "where_other":
            return torch.where(self.mask, y, self.value)
        if self.form == "full_like":  # ExecuTorch's Arm decomposition of masked_fill (the U85's quantizer)
            return torch.where(self.mask, torch.full_like(y, self.value), y)
        if self.form == "full":
            return torch.where(self.mask, y, torch.full((5, 12), self.value))
        return torch.where(self.mask, self.value, y)


@pytest.mark.parametrize("form, value", [("masked_fill", 0.0), ("masked_fill", 5.0), ("where_other", -1.5),
                                         ("where_self", 0.25)])
def test_select_on_codes(form: str, value: float) -> None:
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(3))
    low, opts = lowered(Fill(form, value), x, "cortex-m55")
    assert installed(opts, MaskedFillOnCodes).report()["rewritten"]
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    assert not any("scalar_tensor" in o or "full" in o for o in program_ops(low))
    ref, _ = lowered(Fill(form, value), x, "cortex-m55", drop=("MaskedFillOnCodes",), allow_float=True)
    assert any("scalar_tensor" in o for o in program_ops(ref))
    (a,), (b,) = reference.run_lowered(low.edge, (x,)), reference.run_lowered(ref.edge, (x,))
    assert torch.equal(a, b)
    # The fill comes back within half an output step: 5.0 lies outside the Linear's outputs.
    mask = Fill(form, value).mask
    filled = a[mask] if form != "where_other" else a[~mask]
    scales = [float(n.args[1]) for n in low.quantized.graph.nodes if n.op == "call_function"
              and n.target is torch.ops.quantized_decomposed.dequantize_per_tensor.default]
    assert (filled - value).abs().max() <= scales[-1] / 2 + 1e-6


@pytest.mark.parametrize("form, value", [("full_like", -1.0), ("full", 2.0)])
def test_full_fill_on_codes(monkeypatch: pytest.MonkeyPatch, form: str, value: float) -> None:
    """where.self with a full/full_like fill (ExecuTorch's Arm decomposition of masked_fill): the quantized graph
    gives the same outputs after the rewrite as before it (without it the Cortex-M program is broken: a float
    full_like of int8 codes)."""
    graphs = []
    work = MaskedFillOnCodes.work

    def keep(self: MaskedFillOnCodes, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        graphs.append(copy.deepcopy(gm))
        out = work(self, gm)
        graphs.append(copy.deepcopy(out))
        return out

    monkeypatch.setattr(MaskedFillOnCodes, "work", keep)
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(3))
    low, opts = lowered(Fill(form, value), x, "cortex-m55")
    assert installed(opts, MaskedFillOnCodes).report()["rewritten"]
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    assert not any("full" in o for o in program_ops(low))
    before, after = graphs
    assert any("full" in str(n.target) for n in before.graph.nodes)
    assert not any("full" in str(n.target) for n in after.graph.nodes)
    (want,), (got,) = pytree.tree_leaves(before(x)), pytree.tree_leaves(after(x))
    assert torch.equal(want, got)


def test_tensor_fill_is_left_alone() -> None:
    class TensorFill(Fill):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.l(x)
            return torch.where(self.mask, y, -y)

    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(2))
    _, opts = lowered(TensorFill("", 0.0), x, "cortex-m55", allow_float=True)
    assert installed(opts, MaskedFillOnCodes).report()["rewritten"] == []


def test_pipelines() -> None:
    assert_pipelines(MaskedFillOnCodes, on=("cortex-m55", "cortex-m4", "ethos-u55-128"), off=("ethos-u55-128-a16w8",))
