"""The passes' shared helpers (emlkit/passes/graph.py, lut_fusion.fill_undefined)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from emlkit.passes.graph import QuantizerHook, add_parameter, calls, reaches, unique_name, wrap_int32
from emlkit.passes.lut_fusion import fill_undefined

aten = torch.ops.aten


class _Chain(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x).reshape(-1)
        return torch.cat([y, torch.sigmoid(x).reshape(-1)])


def _graph() -> torch.fx.GraphModule:
    return torch.export.export(_Chain(), (torch.randn(2, 3),)).graph_module


def test_reaches_walks_through_and_stops_where_told() -> None:
    gm = _graph()
    relu = calls(gm, {aten.relu.default})[0]
    through = {aten.reshape.default, aten.view.default}
    assert reaches(relu, lambda u: True if u.target is aten.cat.default else (None if u.target in through else False))
    # Stopped at the reshape: the cat behind it is never seen.
    assert not reaches(relu, lambda u: True if u.target is aten.cat.default else False)


def test_add_parameter_takes_a_fresh_name_each_time() -> None:
    gm = _graph()
    a = add_parameter(gm, "_w", torch.ones(2))
    b = add_parameter(gm, "_w", torch.zeros(2))
    assert (a, b) == ("_w_0", "_w_1") and unique_name(gm, "_w") == "_w_2"
    assert isinstance(getattr(gm, a), torch.nn.Parameter) and not getattr(gm, a).requires_grad


def test_wrap_int32_wraps_like_the_kernels() -> None:
    v = torch.tensor([2**31, -(2**31) - 1, 5], dtype=torch.int64)
    assert wrap_int32(v).tolist() == [-(2**31), 2**31 - 1, 5]


def test_fill_undefined_takes_the_nearest_defined_entry() -> None:
    out = torch.tensor([0, 7, 0, 0, 9, 0], dtype=torch.int64)
    nan = torch.tensor([True, False, True, True, False, True])
    fill_undefined(out, nan)
    assert out.tolist() == [7, 7, 7, 9, 9, 9]
    with pytest.raises(ValueError, match="undefined on every input code"):
        fill_undefined(torch.zeros(3), torch.ones(3, dtype=torch.bool))


def test_quantizer_hook_skips_other_flows_and_resets_its_record() -> None:
    class Hook(QuantizerHook):
        report_name = "seen"

        def configure(self, quantizer: object, target: object) -> object:
            self.done.append("x")
            return ("wrapped", quantizer)

    hook = Hook()
    assert hook("q", SimpleNamespace(flow="cortex_m"), None) == ("wrapped", "q")
    assert hook.report() == {"seen": ["x"]}
    assert hook("q", SimpleNamespace(flow="ethos_u"), None) == "q"
    assert hook.report() == {"seen": []}
