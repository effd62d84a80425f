"""Ethos-U85 on the functional model (emlkit/npu/execute_u85.py): zoo programs bit-exact against
tosa_reference_model and their bundled expected outputs, the decoder and its field positions against regor's
own disassembly, and hand-built command streams for the U85-only semantics (transposed and chained OFMs,
pooling SUM/NONE/AVERAGE, LUT RAM slots, matmul) and for what is not modelled."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emlkit.npu import regs_u85 as R
from emlkit.npu.blob import DriverConfig, VelaBlob, parse_blob
from emlkit.npu.commands import decode, disassemble
from emlkit.npu.errors import NpuError
from emlkit.npu.run import machine_for
from emlkit.npu.execute import reciprocal_scale
from emlkit.npu.execute_u85 import MachineU85

from npu_helpers import SLOW_ZOO, bit_exact_vs_tosa, compile_for_npu, program_parts
from npu_helpers import feature_map as _fm

TARGET = "ethos-u85-256"
from emlkit import models as _zoo

ZOO = [pytest.param(m, marks=pytest.mark.slow) if m in SLOW_ZOO else m for m in _zoo.ZOO]


@pytest.fixture(scope="session")
def compiled():
    """Zoo programs for the U85 (npu_helpers.compile_for_npu)."""
    return lambda model: compile_for_npu(model, TARGET)


# Zoo programs Vela 5.1.0 miscompiles on plain lowering (docs/ethos-u.md, "Known Vela miscompiles"): the compile-time check
# (Vela's stream on the functional model against TOSA) must say so.
VELA_MISCOMPILES = {"transformer_block"}


def _program(compiled, model: str):
    res = compiled(model)
    blobs, tosas = program_parts(res)
    return res, blobs, tosas


def _miscompile_flagged(res) -> None:
    checks = res.report["npu_check"]["delegates"]
    assert any(c["checked"] and c["max_diff_steps"] > 0 for c in checks), checks


@pytest.mark.parametrize("model", ZOO)
def test_zoo_bit_exact_vs_tosa(compiled, model: str) -> None:
    _, blobs, tosas = _program(compiled, model)
    assert parse_blob(blobs[0]).config.product_name == "Ethos-U85"
    if model in VELA_MISCOMPILES:  # Vela's stream computes something else than its TOSA graph
        with pytest.raises(AssertionError):
            bit_exact_vs_tosa(blobs, tosas, model)
        return
    bit_exact_vs_tosa(blobs, tosas, model)


@pytest.mark.parametrize("model", ZOO)
def test_zoo_whole_program_matches_bundled(compiled, model: str) -> None:
    from emlkit.npu.program import run_bundled

    res, _, _ = _program(compiled, model)
    if model in VELA_MISCOMPILES:
        return _miscompile_flagged(res)
    result = run_bundled(res.bpte.read_bytes())
    assert result["status"] == "pass", result["outputs"]
    assert result["executor"] == "host (Ethos-U85 functional model)"


_DIS = re.compile(r"^0x([0-9a-f]{6}): (?:([0-9a-f]{8})|\s{8}) ([0-9a-f]{4}) ([0-9a-f]{4}) - (\w+)\s+\d+(?:, (.*))?$")


@pytest.mark.parametrize("model", ["lut_activations", "attention", "global_avgpool"])
def test_decoder_and_fields_match_regor_disassembly(compiled, model: str, tmp_path: Path) -> None:
    """Vela's U85 backend (regor) re-run on the kept TOSA graph reproduces the blob's command stream; its
    field-level disassembly checks both our opcode map and every field position the model reads."""
    res, blobs, tosas = _program(compiled, model)
    (tmp_path / "g.tosa").write_bytes(tosas[0])
    flags = [f for f in res.report["vela"]["flags"]] if "flags" in res.report.get("vela", {}) else [
        f"--accelerator-config={TARGET}", "--config=Arm/vela.ini", "--output-format=raw",
        "--system-config=Ethos_U85_SYS_DRAM_Mid", "--memory-mode=Sram_Only"]
    cmd = [sys.executable, "-m", "ethosu.vela", *flags, "--verbose-register-command-stream",
           f"--output-dir={tmp_path / 'out'}", str(tmp_path / "g.tosa")]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows, theirs = [], []
    for line in text.splitlines():
        m = _DIS.match(line.rstrip())
        if m:
            rows.append((int(m[1], 16), int(m[2], 16) if m[2] else None, int(m[3], 16), int(m[4], 16), m[5]))
            theirs.append(dict(f.split(" = ", 1) for f in m[6].split(", ")) if m[6] else {})
    assert rows, "no disassembly lines found in Vela's output"
    cmds = decode(parse_blob(blobs[0]).commands, 0, "u85")
    assert disassemble(cmds) == rows
    checked: dict[str, int] = {}
    for c, fields in zip(cmds, theirs):
        for k, v in R.fields(c.name, c.param, c.payload).items():
            assert fields.get(k) == v, f"{c.name} at 0x{c.offset:06x}: field {k} is {fields.get(k)}, we read {v}"
            checked[c.name] = checked.get(c.name, 0) + 1
    # Every program has at least one NPU operation, so these fields must have been compared (a regex or
    # field-name drift that silently compares nothing fails here).
    for name in ("NPU_SET_OFM_PRECISION", "NPU_SET_OFM_SCALE", "NPU_SET_ACTIVATION"):
        assert checked.get(name), f"no {name} field was compared; compared: {checked}"


# ---- hand-built command streams -------------------------------------------------------------------------

_CMD0 = {v: k for k, v in R.CMD0.items()}
_CMD1 = {v: k for k, v in R.CMD1.items()}


def _asm(*cmds: tuple) -> np.ndarray:
    words: list[int] = []
    for c in cmds:
        name, param = c[0], c[1] if len(c) > 1 else 0
        if name in _CMD1:
            words += [_CMD1[name] | 0x4000 | ((param & 0xFFFF) << 16), (c[2] if len(c) > 2 else 0) & 0xFFFFFFFF]
        else:
            words.append(_CMD0[name] | ((param & 0xFFFF) << 16))
    return np.array(words, dtype=np.uint32)


S8, S32 = 0x1, 0x9                    # IFM precision: signed 8 / signed 32 bit, NHWC, TILE2X2
OFM_S8, OFM_S32 = 0x1, 0x5            # OFM precision: signed 8 / 32 bit, per-channel scale bit clear
GLOBAL = 1 << 8
CHAINED = R.STORAGE_CHAINED << 14
NATURAL = R.ROUND_NATURAL << 12


_NO_PAD = [("NPU_SET_IFM_PAD_TOP", 0), ("NPU_SET_IFM_PAD_LEFT", 0), ("NPU_SET_IFM_PAD_BOTTOM", 0),
           ("NPU_SET_IFM_PAD_RIGHT", 0), ("NPU_SET_KERNEL_HEIGHT_M1", 0), ("NPU_SET_KERNEL_WIDTH_M1", 0),
           ("NPU_SET_KERNEL_STRIDE", 0), ("NPU_SET_ACC_FORMAT", 0), ("NPU_SET_ACTIVATION", 0),
           ("NPU_SET_ACTIVATION_MIN", -128 & 0xFFFF), ("NPU_SET_ACTIVATION_MAX", 127)]


def _machine(weights: bytes = b"", scratch: int = 4096) -> MachineU85:
    m = machine_for(VelaBlob(np.zeros(0, np.uint32), 0, weights, scratch, [], [], DriverConfig(2, 8, 0, 0)))
    assert isinstance(m, MachineU85)
    return m


def _run(m: MachineU85, cmds: list[tuple]) -> None:
    m.run(decode(_asm(*cmds, ("NPU_OP_STOP", 0xFFFF)), 0, "u85"))


def _get(m: MachineU85, base: int, shape: tuple[int, ...], dtype=np.int8) -> np.ndarray:
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return m.regions[1][base:base + n].view(dtype).reshape(shape).astype(np.int64)


@pytest.mark.parametrize("code", sorted(R.TRANSPOSES))
def test_transposed_ofm(code: int) -> None:
    """A 1x1 POOL SUM with a transposed OFM is a permute; the OFM's tiles and strides describe the result."""
    name, axes = R.TRANSPOSES[code]
    x = np.arange(2 * 3 * 4, dtype=np.int8).reshape(2, 3, 4)
    m = _machine()
    m.regions[1][: x.size] = x.view(np.uint8).ravel()
    th, tw, tc = (x.shape[a] for a in axes)
    ofm = _fm("OFM", th, tw, tc, 256, OFM_S8 | GLOBAL | (code << 11))
    ofm += [("NPU_SET_OFM_HEIGHT_M1", 1), ("NPU_SET_OFM_WIDTH_M1", 2), ("NPU_SET_OFM_DEPTH_M1", 3)]  # pre-transpose
    _run(m, _fm("IFM", 2, 3, 4, 0, S8) + ofm + _NO_PAD + [("NPU_SET_OFM_SCALE", 0, 1), ("NPU_OP_POOL", 3)])
    assert np.array_equal(_get(m, 256, (th, tw, tc)), x.transpose(axes)), name


