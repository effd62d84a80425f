"""Our own `emlkit::` operators: their schemas and Python references (the firmware kernels match them bit for bit).

- `emlkit::upsample_nearest2d(x, scale_h, scale_w)`: nearest upsampling of a 4-D tensor by integer
  factors, any dtype: out[n, c, h, w] = x[n, c, h // scale_h, w // scale_w], in x's memory format.
  torch's CPU kernel has no int8 channels-last nearest upsample, and the firmware implements
  this op (firmware/ops/emlkit_ops.c), so quantized programs use it in place of
  `aten::upsample_nearest2d` (aot/passes/int8_upsample.py).

Import this module before building or running a program that contains these ops.
"""

from __future__ import annotations

import torch
from torch.library import Library, impl, register_fake

_lib = Library("emlkit", "DEF")
_lib.define("upsample_nearest2d(Tensor x, int scale_h, int scale_w) -> Tensor")
_lib.define("upsample_nearest2d.out(Tensor x, int scale_h, int scale_w, *, Tensor(a!) out) -> Tensor(a!)")


def _memory_format(x: torch.Tensor) -> torch.memory_format:
    return torch.channels_last if x.dim() == 4 and not x.is_contiguous() and \
        x.is_contiguous(memory_format=torch.channels_last) else torch.contiguous_format


def upsample_nearest2d_reference(x: torch.Tensor, scale_h: int, scale_w: int) -> torch.Tensor:
    if x.dim() != 4 or scale_h < 1 or scale_w < 1:
        raise ValueError(f"emlkit::upsample_nearest2d takes a 4-D tensor and factors >= 1, got {x.dim()}-D, "
                         f"{scale_h}x{scale_w}")
    y = x.repeat_interleave(scale_h, dim=2).repeat_interleave(scale_w, dim=3)
    return y.contiguous(memory_format=_memory_format(x))


@impl(_lib, "upsample_nearest2d", "CompositeExplicitAutograd")  # type: ignore[misc]
def _upsample_impl(x: torch.Tensor, scale_h: int, scale_w: int) -> torch.Tensor:
    return upsample_nearest2d_reference(x, scale_h, scale_w)


@impl(_lib, "upsample_nearest2d.out", "CompositeExplicitAutograd")  # type: ignore[misc]
def _upsample_out_impl(x: torch.Tensor, scale_h: int, scale_w: int, *, out: torch.Tensor) -> torch.Tensor:
    out.copy_(upsample_nearest2d_reference(x, scale_h, scale_w))
    return out


@register_fake("emlkit::upsample_nearest2d")  # type: ignore[misc]
def _upsample_fake(x: torch.Tensor, scale_h: int, scale_w: int) -> torch.Tensor:
    n, c, h, w = x.shape
    return torch.empty((n, c, h * scale_h, w * scale_w), dtype=x.dtype, device=x.device,
                       memory_format=_memory_format(x))
