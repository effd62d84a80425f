"""Host references of dilated cortex_m:: convolutions, through ExecuTorch's own reference and public API only.

ExecuTorch's Python reference of cortex_m::quantized_conv2d (and the depthwise and NHWC forms) accumulates
with torch's F.conv2d on int32 tensors, which torch's CPU backend cannot do for dilated convolutions
("slow_conv_dilated<> not implemented for 'Int'"). `call` runs such a node as the same op with dilation 1
and the weights zero-dilated (tap (i, j) moved to (i*dh, j*dw), zeros between): every output sums the same
input x weight products (an inserted zero weight adds 0, whether it meets data or padding), so the integer
result is the one the dilated kernel and the firmware compute. Output size is unchanged: the zero-dilated
kernel spans dh*(kh-1)+1 rows, exactly the dilated one's extent.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

# By schema name: the lowered graph calls them as edge ops, a .pte's instructions as torch.ops. Every weight
# layout of these ops (OHWI, 1HWO) keeps the kernel's height and width at dims 1 and 2.
DILATED_CONVS = frozenset(f"cortex_m::quantized_{k}conv2d{v}" for k in ("", "depthwise_") for v in ("", "_nhwc"))
_WEIGHT, _DILATION = 1, 5     # schema positions, the same in all four


def zero_dilate(weight: torch.Tensor, dilation: Sequence[int]) -> torch.Tensor:
    """An [A, kh, kw, B] kernel spread to [A, dh*(kh-1)+1, dw*(kw-1)+1, B] with zeros between the taps."""
    dh, dw = int(dilation[0]), int(dilation[-1])
    a, kh, kw, b = weight.shape
    out = torch.zeros(a, dh * (kh - 1) + 1, dw * (kw - 1) + 1, b, dtype=weight.dtype)
    out[:, ::dh, ::dw, :] = weight
    return out


def call(target: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """target(*args, **kwargs), with a dilated integer convolution run undilated on a zero-dilated kernel."""
    schema = getattr(target, "_schema", None)
    if schema is not None and str(schema.name) in DILATED_CONVS and not kwargs and len(args) > _DILATION:
        dilation = list(args[_DILATION])
        if any(int(d) != 1 for d in dilation):
            a = list(args)
            a[_WEIGHT] = zero_dilate(args[_WEIGHT], dilation)
            a[_DILATION] = [1] * len(dilation)
            return target(*a)
    return target(*args, **kwargs)
