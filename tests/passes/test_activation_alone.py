"""activation_alone.py: on Cortex-M every hardsigmoid (and conv/linear/add activations feeding a shared concat)
is annotated on its own, not folded into its producer."""

from __future__ import annotations

import torch

from emlkit.passes.activation_alone import ActivationAlone, candidates
from pass_graphs import assert_pipelines, graph_of, installed, lowered


class _ConvHardsigmoid(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.hardsigmoid(self.conv(x))


def test_hardsigmoid_is_a_candidate() -> None:
    gm = graph_of(_ConvHardsigmoid(), torch.randn(1, 3, 8, 8))
    assert [str(n.target) for n in candidates(gm)] == ["aten.hardsigmoid.default"]


def test_hardsigmoid_quantized_on_its_own() -> None:
    low, opts = lowered(_ConvHardsigmoid(), torch.randn(1, 3, 8, 8), "cortex-m55")
    hook = installed(opts, ActivationAlone)
    assert len(hook.done) == 1 and "hardsigmoid" in hook.done[0]
    assert low.extra["activation_alone"] == {"annotated_alone": hook.done}


def test_pipelines() -> None:
    assert_pipelines(ActivationAlone, on=("cortex-m55", "cortex-m4", "cortex-m0plus"),
                     off=("ethos-u55-128", "ethos-u85-256"))
