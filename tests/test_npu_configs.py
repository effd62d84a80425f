"""Every Ethos-U configuration ExecuTorch's Arm flow accepts runs through the firmware with the co-simulated NPU,
bit-exact: the functional model orders each configuration's weight streams as regor writes them (the U55's
micro-block, the U65-512's two cores, the U85's block sizes and weight decoders per MAC count), and the
firmware's driver checks the NPU it finds against the program's. Vela's system config and memory mode are
compile options, checked against ExecuTorch's vela.ini."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from emlkit.cli import main
from emlkit.errors import AotError
from emlkit.npu.blob import DriverConfig
from emlkit.npu.errors import NpuError
from emlkit.npu.run import machine_for
from emlkit.npu.weights_u85 import DECODERS, _order, block_sizes, decode_weights_u85, depthwise_padding
from emlkit.targets import TARGETS, get_target, with_vela_config


class _Blob:
    def __init__(self, macs_log2: int, product: int = 0) -> None:
        self.config = DriverConfig(product=product, macs_per_cc=macs_log2, shram_kib=16, arch_id=0)
        self.weights, self.scratch_size = b"", 16


@pytest.mark.parametrize("product, macs_log2, ofm_ublock, cores", [
    (0, 5, 4, 1), (0, 6, 8, 1), (0, 7, 8, 1), (0, 8, 8, 1), (1, 8, 8, 1), (1, 9, 8, 2)])
def test_micro_block_and_cores_per_configuration(product: int, macs_log2: int, ofm_ublock: int, cores: int) -> None:
    m = machine_for(_Blob(macs_log2, product))  # type: ignore[arg-type]
    assert (m.ifm_ublock, m.ofm_ublock, m.cores) == (8, ofm_ublock, cores)


# regor's Ethos-U85 block selection: (traversal, IFM bits, MACs, micro-block H x W, sparse) -> (IFM block depth,
# OFM micro-block depth); the micro-blocks are the ones each configuration has.
@pytest.mark.parametrize("args, sizes", [
    (("part_kernel", 8, 128, 2), (16, 8)), (("depth_first", 8, 128, 1), (32, 16)), (("depth_first", 8, 128, 2), (64, 8)),
    (("depth_first", 8, 256, 4), (64, 8)), (("depth_first", 8, 256, 2), (32, 16)),
    (("depth_first", 8, 512, 4), (64, 16)), (("depth_first", 8, 512, 4, True), (128, 16)),
    (("part_kernel", 16, 1024, 4), (16, 32)), (("depth_first", 8, 1024, 8), (64, 16)),
    (("depth_first", 8, 2048, 4), (64, 64)), (("depth_first", 16, 2048, 16), (64, 16)),
])
def test_u85_block_sizes_per_mac_count(args: tuple, sizes: tuple[int, int]) -> None:
    assert block_sizes(*args) == sizes


def test_u85_unknown_configurations_are_clear_errors() -> None:
    with pytest.raises(NpuError, match="384 MACs is not defined"):
        block_sizes("depth_first", 8, 384, 4)
    with pytest.raises(NpuError, match="32-bit IFMs"):
        block_sizes("depth_first", 32, 256, 4)
    with pytest.raises(NpuError, match="128-MAC Ethos-U85 has no OFM micro-block of 16 elements"):
        block_sizes("depth_first", 8, 128, 16)


@pytest.mark.parametrize("macs, ub, trav", [(512, 16, "depth_first"), (512, 16, "depthwise"), (1024, 32, "part_kernel"),
                                            (1024, 16, "depthwise"), (2048, 64, "depth_first"), (2048, 16, "depthwise")])
def test_u85_decoders_share_every_weight_once(macs: int, ub: int, trav: str) -> None:
    o, kh, kw, i = 70, 3, 5, 1 if trav == "depthwise" else 40
    n = DECODERS[macs]
    orders = [_order(o, kh, kw, i, 2 * ub, trav, (1, 1), (1, 1), 16 if trav == "part_kernel" else 64, ub,
                     streams=n, stream=d, dw_pad=depthwise_padding(macs, 8) if trav == "depthwise" else 0)
              for d in range(n)]
    real = np.concatenate([x[x >= 0] for x in orders])
    assert np.array_equal(np.sort(real), np.arange(o * kh * kw * i))
    assert len({len(x) for x in orders}) == 1   # the decoders run in step
    # Decoder d takes OFM groups of 4 d, d + n, ... of every micro-block.
    ofm = orders[1][orders[1] >= 0] // (kh * kw * i)
    assert set(np.unique(ofm // 4 % n)) == {1}


def test_u85_depthwise_padding_after_every_10_elements() -> None:
    plain = _order(16, 3, 3, 1, 16, "depthwise", (1, 1), (1, 1), 64, 16)
    padded = _order(16, 3, 3, 1, 16, "depthwise", (1, 1), (1, 1), 64, 16, dw_pad=6)
    assert len(plain) == 10 * 16 and len(padded) == 16 * 16
    assert np.array_equal(padded[:160], plain) and (padded[160:] == -1).all()
    assert depthwise_padding(256, 8) == 0 and depthwise_padding(512, 8) == 2 and depthwise_padding(2048, 8) == 6
    assert depthwise_padding(128, 16) == 2


def _streams(w: np.ndarray, orders: list[np.ndarray]) -> list[np.ndarray]:
    flat = w.ravel()
    return [np.where(x >= 0, flat[np.maximum(x, 0)], 0) for x in orders]


@pytest.mark.parametrize("macs, hw, part_kernel", [(512, 4, False), (1024, 4, True), (2048, 16, False)])
def test_u85_multi_decoder_streams_decode(macs: int, hw: int, part_kernel: bool) -> None:
    from ethosu import mlw_codec

    rng = np.random.default_rng(macs)
    o, kh, kw, i = 40, 3, 3, 24
    w = rng.integers(-127, 128, size=(o, kh, kw, i))
    args = dict(ofm_depth=o, kh=kh, kw=kw, ifm_depth=i, depthwise=False, part_kernel=part_kernel, ifm_bits=8,
                dilation=(1, 1), stride=(1, 1), ofm_block_depth=64, microblock_hw=hw, macs=macs, sparsity=0)
    trav = "part_kernel" if part_kernel else "depth_first"
    ifm_block, ub = block_sizes(trav, 8, macs, hw)
    n = DECODERS[macs]
    orders = [_order(o, kh, kw, i, 40, trav, (1, 1), (1, 1), ifm_block, ub, streams=n, stream=d) for d in range(n)]
    mlw = [bytes(mlw_codec.encode([int(v) for v in s])) for s in _streams(w, orders)]
    assert np.array_equal(decode_weights_u85(mlw, weight_format=0, **args), w)   # type: ignore[arg-type]
    with pytest.raises(NpuError, match=f"{n} weight decoders, the command gives 1"):
        decode_weights_u85(mlw[0], weight_format=0, **args)   # type: ignore[arg-type]
    # Fast format: one stream, blocks of (micro-block x IFM micro-block x rounding / decoders) from each in turn.
    block = ub * ifm_block * (5 if part_kernel else 1) // n
    body = np.stack([s.reshape(-1, block) for s in _streams(w, orders)], axis=1).ravel()
    fwd = bytes([1] + [0] * 31) + body.astype(np.int8).tobytes()
    assert np.array_equal(decode_weights_u85(fwd, weight_format=1, **args), w)   # type: ignore[arg-type]


def test_u85_48_bit_scale_stream() -> None:
    from emlkit.npu.weights_u85 import decode_scales_u85

    raw = bytearray(10)
    raw[0:6] = (-(1 << 40) - 5).to_bytes(6, "little", signed=True)
    raw[6:8] = (0x8000 | 12345).to_bytes(2, "little")   # bit 15 is not part of the 15-bit scale
    raw[8] = 0xC0 | 33
    bias, scale, shift = decode_scales_u85(bytes(raw), 1, acc48=True)
    assert (bias[0], scale[0], shift[0]) == (-(1 << 40) - 5, 12345, 33)


# ---- Vela system config and memory mode ----------------------------------------------------------------------


@pytest.mark.parametrize("npu", ["ethos-u55-128", "ethos-u65-512", "ethos-u85-1024"])
def test_defaults_are_executorchs(npu: str) -> None:
    from executorch.backends.arm.ethosu import EthosUCompileSpec

    from emlkit.vela_ini import resolve

    flags = list(EthosUCompileSpec(npu).compiler_flags)
    sys_cfg, mode = resolve(npu, None, None)
    assert f"--system-config={sys_cfg}" in flags and f"--memory-mode={mode}" in flags


@pytest.mark.parametrize("target, system_config, memory_mode, message", [
    ("ethos-u55-128", None, "Dedicated_Sram", "on system config Ethos_U55_High_End_Embedded puts the arena in "
                                              "OffChipFlash .* accepts Sram_Only, Shared_Sram"),
    ("ethos-u85-256", "Ethos_U85_SYS_Flash_Low", "Dedicated_Sram_384KB", "arena in OffChipFlash"),
    ("ethos-u55-64", "Ethos_U85_SYS_DRAM_Mid", None, "is not for an ethos-u55: ethos-u55-64 accepts Ethos_U55_"),
    ("ethos-u65-256", "Fast", None, "--system-config Fast is not in Vela's vela.ini"),
    ("ethos-u85-512", None, "Sram_Everywhere", "--memory-mode Sram_Everywhere is not in Vela's vela.ini: choose one of "
                                               "Sram_Only, Shared_Sram, Dedicated_Sram"),
    ("cortex-m55", None, "Sram_Only", "cortex-m55 has no NPU"),
])
def test_rejected_vela_configs(target: str, system_config: str | None, memory_mode: str | None, message: str) -> None:
    with pytest.raises(AotError, match=message) as err:
        with_vela_config(get_target(target), system_config, memory_mode)
    assert err.value.exit_code == 2


def test_rejected_vela_config_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "add", "--target", "ethos-u55-128", "--memory-mode", "Dedicated_Sram_512KB",
                 "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Dedicated_Sram_512KB" in err[0] and "Traceback" not in err[0]


def test_vela_config_is_part_of_the_cache_key() -> None:
    from emlkit.compile import cache_key, make_options
    from emlkit.load import load_model

    model, opts = load_model("add"), make_options()
    base = get_target("ethos-u85-256")
    keys = {cache_key(model, t, opts, None) for t in (
        base, with_vela_config(base, None, "Shared_Sram"), with_vela_config(base, "Ethos_U85_SYS_DRAM_High", None))}
    assert len(keys) == 3
    assert with_vela_config(base, None, None) is base


# ---- through the firmware ------------------------------------------------------------------------------------

# Every Ethos-U configuration ExecuTorch's Arm flow accepts has a target (and the a16w8 variants on U55 and U85).
CONFIGURATIONS = ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256", "ethos-u65-512",
                  "ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048"]


def test_every_configuration_has_a_target_on_its_board() -> None:
    for npu in CONFIGURATIONS:
        t = TARGETS[npu]
        assert t.npu == npu and t.default_board == ("corstone-320" if "u85" in npu else "corstone-300")
    assert TARGETS["ethos-u55-128-a16w8"].activation_bits == TARGETS["ethos-u85-256-a16w8"].activation_bits == 16


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, target: str, *extra: str) -> str:
    assert main(["run", model, "--target", target, "-o", str(tmp_path), *extra]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "NPU model vs TOSA (compile) bit-exact" in out, out[-2000:]
    return out


@pytest.mark.parametrize("target, model", [
    pytest.param("ethos-u55-32", "conv_relu", marks=pytest.mark.slow),  # the main job runs each configuration
    ("ethos-u85-512", "conv_relu"),
    pytest.param("ethos-u55-32", "mlperf_kws_dscnn", marks=pytest.mark.slow),
    pytest.param("ethos-u55-64", "mlperf_kws_dscnn", marks=pytest.mark.slow),
    pytest.param("ethos-u55-256", "mlperf_kws_dscnn", marks=pytest.mark.slow),
    ("ethos-u65-512", "conv_relu"),
    pytest.param("ethos-u65-512", "dw_separable", marks=pytest.mark.slow),
    pytest.param("ethos-u85-128", "conv_relu", marks=pytest.mark.slow),  # the main job runs each configuration
    pytest.param("ethos-u85-1024", "conv_relu", marks=pytest.mark.slow),  # the main job runs each configuration
    pytest.param("ethos-u85-2048", "conv_relu", marks=pytest.mark.slow),  # the main job runs each configuration
    pytest.param("ethos-u85-1024", "dw_separable", marks=pytest.mark.slow),
    ("ethos-u85-256-a16w8", "conv_relu"),
    pytest.param("ethos-u85-256-a16w8", "mlperf_kws_dscnn", marks=pytest.mark.slow),
    pytest.param("ethos-u85-2048", "mlperf_kws_dscnn", marks=pytest.mark.slow),
])
def test_configuration_runs_bit_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str,
                                      model: str) -> None:
    out = _run(tmp_path, capsys, model, target)
    npu = TARGETS[target].npu
    assert f"PASS (QEMU + co-simulated {npu}" in out or f"co-simulated {npu}; " in out, out[-2000:]
    assert f"NPU (device) Ethos-U{npu[7:9]}-{npu.rsplit('-', 1)[1]}" in out   # the driver read and accepted it


@pytest.mark.parametrize("target, system_config, memory_mode", [
    ("ethos-u55-128", "Ethos_U55_Deep_Embedded", "Sram_Only"),
    pytest.param("ethos-u85-256", None, "Dedicated_Sram_384KB", marks=pytest.mark.slow),
    pytest.param("ethos-u65-256", None, "Shared_Sram", marks=pytest.mark.slow),
    ("ethos-u65-512", "Ethos_U65_Mid_End", "Dedicated_Sram_512KB"),
    pytest.param("ethos-u85-1024", "Ethos_U85_SYS_Flash_High", "Shared_Sram", marks=pytest.mark.slow)])
def test_memory_mode_runs_bit_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str,
                                    system_config: str | None, memory_mode: str) -> None:
    extra = ["--system-config", system_config] if system_config else []
    out = _run(tmp_path, capsys, "conv_relu", target, "--memory-mode", memory_mode, *extra)
    assert f"Vela config {TARGETS[target].npu}, {system_config or ''}" in out and f", {memory_mode} " in out


def test_main_suite_runs_every_configuration_once() -> None:
    from emlkit.suite import plan, request

    req = request([])   # what ./test_cortex_m.sh runs
    cases = plan(req.models, req.targets, req.boards, req.sim, req.extra_rows)
    npu_targets = {c.target for c in cases if TARGETS[c.target].npu}
    assert set(CONFIGURATIONS) | {"ethos-u55-128-a16w8", "ethos-u85-256-a16w8"} <= npu_targets
    for t in npu_targets - set(req.targets):   # one small model for each configuration beyond the main targets
        assert [c.model for c in cases if c.target == t] == ["conv_relu"]
    assert request(["--quick"]).extra_rows == [] and request(["--targets", "ethos-u55-128"]).extra_rows == []


def test_u65_512_cores_split_the_ofm_channels() -> None:
    """Core c's weight and scale streams hold OFM channels c, c + 2, ..., each a single-core stream of its share
    of the OFM block (regor's two-core U65 encoding)."""
    from ethosu import mlw_codec

    from emlkit.npu.blob import VelaBlob
    from emlkit.npu.weights import _order as order_u55

    rng = np.random.default_rng(65)
    oc, kh, kw, ic, block = 21, 3, 3, 12, 16
    w = rng.integers(-127, 128, size=(oc, kh, kw, ic))
    bias = rng.integers(-1000, 1000, size=oc)
    weights, scales, regs = b"", b"", {}
    for core in range(2):
        sub = w[core::2]
        order = order_u55(len(sub), kh, kw, ic, (block + 1 - core) // 2, False, False, 8, 8, 8, 8, 8)
        stream = bytes(mlw_codec.encode([int(v) for v in np.where(order >= 0, sub.ravel()[np.maximum(order, 0)], 0)]))
        sfx = "" if core == 0 else "1"
        regs[f"NPU_SET_WEIGHT{sfx}_BASE"], regs[f"NPU_SET_WEIGHT{sfx}_LENGTH"] = len(weights), len(stream)
        weights += stream
        raw = b"".join(int(b).to_bytes(5, "little", signed=True) + (1 << 30).to_bytes(4, "little") + bytes([31])
                       for b in bias[core::2])
        regs[f"NPU_SET_SCALE{sfx}_BASE"], regs[f"NPU_SET_SCALE{sfx}_LENGTH"] = len(scales), len(raw)
        scales += raw
    for core in range(2):   # the scales follow the weights in region 0
        regs[f"NPU_SET_SCALE{'' if core == 0 else '1'}_BASE"] += len(weights)
    blob = VelaBlob(np.zeros(0, np.uint32), 0, weights + scales, 16, [], [], DriverConfig(1, 9, 96, 0))
    m = machine_for(blob)
    assert m.cores == 2
    m.pay.update(regs)
    m.regs.update({"NPU_SET_OFM_BLK_DEPTH_M1": block - 1, "NPU_SET_KERNEL_STRIDE": 0, "NPU_SET_WEIGHT_REGION": 0,
                   "NPU_SET_SCALE_REGION": 0})
    m.ifm_bits = lambda: 8   # type: ignore[method-assign]  # no IFM registers needed for the weights
    assert np.array_equal(m.conv_weights("CONV", oc, kh, kw, ic, False, (1, 1)), w)
    got_bias, scale, shift = m.scales(oc, "CONV")
    assert np.array_equal(got_bias, bias) and (scale == 1 << 30).all() and (shift == 31).all()


@pytest.mark.slow
@pytest.mark.parametrize("model, target", [("dw_separable", "ethos-u65-512"), ("dw_separable", "ethos-u85-512"),
                                           ("conv_relu", "ethos-u85-2048")])
def test_checker_bounds_equal_model_with_several_weight_streams(compiled, model: str, target: str) -> None:
    """The firmware's stream checker bounds every weight and scale stream of the multi-core / multi-decoder
    configurations exactly where the bit-exact functional model reads them."""
    from npu_firmware_lib import NpuCheck
    from npu_helpers import program_parts
    from test_npu_firmware import model_extents

    check = NpuCheck()
    blobs, _ = program_parts(compiled(model, target))
    for blob in blobs:
        c = check(blob)
        assert c.status == "ok", c.message
        assert {r: u for r, u in enumerate(c.used) if u} == model_extents(blob)


@pytest.mark.parametrize("target, board, plays", [("ethos-u85-512", "an547-u85", "ethos-u85-1024"),
                                                  ("ethos-u65-512", "corstone-300", "ethos-u65-256")])
def test_driver_refuses_another_configuration(compiled, target: str, board: str, plays: str) -> None:
    """The firmware's driver compares the NPU's CONFIG with the program's before starting it."""
    from emlkit.deploy.sim_qemu import run_qemu

    r = run_qemu(compiled("conv_relu", target).bpte, board, timeout=120, npu=plays)
    assert r.status == "error", (r.status, r.tail)
    want = target.replace("ethos-u", "Ethos-U")
    assert r.run.raw.get("code") == "npu_config" and want in r.run.raw["error"] and plays in r.run.raw["error"]
    assert r.npu.jobs == []   # refused before the NPU ever started
