"""scalar_ops_as_tables.py: with LUT fusion off, scalar add/sub/mul/div become int8 tables that stop at every
quantized boundary (no requantization dropped), so `--no-lut-fusion` programs of such models are all-int8."""

from __future__ import annotations

import torch

from emlkit.passes.scalar_ops_as_tables import ScalarOpsAsTables
from pass_graphs import assert_pipelines, lowered, program_ops


class _Scaled(torch.nn.Module):
    """Two scalar chains, each between two quantized ops."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x) * 2 + 0.5
        return self.fc(y) / 4.0 - 1.0


def test_no_lut_fusion_program_is_int8_and_keeps_its_boundaries() -> None:
    x = torch.randn(4, 8)
    low, opts = lowered(_Scaled().eval(), x, "cortex-m55", lut_fusion=False)
    assert low.extra["verify"]["float_islands"] == [], low.extra["verify"]
    ops = program_ops(low)
    assert not any(o.startswith("aten.") and any(k in o for k in ("mul", "add", "sub", "div")) for o in ops), ops
    regions = low.extra["scalar_tables"]["regions"]
    assert low.extra["lut_fusion"]["regions"] == []
    assert regions and all(set(r["chain"]) <= {"mul.Tensor(2)", "add.Tensor(0.5)", "div.Tensor(4)", "sub.Tensor(1)"}
                           for r in regions), regions
    # The same tables as fusion makes here: no requantization lies inside either chain.
    fused, _ = lowered(_Scaled().eval(), x, "cortex-m55")
    assert [r["chain"] for r in fused.extra["lut_fusion"]["regions"]] == [r["chain"] for r in regions]


def test_next_to_an_activation_it_stays_as_it_was() -> None:
    """A chain feeding a ReLU is left alone (ExecuTorch lowers the ReLU's pattern itself): the same refusal as
    without the pass."""
    import pytest

    from emlkit.errors import AotError

    class _IntoRelu(_Scaled):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.fc(x) * 2 + 0.5)

    x = torch.randn(4, 8)
    with pytest.raises(AotError) as without:
        lowered(_IntoRelu().eval(), x, "cortex-m55", drop=("ScalarOpsAsTables",), lut_fusion=False)
    with pytest.raises(AotError) as with_pass:
        lowered(_IntoRelu().eval(), x, "cortex-m55", lut_fusion=False)
    assert str(with_pass.value) == str(without.value)


def test_pipelines() -> None:
    assert_pipelines(ScalarOpsAsTables, on=("cortex-m55", "cortex-m4", "ethos-u55-128"), lut_fusion=False)
    assert_pipelines(ScalarOpsAsTables, on=(), off=("cortex-m55", "ethos-u55-128"))
