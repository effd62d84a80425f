"""Weight and scale streams of Ethos-U85 convolutions.

Scale stream: 10 bytes per output channel (the channel count rounded up to 16),
little endian. With 32-bit accumulators: 32-bit signed bias, 31-bit scale,
6-bit shift, one zero byte. (48-bit accumulators use a 48-bit bias and a 15-bit
scale; no zoo program has them and they are rejected.)

Weight stream, standard format (SWD): MLW-compressed (ethosu.mlw_codec) weights
in the order the MAC array consumes them. For each OFM block (OFM_BLK_DEPTH) the
IFM blocks are walked, alternately forwards and backwards; within them the kernel
is split into sub-kernels of at most 8x8 (8/dilation), then IFM micro-blocks,
then OFM micro-blocks; each OFM micro-block holds the sub-kernel's elements (by
stride phase, then rows with the columns in serpentine order, padded with zero
elements to a multiple of 5 for part-kernel-first, 10 for depthwise, 1 for
depth-first), and each element the weights for [IFM 8-group][OFM 4-group][4 OFM]
[8 IFM] (1 IFM for depthwise). The block sizes the hardware uses and the command
stream does not carry follow the 256-MAC U85 with 8-bit IFMs: IFM block depth 16
(part-kernel-first) or 64 (depth-first), OFM micro-block depth 256 / 8 / the
micro-block's H x W (ACC_FORMAT). Other configurations are rejected.

Fast weight format (FWD): a 32-byte header, then one byte per weight in the same
order (8-bit weights, one weight decoder). Header bit 0 is raw mode, bit 1 the
2-bit palette mode, byte 13 a zero adjust; only raw mode without a zero adjust
(what Vela writes for 8-bit weights) is modelled, the palette modes are refused.

2:4 sparse streams (WEIGHT_FORMAT weight_sparsity, bit 4 of the parameter): the
stream still holds every weight, zeros included (MLW, or FWD in raw mode), so the
convolution is the dense one; only the order changes, to feed the MAC array 16
IFM channels per element in which every 4 consecutive channels hold at most 2
non-zero weights (the hardware skips the zeros, halving the MAC cycles). Each
element holds [IFM 16-group][OFM 4-group][4 OFM][16 IFM]; part-kernel-first pads
kernel elements to a multiple of 10 (not 5); depth-first uses 128-deep IFM blocks.
Depthwise convolutions have no sparse form.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from emlkit.npu.errors import NpuError
from emlkit.npu.weights import mlw_values, scatter_ohwi

FWD_HEADER_BYTES = 32
_INTERLEAVE = 4


def decode_scales_u85(raw: bytes, channels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> (bias int64, scale int64, shift int64), one per channel (32-bit accumulator layout)."""
    need = 10 * channels
    if len(raw) < need:
        raise NpuError(f"scale stream is {len(raw)} bytes, {channels} output channels need {need}")
    b = np.frombuffer(raw[:need], dtype=np.uint8).reshape(channels, 10)
    bias = b[:, 0:4].copy().view("<i4")[:, 0].astype(np.int64)
    scale = (b[:, 4:8].copy().view("<u4")[:, 0] & 0x7FFFFFFF).astype(np.int64)
    shift = (b[:, 8] & 0x3F).astype(np.int64)
    return bias, scale, shift


