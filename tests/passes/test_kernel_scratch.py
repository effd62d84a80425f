"""kernel_scratch.py: conv / depthwise / avg-pool scratch tensors sized for our kernels; the report names the
kernel variants."""

from __future__ import annotations

import torch

from emlkit.passes.kernel_scratch import KernelScratch
from pass_graphs import assert_pipelines, installed, lowered


def test_conv_kernels_reported() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 8, 3, padding=1, groups=8))
    low, opts = lowered(net, torch.randn(1, 3, 8, 8), "cortex-m55")
    rep = installed(opts, KernelScratch).report()
    assert sum(rep["kernels"].values()) == 2
    assert low.extra["kernel_scratch"] == rep


def test_pipelines() -> None:
    assert_pipelines(KernelScratch, on=("cortex-m55", "ethos-u55-128"))