def test_chained_ofm_feeds_elementwise_without_memory() -> None:
    """LUT on a 1x1 pool, chained (OFM storage CHAINED, region = buffer 0) into an ADD's IFM."""
    x = np.arange(-8, 8, dtype=np.int8).reshape(1, 4, 4)
    y = np.full((1, 4, 4), 3, dtype=np.int8)
    table = (np.arange(256) - 128) // 2
    m = _machine(weights=table.astype(np.int8).tobytes())
    m.regions[1][:16] = x.view(np.uint8).ravel()
    m.regions[1][64:80] = y.view(np.uint8).ravel()
    lut_dma = [("NPU_SET_DMA0_SRC_REGION", 0), ("NPU_SET_DMA0_SRC", 0, 0), ("NPU_SET_DMA0_DST_REGION", 0x103),
               ("NPU_SET_DMA0_DST", 0, 2 * R.LUT_SLOT_BYTES), ("NPU_SET_DMA0_LEN", 0, 256), ("NPU_OP_DMA_START", 0)]
    lut_op = _fm("IFM", 1, 4, 4, 0, S8) + _fm("OFM", 1, 4, 4, 0, OFM_S8 | GLOBAL | CHAINED, region=0) + _NO_PAD + [
        ("NPU_SET_ACTIVATION", R.ACT_LUT_S8_S8 | (2 << 5)), ("NPU_SET_OFM_SCALE", NATURAL, 1), ("NPU_OP_POOL", 3)]
    add = [("NPU_SET_IFM_PRECISION", S8 | CHAINED), ("NPU_SET_IFM_REGION", 0), ("NPU_SET_IFM_ZERO_POINT", 0)] + \
        _fm("IFM2", 1, 4, 4, 64, S8, zp=1) + _fm("OFM", 1, 4, 4, 128, OFM_S8 | GLOBAL) + [
        ("NPU_SET_ACTIVATION", 0), ("NPU_SET_IFM_BROADCAST", 0), ("NPU_SET_IFM2_BROADCAST", 0),
        ("NPU_SET_IFM_SCALE", NATURAL, 1), ("NPU_SET_IFM2_SCALE", NATURAL | 1, 1), ("NPU_SET_OFM_SCALE", NATURAL, 1),
        ("NPU_OP_ELEMENTWISE", 1)]
    _run(m, lut_dma + lut_op + add)
    want = table[x.astype(np.int64) + 128] + np.floor((3 - 1) / 2 + 0.5)   # IFM2 scaled by 1 >> 1, rounded half up
    assert np.array_equal(_get(m, 128, (1, 4, 4)), want)