@lru_cache(maxsize=256)
def _order(ofm_depth: int, kh: int, kw: int, ifm_depth: int, ofm_block_depth: int, traversal: str,
           stride: tuple[int, int], dilation: tuple[int, int], ifm_block_depth: int, ofm_ublock_depth: int,
           sparse: bool = False) -> np.ndarray:
    """Flat OHWI index of each stream position (-1 for zero padding); OHWI has I = 1 for depthwise.
    sparse: the 2:4 sparse order (16 IFM channels per step, part-kernel elements padded to 10)."""
    depthwise = traversal == "depthwise"
    if depthwise and sparse:
        raise NpuError("2:4 sparse weights on a depthwise convolution are not defined")
    if traversal == "part_kernel":
        sy, sx, round_to, ifm_ublock = stride[0], stride[1], 10 if sparse else 5, ifm_block_depth
    elif traversal == "depth_first":
        sy, sx, round_to, ifm_ublock = 1, 1, 1, ifm_block_depth
    else:
        sy, sx, round_to, ifm_ublock = stride[0], stride[1], 10, 1
    step = 1 if depthwise else (16 if sparse else 8)
    # Within one element: [ifm ublock inner (step 8, 16 sparse)][ofm group of 4][4 ofm][8 (16) ifm].
    ii, og, oi, iz = np.meshgrid(np.arange(0, ifm_ublock, step), np.arange(0, ofm_ublock_depth, _INTERLEAVE),
                                 np.arange(_INTERLEAVE), np.arange(step), indexing="ij")
    o_off = (og + oi).ravel()
    i_off = (ii + iz).ravel()
    i_width = 1 if depthwise else ifm_depth
    decomp_y, decomp_x = 8 // dilation[0], 8 // dilation[1]
    pieces: list[np.ndarray] = []
    backwards = True
    for ofm_z0 in range(0, ofm_depth, ofm_block_depth):
        ofm_blk = min(ofm_block_depth, ofm_depth - ofm_z0)
        backwards = not backwards
        ifm_starts = [0] if depthwise else list(range(0, ifm_depth, ifm_block_depth))
        for ifm_z0 in (reversed(ifm_starts) if backwards else ifm_starts):
            ifm_blk = 1 if depthwise else min(ifm_block_depth, ifm_depth - ifm_z0)
            for skx in range(0, kw, decomp_x):
                sub_w = min(kw - skx, decomp_x)
                for sky in range(0, kh, decomp_y):
                    sub_h = min(kh - sky, decomp_y)
                    elems: list[tuple[int, int]] = []
                    for py in range(sy):
                        strided_h = (sub_h + sy - 1 - py) // sy
                        for px in range(sx):
                            strided_w = (sub_w + sx - 1 - px) // sx
                            for ky in range(strided_h):
                                for kx in range(strided_w):
                                    x = kx if ky % 2 == 0 else strided_w - 1 - kx
                                    elems.append((sky + py + ky * sy, skx + px + x * sx))
                    pad = (-len(elems)) % round_to
                    wy = np.array([e[0] for e in elems])[:, None]
                    wx = np.array([e[1] for e in elems])[:, None]
                    for ifm_u0 in range(0, ifm_blk, ifm_ublock):
                        for ofm_u0 in range(0, ofm_blk, ofm_ublock_depth):
                            o = ofm_z0 + ofm_u0 + o_off[None, :]
                            i = ifm_z0 + ifm_u0 + i_off[None, :]
                            valid = (o < ofm_depth) & (i < (1 if depthwise else ifm_depth))
                            if depthwise:
                                i = np.zeros_like(i)
                            flat = ((o * kh + wy) * kw + wx) * i_width + i
                            pieces.append(np.where(valid, flat, -1).ravel())
                            if pad:
                                pieces.append(np.full(pad * ifm_ublock * ofm_ublock_depth, -1, dtype=np.int64))
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


def block_sizes(traversal: str, ifm_bits: int, macs: int, microblock_hw: int, sparse: bool = False) -> tuple[int, int]:
    """(IFM block depth, OFM micro-block depth) the 256-MAC U85 uses; NpuError for other configurations."""
    if macs != 256 or ifm_bits != 8:
        raise NpuError(f"U85 weight order for {macs} MACs with {ifm_bits}-bit IFMs is not modelled "
                       "(only the 256-MAC configuration with 8-bit IFMs)")
    if 256 // 8 % microblock_hw:
        raise NpuError(f"micro-block of {microblock_hw} elements does not divide the MAC array")
    ifm_block = 16 if traversal == "part_kernel" else (128 if sparse else 64)
    return ifm_block, 256 // 8 // microblock_hw


