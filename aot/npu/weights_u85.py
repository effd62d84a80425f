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
order (8-bit weights, one weight decoder). 2:4 sparse streams are not modelled.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from aot.npu.errors import NpuError
from aot.npu.weights import mlw_values, scatter_ohwi

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
           stride: tuple[int, int], dilation: tuple[int, int], ifm_block_depth: int, ofm_ublock_depth: int) -> np.ndarray:
    """Flat OHWI index of each stream position (-1 for zero padding); OHWI has I = 1 for depthwise."""
    depthwise = traversal == "depthwise"
    if traversal == "part_kernel":
        sy, sx, round_to, ifm_ublock = stride[0], stride[1], 5, ifm_block_depth
    elif traversal == "depth_first":
        sy, sx, round_to, ifm_ublock = 1, 1, 1, ifm_block_depth
    else:
        sy, sx, round_to, ifm_ublock = stride[0], stride[1], 10, 1
    step = 1 if depthwise else 8
    # Within one element: [ifm ublock inner (step 8)][ofm group of 4][4 ofm][8 ifm].
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


def block_sizes(traversal: str, ifm_bits: int, macs: int, microblock_hw: int) -> tuple[int, int]:
    """(IFM block depth, OFM micro-block depth) the 256-MAC U85 uses; NpuError for other configurations."""
    if macs != 256 or ifm_bits != 8:
        raise NpuError(f"U85 weight order for {macs} MACs with {ifm_bits}-bit IFMs is not modelled "
                       "(only the 256-MAC configuration with 8-bit IFMs)")
    if 256 // 8 % microblock_hw:
        raise NpuError(f"micro-block of {microblock_hw} elements does not divide the MAC array")
    return (16 if traversal == "part_kernel" else 64), 256 // 8 // microblock_hw


def decode_weights_u85(raw: bytes, *, ofm_depth: int, kh: int, kw: int, ifm_depth: int, depthwise: bool,
                       part_kernel: bool, ifm_bits: int, dilation: tuple[int, int], stride: tuple[int, int],
                       ofm_block_depth: int, microblock_hw: int, macs: int, weight_format: int,
                       sparsity: int) -> np.ndarray:
    """U85 weight stream -> int64 weights, OHWI (I = 1 for depthwise). dilation and stride are (y, x)."""
    if sparsity:
        raise NpuError("2:4 sparse weights (WEIGHT_FORMAT sparsity) are not modelled")
    if not raw:
        raise NpuError("convolution has an empty weight stream (WEIGHT_LENGTH 0)")
    traversal = "depthwise" if depthwise else ("part_kernel" if part_kernel else "depth_first")
    ifm_block, ofm_ublock = block_sizes(traversal, ifm_bits, macs, microblock_hw)
    if ofm_block_depth < ofm_depth and ofm_block_depth % ofm_ublock:
        raise NpuError(f"OFM block depth {ofm_block_depth} is not a whole number of {ofm_ublock}-deep micro-blocks")
    order = _order(ofm_depth, kh, kw, 1 if depthwise else ifm_depth, max(1, min(ofm_block_depth, ofm_depth)),
                   traversal, stride, dilation, ifm_block, ofm_ublock)
    if weight_format == 1:
        if depthwise:
            raise NpuError("fast weight format (FWD) on a depthwise convolution is not defined")
        if len(raw) < FWD_HEADER_BYTES + len(order):
            raise NpuError(f"fast weight stream of {len(raw)} bytes is too short for the kernel's "
                           f"{len(order)} weights")
        values = np.frombuffer(raw, dtype=np.int8, count=len(order), offset=FWD_HEADER_BYTES).astype(np.int64)
    else:
        if len(raw) >= 16 and raw[:1] == b"\x01" and not any(raw[1:13]):
            raise NpuError("weight stream is not MLW-compressed (a fast-weight header under WEIGHT_FORMAT SWD)")
        values = mlw_values(raw)
    return scatter_ohwi(values, order, (ofm_depth, kh, kw, 1 if depthwise else ifm_depth))