@pytest.mark.parametrize("mode, pick", [(3, np.minimum), (4, np.maximum)])
def test_elementwise_min_max_compare_rescaled_operands(mode: int, pick) -> None:
    """ELEMENTWISE MIN (3) / MAX (4): each operand minus its zero point, rescaled by its own IFM/IFM2_SCALE (how
    regor brings the two to one scale), compared, then rescaled by OFM_SCALE and offset by the OFM zero point."""
    rng = np.random.default_rng(mode)
    x = rng.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    y = rng.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    m = _machine()
    m.regions[1][:24] = x.view(np.uint8).ravel()
    m.regions[1][64:88] = y.view(np.uint8).ravel()
    cmds = _fm("IFM", 2, 3, 4, 0, S8, zp=5) + _fm("IFM2", 2, 3, 4, 64, S8, zp=-3) + \
        _fm("OFM", 2, 3, 4, 128, OFM_S8 | GLOBAL, zp=2) + [
        ("NPU_SET_ACTIVATION", 0), ("NPU_SET_IFM_BROADCAST", 0), ("NPU_SET_IFM2_BROADCAST", 0),
        ("NPU_SET_IFM_SCALE", NATURAL | 2, 5), ("NPU_SET_IFM2_SCALE", NATURAL, 1), ("NPU_SET_OFM_SCALE", NATURAL | 1, 1),
        ("NPU_OP_ELEMENTWISE", mode)]
    _run(m, cmds)
    a = np.floor((x.astype(np.int64) - 5) * 5 / 4 + 0.5)      # IFM x 5 >> 2, rounded half up
    b = y.astype(np.int64) + 3
    want = np.clip(np.floor(pick(a, b) / 2 + 0.5) + 2, -128, 127)
    assert np.array_equal(_get(m, 128, (2, 3, 4)), want)


_MIN_MAX_MODEL = """
import torch
import torch.nn as nn

torch.manual_seed(0)


class MinMax(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(4, 8, 1)
        self.b = nn.Conv2d(4, 8, 3, padding=1)
        self.lo = nn.Parameter(torch.randn(1, 8, 1, 1) * 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p, q = self.a(x), self.b(x)
        return torch.cat([torch.minimum(p, q), torch.maximum(p, torch.sigmoid(q)), torch.clamp(q, min=self.lo, max=p)], 1)


ModelUnderTest = MinMax().eval()
ModelInputs = (torch.randn(1, 4, 6, 5),)
"""


