"""The limits the firmware's op adapters and loader check at load, checked on the final program at compile time.

Each adapter's prepare function (firmware/ops/*.c, ET_PREPARE) refuses a program whose arguments its
kernel cannot run: for cortex_m:: ops an offset, multiplier or shift out of range, an activation range
upside down, an int8 tensor that is not, an activation that is not channels-last, a softmax whose output
zero point is not -128, ...; for the portable aten:: ops a dtype the kernel lacks (integer true division,
float input with an integer output, sigmoid on integers), a dim or index out of range; for our emlkit::
ops their factors, tables and requantization bounds. The loader (firmware/runtime/method.c) also refuses
a kernel call whose output shares bytes with one of its inputs (check_aliasing, on the memory-planned
program). A program the device would refuse is refused here, at compile time, with the message the
device would print (the format strings below are the C ones; tests/test_adapter_limits.py reads
firmware/ops and firmware/runtime and checks every limit and format against this table). Shape
consistency (out sizes against the geometry) is not repeated here: torch computes the edge graph's shapes
with the same formulas.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from emlkit.emlkit_ops import innermost_hold

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
CM_MAX_OFFSET = 65536     # firmware/ops/cortex_m_util.h
ET_MAX_DIM = 8            # firmware/runtime/et_types.h

# printf formats of firmware/ops/cortex_m_util.h and the adapters, verbatim.
FMT_INT = "%s: argument %u (%s) must be an int"
FMT_INT_RANGE = "%s: %s = %lld is outside the supported range [%lld, %lld]"
FMT_LIST_LEN = "%s: %s has %u entries, at most %u supported"
FMT_LIST_RANGE = "%s: %s[%u] = %lld is outside [%lld, %lld]"
FMT_PAIR_LEN = "%s: %s needs 1 or 2 entries, got %u"
FMT_DTYPE = "%s: %s must be %s, got %s"
FMT_RANK = "%s: %s must be %u-D, got %u-D"
FMT_CONTIG = "%s: %s must be contiguous (dim order 0..%u)"
FMT_NHWC = "%s: %s must be channels-last (dim order 0,2,3,1); got dim order %u,%u,%u,%u"
FMT_NHWC_VARIANT = "%s: %s must be a contiguous NHWC tensor"
FMT_REQUANT = "%s: %s multiplier %lld / shift %lld outside [0, 2^31) / [-31, 31]"
FMT_ACT = "%s: activation_min %d > activation_max %d"
FMT_GROUPED_TRANSPOSE = "%s: grouped transposed convolution is not supported"
FMT_EXT_FORM = ("%s: requantize_multipliers has %u entries: %d multipliers and the folded window bias need a constant "
                "convolution or depth-multiplier-1 depthwise")
FMT_WINDOW_BIAS = "%s: folded window bias of channel %d is %ld, the weights give %ld"
FMT_WINDOW_BIAS_PAD = "%s: folded window bias of padding channel %d is %ld, not 0"
FMT_DW_BLOCK = "%s: 16-channel block of channel %d: %s is %ld, expected %ld"
FMT_POOL_DILATION = "%s: dilation %d,%d not supported (only 1)"
FMT_POOL_PADDING = "%s: padding must be at most half the kernel size"
FMT_POOL_CEIL = "%s: ceil_mode=True is not supported (as in the reference)"
FMT_POOL_ZP = "%s: input and output zero points must match (%d vs %d)"
FMT_LINEAR_ONE_REQUANT = "%s: needs exactly one requantize multiplier and shift (per-tensor)"
FMT_SOFTMAX_ZP = "%s: output_zero_point must be -128 (output scale 1/256), got %d"
FMT_SOFTMAX_DIM = "%s: dim %d out of range for rank %d"
FMT_LUT = "%s: lut must have 256 int8 entries, got %u"
FMT_SCALE = "%s: scale must be positive, got %g"
FMT_QDTYPE = "%s: quantized dtype %s not supported (uint8, int8, int16, int32)"
FMT_QRANGE = "%s: quant_min %d > quant_max %d"
FMT_DIV_DTYPE = "%s: self must be int8 or int16, got %s"
FMT_MINMAX_DTYPE = "%s: dtype %s not supported (int8, uint8, int16, int32, float32)"
FMT_PAD_LEN = "%s: pre_pad and post_pad need 4 entries, got %u and %u"
FMT_PAD_RANK = "%s: input rank %u not supported (1..4)"
FMT_PAD_DTYPE = "%s: dtype %s not supported (int8, uint8, int16, int32)"
# aten_util.h and the aten:: adapters (aten_*.c)
FMT_IO_DTYPE = "%s: dtype %s in, %s out"
FMT_DIM = "%s: dim %lld out of range for rank %u"
FMT_BIN_DTYPE = "%s: dtype %s not supported"
FMT_BIN_FLOAT_IN = "%s: float input with integer output %s"
FMT_BIN_INT_DIV = "%s: integer output for true division"
FMT_BIN_FLOAT_SCALAR = "%s: float scalar with integer tensors"
FMT_UN_DTYPES = "%s: input and output dtypes differ"
FMT_UN_FLOAT_ONLY = "%s: dtype %s not supported (float only)"
FMT_MEAN_F32 = "%s: only float32 is supported (got %s -> %s)"
FMT_F32 = "%s: only float32 is supported"
FMT_SELECT_DIM = "%s: dim out of range"
FMT_SELECT_INDEX = "%s: index %ld out of range for size %ld"
FMT_PERMUTE_REPEAT = "%s: dims repeat"
FMT_SLICE_STEP = "%s: needs rank >= 1 and step > 0"
FMT_DIM_ORDER_NONE = "%s: no dim_order given but output is not contiguous"
FMT_DIM_ORDER_RANK = "%s: dim_order does not match the output rank"
FMT_DIM_ORDER_RANGE = "%s: dim_order entry out of range"
FMT_DIM_ORDER_DISAGREE = "%s: dim_order disagrees with the output tensor"
# the emlkit:: adapters (emlkit_ops.c, emlkit_qparams_ops.c)
FMT_UPSAMPLE_RANK = "%s: tensors must be 4-D"
FMT_UPSAMPLE_FACTORS = "%s: factors %ld x %ld out of range [1, 4096]"
FMT_LN_DTYPES = "%s: needs int8 input and output, int32 gain and bias"
FMT_LN_LAYOUT = "%s: input and output must be of one shape and dim order"
FMT_LN_LAST_DIM = "%s: %lu gain/bias entries (at most 65536) are not x's innermost dims"
FMT_LN_RANGE = "%s: eps_term, shift or zero point out of range"
FMT_EXP_TABLE_LEN = "%s: exp_table must have 256 entries, got %u"
FMT_EXP_TABLE_FIRST = "%s: exp_table[0] = %ld must be in [1, 2^22]"
FMT_EXP_TABLE_ENTRY = "%s: exp_table[%d] = %ld must be in [0, 2^22]"
FMT_SAME_LAYOUT = "%s: out must have the input's sizes and dim order"
FMT_TAPS = "%s: window %dx%d has more than %d taps"
FMT_WINDOW = "%s: window %dx%d is larger than the %dx%d input"
# the loader (firmware/runtime/method.c check_aliasing); its %u are PRIu32 in the C source
FMT_OVERLAP = "corrupt program: instruction %u writes its output over its argument %u"

EMLKIT_EXP_ONE = 1 << 22      # firmware/ops/emlkit_qparams_ops.c
EMLKIT_MAX_TAPS = 1 << 16
LN_MAX_LAST_DIM = 65536       # firmware/ops/emlkit_ops.c
LN_MAX_EPS_TERM = 1 << 40
LN_MAX_SHIFT = 30
UPSAMPLE_MAX_FACTOR = 4096

# ExecuTorch ScalarType codes (the firmware's et_dtype) and et_dtype_name's names.
SCALAR_TYPE = {torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4, torch.float16: 5,
               torch.float32: 6, torch.float64: 7, torch.bool: 11}
DTYPE_NAME = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
              11: "bool"}


def c_format(fmt: str, *args: Any) -> str:
    """A C printf format applied the way the firmware's et_fail does (for the formats above)."""
    return re.sub(r"%l{0,2}[du]", "%d", fmt) % args


class Refused(Exception):
    """A check failed: str() is the firmware's message."""


def _fail(fmt: str, *args: Any) -> None:
    raise Refused(c_format(fmt, *args))


@dataclass
class Args:
    """One node's arguments by schema position (the C adapters' args[i]); `out` is the node's own value."""

    op: str
    values: list[Any]
    out: Any
    constant: Callable[[Any], torch.Tensor | None]

    def tensor(self, i: int | str) -> Any:
        v = self.out if i == "out" else self.values[i]  # type: ignore[index]
        return v.meta.get("val") if isinstance(v, torch.fx.Node) else v


