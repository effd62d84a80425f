"""emlkit_adaptive_avg_pool.py: adaptive average pools whose output does not divide the input (unequal, overlapping
windows) -> emlkit::adaptive_avg_pool2d on Cortex-M, no float op left, within 1 int8 step of the program that pools
in float between the same qparams; the windows are PyTorch's."""

from __future__ import annotations

import pytest
import torch

from emlkit.emlkit_ops import adaptive_windows
from emlkit.passes.emlkit_adaptive_avg_pool import EmlkitAdaptiveAvgPool
from pass_graphs import assert_lowered_within_one_step, assert_pipelines


class _Pool(torch.nn.Module):
    def __init__(self, size: tuple[int, int], conv: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1) if conv else None
        self.size = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.adaptive_avg_pool2d(self.conv(x) if self.conv is not None else x, self.size)


@pytest.mark.parametrize("size, conv", [((3, 4), True), ((5, 2), False), ((4, 6), True)])
def test_adaptive_pool_lowered_within_one_step(size: tuple[int, int], conv: bool) -> None:
    x = torch.randn(1, 3, 7, 9, generator=torch.Generator().manual_seed(4))
    model = _Pool(size, conv)
    assert_lowered_within_one_step(model, x, EmlkitAdaptiveAvgPool, lambda o: "emlkit.adaptive_avg_pool2d" in o,
                                   lambda o: "adaptive_avg_pool2d" in o and "emlkit" not in o)


def test_windows_are_torchs() -> None:
    """Averaging a one-hot map with the tables' windows gives torch's adaptive pool, for sizes that overlap."""
    for size, out in ((7, 3), (9, 4), (5, 5), (4, 6)):
        t = adaptive_windows(size, out)
        eye = torch.eye(size, dtype=torch.float64).view(size, 1, size)
        want = torch.nn.functional.adaptive_avg_pool1d(eye, out)[:, 0, :]        # [size, out]: weight of input i
        got = torch.zeros(size, out, dtype=torch.float64)
        for j, (s, e) in enumerate(t.tolist()):
            got[s:e, j] = 1.0 / (e - s)
        assert torch.allclose(got, want), (size, out)


def test_pipelines() -> None:
    assert_pipelines(EmlkitAdaptiveAvgPool, on=("cortex-m55", "cortex-m4", "cortex-m0plus"), off=("ethos-u55-128",))
