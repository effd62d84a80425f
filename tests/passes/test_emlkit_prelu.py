"""emlkit_prelu.py: dq -> prelu -> q with one slope per channel (negative, zero and above-one slopes included) ->
emlkit::prelu on Cortex-M, no float op left, within 1 int8 step of the program that runs the float PReLU between
the same qparams; an NCHW model input and a channels-last conv output both."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.emlkit_prelu import EmlkitPrelu, prelu_table
from pass_graphs import assert_lowered_within_one_step, assert_pipelines


class _Prelu(torch.nn.Module):
    def __init__(self, conv: bool, slopes: list[float]) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, len(slopes), 3, padding=1) if conv else None
        self.act = torch.nn.PReLU(len(slopes))
        with torch.no_grad():
            self.act.weight.copy_(torch.tensor(slopes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x) if self.conv is not None else x)


@pytest.mark.parametrize("conv, slopes", [(True, [0.25, -0.5, 0.0, 1.5]), (False, [0.1, 2.0, -1.0])])
def test_prelu_lowered_within_one_step(conv: bool, slopes: list[float]) -> None:
    x = torch.randn(1, 3, 6, 7, generator=torch.Generator().manual_seed(4))
    model = _Prelu(conv, slopes)
    assert_lowered_within_one_step(model, x, EmlkitPrelu, lambda o: "emlkit.prelu" in o,
                                   lambda o: "aten.where" in o or "prelu" in o)


def test_table_signs_and_range() -> None:
    t = prelu_table(torch.tensor([0.5, -0.25, 0.0]), 3, 0.02, 0.01)
    assert t is not None and t[:, 0].tolist()[2] == 0 and t[0, 0] > 0 > t[1, 0]
    assert (t[0, 0].item() / 2 ** t[0, 1].item()) == pytest.approx(1.0, rel=1e-8)
    assert prelu_table(torch.tensor([0.5, 0.5]), 3, 0.02, 0.01) is None          # slopes do not match the channels
    assert prelu_table(torch.tensor([1e-30]), 2, 0.02, 0.01).tolist() == [[0, 1], [0, 1]]  # rounds to 0 anyway
    assert prelu_table(torch.tensor([1e12]), 1, 0.02, 0.01) is None             # a factor above the shift range


def test_pipelines() -> None:
    assert_pipelines(EmlkitPrelu, on=("cortex-m55", "cortex-m4", "cortex-m0plus"), off=("ethos-u55-128",))
