"""Ethos-U85 on the functional model: the U55 machine with the U85's register semantics.

What differs from the U55 (emlkit/npu/regs_u85.py has the field positions):
- precision registers carry the storage mode: CHAINED operands live in an internal
  chaining buffer (the REGION register names it) instead of memory, and NONE
  disables the OFM write;
- the OFM can be written transposed (OFM_PRECISION activation_transpose), which is
  how Vela turns ExecuTorch's NCHW<->NHWC permutes into single commands;
- scaling: rounding comes from the OFM/IFM/IFM2_SCALE registers, and elementwise
  ADD/SUB/MIN/MAX rescale each operand by its own IFM_SCALE/IFM2_SCALE before the sum or comparison;
- pooling adds SUM (window sum: 1x1 pools implement rescale, transpose and LUT ops)
  and NONE (the accumulator is loaded from IFM2: int32 rescales), and AVERAGE
  divides by the number of non-padding elements in hardware;
- tables live in a 2 KiB LUT RAM, filled by DMA to internal region 3, in 256-byte slots;
- weights use the U85 stream formats (emlkit/npu/weights_u85.py, 2:4 sparse included), and CONV with weights_ifm2
  multiplies two feature maps (a matmul).
- RESIZE (nearest and bilinear) computes TOSA's RESIZE from the scale numerator, step (the denominator) and
  offset registers, its accumulator carrying 16 more fraction bits than TOSA's result (OFM_SCALE shifts by
  16 plus the fused rescale's shift).
Not modelled (each is a clear NpuError naming the command): RESIZE REPLICATE, OFM reverse,
accumulator KEEP / disabled outputs (accumulator chaining), strided or indexed DMA, and the
rounding modes and elementwise functions no zoo program uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from emlkit.npu import regs_u85 as R
from emlkit.npu.blob import VelaBlob
from emlkit.npu.errors import NpuError
from emlkit.npu.execute import (ROUND_NATURAL, ROUND_TFL, ROUND_TRUNCATE, Machine, _s16, divide_by_count, pool_windows,
                             rescale)

_ROUNDING = {R.ROUND_DOUBLE_SYMMETRIC: ROUND_TFL, R.ROUND_TRUNCATE_TO_ZERO: ROUND_TRUNCATE, R.ROUND_NATURAL: ROUND_NATURAL}
_DTYPES = {(8, 1): np.int8, (8, 0): np.uint8, (16, 1): np.int16, (16, 0): np.uint16, (32, 1): np.int32}


def _s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


class MachineU85(Machine):
    """One Ethos-U85 running one blob."""

    arch = "u85"
    product = "Ethos-U85"
    pool_modes = R.POOL_MODES
    elementwise_modes = R.ELEMENTWISE

    def __init__(self, blob: VelaBlob) -> None:
        super().__init__(blob)
        self.lutram = np.zeros(R.LUT_RAM_BYTES, dtype=np.uint8)
        self.chain: dict[int, np.ndarray] = {}
        self.stored = np.zeros((0, 0, 0), dtype=np.int64)   # the last OFM as laid out (after any transpose)

    # ---- feature maps ---------------------------------------------------------------
    def _precision(self, prefix: str) -> tuple[int, Any, int, int]:
        """-> (raw register, dtype, layout (0 NHWC, 1 NHCWB16), storage mode)."""
        reg = f"NPU_SET_{prefix}_PRECISION"
        prec = self.r(reg, None)
        bits = R.PRECISION_BITS[(prec >> (1 if prefix == "OFM" else 2)) & 0x3]
        dtype = _DTYPES.get((bits, prec & 1))
        if dtype is None:
            raise NpuError(f"{reg} selects {'signed' if prec & 1 else 'unsigned'} {bits}-bit data, which the "
                           "functional model does not handle")
        fmt = (prec >> 6) & 0x3
        if fmt > 1:
            raise NpuError(f"{reg} selects layout {fmt}; only NHWC (0) and NHCWB16 (1) exist")
        storage = (prec >> 14) & 0x3
        if storage not in (R.STORAGE_TILE2X2, R.STORAGE_CHAINED, R.STORAGE_NONE):
            raise NpuError(f"{reg} selects storage mode {storage}, which is not modelled")
        return prec, dtype, fmt, storage

    def fm_format(self, prefix: str) -> tuple[Any, int]:
        _, dtype, fmt, _ = self._precision(prefix)
        return dtype, fmt

    def read_operand(self, prefix: str, h: int, w: int, c: int, what: str) -> np.ndarray:
        _, _, _, storage = self._precision(prefix)
        fm = self.fmap(prefix)
        if storage == R.STORAGE_CHAINED:
            buf = self.chain.get(fm.region)
            if buf is None:
                raise NpuError(f"{what} reads chaining buffer {fm.region}, which no earlier command filled")
            if buf.shape[0] < h or buf.shape[1] < w or buf.shape[2] < c:
                raise NpuError(f"{what} reads {h}x{w}x{c} from chaining buffer {fm.region}, which holds "
                               f"{'x'.join(map(str, buf.shape))}")
            return buf[:h, :w, :c] - fm.zero_point
        if storage == R.STORAGE_NONE:
            raise NpuError(f"{what} has storage mode NONE (a scalar) where a feature map is needed")
        return self.read(fm, h, w, c, what) - fm.zero_point

    def store_ofm(self, values: np.ndarray, op: str) -> None:
        prec, _, _, storage = self._precision("OFM")
        fm = self.fmap("OFM")
        if (prec >> 9) & 0x3:
            raise NpuError(f"{op}: OFM_PRECISION selects reverse mode {(prec >> 9) & 3}, which is not modelled")
        self.stored = values
        if storage == R.STORAGE_CHAINED:
            self.chain[fm.region] = values.copy()
            return
        if storage == R.STORAGE_NONE:
            return
        code = (prec >> 11) & 0x7
        if code not in R.TRANSPOSES:
            raise NpuError(f"{op}: OFM_PRECISION selects transpose {code}, which the U85 does not define")
        self.stored = np.ascontiguousarray(values.transpose(R.TRANSPOSES[code][1]))
        self.write(fm, self.stored, f"{op} OFM")

    # ---- scaling and activation ----------------------------------------------------------
    def rounding(self, reg: str, op: str) -> int:
        param = self.r(reg)
        if (param >> 6) & 0x1F:
            raise NpuError(f"{op}: {reg} sets dbl_rnd {(param >> 6) & 0x1F} (TFLite double rounding), not modelled")
        mode = (param >> 12) & 0x7
        if mode not in _ROUNDING:
            raise NpuError(f"{op}: {reg} selects rounding mode {mode}, which is not modelled")
        return _ROUNDING[mode]

    def scale_reg(self, reg: str) -> tuple[int, int]:
        return self.p(reg, 1), self.r(reg) & 0x3F

    def output_stage(self, acc: np.ndarray, scale: Any, shift: Any, op: str) -> np.ndarray:
        fm = self.fmap("OFM")
        out = rescale(acc, scale, shift, self.rounding("NPU_SET_OFM_SCALE", op)) + fm.zero_point
        act = self.r("NPU_SET_ACTIVATION")
        func, table, clip = act & 0x1F, (act >> 5) & 0x7, (act >> 12) & 0x3
        info = np.iinfo(fm.dtype)
        lo, hi = int(info.min), int(info.max)
        if clip == 0:   # B16: the ACTIVATION_MIN/MAX bounds (16-bit)
            lo = max(lo, _s16(self.r("NPU_SET_ACTIVATION_MIN", lo & 0xFFFF)))
            raw_max = self.r("NPU_SET_ACTIVATION_MAX", hi & 0xFFFF)
            hi = min(hi, raw_max if not np.issubdtype(fm.dtype, np.signedinteger) else _s16(raw_max))
        elif clip != 1:  # 1: NONE, saturate to the OFM type only
            raise NpuError(f"{op}: ACTIVATION clip range {clip} is not modelled")
        out = np.clip(out, lo, hi)
        if func == R.ACT_LUT_NONE:
            return out
        if func == R.ACT_LUT_S8_S8:
            if fm.dtype is not np.int8:
                raise NpuError(f"{op}: LUT_S8_S8 with a {np.dtype(fm.dtype).name} OFM")
            t = self.lutram[R.LUT_SLOT_BYTES * table: R.LUT_SLOT_BYTES * (table + 1)].view(np.int8)
            return t[out + 128].astype(np.int64)
        raise NpuError(f"{op}: activation function {func} (a 16/32-bit table or tanh/sigmoid) is not modelled")

    def accumulator_input(self, op: str) -> int:
        acc = self.r("NPU_SET_ACC_FORMAT")
        if (acc >> 6) & 1:
            raise NpuError(f"{op}: ACC_FORMAT disables the OFM output (accumulator chaining), not modelled")
        source = (acc >> 4) & 0x3
        if source == R.ACC_INPUT_KEEP:
            raise NpuError(f"{op}: ACC_FORMAT keeps the previous accumulators (accumulator chaining), not modelled")
        return source

    # ---- operations -----------------------------------------------------------------
    def op_conv(self, depthwise: bool) -> tuple[np.ndarray, tuple, tuple]:
        op = "DEPTHWISE" if depthwise else "CONV"
        if self.accumulator_input(op) != R.ACC_INPUT_RESET:
            raise NpuError(f"{op} with its accumulators loaded from IFM2 is not modelled")
        if not depthwise and self.op_param & 1:
            return self.op_matmul()
        _, ishape, kernel = super().op_conv(depthwise)
        return self.stored, ishape, kernel

    def op_matmul(self) -> tuple[np.ndarray, tuple, tuple]:
        """CONV with weights_ifm2: OFM[y, x, n] = sum_k IFM[y, x, k] * IFM2[y, n, k] (both minus their zero
        points), globally scaled. This is how Vela runs a matmul of two activations (attention's q @ k^T)."""
        op = "MATMUL"
        oh, ow, oc = self.ofm_shape()
        ic = self.r("NPU_SET_IFM_DEPTH_M1") + 1
        kh, kw = self.r("NPU_SET_KERNEL_HEIGHT_M1") + 1, self.r("NPU_SET_KERNEL_WIDTH_M1") + 1
        if (kh, kw) != (1, 1) or any(self.padding()):
            raise NpuError(f"{op} with a {kh}x{kw} kernel or padding is not modelled")
        a = self.read_operand("IFM", oh, ow, ic, f"{op} IFM")
        b = self.read_operand("IFM2", oh, oc, ic, f"{op} IFM2")
        acc = np.einsum("yxk,ynk->yxn", a, b)
        bias, scale, shift = self.block_scale(oc, op)
        self.store_ofm(self.output_stage(acc + bias, scale, shift, op), op)
        return self.stored, (oh, ow, ic), ()

    def conv_weights(self, op: str, oc: int, kh: int, kw: int, ic: int, depthwise: bool,
                     dilation: tuple[int, int]) -> np.ndarray:
        from emlkit.npu.weights_u85 import DECODERS, decode_weights_u85

        wf = self.r("NPU_SET_WEIGHT_FORMAT")
        if wf & ~0x11:
            raise NpuError(f"{op}: WEIGHT_FORMAT 0x{wf:x} sets reserved bits")
        ub = (self.r("NPU_SET_ACC_FORMAT") >> 8) & 0x7
        if ub not in R.MICROBLOCKS:
            raise NpuError(f"{op}: ACC_FORMAT micro-block {ub} is not defined")
        _, _, sy, sx, _, _ = self.kernel()
        macs = 1 << self.blob.config.macs_per_cc if self.blob.config is not None else 256
        # One stream per weight decoder (DECODERS[macs]); the fast format interleaves them in one.
        decoders = DECODERS.get(macs, 1)
        streams = 1 if wf & 0x1 else decoders
        for i in range(decoders, 4):
            if self.p(f"NPU_SET_WEIGHT{i}_LENGTH", 0):
                raise NpuError(f"{op} gives weight stream {i} (WEIGHT{i}_LENGTH), the {macs}-MAC Ethos-U85 has "
                               f"{decoders} weight decoder{'s' if decoders > 1 else ''}")
        raws = [self.weight_stream(op, *(("NPU_SET_WEIGHT_BASE", "NPU_SET_WEIGHT_LENGTH") if i == 0 else
                                          (f"NPU_SET_WEIGHT{i}_BASE", f"NPU_SET_WEIGHT{i}_LENGTH")))
                for i in range(streams)]
        return decode_weights_u85(
            raws, ofm_depth=oc, kh=kh, kw=kw, ifm_depth=ic, depthwise=depthwise,
            part_kernel=bool((self.r("NPU_SET_KERNEL_STRIDE") >> 2) & 1), ifm_bits=self.ifm_bits(),
            dilation=(dilation[1], dilation[0]), stride=(sy, sx),
            ofm_block_depth=self.r("NPU_SET_OFM_BLK_DEPTH_M1") + 1, microblock_hw=R.MICROBLOCKS[ub][0] * R.MICROBLOCKS[ub][1],
            macs=macs, weight_format=wf & 0x1, sparsity=(wf >> 4) & 0x1)

    def decode_scales(self, raw: bytes, channels: int, op: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from emlkit.npu.weights_u85 import decode_scales_u85

        acc = self.r("NPU_SET_ACC_FORMAT") & 0x3
        if acc not in (0, 1):
            raise NpuError(f"{op}: ACC_FORMAT accumulator type {acc} is not defined")
        return decode_scales_u85(raw, channels, acc48=acc == 1)

    def block_scale(self, oc: int, op: str) -> tuple[Any, Any, Any]:
        """(bias, scale, shift) for a pool, elementwise or matmul: OFM_SCALE when OFM_PRECISION selects the
        global scale, else the per-channel scale stream (regor's POOL NONE rescale after a transpose conv)."""
        if (self.r("NPU_SET_OFM_PRECISION") >> 8) & 1:
            return (0, *self.global_scale())
        bias, scale, shift = self.scales(oc, op)
        return bias, scale, shift

    def op_pool(self, mode: int) -> tuple[np.ndarray, tuple, tuple]:
        name = R.POOL_MODES.get(mode)
        if name is None:
            raise NpuError(f"NPU_OP_POOL with unknown pooling mode {mode}")
        op = f"POOL {name.upper()}"
        oh, ow, oc = self.ofm_shape()
        source = self.accumulator_input(op)
        bias, scale, shift = self.block_scale(oc, op)
        if name == "none":
            if source != R.ACC_INPUT_IFM2:
                raise NpuError(f"{op} without its accumulators loaded from IFM2")
            acc = self.read_operand("IFM2", oh, ow, oc, f"{op} IFM2") + bias
            self.store_ofm(self.output_stage(acc, scale, shift, op), op)
            return self.stored, (oh, ow, oc), ()
        if source != R.ACC_INPUT_RESET:
            raise NpuError(f"{op} with its accumulators loaded from IFM2 is not modelled")
        ifm, valid, (kh, kw, sy, sx, dy, dx), ic = self.pool_input(op, name, oh, ow, oc)
        acc, count = pool_windows(ifm, valid, name == "max", oh, ow, (kh, kw, sy, sx))
        if name == "avg":
            acc = divide_by_count(acc, count, op)
        self.store_ofm(self.output_stage(acc + bias, scale, shift, op), op)
        return self.stored, (ifm.shape[0], ifm.shape[1], ic), (kh, kw, sy, sx)

    def elementwise_operand(self, prefix: str, oh: int, ow: int, oc: int, op: str) -> np.ndarray:
        bc = self.r(f"NPU_SET_{prefix}_BROADCAST")
        if bc & 0x8:  # scalar from OP_SCALAR
            fm_zp = _s16(self.r(f"NPU_SET_{prefix}_ZERO_POINT"))
            val = _s32(self.p("NPU_SET_OP_SCALAR", None))
            return np.full((oh, ow, oc), val - fm_zp, dtype=np.int64)
        if bc & ~0xF:
            raise NpuError(f"{op}: {prefix}_BROADCAST mode 0x{bc:x} is not defined")
        h, w, c = (1 if bc & 1 else oh), (1 if bc & 2 else ow), (1 if bc & 4 else oc)
        return np.broadcast_to(self.read_operand(prefix, h, w, c, f"{op} {prefix}"), (oh, ow, oc))

    def op_elementwise(self, mode: int) -> tuple[np.ndarray, tuple, tuple]:
        name = R.ELEMENTWISE.get(mode)
        if name is None:
            raise NpuError(f"NPU_OP_ELEMENTWISE mode {mode} is not modelled")
        op = f"ELEMENTWISE {name.upper()}"
        self.check_upscale(op)
        if self.accumulator_input(op) != R.ACC_INPUT_RESET:
            raise NpuError(f"{op} with its accumulators loaded from IFM2 is not modelled")
        oh, ow, oc = self.ofm_shape()
        a = self.elementwise_operand("IFM", oh, ow, oc, op)
        b = self.elementwise_operand("IFM2", oh, ow, oc, op)
        a = rescale(a, *self.scale_reg("NPU_SET_IFM_SCALE"), self.rounding("NPU_SET_IFM_SCALE", op))
        b = rescale(b, *self.scale_reg("NPU_SET_IFM2_SCALE"), self.rounding("NPU_SET_IFM2_SCALE", op))
        # MIN/MAX compare the operands after their own IFM/IFM2_SCALE (regor brings both to one scale there, e.g.
        # IFM x 1.25 and IFM2 x 1 for a minimum of two convs), then rescale by OFM_SCALE as ADD does.
        arith = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
                 "min": lambda: np.minimum(a, b), "max": lambda: np.maximum(a, b)}
        if name not in arith:  # LRELU, ABS (unary): a named SKIP, not a KeyError
            raise NpuError(f"{op} is not modelled yet")
        acc = arith[name]()
        bias, scale, shift = self.block_scale(oc, op)
        self.store_ofm(self.output_stage(acc + bias, scale, shift, op), op)
        return self.stored, (oh, ow, oc), ()

    def resize_axis(self, axis: str, out_len: int, in_len: int, op: str) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """One axis of a RESIZE: (scale numerator n, lower and upper source index, fraction in 1/n) per output
        position. Output o samples source position (o * d + offset) / n, d = one_step_int * n + one_step_mod
        (TOSA's scale denominator); both neighbours are clamped to the IFM (the KERNEL size registers)."""
        n = (self.r(f"NPU_SET_RESIZE_{axis}_SCALE_N_M1", None) & 0x7FF) + 1
        step = self.r(f"NPU_SET_RESIZE_{axis}_STEP", None)
        mod = self.p(f"NPU_SET_RESIZE_{axis}_STEP", None) & 0x7FF
        if mod >= n:
            raise NpuError(f"{op}: RESIZE_{axis}_STEP one_step_mod {mod} is not below the scale numerator {n}")
        d = (step & 0xF) * n + mod
        off = self.r(f"NPU_SET_RESIZE_{axis}_OFFSET", None) & 0xFFF
        off = off - 0x1000 if off & 0x800 else off
        pos = np.arange(out_len, dtype=np.int64) * d + off
        i = pos // n                       # floor division: offsets may be negative
        frac = pos - i * n
        return n, np.clip(i, 0, in_len - 1), np.clip(i + 1, 0, in_len - 1), frac

    def op_resize(self, mode: int) -> tuple[np.ndarray, tuple, str]:
        """NPU_OP_RESIZE: TOSA RESIZE of the IFM (KERNEL_HEIGHT/WIDTH give its size) to the OFM size.

        NEAREST picks the upper neighbour when the fraction is at least one half; BILINEAR weights the four
        neighbours by (n - f) and f per axis (TOSA's integer weights, summing to ny * nx). The hardware
        accumulator is TOSA's result times 2^16; OFM_SCALE (Vela: scale 1, shift 16 + the fused rescale's
        shift) brings it back."""
        name = R.RESIZE_MODES.get(mode & 0x3)
        if name is None or mode & 0x3 == R.RESIZE_REPLICATE:
            raise NpuError(f"NPU_OP_RESIZE mode {mode} ({name or 'undefined'}) is not modelled")
        op = f"RESIZE {name.upper()}"
        self.check_upscale(op)
        if self.accumulator_input(op) != R.ACC_INPUT_RESET:
            raise NpuError(f"{op} with its accumulators loaded from IFM2 is not modelled")
        if any(self.padding()):
            raise NpuError(f"{op} with IFM padding is not modelled")
        if not (self.r("NPU_SET_OFM_PRECISION") >> 8) & 1:
            raise NpuError(f"{op} with a per-channel OFM scale is not modelled")
        oh, ow, oc = self.ofm_shape()
        ih, iw = self.r("NPU_SET_KERNEL_HEIGHT_M1") + 1, self.r("NPU_SET_KERNEL_WIDTH_M1") + 1
        ifm = self.read_operand("IFM", ih, iw, oc, f"{op} IFM")
        ny, y0, y1, fy = self.resize_axis("Y", oh, ih, op)
        nx, x0, x1, fx = self.resize_axis("X", ow, iw, op)
        if mode & 0x3 == R.RESIZE_NEAREST:
            ys = np.where(2 * fy >= ny, y1, y0)
            xs = np.where(2 * fx >= nx, x1, x0)
            acc = ifm[ys[:, None], xs[None, :]]
        else:
            wy0, wy1 = (ny - fy)[:, None, None], fy[:, None, None]
            wx0, wx1 = (nx - fx)[None, :, None], fx[None, :, None]
            acc = (ifm[y0[:, None], x0[None, :]] * wy0 * wx0 + ifm[y0[:, None], x1[None, :]] * wy0 * wx1
                   + ifm[y1[:, None], x0[None, :]] * wy1 * wx0 + ifm[y1[:, None], x1[None, :]] * wy1 * wx1)
        scale, shift = self.global_scale()
        self.store_ofm(self.output_stage(acc << 16, scale, shift, op), op)
        return self.stored, (ih, iw, oc), op.replace(" ", "_")

    def op_dma(self) -> None:
        src_reg, dst_reg = self.r("NPU_SET_DMA0_SRC_REGION"), self.r("NPU_SET_DMA0_DST_REGION")
        if src_reg >> 9 or dst_reg >> 9:
            raise NpuError("NPU_OP_DMA_START with 2-D/3-D strides or index mode is not modelled")
        src, dst, n = self.p("NPU_SET_DMA0_SRC"), self.p("NPU_SET_DMA0_DST"), self.p("NPU_SET_DMA0_LEN")
        if (src_reg >> 8) & 1:
            raise NpuError(f"DMA from internal memory region {src_reg & 0x7} is not modelled")
        smem = self.mem(src_reg & 0x7, "DMA source")
        if (dst_reg >> 8) & 1:
            if dst_reg & 0x7 != 3:
                raise NpuError(f"DMA to internal memory region {dst_reg & 0x7} (only 3, the LUT RAM, is modelled)")
            dmem = self.lutram
        else:
            if dst_reg & 0x7 == 0:
                raise NpuError("DMA writes to region 0, which holds the read-only weights")
            dmem = self.mem(dst_reg & 0x7, "DMA destination")
        if src + n > len(smem) or dst + n > len(dmem):
            raise NpuError(f"DMA of {n} bytes from 0x{src:x} to 0x{dst:x} runs past the end of its memory")
        dmem[dst:dst + n] = smem[src:src + n]