def test_min_max_program_is_checked_and_passes(tmp_path: Path) -> None:
    """torch.minimum / maximum / clamp with tensor bounds on the U85: ELEMENTWISE MIN and MAX commands the functional
    model runs bit-exactly against TOSA (compile-time check, random full-range inputs) and a whole program that
    matches its bundled outputs (a PASS, not a SKIP naming the command)."""
    from emlkit.compile import compile_model, make_options
    from emlkit.npu.program import run_bundled

    (tmp_path / "min_max.py").write_text(_MIN_MAX_MODEL)
    res = compile_model(str(tmp_path / "min_max.py"), TARGET, tmp_path / "out", options=make_options())
    blobs, tosas = program_parts(res)
    modes = {c.param for b in blobs for c in decode(parse_blob(b).commands, 0, "u85") if c.name == "NPU_OP_ELEMENTWISE"}
    assert {3, 4} <= modes, modes
    checks = res.report["npu_check"]["delegates"]
    assert all(c["checked"] and c["max_diff_steps"] == 0 for c in checks), checks
    bit_exact_vs_tosa(blobs, tosas, "min_max", trials=4)
    result = run_bundled(res.bpte.read_bytes())
    assert result["status"] == "pass", result["outputs"]


def test_avg_pool_divides_by_valid_elements() -> None:
    """AVERAGE pools divide in hardware, by the window's non-padding element count (TOSA's reciprocal)."""
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (5, 5, 8)).astype(np.int8)
    m = _machine()
    m.regions[1][: x.size] = x.view(np.uint8).ravel()
    cmds = _fm("IFM", 5, 5, 8, 0, S8) + _fm("OFM", 5, 5, 8, 512, OFM_S8 | GLOBAL) + _NO_PAD + [
        ("NPU_SET_IFM_PAD_TOP", 1), ("NPU_SET_IFM_PAD_LEFT", 1), ("NPU_SET_IFM_PAD_BOTTOM", 1),
        ("NPU_SET_IFM_PAD_RIGHT", 1), ("NPU_SET_KERNEL_HEIGHT_M1", 2), ("NPU_SET_KERNEL_WIDTH_M1", 2),
        ("NPU_SET_OFM_SCALE", NATURAL, 1), ("NPU_OP_POOL", 1)]
    _run(m, cmds)
    pad = np.zeros((7, 7, 8))
    cnt = np.zeros((7, 7, 1))
    pad[1:6, 1:6], cnt[1:6, 1:6] = x, 1
    s = np.stack([[pad[y:y + 3, xx:xx + 3].sum(axis=(0, 1)) for xx in range(5)] for y in range(5)])
    n = np.stack([[cnt[y:y + 3, xx:xx + 3].sum(axis=(0, 1)) for xx in range(5)] for y in range(5)])
    # TOSA's AVG_POOL2D: sum * reciprocal(count), natural rounding; the +1 in the 30-bit reciprocal makes
    # negative halves round down (-174 / 4 -> -44), unlike round-half-up.
    def tosa_avg(total: int, count: int) -> int:
        k = int(count - 1).bit_length()
        mult, shift = (((1 << 30) + 1) << k) // count, 30 + k
        return (int(total) * mult + (1 << (shift - 1))) >> shift

    want = np.vectorize(tosa_avg, otypes=[np.int64])(s.astype(np.int64), np.broadcast_to(n, s.shape).astype(np.int64))
    assert np.array_equal(_get(m, 512, (5, 5, 8)), want)
    assert abs(want - s / n).max() <= 0.5


def test_reciprocal_scale_matches_the_tosa_definition() -> None:
    counts = np.arange(1, 300)
    mult, shift = reciprocal_scale(counts)
    for c, mu, sh in zip(counts, mult, shift):
        k = int(c - 1).bit_length()
        assert (mu, sh) == ((((1 << 30) + 1) << k) // c, 30 + k)
        assert (1 << 30) <= mu <= (1 << 31)


def test_pool_none_rescales_an_int32_accumulator_from_ifm2() -> None:
    acc = np.array([-70000, -129 * 256, -1, 0, 255, 256 * 127, 1 << 20, 383], dtype=np.int32).reshape(1, 1, 8)
    m = _machine()
    m.regions[1][:32] = acc.view(np.uint8).ravel()
    cmds = [("NPU_SET_IFM_PRECISION", S8)] + _fm("IFM2", 1, 1, 8, 0, S32, esize=4) + \
        _fm("OFM", 1, 1, 8, 64, OFM_S8 | GLOBAL, zp=5) + _NO_PAD + [
        ("NPU_SET_ACC_FORMAT", R.ACC_INPUT_IFM2 << 4), ("NPU_SET_OFM_SCALE", NATURAL | 8, 1), ("NPU_OP_POOL", 4)]
    _run(m, cmds)
    want = np.clip(np.floor(acc.astype(np.float64) / 256 + 0.5) + 5, -128, 127)
    assert np.array_equal(_get(m, 64, (1, 1, 8)), want)


def test_matmul_of_two_feature_maps() -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, (1, 4, 16)).astype(np.int8)   # y, x, k
    b = rng.integers(-128, 128, (1, 8, 16)).astype(np.int8)   # y, n, k
    m = _machine()
    m.regions[1][:64] = a.view(np.uint8).ravel()
    m.regions[1][256:384] = b.view(np.uint8).ravel()
    cmds = _fm("IFM", 1, 4, 16, 0, S8, zp=3) + _fm("IFM2", 1, 8, 16, 256, S8, zp=-2) + \
        _fm("OFM", 1, 4, 8, 1024, OFM_S8 | GLOBAL, zp=-4) + _NO_PAD + [
        ("NPU_SET_OFM_SCALE", NATURAL | 12, 1), ("NPU_OP_CONV", 1)]
    _run(m, cmds)
    acc = np.einsum("yxk,ynk->yxn", a.astype(np.int64) - 3, b.astype(np.int64) + 2)
    want = np.clip(np.floor(acc / 4096 + 0.5) - 4, -128, 127)
    assert np.array_equal(_get(m, 1024, (1, 4, 8)), want)


