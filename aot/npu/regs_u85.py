"""Ethos-U85 register command map: opcode -> name, and the bit fields the functional model reads.

Vela ships no Python register description for the U85 (its U85 backend, regor, is
compiled C++), so this table is ours. Every opcode and field position below was
checked against regor's own field-level disassembly
(`vela --accelerator-config ethos-u85-256 --verbose-register-command-stream`) on
the zoo's programs; tests/test_npu_u85.py keeps that check. Names follow the U55
map where the register is shared.
"""

from __future__ import annotations

# Commands without payload (bits 14-15 = 0).
CMD0: dict[int, str] = {
    0x000: "NPU_OP_STOP", 0x001: "NPU_OP_IRQ", 0x002: "NPU_OP_CONV", 0x003: "NPU_OP_DEPTHWISE",
    0x005: "NPU_OP_POOL", 0x006: "NPU_OP_ELEMENTWISE", 0x007: "NPU_OP_RESIZE",
    0x010: "NPU_OP_DMA_START", 0x011: "NPU_OP_DMA_WAIT", 0x012: "NPU_OP_KERNEL_WAIT", 0x013: "NPU_OP_PMU_MASK",
    0x100: "NPU_SET_IFM_PAD_TOP", 0x101: "NPU_SET_IFM_PAD_LEFT", 0x102: "NPU_SET_IFM_PAD_RIGHT",
    0x103: "NPU_SET_IFM_PAD_BOTTOM", 0x104: "NPU_SET_IFM_DEPTH_M1", 0x105: "NPU_SET_IFM_PRECISION",
    0x107: "NPU_SET_IFM_UPSCALE", 0x108: "NPU_SET_IFM_BROADCAST", 0x109: "NPU_SET_IFM_ZERO_POINT",
    0x10A: "NPU_SET_IFM_WIDTH0_M1", 0x10B: "NPU_SET_IFM_HEIGHT0_M1", 0x10C: "NPU_SET_IFM_HEIGHT1_M1",
    0x10F: "NPU_SET_IFM_REGION",
    0x111: "NPU_SET_OFM_WIDTH_M1", 0x112: "NPU_SET_OFM_HEIGHT_M1", 0x113: "NPU_SET_OFM_DEPTH_M1",
    0x114: "NPU_SET_OFM_PRECISION", 0x115: "NPU_SET_OFM_BLK_WIDTH_M1", 0x116: "NPU_SET_OFM_BLK_HEIGHT_M1",
    0x117: "NPU_SET_OFM_BLK_DEPTH_M1", 0x118: "NPU_SET_OFM_ZERO_POINT", 0x11A: "NPU_SET_OFM_WIDTH0_M1",
    0x11B: "NPU_SET_OFM_HEIGHT0_M1", 0x11C: "NPU_SET_OFM_HEIGHT1_M1", 0x11F: "NPU_SET_OFM_REGION",
    0x120: "NPU_SET_KERNEL_WIDTH_M1", 0x121: "NPU_SET_KERNEL_HEIGHT_M1", 0x122: "NPU_SET_KERNEL_STRIDE",
    0x124: "NPU_SET_ACC_FORMAT", 0x125: "NPU_SET_ACTIVATION", 0x126: "NPU_SET_ACTIVATION_MIN",
    0x127: "NPU_SET_ACTIVATION_MAX", 0x128: "NPU_SET_WEIGHT_REGION", 0x129: "NPU_SET_SCALE_REGION",
    0x12A: "NPU_SET_RESIZE_X_SCALE_N_M1", 0x12B: "NPU_SET_RESIZE_Y_SCALE_N_M1", 0x12C: "NPU_SET_RESIZE_X_OFFSET",
    0x12D: "NPU_SET_RESIZE_Y_OFFSET", 0x12E: "NPU_SET_WEIGHT_FORMAT", 0x12F: "NPU_SET_BLOCKDEP",
    0x130: "NPU_SET_DMA0_SRC_REGION", 0x131: "NPU_SET_DMA0_DST_REGION", 0x132: "NPU_SET_DMA0_SIZE0",
    0x133: "NPU_SET_DMA0_SIZE1",
    0x180: "NPU_SET_IFM2_BROADCAST", 0x185: "NPU_SET_IFM2_PRECISION", 0x189: "NPU_SET_IFM2_ZERO_POINT",
    0x18A: "NPU_SET_IFM2_WIDTH0_M1", 0x18B: "NPU_SET_IFM2_HEIGHT0_M1", 0x18C: "NPU_SET_IFM2_HEIGHT1_M1",
    0x18F: "NPU_SET_IFM2_REGION",
}

