"""Weight and scale streams of Ethos-U85 convolutions.

Scale stream: 10 bytes per output channel (the channel count rounded up to 16),
little endian. With 32-bit accumulators: 32-bit signed bias, 31-bit scale,
6-bit shift, one zero byte. With 48-bit accumulators (16-bit IFMs): 48-bit signed
bias, 15-bit scale, 6-bit shift, one zero byte.

Weight stream, standard format (SWD): MLW-compressed (ethosu.mlw_codec) weights
in the order the MAC array consumes them. For each OFM block (OFM_BLK_DEPTH) the
IFM blocks are walked, alternately forwards and backwards; within them the kernel
is split into sub-kernels of at most 8x8 (8/dilation), then IFM micro-blocks,
then OFM micro-blocks; each OFM micro-block holds the sub-kernel's elements (by
stride phase, then rows with the columns in serpentine order, padded with zero
elements to a multiple of 5 for part-kernel-first, 10 for depthwise, 1 for
depth-first), and each element the weights for [IFM 8-group][OFM 4-group][4 OFM]
[8 IFM] (1 IFM for depthwise). The block sizes the hardware uses and the command stream
does not carry depend on the MAC configuration (regor's Ethos-U85 architecture table, see block_sizes):
the OFM micro-block depth is MACs / 8 / the micro-block's H x W (ACC_FORMAT); the IFM block depth is 16
(part-kernel-first), 32 (depth-first with a 16-deep micro-block on 128/256 MACs), 128 (2:4 sparse) or 64.
With 16-bit IFMs part-kernel-first walks 8-deep IFM micro-blocks and pads elements to a multiple of 10.

Configurations with several weight decoders (512 MACs: 2, 1024 and 2048: 4) have one weight stream per
decoder (WEIGHT_BASE, WEIGHT1_BASE, ...): decoder d takes the OFM groups of 4 d, d + n, d + 2n, ... of every
micro-block, and padding is shared out the same way. Depthwise streams on more than 256 MACs (or with 16-bit
IFMs) carry 2 (512 MACs or fewer) or 6 empty elements after every 10 kernel elements.

Fast weight format (FWD): a 32-byte header, then one byte per weight in the same
order (8-bit weights); with several weight decoders one stream interleaves blocks of
(OFM micro-block depth x IFM micro-block depth x element rounding / decoders) weights
of each. Header bit 0 is raw mode, bit 1 the 2-bit palette mode, byte 13 a zero
adjust; only raw mode without a zero adjust (what Vela writes for 8-bit weights) is
modelled, the palette modes are refused.

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


def decode_scales_u85(raw: bytes, channels: int, acc48: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> (bias int64, scale int64, shift int64), one per channel. acc48: the 48-bit accumulator layout
    (ACC_FORMAT I48, Vela's choice for 16-bit IFMs): 48-bit bias, 15-bit scale, 6-bit shift."""
    need = 10 * channels
    if len(raw) < need:
        raise NpuError(f"scale stream is {len(raw)} bytes, {channels} output channels need {need}")
    b = np.frombuffer(raw[:need], dtype=np.uint8).reshape(channels, 10)
    if acc48:
        bias = sum(b[:, i].astype(np.int64) << (8 * i) for i in range(6))
        bias = np.where(bias >= 1 << 47, bias - (1 << 48), bias).astype(np.int64)
        scale = (b[:, 6].astype(np.int64) | (b[:, 7].astype(np.int64) & 0x7F) << 8)
        shift = (b[:, 8] & 0x3F).astype(np.int64)
        return bias, scale, shift
    bias = b[:, 0:4].copy().view("<i4")[:, 0].astype(np.int64)
    scale = (b[:, 4:8].copy().view("<u4")[:, 0] & 0x7FFFFFFF).astype(np.int64)
    shift = (b[:, 8] & 0x3F).astype(np.int64)
    return bias, scale, shift


# Weight decoders per MAC configuration (regor's Ethos-U85 accelerator table): one weight stream each.
DECODERS = {128: 1, 256: 1, 512: 2, 1024: 4, 2048: 4}
# The OFM micro-blocks (H x W; depth MACs / 8 / H x W) each configuration has, by their H x W.
MICROBLOCK_HW = {128: (1, 2), 256: (2, 4), 512: (4,), 1024: (4, 8), 2048: (4, 16)}


