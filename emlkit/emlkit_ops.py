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
- `emlkit::masked_softmax(input, mask, exp_table, dim, output_zero_point, output_multiplier, output_shift)`:
  emlkit::softmax over the elements a bool mask (broadcast to the input) leaves in; a left-out element, and every
  element of a row with nothing left in, is the code of probability 0 (below).
- `emlkit::log_softmax(input, exp_table, dim, input_log2_scale, output_zero_point, output_multiplier,
  output_shift)`: int8 log_softmax with free output qparams, softmax's exp table and an integer log2 (below).
- `emlkit::quantized_avg_pool2d(input, kernel_size, stride, input_zero_point,
  output_zero_point, multiplier, shift)`: int8 average pool (no padding, no
  ceil mode, so every window has k_h * k_w taps) whose output has its own
  qparams (`cortex_m::quantized_avg_pool2d` keeps its input's):
      sum = sum over the window of (x - zp_in)  (int64)
      y   = clamp(((sum * M + 2^(T-1)) >> T) + zp_out, -128, 127)
  with M / 2^T = s_in / (s_out * k_h * k_w). Logical NCHW, any memory format
  (the output takes the input's).
- `emlkit::upsample_nearest2d(x, scale_h, scale_w)`: nearest upsampling of a 4-D tensor by integer
  factors, any dtype: out[n, c, h, w] = x[n, c, h // scale_h, w // scale_w], in x's memory format.
  torch's CPU kernel has no int8 channels-last nearest upsample, and the firmware implements
  this op (firmware/ops/emlkit_ops.c), so quantized programs use it in place of
  `aten::upsample_nearest2d` (emlkit/passes/int8_upsample.py).
- `emlkit::upsample_nearest2d_index(x, rows, cols)`: nearest resizing of a 4-D tensor by any factor, any
  dtype: out[n, c, i, j] = x[n, c, rows[i], cols[j]], in x's memory format. The index tables are what
  torch's own kernel picks (its float index rule, which integer arithmetic does not reproduce for
  non-integer factors), computed on the host by emlkit/passes/int8_upsample.py.
- `emlkit::upsample_bilinear2d(x, rows, cols, input_zero_point, output_zero_point, multiplier, shift)`: int8
  bilinear resize of a 4-D tensor to any size with its own output qparams; rows (cols) holds one int32 triple
  (i0, i1, w) per output row (column): the two input rows read and the weight of the second in units of 2^-11:
      q   = x - zp_in
      acc = (2^11 - wy) * ((2^11 - wx) * q[y0, x0] + wx * q[y0, x1]) + wy * ((2^11 - wx) * q[y1, x0] + wx * q[y1, x1])
      y   = clamp(((acc * M + 2^(T-1)) >> T) + zp_out, -128, 127)      (round half up; |acc| <= 255 * 2^22)
  with M / 2^T = s_in / (s_out * 2^22). emlkit/passes/emlkit_bilinear.py makes the tables from torch's own
  source positions (its float64 kernel on a ramp), w = floor(lambda * 2^11 + 1/2), and replaces
  `dequantize -> upsample_bilinear2d -> quantize` with it.
- `emlkit::quantized_layer_norm(x, gain, bias, eps_term, shift, out_zero_point)`: int8 layer norm over
  the last dim in integer arithmetic (int32/int64 sums, an integer square root); see below.
  emlkit/passes/int8_layer_norm.py replaces `dequantize -> native_layer_norm -> quantize` with it.
- `emlkit::prelu(x, neg_requant, input_zero_point, output_zero_point, multiplier, shift)`: int8 PReLU with one slope
  per channel (dim 1): the positive side requantized by M / 2^T, the negative side by a signed (M_c, T_c) per
  channel (emlkit/passes/emlkit_prelu.py).
- `emlkit::adaptive_avg_pool2d(x, rows, cols, requant, input_zero_point, output_zero_point)`: int8 average over
  PyTorch's adaptive windows (any output size), one requantization per output position
  (emlkit/passes/emlkit_adaptive_avg_pool.py).
- `emlkit::floor_divide(a, b, ...)`: the exact floor of the quotient of two int8 tensors' values (broadcast; a
  scalar divisor is a one-element b; scales as integer mantissas), requantized once
  (emlkit/passes/emlkit_floor_divide.py).
- `emlkit::embedding_bag(weight, indices, offsets, mode, ...)`: sum (per-sample weights too), mean or max of int8
  table rows per bag (emlkit/passes/emlkit_embedding_bag.py).
Each one's exact arithmetic is written beside its definition below.

Import this module before building or running a program that contains these ops.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch.library import Library, impl, register_fake

_lib = Library("emlkit", "DEF")
lib = _lib  # one library per namespace: every emlkit:: op below is defined in it
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


_lib.define("upsample_nearest2d_index(Tensor x, int[] rows, int[] cols) -> Tensor")
_lib.define("upsample_nearest2d_index.out(Tensor x, int[] rows, int[] cols, *, Tensor(a!) out) -> Tensor(a!)")


def upsample_nearest2d_index_reference(x: torch.Tensor, rows: Sequence[int], cols: Sequence[int]) -> torch.Tensor:
    if x.dim() != 4 or not rows or not cols:
        raise ValueError(f"emlkit::upsample_nearest2d_index takes a 4-D tensor and non-empty index lists, got "
                         f"{x.dim()}-D, {len(rows)} rows, {len(cols)} cols")
    h, w = x.shape[2], x.shape[3]
    if not all(0 <= r < h for r in rows) or not all(0 <= c < w for c in cols):
        raise ValueError(f"emlkit::upsample_nearest2d_index: an index is outside the {h}x{w} input")
    y = x.index_select(2, torch.tensor(list(rows), dtype=torch.long)).index_select(
        3, torch.tensor(list(cols), dtype=torch.long))
    return y.contiguous(memory_format=_memory_format(x))


@impl(_lib, "upsample_nearest2d_index", "CompositeExplicitAutograd")  # type: ignore[misc]
def _upsample_index_impl(x: torch.Tensor, rows: list[int], cols: list[int]) -> torch.Tensor:
    return upsample_nearest2d_index_reference(x, rows, cols)


@impl(_lib, "upsample_nearest2d_index.out", "CompositeExplicitAutograd")  # type: ignore[misc]
def _upsample_index_out_impl(x: torch.Tensor, rows: list[int], cols: list[int], *, out: torch.Tensor) -> torch.Tensor:
    out.copy_(upsample_nearest2d_index_reference(x, rows, cols))
    return out


@register_fake("emlkit::upsample_nearest2d_index")  # type: ignore[misc]
def _upsample_index_fake(x: torch.Tensor, rows: list[int], cols: list[int]) -> torch.Tensor:
    return torch.empty((x.shape[0], x.shape[1], len(rows), len(cols)), dtype=x.dtype, device=x.device,
                       memory_format=_memory_format(x))


# ---------------------------------------------------------------- quantized_layer_norm
# int8 layer norm over rows of N = gain.numel() codes consecutive in memory (x's dim order): the last dim
# of a contiguous tensor, or the normalised dims when they are x's innermost in memory (LayerNorm over
# [T, C] of a contiguous (B, T, C), over [C, H, W] of a channels-last map), with gain/bias in that memory
# order. Integer arithmetic only (the firmware computes the same steps):
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
    n = gain.numel()
    order = list(x.dim_order())
    if not innermost_hold(x, n) or bias.numel() != n or eps_term < 1 or not 0 <= shift <= 30:
        raise ValueError("emlkit::quantized_layer_norm: gain/bias must have the size of x's innermost dims in memory, "
                         "eps_term >= 1, 0 <= shift <= 30")
    mem = x.permute(order)                    # memory order: rows of n consecutive codes
    q = mem.reshape(-1, n).to(torch.int64)
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
    back = [order.index(d) for d in range(x.dim())]
    return out.clamp(-128, 127).to(torch.int8).reshape(mem.shape).permute(back)


def innermost_hold(x: torch.Tensor, n: int) -> bool:
    """Whether some of x's innermost dims in memory (its dim order) hold exactly n elements: the rows
    emlkit::quantized_layer_norm normalises (firmware/ops/emlkit_ops.c checks the same at load)."""
    size = 1
    for d in reversed(list(x.dim_order())):
        if size >= n:
            break
        size *= x.shape[d]
    return n > 0 and size == n


@impl(_lib, "quantized_layer_norm", "CompositeExplicitAutograd")  # type: ignore[misc]
def _layer_norm_impl(x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps_term: int, shift: int,
                     out_zero_point: int) -> torch.Tensor:
    return quantized_layer_norm_reference(x, gain, bias, eps_term, shift, out_zero_point)


@impl(_lib, "quantized_layer_norm.out", "CompositeExplicitAutograd")  # type: ignore[misc]
def _layer_norm_out_impl(x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps_term: int, shift: int,
                         out_zero_point: int, *, out: torch.Tensor) -> torch.Tensor:
    out.copy_(quantized_layer_norm_reference(x, gain, bias, eps_term, shift, out_zero_point))
    return out


def _int8_like(x: torch.Tensor, *_args: object) -> torch.Tensor:
    """The fake (shape) implementation of the ops whose int8 output has their first argument's shape and layout."""
    return torch.empty_like(x, dtype=torch.int8)


register_fake("emlkit::quantized_layer_norm")(_int8_like)  # type: ignore[misc]


# ---- softmax and average pool with free output qparams

EXP_ONE_BITS = 22        # exp_table[0] = 2^22: 1/2^22 is far below one output step
PROB_BITS = 30           # p_j in Q30


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


register_fake("emlkit::softmax")(_int8_like)  # type: ignore[misc]


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


# ---- masked softmax (attention whose mask is computed from the model's inputs)
# emlkit::masked_softmax(input, mask, exp_table, dim, output_zero_point, output_multiplier, output_shift): int8
# softmax along `dim` with some elements left out. `mask` is a bool tensor broadcastable to the input (not the other
# way: the output has the input's shape and memory format); True marks an element left out (the convention of
# masked_fill(mask, -inf) and key_padding_mask). Along `dim`, over the kept elements K of a row only:
#     d_j = max_K(x) - x_j, e_j = exp_table[d_j], s = sum_K e_j, p_j = ((e_j << 31) + s) // (2 s)
# (emlkit::softmax's steps, so a row with nothing left out gives emlkit::softmax's codes bit for bit); a left-out
# element has p_j = 0, the probability exp(-inf) gives in torch. A row whose every element is left out (NaN from
# torch.softmax, which int8 cannot hold) has p_j = 0 everywhere: all its outputs are the code of probability 0,
# clamp(output_zero_point), so an attention query with no key left gives zeros, as torch's
# scaled_dot_product_attention does. y_j = clamp(((p_j * M + 2^(T-1)) >> T) + zp_out, -128, 127), as emlkit::softmax.
MASKED_SOFTMAX_MAX_DIMS = 6  # the kernel's row walk

lib.define("masked_softmax(Tensor input, Tensor mask, Tensor exp_table, int dim, int output_zero_point, "
           "int output_multiplier, int output_shift) -> Tensor")
lib.define("masked_softmax.out(Tensor input, Tensor mask, Tensor exp_table, int dim, int output_zero_point, "
           "int output_multiplier, int output_shift, *, Tensor(a!) out) -> Tensor(a!)")


def _check_masked_softmax(input: torch.Tensor, mask: torch.Tensor, exp_table: torch.Tensor, dim: int) -> int:
    """The reduced dim (non-negative); TypeError/ValueError naming what is wrong (the adapter's checks)."""
    op = "emlkit::masked_softmax"
    if input.dtype != torch.int8 or mask.dtype != torch.bool or exp_table.dtype != torch.int32 \
            or exp_table.numel() != 256:
        raise TypeError(f"{op}: expected an int8 input, a bool mask and a 256-entry int32 exp_table, got "
                        f"{input.dtype}, {mask.dtype}, {exp_table.dtype} [{exp_table.numel()}]")
    rank = input.dim()
    if not 1 <= rank <= MASKED_SOFTMAX_MAX_DIMS or not -rank <= dim < rank:
        raise ValueError(f"{op}: the input must have 1 to {MASKED_SOFTMAX_MAX_DIMS} dims and dim {dim} one of them, "
                         f"got {rank}-D")
    try:
        fits = mask.dim() <= rank and torch.broadcast_shapes(input.shape, mask.shape) == input.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"{op}: mask of shape {list(mask.shape)} does not broadcast to the input's "
                         f"{list(input.shape)}")
    return dim % rank


