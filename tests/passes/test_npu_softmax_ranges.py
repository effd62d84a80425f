"""npu_softmax_ranges.py: on int8 Ethos-U targets the sum inside the NPU softmax decomposition gets its exact
range [0, N]."""

from __future__ import annotations

import torch

from emlkit.passes.npu_softmax_ranges import NpuSoftmaxRanges
from pass_graphs import assert_pipelines, installed, lowered


def test_softmax_sum_range_fixed() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Softmax(dim=-1))
    low, opts = lowered(net, torch.randn(2, 16), "ethos-u55-128")
    (entry,) = installed(opts, NpuSoftmaxRanges).done
    assert entry.endswith("(N=8)")
    assert low.extra["npu_softmax_ranges"] == {"softmaxes": [entry]}


def test_pipelines() -> None:
    assert_pipelines(NpuSoftmaxRanges, on=("ethos-u55-128", "ethos-u85-256"), off=("ethos-u55-128-a16w8", "cortex-m55"))