# ----------------------------------------------------------------- the generic checks (cortex_m_util.h)
def check_int(a: Args, i: int, name: str, lo: int, hi: int) -> int:
    x = a.values[i]
    if isinstance(x, torch.dtype):        # a dtype argument is its ScalarType code in the program
        x = SCALAR_TYPE.get(x, -1)
    if isinstance(x, bool) or not isinstance(x, int):
        _fail(FMT_INT, a.op, i, name)
    if x < lo or x > hi:
        _fail(FMT_INT_RANGE, a.op, name, x, lo, hi)
    return x


def check_int_list(a: Args, i: int, name: str, maxn: int, lo: int, hi: int) -> list[int]:
    xs = list(a.values[i])
    if len(xs) > maxn:
        _fail(FMT_LIST_LEN, a.op, name, len(xs), maxn)
    for k, x in enumerate(xs):
        if x < lo or x > hi:
            _fail(FMT_LIST_RANGE, a.op, name, k, x, lo, hi)
    return xs


def check_pair(a: Args, i: int, name: str, lo: int, hi: int) -> list[int]:
    xs = check_int_list(a, i, name, 2, lo, hi)
    if len(xs) == 1:
        return [xs[0], xs[0]]
    if len(xs) != 2:
        _fail(FMT_PAIR_LEN, a.op, name, len(xs))
    return xs


def check_act(a: Args, lo: int, hi: int) -> None:
    if lo > hi:
        _fail(FMT_ACT, a.op, lo, hi)


def check_dtype(a: Args, i: int | str, name: str, want: int) -> None:
    t = a.tensor(i)
    got = SCALAR_TYPE.get(t.dtype, -1)
    if got != want:
        _fail(FMT_DTYPE, a.op, name, DTYPE_NAME[want], DTYPE_NAME.get(got, "unsupported"))


def check_rank(a: Args, i: int | str, name: str, want: int) -> None:
    t = a.tensor(i)
    if t.dim() != want:
        _fail(FMT_RANK, a.op, name, want, t.dim())


def _dim_order(t: torch.Tensor) -> list[int]:
    return list(t.dim_order())


def layout_is(t: torch.Tensor, order: Sequence[int]) -> bool:
    """cm_layout_is: size-1 dims do not change the bytes, so only the order of the others counts."""
    a = [d for d in _dim_order(t) if t.shape[d] != 1]
    b = [d for d in order if t.shape[d] != 1]
    return a == b


def check_contiguous(a: Args, i: int | str, name: str) -> None:
    t = a.tensor(i)
    if not layout_is(t, range(t.dim())):
        _fail(FMT_CONTIG, a.op, name, t.dim() - 1 if t.dim() else 0)


def check_nhwc(a: Args, i: int | str, name: str, nhwc_variant: bool) -> None:
    check_rank(a, i, name, 4)
    t = a.tensor(i)
    if nhwc_variant:
        if not layout_is(t, range(4)):
            _fail(FMT_NHWC_VARIANT, a.op, name)
    elif not layout_is(t, (0, 2, 3, 1)):
        _fail(FMT_NHWC, a.op, name, *_dim_order(t))


def check_requant(a: Args, what: str, mult: int, shift: int) -> None:
    if mult < 0 or mult > INT32_MAX or shift < -31 or shift > 31:
        _fail(FMT_REQUANT, a.op, what, mult, shift)


def check_requant_tensors(a: Args, im: int, ish: int) -> None:
    check_dtype(a, im, "requantize_multipliers", SCALAR_TYPE[torch.int32])
    check_dtype(a, ish, "requantize_shifts", SCALAR_TYPE[torch.int32])
    m, s = a.constant(a.values[im]), a.constant(a.values[ish])
    if m is None or s is None:
        return    # the firmware also refuses non-constant ones; the emitter makes them constants
    for mv, sv in zip(m.flatten().tolist(), s.flatten().tolist()):
        check_requant(a, "per-channel", int(mv), int(sv))


def _extended(kind: str, n: int, out_c: int) -> bool:
    """cortex_m_conv.c conv_extended: the multipliers tensor's length is one of the window-bias forms (the
    forms the kernels read, as the scratch planner tells them apart, or the older unpadded 2 x out_c)."""
    from emlkit.passes.kernel_scratch import multiplier_forms  # here: emlkit.passes imports this module

    if out_c <= 0:
        return False
    return n == 2 * out_c or (kind != "transpose" and any(multiplier_forms(n, out_c, kind == "depthwise")))


def check_window_bias(a: Args, kind: str, nhwc: bool, ioff: int, im: int, ish: int) -> None:
    """cortex_m_conv.c conv_window_bias: the entries after the multipliers (emlkit/passes/window_bias.py) agree
    with the weights, bias, multipliers and shifts."""
    from emlkit.passes.window_bias import dw_blocks, window_bias  # here: emlkit.passes imports this module

    x, wm, mm = a.tensor(0), a.tensor(1), a.tensor(im)
    dw = kind == "depthwise"
    out_c, n = int(wm.shape[3] if dw else wm.shape[0]), int(mm.numel())
    if not _extended(kind, n, out_c):
        return
    m, s, w = a.constant(a.values[im]), a.constant(a.values[ish]), a.constant(a.values[1])
    if m is None or s is None or w is None:
        return    # the firmware refuses non-constant ones too; the emitter makes them constants
    b = a.constant(a.values[2]) if a.values[2] is not None else None
    in_c = int(x.shape[3] if nhwc else x.shape[1])
    if kind == "transpose" or s.numel() != out_c or (a.values[2] is not None and b is None) or (dw and out_c != in_c):
        _fail(FMT_EXT_FORM, a.op, n, out_c)
    m, s = m.flatten().to(torch.int64), s.flatten().to(torch.int64)
    want = window_bias(w, b, int(a.values[ioff]), dw).to(torch.int64)
    tail = m[out_c:]
    for o in range(out_c):
        if tail[o] != want[o]:
            _fail(FMT_WINDOW_BIAS, a.op, o, int(tail[o]), int(want[o]))
    for o in range(out_c, n - out_c if kind == "conv" else out_c):
        if tail[o] != 0:
            _fail(FMT_WINDOW_BIAS_PAD, a.op, o, int(tail[o]))
    if not dw or n == 2 * out_c:
        return
    got, blocks = m[2 * out_c:], dw_blocks(want, m[:out_c], s).to(torch.int64)
    bad = (got != blocks).nonzero()
    if len(bad):
        i = int(bad[0])
        _fail(FMT_DW_BLOCK, a.op, i // 48 * 16 + i % 16, ("folded window bias", "multiplier", "shift")[i % 48 // 16],
              int(got[i]), int(blocks[i]))


# ----------------------------------------------------------------- one function per adapter
I8 = SCALAR_TYPE[torch.int8]
I32 = SCALAR_TYPE[torch.int32]
F32 = SCALAR_TYPE[torch.float32]


def _conv(kind: str, nhwc: bool) -> Callable[[Args], None]:
    def check(a: Args) -> None:
        i = 3
        check_pair(a, i, "stride", 1, 4096)
        i += 1
        check_pair(a, i, "padding", 0, 4096)
        i += 1
        if kind == "transpose":
            check_pair(a, i, "output_padding", 0, 4096)
            i += 1
        check_pair(a, i, "dilation", 1, 4096)
        i += 1
        if kind == "depthwise":
            check_int(a, i, "depth_multiplier", 1, 65536)
            i += 1
        check_int(a, i, "input_offset", -CM_MAX_OFFSET, CM_MAX_OFFSET)
        check_int(a, i + 1, "output_offset", -CM_MAX_OFFSET, CM_MAX_OFFSET)
        im, ish = i + 2, i + 3
        lo = check_int(a, i + 4, "activation_min", -128, 127)
        hi = check_int(a, i + 5, "activation_max", -128, 127)
        check_act(a, lo, hi)
        check_dtype(a, 0, "input", I8)
        check_dtype(a, 1, "weight", I8)
        check_dtype(a, "out", "out", I8)
        check_nhwc(a, 0, "input", nhwc)
        check_nhwc(a, "out", "out", nhwc)
        check_rank(a, 1, "weight", 4)
        check_contiguous(a, 1, "weight (OHWI / 1HWO as stored by the AoT pass)")
        if kind == "transpose":
            x, w = a.tensor(0), a.tensor(1)
            in_c = x.shape[3] if nhwc else x.shape[1]
            if w.shape[3] > 0 and in_c % w.shape[3] == 0 and in_c // w.shape[3] != 1:
                _fail(FMT_GROUPED_TRANSPOSE, a.op)
        if a.values[2] is not None:
            check_dtype(a, 2, "bias", I32)
        check_window_bias(a, kind, nhwc, i, im, ish)
        check_requant_tensors(a, im, ish)
    return check


