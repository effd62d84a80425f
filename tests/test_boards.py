"""Boards and simulators: board.toml parsing/validation, image builds for
corstone-300/320, QEMU runs (JSON line, timeout, faults, exit status, output
files, oversized models) and the FVP command lines.

The QEMU cases use tests/board_fw, a self-test image built with the boards'
own board.cmake whose "model" is a command word (hello, hang, fault, ...), so
they do not depend on the runtime; the real runner is built and run too."""

from __future__ import annotations

import dataclasses
import json
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from emlkit.deploy import boards as B
from emlkit.deploy.build import BuildError, BuildOptions, build_image, emdl_image
from emlkit.deploy.sim_fvp import fvp_command, run_fvp
from emlkit.deploy.sim_qemu import SimError, qemu_command, run_command, run_qemu
from toolchain import HAVE_ARM_GCC, needs_gcc, needs_qemu

REPO = Path(__file__).resolve().parents[1]
BOARD_FW = REPO / "tests" / "board_fw"


# ---------------------------------------------------------------- board.toml


def test_boards_listed() -> None:
    names = B.list_boards()
    assert "corstone-300" in names and "corstone-320" in names
    assert "host" not in names and "common" not in names  # no board.toml there


def test_corstone300_memory_map() -> None:
    b = B.load_board("corstone-300")
    m = {x.name: (x.base, x.size) for x in b.memories}
    # SSE-300 Secure aliases (AN547 / Corstone-300 FVP): boards/README.md
    assert m["itcm"] == (0x10000000, 512 * 1024)
    assert m["dtcm"] == (0x30000000, 512 * 1024)
    assert m["isram"] == (0x31000000, 4 * 1024 * 1024)
    assert m["ddr"] == (0x70000000, 256 * 1024 * 1024)
    assert b.cflags[:2] == ("-mcpu=cortex-m55", "-mfloat-abi=hard")
    assert b.link.code == "itcm" and b.link.data == "dtcm" and b.link.stack == "dtcm"
    assert b.model.address == 0x70000000 and b.arena_regions == ("isram", "ddr")
    assert b.qemu is not None and b.qemu.machine == "mps3-an547"
    assert "-icount" in b.qemu.args and "shift=0,sleep=off" in b.qemu.args  # halts must not move the clock


def test_corstone320_memory_map() -> None:
    b = B.load_board("corstone-320")
    assert b.cflags[0] == "-march=armv8.1-m.main+mve.fp+fp.dp"
    assert b.memory("brom").base == 0x11000000 and b.link.vectors == "brom"
    assert b.memory("sram").base == 0x12000000 and b.link.code == "sram"
    assert b.qemu is None  # no Cortex-M85 machine in QEMU
    assert b.fvp is not None and list(b.fvp.variants) == ["FVP_Corstone_SSE-320"]


def _toml_with(tmp_path: Path, edit: callable) -> Path:
    """A copy of corstone-300's board folder with board.toml edited."""
    d = tmp_path / "corstone-300"
    d.mkdir()
    text = (REPO / "boards" / "corstone-300" / "board.toml").read_text()
    (d / "board.toml").write_text(edit(text))
    return d


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace('name = "isram"', 'name = "isram"\nbogus = 1'), "unknown key(s) bogus"),
        (lambda t: t.replace("cpu_hz = 32_000_000\n", ""), "missing key 'cpu_hz'"),
        (lambda t: t.replace("base = 0x31000000", "base = 0x3007F000"), "overlap"),
        (lambda t: t.replace('regions = ["isram", "ddr"]', 'regions = ["itcm", "ddr"]'), "also holds code/stack"),
        (lambda t: t.replace('regions = ["isram", "ddr"]', 'regions = ["flash"]'), "not a [[memory]] name"),
        (lambda t: t.replace("max_size = 0x08000000", "max_size = 0x20000000"), "not inside memory 'ddr'"),
        (lambda t: t.replace("address = 0x70000000", "address = 0x70000004"), "16-byte aligned"),
        (lambda t: t.replace('name = "corstone-300"', 'name = "other"'), "differs from the folder name"),
        (lambda t: t.replace("stack_size = 0x10000", "stack_size = 0x100000"), "exceeds memory 'dtcm'"),
        (lambda t: t.replace("cpu_hz = 32_000_000", 'cpu_hz = "fast"'), "'cpu_hz' must be int"),
        (lambda t: t.replace('code = "itcm"', 'code = "dtcm"'), "needs access 'rx'"),
        (lambda t: t + "\n[[memory\n", "not valid TOML"),
    ],
)
def test_board_toml_errors(tmp_path: Path, edit: callable, message: str) -> None:
    d = _toml_with(tmp_path, edit)
    with pytest.raises(B.BoardError) as e:
        B.load_board(d)
    assert message in str(e.value)
    assert "\n" not in str(e.value)  # one line


