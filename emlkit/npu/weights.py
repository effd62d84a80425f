"""Weight and scale streams of Ethos-U55 convolutions.

Scale stream: 10 bytes per output channel, little endian: 40-bit signed bias,
32-bit unsigned scale, 6-bit shift.

Weight stream: an MLW-compressed sequence (decoded by ethosu.mlw_codec) of the
weights in the order the MAC array consumes them. This module rebuilds the
gather that maps that order back to an OHWI tensor: OFM blocks, then IFM blocks
(32 channels for 8-bit depth-first, 16 otherwise), then sub-kernels of at most
8x8 (4x8 etc. with dilation), then within a sub-kernel either IFM micro-blocks
outermost (part-kernel-first) or kernel elements outermost (depth-first), with
OFM micro-blocks and the OFM x IFM micro-block elements innermost. Kernel
elements are padded to a multiple of 4 (8-bit) or 2 (16-bit) in part-kernel
mode and to 4 in depthwise mode; padded slots decode to zero.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from emlkit.npu.errors import NpuError


def decode_scales(raw: bytes, channels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> (bias int64, scale int64 (unsigned 32-bit value), shift int64), one per channel."""
    need = 10 * channels
    if len(raw) < need:
        raise NpuError(f"scale stream is {len(raw)} bytes, {channels} output channels need {need}")
    b = np.frombuffer(raw[:need], dtype=np.uint8).reshape(channels, 10).astype(np.int64)
    bias = sum(b[:, i] << (8 * i) for i in range(5))
    bias = np.where(bias >= 1 << 39, bias - (1 << 40), bias)
    scale = sum(b[:, 5 + i] << (8 * i) for i in range(4))
    shift = b[:, 9] & 0x3F
    return bias, scale, shift