def _add(a: Args) -> None:
    for i, name, lo, hi in ((1, "self_zero_point", -128, 127), (2, "self_multiplier", INT32_MIN, INT32_MAX),
                            (3, "self_shift", -31, 31), (5, "other_zero_point", -128, 127),
                            (6, "other_multiplier", INT32_MIN, INT32_MAX), (7, "other_shift", -31, 31),
                            (8, "output_zero_point", -128, 127), (9, "output_multiplier", INT32_MIN, INT32_MAX),
                            (10, "output_shift", -31, 31)):
        check_int(a, i, name, lo, hi)
    check_act(a, check_int(a, 11, "activation_min", -128, 127), check_int(a, 12, "activation_max", -128, 127))
    _int8_operands(a)


def _int8_operands(a: Args) -> None:
    check_dtype(a, 0, "self", I8)
    if isinstance(a.values[4 if a.op == "cortex_m::quantized_add" else 2], torch.fx.Node):
        check_dtype(a, 4 if a.op == "cortex_m::quantized_add" else 2, "other", I8)
    check_dtype(a, "out", "out", I8)


def _mul(a: Args) -> None:
    for i, name, lo, hi in ((1, "self_zero_point", -128, 127), (3, "other_zero_point", -128, 127),
                            (4, "output_zero_point", -128, 127), (5, "output_multiplier", 0, INT32_MAX),
                            (6, "output_shift", -31, 31)):
        check_int(a, i, name, lo, hi)
    _int8_operands(a)


def _div(a: Args) -> None:
    for i, name in ((1, "self_zero_point"), (3, "other_zero_point"), (4, "output_zero_point")):
        check_int(a, i, name, -32768, 32767)
    dt = SCALAR_TYPE.get(a.tensor(0).dtype, -1)
    if dt not in (I8, SCALAR_TYPE[torch.int16]):
        _fail(FMT_DIV_DTYPE, a.op, DTYPE_NAME.get(dt, "unsupported"))
    check_dtype(a, 2, "other", dt)
    check_dtype(a, "out", "out", dt)


def _activation(a: Args) -> None:
    check_dtype(a, 0, "input", I8)
    check_dtype(a, 1, "lut", I8)
    check_dtype(a, "out", "out", I8)
    n = a.tensor(1).numel()
    if n != 256:
        _fail(FMT_LUT, a.op, n)


def _minmax(a: Args) -> None:
    dt = SCALAR_TYPE.get(a.tensor(0).dtype, -1)
    if dt not in (0, 1, 2, 3, 6):
        _fail(FMT_MINMAX_DTYPE, a.op, DTYPE_NAME.get(dt, "unsupported"))
    check_dtype(a, 1, "other", dt)
    check_dtype(a, "out", "out", dt)


def _linear(a: Args) -> None:
    check_int(a, 4, "input_offset", -CM_MAX_OFFSET, CM_MAX_OFFSET)
    check_int(a, 5, "filter_offset", -CM_MAX_OFFSET, CM_MAX_OFFSET)
    check_int(a, 6, "output_offset", -CM_MAX_OFFSET, CM_MAX_OFFSET)
    nm = check_int_list(a, 7, "requantize_multipliers", 1, 0, INT32_MAX)
    ns = check_int_list(a, 8, "requantize_shifts", 1, -31, 31)
    if len(nm) != 1 or len(ns) != 1:
        _fail(FMT_LINEAR_ONE_REQUANT, a.op)
    hi = check_int(a, 9, "activation_max", -128, 127)
    lo = check_int(a, 10, "activation_min", -128, 127)
    check_act(a, lo, hi)
    check_dtype(a, 0, "input", I8)
    check_dtype(a, 1, "weights", I8)
    check_dtype(a, "out", "out", I8)
    check_rank(a, 1, "weights", 2)
    check_contiguous(a, 1, "weights")
    check_contiguous(a, 0, "input")
    check_contiguous(a, "out", "out")


def _batch_matmul(a: Args) -> None:
    check_int(a, 1, "lhs_zero_point", -CM_MAX_OFFSET, CM_MAX_OFFSET)
    check_int(a, 3, "rhs_zero_point", -CM_MAX_OFFSET, CM_MAX_OFFSET)
    check_int(a, 4, "output_zero_point", -CM_MAX_OFFSET, CM_MAX_OFFSET)
    check_int(a, 5, "output_multiplier", 0, INT32_MAX)
    check_int(a, 6, "output_shift", -31, 31)
    for i, name in ((0, "lhs"), (2, "rhs_transposed"), ("out", "out")):
        check_dtype(a, i, name, I8)
    for i, name in ((0, "lhs"), (2, "rhs_transposed"), ("out", "out")):
        check_rank(a, i, name, 3)
    for i, name in ((0, "lhs"), (2, "rhs_transposed"), ("out", "out")):
        check_contiguous(a, i, name)


def _pool_geometry(a: Args, has_dil: bool, nhwc: bool) -> tuple[int, bool]:
    """cortex_m_pool.c geometry(): returns the next argument index and ceil_mode."""
    k = check_pair(a, 1, "kernel_size", 1, 4096)
    check_int_list(a, 2, "stride", 2, 1, 4096)
    pad = check_pair(a, 3, "padding", 0, 4096)
    i, dil = 4, [1, 1]
    if has_dil:
        dil = check_pair(a, 4, "dilation", 1, 4096)
        i = 5
    ceil = bool(a.values[i])
    if dil != [1, 1]:
        _fail(FMT_POOL_DILATION, a.op, dil[0], dil[1])
    if pad[0] * 2 > k[0] or pad[1] * 2 > k[1]:
        _fail(FMT_POOL_PADDING, a.op)
    check_dtype(a, 0, "input", I8)
    check_dtype(a, "out", "out", I8)
    check_nhwc(a, 0, "input", nhwc)
    check_nhwc(a, "out", "out", nhwc)
    return i + 1, ceil


def _avg_pool(nhwc: bool) -> Callable[[Args], None]:
    def check(a: Args) -> None:
        i, _ = _pool_geometry(a, False, nhwc)
        check_int(a, i, "zero_point", -128, 127)
        check_int(a, i + 1, "multiplier", 1, INT32_MAX)
        check_int(a, i + 2, "shift", -31, 31)
    return check


def _max_pool(nhwc: bool) -> Callable[[Args], None]:
    def check(a: Args) -> None:
        i, ceil = _pool_geometry(a, True, nhwc)
        if ceil:
            _fail(FMT_POOL_CEIL, a.op)
        izp = check_int(a, i, "input_zero_point", -128, 127)
        ozp = check_int(a, i + 1, "output_zero_point", -128, 127)
        check_act(a, check_int(a, i + 2, "activation_min", -128, 127), check_int(a, i + 3, "activation_max", -128, 127))
        if izp != ozp:
            _fail(FMT_POOL_ZP, a.op, izp, ozp)
    return check


def _qparams(a: Args) -> int:
    scale = float(a.values[1])
    if not scale > 0.0:
        _fail(FMT_SCALE, a.op, scale)
    check_int(a, 2, "zero_point", INT32_MIN, INT32_MAX)
    qmin = check_int(a, 3, "quant_min", INT32_MIN, INT32_MAX)
    qmax = check_int(a, 4, "quant_max", INT32_MIN, INT32_MAX)
    dt = check_int(a, 5, "dtype", 0, 64)
    if dt not in (0, 1, 2, 3):
        _fail(FMT_QDTYPE, a.op, DTYPE_NAME.get(dt, "unsupported"))
    if qmin > qmax:
        _fail(FMT_QRANGE, a.op, qmin, qmax)
    return dt


def _quantize(a: Args) -> None:
    dt = _qparams(a)
    check_dtype(a, 0, "input", F32)
    check_dtype(a, "out", "out", dt)


def _dequantize(a: Args) -> None:
    dt = _qparams(a)
    check_dtype(a, 0, "input", dt)
    check_dtype(a, "out", "out", F32)


def _softmax(a: Args) -> None:
    dim = check_int(a, 1, "dim", -ET_MAX_DIM, ET_MAX_DIM - 1)
    check_int(a, 2, "input_zero_point", -128, 127)
    ozp = check_int(a, 3, "output_zero_point", -128, 127)
    check_int(a, 4, "input_multiplier", 1, INT32_MAX)
    check_int(a, 5, "input_shift", -31, 31)
    check_int(a, 6, "diff_min", INT32_MIN, INT32_MAX)
    if ozp != -128:
        _fail(FMT_SOFTMAX_ZP, a.op, ozp)
    check_dtype(a, 0, "input", I8)
    check_dtype(a, "out", "out", I8)
    rank = a.tensor(0).dim() or 1
    if dim < -rank or dim >= rank:
        _fail(FMT_SOFTMAX_DIM, a.op, dim, rank)


def _pad(a: Args) -> None:
    pre = check_int_list(a, 1, "pre_pad", 4, 0, 1 << 20)
    post = check_int_list(a, 2, "post_pad", 4, 0, 1 << 20)
    if len(pre) != 4 or len(post) != 4:
        _fail(FMT_PAD_LEN, a.op, len(pre), len(post))
    rank = a.tensor(0).dim()
    if rank < 1 or rank > 4:
        _fail(FMT_PAD_RANK, a.op, rank)
    dt = SCALAR_TYPE.get(a.tensor(0).dtype, -1)
    ranges = {1: (-128, 127), 0: (0, 255), 2: (-32768, 32767), 3: (INT32_MIN, INT32_MAX)}
    if dt not in ranges:
        _fail(FMT_PAD_DTYPE, a.op, DTYPE_NAME.get(dt, "unsupported"))
    check_int(a, 3, "pad_value", *ranges[dt])


