"""Our own quantized operators (`emlkit::`), for semantics the `cortex_m::` op set lacks.

Each op is defined here with its reference implementation, registered through
torch.library. The reference is integer arithmetic only, so the firmware
kernel (firmware/kernels/emlkit_*.c) can match it bit for bit. Importing this
module registers the ops; the passes that emit them import it.

- `emlkit::softmax(input, exp_table, dim, output_zero_point, output_multiplier, output_shift)`:
  int8 softmax whose output scale and zero point are free (CMSIS-NN's and
  `cortex_m::softmax` are fixed at 1/256, -128). Along `dim`:
      d_j = max(x) - x_j                        (0..255, input zero point cancels)
      e_j = exp_table[d_j]                      (int32, round(2^22 * exp(-d * s_in)))
      s   = sum_j e_j                           (int64)
      p_j = ((e_j << 31) + s) // (2 s)          (probability in Q30, rounded half up)
      y_j = clamp(((p_j * M + 2^(T-1)) >> T) + zp_out, -128, 127)
  with M in [2^30, 2^31) and 1 <= T <= 62 such that M / 2^T = 1 / (s_out * 2^30).
- `emlkit::quantized_avg_pool2d(input, kernel_size, stride, input_zero_point,
  output_zero_point, multiplier, shift)`: int8 average pool (no padding, no
  ceil mode, so every window has k_h * k_w taps) whose output has its own
  qparams (`cortex_m::quantized_avg_pool2d` keeps its input's):
      sum = sum over the window of (x - zp_in)  (int64)
      y   = clamp(((sum * M + 2^(T-1)) >> T) + zp_out, -128, 127)
  with M / 2^T = s_in / (s_out * k_h * k_w). Logical NCHW, any memory format
  (the output takes the input's).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch.library import Library, impl, register_fake

EXP_ONE_BITS = 22        # exp_table[0] = 2^22: 1/2^22 is far below one output step
PROB_BITS = 30           # p_j in Q30

lib = Library("emlkit", "DEF")

lib.define("softmax(Tensor input, Tensor exp_table, int dim, int output_zero_point, int output_multiplier, "
           "int output_shift) -> Tensor")
lib.define("softmax.out(Tensor input, Tensor exp_table, int dim, int output_zero_point, int output_multiplier, "
           "int output_shift, *, Tensor(a!) out) -> Tensor(a!)")
lib.define("quantized_avg_pool2d(Tensor input, int[] kernel_size, int[] stride, int input_zero_point, "
           "int output_zero_point, int multiplier, int shift) -> Tensor")
lib.define("quantized_avg_pool2d.out(Tensor input, int[] kernel_size, int[] stride, int input_zero_point, "
           "int output_zero_point, int multiplier, int shift, *, Tensor(a!) out) -> Tensor(a!)")


def multiplier_shift(real: float) -> tuple[int, int]:
    """(M, T) with M in [2^30, 2^31) and M / 2^T the closest such fraction to `real` (> 0)."""
    if not (real > 0.0 and math.isfinite(real)):
        raise ValueError(f"requantization factor {real} is not a positive finite number")
    mant, exp = math.frexp(real)          # real = mant * 2^exp, mant in [0.5, 1)
    m = round(mant * (1 << 31))
    if m == 1 << 31:
        m, exp = 1 << 30, exp + 1
    return m, 31 - exp


def softmax_exp_table(input_scale: float) -> torch.Tensor:
    """exp_table[d] = round(2^22 * exp(-d * input_scale)) for d = 0..255 (float64 on the host)."""
    d = torch.arange(256, dtype=torch.float64)
    return torch.round(torch.exp(-d * input_scale) * (1 << EXP_ONE_BITS)).to(torch.int32)


def softmax_output_requant(output_scale: float) -> tuple[int, int]:
    return multiplier_shift(1.0 / (output_scale * (1 << PROB_BITS)))


def _requant(v: torch.Tensor, multiplier: int, shift: int, zp: int) -> torch.Tensor:
    # int64 throughout; >> is an arithmetic (floor) shift, so ties round up, as in the C kernels.
    y = ((v * multiplier + (1 << (shift - 1))) >> shift) + zp
    return y.clamp(-128, 127).to(torch.int8)


def _check_requant(op: str, multiplier: int, shift: int) -> None:
    if not (1 << 30 <= multiplier < 1 << 31) or not 1 <= shift <= 62:
        raise ValueError(f"{op}: multiplier {multiplier} must be in [2^30, 2^31) and shift {shift} in [1, 62]")


@register_fake("emlkit::softmax")
def _softmax_meta(input: torch.Tensor, exp_table: torch.Tensor, dim: int, output_zero_point: int,
                  output_multiplier: int, output_shift: int) -> torch.Tensor:
    return torch.empty_like(input, dtype=torch.int8)


@impl(lib, "softmax", "CompositeExplicitAutograd")
def _softmax_impl(input: torch.Tensor, exp_table: torch.Tensor, dim: int, output_zero_point: int,
                  output_multiplier: int, output_shift: int) -> torch.Tensor:
    if input.dtype != torch.int8 or exp_table.dtype != torch.int32 or exp_table.numel() != 256:
        raise TypeError("emlkit.softmax: expected int8 input and a 256-entry int32 exp_table")
    _check_requant("emlkit.softmax", output_multiplier, output_shift)
    x = input.to(torch.int64)
    d = x.amax(dim=dim, keepdim=True) - x
    e = exp_table.to(torch.int64)[d]
    s = e.sum(dim=dim, keepdim=True)
    p = ((e << 31) + s) // (2 * s)
    return _requant(p, output_multiplier, output_shift, output_zero_point).contiguous(
        memory_format=_memory_format(input))


def _memory_format(t: torch.Tensor) -> torch.memory_format:
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        return torch.channels_last
    return torch.contiguous_format


def _pool_out(n: int, k: int, s: int) -> int:
    return (n - k) // s + 1


@register_fake("emlkit::quantized_avg_pool2d")
def _avg_pool_meta(input: torch.Tensor, kernel_size: Sequence[int], stride: Sequence[int], input_zero_point: int,
                   output_zero_point: int, multiplier: int, shift: int) -> torch.Tensor:
    n, c, h, w = input.shape
    shape = (n, c, _pool_out(h, kernel_size[0], stride[0]), _pool_out(w, kernel_size[1], stride[1]))
    return torch.empty(shape, dtype=torch.int8, device=input.device, memory_format=_memory_format(input))


@impl(lib, "quantized_avg_pool2d", "CompositeExplicitAutograd")
def _avg_pool_impl(input: torch.Tensor, kernel_size: Sequence[int], stride: Sequence[int], input_zero_point: int,
                   output_zero_point: int, multiplier: int, shift: int) -> torch.Tensor:
    if input.dtype != torch.int8 or input.dim() != 4:
        raise TypeError("emlkit.quantized_avg_pool2d: expected a 4-D int8 input")
    _check_requant("emlkit.quantized_avg_pool2d", multiplier, shift)
    k, s = tuple(kernel_size), tuple(stride)
    # Window sums of integers below 2^53 are exact in float64.
    sums = F.avg_pool2d(input.to(torch.float64) - input_zero_point, k, s, divisor_override=1)
    out = _requant(sums.round().to(torch.int64), multiplier, shift, output_zero_point)
    return out.contiguous(memory_format=_memory_format(input))