@lru_cache(maxsize=256)
def _order(ofm_depth: int, kh: int, kw: int, ifm_depth: int, ofm_block_depth: int, depthwise: bool,
           part_kernel: bool, ifm_bits: int, decomp_h: int, decomp_w: int,
           ifm_ublock: int, ofm_ublock: int) -> np.ndarray:
    """Flat OHWI index of each stream position (-1 for zero padding)."""
    ifm_block_depth = 16 if (part_kernel or ifm_bits == 16) else 32
    pieces: list[np.ndarray] = []
    for ofm_z0 in range(0, ofm_depth, ofm_block_depth):
        ofm_blk = min(ofm_block_depth, ofm_depth - ofm_z0)
        for ifm_z0 in range(0, 1 if depthwise else ifm_depth, ifm_block_depth):
            if depthwise:
                ifm_blk = ifm_ublock
            else:
                ifm_blk = min(ifm_block_depth, ifm_depth - ifm_z0) if part_kernel else ifm_block_depth
            for sy in range(0, kh, decomp_h):
                sub_h = min(kh - sy, decomp_h)
                for sx in range(0, kw, decomp_w):
                    sub_w = min(kw - sx, decomp_w)
                    elems = sub_w * sub_h
                    if part_kernel:
                        mult = 2 if ifm_bits == 16 else 4
                        elems = -(-elems // mult) * mult
                    elif depthwise:
                        elems = -(-elems // 4) * 4
                    e = np.arange(elems)
                    kx, ky = e % sub_w, e // sub_w
                    ou = np.arange(ofm_ublock)
                    iu = np.arange(1 if depthwise else ifm_ublock)
                    ofm_u = np.arange(0, ofm_blk, ofm_ublock)
                    if part_kernel:
                        # [ifm ublock outer, ofm ublock, element, ofm in ublock, ifm in ublock]
                        io = np.arange(0, ifm_blk, ifm_ublock)
                        I, O, E, OU, IU = np.meshgrid(io, ofm_u, e, ou, iu, indexing="ij")
                    else:
                        # [ofm ublock, element, ifm ublock inner, ofm in ublock, ifm in ublock]
                        ii = np.arange(0, ifm_blk, ifm_ublock)
                        O, E, I, OU, IU = np.meshgrid(ofm_u, e, ii, ou, iu, indexing="ij")
                    KX, KY = E % sub_w, E // sub_w
                    ifm_z = ifm_z0 + I + IU
                    ofm_z = ofm_z0 + O + OU
                    wy, wx = sy + KY, sx + KX
                    i_depth = 1 if depthwise else ifm_depth
                    valid = (ifm_z < i_depth) & (ofm_z < ofm_depth) & (KY < sub_h)
                    if depthwise:
                        ifm_z = np.zeros_like(ifm_z)
                    flat = ((ofm_z * kh + wy) * kw + wx) * i_depth + ifm_z
                    pieces.append(np.where(valid, flat, -1).ravel())
                    del kx, ky
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


def decode_weights(raw: bytes, ofm_depth: int, kh: int, kw: int, ifm_depth: int, ofm_block_depth: int,
                   depthwise: bool, part_kernel: bool, ifm_bits: int, dilation: tuple[int, int],
                   ifm_ublock: int = 8, ofm_ublock: int = 8) -> np.ndarray:
    """Compressed U55 weight stream -> int64 weights, OHWI (I = 1 for depthwise)."""
    values = mlw_values(raw)
    order = _order(ofm_depth, kh, kw, 1 if depthwise else ifm_depth, max(1, min(ofm_block_depth, ofm_depth)),
                   depthwise, part_kernel, ifm_bits, 8 // dilation[1], 8 // dilation[0], ifm_ublock, ofm_ublock)
    return scatter_ohwi(values, order, (ofm_depth, kh, kw, 1 if depthwise else ifm_depth))


def mlw_values(raw: bytes) -> np.ndarray:
    """An MLW-compressed weight stream -> its int64 values, in stream order."""
    if not raw:
        raise NpuError("convolution has an empty weight stream (WEIGHT_LENGTH 0)")
    return _mlw_decode(bytes(raw)).astype(np.int64)


@lru_cache(maxsize=512)
def _mlw_decode(raw: bytes) -> np.ndarray:
    """ethosu.mlw_codec.decode, in a forked child: on a truncated or corrupt stream the codec calls
    exit(), which would end the whole process instead of giving an error."""
    import os

    from ethosu import mlw_codec

    if not hasattr(os, "fork"):
        return np.asarray(mlw_codec.decode(bytearray(raw)), dtype=np.int16)
    rd, wr = os.pipe()
    err_rd, err_wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: decode, send int16 values, never return into the parent's code
        status = 1
        try:
            os.close(rd)
            os.close(err_rd)
            os.dup2(err_wr, 1)  # the codec reports on stdout
            os.dup2(err_wr, 2)
            data = np.asarray(mlw_codec.decode(bytearray(raw)), dtype=np.int16).tobytes()
            with os.fdopen(wr, "wb") as f:
                f.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(wr)
    os.close(err_wr)
    with os.fdopen(rd, "rb") as f:
        data = f.read()
    with os.fdopen(err_rd, "rb") as f:
        message = f.read().decode(errors="replace").strip().splitlines()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        why = message[-1] if message else f"decoder exit status {status}"
        raise NpuError(f"weight stream of {len(raw)} bytes does not decode as MLW ({why}): the blob is corrupt")
    values = np.frombuffer(data, dtype=np.int16)
    values.flags.writeable = False
    return values


def scatter_ohwi(values: np.ndarray, order: np.ndarray, shape: tuple[int, int, int, int]) -> np.ndarray:
    """Stream-order values -> the OHWI tensor, through the order's flat index per position (-1: padding)."""
    if len(values) < len(order):
        raise NpuError(f"weight stream decodes to {len(values)} weights, the command's kernel "
                       f"{'x'.join(map(str, shape))} needs {len(order)}: wrong stream or block depth")
    w = np.zeros(int(np.prod(shape)), dtype=np.int64)
    keep = order >= 0
    w[order[keep]] = values[: len(order)][keep]
    return w.reshape(shape)
