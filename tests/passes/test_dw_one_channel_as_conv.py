"""emlkit/passes/dw_one_channel_as_conv.py: a depthwise convolution of a one-channel input becomes a
convolution with OHWI weights at compile time, with the same integer results."""

from __future__ import annotations

import json

import pytest
import torch

# the passes package first: it avoids a circular import inside the wheel and registers cortex_m::
import executorch.backends.cortex_m.passes  # noqa: F401

from emlkit.passes.dw_one_channel_as_conv import DepthwiseOneChannelAsConv
from pass_graphs import assert_pipelines


@pytest.mark.parametrize("pad,stride,dil", [((0, 0), (1, 1), (1, 1)), ((5, 1), (2, 2), (1, 1)),
                                            ((2, 3), (1, 2), (1, 1))])
def test_reference_ops_agree(pad: tuple[int, int], stride: tuple[int, int], dil: tuple[int, int]) -> None:
    """The rewrite's premise, checked on ExecuTorch's own references: depthwise with in_c 1 and depth
    multiplier OC on 1HWO weights == convolution on the same weights permuted to OHWI, bit for bit
    (odd sizes, padding, strides, per-channel requantization; torch has no int32 dilated convolution)."""
    g = torch.Generator().manual_seed(7)
    oc, kh, kw = 12, 5, 3
    x = torch.randint(-128, 128, (1, 1, 13, 7), dtype=torch.int8, generator=g).to(memory_format=torch.channels_last)
    w = torch.randint(-127, 128, (1, kh, kw, oc), dtype=torch.int8, generator=g)
    b = torch.randint(-5000, 5000, (oc,), dtype=torch.int32, generator=g)
    mult = torch.randint(1 << 29, 1 << 31 - 1, (oc,), dtype=torch.int32, generator=g)
    shift = torch.randint(-9, -5, (oc,), dtype=torch.int32, generator=g)
    scratch = torch.empty(0, dtype=torch.uint8)
    dw = torch.ops.cortex_m.quantized_depthwise_conv2d(x, w, b, list(stride), list(pad), list(dil), oc, 17, -3,
                                                       mult, shift, -128, 127, scratch)
    conv = torch.ops.cortex_m.quantized_conv2d(x, w.permute(3, 1, 2, 0).contiguous(), b, list(stride), list(pad),
                                               list(dil), 17, -3, mult, shift, -128, 127, scratch)
    assert dw.shape == conv.shape and torch.equal(dw, conv)
    # and the wrong permutation would not pass: the test can fail
    wrong = torch.ops.cortex_m.quantized_conv2d(x, w.permute(3, 2, 1, 0).contiguous().reshape(oc, kh, kw, 1), b,
                                                list(stride), list(pad), list(dil), 17, -3, mult, shift, -128, 127,
                                                scratch)
    assert not torch.equal(dw, wrong)


def test_ds_cnn_first_layer_rewritten(compiled) -> None:
    """mlperf_kws_dscnn's 10x4 first layer (one MFCC channel, depth multiplier 64 after ExecuTorch's
    lowering) is a convolution in the program: no kernel transposes weights per call any more."""
    res = compiled("mlperf_kws_dscnn", "cortex-m55")
    report = json.loads(res.report_path.read_text())
    assert report["dw_one_channel_as_conv"]["rewritten_convolutions"] == 1
    kernels = report["kernel_scratch"]["kernels"]
    assert not any(k.startswith("dw_as_conv") for k in kernels), kernels
    assert "cortex_m::quantized_conv2d" in report["ops"]


def test_portable_cores_keep_the_depthwise(compiled) -> None:
    """On the M3 (portable C kernels) the depthwise loop is the cheaper one: no rewrite there."""
    report = json.loads(compiled("mlperf_kws_dscnn", "cortex-m3").report_path.read_text())
    assert report["dw_one_channel_as_conv"]["rewritten_convolutions"] == 0
    assert any(k.startswith("dw_as_conv") for k in report["kernel_scratch"]["kernels"])


def test_pipelines() -> None:
    assert_pipelines(DepthwiseOneChannelAsConv, on=("cortex-m55", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m85"),
                     off=("cortex-m0plus", "cortex-m3", "ethos-u55-128"))