# Commands with one 32-bit payload word (bits 14-15 = 1); the table is keyed by the low 10 bits.
CMD1: dict[int, str] = {
    0x000: "NPU_SET_IFM_BASE0", 0x001: "NPU_SET_IFM_BASE1", 0x002: "NPU_SET_IFM_BASE2", 0x003: "NPU_SET_IFM_BASE3",
    0x004: "NPU_SET_IFM_STRIDE_X", 0x005: "NPU_SET_IFM_STRIDE_Y", 0x006: "NPU_SET_IFM_STRIDE_C",
    0x010: "NPU_SET_OFM_BASE0", 0x011: "NPU_SET_OFM_BASE1", 0x012: "NPU_SET_OFM_BASE2", 0x013: "NPU_SET_OFM_BASE3",
    0x014: "NPU_SET_OFM_STRIDE_X", 0x015: "NPU_SET_OFM_STRIDE_Y", 0x016: "NPU_SET_OFM_STRIDE_C",
    0x020: "NPU_SET_WEIGHT_BASE", 0x021: "NPU_SET_WEIGHT_LENGTH", 0x022: "NPU_SET_SCALE_BASE",
    0x023: "NPU_SET_SCALE_LENGTH", 0x024: "NPU_SET_OFM_SCALE", 0x025: "NPU_SET_IFM_SCALE",
    0x026: "NPU_SET_IFM2_SCALE", 0x027: "NPU_SET_OP_SCALAR",
    0x030: "NPU_SET_DMA0_SRC", 0x031: "NPU_SET_DMA0_DST", 0x032: "NPU_SET_DMA0_LEN",
    0x033: "NPU_SET_DMA0_SRC_STRIDE0", 0x034: "NPU_SET_DMA0_SRC_STRIDE1", 0x035: "NPU_SET_DMA0_DST_STRIDE0",
    0x036: "NPU_SET_DMA0_DST_STRIDE1",
    0x080: "NPU_SET_IFM2_BASE0", 0x081: "NPU_SET_IFM2_BASE1", 0x082: "NPU_SET_IFM2_BASE2",
    0x083: "NPU_SET_IFM2_BASE3", 0x084: "NPU_SET_IFM2_STRIDE_X", 0x085: "NPU_SET_IFM2_STRIDE_Y",
    0x086: "NPU_SET_IFM2_STRIDE_C",
    0x090: "NPU_SET_WEIGHT1_BASE", 0x091: "NPU_SET_WEIGHT1_LENGTH", 0x092: "NPU_SET_WEIGHT2_BASE",
    0x093: "NPU_SET_WEIGHT2_LENGTH", 0x094: "NPU_SET_WEIGHT3_BASE", 0x095: "NPU_SET_WEIGHT3_LENGTH",
    0x096: "NPU_SET_RESIZE_X_STEP", 0x097: "NPU_SET_RESIZE_Y_STEP",
}

# Field values (as regor's disassembly names them).
PRECISION_BITS = {0: 8, 1: 16, 2: 32, 3: 64}              # *_PRECISION activation_precision
STORAGE_TILE2X2, STORAGE_CHAINED, STORAGE_NONE = 0, 2, 3   # *_PRECISION activation_storage (bits 14-15)
# OFM_PRECISION activation_transpose (bits 11-13): output axes as input-axis letters -> numpy axes order.
TRANSPOSES = {0: ("HWC", (0, 1, 2)), 1: ("WHC", (1, 0, 2)), 2: ("HCW", (0, 2, 1)), 3: ("WCH", (1, 2, 0)),
              6: ("CHW", (2, 0, 1)), 7: ("CWH", (2, 1, 0))}