def _transpose(a: Args) -> None:
    check_int_list(a, 1, "perm", ET_MAX_DIM, -ET_MAX_DIM, ET_MAX_DIM - 1)


# ----------------------------------------------------------------- emlkit:: adapters
def _requant_args(a: Args, i: int) -> None:
    """emlkit_qparams_ops.c requant_args: the C names these "multiplier" and "shift" whatever the schema says."""
    check_int(a, i, "multiplier", 1 << 30, INT32_MAX)
    check_int(a, i + 1, "shift", 1, 62)


def _emlkit_softmax(a: Args) -> None:
    dim = check_int(a, 2, "dim", -ET_MAX_DIM, ET_MAX_DIM - 1)
    check_int(a, 3, "output_zero_point", -128, 127)
    _requant_args(a, 4)
    check_dtype(a, 0, "input", I8)
    check_dtype(a, "out", "out", I8)
    check_dtype(a, 1, "exp_table", I32)
    n = a.tensor(1).numel()
    if n != 256:
        _fail(FMT_EXP_TABLE_LEN, a.op, n)
    table = a.constant(a.values[1])
    if table is not None:   # the firmware reads the constant's values; the emitter makes the table one
        t = [int(v) for v in table.flatten().tolist()]
        if t[0] < 1 or t[0] > EMLKIT_EXP_ONE:
            _fail(FMT_EXP_TABLE_FIRST, a.op, t[0])
        for k in range(1, 256):
            if t[k] < 0 or t[k] > EMLKIT_EXP_ONE:
                _fail(FMT_EXP_TABLE_ENTRY, a.op, k, t[k])
    x, out = a.tensor(0), a.tensor("out")
    if tuple(x.shape) != tuple(out.shape) or not layout_is(out, _dim_order(x)):
        _fail(FMT_SAME_LAYOUT, a.op)
    rank = x.dim() or 1
    if dim < -rank or dim >= rank:
        _fail(FMT_SOFTMAX_DIM, a.op, dim, rank)


def _emlkit_avg_pool(a: Args) -> None:
    k = check_pair(a, 1, "kernel_size", 1, 4096)
    check_pair(a, 2, "stride", 1, 4096)
    check_int(a, 3, "input_zero_point", -128, 127)
    check_int(a, 4, "output_zero_point", -128, 127)
    _requant_args(a, 5)
    if k[0] * k[1] > EMLKIT_MAX_TAPS:
        _fail(FMT_TAPS, a.op, k[0], k[1], EMLKIT_MAX_TAPS)
    check_dtype(a, 0, "input", I8)
    check_dtype(a, "out", "out", I8)
    check_nhwc(a, 0, "input", False)
    check_nhwc(a, "out", "out", False)
    _, _, h, w = a.tensor(0).shape
    if k[0] > h or k[1] > w:
        _fail(FMT_WINDOW, a.op, k[0], k[1], h, w)


def _dtype_code(a: Args, i: int | str) -> int:
    return SCALAR_TYPE.get(a.tensor(i).dtype, -1)


def _dtype_name(code: int) -> str:
    return DTYPE_NAME.get(code, "unsupported")


def _same_dtype(a: Args, i: int | str, j: int | str) -> None:
    di, dj = _dtype_code(a, i), _dtype_code(a, j)
    if di != dj:
        _fail(FMT_IO_DTYPE, a.op, _dtype_name(di), _dtype_name(dj))


def _upsample(a: Args) -> None:
    _same_dtype(a, 0, "out")
    if a.tensor(0).dim() != 4 or a.tensor("out").dim() != 4:
        _fail(FMT_UPSAMPLE_RANK, a.op)
    sh, sw = int(a.values[1]), int(a.values[2])
    if sh < 1 or sw < 1 or sh > UPSAMPLE_MAX_FACTOR or sw > UPSAMPLE_MAX_FACTOR:
        _fail(FMT_UPSAMPLE_FACTORS, a.op, sh, sw)


def _upsample_index(a: Args) -> None:
    _same_dtype(a, 0, "out")
    x = a.tensor(0)
    if x.dim() != 4 or a.tensor("out").dim() != 4:
        _fail(FMT_UPSAMPLE_RANK, a.op)
    for i, name in ((1, "rows"), (2, "cols")):
        lim = x.shape[i + 1]
        for k, v in enumerate(a.values[i]):
            if not 0 <= int(v) < lim:
                _fail(FMT_LIST_RANGE, a.op, name, k, int(v), 0, lim - 1)


def _layer_norm(a: Args) -> None:
    if (_dtype_code(a, 0), _dtype_code(a, "out"), _dtype_code(a, 1), _dtype_code(a, 2)) != (I8, I8, I32, I32):
        _fail(FMT_LN_DTYPES, a.op)
    x, out = a.tensor(0), a.tensor("out")
    if x.dim() < 1 or tuple(x.shape) != tuple(out.shape) or _dim_order(x) != _dim_order(out):
        _fail(FMT_LN_LAYOUT, a.op)
    n = a.tensor(1).numel()
    if n == 0 or n > LN_MAX_LAST_DIM or not innermost_hold(x, n) or a.tensor(2).numel() != n:
        _fail(FMT_LN_LAST_DIM, a.op, n)
    eps, shift, zp = (int(v) for v in a.values[3:6])
    if eps < 1 or eps > LN_MAX_EPS_TERM or shift < 0 or shift > LN_MAX_SHIFT or zp < -128 or zp > 127:
        _fail(FMT_LN_RANGE, a.op)


# ----------------------------------------------------------------- aten:: adapters (portable C kernels)
FLOAT_CODES = (F32, SCALAR_TYPE[torch.float64])
INT_CODES = (0, I8, SCALAR_TYPE[torch.int16], I32, SCALAR_TYPE[torch.int64], SCALAR_TYPE[torch.bool])


def _is_integral(x: Any) -> bool:
    """(double)(int64_t)x == x, for the values a program holds."""
    return isinstance(x, (bool, int)) or (isinstance(x, float) and math.isfinite(x) and x.is_integer())


def _binary(divide: bool, scalar_other: bool) -> Callable[[Args], None]:
    def check(a: Args) -> None:
        out = _dtype_code(a, "out")
        flt = out in FLOAT_CODES
        if not flt and out not in INT_CODES:
            _fail(FMT_BIN_DTYPE, a.op, _dtype_name(out))
        other_float = not scalar_other and isinstance(a.values[1], torch.fx.Node) and _dtype_code(a, 1) in FLOAT_CODES
        if not flt and (_dtype_code(a, 0) in FLOAT_CODES or other_float):
            _fail(FMT_BIN_FLOAT_IN, a.op, _dtype_name(out))
        if not flt and divide:
            _fail(FMT_BIN_INT_DIV, a.op)
        alpha = a.values[2] if len(a.values) > 2 else 1
        if not flt and (not _is_integral(alpha) or (scalar_other and not _is_integral(a.values[1]))):
            _fail(FMT_BIN_FLOAT_SCALAR, a.op)
    return check


def _unary(float_only: bool) -> Callable[[Args], None]:
    def check(a: Args) -> None:
        if _dtype_code(a, 0) != _dtype_code(a, "out"):
            _fail(FMT_UN_DTYPES, a.op)
        out = _dtype_code(a, "out")
        if float_only and out not in FLOAT_CODES:
            _fail(FMT_UN_FLOAT_ONLY, a.op, _dtype_name(out))
        if out not in FLOAT_CODES and out not in INT_CODES:
            _fail(FMT_BIN_DTYPE, a.op, _dtype_name(out))
    return check


def _aten_dim(a: Args, d: int, rank: int) -> int:
    r = rank or 1
    if d < -r or d >= r:
        _fail(FMT_DIM, a.op, d, rank)
    return d + r if d < 0 else d


def _mean(a: Args) -> None:
    if _dtype_code(a, 0) != F32 or _dtype_code(a, "out") != F32:
        _fail(FMT_MEAN_F32, a.op, _dtype_name(_dtype_code(a, 0)), _dtype_name(_dtype_code(a, "out")))
    for d in a.values[1] or []:
        _aten_dim(a, int(d), a.tensor(0).dim())


def _aten_softmax(a: Args) -> None:
    _aten_dim(a, int(a.values[1]), a.tensor(0).dim())
    if _dtype_code(a, 0) != F32 or _dtype_code(a, "out") != F32:
        _fail(FMT_F32, a.op)


def _select(a: Args) -> None:
    _same_dtype(a, 0, "out")
    x = a.tensor(0)
    dim, index = int(a.values[1]), int(a.values[2])
    if dim < 0:
        dim += x.dim()
    if dim < 0 or dim >= x.dim():
        _fail(FMT_SELECT_DIM, a.op)
    size = x.shape[dim]
    if index < -size or index >= size:
        _fail(FMT_SELECT_INDEX, a.op, index, size)