def masked_softmax_reference(input: torch.Tensor, mask: torch.Tensor, exp_table: torch.Tensor, dim: int,
                             output_zero_point: int, output_multiplier: int, output_shift: int) -> torch.Tensor:
    """The op's definition (above), in int64."""
    dim = _check_masked_softmax(input, mask, exp_table, dim)
    _check_requant("emlkit::masked_softmax", output_multiplier, output_shift)
    x = input.to(torch.int64)
    keep = ~mask.expand(input.shape)
    m = torch.where(keep, x, torch.full_like(x, -129)).amax(dim=dim, keepdim=True)
    d = torch.where(keep, m - x, torch.zeros_like(x))           # 0..255 on kept elements
    e = torch.where(keep, exp_table.to(torch.int64)[d], torch.zeros_like(x))
    s = e.sum(dim=dim, keepdim=True)
    s = torch.where(s == 0, torch.ones_like(s), s)               # a row with nothing kept: every p is 0
    p = ((e << 31) + s) // (2 * s)
    return _requant(p, output_multiplier, output_shift, output_zero_point).contiguous(
        memory_format=_memory_format(input))


@register_fake("emlkit::masked_softmax")
def _masked_softmax_fake(input: torch.Tensor, mask: torch.Tensor, exp_table: torch.Tensor, dim: int,
                         output_zero_point: int, output_multiplier: int, output_shift: int) -> torch.Tensor:
    _check_masked_softmax(input, mask, exp_table, dim)
    return torch.empty_like(input, dtype=torch.int8)


@impl(lib, "masked_softmax", "CompositeExplicitAutograd")
def _masked_softmax_impl(input: torch.Tensor, mask: torch.Tensor, exp_table: torch.Tensor, dim: int,
                         output_zero_point: int, output_multiplier: int, output_shift: int) -> torch.Tensor:
    return masked_softmax_reference(input, mask, exp_table, dim, output_zero_point, output_multiplier,
                                    output_shift)


@impl(lib, "masked_softmax.out", "CompositeExplicitAutograd")
def _masked_softmax_out_impl(input: torch.Tensor, mask: torch.Tensor, exp_table: torch.Tensor, dim: int,
                             output_zero_point: int, output_multiplier: int, output_shift: int, *,
                             out: torch.Tensor) -> torch.Tensor:
    out.copy_(masked_softmax_reference(input, mask, exp_table, dim, output_zero_point, output_multiplier,
                                       output_shift))
    return out


# The float form the attention rewrite (emlkit/passes/sdpa_as_matmuls.py) emits before quantization:
# `emlkit_float::masked_softmax(input, mask, dim)` is torch's softmax with the True elements of `mask` at -inf,
# except that a row with every element masked gives zeros (not NaN), as the int8 op and torch's SDPA. The quantizer
# hook own_output_qparams.py observes its input and output, and emlkit/passes/emlkit_softmax.py lowers
# `dequantize -> it -> quantize` to emlkit::masked_softmax. Its own namespace: it is a float op, which the program
# verifier must not take for one of the integer-only emlkit:: kernels; no firmware kernel runs it.
float_lib = Library("emlkit_float", "DEF")
float_lib.define("masked_softmax(Tensor input, Tensor mask, int dim) -> Tensor")