ROUND_DOUBLE_SYMMETRIC, ROUND_TRUNCATE_TO_ZERO, ROUND_NATURAL = 0, 1, 2   # OFM/IFM scale round_mode
POOL_MODES = {0: "max", 1: "avg", 2: "reduce_sum", 3: "sum", 4: "none"}
ELEMENTWISE = {0: "mul", 1: "add", 2: "sub", 3: "min", 4: "max", 5: "lrelu", 6: "abs"}
ACC_INPUT_RESET, ACC_INPUT_KEEP, ACC_INPUT_IFM2 = 0, 1, 2
MICROBLOCKS = {0: (1, 1), 1: (1, 2), 2: (1, 4), 3: (2, 2), 4: (2, 4), 5: (4, 4)}   # ACC_FORMAT bits 8-10: (h, w)
RESIZE_BILINEAR, RESIZE_REPLICATE, RESIZE_NEAREST = 0, 1, 2          # NPU_OP_RESIZE resize_mode
RESIZE_MODES = {RESIZE_BILINEAR: "bilinear", RESIZE_REPLICATE: "replicate", RESIZE_NEAREST: "nearest"}
# RESIZE_{X,Y}_STEP: param bits 0-3 one_step_int, 4-14 blk_step_int; payload bits 0-10 one_step_mod,
# 16-26 blk_step_mod (one output step advances the source position by one_step_int + one_step_mod / scale_n).
# RESIZE_{X,Y}_OFFSET: 12-bit signed; RESIZE_{X,Y}_SCALE_N_M1: 11 bits.
LUT_SLOT_BYTES = 256
LUT_RAM_BYTES = 2048
ACT_LUT_NONE, ACT_LUT_S8_S8 = 0, 4

# ---- field view, in regor's disassembly names (for --npu-trace and the decoder test) ----------------------
_ROUND_NAMES = {ROUND_DOUBLE_SYMMETRIC: "DOUBLE_SYMMETRIC", ROUND_TRUNCATE_TO_ZERO: "TRUNCATE_TO_ZERO",
                ROUND_NATURAL: "NATURAL"}
_STORAGE_NAMES = {STORAGE_TILE2X2: "TILE2X2", STORAGE_CHAINED: "CHAINED", STORAGE_NONE: "NONE"}
_POOL_NAMES = {0: "MAX", 1: "AVERAGE", 2: "REDUCE_SUM", 3: "SUM", 4: "NONE"}
_BROADCAST_NAMES = {0: "NONE", 1: "H", 2: "W", 4: "C", 8: "SCALAR"}


def _precision_fields(param: int, ofm: bool) -> dict[str, str]:
    f = {"activation_type": "ACTIVATION_TYPE_" + ("SIGNED" if param & 1 else "UNSIGNED"),
         "activation_precision": f"ACTIVATION_PRECISION_B{PRECISION_BITS[(param >> (1 if ofm else 2)) & 3]}",
         "activation_format": "ACTIVATION_FORMAT_" + ("NHCWB16" if (param >> 6) & 1 else "NHWC")}
    storage = _STORAGE_NAMES.get((param >> 14) & 3)
    if storage:
        f["activation_storage"] = "ACTIVATION_STORAGE_" + storage
    if ofm:
        f["scale_mode"] = "OFM_SCALE_MODE_" + ("GLOBAL" if (param >> 8) & 1 else "PER_CHANNEL")
        if not (param >> 9) & 3:
            f["activation_reverse"] = "ACTIVATION_REVERSE_NONE"
        t = TRANSPOSES.get((param >> 11) & 7)
        if t:
            f["activation_transpose"] = "ACTIVATION_TRANSPOSE_" + t[0]
    return f