def test_unknown_board() -> None:
    with pytest.raises(B.BoardError, match="unknown board 'nope'.*known boards: .*corstone-300"):
        B.load_board("nope")


def test_generated_files_follow_toml(tmp_path: Path) -> None:
    b = B.load_board("corstone-300")
    ld, h, _ = B.generate(b, tmp_path)
    text = ld.read_text()
    for m in b.memories:
        assert f"{m.name.upper()} ({m.access}) : ORIGIN = {m.base:#010x}, LENGTH = {m.size:#010x}" in text
    assert 'REGION_ALIAS("REGION_CODE", ITCM);' in text
    assert 'REGION_ALIAS("REGION_CODE", SRAM);' in B.memory_ld(b, code_in_fallback=True)
    assert '{"isram", 0x31000000u, 0x400000u, 0}, {"ddr", 0x70000000u, 0x10000000u, 1}' in h.read_text()
    # the data memory may be an arena region too: the runner gets what the image leaves free there
    shared = dataclasses.replace(b, arena_regions=("dtcm", "isram"))
    assert '{"dtcm", 0x30000000u, 0x80000u, 2}' in B.config_h(shared)
    stamp = ld.stat().st_mtime_ns
    B.generate(b, tmp_path)  # unchanged -> untouched (no needless rebuilds)
    assert ld.stat().st_mtime_ns == stamp