def test_unknown_u85_opcode_names_itself_and_its_offset() -> None:
    words = _asm(("NPU_SET_IFM_REGION", 1), ("NPU_OP_STOP", 0))
    words[1] = 0x0000_03F7
    with pytest.raises(NpuError, match=r"unknown Ethos-U85 command 0x3f7 .* offset 0x000004"):
        decode(words, 0, "u85")


@pytest.mark.parametrize("extra, message", [
    ([("NPU_SET_OFM_PRECISION", OFM_S8 | GLOBAL | (1 << 9))], "reverse"),
    ([("NPU_SET_ACC_FORMAT", R.ACC_INPUT_KEEP << 4)], "keeps the previous accumulators"),
    ([("NPU_SET_OFM_SCALE", 5 << 12, 1)], "rounding mode 5"),
    ([("NPU_SET_OFM_SCALE", 20 << 6, 1)], "dbl_rnd 20"),
    ([("NPU_SET_ACTIVATION", 7)], "activation function 7"),
])
def test_unmodelled_u85_features_are_clear_errors(extra: list[tuple], message: str) -> None:
    m = _machine()
    cmds = _fm("IFM", 1, 2, 2, 0, S8) + _fm("OFM", 1, 2, 2, 64, OFM_S8 | GLOBAL) + _NO_PAD + \
        [("NPU_SET_OFM_SCALE", NATURAL, 1)] + extra + [("NPU_OP_POOL", 3)]
    with pytest.raises(NpuError, match=message) as err:
        _run(m, cmds)
    assert "command 0 (NPU_OP_POOL" in str(err.value)


# ---- weight and scale streams ------------------------------------------------------------------------------

from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from emlkit.npu.weights_u85 import _order, decode_scales_u85, decode_weights_u85  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(o=st.integers(1, 40), kh=st.integers(1, 9), kw=st.integers(1, 9), i=st.integers(1, 80),
       obd=st.sampled_from([8, 16, 32, 48]), trav=st.sampled_from(["part_kernel", "depth_first", "depthwise"]),
       stride=st.sampled_from([(1, 1), (2, 2), (1, 2)]), dil=st.sampled_from([(1, 1), (2, 2)]),
       ub=st.sampled_from([8, 16]))
def test_weight_order_visits_every_weight_once(o, kh, kw, i, obd, trav, stride, dil, ub) -> None:
    assume(obd % ub == 0)  # the hardware's OFM blocks are whole micro-blocks deep
    depth = 1 if trav == "depthwise" else i
    order = _order(o, kh, kw, depth, obd, trav, stride, dil, 16 if trav == "part_kernel" else 64, ub)
    real = order[order >= 0]
    assert np.array_equal(np.sort(real), np.arange(o * kh * kw * depth))


def test_scale_stream_fields() -> None:
    raw = bytearray(20)
    raw[0:4] = (-123456).to_bytes(4, "little", signed=True)
    raw[4:8] = (0x80000000 | 1234567).to_bytes(4, "little")   # bit 31 is not part of the 31-bit scale
    raw[8] = 0xC0 | 37
    raw[10:14] = (7).to_bytes(4, "little")
    bias, scale, shift = decode_scales_u85(bytes(raw), 2)
    assert bias.tolist() == [-123456, 7] and scale.tolist() == [1234567, 0] and shift.tolist() == [37, 0]
    with pytest.raises(NpuError, match="3 output channels need 30"):
        decode_scales_u85(bytes(raw), 3)


def _kernel_args(**kw):
    args = dict(ofm_depth=8, kh=1, kw=1, ifm_depth=16, depthwise=False, part_kernel=False, ifm_bits=8,
                dilation=(1, 1), stride=(1, 1), ofm_block_depth=8, microblock_hw=4, macs=256, weight_format=1,
                sparsity=0)
    args.update(kw)
    return args


def test_fast_weight_stream_is_header_then_one_byte_per_weight() -> None:
    w = np.arange(-64, 64, dtype=np.int8).reshape(8, 1, 1, 16)
    order = _order(8, 1, 1, 16, 8, "depth_first", (1, 1), (1, 1), 64, 8)
    body = np.zeros(len(order), np.int8)
    body[order >= 0] = w.ravel()[order[order >= 0]]
    raw = bytes([1] + [0] * 31) + body.tobytes()
    assert np.array_equal(decode_weights_u85(raw, **_kernel_args()), w.astype(np.int64))
    with pytest.raises(NpuError, match="too short"):
        decode_weights_u85(raw[:-1], **_kernel_args())


