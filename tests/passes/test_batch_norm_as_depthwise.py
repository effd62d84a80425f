"""batch_norm_as_depthwise.py: a BatchNorm after no convolution becomes a 1x1 depthwise convolution, so the Cortex-M
program is all int8; one after a convolution is left for prepare_pt2e to fold."""

from __future__ import annotations

import torch

from emlkit.passes.batch_norm_as_depthwise import BatchNormAsDepthwise
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class AfterPrelu(torch.nn.Module):
    def __init__(self, conv_bn: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.act, self.bn = torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.PReLU(6), torch.nn.BatchNorm2d(6)
        self.conv_bn = conv_bn
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 1.5), self.bn.bias.uniform_(-0.5, 0.5)
            self.bn.running_mean.uniform_(-0.5, 0.5), self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.conv_bn:
            return self.act(self.bn(self.conv(x)))
        return self.bn(self.act(self.conv(x)))


def test_batch_norm_after_prelu_is_int8() -> None:
    from emlkit import reference

    m, x = AfterPrelu().eval(), torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    low, opts = lowered(m, x, "cortex-m55")
    assert len(installed(opts, BatchNormAsDepthwise).report()["as_depthwise"]) == 1
    ops = program_ops(low)
    assert any("quantized_depthwise_conv2d" in o for o in ops) and not any("batch_norm" in o for o in ops), ops
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    (y,) = reference.run_lowered(low.edge, (x,))
    with torch.no_grad():
        want = m(x)
    snr = 10 * torch.log10(want.pow(2).mean() / (y - want).pow(2).mean())
    assert snr > 30, float(snr)


def test_batch_norm_after_a_conv_is_left_to_the_fold() -> None:
    m, x = AfterPrelu(conv_bn=True).eval(), torch.randn(1, 3, 8, 8)
    low, opts = lowered(m, x, "cortex-m55")
    assert installed(opts, BatchNormAsDepthwise).report()["as_depthwise"] == []
    assert not any("depthwise" in o for o in program_ops(low))


def test_pipelines() -> None:
    assert_pipelines(BatchNormAsDepthwise, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