def _copy(a: Args) -> None:
    """view_copy, squeeze/unsqueeze_copy, clone: same dtype in and out (element counts: shapes)."""
    _same_dtype(a, 0, "out")


def _permute(a: Args) -> None:
    _same_dtype(a, 0, "out")
    seen: set[int] = set()
    for d in a.values[1]:
        k = _aten_dim(a, int(d), a.tensor(0).dim())
        if k in seen:
            _fail(FMT_PERMUTE_REPEAT, a.op)
        seen.add(k)


def _cat(a: Args) -> None:
    _aten_dim(a, int(a.values[1]), a.tensor("out").dim())
    for v in a.values[0]:
        t = v.meta.get("val") if isinstance(v, torch.fx.Node) else v
        if isinstance(t, torch.Tensor) and t.numel() > 0:   # empty inputs are skipped, as in PyTorch
            got, want = SCALAR_TYPE.get(t.dtype, -1), _dtype_code(a, "out")
            if got != want:
                _fail(FMT_IO_DTYPE, a.op, _dtype_name(got), _dtype_name(want))


def _slice(a: Args) -> None:
    _same_dtype(a, 0, "out")
    _aten_dim(a, int(a.values[1]), a.tensor(0).dim())
    if a.tensor(0).dim() == 0 or int(a.values[4]) <= 0:
        _fail(FMT_SLICE_STEP, a.op)


def _dim_order_copy(allow_cast: bool) -> Callable[[Args], None]:
    def check(a: Args) -> None:
        out = a.tensor("out")
        order = a.values[2] if len(a.values) > 2 else None
        if order is None:
            if _dim_order(out) != list(range(out.dim())):
                _fail(FMT_DIM_ORDER_NONE, a.op)
        else:
            order = [int(d) for d in order]
            if len(order) != out.dim():
                _fail(FMT_DIM_ORDER_RANK, a.op)
            if any(d < 0 or d >= out.dim() for d in order):
                _fail(FMT_DIM_ORDER_RANGE, a.op)
            if not layout_is(out, order):
                _fail(FMT_DIM_ORDER_DISAGREE, a.op)
        if not allow_cast:
            _same_dtype(a, 0, "out")
    return check


def _named(c_name: str, check: Callable[[Args], None]) -> Callable[[Args], None]:
    """An aten:: adapter's check under the op name its C messages use (e.g. aten::add.out for add.Tensor)."""
    def run(a: Args) -> None:
        a.op = c_name
        check(a)
    return run


ADAPTERS: dict[str, Callable[[Args], None]] = {
    "cortex_m::quantized_conv2d": _conv("conv", False),
    "cortex_m::quantized_conv2d_nhwc": _conv("conv", True),
    "cortex_m::quantized_depthwise_conv2d": _conv("depthwise", False),
    "cortex_m::quantized_depthwise_conv2d_nhwc": _conv("depthwise", True),
    "cortex_m::quantized_transpose_conv2d": _conv("transpose", False),
    "cortex_m::quantized_transpose_conv2d_nhwc": _conv("transpose", True),
    "cortex_m::quantized_add": _add,
    "cortex_m::quantized_mul": _mul,
    "cortex_m::quantized_div": _div,
    "cortex_m::quantized_activation": _activation,
    "cortex_m::minimum": _minmax,
    "cortex_m::maximum": _minmax,
    "cortex_m::quantized_linear": _linear,
    "cortex_m::quantized_batch_matmul": _batch_matmul,
    "cortex_m::quantized_avg_pool2d": _avg_pool(False),
    "cortex_m::quantized_avg_pool2d_nhwc": _avg_pool(True),
    "cortex_m::quantized_max_pool2d": _max_pool(False),
    "cortex_m::quantized_max_pool2d_nhwc": _max_pool(True),
    "cortex_m::quantize_per_tensor": _quantize,
    "cortex_m::dequantize_per_tensor": _dequantize,
    "cortex_m::softmax": _softmax,
    "cortex_m::pad": _pad,
    "cortex_m::transpose": _transpose,
    "emlkit::softmax": _emlkit_softmax,
    "emlkit::quantized_avg_pool2d": _emlkit_avg_pool,
    "emlkit::upsample_nearest2d": _upsample,
    "emlkit::upsample_nearest2d_index": _upsample_index,
    "emlkit::quantized_layer_norm": _layer_norm,
}
# aten:: and dim_order_ops:: adapters by edge op (name.overload): (registry overload, name in the C messages, check).
_ATEN: dict[str, tuple[str, str, Callable[[Args], None]]] = {
    f"aten::{n}.{kind}": (f"{c}out", f"aten::{n}.{c}out", _binary(n == "div", kind == "Scalar"))
    for n in ("add", "sub", "mul", "div") for kind, c in (("Tensor", ""), ("Scalar", "Scalar_"))}
_ATEN.update({f"aten::{n}.default": ("out", f"aten::{n}", _unary(n in ("sigmoid", "tanh")))
              for n in ("relu", "hardtanh", "clamp", "sigmoid", "tanh")})
# The copies that only check dtypes: edge overload -> registry overload (C names: the out variant's, bare for
# view_copy, unsqueeze_copy and clone).
_ATEN.update({f"aten::{n}.{o}": (r, f"aten::{n}" + ("" if n in ("view_copy", "unsqueeze_copy", "clone") else f".{r}"),
                                 _copy)
              for n, o, r in (("view_copy", "default", "out"), ("squeeze_copy", "dims", "dims_out"),
                              ("squeeze_copy", "dim", "dim_out"), ("squeeze_copy", "default", "out"),
                              ("unsqueeze_copy", "default", "out"), ("clone", "default", "out"))})
_ATEN.update({
    "aten::mean.dim": ("out", "aten::mean", _mean), "aten::_softmax.default": ("out", "aten::_softmax", _aten_softmax),
    "aten::select_copy.int": ("int_out", "aten::select_copy.int_out", _select),
    "aten::permute_copy.default": ("out", "aten::permute_copy", _permute), "aten::cat.default": ("out", "aten::cat", _cat),
    "aten::slice_copy.Tensor": ("Tensor_out", "aten::slice_copy", _slice),
    "dim_order_ops::_clone_dim_order.default": ("out", "dim_order_ops::_clone_dim_order", _dim_order_copy(False)),
    "dim_order_ops::_to_dim_order_copy.default": ("out", "dim_order_ops::_to_dim_order_copy", _dim_order_copy(True)),
})
# ----------------------------------------------------------------- the float32 kernels (aten_float_*.c)
# Their prepare functions check argument kinds, dtypes, dims and a few geometry limits; the dtypes
# (FMT_DTYPE: "self must be float32, got int8") and those limits are mirrored here, in the C order.
FMT_CONV3D = "%s: 3-D convolution (5-D input) is not supported; 1-D and 2-D are"
FMT_CONV_RANK = "%s: input and weight must be 3-D or 4-D (1-D or 2-D convolution), got %u-D and %u-D"
FMT_WORD = "%s: argument %u must be '%s' or '%s'"
FMT_DECIMALS = "%s: decimals %lld outside [-30, 30]"
FMT_DUP_DIM = "%s: dim %u appears twice"
FMT_DTYPE_ARG = "%s: dtype argument differs from the output's %s"
FMT_NO_STATS = "%s: training=False without running statistics"
FMT_MASK_INDEX = "%s: boolean mask indices are not supported"
FMT_INDEX_TENSORS = "%s: more than %d index tensors"
FMT_DIVISOR = "%s: divisor_override must be None or a nonzero int"
FMT_BAG_MODE = "%s: mode %lld is not sum, mean or max"
FMT_POOL_RANK = "%s: input must be 3-D or 4-D, got %u-D"
FMT_UPSAMPLE_4D = "%s: input must be 4-D, got %u-D"
MAX_INDEX_TENSORS = 4   # aten_float_index.c (AF_MAX_OPS - 1)

_I64 = SCALAR_TYPE[torch.int64]
_FLT = (F32,)
_FLT_INT = (F32, *INT_CODES)
_INTS_NO_BOOL = tuple(c for c in INT_CODES if c != SCALAR_TYPE[torch.bool])
W_F32, W_ANY, W_INT = "float32", "float32, an integer or bool", "an integer or bool"


def _nth(a: Args, i: int | str, k: int = 0) -> Any:
    """Tensor i (or "out"), output k of a node with several (max_pool2d_with_indices: values, indices)."""
    t = a.tensor(i)
    return t[k] if isinstance(t, (tuple, list)) else (t if k == 0 else None)


def _want(a: Args, t: Any, name: str, codes: Sequence[int], want: str) -> None:
    """aten_float.h af_dtype."""
    if isinstance(t, torch.Tensor) and SCALAR_TYPE.get(t.dtype, -1) not in codes:
        _fail(FMT_DTYPE, a.op, name, want, _dtype_name(SCALAR_TYPE.get(t.dtype, -1)))