@pytest.mark.parametrize("change, message", [
    (dict(macs=384), "384 MACs"),
    (dict(ifm_bits=32), "32-bit IFMs"),
    (dict(weight_format=0), "not MLW-compressed"),
])
def test_unmodelled_weight_streams_are_clear_errors(change: dict, message: str) -> None:
    raw = bytes([1] + [0] * 31) + bytes(1024)
    with pytest.raises(NpuError, match=message):
        decode_weights_u85(raw, **_kernel_args(**change))


def test_truncated_mlw_stream_is_a_clear_error_not_an_exit() -> None:
    from ethosu import mlw_codec

    raw = bytes(mlw_codec.encode([int(v) for v in np.arange(-128, 128)] * 4))
    with pytest.raises(NpuError, match="does not decode as MLW .*corrupt"):
        decode_weights_u85(raw[: len(raw) // 2], **_kernel_args(weight_format=0, ofm_depth=64, ifm_depth=16))


# ---- RESIZE --------------------------------------------------------------------------------------------------

_RESIZE_MODULE = '''
import torch

class Up(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.up = torch.nn.Upsample(scale_factor={scale}, mode="{mode}"{extra})

    def forward(self, x):
        return self.up(self.conv(x))

torch.manual_seed(0)
ModelUnderTest = Up().eval()
ModelInputs = (torch.randn(1, 4, 7, 6),)
'''


@pytest.mark.parametrize("scale, mode, align, hw_mode", [
    (2, "nearest", None, R.RESIZE_NEAREST),
    (3, "nearest", None, R.RESIZE_NEAREST),
    (2, "bilinear", False, R.RESIZE_BILINEAR),      # half-pixel centres: n = 4, d = 2, offset -1, shift 16 + 4
    (2, "bilinear", True, R.RESIZE_BILINEAR),       # align corners: n = 26 / 22, d = 12 / 10, int32 OFM
])
def test_resize_bit_exact_vs_tosa(scale: int, mode: str, align: bool | None, hw_mode: int, tmp_path: Path) -> None:
    """Upsample modules whose TOSA RESIZE Vela maps to one NPU_OP_RESIZE: bit-exact with tosa_reference_model
    on random full-range inputs (the conv before it spreads its IFM over the whole int8 range)."""
    from emlkit.compile import compile_model
    from emlkit.lower import LowerOptions

    extra = "" if align is None else f", align_corners={align}"
    (tmp_path / "up.py").write_text(_RESIZE_MODULE.format(scale=scale, mode=mode, extra=extra))
    res = compile_model(str(tmp_path / "up.py"), TARGET, tmp_path / "out", options=LowerOptions())
    blobs, tosas = program_parts(res)
    ops = [c for c in decode(parse_blob(blobs[0]).commands, 0, "u85") if c.name == "NPU_OP_RESIZE"]
    assert [c.param for c in ops] == [hw_mode], "the program does not run its resize as one NPU_OP_RESIZE"
    bit_exact_vs_tosa(blobs, tosas, f"resize x{scale} {mode}", trials=3)


def _resize_cmds(ih: int, iw: int, oh: int, ow: int, c: int, n: int, d: int, offset: int, shift: int,
                 mode: int) -> list[tuple]:
    step = [(f"NPU_SET_RESIZE_{a}_STEP", d // n, d % n) for a in "XY"]
    return _fm("IFM", ih, iw, c, 0, S8) + _fm("OFM", oh, ow, c, 512, OFM_S8 | GLOBAL) + _NO_PAD + step + [
        ("NPU_SET_KERNEL_HEIGHT_M1", ih - 1), ("NPU_SET_KERNEL_WIDTH_M1", iw - 1),
        ("NPU_SET_RESIZE_X_SCALE_N_M1", n - 1), ("NPU_SET_RESIZE_Y_SCALE_N_M1", n - 1),
        ("NPU_SET_RESIZE_X_OFFSET", offset & 0xFFF), ("NPU_SET_RESIZE_Y_OFFSET", offset & 0xFFF),
        ("NPU_SET_OFM_SCALE", NATURAL | shift, 1), ("NPU_OP_RESIZE", mode)]


def test_resize_nearest_half_pixel_repeats_each_element() -> None:
    """Vela's nearest x2 (TOSA scale 4/2, offset -1): every IFM element fills a 2x2 block of the OFM."""
    x = np.random.default_rng(3).integers(-128, 128, (3, 5, 4)).astype(np.int8)
    m = _machine()
    m.regions[1][: x.size] = x.view(np.uint8).ravel()
    _run(m, _resize_cmds(3, 5, 6, 10, 4, n=4, d=2, offset=-1, shift=16, mode=R.RESIZE_NEAREST))
    assert np.array_equal(_get(m, 512, (6, 10, 4)), x.astype(np.int64).repeat(2, 0).repeat(2, 1))


def test_resize_bilinear_weights_and_clamped_edges() -> None:
    """Bilinear x2 with half-pixel centres: TOSA's integer weights (n - f, f) per axis, neighbours clamped to
    the IFM, the sum (times 2^16 in hardware) shifted down by 16 + log2(n * n) with natural rounding."""
    x = np.random.default_rng(4).integers(-128, 128, (2, 3, 1)).astype(np.int8)
    m = _machine()
    m.regions[1][: x.size] = x.view(np.uint8).ravel()
    _run(m, _resize_cmds(2, 3, 4, 6, 1, n=4, d=2, offset=-1, shift=16 + 4, mode=R.RESIZE_BILINEAR))
    v = x[..., 0].astype(np.int64)
    want = np.zeros((4, 6), dtype=np.int64)
    for oy in range(4):
        for ox in range(6):
            py, px = oy * 2 - 1, ox * 2 - 1
            iy, ix, fy, fx = py // 4, px // 4, py % 4, px % 4
            y0, y1 = min(max(iy, 0), 1), min(max(iy + 1, 0), 1)
            x0, x1 = min(max(ix, 0), 2), min(max(ix + 1, 0), 2)
            acc = (v[y0, x0] * (4 - fy) * (4 - fx) + v[y0, x1] * (4 - fy) * fx
                   + v[y1, x0] * fy * (4 - fx) + v[y1, x1] * fy * fx)
            want[oy, ox] = (acc + 8) >> 4
    assert np.array_equal(_get(m, 512, (4, 6, 1))[..., 0], want)


def test_resize_replicate_is_a_clear_error() -> None:
    m = _machine()
    with pytest.raises(NpuError, match="NPU_OP_RESIZE mode 1 \\(replicate\\) is not modelled"):
        _run(m, _resize_cmds(2, 2, 4, 4, 1, n=4, d=2, offset=-1, shift=16, mode=R.RESIZE_REPLICATE))


# ---- 2:4 sparse weights ----------------------------------------------------------------------------------------

def _sparse_2_4_weights(rng: np.random.Generator, o: int, kh: int, kw: int, i: int) -> np.ndarray:
    """Random int8 OHWI weights (-127..127, non-zero) with two of every four consecutive input channels zero."""
    w = rng.integers(1, 128, (o, kh, kw, i)) * rng.choice([-1, 1], (o, kh, kw, i))
    for g in range(0, i, 4):
        n = min(4, i - g)
        for idx in np.ndindex(o, kh, kw):
            w[idx][g + rng.permutation(n)[: n - min(n, 2)]] = 0
    return w.astype(np.int64)


@settings(max_examples=30, deadline=None)
@given(o=st.integers(1, 40), kh=st.integers(1, 9), kw=st.integers(1, 9), i=st.integers(1, 300),
       obd=st.sampled_from([8, 16, 32, 48]), trav=st.sampled_from(["part_kernel", "depth_first"]),
       stride=st.sampled_from([(1, 1), (2, 2), (1, 2)]), dil=st.sampled_from([(1, 1), (2, 2)]),
       ub=st.sampled_from([8, 16]))
def test_sparse_weight_order_visits_every_weight_once(o, kh, kw, i, obd, trav, stride, dil, ub) -> None:
    assume(obd % ub == 0)
    order = _order(o, kh, kw, i, obd, trav, stride, dil, 16 if trav == "part_kernel" else 128, ub, True)
    real = order[order >= 0]
    assert np.array_equal(np.sort(real), np.arange(o * kh * kw * i))


def test_sparse_weight_stream_order_and_decoding() -> None:
    """WEIGHT_SPARSITY_SPARSE_2_4: the stream holds every weight (zeros too) but each kernel element feeds 16 IFM
    channels per OFM instead of 8, part-kernel-first pads elements to 10 and depth-first IFM blocks are 128 deep;
    MLW and raw FWD streams decode to the dense OHWI weights. Streams that are not 2:4 sparse, -128 weights and
    sparse depthwise kernels are refused, as are FWD palette modes."""
    from ethosu import mlw_codec

    dense = _order(8, 1, 1, 32, 8, "depth_first", (1, 1), (1, 1), 64, 8)
    sparse = _order(8, 1, 1, 32, 8, "depth_first", (1, 1), (1, 1), 128, 8, True)
    assert dense[:16].tolist() == list(range(8)) + list(range(32, 40))     # [4 OFM][8 IFM]
    assert sparse[:32].tolist() == list(range(16)) + list(range(32, 48))   # [4 OFM][16 IFM]
    # A 2x2 kernel, part-kernel-first: 4 elements padded to 10 (sparse) instead of 5.
    assert len(_order(8, 2, 2, 16, 8, "part_kernel", (1, 1), (1, 1), 16, 8, True)) == 10 * 16 * 8
    assert len(_order(8, 2, 2, 16, 8, "part_kernel", (1, 1), (1, 1), 16, 8)) == 5 * 16 * 8

    rng = np.random.default_rng(24)
    for shape, pk in (((24, 3, 3, 20), True), ((40, 1, 1, 200), False)):
        w = _sparse_2_4_weights(rng, *shape)
        args = _kernel_args(ofm_depth=shape[0], kh=shape[1], kw=shape[2], ifm_depth=shape[3], part_kernel=pk,
                            ofm_block_depth=16, microblock_hw=4, sparsity=1)
        order = _order(shape[0], shape[1], shape[2], shape[3], 16, "part_kernel" if pk else "depth_first",
                       (1, 1), (1, 1), 16 if pk else 128, 8, True)
        body = np.where(order >= 0, w.ravel()[np.maximum(order, 0)], 0)
        assert np.count_nonzero(body.reshape(-1, 4), axis=1).max() <= 2
        fwd = bytes([1] + [0] * 31) + body.astype(np.int8).tobytes()
        mlw = bytes(mlw_codec.encode([int(v) for v in body]))
        assert np.array_equal(decode_weights_u85(fwd, **args), w)
        assert np.array_equal(decode_weights_u85(mlw, **{**args, "weight_format": 0}), w)
        # The same bytes read in the dense order give other weights.
        assert not np.array_equal(decode_weights_u85(fwd, **{**args, "sparsity": 0}), w)

    args = _kernel_args(sparsity=1)   # 8 OFM x 16 IFM, depth-first
    with pytest.raises(NpuError, match="group of 4 at stream position 4 holds 3"):
        decode_weights_u85(bytes([1] + [0] * 31) + bytes([1, 1, 0, 0, 1, 1, 1, 0]) + bytes(1024), **args)
    with pytest.raises(NpuError, match="outside -127..127"):
        decode_weights_u85(bytes([1] + [0] * 31) + bytes([0x80]) + bytes(1024), **args)
    with pytest.raises(NpuError, match="depthwise"):
        decode_weights_u85(bytes(mlw_codec.encode([0] * 1024)), **{**args, "depthwise": True, "weight_format": 0})
    with pytest.raises(NpuError, match="palette"):
        decode_weights_u85(bytes([2] + [0] * 31) + bytes(1024), **args)


_SPARSE_MODULE = '''
import torch

class Sparse(torch.nn.Module):
    """Convolutions whose weights are 2:4 sparse along the input channels: two of every four consecutive input
    channels are zero for every output channel and kernel element."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(32, 48, 3, padding=1)    # part-kernel-first
        self.c2 = torch.nn.Conv2d(48, 160, 1)              # depth-first, several OFM blocks
        self.c3 = torch.nn.Conv2d(160, 24, 1)              # depth-first, two 128-deep IFM blocks
        self.c4 = torch.nn.Conv2d(24, 40, 3, stride=2, padding=1)   # part-kernel-first, strided
        g = torch.Generator().manual_seed(1)
        for c in (self.c1, self.c2, self.c3, self.c4):
            o, i = c.weight.shape[:2]
            keep = torch.zeros(o, i, 1, 1)
            for oc in range(o):
                for q in range(0, i, 4):
                    keep[oc, q + torch.randperm(4, generator=g)[:2]] = 1
            c.weight.data *= keep

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.relu(self.c2(x))
        return self.c4(self.c3(x))

torch.manual_seed(0)
ModelUnderTest = Sparse().eval()
ModelInputs = (torch.randn(1, 32, 12, 10),)
'''


def test_sparse_2_4_conv_bit_exact_vs_tosa(tmp_path: Path) -> None:
    """Vela encodes 2:4 sparse conv weights in the sparse format (WEIGHT_FORMAT weight_sparsity, both SWD and
    FWD, part-kernel-first and depth-first): the functional model is bit-exact with tosa_reference_model."""
    from emlkit.compile import compile_model
    from emlkit.lower import LowerOptions

    (tmp_path / "sparse.py").write_text(_SPARSE_MODULE)
    res = compile_model(str(tmp_path / "sparse.py"), TARGET, tmp_path / "out", options=LowerOptions())
    blobs, tosas = program_parts(res)
    fmt, convs = None, []
    for c in decode(parse_blob(blobs[0]).commands, 0, "u85"):
        if c.name == "NPU_SET_WEIGHT_FORMAT":
            fmt = c.param
            assert R.fields(c.name, c.param, c.payload)["weight_sparsity"] == "WEIGHT_SPARSITY_SPARSE_2_4"
        elif c.name == "NPU_SET_KERNEL_STRIDE":
            part_kernel = (c.param >> 2) & 1
        elif c.name == "NPU_OP_CONV":
            convs.append((fmt, part_kernel))
    assert len(convs) == 4 and all(f is not None and (f >> 4) & 1 for f, _ in convs), convs
    assert {pk for _, pk in convs} == {0, 1}, "expected both part-kernel-first and depth-first convolutions"
    bit_exact_vs_tosa(blobs, tosas, "2:4 sparse convs", trials=3)
