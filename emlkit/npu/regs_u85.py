"""Ethos-U85 register command map: opcode -> name, and the bit fields the functional model reads.

Vela ships no Python register description for the U85 (its U85 backend, regor, is
compiled C++), so this table is ours. Every opcode and field position below was
checked against regor's own field-level disassembly
(`vela --accelerator-config ethos-u85-256 --verbose-register-command-stream`) on
the zoo's programs; tests/test_npu_u85.py keeps that check. Names follow the U55
map where the register is shared.
"""

from __future__ import annotations


def _run(base: int, names: str) -> dict[int, str]:
    """Registers at consecutive opcodes from `base` ("-" skips an unused opcode)."""
    return {base + i: "NPU_" + n for i, n in enumerate(names.split()) if n != "-"}


def _group(prefix: str, base: int, offsets: dict[str, int]) -> dict[int, str]:
    """The registers of one feature map (IFM, IFM2 or OFM): a field sits at the same offset from each map's base."""
    return {base + off: f"NPU_SET_{prefix}_{name}" for name, off in offsets.items()}


# Tile geometry and memory region: the same offsets for all three feature maps.
_TILES = {"WIDTH0_M1": 0xA, "HEIGHT0_M1": 0xB, "HEIGHT1_M1": 0xC, "REGION": 0xF}
_INPUT = {**_TILES, "PRECISION": 5, "ZERO_POINT": 9}
# Payload registers: four tile base addresses, then the byte strides.
_ADDRESSES = {"BASE0": 0, "BASE1": 1, "BASE2": 2, "BASE3": 3, "STRIDE_X": 4, "STRIDE_Y": 5, "STRIDE_C": 6}

# Commands without payload (bits 14-15 = 0).
CMD0: dict[int, str] = {
    **_run(0x000, "OP_STOP OP_IRQ OP_CONV OP_DEPTHWISE - OP_POOL OP_ELEMENTWISE OP_RESIZE"),
    **_run(0x010, "OP_DMA_START OP_DMA_WAIT OP_KERNEL_WAIT OP_PMU_MASK"),
    **_group("IFM", 0x100, {**_INPUT, "PAD_TOP": 0, "PAD_LEFT": 1, "PAD_RIGHT": 2, "PAD_BOTTOM": 3, "DEPTH_M1": 4,
                            "UPSCALE": 7, "BROADCAST": 8}),
    **_group("OFM", 0x110, {**_TILES, "WIDTH_M1": 1, "HEIGHT_M1": 2, "DEPTH_M1": 3, "PRECISION": 4, "BLK_WIDTH_M1": 5,
                            "BLK_HEIGHT_M1": 6, "BLK_DEPTH_M1": 7, "ZERO_POINT": 8}),
    **_group("IFM2", 0x180, {**_INPUT, "BROADCAST": 0}),
    **_run(0x120, "SET_KERNEL_WIDTH_M1 SET_KERNEL_HEIGHT_M1 SET_KERNEL_STRIDE - SET_ACC_FORMAT SET_ACTIVATION "
                  "SET_ACTIVATION_MIN SET_ACTIVATION_MAX SET_WEIGHT_REGION SET_SCALE_REGION SET_RESIZE_X_SCALE_N_M1 "
                  "SET_RESIZE_Y_SCALE_N_M1 SET_RESIZE_X_OFFSET SET_RESIZE_Y_OFFSET SET_WEIGHT_FORMAT SET_BLOCKDEP "
                  "SET_DMA0_SRC_REGION SET_DMA0_DST_REGION SET_DMA0_SIZE0 SET_DMA0_SIZE1"),
}

# Commands with one 32-bit payload word (bits 14-15 = 1); the table is keyed by the low 10 bits.
CMD1: dict[int, str] = {
    **_group("IFM", 0x000, _ADDRESSES),
    **_group("OFM", 0x010, _ADDRESSES),
    **_group("IFM2", 0x080, _ADDRESSES),
    **_run(0x020, "SET_WEIGHT_BASE SET_WEIGHT_LENGTH SET_SCALE_BASE SET_SCALE_LENGTH SET_OFM_SCALE SET_IFM_SCALE "
                  "SET_IFM2_SCALE SET_OP_SCALAR"),
    **_run(0x030, "SET_DMA0_SRC SET_DMA0_DST SET_DMA0_LEN SET_DMA0_SRC_STRIDE0 SET_DMA0_SRC_STRIDE1 "
                  "SET_DMA0_DST_STRIDE0 SET_DMA0_DST_STRIDE1"),
    **_run(0x090, "SET_WEIGHT1_BASE SET_WEIGHT1_LENGTH SET_WEIGHT2_BASE SET_WEIGHT2_LENGTH SET_WEIGHT3_BASE "
                  "SET_WEIGHT3_LENGTH SET_RESIZE_X_STEP SET_RESIZE_Y_STEP"),
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