def decode_weights_u85(raw: bytes, *, ofm_depth: int, kh: int, kw: int, ifm_depth: int, depthwise: bool,
                       part_kernel: bool, ifm_bits: int, dilation: tuple[int, int], stride: tuple[int, int],
                       ofm_block_depth: int, microblock_hw: int, macs: int, weight_format: int,
                       sparsity: int) -> np.ndarray:
    """U85 weight stream -> int64 weights, OHWI (I = 1 for depthwise). dilation and stride are (y, x).
    sparsity: WEIGHT_FORMAT's weight_sparsity field (0 none, 1 2:4 sparse)."""
    if sparsity not in (0, 1):
        raise NpuError(f"WEIGHT_FORMAT weight_sparsity {sparsity} is not defined")
    if not raw:
        raise NpuError("convolution has an empty weight stream (WEIGHT_LENGTH 0)")
    sparse = bool(sparsity)
    if sparse and depthwise:
        raise NpuError("2:4 sparse weights (WEIGHT_FORMAT sparsity) on a depthwise convolution are not defined")
    traversal = "depthwise" if depthwise else ("part_kernel" if part_kernel else "depth_first")
    ifm_block, ofm_ublock = block_sizes(traversal, ifm_bits, macs, microblock_hw, sparse)
    if ofm_block_depth < ofm_depth and ofm_block_depth % ofm_ublock:
        raise NpuError(f"OFM block depth {ofm_block_depth} is not a whole number of {ofm_ublock}-deep micro-blocks")
    order = _order(ofm_depth, kh, kw, 1 if depthwise else ifm_depth, max(1, min(ofm_block_depth, ofm_depth)),
                   traversal, stride, dilation, ifm_block, ofm_ublock, sparse)
    if weight_format == 1:
        if depthwise:
            raise NpuError("fast weight format (FWD) on a depthwise convolution is not defined")
        if len(raw) < FWD_HEADER_BYTES + len(order):
            raise NpuError(f"fast weight stream of {len(raw)} bytes is too short for the kernel's "
                           f"{len(order)} weights")
        if raw[0] & 0x3 != 0x1 or raw[13]:
            raise NpuError(f"fast weight stream header {bytes(raw[:14]).hex()}: only raw mode (one byte per "
                           "weight, no zero adjust) is modelled, not its palette (LUT) modes")
        values = np.frombuffer(raw, dtype=np.int8, count=len(order), offset=FWD_HEADER_BYTES).astype(np.int64)
    else:
        if len(raw) >= 16 and raw[:1] == b"\x01" and not any(raw[1:13]):
            raise NpuError("weight stream is not MLW-compressed (a fast-weight header under WEIGHT_FORMAT SWD)")
        values = mlw_values(raw)
    if sparse:
        check_sparse_2_4(values[: len(order)])
    return scatter_ohwi(values, order, (ofm_depth, kh, kw, 1 if depthwise else ifm_depth))


def check_sparse_2_4(values: np.ndarray) -> None:
    """NpuError unless every aligned group of 4 stream values holds at most 2 non-zero weights: what the
    hardware computes for a denser group under WEIGHT_SPARSITY_SPARSE_2_4 is not modelled."""
    v = np.asarray(values)
    if len(v) and (v.min() < -127 or v.max() > 127):
        raise NpuError("2:4 sparse weight stream holds a weight outside -127..127")
    groups = np.concatenate([v, np.zeros((-len(v)) % 4, dtype=v.dtype)]).reshape(-1, 4)
    nonzero = np.count_nonzero(groups, axis=1)
    bad = np.flatnonzero(nonzero > 2)
    if len(bad):
        raise NpuError(f"2:4 sparse weight stream is not 2:4 sparse: the group of 4 at stream position "
                       f"{4 * int(bad[0])} holds {int(nonzero[bad[0]])} non-zero weights")