@impl(float_lib, "masked_softmax", "CompositeExplicitAutograd")
def _float_masked_softmax_impl(input: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    y = torch.softmax(input.masked_fill(mask, float("-inf")), dim)
    return torch.where(torch.isnan(y), torch.zeros_like(y), y)


@register_fake("emlkit_float::masked_softmax")
def _float_masked_softmax_fake(input: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.empty_like(input)


# ---- log_softmax with free output qparams
# emlkit::log_softmax(input, exp_table, dim, input_log2_scale, output_zero_point, output_multiplier, output_shift),
# along `dim`, integer only (the firmware computes the same steps):
#   d_j = max(x) - x_j                              (0..255, the input zero point cancels)
#   s   = sum_j exp_table[d_j]                      (int64; exp_table as softmax's, exp_table[0] = 2^22, so s >= 2^22)
#   l   = log2_q20(s) - 22 * 2^20                   (log2(s / 2^22) in Q20, >= 0; log2_q20 below)
#   a_j = d_j * K + l                               (-log_softmax_j / ln 2 in Q20; K = round(s_in / ln 2 * 2^20))
#   y_j = clamp(((-a_j * M + 2^(T-1)) >> T) + zp_out, -128, 127)     (M / 2^T = ln 2 / (s_out * 2^20))
# log2_q20(s): k = bitlen(s) - 1, m = s scaled to [2^30, 2^31) (shifted left, or right with truncation), then 20
# times m = (m * m) >> 30, each time the next fraction bit is 1 when m >= 2^31 (and m >>= 1): log2(s) * 2^20,
# truncated.
LOG_FRAC_BITS = 20
LOG_MAX_K = 1 << 23       # 255 * K + log2(2^16) * 2^20 < 2^31: a_j * M stays inside int64
LOG_MAX_LEN = 1 << 16

lib.define("log_softmax(Tensor input, Tensor exp_table, int dim, int input_log2_scale, int output_zero_point, "
           "int output_multiplier, int output_shift) -> Tensor")
lib.define("log_softmax.out(Tensor input, Tensor exp_table, int dim, int input_log2_scale, int output_zero_point, "
           "int output_multiplier, int output_shift, *, Tensor(a!) out) -> Tensor(a!)")


def log2_q20(s: int) -> int:
    """floor-ish log2(s) in Q20 for s >= 1, by repeated squaring of the normalised mantissa (as the C kernel)."""
    if s < 1:
        raise ValueError(f"log2_q20 takes s >= 1, got {s}")
    k = s.bit_length() - 1
    m = s << (30 - k) if k <= 30 else s >> (k - 30)
    frac = 0
    for _ in range(LOG_FRAC_BITS):
        m = (m * m) >> 30
        frac <<= 1
        if m >= 1 << 31:
            m >>= 1
            frac |= 1
    return (k << LOG_FRAC_BITS) + frac


def log_softmax_input_scale(input_scale: float) -> int:
    """K = round(s_in / ln 2 * 2^20): one input step in log2 units, Q20."""
    return round(input_scale / math.log(2.0) * (1 << LOG_FRAC_BITS))


def log_softmax_output_requant(output_scale: float) -> tuple[int, int]:
    return multiplier_shift(math.log(2.0) / (output_scale * (1 << LOG_FRAC_BITS)))


register_fake("emlkit::log_softmax")(_int8_like)  # type: ignore[misc]


def log_softmax_reference(input: torch.Tensor, exp_table: torch.Tensor, dim: int, input_log2_scale: int,
                          output_zero_point: int, output_multiplier: int, output_shift: int) -> torch.Tensor:
    if input.dtype != torch.int8 or exp_table.dtype != torch.int32 or exp_table.numel() != 256 \
            or int(exp_table[0]) != 1 << EXP_ONE_BITS:
        raise TypeError("emlkit::log_softmax: expected int8 input and a 256-entry int32 exp_table with "
                        "exp_table[0] = 2^22")
    if not 1 <= input_log2_scale <= LOG_MAX_K or input.dim() == 0 or input.shape[dim] > LOG_MAX_LEN:
        raise ValueError(f"emlkit::log_softmax: input_log2_scale {input_log2_scale} must be in [1, 2^23] and the "
                         f"reduced dim at most {LOG_MAX_LEN} long")
    _check_requant("emlkit::log_softmax", output_multiplier, output_shift)
    x = input.to(torch.int64)
    d = x.amax(dim=dim, keepdim=True) - x
    s = exp_table.to(torch.int64)[d].sum(dim=dim, keepdim=True)
    logs = torch.tensor([log2_q20(int(v)) for v in s.flatten().tolist()], dtype=torch.int64).reshape(s.shape)
    a = d * input_log2_scale + (logs - (EXP_ONE_BITS << LOG_FRAC_BITS))
    return _requant(-a, output_multiplier, output_shift, output_zero_point).contiguous(
        memory_format=_memory_format(input))


@impl(lib, "log_softmax", "CompositeExplicitAutograd")
def _log_softmax_impl(input: torch.Tensor, exp_table: torch.Tensor, dim: int, input_log2_scale: int,
                      output_zero_point: int, output_multiplier: int, output_shift: int) -> torch.Tensor:
    return log_softmax_reference(input, exp_table, dim, input_log2_scale, output_zero_point, output_multiplier,
                                 output_shift)


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


# ---------------------------------------------------------------- upsample_bilinear2d (int8, free output qparams)
BILINEAR_BITS = 11       # weights in units of 2^-11: |acc| <= 255 * 2^22 stays in int32 on the device
BILINEAR_ONE = 1 << BILINEAR_BITS

lib.define("upsample_bilinear2d(Tensor x, Tensor rows, Tensor cols, int input_zero_point, int output_zero_point, "
           "int multiplier, int shift) -> Tensor")
lib.define("upsample_bilinear2d.out(Tensor x, Tensor rows, Tensor cols, int input_zero_point, int output_zero_point, "
           "int multiplier, int shift, *, Tensor(a!) out) -> Tensor(a!)")


def _check_bilinear_table(name: str, t: torch.Tensor, size: int) -> None:
    if t.dtype != torch.int32 or t.dim() != 2 or t.shape[1] != 3:
        raise ValueError(f"emlkit::upsample_bilinear2d: {name} must be an int32 [n, 3] table, got {t.dtype} "
                         f"{list(t.shape)}")
    if t.numel() and (t[:, :2].min() < 0 or t[:, :2].max() >= size or t[:, 2].min() < 0
                      or t[:, 2].max() > BILINEAR_ONE):
        raise ValueError(f"emlkit::upsample_bilinear2d: {name} has an index outside [0, {size}) or a weight outside "
                         f"[0, {BILINEAR_ONE}]")


def upsample_bilinear2d_reference(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, input_zero_point: int,
                                  output_zero_point: int, multiplier: int, shift: int) -> torch.Tensor:
    """The op's definition (module docstring), in int64; the output takes x's memory format."""
    if x.dtype != torch.int8 or x.dim() != 4:
        raise TypeError("emlkit::upsample_bilinear2d: expected a 4-D int8 input")
    _check_requant("emlkit::upsample_bilinear2d", multiplier, shift)
    _check_bilinear_table("rows", rows, x.shape[2])
    _check_bilinear_table("cols", cols, x.shape[3])
    r, c = rows.to(torch.int64), cols.to(torch.int64)
    q = x.to(torch.int64) - input_zero_point
    wy, wx = r[:, 2].view(1, 1, -1, 1), c[:, 2].view(1, 1, 1, -1)
    tb = [q.index_select(2, r[:, k]) for k in (0, 1)]                            # [N, C, OH, W] each
    corner = [[t.index_select(3, c[:, k]) for k in (0, 1)] for t in tb]          # [N, C, OH, OW] each
    top = (BILINEAR_ONE - wx) * corner[0][0] + wx * corner[0][1]
    bot = (BILINEAR_ONE - wx) * corner[1][0] + wx * corner[1][1]
    acc = (BILINEAR_ONE - wy) * top + wy * bot
    return _requant(acc, multiplier, shift, output_zero_point).contiguous(memory_format=_memory_format(x))


@register_fake("emlkit::upsample_bilinear2d")
def _bilinear_meta(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, input_zero_point: int,
                   output_zero_point: int, multiplier: int, shift: int) -> torch.Tensor:
    return torch.empty((x.shape[0], x.shape[1], rows.shape[0], cols.shape[0]), dtype=torch.int8, device=x.device,
                       memory_format=_memory_format(x))


@impl(lib, "upsample_bilinear2d", "CompositeExplicitAutograd")
def _bilinear_impl(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, input_zero_point: int,
                   output_zero_point: int, multiplier: int, shift: int) -> torch.Tensor:
    return upsample_bilinear2d_reference(x, rows, cols, input_zero_point, output_zero_point, multiplier, shift)


@impl(lib, "upsample_bilinear2d.out", "CompositeExplicitAutograd")
def _bilinear_out_impl(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, input_zero_point: int,
                       output_zero_point: int, multiplier: int, shift: int, *, out: torch.Tensor) -> torch.Tensor:
    out.copy_(upsample_bilinear2d_reference(x, rows, cols, input_zero_point, output_zero_point, multiplier, shift))
    return out


# ---------------------------------------------------------------- rnn_hold (float; never in a program)
# `emlkit::lstm_hold` / `emlkit::gru_hold`: aten.lstm.input / aten.gru.input under another name, with the same schema
# and float result. Arm's quantizer (Ethos-U flow) unrolls every LSTM and GRU in its transform for annotation, before
# any hook can claim them; lstm_output_qparams.py renames the layers the int8 kernels take to these for that transform
# only and back after it, so they stay whole for emlkit_lstm.py to put on the CPU.
lib.define("lstm_hold(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout, "
           "bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)")
lib.define("gru_hold(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, "
           "bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)")


@impl(lib, "lstm_hold", "CompositeExplicitAutograd")
def _lstm_hold(input: torch.Tensor, hx: list[torch.Tensor], params: list[torch.Tensor], has_biases: bool,
               num_layers: int, dropout: float, train: bool, bidirectional: bool,
               batch_first: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y, h, c = torch.ops.aten.lstm.input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                                        batch_first)
    return y.clone(), h.clone(), c.clone()   # a custom op's outputs may not alias its inputs


@impl(lib, "gru_hold", "CompositeExplicitAutograd")
def _gru_hold(input: torch.Tensor, hx: torch.Tensor, params: list[torch.Tensor], has_biases: bool, num_layers: int,
              dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple[torch.Tensor, torch.Tensor]:
    y, h = torch.ops.aten.gru.input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                                    batch_first)
    return y.clone(), h.clone()


register_fake("emlkit::lstm_hold")(_lstm_hold)  # type: ignore[misc]
register_fake("emlkit::gru_hold")(_gru_hold)  # type: ignore[misc]


# ---------------------------------------------------------------- lstm (int8 in and out, int16 cell and gates)
# One unidirectional LSTM layer over int8 codes, torch's gate order (i, f, g, o), zero initial state. The
# numerics follow the scheme of CMSIS-NN's and TFLM's int8 LSTM (int8 weights and activations, gate
# pre-activations and cell state in int16, sigmoid/tanh on 16-bit inputs), written out here:
#   x: int8 [B, T, I] (batch_first) or [T, B, I]; y (the op's first output): int8 h codes in that layout.
#   h_{-1} = output_zero_point codes (real 0), c_{-1} = 0.
#   For every gate row r of W_ih [4H, I] and W_hh [4H, H] (int8, per-row scales s_wi[r], s_wh[r]):
#     ax = sum_k W_ih[r, k] * (x_k - zp_in),  ah = sum_k W_hh[r, k] * (h_k - zp_out)      (int32: I, H <= 2^14)
#     pre[r] = sat16(rq(ax, Mx[r], Tx[r]) + rq(ah, Mh[r], Th[r]) + bias[r])               (Q3.12)
#   with rq(v, M, T) = (v * M + 2^(T-1)) >> T, M / 2^T = s_x * s_wi[r] * 2^12 (resp. s_h * s_wh[r] * 2^12) and
#   bias[r] = round((b_ih + b_hh)[r] * 2^12) clamped to +-2^24 (int32, Q3.12).
#   i, f, o = lut(sigmoid table, pre), g = lut(tanh table, pre): Q0.15 (int16). lut(t, v): u = v + 32768,
#     j = u >> 7, e = u & 127, t[j] + (((t[j+1] - t[j]) * e + 64) >> 7): 513-entry tables over [-8, 8]
#     (tables[0] sigmoid, tables[1] tanh, round(f(x) * 2^15) clamped to [-32767, 32767]).
#   c (int16, K = cell_frac_bits fraction bits, 11 <= K <= 15):
#     c = sat16(((f * c) << (15 - K)) + i * g + 2^(29-K)) >> (30 - K))
#   tanh(c): v = sat16(c << (12 - K)) if K <= 12 else (c + 2^(K-13)) >> (K - 12); tc = lut(tanh table, v)
#   h code = clamp(((o * tc) * M + 2^(T-1)) >> T) + zp_out, -128, 127), M / 2^T = 2^-30 / s_h.
# The second output is the last cell state c (int16 [B, H], real c * 2^-K): the kernel's working state.
# state_bytes: 0, or lstm_state_bytes(B, H) in a streaming program (--streaming-state): the call keeps its last h
# codes and c in that many bytes of per-call runtime memory across executions and starts from them (from the zero
# state after load or eml_reset_state). lstm_reference's h0/c0 give that initial state on the host.
# h0, c0: None (the zero initial state), or both: a given initial state, h0 int8 h codes and c0 int16 cells in the
# cell format, each B * H elements (a model's (h0, c0) input, [1, B, H]); not with state_bytes.
LSTM_GATE_FRAC = 12       # gate pre-activations in Q3.12: [-8, 8), where sigmoid and tanh are within 2^-11 of 0/1
LSTM_TABLE_STEP = 7       # 2^7 input codes between table entries: 513 entries span the int16 range
LSTM_TABLE_LEN = (1 << (16 - LSTM_TABLE_STEP)) + 1
LSTM_MAX_BIAS = 1 << 24
LSTM_MAX_FEATURES = 1 << 14

lib.define("lstm(Tensor x, Tensor w_ih, Tensor w_hh, Tensor bias, Tensor requant, Tensor tables, int batch_first, "
           "int input_zero_point, int output_zero_point, int cell_frac_bits, int output_multiplier, "
           "int output_shift, int state_bytes=0, Tensor? h0=None, Tensor? c0=None) -> (Tensor, Tensor)")
lib.define("lstm.out(Tensor x, Tensor w_ih, Tensor w_hh, Tensor bias, Tensor requant, Tensor tables, int batch_first, "
           "int input_zero_point, int output_zero_point, int cell_frac_bits, int output_multiplier, "
           "int output_shift, int state_bytes=0, Tensor? h0=None, Tensor? c0=None, *, Tensor(a!) out, Tensor(b!) cell) "
           "-> (Tensor(a!), Tensor(b!))")
RNN_STATE_HEADER = 8      # the kept state's first word says whether it holds a state yet (zeroed: none)


def lstm_state_bytes(batch: int, hid: int) -> int:
    """A streaming emlkit::lstm call's state: the header, int16 c [B, H], int8 h codes [B, H]."""
    return RNN_STATE_HEADER + 3 * batch * hid


def gru_state_bytes(batch: int, hid: int) -> int:
    """A streaming emlkit::gru call's state: the header and int8 h codes [B, H]."""
    return RNN_STATE_HEADER + batch * hid


def check_state_bytes(op: str, state_bytes: int, want: int, what: str) -> None:
    """The firmware's prepare check of state_bytes, in its words (firmware/ops/emlkit_lstm_ops.c)."""
    if state_bytes not in (0, want):
        raise ValueError(f"{op}: state_bytes must be 0 or {what}")


LSTM_STATE_WHAT = "8 + 3 * B * H (a streaming call's header, int16 c and int8 h codes)"
GRU_STATE_WHAT = "8 + B * H (a streaming call's header and int8 h codes)"


def lstm_tables() -> torch.Tensor:
    """int16 [2, 513]: sigmoid and tanh at (j * 2^7 - 2^15) / 2^12, in Q0.15 (float64 on the host)."""
    v = (torch.arange(LSTM_TABLE_LEN, dtype=torch.float64) * (1 << LSTM_TABLE_STEP) - 32768) / (1 << LSTM_GATE_FRAC)
    t = torch.stack([torch.sigmoid(v), torch.tanh(v)])
    return torch.round(t * 32768).clamp(-32767, 32767).to(torch.int16)


def _lut16(table: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    u = v + 32768
    j, e = u >> LSTM_TABLE_STEP, u & ((1 << LSTM_TABLE_STEP) - 1)
    a, b = table[j], table[j + 1]
    return a + (((b - a) * e + (1 << (LSTM_TABLE_STEP - 1))) >> LSTM_TABLE_STEP)


def _rq(v: torch.Tensor, m: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return (v * m + (1 << (t - 1))) >> t


def _sat16(v: torch.Tensor) -> torch.Tensor:
    return v.clamp(-32768, 32767)


def check_lstm_args(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, bias: torch.Tensor,
                    requant: torch.Tensor, tables: torch.Tensor, cell_frac_bits: int, output_multiplier: int,
                    output_shift: int) -> None:
    """The bounds the firmware's prepare checks too (firmware/ops/emlkit_lstm_ops.c), with its words."""
    op = "emlkit::lstm"
    if x.dtype != torch.int8 or x.dim() != 3:
        raise ValueError(f"{op}: x must be a 3-D int8 tensor")
    hid4, feat = w_ih.shape if w_ih.dim() == 2 else (0, 0)
    if (w_ih.dtype != torch.int8 or w_hh.dtype != torch.int8 or hid4 % 4 or hid4 == 0
            or tuple(w_hh.shape) != (hid4, hid4 // 4) or feat != x.shape[2]):
        raise ValueError(f"{op}: w_ih must be int8 [4H, I] with I = x's last dim and w_hh int8 [4H, H]")
    if feat > LSTM_MAX_FEATURES or hid4 // 4 > LSTM_MAX_FEATURES:
        raise ValueError(f"{op}: input and hidden sizes must be at most {LSTM_MAX_FEATURES}")
    if bias.dtype != torch.int32 or tuple(bias.shape) != (hid4,) or bias.abs().max() > LSTM_MAX_BIAS:
        raise ValueError(f"{op}: bias must be int32 [4H] within +-2^24")
    if requant.dtype != torch.int32 or tuple(requant.shape) != (hid4, 4):
        raise ValueError(f"{op}: requant must be int32 [4H, 4]")
    m, t = requant[:, 0::2], requant[:, 1::2]
    if bool(((m < (1 << 30)) | (t < 1) | (t > 62)).any()):
        raise ValueError(f"{op}: requant multipliers must be in [2^30, 2^31) and shifts in [1, 62]")
    if tables.dtype != torch.int16 or tuple(tables.shape) != (2, LSTM_TABLE_LEN) or tables.abs().max() > 32767:
        raise ValueError(f"{op}: tables must be int16 [2, {LSTM_TABLE_LEN}] within +-32767")
    if not 11 <= cell_frac_bits <= 15:
        raise ValueError(f"{op}: cell_frac_bits must be in [11, 15]")
    _check_requant(op, output_multiplier, output_shift)


def lstm_reference(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, bias: torch.Tensor,
                   requant: torch.Tensor, tables: torch.Tensor, batch_first: int, input_zero_point: int,
                   output_zero_point: int, cell_frac_bits: int, output_multiplier: int,
                   output_shift: int, state_bytes: int = 0, h0: torch.Tensor | None = None,
                   c0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The op's definition (above), in int64; from the initial state (h0 int8 codes [B, H], c0 int16 [B, H]) when
    given, else from zero."""
    check_lstm_args(x, w_ih, w_hh, bias, requant, tables, cell_frac_bits, output_multiplier, output_shift)
    xs = (x if batch_first else x.transpose(0, 1)).to(torch.int64) - input_zero_point      # [B, T, I]
    b, steps = xs.shape[0], xs.shape[1]
    hid = w_hh.shape[1]
    check_state_bytes("emlkit::lstm", state_bytes, lstm_state_bytes(b, hid), LSTM_STATE_WHAT)
    wi, wh, bias64 = w_ih.to(torch.int64), w_hh.to(torch.int64), bias.to(torch.int64)
    rq = requant.to(torch.int64)
    sig, tnh = tables[0].to(torch.int64), tables[1].to(torch.int64)
    k = cell_frac_bits
    h = torch.zeros(b, hid, dtype=torch.int64)          # h codes minus the output zero point
    c = torch.zeros(b, hid, dtype=torch.int64)
    if (h0 is None) != (c0 is None):
        raise ValueError("emlkit::lstm: h0 and c0 must be given together, and not with state_bytes")
    if h0 is not None and c0 is not None:
        if h0.dtype != torch.int8 or c0.dtype != torch.int16 or h0.numel() != b * hid or c0.numel() != b * hid:
            raise ValueError("emlkit::lstm: h0 must be int8 and c0 int16, each with B * H elements")
        h, c = h0.to(torch.int64).reshape(b, hid) - output_zero_point, c0.to(torch.int64).reshape(b, hid)
    ys = []
    for t in range(steps):
        pre = _sat16(_rq(xs[:, t] @ wi.T, rq[:, 0], rq[:, 1]) + _rq(h @ wh.T, rq[:, 2], rq[:, 3]) + bias64)
        pi, pf, pg, po = pre.split(hid, dim=1)
        i, f, g, o = _lut16(sig, pi), _lut16(sig, pf), _lut16(tnh, pg), _lut16(sig, po)
        c = _sat16((((f * c) << (15 - k)) + i * g + (1 << (29 - k))) >> (30 - k))
        v = _sat16(c << (12 - k)) if k <= 12 else (c + (1 << (k - 13))) >> (k - 12)
        code = (((o * _lut16(tnh, v)) * output_multiplier + (1 << (output_shift - 1))) >> output_shift)
        code = (code + output_zero_point).clamp(-128, 127)
        h = code - output_zero_point
        ys.append(code)
    y = torch.stack(ys, dim=1) if ys else torch.zeros(b, 0, hid, dtype=torch.int64)
    y = (y if batch_first else y.transpose(0, 1)).to(torch.int8).contiguous()
    return y, c.to(torch.int16)


@register_fake("emlkit::lstm")
def _lstm_meta(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, bias: torch.Tensor, requant: torch.Tensor,
               tables: torch.Tensor, batch_first: int, input_zero_point: int, output_zero_point: int,
               cell_frac_bits: int, output_multiplier: int, output_shift: int, state_bytes: int = 0,
               h0: torch.Tensor | None = None, c0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    hid = w_hh.shape[1]
    batch = x.shape[0] if batch_first else x.shape[1]
    return (x.new_empty((x.shape[0], x.shape[1], hid), dtype=torch.int8),
            x.new_empty((batch, hid), dtype=torch.int16))


def _recurrent_kernels(op: str, reference: Callable[..., Any], state_rule: str) -> None:
    """Registers emlkit::OP and OP.out: the op's rule (the firmware's prepare check) that a given initial state
    (h0, and the LSTM's c0) never comes with state_bytes, since a streaming call starts from its kept state (the
    reference's h0/c0 also stand for that state on the host, reference.py), then the reference. The .out kernel
    copies the reference's results into out (and the LSTM's cell)."""
    params = inspect.signature(reference)

    def functional(*args: Any, **kwargs: Any) -> Any:
        bound = params.bind(*args, **kwargs)  # state_bytes and h0 may come by position, by name or by default
        bound.apply_defaults()
        if bound.arguments["h0"] is not None and bound.arguments["state_bytes"]:
            raise ValueError(f"emlkit::{op}: {state_rule}")
        return reference(*bound.args, **bound.kwargs)

    def out_variant(*args: Any, out: torch.Tensor, cell: torch.Tensor | None = None,
                    **kwargs: Any) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        results = functional(*args, **kwargs)
        if cell is None:
            return out.copy_(results)
        out.copy_(results[0])
        cell.copy_(results[1])
        return out, cell

    impl(lib, op, "CompositeExplicitAutograd")(functional)
    impl(lib, f"{op}.out", "CompositeExplicitAutograd")(out_variant)


_recurrent_kernels("lstm", lstm_reference, "h0 and c0 must be given together, and not with state_bytes")


# ---------------------------------------------------------------- gru (int8 in and out, int16 gates)
# One unidirectional GRU layer over int8 codes, torch's gate order (r, z, n), zero initial state, the LSTM's
# conventions (lstm_reference above: per-row int8 weights, Q3.12 pre-activations, the same tables):
#   pre_r, pre_z = sat16(rq(ax) + rq(ah) + bias[r])                     (bias: b_i + b_h, Q3.12)
#   xn = rq(ax) + bias[n] (b_in), hn = clamp(rq(ah) + bias[3H + j] (b_hn), +-2^24)    (Q3.12, int32)
#   r, z = lut(sigmoid, pre_r / pre_z); n = lut(tanh, sat16(xn + ((r * hn + 2^14) >> 15)))       (Q0.15)
#   hq = rq(h - zp_out, Mq, Tq) clamped to +-32767, Mq / 2^Tq = s_h * 2^15          (h_{t-1} in Q0.15)
#   h code = clamp(rq((2^15 - z) * n + z * hq, M, T) + zp_out, -128, 127), M / 2^T = 2^-30 / s_h.
# requant: int32 [3H, 4] (Mx, Tx, Mh, Th per gate row); bias: int32 [4H] (3H x-side, then b_hn).
# state_bytes: 0, or gru_state_bytes(B, H) in a streaming program (the LSTM's, with h only).
# h0: None (h_{-1} = zero codes), or a given initial state: int8 h codes, B * H elements (a model's h0); not
# with state_bytes.
lib.define("gru(Tensor x, Tensor w_ih, Tensor w_hh, Tensor bias, Tensor requant, Tensor tables, int batch_first, "
           "int input_zero_point, int output_zero_point, int h_multiplier, int h_shift, int output_multiplier, "
           "int output_shift, int state_bytes=0, Tensor? h0=None) -> Tensor")
lib.define("gru.out(Tensor x, Tensor w_ih, Tensor w_hh, Tensor bias, Tensor requant, Tensor tables, int batch_first, "
           "int input_zero_point, int output_zero_point, int h_multiplier, int h_shift, int output_multiplier, "
           "int output_shift, int state_bytes=0, Tensor? h0=None, *, Tensor(a!) out) -> Tensor(a!)")


def gru_reference(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, bias: torch.Tensor, requant: torch.Tensor,
                  tables: torch.Tensor, batch_first: int, input_zero_point: int, output_zero_point: int,
                  h_multiplier: int, h_shift: int, output_multiplier: int, output_shift: int, state_bytes: int = 0,
                  h0: torch.Tensor | None = None) -> torch.Tensor:
    """The op's definition (above), in int64; from the initial h codes h0 (int8 [B, H]) when given, else from
    zero."""
    op = "emlkit::gru"
    hid3 = w_ih.shape[0] if w_ih.dim() == 2 else 0
    hid = hid3 // 3
    if (x.dtype != torch.int8 or x.dim() != 3 or w_ih.dtype != torch.int8 or w_hh.dtype != torch.int8 or hid3 % 3
            or hid == 0 or w_ih.shape[1] != x.shape[2] or tuple(w_hh.shape) != (hid3, hid)):
        raise ValueError(f"{op}: x must be 3-D int8, w_ih int8 [3H, I] and w_hh int8 [3H, H]")
    if max(w_ih.shape[1], hid) > LSTM_MAX_FEATURES:
        raise ValueError(f"{op}: input and hidden sizes must be at most {LSTM_MAX_FEATURES}")
    if bias.dtype != torch.int32 or tuple(bias.shape) != (4 * hid,) or bias.abs().max() > LSTM_MAX_BIAS:
        raise ValueError(f"{op}: bias must be int32 [4H] within +-2^24")
    if requant.dtype != torch.int32 or tuple(requant.shape) != (hid3, 4) or bool(
            ((requant[:, 0::2] < (1 << 30)) | (requant[:, 1::2] < 1) | (requant[:, 1::2] > 62)).any()):
        raise ValueError(f"{op}: requant must be int32 [3H, 4], multipliers in [2^30, 2^31) and shifts in [1, 62]")
    if tables.dtype != torch.int16 or tuple(tables.shape) != (2, LSTM_TABLE_LEN) or tables.abs().max() > 32767:
        raise ValueError(f"{op}: tables must be int16 [2, {LSTM_TABLE_LEN}] within +-32767")
    _check_requant(op, h_multiplier, h_shift)
    _check_requant(op, output_multiplier, output_shift)
    xs = (x if batch_first else x.transpose(0, 1)).to(torch.int64) - input_zero_point
    b, steps = xs.shape[0], xs.shape[1]
    check_state_bytes(op, state_bytes, gru_state_bytes(b, hid), GRU_STATE_WHAT)
    wi, wh, rq = w_ih.to(torch.int64), w_hh.to(torch.int64), requant.to(torch.int64)
    bx, bhn = bias[:hid3].to(torch.int64), bias[hid3:].to(torch.int64)
    sig, tnh = tables[0].to(torch.int64), tables[1].to(torch.int64)
    h = torch.zeros(b, hid, dtype=torch.int64)          # h codes minus the output zero point
    if h0 is not None:
        if h0.dtype != torch.int8 or h0.numel() != b * hid:
            raise ValueError(f"{op}: h0 must be int8 with B * H elements")
        h = h0.to(torch.int64).reshape(b, hid) - output_zero_point
    ys = []
    for t in range(steps):
        ax = _rq(xs[:, t] @ wi.T, rq[:, 0], rq[:, 1]) + bx
        ah = _rq(h @ wh.T, rq[:, 2], rq[:, 3])
        r = _lut16(sig, _sat16(ax[:, :hid] + ah[:, :hid]))
        z = _lut16(sig, _sat16(ax[:, hid:2 * hid] + ah[:, hid:2 * hid]))
        hn = (ah[:, 2 * hid:] + bhn).clamp(-LSTM_MAX_BIAS, LSTM_MAX_BIAS)
        n = _lut16(tnh, _sat16(ax[:, 2 * hid:] + ((r * hn + (1 << 14)) >> 15)))
        hq = ((h * h_multiplier + (1 << (h_shift - 1))) >> h_shift).clamp(-32767, 32767)
        acc = (32768 - z) * n + z * hq
        code = ((acc * output_multiplier + (1 << (output_shift - 1))) >> output_shift) + output_zero_point
        code = code.clamp(-128, 127)
        h = code - output_zero_point
        ys.append(code)
    y = torch.stack(ys, dim=1) if ys else torch.zeros(b, 0, hid, dtype=torch.int64)
    return (y if batch_first else y.transpose(0, 1)).to(torch.int8).contiguous()


@register_fake("emlkit::gru")
def _gru_meta(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, bias: torch.Tensor, requant: torch.Tensor,
              tables: torch.Tensor, batch_first: int, input_zero_point: int, output_zero_point: int, h_multiplier: int,
              h_shift: int, output_multiplier: int, output_shift: int, state_bytes: int = 0,
              h0: torch.Tensor | None = None) -> torch.Tensor:
    return x.new_empty((x.shape[0], x.shape[1], w_hh.shape[1]), dtype=torch.int8)


_recurrent_kernels("gru", gru_reference, "h0 must not be given with state_bytes")


# ---------------------------------------------------------------- prelu (int8, a slope per channel)
# y = requant(x - zp_in, M, T, zp_out)                  where x >= zp_in (the positive side, one factor)
#   = requant(x - zp_in, neg[c, 0], neg[c, 1], zp_out)  elsewhere, c = the element's index along dim 1
# neg: int32 [C, 2] (multiplier, shift) per channel: M_c / 2^T_c = slope_c * s_in / s_out, the multiplier's sign
# the slope's (|M_c| in [2^30, 2^31) and T_c in [1, 62], or (0, 1) for a zero slope). requant as _requant.
lib.define("prelu(Tensor x, Tensor neg_requant, int input_zero_point, int output_zero_point, int multiplier, "
           "int shift) -> Tensor")
lib.define("prelu.out(Tensor x, Tensor neg_requant, int input_zero_point, int output_zero_point, int multiplier, "
           "int shift, *, Tensor(a!) out) -> Tensor(a!)")


def signed_multiplier_shift(real: float) -> tuple[int, int]:
    """(M, T) with M / 2^T = real, |M| in [2^30, 2^31) (the sign is M's); (0, 1) for 0."""
    if real == 0.0:
        return 0, 1
    m, t = multiplier_shift(abs(real))
    return (m if real > 0 else -m), t


def check_prelu_table(neg: torch.Tensor, channels: int) -> None:
    if neg.dtype != torch.int32 or tuple(neg.shape) != (channels, 2):
        raise ValueError(f"emlkit::prelu: neg_requant must be an int32 [{channels}, 2] table, got {neg.dtype} "
                         f"{list(neg.shape)}")
    m, t = neg[:, 0].to(torch.int64), neg[:, 1]
    ok = ((m.abs() >= 1 << 30) & (m.abs() < 1 << 31)) | (m == 0)
    if not bool(ok.all()) or bool((t < 1).any()) or bool((t > 62).any()):
        raise ValueError("emlkit::prelu: a neg_requant multiplier is not 0 or +-[2^30, 2^31), or a shift is outside "
                         "[1, 62]")


def prelu_reference(x: torch.Tensor, neg: torch.Tensor, input_zero_point: int, output_zero_point: int,
                    multiplier: int, shift: int) -> torch.Tensor:
    """The op's definition (above), in int64; the output takes x's memory format."""
    if x.dtype != torch.int8 or x.dim() < 2:
        raise TypeError("emlkit::prelu: expected an int8 input of 2 or more dims (dim 1 holds the channels)")
    _check_requant("emlkit::prelu", multiplier, shift)
    check_prelu_table(neg, x.shape[1])
    q = x.to(torch.int64) - input_zero_point
    view = [1, -1] + [1] * (x.dim() - 2)
    m, t = neg[:, 0].to(torch.int64).view(view), neg[:, 1].to(torch.int64).view(view)
    pos = ((q * multiplier + (1 << (shift - 1))) >> shift)
    neg_v = (q * m + (1 << (t - 1))) >> t
    y = torch.where(q >= 0, pos, neg_v) + output_zero_point
    return y.clamp(-128, 127).to(torch.int8).contiguous(memory_format=_memory_format(x))


register_fake("emlkit::prelu")(_int8_like)  # type: ignore[misc]


@impl(lib, "prelu", "CompositeExplicitAutograd")
def _prelu_impl(x: torch.Tensor, neg_requant: torch.Tensor, input_zero_point: int, output_zero_point: int,
                multiplier: int, shift: int) -> torch.Tensor:
    return prelu_reference(x, neg_requant, input_zero_point, output_zero_point, multiplier, shift)


@impl(lib, "prelu.out", "CompositeExplicitAutograd")
def _prelu_out_impl(x: torch.Tensor, neg_requant: torch.Tensor, input_zero_point: int, output_zero_point: int,
                    multiplier: int, shift: int, *, out: torch.Tensor) -> torch.Tensor:
    out.copy_(prelu_reference(x, neg_requant, input_zero_point, output_zero_point, multiplier, shift))
    return out


# ---------------------------------------------------------------- adaptive_avg_pool2d (int8, any output size)
# rows: int32 [OH, 2], cols: int32 [OW, 2]: each output row's (column's) input window [start, end), PyTorch's
# start = floor(i * H / OH), end = ceil((i + 1) * H / OH); requant: int32 [OH * OW, 2] (M, T) per output position,
# M / 2^T = s_in / (s_out * window taps), M in [2^30, 2^31), T in [1, 62]:
#   y[n, c, i, j] = requant(sum over the window of (x - zp_in), requant[i * OW + j], zp_out)
# A window has at most 2^16 taps (|sum| < 2^24: the product with M stays in int64).
ADAPTIVE_MAX_TAPS = 1 << 16

lib.define("adaptive_avg_pool2d(Tensor x, Tensor rows, Tensor cols, Tensor requant, int input_zero_point, "
           "int output_zero_point) -> Tensor")
lib.define("adaptive_avg_pool2d.out(Tensor x, Tensor rows, Tensor cols, Tensor requant, int input_zero_point, "
           "int output_zero_point, *, Tensor(a!) out) -> Tensor(a!)")


def adaptive_windows(size: int, out: int) -> torch.Tensor:
    """int32 [out, 2]: PyTorch's adaptive pooling windows [floor(i*size/out), ceil((i+1)*size/out))."""
    return torch.tensor([[i * size // out, -((-(i + 1) * size) // out)] for i in range(out)],
                        dtype=torch.int32).reshape(-1, 2)


def _check_adaptive(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, requant: torch.Tensor) -> None:
    for name, t, size in (("rows", rows, x.shape[2]), ("cols", cols, x.shape[3])):
        if t.dtype != torch.int32 or t.dim() != 2 or t.shape[1] != 2 or t.shape[0] < 1:
            raise ValueError(f"emlkit::adaptive_avg_pool2d: {name} must be an int32 [n, 2] table, got {t.dtype} "
                             f"{list(t.shape)}")
        if bool((t[:, 0] < 0).any()) or bool((t[:, 1] > size).any()) or bool((t[:, 0] >= t[:, 1]).any()):
            raise ValueError(f"emlkit::adaptive_avg_pool2d: {name} has an empty window or one outside [0, {size})")
    taps = (rows[:, 1] - rows[:, 0]).max().item() * (cols[:, 1] - cols[:, 0]).max().item()
    if taps > ADAPTIVE_MAX_TAPS:
        raise ValueError(f"emlkit::adaptive_avg_pool2d: a window has {taps} taps, over {ADAPTIVE_MAX_TAPS}")
    n_out = rows.shape[0] * cols.shape[0]
    if requant.dtype != torch.int32 or tuple(requant.shape) != (n_out, 2):
        raise ValueError(f"emlkit::adaptive_avg_pool2d: requant must be an int32 [{n_out}, 2] table")
    for m, t in requant.tolist():
        _check_requant("emlkit::adaptive_avg_pool2d", m, t)


def adaptive_avg_pool2d_reference(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, requant: torch.Tensor,
                                  input_zero_point: int, output_zero_point: int) -> torch.Tensor:
    """The op's definition (above), in int64; the output takes x's memory format."""
    if x.dtype != torch.int8 or x.dim() != 4:
        raise TypeError("emlkit::adaptive_avg_pool2d: expected a 4-D int8 input")
    _check_adaptive(x, rows, cols, requant)
    q = x.to(torch.int64) - input_zero_point
    oh, ow = rows.shape[0], cols.shape[0]
    out = torch.empty((x.shape[0], x.shape[1], oh, ow), dtype=torch.int64)
    rq = requant.to(torch.int64)
    for i, (r0, r1) in enumerate(rows.tolist()):
        for j, (c0, c1) in enumerate(cols.tolist()):
            s = q[:, :, r0:r1, c0:c1].sum(dim=(2, 3))
            m, t = int(rq[i * ow + j, 0]), int(rq[i * ow + j, 1])
            out[:, :, i, j] = ((s * m + (1 << (t - 1))) >> t) + output_zero_point
    return out.clamp(-128, 127).to(torch.int8).contiguous(memory_format=_memory_format(x))


@register_fake("emlkit::adaptive_avg_pool2d")
def _adaptive_meta(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, requant: torch.Tensor,
                   input_zero_point: int, output_zero_point: int) -> torch.Tensor:
    return torch.empty((x.shape[0], x.shape[1], rows.shape[0], cols.shape[0]), dtype=torch.int8, device=x.device,
                       memory_format=_memory_format(x))


@impl(lib, "adaptive_avg_pool2d", "CompositeExplicitAutograd")
def _adaptive_impl(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, requant: torch.Tensor,
                   input_zero_point: int, output_zero_point: int) -> torch.Tensor:
    return adaptive_avg_pool2d_reference(x, rows, cols, requant, input_zero_point, output_zero_point)


@impl(lib, "adaptive_avg_pool2d.out", "CompositeExplicitAutograd")
def _adaptive_out_impl(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, requant: torch.Tensor,
                       input_zero_point: int, output_zero_point: int, *, out: torch.Tensor) -> torch.Tensor:
    out.copy_(adaptive_avg_pool2d_reference(x, rows, cols, requant, input_zero_point, output_zero_point))
    return out


# ---------------------------------------------------------------- floor_divide (int8 / int8, exact floor)
# a, b: int8 tensors whose shapes broadcast (PyTorch's rules; a scalar divisor is a one-element b); the output has
# the broadcast shape, in the memory format of the first operand of that shape (a, else b; else contiguous). The
# scales as integers: s_a = a_mant * 2^e_a, s_b = b_mant * 2^e_b (24-bit mantissas, exponent = e_a - e_b in
# [-30, 30]). With A = a - zp_a, B = b - zp_b at each output position:
#   N = A * a_mant * 2^max(exponent, 0),  D = B * b_mant * 2^max(-exponent, 0)     (|N|, |D| < 2^62)
#   f = floor(N / D)  (the exact floor of the real quotient), clamped to [-2^31, 2^31]
#   y = requant(f, M, T, zp_out), M / 2^T = 1 / s_out
# B = 0 (a real division by zero: +-inf, or nan for 0 / 0) gives 127 for A > 0, -128 for A < 0, zp_out for A = 0.
FLOOR_DIV_MANT_BITS = 24
FLOOR_DIV_MAX_EXP = 30
FLOOR_DIV_CLAMP = 1 << 31
FLOOR_DIV_MAX_DIMS = 6  # the kernel's broadcast walk

lib.define("floor_divide(Tensor a, Tensor b, int a_zero_point, int b_zero_point, int a_mantissa, int b_mantissa, "
           "int exponent, int output_zero_point, int multiplier, int shift) -> Tensor")
lib.define("floor_divide.out(Tensor a, Tensor b, int a_zero_point, int b_zero_point, int a_mantissa, "
           "int b_mantissa, int exponent, int output_zero_point, int multiplier, int shift, *, Tensor(a!) out) "
           "-> Tensor(a!)")


def scale_mantissa(scale: float) -> tuple[int, int]:
    """(m, e): scale ~= m * 2^e with m in [2^23, 2^24) (exact for a float32 scale)."""
    if not (scale > 0.0 and math.isfinite(scale)):
        raise ValueError(f"scale {scale} is not a positive finite number")
    mant, exp = math.frexp(scale)
    m = round(mant * (1 << FLOOR_DIV_MANT_BITS))
    if m == 1 << FLOOR_DIV_MANT_BITS:
        m, exp = m >> 1, exp + 1
    return m, exp - FLOOR_DIV_MANT_BITS


def _check_floor_divide(a_mantissa: int, b_mantissa: int, exponent: int, multiplier: int, shift: int) -> None:
    lo, hi = 1 << (FLOOR_DIV_MANT_BITS - 1), 1 << FLOOR_DIV_MANT_BITS
    if not (lo <= a_mantissa < hi and lo <= b_mantissa < hi) or abs(exponent) > FLOOR_DIV_MAX_EXP:
        raise ValueError(f"emlkit::floor_divide: mantissas must be in [2^23, 2^24) and the exponent in "
                         f"[-{FLOOR_DIV_MAX_EXP}, {FLOOR_DIV_MAX_EXP}]")
    _check_requant("emlkit::floor_divide", multiplier, shift)


def _floor_divide_out(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Size, torch.memory_format]:
    """The output's shape and memory format (above); TypeError when the operands do not broadcast."""
    if a.dtype != torch.int8 or b.dtype != torch.int8:
        raise TypeError("emlkit::floor_divide: expected two int8 tensors")
    try:
        shape = torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError as exc:
        raise TypeError(f"emlkit::floor_divide: shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from exc
    if len(shape) > FLOOR_DIV_MAX_DIMS:
        raise TypeError(f"emlkit::floor_divide: {len(shape)} dims, at most {FLOOR_DIV_MAX_DIMS}")
    like = a if a.shape == shape else (b if b.shape == shape else None)
    return shape, torch.contiguous_format if like is None else _memory_format(like)


def floor_divide_reference(a: torch.Tensor, b: torch.Tensor, a_zero_point: int, b_zero_point: int, a_mantissa: int,
                           b_mantissa: int, exponent: int, output_zero_point: int, multiplier: int,
                           shift: int) -> torch.Tensor:
    """The op's definition (above), in int64."""
    _shape, fmt = _floor_divide_out(a, b)
    _check_floor_divide(a_mantissa, b_mantissa, exponent, multiplier, shift)
    big, den_q = torch.broadcast_tensors(a.to(torch.int64) - a_zero_point, b.to(torch.int64) - b_zero_point)
    num = big * a_mantissa * (1 << max(exponent, 0))
    den = den_q * b_mantissa * (1 << max(-exponent, 0))
    safe = torch.where(den == 0, torch.ones_like(den), den)
    f = torch.div(num, safe, rounding_mode="floor").clamp(-FLOOR_DIV_CLAMP, FLOOR_DIV_CLAMP)
    y = (((f * multiplier + (1 << (shift - 1))) >> shift) + output_zero_point).clamp(-128, 127)
    by_zero = torch.where(big > 0, 127, torch.where(big < 0, -128, max(-128, min(127, output_zero_point))))
    y = torch.where(den == 0, by_zero, y)
    return y.to(torch.int8).contiguous(memory_format=fmt)


@register_fake("emlkit::floor_divide")
def _floor_divide_meta(a: torch.Tensor, b: torch.Tensor, *_args: object) -> torch.Tensor:
    shape, fmt = _floor_divide_out(a, b)
    return torch.empty(shape, dtype=torch.int8, device=a.device, memory_format=fmt)


@impl(lib, "floor_divide", "CompositeExplicitAutograd")
def _floor_divide_impl(a: torch.Tensor, b: torch.Tensor, a_zero_point: int, b_zero_point: int, a_mantissa: int,
                       b_mantissa: int, exponent: int, output_zero_point: int, multiplier: int,
                       shift: int) -> torch.Tensor:
    return floor_divide_reference(a, b, a_zero_point, b_zero_point, a_mantissa, b_mantissa, exponent,
                                  output_zero_point, multiplier, shift)


@impl(lib, "floor_divide.out", "CompositeExplicitAutograd")
def _floor_divide_out_impl(a: torch.Tensor, b: torch.Tensor, a_zero_point: int, b_zero_point: int, a_mantissa: int,
                           b_mantissa: int, exponent: int, output_zero_point: int, multiplier: int, shift: int, *,
                           out: torch.Tensor) -> torch.Tensor:
    out.copy_(floor_divide_reference(a, b, a_zero_point, b_zero_point, a_mantissa, b_mantissa, exponent,
                                     output_zero_point, multiplier, shift))
    return out


# ---------------------------------------------------------------- embedding_bag (int8 table, sum / mean / max)
# weight: int8 [num, dim] codes (zero point weight_zero_point); indices, offsets: 1-D int64 or int32. Bag j holds
# indices[offsets[j] : end_j], end_j = offsets[j + 1], or len(indices) for the last bag without include_last_offset;
# bags = len(offsets) - include_last_offset. Entries equal to padding_idx (-1: none) are left out, of the count too.
# per_sample_weights (mode sum only; None: all 1): int8 codes p, one per index, zero point
# per_sample_weights_zero_point. Per bag and column, with w = weight[i, col] - weight_zero_point over its n entries:
#   mode 0 (sum):  v = sum w, or sum w * (p_e - zp_p) with weights  M / 2^T = s_w / s_out, or s_w * s_p / s_out
#   mode 1 (mean): v = sum w * ((2^16 + n // 2) // n), 0 if n = 0  M / 2^T = s_w / (s_out * 2^16)
#   mode 2 (max):  v = max w, 0 if n = 0                        M / 2^T = s_w / s_out
#   y = requant(v, M, T, zp_out)
# With include_last_offset outside mode sum without padding_idx the last offset must be len(indices), the end
# torch documents: torch's kernel reads on to the end of the indices there (or divides by another count), so other
# ends have no defined result (an error here and in the kernel). An offset outside [0, len(indices)], offsets that
# decrease, or an index outside [0, num) is an error (the kernel returns an error status). len(indices) <= 2^23
# (2^15 with weights) keeps |v| * M in int64.
EMBEDDING_BAG_MEAN_BITS = 16
EMBEDDING_BAG_MAX_INDICES = 1 << 23
EMBEDDING_BAG_WEIGHTED_MAX_INDICES = 1 << 15
EMBEDDING_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}

lib.define("embedding_bag(Tensor weight, Tensor indices, Tensor offsets, int mode, int include_last_offset, "
           "int padding_idx, int weight_zero_point, int output_zero_point, int multiplier, int shift, "
           "Tensor? per_sample_weights, int per_sample_weights_zero_point) -> Tensor")
lib.define("embedding_bag.out(Tensor weight, Tensor indices, Tensor offsets, int mode, int include_last_offset, "
           "int padding_idx, int weight_zero_point, int output_zero_point, int multiplier, int shift, "
           "Tensor? per_sample_weights, int per_sample_weights_zero_point, *, Tensor(a!) out) -> Tensor(a!)")


def last_offset_must_end(mode: int, include_last_offset: int, padding_idx: int) -> bool:
    """Whether the last offset must equal len(indices): include_last_offset outside mode sum without padding_idx,
    where torch's kernel does not stop the last bag at it."""
    return bool(include_last_offset) and (mode != 0 or padding_idx >= 0)


def embedding_bag_reference(weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, mode: int,
                            include_last_offset: int, padding_idx: int, weight_zero_point: int,
                            output_zero_point: int, multiplier: int, shift: int,
                            per_sample_weights: torch.Tensor | None = None,
                            per_sample_weights_zero_point: int = 0) -> torch.Tensor:
    """The op's definition (above), in int64."""
    if weight.dtype != torch.int8 or weight.dim() != 2 or indices.dim() != 1 or offsets.dim() != 1:
        raise TypeError("emlkit::embedding_bag: expected an int8 [num, dim] weight and 1-D indices and offsets")
    psw = per_sample_weights
    if psw is not None and (psw.dtype != torch.int8 or tuple(psw.shape) != tuple(indices.shape) or mode != 0):
        raise TypeError("emlkit::embedding_bag: per_sample_weights must be int8, one per index, in mode sum")
    limit = EMBEDDING_BAG_MAX_INDICES if psw is None else EMBEDDING_BAG_WEIGHTED_MAX_INDICES
    if mode not in (0, 1, 2) or indices.numel() > limit:
        raise ValueError(f"emlkit::embedding_bag: mode {mode} is not 0, 1 or 2, or over {limit} indices")
    _check_requant("emlkit::embedding_bag", multiplier, shift)
    num, dim = weight.shape
    idx, off = indices.to(torch.int64).tolist(), offsets.to(torch.int64).tolist()
    if idx and (min(idx) < 0 or max(idx) >= num):
        raise ValueError(f"emlkit::embedding_bag: an index is outside [0, {num})")
    if last_offset_must_end(mode, include_last_offset, padding_idx) and off and off[-1] != len(idx):
        kind = {0: "sum", 1: "mean", 2: "max"}[mode] + (" with padding_idx" if padding_idx >= 0 else "")
        raise ValueError(f"emlkit::embedding_bag: include_last_offset in mode {kind} needs the last offset to be "
                         f"len(indices) = {len(idx)}, not {off[-1]} (torch leaves any other end undefined there); "
                         "end the offsets with len(indices)")
    bags = len(off) - (1 if include_last_offset else 0)
    ends = off[1:] + ([] if include_last_offset else [len(idx)])
    w = weight.to(torch.int64) - weight_zero_point
    pw = None if psw is None else psw.to(torch.int64) - per_sample_weights_zero_point
    out = torch.zeros((max(bags, 0), dim), dtype=torch.int64)
    for j in range(max(bags, 0)):
        s, e = off[j], ends[j]
        if not 0 <= s <= e <= len(idx):
            raise ValueError(f"emlkit::embedding_bag: bag {j} spans [{s}, {e}), outside [0, {len(idx)}] or reversed")
        entries = [k for k in range(s, e) if idx[k] != padding_idx]
        if not entries:
            continue
        sel = w[[idx[k] for k in entries]]
        if mode == 2:
            out[j] = sel.max(dim=0).values
        elif mode == 1:
            n = len(entries)
            out[j] = sel.sum(dim=0) * (((1 << EMBEDDING_BAG_MEAN_BITS) + n // 2) // n)
        elif pw is not None:
            out[j] = (sel * pw[entries].unsqueeze(1)).sum(dim=0)
        else:
            out[j] = sel.sum(dim=0)
    return (((out * multiplier + (1 << (shift - 1))) >> shift) + output_zero_point).clamp(-128, 127).to(torch.int8)


@register_fake("emlkit::embedding_bag")
def _embedding_bag_meta(weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, mode: int,
                        include_last_offset: int, padding_idx: int, weight_zero_point: int, output_zero_point: int,
                        multiplier: int, shift: int, per_sample_weights: torch.Tensor | None,
                        per_sample_weights_zero_point: int) -> torch.Tensor:
    return torch.empty((offsets.shape[0] - (1 if include_last_offset else 0), weight.shape[1]), dtype=torch.int8,
                       device=weight.device)


@impl(lib, "embedding_bag", "CompositeExplicitAutograd")
def _embedding_bag_impl(weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, mode: int,
                        include_last_offset: int, padding_idx: int, weight_zero_point: int, output_zero_point: int,
                        multiplier: int, shift: int, per_sample_weights: torch.Tensor | None,
                        per_sample_weights_zero_point: int) -> torch.Tensor:
    return embedding_bag_reference(weight, indices, offsets, mode, include_last_offset, padding_idx,
                                   weight_zero_point, output_zero_point, multiplier, shift, per_sample_weights,
                                   per_sample_weights_zero_point)


@impl(lib, "embedding_bag.out", "CompositeExplicitAutograd")
def _embedding_bag_out_impl(weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, mode: int,
                            include_last_offset: int, padding_idx: int, weight_zero_point: int,
                            output_zero_point: int, multiplier: int, shift: int,
                            per_sample_weights: torch.Tensor | None, per_sample_weights_zero_point: int, *,
                            out: torch.Tensor) -> torch.Tensor:
    out.copy_(embedding_bag_reference(weight, indices, offsets, mode, include_last_offset, padding_idx,
                                      weight_zero_point, output_zero_point, multiplier, shift, per_sample_weights,
                                      per_sample_weights_zero_point))
    return out
