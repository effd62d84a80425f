"""The cortex_m:: C kernels (firmware/kernels) against ExecuTorch's Python
references (executorch/backends/cortex_m/ops/operators.py), bit for bit.

Each test draws shapes and quantization parameters with hypothesis, random
data from a seeded numpy generator, runs the torch reference op and the host
build of the kernel (both the `_ref` function and the dispatcher) and compares.
Exception, documented in softmax.c: softmax may differ by one step where the
reference's SLEEF exp rounds differently; the test bounds how often.
"""

from __future__ import annotations

import ctypes as C
import math
import shutil
import subprocess

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Importing the passes package first avoids a circular import inside the wheel;
# it loads ops/operators.py, which registers torch.ops.cortex_m.
import executorch.backends.cortex_m.passes  # noqa: F401
from kernels_lib import (KERNELS, Kernels, QAdd, QBcastWalk, QBmm, QConv, QEmbeddingBag, QFloorDiv, QGru, QLinear, QLstm, QMul, QPool,
                         QRowWalk,                          build_library, ptr)

ops = torch.ops.cortex_m
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="session")
def K() -> Kernels:
    return Kernels(build_library())


def rng_from(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def s8(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def nhwc_to_torch(x: np.ndarray) -> torch.Tensor:
    """NHWC bytes as the logical NCHW, channels-last tensor the graph passes."""
    return torch.from_numpy(x).permute(0, 3, 1, 2)


def torch_to_nhwc(t: torch.Tensor) -> np.ndarray:
    return t.permute(0, 2, 3, 1).contiguous().numpy()


# Requantization parameters: a Q31 multiplier (mostly in [0.5, 1) like real
# scales, sometimes anything non-negative) and shifts including positive ones.
mults = st.one_of(st.integers(1 << 30, (1 << 31) - 1), st.integers(0, (1 << 31) - 1))
shifts = st.integers(-31, 6)
# quantized_add takes any int32 multiplier: ExecuTorch lowers x - y to an add whose other_multiplier is negative
signed_mults = st.one_of(mults, st.integers(-(1 << 31), -1))
seeds = st.integers(0, 2**32 - 1)
zps = st.integers(-128, 127)


def both(K: Kernels, name: str):
    """The portable function and the dispatcher (same code on the host, but
    both are public and both must be right)."""
    return [K.fn(name, True), K.fn(name, False)]


# ---------------------------------------------------------------- requantize
@SETTINGS
@given(seed=seeds, zp=zps, m=mults, s=shifts)
def test_requantize_through_mul(K, seed, zp, m, s):
    """quantized_mul exercises k_requantize on the full int8 product range."""
    rng = rng_from(seed)
    a, b = s8(rng, 300), s8(rng, 300)
    p = QMul(a_zp=zp, b_zp=-zp // 2, out_zp=rng.integers(-128, 128), out_mult=m, out_shift=s)
    want = ops.quantized_mul(torch.from_numpy(a), p.a_zp, torch.from_numpy(b), p.b_zp,
                             p.out_zp, m, s).numpy()
    for f in both(K, "emk_mul_s8"):
        out = np.zeros_like(a)
        f(ptr(a), a.size, ptr(b), b.size, ptr(out), C.byref(p))
        np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------- add / mul
@SETTINGS
@given(seed=seeds, za=zps, zb=zps, zo=zps, ma=signed_mults, mb=signed_mults, mo=signed_mults,
       sa=st.integers(-31, 2), sb=st.integers(-31, 2), so=st.integers(-31, 2),
       broadcast=st.sampled_from(["none", "a", "b"]), lo=st.integers(-128, 0), hi=st.integers(0, 127))
def test_quantized_add(K, seed, za, zb, zo, ma, mb, mo, sa, sb, so, broadcast, lo, hi):
    rng = rng_from(seed)
    n, h, w, c = 1, int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 20))
    a = s8(rng, n, h, w, c) if broadcast != "a" else s8(rng, 1, 1, 1, c)
    b = s8(rng, n, h, w, c) if broadcast != "b" else s8(rng, 1, 1, 1, c)
    want = ops.quantized_add(nhwc_to_torch(a), za, ma, sa, nhwc_to_torch(b), zb, mb, sb,
                             zo, mo, so, lo, hi)
    want = torch_to_nhwc(want).reshape(-1)
    p = QAdd(za, ma, sa, zb, mb, sb, zo, mo, so, lo, hi)
    for f in both(K, "emk_add_s8"):
        n_out = max(a.size, b.size)
        out = np.full(n_out + 16, 7, np.int8)  # guard bytes: a block loop running too far would write them
        f(ptr(a), a.size, ptr(b), b.size, ptr(out), C.byref(p))
        np.testing.assert_array_equal(out[:n_out], want)
        assert (out[n_out:] == 7).all()


@SETTINGS
@given(seed=seeds, za=zps, zb=zps, zo=zps, m=mults, s=shifts, bc=st.booleans())
def test_quantized_mul_broadcast(K, seed, za, zb, zo, m, s, bc):
    rng = rng_from(seed)
    h, w, c = int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 20))
    a = s8(rng, 1, h, w, c)
    b = s8(rng, 1, 1, 1, c) if bc else s8(rng, 1, h, w, c)
    want = torch_to_nhwc(ops.quantized_mul(nhwc_to_torch(a), za, nhwc_to_torch(b), zb, zo, m, s))
    p = QMul(za, zb, zo, m, s)
    for f in both(K, "emk_mul_s8"):
        out = np.full(a.size + 16, 7, np.int8)  # guard bytes, as in test_quantized_add
        f(ptr(a), a.size, ptr(b), b.size, ptr(out), C.byref(p))
        np.testing.assert_array_equal(out[:a.size], want.reshape(-1))
        assert (out[a.size:] == 7).all()


# ---------------------------------------------------------------- div
@SETTINGS
@given(seed=seeds, za=zps, zb=zps, zo=zps, scale=st.floats(1e-3, 100.0), wide=st.booleans())
def test_quantized_div(K, seed, za, zb, zo, scale, wide):
    rng = rng_from(seed)
    if wide:
        a = rng.integers(-32768, 32768, 257, dtype=np.int16)
        b = rng.integers(-32768, 32768, 257, dtype=np.int16)
        b[:5] = zb  # division by a zero value
        za, zb, zo, name = za * 100, zb, zo * 100, "emk_div_s16"
    else:
        a, b = s8(rng, 257), s8(rng, 257)
        b[:5] = zb
        name = "emk_div_s8"
    want = ops.quantized_div(torch.from_numpy(a), za, torch.from_numpy(b), zb, zo, scale).numpy()
    for f in both(K, name):
        # Canary elements after the output: the kernel writes exactly a.size elements.
        buf = np.full(a.size + 8, 0x5A, dtype=a.dtype)
        f(ptr(a), ptr(b), ptr(buf), a.size, za, zb, zo, scale)
        np.testing.assert_array_equal(buf[:a.size], want)
        assert (buf[a.size:] == 0x5A).all(), "wrote past the output"


# ---------------------------------------------------------------- LUT
@SETTINGS
@given(seed=seeds, n=st.integers(1, 100))
def test_quantized_activation(K, seed, n):
    rng = rng_from(seed)
    x, lut = s8(rng, n), s8(rng, 256)
    x[0] = -128
    want = ops.quantized_activation(torch.from_numpy(x), torch.from_numpy(lut)).numpy()
    for f in both(K, "emk_lut_s8"):
        buf = np.full(n + 8, 0x5A, dtype=np.int8)     # canaries after the output
        f(ptr(x), ptr(buf), n, ptr(lut))
        np.testing.assert_array_equal(buf[:n], want)
        assert (buf[n:] == 0x5A).all(), "wrote past the output"


# ---------------------------------------------------------------- conv family
conv_geom = st.fixed_dictionaries({
    "h": st.integers(1, 7), "w": st.integers(1, 7), "kh": st.integers(1, 3), "kw": st.integers(1, 3),
    "sh": st.integers(1, 3), "sw": st.integers(1, 3), "ph": st.integers(0, 2), "pw": st.integers(0, 2),
    "dh": st.integers(1, 2), "dw": st.integers(1, 2),
})


