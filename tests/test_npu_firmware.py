"""Ethos-U in the firmware: the delegate parser and command-stream checker (C, on the host), and the whole
firmware (EthosUBackend + driver) under QEMU with the NPU co-simulated (emlkit/deploy/npu_cosim.py), including
every fault the driver must report with its own status."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from npu_firmware_lib import NpuCheck
from npu_helpers import program_parts

TARGETS = ["ethos-u55-128", "ethos-u65-256", "ethos-u85-256"]
BOARD = {"ethos-u55-128": "corstone-300", "ethos-u65-256": "corstone-300", "ethos-u85-256": "an547-u85"}


@pytest.fixture(scope="module")
def check() -> NpuCheck:
    return NpuCheck()


# ---------------------------------------------------------------- what the functional model touches


class _Recording:
    """A region array that records the highest byte index each access touches."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr
        self.hi = 0

    def __len__(self) -> int:
        return len(self.arr)

    def _note(self, key: Any) -> None:
        if isinstance(key, slice):
            if key.stop is not None and key.stop > (key.start or 0):
                self.hi = max(self.hi, int(key.stop))
        else:
            idx = np.asarray(key)
            if idx.size:
                self.hi = max(self.hi, int(idx.max()) + 1)

    def __getitem__(self, key: Any) -> np.ndarray:
        self._note(key)
        return self.arr[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._note(key)
        self.arr[key] = value


def model_extents(blob: bytes) -> dict[int, int]:
    """Highest byte + 1 the functional model reads or writes in each region while running the blob."""
    from emlkit.npu.blob import parse_blob
    from emlkit.npu.commands import decode
    from emlkit.npu.run import machine_for

    vb = parse_blob(blob)
    m = machine_for(vb)
    rng = np.random.default_rng(0)
    for io in vb.inputs:
        m.regions[io.region][io.offset:io.offset + io.nbytes] = rng.integers(0, 256, io.nbytes, dtype=np.uint8)
    rec = {r: _Recording(a) for r, a in m.regions.items()}
    m.regions = rec
    m.run(decode(vb.commands, 0, m.arch))
    return {r: x.hi for r, x in rec.items() if x.hi}


ZOO_SAMPLE = ["conv_relu", "dw_separable", "pool", "softmax", "lut_activations", "attention", "global_avgpool"]


# the U65's streams are the U55's command set: its checker cases run in the slow pass
@pytest.mark.parametrize("target", [pytest.param(t, marks=pytest.mark.slow) if "u65" in t else t for t in TARGETS])
@pytest.mark.parametrize("model", ZOO_SAMPLE)
def test_checker_bounds_equal_functional_model(compiled, check, model: str, target: str) -> None:
    """The C checker accepts every zoo delegate, and the bytes it says each region needs are exactly the bytes
    the bit-exact functional model touches: the check is neither loose (a write past a region would pass) nor
    tight (a valid program refused)."""
    blobs, _ = program_parts(compiled(model, target))
    for blob in blobs:
        c = check(blob)
        assert c.status == "ok", c.message
        want = model_extents(blob)
        got = {r: u for r, u in enumerate(c.used) if u}
        assert got == want, (model, target)
        if target != "ethos-u65-256":
            assert c.used[2] == 0  # only the U65's Dedicated_Sram plan uses the fast scratch


def _stream_words(blob: bytes) -> tuple[int, int]:
    """(byte offset of the command stream inside the blob, its word count)."""
    pos = 0
    while pos < len(blob):
        name = blob[pos:pos + 16].split(b"\0", 1)[0]
        (n,) = struct.unpack_from("<I", blob, pos + 16)
        if name == b"cmd_data":
            data = blob[pos + 32:pos + 32 + n]
            if data[:4] != b"COP1":
                return pos + 32, n // 4
            i = 1
            while True:
                (tag,) = struct.unpack_from("<I", data, 4 * i)
                kind = tag & 0xFF
                if kind == 0x02:
                    return pos + 32 + 4 * (i + 1), (tag >> 16) | (((tag >> 8) & 0xFF) << 16)
                i += 3 if kind == 0x01 else 1
        pos += 32 + (n + 15) // 16 * 16
    raise AssertionError("no cmd_data block")


def _patch_first(blob: bytes, code: int, value: int) -> bytes:
    """The blob with the payload of the first cmd1 command `code` replaced by `value`."""
    start, n = _stream_words(blob)
    words = list(struct.unpack_from(f"<{n}I", blob, start))
    i = 0
    while i < n:
        w = words[i]
        if (w >> 14) & 3 == 1:
            if w & 0x3FF == code:
                out = bytearray(blob)
                struct.pack_into("<I", out, start + 4 * (i + 1), value)
                return bytes(out)
            i += 2
        else:
            i += 1
    raise AssertionError(f"no command 0x{code:03x}")


def test_checker_refuses_out_of_region_streams(compiled, check) -> None:
    blob = program_parts(compiled("conv_relu", "ethos-u55-128"))[0][0]
    # an OFM base far past the scratch: a write outside the arena
    c = check(_patch_first(blob, 0x010, 0x7FFFFF00))
    assert c.status == "npu_stream" and "NPU_OP_" in c.message and "OFM writes bytes" in c.message, c.message
    # a weight stream past the weights
    c = check(_patch_first(blob, 0x021, 0x00FFFFFF))
    assert c.status == "npu_stream" and "weight stream reads" in c.message, c.message
    # and the fast scratch bound is enforced when one is given
    u65 = program_parts(compiled("conv_relu", "ethos-u65-256"))[0][0]
    need = check(u65).used[2]
    assert need > 0
    assert check(u65, fast_limit=need).status == "ok"
    assert check(u65, fast_limit=need - 1).status == "npu_stream"


def test_checker_refuses_corrupt_blobs(compiled, check) -> None:
    blob = program_parts(compiled("conv_relu", "ethos-u55-128"))[0][0]
    cases = {
        "truncated": blob[: len(blob) // 2],
        "not vela": b"X" + blob[1:],
        "empty": b"",
    }
    # the inputs block: claim 5 entries in a 1-entry block
    pos = blob.index(b"inputs\0")
    bad = bytearray(blob)
    struct.pack_into("<i", bad, pos + 32, 5)
    cases["bad io count"] = bytes(bad)
    # a command stream cut before NPU_OP_STOP
    start, n = _stream_words(blob)
    cut = bytearray(blob)
    struct.pack_into("<I", cut, start + 4 * (n - 1), 0x0000_0011)  # NPU_OP_DMA_WAIT in place of STOP
    cases["no stop"] = bytes(cut)
    for name, data in cases.items():
        c = check(data)
        assert c.status == "delegate_corrupt", (name, c)
        assert c.message and "\n" not in c.message, name
    # unknown opcode
    unk = bytearray(blob)
    struct.pack_into("<I", unk, start, 0x0000_03FE)
    assert check(bytes(unk)).status == "delegate_corrupt"


def test_checker_survives_random_corruption(compiled) -> None:
    """Random byte flips of real delegate data never crash the parser or the checker and always end in one of
    its documented statuses (the libFuzzer run under ASan + UBSan goes further: scripts/bench_fuzz.py)."""
    blob = program_parts(compiled("dw_separable", "ethos-u55-128"))[0][0]
    chk = NpuCheck()
    rng = np.random.default_rng(7)
    statuses = set()
    for _ in range(400):
        data = bytearray(blob)
        for _ in range(int(rng.integers(1, 8))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        statuses.add(chk(bytes(data)).status)
    assert statuses <= {"ok", "delegate_corrupt", "npu_stream", "not_supported"}
    assert "delegate_corrupt" in statuses or "npu_stream" in statuses


# ---------------------------------------------------------------- the firmware under QEMU


def _run(bpte: Path | bytes, board: str, **kw: Any) -> Any:
    from emlkit.deploy.sim_qemu import run_qemu

    return run_qemu(bpte, board, timeout=120, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", ["conv_relu", "dw_separable", "softmax", "lut_activations", "attention", "mobilenet_v2"])
def test_firmware_runs_zoo_bit_exact(compiled, model: str, target: str) -> None:
    res = compiled(model, target)
    r = _run(res.bpte, BOARD[target])
    assert r.status == "pass", (r.status, r.tail)
    assert all(o.max_steps == 0 for o in r.run.outputs)
    raw = r.run.raw
    assert raw["npu"]["invocations"] == 2 * r.run.cases  # warm-up + measured
    ops = {p["op"]: p for p in raw["per_op"]}
    assert ops["delegate:EthosUBackend"]["calls"] >= 1
    assert r.npu is not None and all(j.result == "ok" for j in r.npu.jobs)
    per_inference = sum(d["cycles"] for d in res.report["npu_estimates"]["delegates"])
    assert raw["npu"]["pmu_cycles"] == raw["npu"]["invocations"] * per_inference > 0


def test_firmware_runs_u85_resize(compiled) -> None:
    """unet_small's nearest upsample is an NPU_OP_RESIZE on the U85: the firmware's stream checker bounds its IFM
    (KERNEL_HEIGHT x KERNEL_WIDTH) and OFM, and the program runs bit-exact with the NPU co-simulated."""
    from emlkit.npu.blob import parse_blob
    from emlkit.npu.commands import decode
    from npu_helpers import program_parts

    res = compiled("unet_small", "ethos-u85-256")
    assert any(c.name == "NPU_OP_RESIZE" for b in program_parts(res)[0] for c in decode(parse_blob(b).commands, 0, "u85"))
    r = _run(res.bpte, BOARD["ethos-u85-256"])
    assert r.status == "pass", (r.status, r.tail)
    assert all(o.max_steps == 0 for o in r.run.outputs)


def test_firmware_counts_repeat_exactly(compiled) -> None:
    """Instruction counts are the firmware's alone: the co-simulation's halts do not move QEMU's clock."""
    res = compiled("conv_relu", "ethos-u55-128")
    a, b = _run(res.bpte, "corstone-300"), _run(res.bpte, "corstone-300")
    assert a.status == b.status == "pass"
    assert a.run.total == b.run.total and a.run.per_op == b.run.per_op
    ops = {p.op: p.count for p in a.run.per_op}
    assert 0 < ops["delegate:EthosUBackend"] < 20_000  # copies + register accesses, no NPU time
    # The co-simulated PMU counts the compile report's per-command estimates: Vela's total per inference.
    per_inference = sum(d["cycles"] for d in res.report["npu_estimates"]["delegates"])
    assert per_inference == res.report["vela"]["total_cycles_estimate"] > 0
    for r in (a, b):
        npu = r.run.raw["npu"]
        assert npu["pmu_cycles"] == npu["invocations"] * per_inference == r.run.npu_pmu_cycles
        assert npu["pmu_events"][0] == npu["pmu_cycles"] and npu["pmu_events"][1:] == [0, 0, 0]  # NPU active only
        assert all(j.estimated_cycles == per_inference for j in r.npu.jobs)


def test_no_estimates_means_the_pmu_reads_0(compiled) -> None:
    """A program given as bytes has no compile report beside it: no estimates, and the PMU says nothing."""
    res = compiled("conv_relu", "ethos-u55-128")
    r = _run(res.bpte.read_bytes(), "corstone-300")
    assert r.status == "pass" and r.run.raw["npu"]["pmu_cycles"] == 0 and r.run.npu_pmu_cycles is None
    assert all(j.estimated_cycles is None for j in r.npu.jobs)


def _error(r: Any) -> tuple[str, str]:
    assert r.status == "error", (r.status, r.tail)
    return r.run.raw.get("code"), r.run.raw["error"]


def test_fault_mac_mismatch(compiled) -> None:
    r = _run(compiled("conv_relu", "ethos-u55-128").bpte, "corstone-300", npu="ethos-u55-256")
    code, msg = _error(r)
    assert code == "npu_config" and "Ethos-U55-128" in msg and "ethos-u55-256" in msg
    assert r.npu.jobs == []  # refused before the NPU ever started


def test_fault_product_mismatch(compiled) -> None:
    r = _run(compiled("conv_relu", "ethos-u55-128").bpte, "an547-u85", npu="ethos-u85-256")
    code, msg = _error(r)
    assert code == "npu_config" and "Ethos-U85" in msg


@pytest.mark.parametrize("fault,code,words", [("hang", "npu_timeout", "does not complete|did not complete"),
                                               ("drop-irq", "npu_timeout", "interrupt"),
                                               ("bus-error", "npu_bus_error", "bus error")])
def test_fault_from_the_npu(compiled, fault: str, code: str, words: str) -> None:
    import re

    r = _run(compiled("conv_relu", "ethos-u55-128").bpte, "corstone-300", npu_fault=fault)
    got, msg = _error(r)
    assert got == code and re.search(words, msg), msg
    assert r.exit_code == 2 and r.elapsed_s < 60


def _patched_bpte(bpte: bytes, code: int | None, value: int = 0, truncate_io: bool = False) -> bytes:
    start = bpte.index(b"vela_bin_stream")
    end = bpte.index(b"vela_end_stream") + 32
    blob = bpte[start:end]
    if truncate_io:
        pos = blob.index(b"outputs\0")
        new = bytearray(blob)
        struct.pack_into("<i", new, pos + 32, 3)
        blob = bytes(new)
    if code is not None:
        blob = _patch_first(blob, code, value)
    return bpte[:start] + blob + bpte[end:]


def test_fault_stream_outside_regions(compiled) -> None:
    bpte = compiled("conv_relu", "ethos-u55-128").bpte.read_bytes()
    r = _run(_patched_bpte(bpte, 0x010, 0x7FFFFF00), "corstone-300")
    code, msg = _error(r)
    assert code == "npu_stream" and "OFM writes bytes" in msg
    assert r.npu.jobs == []


def test_fault_corrupt_delegate(compiled) -> None:
    bpte = compiled("conv_relu", "ethos-u55-128").bpte.read_bytes()
    r = _run(_patched_bpte(bpte, None, truncate_io=True), "corstone-300")
    code, msg = _error(r)
    assert code == "delegate_corrupt" and "outputs" in msg
    assert r.npu.jobs == []


def test_no_cosim_means_no_npu(compiled, tmp_path: Path) -> None:
    """Without the co-simulation QEMU's NPU window reads 0: the driver says so instead of hanging."""
    from emlkit.deploy.boards import load_board
    from emlkit.deploy.build import build_image
    from emlkit.deploy.sim_qemu import classify, prepare_run, qemu_command, run_command

    b = load_board("corstone-300")
    elf, wd, model_bin = prepare_run(compiled("conv_relu", "ethos-u55-128").bpte, b, tmp_path, "qemu",
                                     elf=build_image("corstone-300").elf)
    console, code, timed_out, _ = run_command(qemu_command(b, elf, model_bin), wd, 60)
    status, parsed = classify(console, code, timed_out)
    assert status == "error" and parsed.raw["code"] == "npu_config" and "no Ethos-U responds" in parsed.raw["error"]


def test_cortex_m_programs_leave_the_npu_alone(compiled) -> None:
    r = _run(compiled("conv_relu", "cortex-m55").bpte, "corstone-300")
    assert r.status == "pass" and r.npu is None and "npu" not in r.run.raw


# ---------------------------------------------------------------- the harness itself


def test_npu_spec_and_register_model() -> None:
    from emlkit.deploy.npu_cosim import CONFIG, ID, PROT, RESET, STATUS, NpuModel, NpuSpec

    s = NpuSpec.parse("ethos-u55-128")
    assert s.config_word() & 0xF == 7 and s.config_word() >> 28 == 0
    assert NpuSpec.parse("ethos-u85-256").config_word() >> 28 == 2
    for bad in ("ethos-u55", "ethos-u56-128", "ethos-u55-100"):
        with pytest.raises(ValueError):
            NpuSpec.parse(bad)
    m = NpuModel(s)
    assert m.read(ID) == s.id_word() and m.read(CONFIG) == s.config_word()
    m.reset(3)
    assert m.read(PROT) == 3 and m.read(STATUS) == 0
    assert m.read(RESET) == 0


def test_guest_memory_bus_error() -> None:
    from emlkit.deploy.npu_cosim import GuestMemory, NpuBusError

    mem = GuestMemory(gdb=None, reachable=[(0x1000, 0x2000, "sram")])  # type: ignore[arg-type]
    with pytest.raises(NpuBusError):
        mem.window(0x1F00, 0x2100)
    with pytest.raises(NpuBusError) as e:
        mem.store(0x3000, np.zeros(4, dtype=np.uint8))
    assert e.value.channel == 8  # OFM write channel


MODELS = Path(__file__).resolve().parent / "models"


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", ["residual_kws", "gated_mlp"])
def test_firmware_runs_independent_models(tmp_path: Path, model: str, target: str) -> None:
    """Models written outside the zoo, compiled and run through the firmware with the co-simulated NPU."""
    from emlkit.compile import compile_model, make_options

    res = compile_model(str(MODELS / f"{model}.py"), target, tmp_path, options=make_options())
    r = _run(res.bpte, BOARD[target])
    assert r.status == "pass", (r.status, r.skip_reason, r.tail)
    assert all(o.max_steps == 0 for o in r.run.outputs)


@pytest.mark.skipif(any(__import__("shutil").which(f) for f in ("FVP_Corstone_SSE-300_Ethos-U55", "FVP_Corstone_SSE-300_Ethos-U65")),
                    reason="an FVP is installed")
def test_sim_fvp_without_fvp_is_one_line_and_exit_5(emlkit_cli, tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    p = emlkit_cli(["run", "conv_relu", "--target", "ethos-u55-128", "--sim", "fvp", "-o", str(tmp_path)], root)
    assert p.returncode == 5, p.stderr[-1500:]
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "no FVP for corstone-300 with an ethos-u55" in errors[0] and "Traceback" not in p.stderr