def _is_tensor(a: Args, i: int) -> bool:
    return isinstance(a.tensor(i), torch.Tensor)


def _same(a: Args, t: Any, out: Any) -> None:
    if isinstance(t, torch.Tensor) and isinstance(out, torch.Tensor) and t.dtype != out.dtype:
        _fail(FMT_IO_DTYPE, a.op, _dtype_name(SCALAR_TYPE.get(t.dtype, -1)), _dtype_name(SCALAR_TYPE.get(out.dtype, -1)))


def _dims(a: Args, dims: Any, rank: int) -> None:
    """aten_float_reduce.c red_mask / flip's dims: in range, no repeats."""
    seen: set[int] = set()
    for d in ([dims] if isinstance(dims, int) else dims or []):
        k = _aten_dim(a, int(d), rank)
        if k in seen:
            _fail(FMT_DUP_DIM, a.op, k)
        seen.add(k)


# unary ops: dtype rule (aten_float_unary.c k_info), "f32", "f32int", "int" or "any"
_UNARY = {"abs": "f32int", "neg": "f32int", "exp": "f32", "expm1": "f32", "log": "f32", "log2": "f32", "log10": "f32",
          "log1p": "f32", "sqrt": "f32", "rsqrt": "f32", "reciprocal": "f32", "ceil": "f32int", "floor": "f32int",
          "round": "f32int", "trunc": "f32int", "sign": "f32int", "erf": "f32", "gelu": "f32", "elu": "f32",
          "leaky_relu": "f32", "hardswish": "f32", "hardsigmoid": "f32", "silu": "f32", "softplus": "f32",
          "threshold": "f32", "bitwise_not": "int", "logical_not": "any"}


def _float_unary(rule: str, word: int | None = None, decimals: bool = False) -> Callable[[Args], None]:
    def check(a: Args) -> None:
        if word is not None and a.values[word] not in ("none", "tanh"):
            _fail(FMT_WORD, a.op, word, "none", "tanh")
        if decimals and not -30 <= int(a.values[1]) <= 30:
            _fail(FMT_DECIMALS, a.op, int(a.values[1]))
        x, out = a.tensor(0), a.tensor("out")
        if rule == "f32":
            _want(a, x, "self", _FLT, W_F32)
            _want(a, out, "out", _FLT, W_F32)
        elif rule == "any":
            _want(a, x, "self", _FLT_INT, W_ANY)
            _want(a, out, "out", _FLT_INT, W_ANY)
        else:
            _want(a, x, "self", INT_CODES if rule == "int" else _FLT_INT, W_INT if rule == "int" else W_ANY)
            if x.dtype != out.dtype:
                _fail(FMT_UN_DTYPES, a.op)
    return check


def _glu(a: Args) -> None:
    _aten_dim(a, int(a.values[1]), a.tensor(0).dim())
    _want(a, a.tensor(0), "self", _FLT, W_F32)
    _want(a, a.tensor("out"), "out", _FLT, W_F32)


def _float_binary(kind: str, mode: bool = False) -> Callable[[Args], None]:
    """aten_float_binary.c binary_prepare: kind "arith" (float32 or integer output), "float" (pow, atan2), "cmp"
    (comparisons and logical ops) or "bitwise"."""
    def check(a: Args) -> None:
        out = a.tensor("out")
        oc = SCALAR_TYPE.get(out.dtype, -1)
        if kind == "bitwise":
            _want(a, out, "out", INT_CODES, W_INT)
        elif kind == "float":
            _want(a, out, "out", _FLT, W_F32)
        else:
            _want(a, out, "out", _FLT_INT, W_ANY)
        for i, name in ((0, "self"), (1, "other")):
            if not _is_tensor(a, i):
                continue
            t = a.tensor(i)
            if kind == "cmp":
                _want(a, t, name, _FLT_INT, W_ANY)
            elif kind == "bitwise":
                _want(a, t, name, INT_CODES, W_INT)
            elif kind == "float" or oc == F32:
                _want(a, t, name, _FLT, W_F32)
            else:
                _want(a, t, name, INT_CODES, "an integer (the output is)")
        if mode:
            rm = a.values[2]
            if rm not in (None, "trunc", "floor"):
                _fail(FMT_WORD, a.op, 2, "trunc", "floor")
            if rm is None and oc != F32:
                _fail(FMT_BIN_INT_DIV, a.op)
    return check


def _where(a: Args) -> None:
    _want(a, a.tensor(0), "condition", (SCALAR_TYPE[torch.bool], 0), "bool or uint8")
    out = a.tensor("out")
    for i in (1, 2):
        if _is_tensor(a, i) and a.tensor(i).dtype != out.dtype:
            _fail(FMT_IO_DTYPE, a.op, _dtype_name(_dtype_code(a, i)), _dtype_name(_dtype_code(a, "out")))


def _clamp_tensor(a: Args) -> None:
    _want(a, a.tensor(0), "self", _FLT, W_F32)
    _want(a, a.tensor("out"), "out", _FLT, W_F32)
    for i, name in ((1, "min"), (2, "max")):
        if _is_tensor(a, i):
            _want(a, a.tensor(i), name, _FLT, W_F32)


def _float_reduce(kind: str, dim: int | None, dtype_arg: int | None = None) -> Callable[[Args], None]:
    """aten_float_reduce.c reduce_prepare / red_dtypes: kind "sum" (sum, prod), "mean" (mean, var), "arg" (argmax,
    argmin), "ext" (amax, amin, max/min over a dim), "median", "any"."""
    def check(a: Args) -> None:
        x, out, idx = a.tensor(0), _nth(a, "out", 0), _nth(a, "out", 1)
        if dim is not None:
            _dims(a, a.values[dim], x.dim())
        if dtype_arg is not None and len(a.values) > dtype_arg and a.values[dtype_arg] is not None \
                and a.values[dtype_arg] != out.dtype:
            _fail(FMT_DTYPE_ARG, a.op, _dtype_name(SCALAR_TYPE.get(out.dtype, -1)))
        ints_ok = kind not in ("mean", "median")
        _want(a, x, "self", _FLT_INT if ints_ok else _FLT, W_ANY if ints_ok else W_F32)
        if kind == "arg":
            _want(a, out, "out", (_I64,), "int64")
            return
        if idx is not None:
            _want(a, idx, "indices", (_I64,), "int64")
        if kind == "any":
            _want(a, out, "out", (SCALAR_TYPE[torch.bool], 0), "bool or uint8")
        elif kind == "sum":
            flt = x.dtype == torch.float32
            _want(a, out, "out", _FLT if flt else (_I64, I32), W_F32 if flt else "int64 or int32")
        elif out.dtype != x.dtype:
            _fail(FMT_IO_DTYPE, a.op, _dtype_name(SCALAR_TYPE.get(x.dtype, -1)), _dtype_name(SCALAR_TYPE.get(out.dtype, -1)))
    return check


def _cumsum(a: Args) -> None:
    x, out = a.tensor(0), a.tensor("out")
    _aten_dim(a, int(a.values[1]), x.dim())
    if len(a.values) > 2 and a.values[2] is not None and a.values[2] != out.dtype:
        _fail(FMT_DTYPE_ARG, a.op, _dtype_name(SCALAR_TYPE.get(out.dtype, -1)))
    _want(a, x, "self", _FLT_INT, W_ANY)
    flt = x.dtype == torch.float32
    _want(a, out, "out", _FLT if flt else (_I64,), W_F32 if flt else "int64")


def _log_softmax(a: Args) -> None:
    _aten_dim(a, int(a.values[1]), a.tensor(0).dim())
    _want(a, a.tensor(0), "self", _FLT, W_F32)
    _want(a, a.tensor("out"), "out", _FLT, W_F32)


def _norm(affine: tuple[int, ...], training: int | None = None) -> Callable[[Args], None]:
    """native_layer_norm, native_group_norm and the batch norms: float32 input, output and parameters."""
    def check(a: Args) -> None:
        _want(a, a.tensor(0), "input", _FLT, W_F32)
        _want(a, _nth(a, "out", 0), "out", _FLT, W_F32)
        for i in affine:
            if _is_tensor(a, i):
                _want(a, a.tensor(i), "weight" if (i - affine[0]) % 2 == 0 else "bias", _FLT, W_F32)
        if training is not None and not a.values[training]:
            _fail(FMT_NO_STATS, a.op)
    return check


def _conv(a: Args) -> None:
    x, w = a.tensor(0), a.tensor(1)
    if x.dim() == 5:
        _fail(FMT_CONV3D, a.op)
    if x.dim() not in (3, 4) or w.dim() != x.dim():
        _fail(FMT_CONV_RANK, a.op, x.dim(), w.dim())
    for i, name in ((0, "input"), (1, "weight"), ("out", "out"), (2, "bias")):
        if i == "out" or _is_tensor(a, i):   # type: ignore[arg-type]
            _want(a, a.tensor(i), name, _FLT, W_F32)


