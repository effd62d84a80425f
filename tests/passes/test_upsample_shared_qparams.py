"""upsample_shared_qparams.py: nearest upsampling shares its input's qparams on Cortex-M (the quantizer's
shared-qspec ops gain upsample_nearest2d)."""

from __future__ import annotations

import torch

from emlkit.passes.upsample_shared_qparams import UpsampleSharedQparams
from pass_graphs import assert_pipelines, installed, lowered


class _Up(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(self.conv(x), scale_factor=2, mode="nearest")


def test_upsample_added_to_shared_qspec_ops() -> None:
    low, opts = lowered(_Up(), torch.randn(1, 3, 4, 4), "cortex-m55")
    done = installed(opts, UpsampleSharedQparams).done
    assert done and all("upsample_nearest2d" in d for d in done)
    assert low.extra["upsample_shared_qparams"] == {"shared_qspec_targets_added": done}


def test_pipelines() -> None:
    assert_pipelines(UpsampleSharedQparams, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128",))
