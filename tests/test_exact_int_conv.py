"""emlkit/exact_int_conv.py: a dilated cortex_m:: convolution computed undilated on zero-dilated weights gives the
integer sums of the dilated one (checked exactly in float64, where torch has a dilated CPU kernel), and the op
itself runs through ExecuTorch's own reference where torch's int32 dilated conv would fail."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import executorch.backends.cortex_m.passes  # noqa: F401  (registers torch.ops.cortex_m)
from emlkit import exact_int_conv


@pytest.mark.parametrize("dilation, padding, stride, groups", [((2, 2), (2, 2), (1, 1), 1), ((3, 2), (3, 1), (2, 1), 1),
                                                                ((2, 3), (0, 3), (1, 2), 4)])
def test_zero_dilated_kernel_gives_the_dilated_sums(dilation: tuple[int, int], padding: tuple[int, int],
                                                    stride: tuple[int, int], groups: int) -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-128, 128, (1, 4, 13, 11), generator=g).double() + 7   # an input offset, as the reference adds
    w_ohwi = torch.randint(-128, 128, (8, 3, 3, 4 // groups), generator=g)
    want = F.conv2d(x, w_ohwi.permute(0, 3, 1, 2).double(), None, stride, padding, dilation, groups)
    wide = exact_int_conv.zero_dilate(w_ohwi, dilation)
    assert wide.shape == (8, 2 * dilation[0] + 1, 2 * dilation[1] + 1, 4 // groups)
    got = F.conv2d(x, wide.permute(0, 3, 1, 2).double(), None, stride, padding, 1, groups)
    assert torch.equal(got, want)


def test_dilated_quantized_conv_runs_on_executorch_reference() -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randint(-128, 128, (1, 4, 9, 9), generator=g, dtype=torch.int8).to(memory_format=torch.channels_last)
    w = torch.randint(-127, 128, (8, 3, 3, 4), generator=g, dtype=torch.int8)
    mult, shift = torch.full((8,), 1 << 30, dtype=torch.int32), torch.full((8,), -8, dtype=torch.int32)
    args = [x, w, torch.zeros(8, dtype=torch.int32), [1, 1], [2, 2], [2, 2], 3, -1, mult, shift, -128, 127,
            torch.zeros(64, dtype=torch.int8)]
    op = torch.ops.cortex_m.quantized_conv2d.default
    with pytest.raises(Exception, match="slow_conv_dilated"):
        op(*args)                                  # why the module exists: no int32 dilated conv on the CPU
    got = exact_int_conv.call(op, args, {})
    undilated = list(args)
    undilated[1], undilated[5] = exact_int_conv.zero_dilate(w, [2, 2]), [1, 1]
    assert torch.equal(got, op(*undilated)) and got.shape == (1, 8, 9, 9)
