"""Our own `emlkit::` operators: their schemas and Python references (the firmware kernels match them bit for bit).

- `emlkit::upsample_nearest2d(x, scale_h, scale_w)`: nearest upsampling of a 4-D tensor by integer
  factors, any dtype: out[n, c, h, w] = x[n, c, h // scale_h, w // scale_w], in x's memory format.
  torch's CPU kernel has no int8 channels-last nearest upsample, and the firmware implements
  this op (firmware/ops/emlkit_ops.c), so quantized programs use it in place of
  `aten::upsample_nearest2d` (aot/passes/int8_upsample.py).
- `emlkit::quantized_layer_norm(x, gain, bias, eps_term, shift, out_zero_point)`: int8 layer norm over
  the last dim in integer arithmetic (int32/int64 sums, an integer square root); see below.
  aot/passes/int8_layer_norm.py replaces `dequantize -> native_layer_norm -> quantize` with it.

Import this module before building or running a program that contains these ops.
"""

from __future__ import annotations

import math

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


# ---------------------------------------------------------------- quantized_layer_norm
# int8 layer norm over the last dim, integer arithmetic only (the firmware computes the same steps):
#   per row of N codes q: s = sum q, ss = sum q^2 (the input zero point cancels out),
#   d_i = N * q_i - s = N * (q_i - mean), S = N * ss - s^2 + eps_term = N^2 * (var + eps / scale_in^2),
#   so d_i / sqrt(S) is the normalised value. 1 / sqrt(S) comes from an integer square root of S
#   scaled to 61-62 bits (k = (62 - bitlen(S)) // 2, t = isqrt(S << 2k) in [2^30, 2^31)) and one
#   division inv = 2^62 // t: n_i = round(d_i * inv / 2^(46 - k)) is d_i / sqrt(S) in Q16.
#   Per channel j: gain_j = round(gamma_j / scale_out * 2^shift), bias_j = round(beta_j / scale_out * 2^shift)
#   (int32), out = clamp(round((n_i * gain_j + bias_j * 2^16) / 2^(16 + shift)) + out_zero_point, -128, 127),
#   rounding half up (add half, arithmetic shift right).
_lib.define("quantized_layer_norm(Tensor x, Tensor gain, Tensor bias, int eps_term, int shift, int out_zero_point) "
            "-> Tensor")
_lib.define("quantized_layer_norm.out(Tensor x, Tensor gain, Tensor bias, int eps_term, int shift, "
            "int out_zero_point, *, Tensor(a!) out) -> Tensor(a!)")


def layer_norm_row_reciprocal(s_total: int) -> tuple[int, int]:
    """(inv, right shift) with d * inv >> shift = d / sqrt(S) in Q16 (before rounding); S >= 1."""
    k = (62 - s_total.bit_length()) // 2
    t = math.isqrt(s_total << (2 * k))
    return (1 << 62) // t, 46 - k


def quantized_layer_norm_reference(x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps_term: int,
                                   shift: int, out_zero_point: int) -> torch.Tensor:
    n = x.shape[-1]
    if gain.numel() != n or bias.numel() != n or eps_term < 1 or not 0 <= shift <= 30:
        raise ValueError("emlkit::quantized_layer_norm: gain/bias must have the last dim's size, eps_term >= 1, "
                         "0 <= shift <= 30")
    q = x.reshape(-1, n).to(torch.int64)
    s = q.sum(dim=1)
    ss = (q * q).sum(dim=1)
    total = n * ss - s * s + eps_term
    recip = [layer_norm_row_reciprocal(int(v)) for v in total.tolist()]
    inv = torch.tensor([r[0] for r in recip], dtype=torch.int64).unsqueeze(1)
    sh = torch.tensor([r[1] for r in recip], dtype=torch.int64).unsqueeze(1)
    d = n * q - s.unsqueeze(1)
    norm = (d * inv + (1 << (sh - 1))) >> sh
    acc = norm * gain.to(torch.int64).reshape(1, n) + (bias.to(torch.int64).reshape(1, n) << 16)
    out = ((acc + (1 << (15 + shift))) >> (16 + shift)) + out_zero_point
    return out.clamp(-128, 127).to(torch.int8).reshape(x.shape)


@impl(_lib, "quantized_layer_norm", "CompositeExplicitAutograd")  # type: ignore[misc]
def _layer_norm_impl(x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps_term: int, shift: int,
                     out_zero_point: int) -> torch.Tensor:
    return quantized_layer_norm_reference(x, gain, bias, eps_term, shift, out_zero_point)


@impl(_lib, "quantized_layer_norm.out", "CompositeExplicitAutograd")  # type: ignore[misc]
def _layer_norm_out_impl(x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps_term: int, shift: int,
                         out_zero_point: int, *, out: torch.Tensor) -> torch.Tensor:
    out.copy_(quantized_layer_norm_reference(x, gain, bias, eps_term, shift, out_zero_point))
    return out


@register_fake("emlkit::quantized_layer_norm")  # type: ignore[misc]
def _layer_norm_fake(x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps_term: int, shift: int,
                     out_zero_point: int) -> torch.Tensor:
    return torch.empty_like(x, dtype=torch.int8)