@lru_cache(maxsize=256)
def _order(ofm_depth: int, kh: int, kw: int, ifm_depth: int, ofm_block_depth: int, traversal: str,
           stride: tuple[int, int], dilation: tuple[int, int], ifm_block_depth: int, ofm_ublock_depth: int,
           sparse: bool = False, ifm16: bool = False, streams: int = 1, stream: int = 0,
           dw_pad: int = 0) -> np.ndarray:
    """Flat OHWI index of each position of weight stream `stream` of `streams` (-1 for zero padding); OHWI has
    I = 1 for depthwise. sparse: the 2:4 sparse order (16 IFM channels per step, part-kernel elements padded to
    10). ifm16: 16-bit IFMs. dw_pad: empty depthwise elements after every 10 kernel elements."""
    depthwise = traversal == "depthwise"
    if depthwise and sparse:
        raise NpuError("2:4 sparse weights on a depthwise convolution are not defined")
    if traversal == "part_kernel":
        sy, sx = stride
        round_to = 10 if (sparse or ifm16) else 5
        ifm_ublock = 8 if (ifm16 and not sparse) else ifm_block_depth
    elif traversal == "depth_first":
        sy, sx, round_to, ifm_ublock = 1, 1, 1, ifm_block_depth
    else:
        sy, sx, round_to, ifm_ublock = stride[0], stride[1], 10, 1
    step = 1 if depthwise else (16 if sparse else 8)
    # Within one element: [ifm ublock inner (step 8, 16 sparse)][this stream's ofm groups of 4][4 ofm][8 (16) ifm].
    ii, og, oi, iz = np.meshgrid(np.arange(0, ifm_ublock, step),
                                 np.arange(stream * _INTERLEAVE, ofm_ublock_depth, _INTERLEAVE * streams),
                                 np.arange(_INTERLEAVE), np.arange(step), indexing="ij")
    o_off = (og + oi).ravel()
    i_off = (ii + iz).ravel()
    slot = len(o_off)                      # stream positions per kernel element
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
                            flat = np.where(valid, ((o * kh + wy) * kw + wx) * i_width + i, -1)
                            if dw_pad:
                                # every 10 element slots (the last group filled up) are followed by dw_pad empty ones
                                flat = np.concatenate([flat, np.full((pad, slot), -1, dtype=np.int64)])
                                flat = flat.reshape(-1, round_to, slot)
                                flat = np.concatenate([flat, np.full((len(flat), dw_pad, slot), -1, dtype=np.int64)],
                                                      axis=1)
                                pieces.append(flat.ravel())
                                continue
                            pieces.append(flat.ravel())
                            if pad:
                                pieces.append(np.full(pad * slot, -1, dtype=np.int64))
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


def block_sizes(traversal: str, ifm_bits: int, macs: int, microblock_hw: int, sparse: bool = False) -> tuple[int, int]:
    """(IFM block depth, OFM micro-block depth) of a convolution on the MACS configuration (regor's block
    selection: they are not in the command stream); NpuError for what is not modelled."""
    if macs not in DECODERS:
        raise NpuError(f"U85 weight order for {macs} MACs is not defined (the Ethos-U85 has 128, 256, 512, 1024 "
                       "or 2048)")
    if ifm_bits not in (8, 16):
        raise NpuError(f"U85 weight order with {ifm_bits}-bit IFMs is not modelled (only 8- and 16-bit IFMs)")
    if microblock_hw not in MICROBLOCK_HW[macs]:
        raise NpuError(f"the {macs}-MAC Ethos-U85 has no OFM micro-block of {microblock_hw} elements (ACC_FORMAT)")
    ofm_ublock = macs // 8 // microblock_hw
    if traversal == "part_kernel":
        ifm_block = 16
    elif macs in (128, 256) and ofm_ublock == 16 and not sparse:
        ifm_block = 32
    elif sparse and ifm_bits == 8:
        ifm_block = 128
    else:
        ifm_block = 64
    return ifm_block, ofm_ublock


def depthwise_padding(macs: int, ifm_bits: int) -> int:
    """Empty elements after every 10 depthwise kernel elements (regor's depthwise weight padding)."""
    if ifm_bits != 16 and macs <= 256:
        return 0
    return 2 if macs <= 512 else 6