def _matmul(names: tuple[tuple[int | str, str], ...]) -> Callable[[Args], None]:
    def check(a: Args) -> None:
        for i, name in names:
            if i == "out" or _is_tensor(a, i):   # type: ignore[arg-type]
                _want(a, a.tensor(i), name, _FLT, W_F32)
    return check


def _pool(kind: str) -> Callable[[Args], None]:
    """aten_float_pool.c: kind "max", "avg", "amax" (adaptive max), "aavg", "bilinear", "nearest"."""
    def check(a: Args) -> None:
        x, out = a.tensor(0), _nth(a, "out", 0)
        if kind in ("max", "amax"):
            _want(a, x, "self", (F32, *_INTS_NO_BOOL), "float32 or an integer")
            _same(a, x, out)
            _want(a, _nth(a, "out", 1), "indices", (_I64,), "int64")
        elif kind == "nearest":
            _same(a, x, out)
        else:
            _want(a, x, "input" if kind == "bilinear" else "self", _FLT, W_F32)
            _want(a, out, "out", _FLT, W_F32)
        if kind == "avg" and len(a.values) > 6 and a.values[6] is not None and int(a.values[6]) == 0:
            _fail(FMT_DIVISOR, a.op)
        if kind in ("max", "avg"):
            k = list(a.values[1])
            k = k * 2 if len(k) == 1 else k
            p = list(a.values[3]) if a.values[3] is not None else [0]
            p = p * 2 if len(p) == 1 else p
            if p[0] > k[0] // 2 or p[1] > k[1] // 2:
                _fail(FMT_POOL_PADDING, a.op)
        if kind in ("bilinear", "nearest"):
            if x.dim() != 4:
                _fail(FMT_UPSAMPLE_4D, a.op, x.dim())
        elif x.dim() not in (3, 4):
            _fail(FMT_POOL_RANK, a.op, x.dim())
    return check


def _val(v: Any) -> Any:
    return v.meta.get("val") if isinstance(v, torch.fx.Node) else v


def _index_tensors(a: Args, i: int) -> None:
    n = 0
    for v in a.values[i]:
        t = _val(v)
        if not isinstance(t, torch.Tensor):
            continue
        if t.dtype in (torch.bool, torch.uint8):
            _fail(FMT_MASK_INDEX, a.op)
        _want(a, t, "indices", (_I64, I32), "int64 or int32")
        if n == MAX_INDEX_TENSORS:
            _fail(FMT_INDEX_TENSORS, a.op, MAX_INDEX_TENSORS)
        n += 1


def _data(kind: str) -> Callable[[Args], None]:
    """aten_float_index.c: the copies (out of self's dtype), index ops, creation ops."""
    def check(a: Args) -> None:
        out = a.tensor("out")
        if kind in ("full", "arange", "empty"):
            if kind == "full":
                _want(a, out, "out", (F32, SCALAR_TYPE[torch.float64], *INT_CODES), "float32, float64, an integer or bool")
            elif kind == "arange":
                _want(a, out, "out", (F32, _I64, I32), "float32, int64 or int32")
            return
        x = a.tensor(0)
        if kind == "full_like":
            _want(a, out, "out", (F32, SCALAR_TYPE[torch.float64], *INT_CODES), "float32, float64, an integer or bool")
            return
        if kind == "copy":
            src = a.tensor(1)
            if src.dtype != out.dtype:
                _want(a, src, "src", _FLT_INT, W_ANY)
                _want(a, out, "out", _FLT_INT, W_ANY)
            return
        if kind == "split":
            for t in out if isinstance(out, (list, tuple)) else [out]:
                _same(a, x, t)
            return
        _same(a, x, out)
        if kind == "flip":
            _dims(a, a.values[1], x.dim())
        elif kind == "slice_scatter":
            _same(a, a.tensor(1), out)
        elif kind in ("index_select", "gather"):
            _aten_dim(a, int(a.values[1]), x.dim())
            _want(a, a.tensor(2), "index", (_I64, I32), "int64 or int32")
        elif kind == "embedding":
            _want(a, a.tensor(1), "indices", (_I64, I32), "int64 or int32")
        elif kind == "index":
            _index_tensors(a, 1)
        elif kind == "index_put":
            _same(a, a.tensor(2), out)
            _index_tensors(a, 1)
    return check


def _embedding_bag(a: Args) -> None:
    _want(a, a.tensor(0), "weight", _FLT, W_F32)
    _want(a, a.tensor(1), "indices", (_I64, I32), "int64 or int32")
    _want(a, a.tensor(2), "offsets", (_I64, I32), "int64 or int32")
    for k in (1, 2, 3):
        _want(a, _nth(a, "out", k), "out", (_I64, I32), "int64 or int32")  # the Arm flow narrows to int32
    if int(a.values[4]) not in (0, 1, 2):
        _fail(FMT_BAG_MODE, a.op, int(a.values[4]))
    if len(a.values) > 6 and _is_tensor(a, 6):
        _want(a, a.tensor(6), "per_sample_weights", _FLT, W_F32)


_FLOAT_ATEN: dict[str, tuple[str, str, Callable[[Args], None]]] = {
    "aten::convolution.default": ("out", "aten::convolution.out", _conv),
    "aten::mm.default": ("out", "aten::mm.out", _matmul(((0, "self"), (1, "mat2"), ("out", "out")))),
    "aten::bmm.default": ("out", "aten::bmm.out", _matmul(((0, "self"), (1, "mat2"), ("out", "out")))),
    "aten::addmm.default": ("out", "aten::addmm.out", _matmul(((1, "self"), (2, "mat2"), ("out", "out"), (0, "self")))),
    "aten::linear.default": ("out", "aten::linear.out", _matmul(((0, "input"), (1, "weight"), ("out", "out"), (2, "bias")))),
    "aten::_trilinear.default": ("out", "aten::_trilinear.out", _matmul((("out", "out"), (0, "i1"), (1, "i2"), (2, "i3")))),
    "aten::max_pool2d_with_indices.default": ("out", "aten::max_pool2d_with_indices.out", _pool("max")),
    "aten::avg_pool2d.default": ("out", "aten::avg_pool2d.out", _pool("avg")),
    "aten::_adaptive_avg_pool2d.default": ("out", "aten::_adaptive_avg_pool2d.out", _pool("aavg")),
    "aten::adaptive_max_pool2d.default": ("out", "aten::adaptive_max_pool2d.out", _pool("amax")),
    "aten::upsample_nearest2d.vec": ("vec_out", "aten::upsample_nearest2d.vec_out", _pool("nearest")),
    "aten::upsample_bilinear2d.vec": ("vec_out", "aten::upsample_bilinear2d.vec_out", _pool("bilinear")),
    "aten::round.decimals": ("decimals_out", "aten::round.decimals_out", _float_unary("f32", decimals=True)),
    "aten::pow.Tensor_Scalar": ("Tensor_Scalar_out", "aten::pow.Tensor_Scalar_out", _float_unary("f32")),
    "aten::fmod.Scalar": ("Scalar_out", "aten::fmod.Scalar_out", _float_unary("f32")),
    "aten::remainder.Scalar": ("Scalar_out", "aten::remainder.Scalar_out", _float_unary("f32")),
    "aten::glu.default": ("out", "aten::glu.out", _glu),
    "aten::maximum.default": ("out", "aten::maximum.out", _float_binary("arith")),
    "aten::minimum.default": ("out", "aten::minimum.out", _float_binary("arith")),
    "aten::div.Tensor_mode": ("out_mode", "aten::div.out_mode", _float_binary("arith", mode=True)),
    "aten::fmod.Tensor": ("Tensor_out", "aten::fmod.Tensor_out", _float_binary("arith")),
    "aten::remainder.Tensor": ("Tensor_out", "aten::remainder.Tensor_out", _float_binary("arith")),
    "aten::pow.Tensor_Tensor": ("Tensor_Tensor_out", "aten::pow.Tensor_Tensor_out", _float_binary("float")),
    "aten::pow.Scalar": ("Scalar_out", "aten::pow.Scalar_out", _float_binary("float")),
    "aten::atan2.default": ("out", "aten::atan2.out", _float_binary("float")),
    "aten::where.self": ("self_out", "aten::where.self_out", _where),
    "aten::clamp.Tensor": ("Tensor_out", "aten::clamp.Tensor_out", _clamp_tensor),
    "aten::sum.dim_IntList": ("IntList_out", "aten::sum.IntList_out", _float_reduce("sum", 1, 3)),
    "aten::mean.default": ("dtype_out", "aten::mean.dtype_out", _float_reduce("mean", None, 1)),
    "aten::prod.dim_int": ("int_out", "aten::prod.int_out", _float_reduce("sum", 1, 3)),
    "aten::amax.default": ("out", "aten::amax.out", _float_reduce("ext", 1)),
    "aten::amin.default": ("out", "aten::amin.out", _float_reduce("ext", 1)),
    "aten::argmax.default": ("out", "aten::argmax.out", _float_reduce("arg", 1)),
    "aten::argmin.default": ("out", "aten::argmin.out", _float_reduce("arg", 1)),
    "aten::max.dim": ("dim_max", "aten::max.dim_max", _float_reduce("ext", 1)),
    "aten::min.dim": ("dim_min", "aten::min.dim_min", _float_reduce("ext", 1)),
    "aten::any.dim": ("out", "aten::any.out", _float_reduce("any", 1)),
    "aten::any.dims": ("dims_out", "aten::any.dims_out", _float_reduce("any", 1)),
    "aten::any.default": ("all_out", "aten::any.all_out", _float_reduce("any", None)),
    "aten::var.correction": ("correction_out", "aten::var.correction_out", _float_reduce("mean", 1)),
    "aten::median.dim": ("dim_values", "aten::median.dim_values", _float_reduce("median", 1)),
    "aten::median.default": ("out", "aten::median.out", _float_reduce("median", None)),
    "aten::cumsum.default": ("out", "aten::cumsum.out", _cumsum),
    "aten::_log_softmax.default": ("out", "aten::_log_softmax.out", _log_softmax),
    "aten::native_layer_norm.default": ("out", "aten::native_layer_norm.out", _norm((2, 3))),
    "aten::native_group_norm.default": ("out", "aten::native_group_norm.out", _norm((1, 2))),
    "aten::_native_batch_norm_legit_no_training.default": (
        "out", "aten::_native_batch_norm_legit_no_training.out", _norm((1, 2, 3, 4))),
    "aten::_native_batch_norm_legit.no_stats": ("no_stats_out", "aten::_native_batch_norm_legit.no_stats_out",
                                                _norm((1, 2), training=3)),
    "aten::expand_copy.default": ("out", "aten::expand_copy.out", _data("copy_same")),
    "aten::repeat.default": ("out", "aten::repeat.out", _data("copy_same")),
    "aten::flip.default": ("out", "aten::flip.out", _data("flip")),
    "aten::constant_pad_nd.default": ("out", "aten::constant_pad_nd.out", _data("copy_same")),
    "aten::copy.default": ("out", "aten::copy.out", _data("copy")),
    "aten::slice_scatter.default": ("out", "aten::slice_scatter.out", _data("slice_scatter")),
    "aten::split_with_sizes_copy.default": ("out", "aten::split_with_sizes_copy.out", _data("split")),
    "aten::index_select.default": ("out", "aten::index_select.out", _data("index_select")),
    "aten::embedding.default": ("out", "aten::embedding.out", _data("embedding")),
    "aten::_embedding_bag.default": ("out", "aten::_embedding_bag.out", _embedding_bag),
    "aten::gather.default": ("out", "aten::gather.out", _data("gather")),
    "aten::index.Tensor": ("Tensor_out", "aten::index.Tensor_out", _data("index")),
    "aten::index_put.default": ("out", "aten::index_put.out", _data("index_put")),
    "aten::full.default": ("out", "aten::full.out", _data("full")),
    "aten::full_like.default": ("out", "aten::full_like.out", _data("full_like")),
    "aten::scalar_tensor.default": ("out", "aten::scalar_tensor.out", _data("full")),
    "aten::arange.default": ("out", "aten::arange.out", _data("arange")),
    "aten::arange.start_step": ("start_out", "aten::arange.start_out", _data("arange")),
    "dim_order_ops::_empty_dim_order.default": ("out", "dim_order_ops::_empty_dim_order.out", _data("empty")),
}
_FLOAT_ATEN.update({f"aten::{n}.default": ("out", f"aten::{n}.out",
                                           _float_unary(rule, word=1 if n == "gelu" else None))
                    for n, rule in _UNARY.items()})