def out_size(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def dilate_ohwi(w: np.ndarray, dh: int, dw: int) -> np.ndarray:
    """torch has no dilated int32 conv: a dilated kernel equals an undilated
    one with zeros between the taps, which the reference can run exactly."""
    o, kh, kw, i = w.shape
    out = np.zeros((o, (kh - 1) * dh + 1, (kw - 1) * dw + 1, i), w.dtype)
    out[:, ::dh, ::dw, :] = w
    return out


def requant_arrays(rng: np.random.Generator, c: int) -> tuple[np.ndarray, np.ndarray]:
    mult = rng.integers(1 << 30, 1 << 31, c).astype(np.int32)
    shift = rng.integers(-12, 3, c).astype(np.int32)
    return mult, shift


@SETTINGS
@given(seed=seeds, g=conv_geom, cin=st.integers(1, 20), cout=st.integers(1, 9),
       groups=st.sampled_from([1, 1, 2]), in_off=st.integers(-127, 128), out_off=zps,
       use_bias=st.booleans(), batch=st.integers(1, 2))
def test_quantized_conv2d(K, seed, g, cin, cout, groups, in_off, out_off, use_bias, batch):
    cin, cout = cin * groups, cout * groups
    oh = out_size(g["h"], g["kh"], g["sh"], g["ph"], g["dh"])
    ow = out_size(g["w"], g["kw"], g["sw"], g["pw"], g["dw"])
    if oh < 1 or ow < 1:
        return
    rng = rng_from(seed)
    x = s8(rng, batch, g["h"], g["w"], cin)
    w = s8(rng, cout, g["kh"], g["kw"], cin // groups)
    bias = rng.integers(-(1 << 16), 1 << 16, cout).astype(np.int32) if use_bias else None
    mult, shift = requant_arrays(rng, cout)
    lo, hi = -128, int(rng.integers(0, 128))
    want = ops.quantized_conv2d(
        nhwc_to_torch(x), torch.from_numpy(dilate_ohwi(w, g["dh"], g["dw"])),
        None if bias is None else torch.from_numpy(bias),
        [g["sh"], g["sw"]], [g["ph"], g["pw"]], [1, 1], in_off, out_off,
        torch.from_numpy(mult), torch.from_numpy(shift), lo, hi, torch.empty(0, dtype=torch.uint8))
    want = torch_to_nhwc(want)
    p = QConv(batch, g["h"], g["w"], cin, oh, ow, cout, g["kh"], g["kw"], g["sh"], g["sw"],
              g["ph"], g["pw"], g["dh"], g["dw"], groups, in_off, out_off, lo, hi)
    for ref in (True, False):
        out = np.zeros((batch, oh, ow, cout), np.int8)
        K.conv("emk_conv2d_s8", ref, p, ptr(x), ptr(w), ptr(bias), ptr(mult), ptr(shift), ptr(out))
        np.testing.assert_array_equal(out, want)


@SETTINGS
@given(seed=seeds, g=conv_geom, cin=st.integers(1, 40), dm=st.sampled_from([1, 1, 2, 3]),
       in_off=st.integers(-127, 128), out_off=zps, use_bias=st.booleans())
def test_quantized_depthwise_conv2d(K, seed, g, cin, dm, in_off, out_off, use_bias):
    cout = cin * dm
    oh = out_size(g["h"], g["kh"], g["sh"], g["ph"], g["dh"])
    ow = out_size(g["w"], g["kw"], g["sw"], g["pw"], g["dw"])
    if oh < 1 or ow < 1:
        return
    rng = rng_from(seed)
    x = s8(rng, 1, g["h"], g["w"], cin)
    w = s8(rng, 1, g["kh"], g["kw"], cout)
    bias = rng.integers(-(1 << 16), 1 << 16, cout).astype(np.int32) if use_bias else None
    mult, shift = requant_arrays(rng, cout)
    lo, hi = int(rng.integers(-128, 0)), 127
    want = ops.quantized_depthwise_conv2d(
        nhwc_to_torch(x), torch.from_numpy(dilate_ohwi(w, g["dh"], g["dw"])),
        None if bias is None else torch.from_numpy(bias),
        [g["sh"], g["sw"]], [g["ph"], g["pw"]], [1, 1], dm, in_off, out_off,
        torch.from_numpy(mult), torch.from_numpy(shift), lo, hi, torch.empty(0, dtype=torch.uint8))
    want = torch_to_nhwc(want)
    p = QConv(1, g["h"], g["w"], cin, oh, ow, cout, g["kh"], g["kw"], g["sh"], g["sw"],
              g["ph"], g["pw"], g["dh"], g["dw"], cin, in_off, out_off, lo, hi)
    for ref in (True, False):
        out = np.zeros((1, oh, ow, cout), np.int8)
        K.conv("emk_depthwise_conv2d_s8", ref, p, ptr(x), ptr(w), ptr(bias), ptr(mult), ptr(shift), ptr(out))
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("width", [2, 3, 4, 5, 6, 9])
def test_depthwise_3x3_window_pairs(K, stride, pad, width):
    """The portable depthwise's two-window 3x3 kernel at stride 1 and 2: pairs inside the input, pairs with the
    left or the right padding column (a padding byte of -input_offset against the inside start value), and the
    windows it leaves to the one-window loops, with and without a bias, against the operator reference."""
    rng = rng_from(1000 * stride + 100 * pad + width)
    h, cin = 5, 7
    oh, ow = out_size(h, 3, stride, pad, 1), out_size(width, 3, stride, pad, 1)
    if oh < 1 or ow < 1:
        pytest.skip("no output")
    for in_off, use_bias in ((128, True), (-127, False), (int(rng.integers(-127, 129)), True)):
        x = s8(rng, 1, h, width, cin)
        w = s8(rng, 1, 3, 3, cin)
        bias = rng.integers(-(1 << 16), 1 << 16, cin).astype(np.int32) if use_bias else None
        mult, shift = requant_arrays(rng, cin)
        want = torch_to_nhwc(ops.quantized_depthwise_conv2d(
            nhwc_to_torch(x), torch.from_numpy(w), None if bias is None else torch.from_numpy(bias),
            [stride, stride], [pad, pad], [1, 1], 1, in_off, 3, torch.from_numpy(mult), torch.from_numpy(shift),
            -128, 127, torch.empty(0, dtype=torch.uint8)))
        p = QConv(1, h, width, cin, oh, ow, cin, 3, 3, stride, stride, pad, pad, 1, 1, cin, in_off, 3, -128, 127)
        out = np.zeros((1, oh, ow, cin), np.int8)
        K.conv("emk_depthwise_conv2d_s8", False, p, ptr(x), ptr(w), ptr(bias), ptr(mult), ptr(shift), ptr(out))
        np.testing.assert_array_equal(out, want)


def _depthwise_in_place(K, rng, h, w, cin, k, pad, bias, more):
    """emk_depthwise_conv2d_s8 with its output MORE bytes further before its input than the firmware's lead
    (emk_depthwise_conv2d_s8_in_place_lead), in one buffer: (the output, the reference's)."""
    x, wt = s8(rng, 1, h, w, cin), s8(rng, 1, k, k, cin)
    mult, shift = requant_arrays(rng, cin)
    in_off = int(rng.integers(-127, 129))
    want = torch_to_nhwc(ops.quantized_depthwise_conv2d(
        nhwc_to_torch(x), torch.from_numpy(wt), None if bias is None else torch.from_numpy(bias), [1, 1],
        [pad, pad], [1, 1], 1, in_off, -3, torch.from_numpy(mult), torch.from_numpy(shift), -128, 127,
        torch.empty(0, dtype=torch.uint8)))
    p = QConv(1, h, w, cin, h, w, cin, k, k, 1, 1, pad, pad, 1, 1, cin, in_off, -3, -128, 127)
    step = C.c_uint32()
    K.lib.emk_depthwise_conv2d_s8_in_place_lead.restype = C.c_int64
    lead = K.lib.emk_depthwise_conv2d_s8_in_place_lead(C.byref(p), C.byref(step))
    assert lead == (pad * w + pad) * cin and step.value == cin
    n, d = x.size, lead + more
    buf = np.zeros(n + d, np.int8)
    buf[d:d + n] = x.reshape(-1)
    K.conv("emk_depthwise_conv2d_s8", False, p, buf[d:].ctypes.data, ptr(wt), ptr(bias), ptr(mult), ptr(shift),
           buf.ctypes.data)
    return buf[:n].reshape(x.shape), want


@SETTINGS
@given(seed=seeds, h=st.integers(1, 7), w=st.integers(1, 9), cin=st.integers(1, 40), k=st.sampled_from([1, 3, 5]),
       use_bias=st.booleans(), pixels=st.integers(0, 2))
def test_depthwise_writes_its_output_a_lead_before_its_input(K, seed, h, w, cin, k, use_bias, pixels):
    """In place with a lead: the output starting the firmware's lead (or whole pixels more) before the input, in
    the same bytes, is the reference's, on the portable kernels (the one-window loops and the 3x3 window pairs)."""
    rng = rng_from(seed)
    bias = rng.integers(-(1 << 16), 1 << 16, cin).astype(np.int32) if use_bias else None
    got, want = _depthwise_in_place(K, rng, h, w, cin, k, k // 2, bias, pixels * cin)
    np.testing.assert_array_equal(got, want)


def test_depthwise_one_byte_short_of_its_lead_overwrites_its_input(K):
    """The lead is needed: one byte less and the kernel reads an input byte it has already overwritten."""
    rng = rng_from(7)
    bias = rng.integers(-1000, 1000, 16).astype(np.int32)
    got, want = _depthwise_in_place(K, rng, 6, 5, 16, 3, 1, bias, -1)
    assert (got != want).any()


@settings(max_examples=25, deadline=None)
@given(seed=seeds, g=conv_geom, cin=st.integers(1, 6), cout=st.integers(1, 6),
       oph=st.integers(0, 2), opw=st.integers(0, 2), in_off=st.integers(-127, 128), out_off=zps)
def test_quantized_transpose_conv2d(K, seed, g, cin, cout, oph, opw, in_off, out_off):
    # torch requires output_padding < stride or dilation
    oph, opw = oph % max(g["sh"], g["dh"]), opw % max(g["sw"], g["dw"])
    oh = (g["h"] - 1) * g["sh"] - 2 * g["ph"] + g["dh"] * (g["kh"] - 1) + oph + 1
    ow = (g["w"] - 1) * g["sw"] - 2 * g["pw"] + g["dw"] * (g["kw"] - 1) + opw + 1
    if oh < 1 or ow < 1:
        return
    rng = rng_from(seed)
    x = s8(rng, 1, g["h"], g["w"], cin)
    w = s8(rng, cout, g["kh"], g["kw"], cin)
    bias = rng.integers(-1000, 1000, cout).astype(np.int32)
    mult, shift = requant_arrays(rng, cout)
    want = ops.quantized_transpose_conv2d(
        nhwc_to_torch(x), torch.from_numpy(w), torch.from_numpy(bias), [g["sh"], g["sw"]],
        [g["ph"], g["pw"]], [oph, opw], [g["dh"], g["dw"]], in_off, out_off,
        torch.from_numpy(mult), torch.from_numpy(shift), -128, 127,
        torch.empty(0, dtype=torch.uint8), torch.empty(0, dtype=torch.uint8))
    want = torch_to_nhwc(want)
    p = QConv(1, g["h"], g["w"], cin, oh, ow, cout, g["kh"], g["kw"], g["sh"], g["sw"],
              g["ph"], g["pw"], g["dh"], g["dw"], 1, in_off, out_off, -128, 127)
    for f in both(K, "emk_transpose_conv2d_s8"):
        out = np.zeros((1, oh, ow, cout), np.int8)
        f(C.byref(p), ptr(x), ptr(w), ptr(bias), ptr(mult), ptr(shift), ptr(out))
        np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------- linear / bmm
@SETTINGS
@given(seed=seeds, rows=st.integers(1, 3), k=st.integers(1, 70), n=st.integers(1, 11),
       mode=st.sampled_from(["kernel_sum", "bias", "none"]), in_off=st.integers(-127, 128),
       f_off=st.integers(-10, 10), out_off=zps, m=mults, s=st.integers(-20, 2))
def test_quantized_linear(K, seed, rows, k, n, mode, in_off, f_off, out_off, m, s):
    rng = rng_from(seed)
    x, w = s8(rng, rows, k), s8(rng, n, k)
    bias = rng.integers(-5000, 5000, n).astype(np.int32)
    ksum = rng.integers(-50000, 50000, (1, n)).astype(np.int32)
    lo, hi = int(rng.integers(-128, 0)), int(rng.integers(0, 128))
    tb = torch.from_numpy(bias) if mode == "bias" else None
    tk = torch.from_numpy(ksum) if mode == "kernel_sum" else None
    want = ops.quantized_linear(torch.from_numpy(x), torch.from_numpy(w), tb, tk, in_off, f_off,
                                out_off, [m], [s], hi, lo).numpy()
    p = QLinear(rows, k, n, in_off, f_off, out_off, m, s, lo, hi)
    for f in both(K, "emk_linear_s8"):
        out = np.zeros((rows, n), np.int8)
        f(C.byref(p), ptr(x), ptr(w), ptr(bias) if mode == "bias" else None,
          ptr(ksum) if mode == "kernel_sum" else None, ptr(out))
        np.testing.assert_array_equal(out, want)


@SETTINGS
@given(seed=seeds, b=st.integers(1, 3), m_=st.integers(1, 6), n=st.integers(1, 9),
       k=st.integers(1, 40), lo=st.integers(-127, 128), ro=st.integers(-127, 128), zo=zps,
       m=mults, s=st.integers(-20, 1))
def test_quantized_batch_matmul(K, seed, b, m_, n, k, lo, ro, zo, m, s):
    rng = rng_from(seed)
    lhs, rhs = s8(rng, b, m_, k), s8(rng, b, n, k)
    want = ops.quantized_batch_matmul(torch.from_numpy(lhs), lo, torch.from_numpy(rhs), ro, zo, m, s,
                                      torch.empty(0, dtype=torch.uint8)).numpy()
    p = QBmm(b, m_, n, k, lo, ro, zo, m, s)
    for f in both(K, "emk_batch_matmul_s8"):
        out = np.zeros((b, m_, n), np.int8)
        f(C.byref(p), ptr(lhs), ptr(rhs), ptr(out))
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("k", range(1, 21))
def test_quantized_batch_matmul_small_k(K, k):
    """Attention's inner sizes (head dims, short sequences): every k up to 20, odd m and n, batch > 1, both
    offsets at their extremes (the small-k and DSP paths fold them differently)."""
    rng = rng_from(k)
    for b, m_, n, lo, ro in ((2, 5, 7, 128, -127), (3, 3, 9, -127, 128), (1, 1, 1, 0, 0), (2, 7, 13, 5, -3)):
        lhs, rhs = s8(rng, b, m_, k), s8(rng, b, n, k)
        want = ops.quantized_batch_matmul(torch.from_numpy(lhs), lo, torch.from_numpy(rhs), ro, -3, 1518500250,
                                          -9, torch.empty(0, dtype=torch.uint8)).numpy()
        p = QBmm(b, m_, n, k, lo, ro, -3, 1518500250, -9)
        for f in both(K, "emk_batch_matmul_s8"):
            out = np.zeros((b, m_, n), np.int8)
            f(C.byref(p), ptr(lhs), ptr(rhs), ptr(out))
            np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------- pooling
pool_geom = st.fixed_dictionaries({
    "h": st.integers(1, 9), "w": st.integers(1, 9), "kh": st.integers(1, 4), "kw": st.integers(1, 4),
    "sh": st.integers(1, 3), "sw": st.integers(1, 3), "ph": st.integers(0, 2), "pw": st.integers(0, 2),
    "c": st.integers(1, 37),
})


def pool_out(n: int, k: int, s: int, p: int, ceil: bool) -> int:
    num = n + 2 * p - k
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return o


def pool_case(g: dict[str, int], ceil: bool, seed: int, n: int) -> tuple[np.ndarray, QPool, list[int]] | None:
    """A pool test case of geometry g: random NHWC input of batch n, the kernel's QPool and the
    reference's padding (limited as torch does, <= kernel / 2); None when the output is empty."""
    ph, pw = min(g["ph"], g["kh"] // 2), min(g["pw"], g["kw"] // 2)
    oh, ow = pool_out(g["h"], g["kh"], g["sh"], ph, ceil), pool_out(g["w"], g["kw"], g["sw"], pw, ceil)
    if oh < 1 or ow < 1:
        return None
    x = s8(rng_from(seed), n, g["h"], g["w"], g["c"])
    return x, QPool(n, g["h"], g["w"], g["c"], oh, ow, g["kh"], g["kw"], g["sh"], g["sw"], ph, pw), [ph, pw]


@SETTINGS
@given(seed=seeds, g=pool_geom, ceil=st.booleans(), zp=zps, m=st.integers(1 << 30, (1 << 31) - 1),
       s=st.integers(-10, 2))
def test_quantized_avg_pool2d(K, seed, g, ceil, zp, m, s):
    case = pool_case(g, ceil, seed, 1)
    if case is None:
        return
    x, p, pad = case
    want = ops.quantized_avg_pool2d(nhwc_to_torch(x), [g["kh"], g["kw"]], [g["sh"], g["sw"]],
                                    pad, ceil, zp, m, s, torch.empty(0, dtype=torch.uint8))
    want = torch_to_nhwc(want)
    for ref in (True, False):
        out = np.zeros_like(want)
        K.conv("emk_avg_pool2d_s8", ref, p, ptr(x), ptr(out), zp, m, s)
        np.testing.assert_array_equal(out, want)


@SETTINGS
@given(seed=seeds, g=pool_geom, zp=zps, fill=st.sampled_from(["random", "int8 min", "extremes"]),
       # [-128, 127] (no fused activation, the common case) often, else any range.
       lo=st.one_of(st.just(-128), st.integers(-128, 0)), hi=st.one_of(st.just(127), st.integers(0, 127)))
def test_quantized_max_pool2d(K, seed, g, zp, lo, hi, fill):
    case = pool_case(g, False, seed, 2)
    if case is None:
        return
    x, p, pad = case
    # Windows of -128 only (random data almost never has one) check the running maximum's start value.
    if fill == "int8 min":
        x[:] = -128
    elif fill == "extremes":
        x = np.where(x < 96, np.int8(-128), np.int8(127)).astype(np.int8)
    want = ops.quantized_max_pool2d(nhwc_to_torch(x), [g["kh"], g["kw"]], [g["sh"], g["sw"]],
                                    pad, [1, 1], False, zp, zp, lo, hi)
    want = torch_to_nhwc(want)
    for f in both(K, "emk_max_pool2d_s8"):
        out = np.zeros_like(want)
        f(C.byref(p), ptr(x), ptr(out), lo, hi)
        np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------- softmax
SOFTMAX_MISMATCH = {"n": 0, "total": 0}


@settings(max_examples=30, deadline=None)
@given(seed=seeds, outer=st.integers(1, 4), length=st.integers(1, 300), zp=zps,
       m=st.integers(1 << 30, (1 << 31) - 1), s=st.integers(15, 25), last=st.booleans())
def test_softmax_within_one_step(K, seed, outer, length, zp, m, s, last):
    rng = rng_from(seed)
    inner = 1 if last else int(rng.integers(2, 5))
    x = s8(rng, outer, length, inner)
    want = ops.softmax(torch.from_numpy(x), 1, zp, -128, m, s, -128).numpy()
    for f in both(K, "emk_softmax_s8"):
        out = np.zeros_like(x)
        f(ptr(x), ptr(out), outer, length, inner, zp, -128, m, s)
        diff = np.abs(out.astype(np.int32) - want.astype(np.int32))
        assert diff.max() <= 1
        SOFTMAX_MISMATCH["n"] += int((diff > 0).sum())
        SOFTMAX_MISMATCH["total"] += diff.size


def test_softmax_mostly_exact(K):
    """Off-by-one results must stay rare: a systematic error would show here."""
    rng = rng_from(1234)
    x = s8(rng, 64, 100)
    want = ops.softmax(torch.from_numpy(x), -1, 3, -128, 1 << 30, 20, -128).numpy()
    out = np.zeros_like(x)
    K.fn("emk_softmax_s8", True)(ptr(x), ptr(out), 64, 100, 1, 3, -128, 1 << 30, 20)
    diff = out.astype(np.int32) - want.astype(np.int32)
    assert np.abs(diff).max() <= 1
    assert (diff != 0).mean() < 0.01, f"{(diff != 0).mean():.3%} of softmax outputs differ"


# ---------------------------------------------------------------- quantize / dequantize
KDT = {np.int8: 1, np.uint8: 0, np.int16: 2, np.int32: 3}
TDT = {np.int8: torch.int8, np.uint8: torch.uint8, np.int16: torch.int16, np.int32: torch.int32}


@SETTINGS
@given(seed=seeds, scale=st.floats(1e-4, 10.0), zp=zps, dt=st.sampled_from([np.int8, np.uint8, np.int16]))
def test_quantize_dequantize(K, seed, scale, zp, dt):
    rng = rng_from(seed)
    info = np.iinfo(dt)
    zp = int(np.clip(zp, info.min, info.max))
    x = (rng.standard_normal(500) * scale * 100).astype(np.float32)
    x[:3] = [0.5 * scale, -0.5 * scale, 2.5 * scale]  # ties: rint rounds half to even
    want = ops.quantize_per_tensor(torch.from_numpy(x), scale, zp, int(info.min), int(info.max),
                                   TDT[dt]).numpy()
    # One guard element past the end here too (see below).
    q = np.full(501, 7, dt)
    K.fn("emk_quantize_f32", True)(ptr(x), 500, scale, zp, int(info.min), int(info.max), KDT[dt], ptr(q))
    assert q[500] == 7
    q = q[:500].copy()
    np.testing.assert_array_equal(q, want)
    back = ops.dequantize_per_tensor(torch.from_numpy(q), scale, zp, int(info.min), int(info.max),
                                     TDT[dt]).numpy()
    # One guard element past the end: a loop running one step too far would write it.
    f = np.full(501, 7.0, np.float32)
    K.fn("emk_dequantize_f32", True)(ptr(q), KDT[dt], 500, scale, zp, ptr(f))
    np.testing.assert_array_equal(f[:500].view(np.int32), back.view(np.int32))
    assert f[500] == 7.0


# ---------------------------------------------------------------- min / max, pad, transpose
def strides_of(shape: tuple[int, ...]) -> list[int]:
    out, acc = [], 1
    for s in reversed(shape):
        out.insert(0, acc)
        acc *= s
    return out


@SETTINGS
@given(seed=seeds, is_max=st.booleans(), dt=st.sampled_from([np.int8, np.int16, np.float32]),
       shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), mask=st.integers(0, 15))
def test_minimum_maximum_broadcast(K, seed, is_max, dt, shape, mask):
    rng = rng_from(seed)
    bshape = tuple(1 if (mask >> i) & 1 else d for i, d in enumerate(shape))
    if dt == np.float32:
        a = rng.standard_normal(shape).astype(dt)
        b = rng.standard_normal(bshape).astype(dt)
        a.reshape(-1)[0] = np.nan
    else:
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, shape).astype(dt)
        b = rng.integers(info.min, info.max, bshape).astype(dt)
    ref = ops.maximum if is_max else ops.minimum
    want = ref(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    sh = np.array(shape, np.int32)
    sa = np.array(strides_of(tuple(shape)), np.int32)
    sb = np.array([0 if bd == 1 and d != 1 else st_ for bd, d, st_ in zip(bshape, shape, strides_of(bshape))],
                  np.int32)
    out = np.zeros(shape, dt)
    kd = {np.int8: 1, np.int16: 2, np.float32: 6}[dt]
    K.fn("emk_minmax_any", True)(kd, int(is_max), len(shape), ptr(sh), ptr(a), ptr(sa), ptr(b), ptr(sb), ptr(out))
    np.testing.assert_array_equal(out, want)


@SETTINGS
@given(seed=seeds, shape=st.lists(st.integers(1, 4), min_size=4, max_size=4),
       pre=st.lists(st.integers(0, 2), min_size=4, max_size=4),
       post=st.lists(st.integers(0, 2), min_size=4, max_size=4), value=zps, cl=st.booleans())
def test_pad(K, seed, shape, pre, post, value, cl):
    """Pads arrive in physical order. Like the pass (is_channels_last), a 4-D
    tensor with C == 1 or H == W == 1 counts as channels-last whatever its
    strides, which is safe because both layouts hold the same bytes; the
    adapter then treats it as NHWC (its output is declared channels-last)."""
    rng = rng_from(seed)
    t = torch.from_numpy(s8(rng, *shape))
    if cl:
        t = t.to(memory_format=torch.channels_last)
    n, c, h, w = t.shape
    as_nhwc = cl or c == 1 or h == w == 1
    want = ops.pad(t, pre, post, value)
    if as_nhwc:
        phys, phys_shape, want = torch_to_nhwc(t), [n, h, w, c], torch_to_nhwc(want)
    else:
        phys, phys_shape, want = t.contiguous().numpy(), [n, c, h, w], want.contiguous().numpy()
    out = np.zeros([s + a + b for s, a, b in zip(phys_shape, pre, post)], np.int8)
    v = np.array([value], np.int8)
    # keep every array alive in a name: ptr() of a temporary would dangle
    a_shape, a_pre, a_post = (np.array(x, np.int32) for x in (phys_shape, pre, post))
    phys = np.ascontiguousarray(phys)
    K.fn("emk_pad_any", True)(1, ptr(a_shape), ptr(a_pre), ptr(a_post), ptr(phys), ptr(v), ptr(out))
    np.testing.assert_array_equal(out, want)


@SETTINGS
@given(seed=seeds, shape=st.lists(st.integers(1, 5), min_size=1, max_size=5), data=st.data())
def test_transpose(K, seed, shape, data):
    perm = data.draw(st.permutations(list(range(len(shape)))))
    es = data.draw(st.sampled_from([1, 2, 4]))  # int8 codes; int16; int32 and float32
    rng = rng_from(seed)
    x = s8(rng, *shape)
    want = ops.transpose(torch.from_numpy(x), list(perm)).numpy()
    if es > 1:  # any bytes: the element's value is never read
        x = np.ascontiguousarray(s8(rng, *shape, es)).view({2: np.int16, 4: np.int32}[es]).reshape(shape)
        want = np.ascontiguousarray(x.transpose(perm))
    istr = strides_of(tuple(shape))
    out_shape = np.array([shape[p] for p in perm], np.int32)
    in_str = np.array([istr[p] for p in perm], np.int32)
    for f in both(K, "emk_transpose_any"):  # the element walk and the row copies
        out = np.zeros(want.shape, want.dtype)
        f(es, len(shape), ptr(out_shape), ptr(in_str), ptr(x), ptr(out))
        np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------- MVE build check
ARM_GCC = shutil.which("arm-none-eabi-gcc")


@pytest.mark.skipif(ARM_GCC is None, reason="arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("flags", [["-mcpu=cortex-m55"], ["-march=armv8.1-m.main+mve.fp+fp.dp"]],
                         ids=["cortex-m55", "cortex-m85"])
def test_kernels_compile_for_mve(tmp_path, flags):
    """Every kernel file builds with MVE for M55 and M85 without warnings,
    and the MVE variants are really emitted (not silently preprocessed out)."""
    for src in sorted(KERNELS.glob("*.c")):
        obj = tmp_path / (src.stem + ".o")
        r = subprocess.run([ARM_GCC, *flags, "-mthumb", "-mfloat-abi=hard", "-std=c11", "-O2", "-Wall",
                            "-Wextra", "-Werror", "-c", str(src), "-o", str(obj)],
                           capture_output=True, text=True)
        assert r.returncode == 0, f"{src.name}: {r.stderr}"
    nm = shutil.which("arm-none-eabi-nm")
    if nm:
        syms = subprocess.run([nm, *map(str, tmp_path.glob("*.o"))], capture_output=True, text=True).stdout
        for fn in ("emk_conv2d_s8_mve", "emk_depthwise_conv2d_s8_mve", "emk_linear_s8_mve", "emk_add_s8_mve", "emk_mul_s8_mve",
                   "emk_lut_s8_mve", "emk_max_pool2d_s8_mve", "emk_avg_pool2d_s8_mve", "emk_batch_matmul_s8_mve", "emk_emlkit_avg_pool2d_s8_mve",
                   "emk_emlkit_resize_bilinear_s8_mve"):
            assert f" T {fn}" in syms, f"{fn} missing from the MVE build"


@pytest.mark.skipif(ARM_GCC is None, reason="arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("flags", [["-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16"], ["-mcpu=cortex-m7", "-mfpu=fpv5-d16"],
                                   ["-mcpu=cortex-m33"]], ids=["cortex-m4", "cortex-m7", "cortex-m33"])
def test_kernels_compile_for_dsp(tmp_path, flags):
    """Every kernel file builds for the DSP-extension cores without warnings,
    the *_dsp variants are emitted there, and the portable-kernel image
    (-DFW_NO_MVE) and the Cortex-M3 (no DSP) keep the plain C kernels."""
    nm = shutil.which("arm-none-eabi-nm")

    def syms(extra, sub):
        d = tmp_path / sub
        d.mkdir()
        for src in sorted(KERNELS.glob("*.c")):
            r = subprocess.run([ARM_GCC, *extra, "-mthumb", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror",
                                "-c", str(src), "-o", str(d / (src.stem + ".o"))], capture_output=True, text=True)
            assert r.returncode == 0, f"{src.name} ({' '.join(extra)}): {r.stderr}"
        return subprocess.run([nm, *map(str, d.glob("*.o"))], capture_output=True, text=True).stdout if nm else None

    dsp = ("emk_conv2d_s8_dsp", "emk_depthwise_conv2d_s8_dsp", "emk_linear_s8_dsp", "emk_add_s8_dsp", "emk_avg_pool2d_s8_dsp", "emk_mul_s8_dsp",
           "emk_max_pool2d_s8_dsp", "emk_lut_s8_dsp", "emk_batch_matmul_s8_dsp")
    out = syms([*flags, "-mfloat-abi=hard"], "dsp")
    if out is not None:
        for fn in dsp:
            assert f" T {fn}" in out, f"{fn} missing from the DSP build"
    for extra, sub in (([*flags, "-mfloat-abi=hard", "-DFW_NO_MVE"], "portable"), (["-mcpu=cortex-m3"], "m3")):
        out = syms(extra, sub)
        if out is not None:
            assert not any(fn in out for fn in dsp), f"DSP variants in the {sub} build"


# ---------------------------------------------------------------- scratch sizes
@settings(max_examples=200, deadline=None)
@given(cin=st.integers(1, 300), cout=st.integers(1, 600), kh=st.integers(1, 5), kw=st.integers(1, 5),
       ph=st.integers(0, 2), pw=st.integers(0, 2), groups=st.sampled_from([1, 1, 2]),
       # The fast paths' input-offset bounds (a pad byte must be representable) and either side of them.
       in_off=st.one_of(st.sampled_from([-128, -127, 128, 129]), st.integers(-300, 300)))
def test_scratch_sizes_agree_with_the_compiler(K, cin, cout, kh, kw, ph, pw, groups, in_off):
    """The compiler's scratch sizes (emlkit/passes/kernel_scratch.py asks the firmware's host library, emlkit.hostfw)
    are exactly what <kernel>_get_buffer_size asks for, for every shape the shim hands over."""
    from emlkit import hostfw
    # With the program's depthwise blocks (p->dwblk, given with p->beff): no scratch for them. The kernels read
    # only whether the pointers are set here; the address is never dereferenced. A convolution's scratch does
    # not depend on p->beff.
    anywhere = C.cast(C.pointer(C.c_int32(0)), C.c_void_p)
    for beff in (None, anywhere):
        p = QConv(1, 8, 8, cin * groups, 8, 8, cout * groups, kh, kw, 1, 1, ph, pw, 1, 1, groups, in_off, 0, -128,
                  127, beff)
        assert K.lib.emk_conv2d_s8_get_buffer_size(C.byref(p)) == \
            hostfw.conv2d_s8(cin * groups, cout * groups, kh, kw, (1, 1), (ph, pw), groups, in_off)[0]
    q = QPool(1, 8, 8, cin, 8, 8, kh, kw, 1, 1, 0, 0)
    assert K.lib.emk_avg_pool2d_s8_get_buffer_size(C.byref(q)) == hostfw.avg_pool2d_s8(kh, kw, cin)
    for c_in, dm in ((cin, 1), (cin, 4), (cin, 3), (1, 64), (1, 1)):
        for beff, blk in ((None, None), (anywhere, None), (None, anywhere), (anywhere, anywhere)):
            d = QConv(1, 8, 8, c_in, 8, 8, c_in * dm, kh, kw, 1, 1, ph, pw, 1, 1, c_in, in_off, 0, -128, 127,
                      beff, blk)
            assert K.lib.emk_depthwise_conv2d_s8_get_buffer_size(C.byref(d)) == \
                hostfw.depthwise_conv2d_s8(c_in, c_in * dm, kh, kw, (1, 1), (ph, pw), in_off,
                                           beff is not None and blk is not None)[0], \
                (c_in, dm, beff, blk)


@pytest.mark.parametrize("kh,kw,c", [(4, 4, 16), (4, 4, 15), (16, 16, 1), (1, 1, 255), (1, 1, 256), (3, 3, 29)])
def test_avgpool_scratch_at_the_table_threshold(K, kh, kw, c):
    """The average pool's term table starts at exactly 256 taps x channels, in the kernel and the planner alike."""
    from emlkit import hostfw
    q = QPool(1, 16, 16, c, 16, 16, kh, kw, 1, 1, 0, 0)
    want = 1024 if kh * kw * c >= 256 else 0
    assert K.lib.emk_avg_pool2d_s8_get_buffer_size(C.byref(q)) == want == hostfw.avg_pool2d_s8(kh, kw, c)


# ---------------------------------------------------------------- MVE vs portable on QEMU
@pytest.mark.skipif(ARM_GCC is None or shutil.which("qemu-system-arm") is None,
                    reason="needs arm-none-eabi-gcc and qemu-system-arm")
def test_mve_matches_portable_on_qemu(tmp_path):
    """tests/mve_selftest: every *_mve kernel against its *_ref twin on the
    Cortex-M55 model, 60 random cases each, byte for byte."""
    from emlkit.deploy import kernel_selftest as selftest

    r = selftest.run(selftest.build(tmp_path / "selftest.elf"), timeout=120)
    lines = r.stdout.splitlines()
    passed = [ln.split()[1] for ln in lines if ln.startswith("PASS ") and len(ln.split()) == 3]
    assert r.returncode == 0 and not [ln for ln in lines if ln.startswith("FAIL")], r.stdout + r.stderr
    assert set(passed) == {"emk_conv2d_s8", "emk_depthwise_conv2d_s8", "emk_depthwise_conv2d_s8_in_place", "emk_linear_s8", "emk_batch_matmul_s8", "emk_add_s8", "emk_mul_s8",
                           "emk_lut_s8", "emk_max_pool2d_s8", "emk_avg_pool2d_s8", "emk_emlkit_avg_pool2d_s8", "emk_emlkit_resize_bilinear_s8",
                           "emk_emlkit_lstm_s8", "emk_emlkit_gru_s8", "emk_quantize_f32",
                           "emk_dequantize_f32"}, r.stdout


@pytest.mark.skipif(ARM_GCC is None or shutil.which("qemu-system-arm") is None,
                    reason="needs arm-none-eabi-gcc and qemu-system-arm")
def test_dsp_matches_portable_on_qemu(tmp_path):
    """tests/dsp_selftest: emk_conv2d_s8_dsp, emk_depthwise_conv2d_s8_dsp, emk_linear_s8_dsp, emk_add_s8_dsp, emk_avg_pool2d_s8_dsp,
    emk_mul_s8_dsp, emk_max_pool2d_s8_dsp, emk_lut_s8_dsp, emk_emlkit_lstm_s8_dsp, emk_emlkit_gru_s8_dsp and
    emk_batch_matmul_s8_dsp against their *_ref twins on
    the Cortex-M4 of mps2-an386, 150 random cases each (odd channel counts, K
    tails, borders, groups, depth multipliers, broadcasts, unaligned operands
    and outputs; a depthwise writing over its own input), byte for byte, scratch canaries intact; and
    k_requantize_dsp against k_requantize on 200,000 values (ties included)."""
    from emlkit.deploy import kernel_selftest as selftest

    r = selftest.run(selftest.build_dsp(tmp_path / "dsp_selftest.elf"), timeout=120, machine="mps2-an386")
    lines = r.stdout.splitlines()
    passed = [ln.split()[1] for ln in lines if ln.startswith("PASS ") and len(ln.split()) == 3]
    assert r.returncode == 0 and not [ln for ln in lines if ln.startswith("FAIL")], r.stdout + r.stderr
    assert set(passed) == {"k_requantize_dsp", "emk_conv2d_s8", "emk_depthwise_conv2d_s8",
                           "emk_depthwise_conv2d_s8_in_place", "emk_linear_s8", "emk_add_s8",
                           "emk_avg_pool2d_s8", "emk_mul_s8", "emk_max_pool2d_s8", "emk_lut_s8", "emk_emlkit_lstm_s8",
                           "emk_emlkit_gru_s8", "emk_batch_matmul_s8"}, r.stdout


# ---------------------------------------------------------------- emlkit:: ops (emlkit/emlkit_ops.py)
@SETTINGS
@given(seed=seeds, outer=st.integers(1, 4), length=st.integers(1, 300), inner=st.integers(1, 4),
       in_scale=st.floats(1e-3, 0.5), out_scale=st.floats(1.0 / 4000, 1.0 / 200), zp=zps)
def test_emlkit_softmax(K, seed, outer, length, inner, in_scale, out_scale, zp):
    """Bit-exact with the reference; and the reference is a softmax: within half an output step (plus the
    table's rounding) of float64 softmax wherever the output is not clamped."""
    import emlkit.emlkit_ops as eo

    rng = rng_from(seed)
    x = s8(rng, outer, length, inner)
    table = eo.softmax_exp_table(in_scale).numpy()
    m, s = eo.softmax_output_requant(out_scale)
    want = torch.ops.emlkit.softmax(torch.from_numpy(x), torch.from_numpy(table), 1, zp, m, s).numpy()
    for f in both(K, "emk_emlkit_softmax_s8"):
        out = np.zeros_like(x)
        f(ptr(x), ptr(out), outer, length, inner, ptr(table), zp, m, s)
        np.testing.assert_array_equal(out, want)
    ref = torch.softmax(torch.from_numpy(x).double() * in_scale, dim=1).numpy()
    got = (want.astype(np.float64) - zp) * out_scale
    inside = (want > -128) & (want < 127)
    assert np.abs(got - ref)[inside].max(initial=0.0) <= 0.5 * out_scale + 1e-5


# Rows of codes (input scale 0.1, 0.3) whose sum makes the reciprocal's estimate of some quotient one short (about
# one row in 4,000 has one): found by search, the correction step is what keeps those exact.
_SHORT_ROWS = [(0.1, [-79, 73, 122, 1, -16, -19, 57, -97, -104, 103, -23, -114, 79, 105, -8, 103, 31, 35, -87, -48, -100]),
               (0.1, [-8, 57, 89, -62, -59, -14, -115, 0, 112, 69, -7, 69, 45, -49, -77, -68, -43, -79, -85]),
               (0.3, [-59, 10, 4, 120, -96, -45, -105, 111, -82, 11, 6, 81, -123, 116, -67, 46, 12, 40, -59, 65, -48,
                      -4, -109, -120, -43, -82, -128, -93, 26, 4, -45, 96, -127])]


@SETTINGS
@given(seed=seeds, in_scale=st.floats(1e-3, 0.5), length=st.integers(1, 1000))
def test_emlkit_exp_quotient(K, seed, in_scale, length):
    """The softmaxes' quotient floor((e * 2^31 + sum) / (2 sum)) by a reciprocal per row: exact for every element of
    random rows (sums up to 2^32 and past it, where the division is taken) and of the rows where the estimate alone
    is one short."""
    import emlkit.emlkit_ops as eo

    rng = rng_from(seed)
    rows = [(in_scale, [int(v) for v in s8(rng, length)])] + _SHORT_ROWS
    for scale, row in rows:
        t = eo.softmax_exp_table(scale).tolist()
        es = [t[max(row) - x] for x in row]
        for total in (sum(es), sum(es) * 1031 + 7):  # the second often past 2^32
            for e in set(es):
                assert K.lib.emk_emlkit_exp_quotient(e, total) == ((e << 31) + total) // (2 * total), (e, total)


def _row_walk(x: torch.Tensor, mask: torch.Tensor, dim: int) -> QRowWalk:
    """The adapter's walk (emlkit_qparams_ops.c): x's dims in order, the softmax dim last; the mask's steps
    are its strides expanded to x's shape (0 where broadcast)."""
    order = [d for d in range(x.dim()) if d != dim] + [dim]
    ms = mask.expand(x.shape).stride()
    w = QRowWalk()
    w.rank = x.dim()
    for k, d in enumerate(order):
        w.size[k], w.x_step[k], w.m_step[k] = x.shape[d], x.stride(d), ms[d]
    return w


@SETTINGS
@given(seed=seeds, shape=st.lists(st.integers(1, 7), min_size=1, max_size=4), data=st.data(),
       in_scale=st.floats(1e-3, 0.5), out_scale=st.floats(1.0 / 4000, 1.0 / 200), zp=zps,
       p_masked=st.sampled_from([0.0, 0.3, 0.7, 1.0]))
def test_emlkit_masked_softmax(K, seed, shape, data, in_scale, out_scale, zp, p_masked):
    """Bit-exact with the reference for random masks broadcast from fewer dims (fully masked rows included); rows
    with nothing masked give emlkit::softmax's codes, fully masked rows the code of 0, and the rest are within
    half an output step of float64 softmax over the kept elements wherever the output is not clamped."""
    import emlkit.emlkit_ops as eo

    rng = rng_from(seed)
    dim = data.draw(st.integers(0, len(shape) - 1))
    lead = data.draw(st.integers(0, len(shape) - 1))   # the mask has the last len(shape) - lead dims
    mshape = [s if data.draw(st.booleans()) else 1 for s in shape[lead:]]
    x = torch.from_numpy(s8(rng, *shape))
    mask = torch.from_numpy(rng.random(mshape) < p_masked)
    table = eo.softmax_exp_table(in_scale)
    m, s = eo.softmax_output_requant(out_scale)
    want = torch.ops.emlkit.masked_softmax(x, mask, table, dim, zp, m, s)
    w = _row_walk(x, mask, dim)
    mask_np = mask.numpy().astype(np.uint8)
    for f in both(K, "emk_emlkit_masked_softmax_s8"):
        out = np.zeros(shape, dtype=np.int8)
        f(ptr(x.numpy()), ptr(mask_np), ptr(out), C.byref(w), ptr(table.numpy()), zp, m, s)
        np.testing.assert_array_equal(out, want.numpy())
    full = mask.expand(x.shape)
    none, every = ~full.any(dim=dim, keepdim=True), full.all(dim=dim, keepdim=True)
    plain = torch.ops.emlkit.softmax(x, table, dim, zp, m, s)
    assert torch.equal(torch.where(none, want, plain), plain)
    assert bool((want[every.expand(x.shape)] == max(-128, min(127, zp))).all())
    assert bool((want[full] == max(-128, min(127, zp))).all())
    ref = torch.softmax((x.double() * in_scale).masked_fill(full, float("-inf")), dim=dim)
    got = (want.double() - zp) * out_scale
    inside = (want > -128) & (want < 127) & ~every.expand(x.shape)
    err = (got - ref).abs()[inside]
    assert err.numel() == 0 or float(err.max()) <= 0.5 * out_scale + 1e-5


def test_emlkit_masked_softmax_reference_refusals() -> None:
    """The reference refuses what the adapter refuses, with one line naming the problem."""
    import emlkit.emlkit_ops as eo

    x, table = torch.zeros(2, 3, dtype=torch.int8), eo.softmax_exp_table(0.1)
    m, s = eo.softmax_output_requant(1 / 256)
    with pytest.raises(ValueError, match="does not broadcast to the input's"):
        torch.ops.emlkit.masked_softmax(x, torch.zeros(2, 3, 3, dtype=torch.bool), table, 1, 0, m, s)
    with pytest.raises(ValueError, match="does not broadcast to the input's"):
        torch.ops.emlkit.masked_softmax(x, torch.zeros(3, 1, dtype=torch.bool), table, 1, 0, m, s)
    with pytest.raises(TypeError, match="a bool mask"):
        torch.ops.emlkit.masked_softmax(x, torch.zeros(2, 3, dtype=torch.int8), table, 1, 0, m, s)
    with pytest.raises(ValueError, match="shift"):
        torch.ops.emlkit.masked_softmax(x, torch.zeros(3, dtype=torch.bool), table, 1, 0, m, 63)


@SETTINGS
@given(seed=seeds, outer=st.integers(1, 4), length=st.integers(1, 300), inner=st.integers(1, 4),
       in_scale=st.floats(1e-3, 0.5), out_scale=st.floats(1.0 / 100, 0.5), zp=zps, narrow=st.booleans())
def test_emlkit_log_softmax(K, seed, outer, length, inner, in_scale, out_scale, zp, narrow):
    """Bit-exact with the reference; and the reference is a log_softmax: within half an output step (plus the
    table's and the log's rounding) of float64 log_softmax wherever the output is not clamped."""
    import emlkit.emlkit_ops as eo

    rng = rng_from(seed)
    x = s8(rng, outer, length, inner)
    if narrow:  # codes close together: every term of the sum counts
        x = (x // 16).astype(np.int8)
    table = eo.softmax_exp_table(in_scale).numpy()
    k = eo.log_softmax_input_scale(in_scale)
    m, s = eo.log_softmax_output_requant(out_scale)
    want = torch.ops.emlkit.log_softmax(torch.from_numpy(x), torch.from_numpy(table), 1, k, zp, m, s).numpy()
    for f in both(K, "emk_emlkit_log_softmax_s8"):
        out = np.zeros_like(x)
        f(ptr(x), ptr(out), outer, length, inner, ptr(table), k, zp, m, s)
        np.testing.assert_array_equal(out, want)
    ref = torch.log_softmax(torch.from_numpy(x).double() * in_scale, dim=1).numpy()
    got = (want.astype(np.float64) - zp) * out_scale
    inside = (want > -128) & (want < 127)
    assert np.abs(got - ref)[inside].max(initial=0.0) <= 0.5 * out_scale + 1e-3


def test_log2_q20_against_math() -> None:
    """The integer log2 the log_softmax kernel uses: within 2^-19 of log2, never above it by more than 2^-20."""
    import emlkit.emlkit_ops as eo

    for v in [1, 2, 3, 5, 1 << 22, (1 << 22) + 1, 3 << 21, 12345678901, (1 << 38) - 1, 1 << 38]:
        got = eo.log2_q20(v) / (1 << eo.LOG_FRAC_BITS)
        assert -2.0 ** -19 <= got - math.log2(v) <= 2.0 ** -20, v


@SETTINGS
@given(seed=seeds, n=st.integers(1, 2), h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 70),
       data=st.data(), izp=zps, ozp=zps, in_scale=st.floats(1e-3, 0.1), ratio=st.floats(0.05, 2.0))
def test_emlkit_avg_pool2d(K, seed, n, h, w, c, data, izp, ozp, in_scale, ratio):
    """Bit-exact with the reference; and the reference is an average pool: within half an output step of
    the float mean of the dequantized window wherever the output is not clamped."""
    import emlkit.emlkit_ops as eo

    kh, kw = data.draw(st.integers(1, h)), data.draw(st.integers(1, w))
    sh, sw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    out_scale = in_scale * ratio
    m, s = eo.multiplier_shift(in_scale / (out_scale * kh * kw))
    x = s8(rng_from(seed), n, h, w, c)
    want = torch_to_nhwc(torch.ops.emlkit.quantized_avg_pool2d(nhwc_to_torch(x), [kh, kw], [sh, sw], izp, ozp, m, s))
    p = QPool(n, h, w, c, oh, ow, kh, kw, sh, sw, 0, 0)
    for f in both(K, "emk_emlkit_avg_pool2d_s8"):
        out = np.zeros((n, oh, ow, c), np.int8)
        f(C.byref(p), ptr(x), ptr(out), izp, ozp, m, s)
        np.testing.assert_array_equal(out, want)
    xf = (nhwc_to_torch(x).double() - izp) * in_scale
    ref = torch_to_nhwc(torch.nn.functional.avg_pool2d(xf, (kh, kw), (sh, sw)))
    got = (want.astype(np.float64) - ozp) * out_scale
    inside = (want > -128) & (want < 127)
    assert np.abs(got - ref)[inside].max(initial=0.0) <= 0.5 * out_scale * (1 + 1e-6) + 1e-9


@SETTINGS
@given(seed=seeds, n=st.integers(1, 2), h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 19),
       oh=st.integers(1, 21), ow=st.integers(1, 21), align=st.booleans(), by_scale=st.booleans(),
       izp=zps, ozp=zps, in_scale=st.floats(1e-3, 0.1), ratio=st.floats(1 / 8, 4.0))
def test_emlkit_resize_bilinear(K, seed, n, h, w, c, oh, ow, align, by_scale, izp, ozp, in_scale, ratio):
    """Bit-exact with the reference, NHWC and NCHW (c = 1, n * c images); and the reference is a bilinear
    resize: within 1 int8 step of quantizing torch's float result with the output's qparams, for any output
    size or scale factor, align_corners either way, and s_in / s_out up to the pass's MAX_SCALE_RATIO."""
    import emlkit.emlkit_ops as eo
    from emlkit.passes.emlkit_bilinear import source_tables

    op = torch.ops.aten.upsample_bilinear2d.vec
    args = (None, align, [oh / h, ow / w]) if by_scale else ([oh, ow], align, None)
    rows, cols = source_tables(op, args, {}, h, w)
    out_scale = in_scale * ratio
    m, s = eo.multiplier_shift(in_scale / (out_scale * eo.BILINEAR_ONE ** 2))
    x = s8(rng_from(seed), n, h, w, c)
    want = torch_to_nhwc(torch.ops.emlkit.upsample_bilinear2d(nhwc_to_torch(x), rows, cols, izp, ozp, m, s))
    OH, OW = rows.shape[0], cols.shape[0]
    r, cl = rows.numpy().copy(), cols.numpy().copy()
    for f in both(K, "emk_emlkit_resize_bilinear_s8"):
        out = np.zeros((n, OH, OW, c), np.int8)
        f(ptr(x), ptr(out), n, h, w, c, OH, OW, ptr(r), ptr(cl), izp, ozp, m, s)
        np.testing.assert_array_equal(out, want)
        planes = np.ascontiguousarray(x.transpose(0, 3, 1, 2)).reshape(n * c, h, w, 1)  # NCHW bytes
        out_p = np.zeros((n * c, OH, OW, 1), np.int8)
        f(ptr(planes), ptr(out_p), n * c, h, w, 1, OH, OW, ptr(r), ptr(cl), izp, ozp, m, s)
        np.testing.assert_array_equal(out_p.reshape(n, c, OH, OW), want.transpose(0, 3, 1, 2))
    xf = ((nhwc_to_torch(x).float() - izp) * in_scale).contiguous()
    yf = op(xf, *args)
    ref = torch.clamp(torch.round(yf / out_scale) + ozp, -128, 127).to(torch.int8)
    assert np.abs(want.astype(np.int32) - torch_to_nhwc(ref).astype(np.int32)).max() <= 1


@SETTINGS
@given(seed=seeds, b=st.integers(1, 3), t=st.integers(1, 12), i=st.integers(1, 20), h=st.integers(1, 17),
       batch_first=st.booleans(), xzp=zps, hzp=zps, x_scale=st.floats(1e-3, 0.1), h_scale=st.floats(2e-3, 0.02),
       w_range=st.floats(0.05, 2.0), frac=st.integers(11, 15), given=st.booleans())
def test_emlkit_lstm(K, seed, b, t, i, h, batch_first, xzp, hzp, x_scale, h_scale, w_range, frac, given):
    """emlkit::lstm's kernel is bit-exact with the Python reference for any sizes, either layout, any cell format
    and weights from small to large enough to saturate gates and cell, from the zero or a given initial state
    (any h codes, any int16 cell: a streaming program's kept state)."""
    import emlkit.emlkit_ops as eo
    from emlkit.passes.emlkit_lstm import lstm_constants

    g = torch.Generator().manual_seed(seed % (2**31))
    w_ih = (torch.rand(4 * h, i, generator=g, dtype=torch.float64) * 2 - 1) * w_range
    w_hh = (torch.rand(4 * h, h, generator=g, dtype=torch.float64) * 2 - 1) * w_range
    bias = (torch.rand(4 * h, generator=g, dtype=torch.float64) * 2 - 1) * w_range
    c = lstm_constants(w_ih, w_hh, bias, x_scale, h_scale)
    assert c is not None
    x = s8(rng_from(seed), *((b, t, i) if batch_first else (t, b, i)))
    h0 = s8(rng_from(seed + 1), b, h) if given else None
    c0 = rng_from(seed + 2).integers(-32768, 32768, (b, h)).astype(np.int16) if given else None
    want_y, want_c = eo.lstm_reference(torch.from_numpy(x), c["w_ih"], c["w_hh"], c["bias"], c["requant"],
                                       c["tables"], int(batch_first), xzp, hzp, frac, c["mult"], c["shift"],
                                       h0=None if h0 is None else torch.from_numpy(h0),
                                       c0=None if c0 is None else torch.from_numpy(c0))
    p = QLstm(batch=b, steps=t, in_=i, hid=h, batch_first=int(batch_first), x_zp=xzp, h_zp=hzp, cell_frac=frac,
              out_mult=c["mult"], out_shift=c["shift"])
    arrays = [np.ascontiguousarray(c[k].numpy()) for k in ("w_ih", "w_hh", "bias", "requant", "tables")]
    for f in both(K, "emk_emlkit_lstm_s8"):
        y = np.zeros(x.shape[:2] + (h,), np.int8)
        # the kernel starts from c = 0 whatever the memory holds, or from the given cell
        cell = c0.copy() if given else np.full((b, h), 12345, np.int16)
        f(C.byref(p), ptr(x), ptr(y), ptr(cell), *[ptr(a) for a in arrays], ptr(h0) if given else None)
        np.testing.assert_array_equal(y, want_y.numpy())
        np.testing.assert_array_equal(cell, want_c.numpy())


@SETTINGS
@given(seed=seeds, b=st.integers(1, 3), t=st.integers(1, 12), i=st.integers(1, 20), h=st.integers(1, 17),
       batch_first=st.booleans(), xzp=zps, hzp=zps, x_scale=st.floats(1e-3, 0.1), h_scale=st.floats(2e-3, 0.02),
       w_range=st.floats(0.05, 2.0), given=st.booleans())
def test_emlkit_gru(K, seed, b, t, i, h, batch_first, xzp, hzp, x_scale, h_scale, w_range, given):
    """emlkit::gru's kernel is bit-exact with the Python reference for any sizes, either layout and weights from
    small to large enough to saturate the gates, from the zero or a given initial state (any h codes)."""
    import emlkit.emlkit_ops as eo
    from emlkit.passes.emlkit_lstm import gru_constants

    g = torch.Generator().manual_seed(seed % (2**31))
    w_ih = (torch.rand(3 * h, i, generator=g, dtype=torch.float64) * 2 - 1) * w_range
    w_hh = (torch.rand(3 * h, h, generator=g, dtype=torch.float64) * 2 - 1) * w_range
    bias = (torch.rand(2, 3 * h, generator=g, dtype=torch.float64) * 2 - 1) * w_range
    c = gru_constants(w_ih, w_hh, bias, x_scale, h_scale)
    assert c is not None
    x = s8(rng_from(seed), *((b, t, i) if batch_first else (t, b, i)))
    h0 = s8(rng_from(seed + 1), b, h) if given else None
    want = eo.gru_reference(torch.from_numpy(x), c["w_ih"], c["w_hh"], c["bias"], c["requant"], c["tables"],
                            int(batch_first), xzp, hzp, c["h_mult"], c["h_shift"], c["mult"], c["shift"],
                            h0=None if h0 is None else torch.from_numpy(h0))
    p = QGru(batch=b, steps=t, in_=i, hid=h, batch_first=int(batch_first), x_zp=xzp, h_zp=hzp, h_mult=c["h_mult"],
             h_shift=c["h_shift"], out_mult=c["mult"], out_shift=c["shift"])
    arrays = [np.ascontiguousarray(c[k].numpy()) for k in ("w_ih", "w_hh", "bias", "requant", "tables")]
    for f in both(K, "emk_emlkit_gru_s8"):
        y = np.zeros(x.shape[:2] + (h,), np.int8)
        f(C.byref(p), ptr(x), ptr(y), *[ptr(a) for a in arrays], ptr(h0) if given else None)
        np.testing.assert_array_equal(y, want.numpy())


# ---------------------------------------------------------------- emlkit::prelu, adaptive_avg_pool2d, floor_divide,
# embedding_bag: each portable kernel and its dispatcher bit-exact with the Python reference
@SETTINGS
@given(seed=seeds, outer=st.integers(1, 4), c=st.integers(1, 9), inner=st.integers(1, 13), izp=zps, ozp=zps,
       ratio=st.floats(0.05, 8.0), slopes=st.lists(st.floats(-3.0, 3.0), min_size=9, max_size=9),
       zero=st.integers(0, 8))
def test_emlkit_prelu(K, seed, outer, c, inner, izp, ozp, ratio, slopes, zero):
    """Per-channel slopes of either sign, a zero slope, and both layouts' views ([outer][c][inner])."""
    import emlkit.emlkit_ops as eo
    from emlkit.passes.emlkit_prelu import prelu_table

    w = torch.tensor(slopes[:c], dtype=torch.float64)
    w[zero % c] = 0.0
    table = prelu_table(w, c, ratio, 1.0)
    assert table is not None
    m, s = eo.multiplier_shift(ratio)
    x = s8(rng_from(seed), outer, c, inner)
    want = eo.prelu_reference(torch.from_numpy(x), table, izp, ozp, m, s).numpy()
    neg = table.numpy().copy()
    for f in both(K, "emk_emlkit_prelu_s8"):
        out = np.zeros_like(x)
        f(ptr(x), ptr(out), outer, c, inner, ptr(neg), izp, ozp, m, s)
        np.testing.assert_array_equal(out, want)
    # and the reference is a PReLU: within 1 step of quantizing the float result
    q = x.astype(np.float64) - izp
    yf = np.where(q >= 0, q, q * w.numpy()[None, :, None]) * ratio + ozp
    assert np.abs(want.astype(np.float64) - np.clip(np.round(yf), -128, 127)).max() <= 1


@SETTINGS
@given(seed=seeds, n=st.integers(1, 2), h=st.integers(1, 11), w=st.integers(1, 11), c=st.integers(1, 7),
       oh=st.integers(1, 8), ow=st.integers(1, 8), izp=zps, ozp=zps, ratio=st.floats(0.1, 4.0))
def test_emlkit_adaptive_avg_pool2d(K, seed, n, h, w, c, oh, ow, izp, ozp, ratio):
    """Bit-exact with the reference, NHWC and NCHW (c = 1, n * c images), any output size (windows of unequal sizes
    and overlapping); and the reference is torch's adaptive average pool within 1 int8 step."""
    import emlkit.emlkit_ops as eo
    from emlkit.passes.emlkit_adaptive_avg_pool import adaptive_tables

    tables = adaptive_tables(h, w, oh, ow, 1.0, ratio)
    assert tables is not None
    rows, cols, rq = (t.numpy().copy() for t in tables)
    x = s8(rng_from(seed), n, h, w, c)
    want = torch_to_nhwc(eo.adaptive_avg_pool2d_reference(nhwc_to_torch(x), *tables, izp, ozp))
    for f in both(K, "emk_emlkit_adaptive_avg_pool2d_s8"):
        out = np.zeros((n, oh, ow, c), np.int8)
        f(ptr(x), ptr(out), n, h, w, c, oh, ow, ptr(rows), ptr(cols), ptr(rq), izp, ozp)
        np.testing.assert_array_equal(out, want)
        planes = np.ascontiguousarray(x.transpose(0, 3, 1, 2)).reshape(n * c, h, w, 1)
        out_p = np.zeros((n * c, oh, ow, 1), np.int8)
        f(ptr(planes), ptr(out_p), n * c, h, w, 1, oh, ow, ptr(rows), ptr(cols), ptr(rq), izp, ozp)
        np.testing.assert_array_equal(out_p.reshape(n, c, oh, ow), want.transpose(0, 3, 1, 2))
    yf = torch.nn.functional.adaptive_avg_pool2d(nhwc_to_torch(x).double() - izp, (oh, ow)) / ratio + ozp
    ref = torch_to_nhwc(torch.clamp(torch.round(yf), -128, 127))
    assert np.abs(want.astype(np.float64) - ref).max() <= 1


@SETTINGS
@given(seed=seeds, size=st.integers(1, 200), azp=zps, bzp=zps, ozp=zps, s_a=st.floats(1e-3, 1.0),
       s_b=st.floats(1e-3, 1.0), s_out=st.floats(1e-2, 2.0))
def test_emlkit_floor_divide(K, seed, size, azp, bzp, ozp, s_a, s_b, s_out):
    """Bit-exact with the reference over the whole int8 range of both operands, division by zero included."""
    import emlkit.emlkit_ops as eo
    from emlkit.passes.emlkit_floor_divide import floor_divide_constants

    f32 = [float(np.float32(v)) for v in (s_a, s_b)]
    consts = floor_divide_constants(f32[0], f32[1], s_out)
    assert consts is not None
    m_a, m_b, e, mult, shift = consts
    rng = rng_from(seed)
    a, b = s8(rng, size), s8(rng, size)
    b[: size // 4] = np.int8(max(-128, min(127, bzp)))                        # some zero divisors
    want = eo.floor_divide_reference(torch.from_numpy(a), torch.from_numpy(b), azp, bzp, m_a, m_b, e, ozp, mult,
                                     shift).numpy()
    p = QFloorDiv(azp, bzp, m_a, m_b, e, ozp, mult, shift)
    for f in both(K, "emk_emlkit_floor_divide_s8"):
        out = np.zeros_like(a)
        f(ptr(a), ptr(b), ptr(out), size, C.byref(p))
        np.testing.assert_array_equal(out, want)


@SETTINGS
@given(seed=seeds, shape=st.lists(st.integers(1, 5), min_size=0, max_size=6), keep_a=st.integers(0, 63),
       keep_b=st.integers(0, 63), drop_a=st.integers(0, 6), drop_b=st.integers(0, 6), azp=zps, bzp=zps, ozp=zps,
       s_a=st.floats(1e-3, 1.0), s_b=st.floats(1e-3, 1.0), s_out=st.floats(1e-2, 2.0))
def test_emlkit_floor_divide_broadcast(K, seed, shape, keep_a, keep_b, drop_a, drop_b, azp, bzp, ozp, s_a, s_b, s_out):
    """Operands broadcast both ways (leading dims dropped, size-1 dims, a one-element divisor) walked with the steps
    the adapter computes, bit-exact with the reference."""
    import emlkit.emlkit_ops as eo
    from emlkit.passes.emlkit_floor_divide import floor_divide_constants

    def operand(keep: int, drop: int) -> list[int]:  # size 1 where a bit of KEEP is clear, DROP leading dims gone
        return [n if keep >> d & 1 else 1 for d, n in enumerate(shape)][min(drop, len(shape)):]

    consts = floor_divide_constants(float(np.float32(s_a)), float(np.float32(s_b)), s_out)
    assert consts is not None
    rng = rng_from(seed)
    sa, sb = operand(keep_a, drop_a), operand(keep_b, drop_b)
    a, b = (np.array(s8(rng, *s), dtype=np.int8).reshape(s) for s in (sa, sb))
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    want = eo.floor_divide_reference(torch.from_numpy(a), torch.from_numpy(b), azp, bzp, *consts[:3], ozp,
                                     *consts[3:]).numpy()

    def steps(t: np.ndarray) -> list[int]:
        lead = len(out_shape) - t.ndim
        return [0 if d < lead or t.shape[d - lead] == 1 else t.strides[d - lead] for d in range(len(out_shape))]

    pad = [0] * (6 - len(out_shape))
    w = QBcastWalk(len(out_shape), (C.c_int32 * 6)(*out_shape, *pad), (C.c_int32 * 6)(*steps(a), *pad),
                   (C.c_int32 * 6)(*steps(b), *pad))
    p = QFloorDiv(azp, bzp, *consts[:3], ozp, *consts[3:])
    for f in both(K, "emk_emlkit_floor_divide_bcast_s8"):
        out = np.zeros(out_shape, np.int8)
        f(ptr(a), ptr(b), ptr(out), C.byref(w), C.byref(p))
        np.testing.assert_array_equal(out, want)


@SETTINGS
@given(seed=seeds, num=st.integers(1, 20), dim=st.integers(1, 9), n_idx=st.integers(0, 40), bags=st.integers(1, 8),
       mode=st.integers(0, 2), last=st.booleans(), pad=st.integers(-1, 19), wzp=zps, ozp=zps,
       ratio=st.floats(0.05, 4.0), weighted=st.booleans(), pzp=zps)
def test_emlkit_embedding_bag(K, seed, num, dim, n_idx, bags, mode, last, pad, wzp, ozp, ratio, weighted, pzp):
    """Sum, mean and max bags (empty bags, padding_idx, include_last_offset, per-sample weights in mode sum)
    bit-exact with the reference."""
    import emlkit.emlkit_ops as eo

    rng = rng_from(seed)
    pad = pad if pad < num else -1
    weighted = weighted and mode == 0
    weight = s8(rng, num, dim)
    idx = rng.integers(0, num, size=n_idx, dtype=np.int64)
    off = np.sort(rng.integers(0, n_idx + 1, size=bags + (1 if last else 0), dtype=np.int64))
    if eo.last_offset_must_end(mode, int(last), pad):
        off[-1] = n_idx  # any other last offset is refused (test_emlkit_embedding_bag_refusals)
    psw = s8(rng, n_idx) if weighted else None
    m, s = eo.multiplier_shift(ratio / ((1 << eo.EMBEDDING_BAG_MEAN_BITS) if mode == 1 else 1))
    want = eo.embedding_bag_reference(torch.from_numpy(weight), torch.from_numpy(idx), torch.from_numpy(off), mode,
                                      int(last), pad, wzp, ozp, m, s, None if psw is None else torch.from_numpy(psw),
                                      pzp).numpy()
    p = QEmbeddingBag(num, dim, n_idx, len(off), int(last), mode, pad, wzp, ozp, m, s, pzp)
    for f in both(K, "emk_emlkit_embedding_bag_s8"):
        out = np.zeros((bags, dim), np.int8)
        f(C.byref(p), ptr(weight), ptr(idx) if n_idx else None, ptr(off), ptr(psw) if weighted and n_idx else None,
          ptr(out))
        np.testing.assert_array_equal(out, want)
    if weighted:  # and the weights are each row's factor: the reference is the float weighted sum within 1 step
        rows = [[k for k in range(off[j], off[j + 1] if j + 1 < len(off) else n_idx) if idx[k] != pad]
                for j in range(bags)]
        v = np.array([[sum((float(weight[idx[k], c]) - wzp) * (float(psw[k]) - pzp) for k in r) for c in range(dim)]
                      for r in rows]).reshape(bags, dim)
        assert np.abs(want - np.clip(np.round(v * ratio + ozp), -128, 127)).max() <= 1


def test_emlkit_embedding_bag_refusals():
    """The reference refuses a short last offset with include_last_offset outside mode sum without padding_idx, and
    per-sample weights outside mode sum or of another length; mode sum without padding_idx takes a short one."""
    import emlkit.emlkit_ops as eo

    w, idx, off = torch.zeros(4, 2, dtype=torch.int8), torch.tensor([0, 1, 2, 3]), torch.tensor([0, 2, 3])
    m, s = eo.multiplier_shift(0.5)
    for mode, pad in ((1, -1), (2, -1), (0, 1), (1, 2)):
        with pytest.raises(ValueError, match=r"last offset to be len\(indices\) = 4, not 3"):
            eo.embedding_bag_reference(w, idx, off, mode, 1, pad, 0, 0, m, s)
        assert eo.embedding_bag_reference(w, idx, torch.tensor([0, 2, 4]), mode, 1, pad, 0, 0, m, s).shape == (2, 2)
    assert eo.embedding_bag_reference(w, idx, off, 0, 1, -1, 0, 0, m, s).shape == (2, 2)
    for mode, psw in ((1, torch.ones(4, dtype=torch.int8)), (0, torch.ones(3, dtype=torch.int8))):
        with pytest.raises(TypeError, match="per_sample_weights"):
            eo.embedding_bag_reference(w, idx, off, mode, 0, -1, 0, 0, m, s, psw)