def test_boards_cli_check() -> None:
    p = subprocess.run([sys.executable, str(REPO / "emlkit/deploy/boards.py"), "check"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "corstone-300: ok" in p.stderr and "corstone-320: ok" in p.stderr


def test_emdl_image() -> None:
    img = emdl_image(b"BP08xyz", save_outputs=True)
    assert img[:4] == b"EMDL" and struct.unpack("<III", img[4:16]) == (7, 1, 0) and img[16:] == b"BP08xyz"
    assert struct.unpack("<I", emdl_image(b"x")[8:12]) == (0,)
    with pytest.raises(ValueError, match="empty .bpte"):
        emdl_image(b"")


# ---------------------------------------------------------------- FVP command lines


def test_fvp_command_corstone300(tmp_path: Path) -> None:
    b = B.load_board("corstone-300")
    cmd = fvp_command(b, Path("/img/runner.elf"), tmp_path / "model.bin", tmp_path, timeout=30)
    assert cmd[0] == "FVP_Corstone_SSE-300_Ethos-U55"
    params = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-C"]
    assert "cpu0.semihosting-enable=1" in params
    assert "mps3_board.visualisation.disable-visualisation=1" in params
    assert "mps3_board.telnetterminal0.start_telnet=0" in params
    assert "mps3_board.uart0.out_file=-" in params
    assert f"cpu0.semihosting-cwd={tmp_path}" in params
    assert "ethosu.num_macs=128" in params
    assert cmd[cmd.index("-a") + 1] == "/img/runner.elf"
    assert cmd[cmd.index("--data") + 1] == f"cpu0={tmp_path / 'model.bin'}@0x70000000"
    assert cmd[cmd.index("--timelimit") + 1] == "30"
    assert "--cyclelimit" not in cmd
    u65 = fvp_command(b, Path("e.elf"), Path("m.bin"), tmp_path, 5, fvp="FVP_Corstone_SSE-300_Ethos-U65", cycle_limit=10**9)
    assert u65[0] == "FVP_Corstone_SSE-300_Ethos-U65" and "ethosu.num_macs=256" in u65
    assert u65[u65.index("--cyclelimit") + 1] == "1000000000"


def test_fvp_command_corstone320(tmp_path: Path) -> None:
    b = B.load_board("corstone-320")
    cmd = fvp_command(b, Path("r.elf"), Path("/w/model.bin"), Path("/w"), timeout=12.7)
    assert cmd[0] == "FVP_Corstone_SSE-320"
    assert "mps4_board.subsystem.cpu0.semihosting-enable=1" in cmd
    assert "mps4_board.subsystem.cpu0.semihosting-cwd=/w" in cmd
    assert "mps4_board.uart0.out_file=-" in cmd and "mps4_board.visualisation.disable-visualisation=1" in cmd
    assert cmd[cmd.index("--data") + 1] == "mps4_board.subsystem.cpu0=/w/model.bin@0x70000000"
    assert cmd[cmd.index("--timelimit") + 1] == "12"
    with pytest.raises(SimError, match="not listed for corstone-320"):
        fvp_command(b, Path("r.elf"), Path("m"), Path("."), fvp="FVP_Corstone_SSE-300_Ethos-U55")


def test_fvp_command_sets_the_npu_mac_count(tmp_path: Path) -> None:
    """The MAC count comes from the program's NPU (Arm's FVP parameter ethosu.num_macs, or the SSE-320
    subsystem's), replacing the variant's default, and appears exactly once."""
    b = B.load_board("corstone-300")
    cmd = fvp_command(b, Path("e.elf"), Path("m.bin"), tmp_path, 5, fvp="FVP_Corstone_SSE-300_Ethos-U55", npu="ethos-u55-256")
    macs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-C" and cmd[i + 1].startswith("ethosu.num_macs=")]
    assert macs == ["ethosu.num_macs=256"]
    c320 = fvp_command(B.load_board("corstone-320"), Path("e.elf"), Path("m.bin"), tmp_path, 5, npu="ethos-u85-512")
    assert [a for a in c320 if "num_macs" in a] == ["mps4_board.subsystem.ethosu.num_macs=512"]
    with pytest.raises(SimError, match="names no MAC count"):
        fvp_command(b, Path("e.elf"), Path("m.bin"), tmp_path, 5, npu="ethos-u55")


def test_board_npu_sections() -> None:
    c300, c320, standin = (B.load_board(n) for n in ("corstone-300", "corstone-320", "an547-u85"))
    assert (c300.npu.base, c300.npu.irq) == (0x48102000, 56) and c300.npu.products == ("ethos-u55", "ethos-u65")
    assert (c320.npu.base, c320.npu.irq) == (0x50004000, 16) and c320.npu.products == ("ethos-u85",)
    assert standin.stand_in_for == "corstone-320" and standin.npu.products == ("ethos-u85",) and standin.fvp is None
    # the stand-in differs from corstone-300 only in its name and its NPU
    assert standin.memories == c300.memories and standin.cflags == c300.cflags and standin.qemu == c300.qemu
    header = B.config_h(c300)
    assert "#define BOARD_NPU_BASE 0x48102000u" in header and "#define BOARD_NPU_IRQ 56" in header


def test_board_npu_section_errors(tmp_path: Path) -> None:
    text = (B.BOARDS_DIR / "corstone-300" / "board.toml").read_text()
    d = tmp_path / "corstone-300"
    d.mkdir()
    for old, new, match in [("irq = 56", "irq = 900", "external interrupt number"),
                            ('dma_regions = ["sram", "isram", "ddr"]', 'dma_regions = ["sram"]', "not in dma_regions"),
                            ('products = ["ethos-u55", "ethos-u65"]', 'products = ["ethos-u99"]', "unknown NPU product")]:
        (d / "board.toml").write_text(text.replace(old, new))
        with pytest.raises(B.BoardError, match=match):
            B.load_board(d)


@pytest.mark.skipif(shutil.which("FVP_Corstone_SSE-320") is not None, reason="FVP installed")
def test_fvp_missing_is_clear() -> None:
    with pytest.raises(SimError, match="FVP_Corstone_SSE-320 not found on PATH"):
        run_fvp(b"BP08", "corstone-320", elf=Path("x.elf"))


def test_qemu_refuses_board_without_qemu() -> None:
    with pytest.raises(SimError, match="no \\[qemu\\] section"):
        qemu_command(B.load_board("corstone-320"), Path("e.elf"), Path("m.bin"))


# ---------------------------------------------------------------- builds


@pytest.fixture(scope="module")
def fw300() -> Path:
    if not HAVE_ARM_GCC:
        pytest.skip("arm-none-eabi-gcc not installed")
    return build_image("corstone-300", BuildOptions(source_dir=BOARD_FW)).elf


@needs_gcc
def test_self_test_images_build_and_cache() -> None:
    for board in ("corstone-300", "corstone-320"):
        r = build_image(board, BuildOptions(source_dir=BOARD_FW))
        assert r.elf.is_file() and r.sizes["text"] > 1000
        again = build_image(board, BuildOptions(source_dir=BOARD_FW))
        assert not again.rebuilt  # cached: nothing changed
    # vectors where each board's core fetches the reset vector
    for board, vec in (("corstone-300", 0x10000000), ("corstone-320", 0x11000000)):
        elf = build_image(board, BuildOptions(source_dir=BOARD_FW)).elf
        hdr = subprocess.run(["arm-none-eabi-readelf", "-S", str(elf)], capture_output=True, text=True).stdout
        line = next(ln for ln in hdr.splitlines() if ".vectors" in ln)
        assert f"{vec:08x}" in line


@needs_gcc
# corstone-320's runner (the U85 board; FVP only, QEMU runs its programs on the an547-u85 stand-in) is a slow case.
@pytest.mark.parametrize("board", ["corstone-300", pytest.param("corstone-320", marks=pytest.mark.slow)])
def test_runner_image_builds(board: str) -> None:
    r = build_image(board)
    assert r.elf.name == "runner.elf" and r.build_dir.name == f"{board}-Release"
    assert r.sizes["text"] > 10_000


@needs_gcc
def test_embed_model_too_large_fails_cleanly(tmp_path: Path) -> None:
    big = tmp_path / "big.bpte"
    with big.open("wb") as f:
        f.truncate(B.load_board("corstone-320").max_model_bytes + 1)  # sparse file
    with pytest.raises(BuildError, match="model slot holds"):
        build_image("corstone-320", BuildOptions(source_dir=BOARD_FW, embed_model=big))


# ---------------------------------------------------------------- QEMU runs


def _cmd(word: str) -> bytes:
    return word.encode()


@needs_qemu
def test_qemu_hello_json_line(fw300: Path) -> None:
    r = run_qemu(_cmd("hello"), "corstone-300", elf=fw300, timeout=20)
    assert r.status == "pass", r.console
    assert r.exit_code == 0
    res = r.result
    assert res["unit"] == "instructions" and res["mve"] == 1 and res["float"] == 1.25
    # 100000 iterations of a 6-instruction loop + two counter reads; the
    # FPGAIO COUNTER (20 MHz under QEMU) has a resolution of 50 instructions.
    assert 600_000 <= res["loop_count"] <= 600_400, res
    assert 200 < res["stack_bytes"] < 0x10000
    regions = {x["name"]: x for x in res["regions"]}
    assert regions["isram"]["base"] == 0x31000000 and regions["isram"]["size"] == 4 << 20
    # DDR arena starts after header + model, 64-aligned
    assert regions["ddr"]["base"] == 0x70000040 and regions["ddr"]["base"] + regions["ddr"]["size"] == 0x80000000
    again = run_qemu(_cmd("hello"), "corstone-300", elf=fw300, timeout=20)
    assert again.result["loop_count"] == res["loop_count"]  # -icount: deterministic


@pytest.mark.slow
@needs_qemu
def test_qemu_counter_long_run(fw300: Path) -> None:
    # 6e8 instructions: the counter (FPGAIO COUNTER, no timer interrupt) stays
    # exact over a long run.
    r = run_qemu(_cmd("long"), "corstone-300", elf=fw300, timeout=60)
    assert r.status == "pass", r.console
    assert 600_000_000 <= r.result["loop_count"] <= 600_001_000, r.result


@needs_qemu
def test_qemu_timeout(fw300: Path) -> None:
    r = run_qemu(_cmd("hang"), "corstone-300", elf=fw300, timeout=1.5)
    assert r.status == "timeout" and r.exit_code is None
    assert "hanging on purpose" in r.tail
    assert r.elapsed_s < 10


@needs_qemu
@pytest.mark.parametrize(
    "word, expect",
    [
        ("fault", ["FAULT: BusFault", "PRECISERR", "BFAR=0xe0100000"]),
        ("udf", ["FAULT: UsageFault", "UNDEFINSTR"]),
        ("deep", ["FAULT: UsageFault", "STKOF: stack overflow"]),
    ],
)
def test_qemu_fault_reported(fw300: Path, word: str, expect: list[str]) -> None:
    r = run_qemu(_cmd(word), "corstone-300", elf=fw300, timeout=20)
    assert r.status == "crash" and r.exit_code == 3, r.console
    for e in expect:
        assert e in r.console
    assert "PC=0x1000" in r.console and "LR=0x" in r.console and "CFSR=0x" in r.console


@needs_qemu
def test_qemu_exit_status_reaches_host(fw300: Path) -> None:
    r = run_qemu(_cmd("exit5"), "corstone-300", elf=fw300, timeout=20)
    assert r.exit_code == 5 and r.status == "crash"  # no JSON line printed


@needs_qemu
def test_qemu_save_outputs(fw300: Path, tmp_path: Path) -> None:
    r = run_qemu(_cmd("save"), "corstone-300", elf=fw300, timeout=20, workdir=tmp_path, save_outputs=True)
    assert r.status == "pass"
    assert [p.name for p in r.outputs] == ["output_0.bin", "output_1.bin"]
    assert r.outputs[0].read_bytes() == bytes([1, 2, 3, 4, 5])
    assert struct.unpack("<2f", r.outputs[1].read_bytes()) == (1.5, -2.0)
    r = run_qemu(_cmd("save"), "corstone-300", elf=fw300, timeout=20, workdir=tmp_path, save_outputs=False)
    assert r.status == "pass" and r.outputs == []  # flag off: nothing written, stale files removed


@needs_qemu
def test_model_larger_than_board_fails_cleanly(fw300: Path, tmp_path: Path) -> None:
    b = B.load_board("corstone-300")
    small = dataclasses.replace(b, model=dataclasses.replace(b.model, max_size=64))
    with pytest.raises(SimError, match=r"model is 49 bytes .* slot holds 48 bytes at 0x70000000"):
        run_qemu(b"x" * 49, small, elf=fw300)
    # the firmware's own check: a header claiming more than the slot holds
    hdr = b"EMDL" + struct.pack("<III", b.model.max_size, 0, 0)
    (tmp_path / "model.bin").write_bytes(hdr + b"hello")
    console, code, timed_out, _ = run_command(qemu_command(b, fw300, tmp_path / "model.bin"), tmp_path, 20)
    assert not timed_out and code == 2
    assert "model slot holds 134217712" in console and '"status": "error"' in console


@needs_qemu
def test_qemu_uart_console_and_embedded_model(tmp_path: Path) -> None:
    b = B.load_board("corstone-300")
    uart = build_image("corstone-300", BuildOptions(source_dir=BOARD_FW, console="uart")).elf
    r = run_qemu(_cmd("hello"), b, elf=uart, timeout=20)
    assert r.status == "pass" and r.result["unit"] == "instructions"
    model = tmp_path / "embedded.bpte"
    model.write_bytes(b"exit7")
    emb = build_image("corstone-300", BuildOptions(source_dir=BOARD_FW, embed_model=model)).elf
    qemu = [shutil.which("qemu-system-arm"), "-M", "mps3-an547", *b.qemu.args, "-kernel", str(emb)]  # no loader
    _, code, _, _ = run_command(qemu, tmp_path, 20)
    assert code == 7


@needs_qemu
def test_qemu_nomve_variant(tmp_path: Path) -> None:
    elf = build_image("corstone-300", BuildOptions(source_dir=BOARD_FW, mve=False)).elf
    r = run_qemu(_cmd("hello"), "corstone-300", elf=elf, timeout=20)
    assert r.status == "pass" and r.result["mve"] == -1  # compiled without MVE


_SAMPLE_MODEL = textwrap.dedent(
    """
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            return torch.relu(self.fc(x))

    ModelUnderTest = M().eval()
    ModelInputs = (torch.randn(1, 8),)
    """
)


@pytest.mark.slow
@needs_qemu
def test_qemu_runs_real_runner_on_sample_model(tmp_path: Path) -> None:
    """The real runner image prints a valid JSON result line for a compiled model."""
    torch = pytest.importorskip("torch")
    del torch
    (tmp_path / "model.py").write_text(_SAMPLE_MODEL)
    p = subprocess.run(
        [sys.executable, "-m", "executorch.backends.arm.scripts.aot_arm_compiler", "--model_name=model.py",
         "--quantize", "--target=cortex-m55", "--bundleio", "-o", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    bptes = list((tmp_path / "out").glob("*.bpte"))
    assert p.returncode == 0 and bptes, p.stderr[-2000:]
    r = run_qemu(bptes[0], "corstone-300", timeout=60)
    assert r.result is not None, f"no valid JSON line:\n{r.tail}"
    assert r.status == r.result["status"] and "FAULT:" not in r.console
    json.dumps(r.result)