_FLOAT_ATEN.update({f"aten::{n}.{o}": (f"{o}_out", f"aten::{n}.{o}_out", _float_binary("cmp"))
                    for n in ("gt", "ge", "lt", "le", "eq", "ne") for o in ("Tensor", "Scalar")})
_FLOAT_ATEN.update({f"aten::logical_{n}.default": ("out", f"aten::logical_{n}.out", _float_binary("cmp"))
                    for n in ("and", "or", "xor")})
_FLOAT_ATEN.update({f"aten::bitwise_{n}.Tensor": ("Tensor_out", f"aten::bitwise_{n}.Tensor_out", _float_binary("bitwise"))
                    for n in ("and", "or", "xor")})
_ATEN.update(_FLOAT_ATEN)

# The registry entry (firmware/ops/*.def: "name.overload") whose prepare function each check mirrors.
REGISTRY_ENTRY = {k: f"{k}.out" for k in ADAPTERS}
for _key, (_overload, _c_name, _check) in _ATEN.items():
    ADAPTERS[_key] = _named(_c_name, _check)
    REGISTRY_ENTRY[_key] = f"{_key.rpartition('.')[0]}.{_overload}"


def node_args(node: torch.fx.Node) -> list[Any]:
    """The node's arguments by schema position, defaults filled in (as the emitter writes them)."""
    schema = node.target._schema  # type: ignore[union-attr]
    out = []
    for i, arg in enumerate(schema.arguments):
        if arg.kwarg_only and arg.name == "out":
            continue
        if i < len(node.args):
            out.append(node.args[i])
        elif arg.name in node.kwargs:
            out.append(node.kwargs[arg.name])
        else:
            out.append(arg.default_value)
    return out


def constant_lookup(ep: Any) -> Callable[[Any], torch.Tensor | None]:
    """Constant tensor behind a placeholder of an ExportedProgram (parameters, buffers, lifted constants)."""
    sig = getattr(ep, "graph_signature", None)
    names: dict[str, str] = {}
    if ep is None:
        return lambda n: None
    if sig is not None:
        for mapping in (sig.inputs_to_parameters, sig.inputs_to_buffers, sig.inputs_to_lifted_tensor_constants):
            names.update(mapping)

    def lookup(n: Any) -> torch.Tensor | None:
        if not isinstance(n, torch.fx.Node):
            return None
        key = names.get(n.name)
        if key is None:
            return None
        v = ep.state_dict.get(key) if key in ep.state_dict else ep.constants.get(key)
        return v if isinstance(v, torch.Tensor) else None
    return lookup


def check_node(node: torch.fx.Node, constant: Callable[[Any], torch.Tensor | None]) -> str | None:
    """The firmware adapter's message if it would refuse this node at load, else None."""
    schema = getattr(node.target, "_schema", None)
    if node.op != "call_function" or schema is None:
        return None
    name = str(schema.name)
    check = ADAPTERS.get(f"{name}.{schema.overload_name or 'default'}") or ADAPTERS.get(name)
    if check is None:
        return None
    try:
        check(Args(name, node_args(node), node, constant))
    except Refused as r:
        return str(r)
    return None


# ----------------------------------------------------------------- the loader's aliasing check (method.c)
ELEM_SIZE = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1}


def _span(v: Any) -> tuple[tuple[str, int], int, int] | None:
    """(memory, offset, bytes) of a program Tensor value as the loader places it, None if it has no data."""
    t = v.val
    if type(t).__name__ != "Tensor":
        return None
    n = math.prod(t.sizes) * ELEM_SIZE.get(int(t.scalar_type), 0)
    if n == 0:
        return None
    if t.allocation_info is not None:     # planned: memory buffer memory_id at a 64-bit offset
        a = t.allocation_info
        return ("planned", int(a.memory_id)), (int(a.memory_offset_high) << 32) | int(a.memory_offset_low), n
    if t.data_buffer_idx > 0:             # a constant: its own buffer in the program
        return ("constant", int(t.data_buffer_idx)), 0, n
    return None


def check_aliasing(program: Any) -> str | None:
    """The loader's message if a kernel call of the emitted program (executorch.exir.schema.Program) writes its
    output (its last argument) over the bytes of one of its inputs, else None."""
    plan = program.execution_plan[0]
    spans = [_span(v) for v in plan.values]

    def overlap(i: int, j: int) -> bool:
        a, b = spans[i], spans[j]
        return (i != j and a is not None and b is not None and a[0] == b[0]
                and a[1] < b[1] + b[2] and b[1] < a[1] + a[2])

    pc = 0
    for chain in plan.chains:
        for ins in chain.instructions:
            args = list(getattr(ins.instr_args, "args", []))
            if type(ins.instr_args).__name__ == "KernelCall" and len(args) >= 2 and spans[args[-1]] is not None:
                ov = args[-1]
                for k, vi in enumerate(args[:-1]):
                    if vi == ov:      # the out argument repeated as the return value
                        continue
                    val = plan.values[vi].val
                    items = ([vi] if type(val).__name__ == "Tensor"
                             else [j for j in getattr(val, "items", []) if j >= 0]
                             if type(val).__name__ in ("TensorList", "OptionalTensorList") else [])
                    if any(overlap(ov, j) for j in items):
                        return c_format(FMT_OVERLAP, pc, k)
            pc += 1
    return None