def decode_weights_u85(raw: bytes | list[bytes], *, ofm_depth: int, kh: int, kw: int, ifm_depth: int,
                       depthwise: bool, part_kernel: bool, ifm_bits: int, dilation: tuple[int, int],
                       stride: tuple[int, int], ofm_block_depth: int, microblock_hw: int, macs: int,
                       weight_format: int, sparsity: int) -> np.ndarray:
    """U85 weight streams -> int64 weights, OHWI (I = 1 for depthwise). dilation and stride are (y, x).
    raw: the stream, or one per weight decoder (MLW; a fast-format program has one interleaved stream).
    sparsity: WEIGHT_FORMAT's weight_sparsity field (0 none, 1 2:4 sparse)."""
    if sparsity not in (0, 1):
        raise NpuError(f"WEIGHT_FORMAT weight_sparsity {sparsity} is not defined")
    raws = [raw] if isinstance(raw, (bytes, bytearray)) else list(raw)
    if not raws or not raws[0]:
        raise NpuError("convolution has an empty weight stream (WEIGHT_LENGTH 0)")
    sparse = bool(sparsity)
    if sparse and depthwise:
        raise NpuError("2:4 sparse weights (WEIGHT_FORMAT sparsity) on a depthwise convolution are not defined")
    traversal = "depthwise" if depthwise else ("part_kernel" if part_kernel else "depth_first")
    ifm_block, ofm_ublock = block_sizes(traversal, ifm_bits, macs, microblock_hw, sparse)
    if ofm_block_depth < ofm_depth and ofm_block_depth % ofm_ublock:
        raise NpuError(f"OFM block depth {ofm_block_depth} is not a whole number of {ofm_ublock}-deep micro-blocks")
    decoders = DECODERS[macs]
    if ofm_ublock % (_INTERLEAVE * decoders):
        raise NpuError(f"a {ofm_ublock}-deep OFM micro-block does not split over {decoders} weight decoders")
    shape = (ofm_depth, kh, kw, 1 if depthwise else ifm_depth)
    orders = [_order(ofm_depth, kh, kw, shape[3], max(1, min(ofm_block_depth, ofm_depth)), traversal, stride,
                     dilation, ifm_block, ofm_ublock, sparse, ifm_bits == 16, decoders, d,
                     depthwise_padding(macs, ifm_bits) if depthwise else 0) for d in range(decoders)]
    if weight_format == 1:
        if depthwise:
            raise NpuError("fast weight format (FWD) on a depthwise convolution is not defined")
        if len(raws) != 1:
            raise NpuError(f"fast weight format (FWD) has one stream, the command gives {len(raws)}")
        order = _interleave_fast(orders, ofm_ublock, ifm_block, traversal, sparse, ifm_bits == 16)
        data = raws[0]
        if len(data) < FWD_HEADER_BYTES + len(order):
            raise NpuError(f"fast weight stream of {len(data)} bytes is too short for the kernel's "
                           f"{len(order)} weights")
        if data[0] & 0x3 != 0x1 or data[13]:
            raise NpuError(f"fast weight stream header {bytes(data[:14]).hex()}: only raw mode (one byte per "
                           "weight, no zero adjust) is modelled, not its palette (LUT) modes")
        values = np.frombuffer(data, dtype=np.int8, count=len(order), offset=FWD_HEADER_BYTES).astype(np.int64)
        if sparse:
            check_sparse_2_4(values[: len(order)])
        return scatter_ohwi(values, order, shape)
    if len(raws) != decoders:
        raise NpuError(f"the {macs}-MAC Ethos-U85 has {decoders} weight decoders, the command gives "
                       f"{len(raws)} weight streams")
    w = np.zeros(shape, dtype=np.int64)
    for d, (data, order) in enumerate(zip(raws, orders)):
        if not data:
            raise NpuError(f"weight stream {d} of {decoders} is empty (WEIGHT{d or ''}_LENGTH 0)")
        if len(data) >= 16 and data[:1] == b"\x01" and not any(data[1:13]):
            raise NpuError("weight stream is not MLW-compressed (a fast-weight header under WEIGHT_FORMAT SWD)")
        values = mlw_values(data)
        if sparse:
            check_sparse_2_4(values[: len(order)])
        w += scatter_ohwi(values, order, shape)   # each decoder's positions are its own OFM channels
    return w


def _interleave_fast(orders: list[np.ndarray], ofm_ublock: int, ifm_block: int, traversal: str, sparse: bool,
                     ifm16: bool) -> np.ndarray:
    """The single fast-format stream of several decoders: blocks of one element-rounding group of each
    decoder's order in turn (regor's FWD interleaving)."""
    if len(orders) == 1:
        return orders[0]
    part_kernel = traversal == "part_kernel"
    ifm_ublock = 8 if (part_kernel and ifm16 and not sparse) else ifm_block
    rounding = (10 if (ifm16 or sparse) else 5) if part_kernel else 1
    block = ofm_ublock * ifm_ublock * rounding // len(orders)
    if any(len(o) != len(orders[0]) or len(o) % block for o in orders):
        raise NpuError("internal: the decoders' weight orders do not interleave in whole blocks")
    return np.stack([o.reshape(-1, block) for o in orders], axis=1).ravel()


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