def fields(name: str, param: int, payload: int | None = None) -> dict[str, str]:
    """The fields of one command as the functional model reads them, named as regor's disassembly names them."""
    if name in ("NPU_SET_IFM_PRECISION", "NPU_SET_IFM2_PRECISION", "NPU_SET_OFM_PRECISION"):
        return _precision_fields(param, name == "NPU_SET_OFM_PRECISION")
    if name in ("NPU_SET_OFM_SCALE", "NPU_SET_IFM_SCALE", "NPU_SET_IFM2_SCALE"):
        f = {"shift": str(param & 0x3F), "dbl_rnd": str((param >> 6) & 0x1F)}
        r = _ROUND_NAMES.get((param >> 12) & 7)
        if r:
            f["round_mode"] = f"ROUND_MODE_{'OFM' if 'OFM' in name else 'IFM'}_{r}"
        if payload is not None:
            f["scale"] = str(payload)
        return f
    if name == "NPU_SET_ACC_FORMAT":
        src = {ACC_INPUT_RESET: "RESET", ACC_INPUT_KEEP: "KEEP", ACC_INPUT_IFM2: "IFM2"}[(param >> 4) & 3] \
            if (param >> 4) & 3 != 3 else None
        f = {"acc_input": f"ACC_INPUT_{src}"} if src else {}
        mb = MICROBLOCKS.get((param >> 8) & 7)
        if mb:
            f["microblock"] = f"MICROBLOCK_U{mb[0]}X{mb[1]}"
        f["acc_format"] = "ACC_FORMAT_" + {0: "I32", 1: "I48"}.get(param & 3, "?")
        return f
    if name == "NPU_SET_ACTIVATION":
        f = {"table": str((param >> 5) & 7)}
        func = {ACT_LUT_NONE: "LUT_NONE", ACT_LUT_S8_S8: "LUT_S8_S8"}.get(param & 0x1F)
        if func:
            f["activation_function"] = "ACTIVATION_FUNCTION_" + func
        clip = {0: "B16", 1: "NONE"}.get((param >> 12) & 3)
        if clip:
            f["activation_clip_range"] = "ACTIVATION_CLIP_RANGE_" + clip
        return f
    if name == "NPU_OP_POOL" and param in _POOL_NAMES:
        return {"pooling_mode": "POOLING_MODE_" + _POOL_NAMES[param]}
    if name == "NPU_OP_ELEMENTWISE" and param in ELEMENTWISE:
        return {"elementwise_mode": "ELEMENTWISE_MODE_" + ELEMENTWISE[param].upper()}
    if name == "NPU_SET_WEIGHT_FORMAT":
        return {"weight_format": "WEIGHT_FORMAT_" + ("FWD" if param & 1 else "SWD"),
                "weight_sparsity": "WEIGHT_SPARSITY_" + ("SPARSE_2_4" if (param >> 4) & 1 else "NONE")}
    if name in ("NPU_SET_DMA0_SRC_REGION", "NPU_SET_DMA0_DST_REGION"):
        return {"region": str(param & 7),
                "region_mode": "DMA_REGION_MODE_" + ("INTERNAL" if (param >> 8) & 1 else "EXTERNAL")}
    if name in ("NPU_SET_IFM_BROADCAST", "NPU_SET_IFM2_BROADCAST") and param in _BROADCAST_NAMES:
        return {"broadcast_mode": "BROADCAST_MODE_" + _BROADCAST_NAMES[param]}
    if name == "NPU_SET_KERNEL_STRIDE":
        return {"stride_x_lsb": str(param & 1), "stride_y_lsb": str((param >> 1) & 1),
                "weight_order": "WEIGHT_ORDER_" + ("PART_KERNEL_FIRST" if (param >> 2) & 1 else "DEPTH_FIRST")}
    if name == "NPU_OP_CONV":
        return {"weights_ifm2": str(param & 1)}
    if name == "NPU_OP_RESIZE" and (param & 3) in RESIZE_MODES:
        return {"resize_mode": "RESIZE_MODE_" + RESIZE_MODES[param & 3].upper()}
    if name in ("NPU_SET_RESIZE_X_STEP", "NPU_SET_RESIZE_Y_STEP") and payload is not None:
        return {"one_step_int": str(param & 0xF), "blk_step_int": str((param >> 4) & 0x7FF),
                "one_step_mod": str(payload & 0x7FF), "blk_step_mod": str((payload >> 16) & 0x7FF)}
    if name in ("NPU_SET_RESIZE_X_OFFSET", "NPU_SET_RESIZE_Y_OFFSET"):
        v = param & 0xFFF
        return {name[8:].lower(): str(v - 0x1000 if v & 0x800 else v)}
    if name in ("NPU_SET_RESIZE_X_SCALE_N_M1", "NPU_SET_RESIZE_Y_SCALE_N_M1"):
        return {name[8:].lower(): str(param & 0x7FF)}
    return {}
