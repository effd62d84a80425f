"""Cortex-M0+/M3/M4/M7/M33: targets, their QEMU boards (micro:bit, MPS2 AN385/AN386/AN500/AN505 and
the Armv6-M stand-in on the AN385), start-up and platform code per architecture, and whole models.

The board cases use tests/board_fw (the self-test image of tests/test_boards.py) built for each board;
the model cases compile zoo models for each target and run the real runner under QEMU."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from emlkit.deploy import boards as B
from emlkit.deploy.build import BuildOptions, build_image
from emlkit.deploy.sim_qemu import run_qemu
from emlkit.targets import get_target
from toolchain import HAVE_ARM_GCC, needs_gcc, needs_qemu

REPO = Path(__file__).resolve().parents[1]
BOARD_FW = REPO / "tests" / "board_fw"

# target -> (default board, ISA ExecuTorch's Cortex-M backend gives it, float flags)
TARGETS = {
    "cortex-m0plus": ("microbit", "SCALAR", ["-mfloat-abi=soft"]),
    "cortex-m3": ("mps2-an385", "SCALAR", ["-mfloat-abi=soft"]),
    "cortex-m4": ("mps2-an386", "DSP", ["-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"]),
    "cortex-m7": ("mps2-an500", "DSP", ["-mfpu=fpv5-d16", "-mfloat-abi=hard"]),
    "cortex-m33": ("mps2-an505", "DSP", ["-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"]),
}
# board -> architecture class of its image: how a stack overflow is caught ("deep")
BOARDS = {"microbit": "v6m", "an385-m0plus": "v6m", "mps2-an385": "v7m", "mps2-an386": "v7m",
          "mps2-an500": "v7m", "mps2-an505": "v8m"}
# (name, base, size) of every memory, as QEMU 7.2's `info mtree` shows them (Secure aliases on AN505)
MAPS = {
    "microbit": [("flash", 0x0, 0x37000), ("flash_model", 0x37000, 0x9000), ("ram", 0x20000000, 0x4000)],
    "mps2-an385": [("ssram1", 0x0, 4 << 20), ("blockram", 0x01000000, 16 << 10), ("ssram23", 0x20000000, 4 << 20),
                   ("psram", 0x21000000, 16 << 20)],
    "mps2-an500": [("ssram1", 0x0, 4 << 20), ("ssram23", 0x20000000, 4 << 20), ("psram", 0x60000000, 16 << 20)],
    "mps2-an505": [("ssram1", 0x10000000, 4 << 20), ("sram", 0x30000000, 32 << 10), ("ssram2", 0x38000000, 2 << 20),
                   ("ssram3", 0x38200000, 2 << 20), ("psram", 0x80000000, 16 << 20)],
}
MAPS["mps2-an386"] = MAPS["an385-m0plus"] = MAPS["mps2-an385"]


# ---------------------------------------------------------------- targets and board files


@pytest.mark.parametrize("name", list(TARGETS))
def test_target_board_and_float_abi(name: str) -> None:
    board_name, isa, fp = TARGETS[name]
    t = get_target(name)
    assert t.flow == "cortex_m" and t.cpu == name and t.default_board == board_name and t.isa == isa
    b = B.load_board(board_name)
    assert b.cpu == name and b.cflags[0] == f"-mcpu={name}" and all(f in b.cflags for f in fp)
    assert b.npu is None and not b.has_mve_variant


def test_m0plus_runs_on_the_microbit_and_its_stand_in() -> None:
    t = get_target("cortex-m0plus")
    assert t.boards == ("microbit", "an385-m0plus")
    stand_in, m3 = B.load_board("an385-m0plus"), B.load_board("mps2-an385")
    assert stand_in.cflags == B.load_board("microbit").cflags  # the same Armv6-M image
    assert stand_in.memories == m3.memories and stand_in.qemu == m3.qemu and "stand-in" in stand_in.label


@pytest.mark.parametrize("board", list(BOARDS))
def test_memory_map(board: str) -> None:
    b = B.load_board(board)
    assert [(m.name, m.base, m.size) for m in b.memories] == MAPS[board]
    assert b.qemu is not None and "shift=0,sleep=off" in b.qemu.args


def _flat_mtree(machine: str) -> list[tuple[int, int, str, str]]:
    """(start, end, kind, name) of the CPU's address space in QEMU's `info mtree -f`."""
    p = subprocess.run(["qemu-system-arm", "-M", machine, "-nographic", "-S", "-monitor", "stdio", "-serial", "none"],
                       input="info mtree -f\nquit\n", capture_output=True, text=True, timeout=30)
    block = next(b for b in p.stdout.split("FlatView #") if '"cpu-memory-0"' in b)
    return [(int(m[1], 16), int(m[2], 16) + 1, m[3], m[4])
            for m in re.finditer(r"^\s+([0-9a-f]+)-([0-9a-f]+) \(prio -?\d+, ([\w/]+)\): (\S+)", block, re.M)]


@needs_qemu
@pytest.mark.parametrize("board", ["microbit", "mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505"])
def test_memories_are_the_machines_own(board: str) -> None:
    """Every memory of board.toml lies inside one RAM or ROM block of the QEMU machine (a mirror or
    a neighbouring block would be a separate block), so sizes are not guessed."""
    b = B.load_board(board)
    blocks = [r for r in _flat_mtree(b.qemu.machine) if r[2] in ("ram", "romd", "rom") or r[3] == "tz-mpc-upstream"]
    assert blocks, f"no memory blocks parsed for {b.qemu.machine}"
    for m in b.memories:
        inside = [r for r in blocks if r[0] <= m.base and m.end <= r[1]]
        assert inside, f"{board}: {m.name} [{m.base:#x}, {m.end:#x}) is not one block of {b.qemu.machine}"


# ---------------------------------------------------------------- the self-test image per board


@pytest.fixture(scope="module")
def selftest() -> dict[str, Path]:
    if not HAVE_ARM_GCC:
        pytest.skip("arm-none-eabi-gcc not installed")
    return {b: build_image(b, BuildOptions(source_dir=BOARD_FW)).elf for b in BOARDS}


@needs_qemu
@pytest.mark.parametrize("board", list(BOARDS))
def test_hello_counter_and_regions(selftest: dict[str, Path], board: str) -> None:
    b = B.load_board(board)
    r = run_qemu(b"hello", board, elf=selftest[board], timeout=30)
    assert r.status == "pass" and r.exit_code == 0, r.console
    res = r.result
    assert res["unit"] == "instructions" and res["mve"] == -1 and res["float"] == 1.25
    # a 100000-iteration loop of about 6 instructions: the FPGAIO counter (MPS2: 25 MHz on AN385/AN386/
    # AN500, 20 MHz on AN505) or SysTick (micro:bit, 16 MHz) must read it as instructions, not time
    assert 600_000 <= res["loop_count"] <= 601_000, res
    again = run_qemu(b"hello", board, elf=selftest[board], timeout=30)
    assert again.result["loop_count"] == res["loop_count"]  # -icount shift=0: repeatable
    regions = {x["name"]: x for x in res["regions"]}
    assert list(regions) == list(b.arena_regions)
    model = regions.get(b.model.region)
    if model is not None:  # arenas in the model's memory start after it, 64-byte aligned
        assert model["base"] == b.model.address + 64
    if b.link.data in regions:  # the data memory offers what the image leaves between heap and stack
        ram = regions[b.link.data]
        assert ram["base"] % 64 == 0 and ram["base"] + ram["size"] <= b.memory(b.link.data).end - b.link.stack_size
        assert ram["size"] > 4096


_DEEP = {
    "v6m": "SP is outside the stack",                            # micro:bit: the Cortex-M0 has no MPU
    "v7m": "stack overflow: the stack reached its MPU guard",   # read-only MPU region under the stack
    "v8m": "STKOF: stack overflow (MSPLIM)",
}


@needs_qemu
@pytest.mark.parametrize("board", list(BOARDS))
def test_faults_are_reported(selftest: dict[str, Path], board: str) -> None:
    arch = BOARDS[board]
    elf = selftest[board]
    expect = {
        "fault": ["FAULT: HardFault"] if arch == "v6m" else ["FAULT: BusFault", "PRECISERR", "BFAR=0xe0100000"],
        "udf": ["FAULT: HardFault"] if arch == "v6m" else ["FAULT: UsageFault", "UNDEFINSTR"],
        "div0": ["DIVBYZERO: integer division by zero"],
        # the stand-in's Cortex-M3 has an MPU: the Armv6-M image sets the guard there
        "deep": [_DEEP["v7m"] if board == "an385-m0plus" else _DEEP[arch]],
    }
    for word, lines in expect.items():
        r = run_qemu(word.encode(), board, elf=elf, timeout=30)
        assert r.status == "crash" and r.exit_code == 3, (word, r.console)
        for ln in lines:
            assert ln in r.console, (word, r.console)
    r = run_qemu(b"exit5", board, elf=elf, timeout=30)
    assert r.exit_code == 5 and r.status == "crash"


@needs_qemu
@pytest.mark.parametrize("board", list(BOARDS))
def test_unaligned_access_faults_only_on_armv6m(selftest: dict[str, Path], board: str) -> None:
    r = run_qemu(b"unal", board, elf=selftest[board], timeout=30)
    if BOARDS[board] == "v6m":  # the Cortex-M0, and the M3 running the M0+ image (CCR.UNALIGN_TRP)
        assert r.status == "crash" and "FAULT: HardFault" in r.console, r.console
    else:
        assert r.status == "pass", r.console


@needs_qemu
@pytest.mark.parametrize("board", ["microbit", "mps2-an500", "mps2-an505"])
def test_timeout_and_saved_outputs(selftest: dict[str, Path], board: str, tmp_path: Path) -> None:
    r = run_qemu(b"hang", board, elf=selftest[board], timeout=1.5)
    assert r.status == "timeout" and "hanging on purpose" in r.tail
    r = run_qemu(b"save", board, elf=selftest[board], timeout=30, workdir=tmp_path, save_outputs=True)
    assert r.status == "pass" and [p.name for p in r.outputs] == ["output_0.bin", "output_1.bin"]
    assert r.outputs[0].read_bytes() == bytes([1, 2, 3, 4, 5])


# ---------------------------------------------------------------- the runner image per core


@pytest.fixture(scope="module")
def runners(compiled) -> dict[str, Path]:
    """Each board's full runner image; where that overflows the board's flash (the micro:bit's every-operator image),
    the image for one program (the mlp), as `emlkit run` links it."""
    from emlkit.deploy.program_image import OpSet, program_image

    if not HAVE_ARM_GCC:
        pytest.skip("arm-none-eabi-gcc not installed")
    out = {}
    for b in BOARDS:
        res = build_image(b, objects_only=True)
        if not res.elf.exists():
            res = program_image(b, None, OpSet.of_file(Path(compiled("mlp", "cortex-m0plus").pte)))
        out[b] = res.elf
    return out


@needs_gcc
def test_armv6m_image_has_only_armv6m_instructions(runners: dict[str, Path]) -> None:
    """The Cortex-M0+ runner (kernels, runtime, newlib) uses the 32-bit Thumb encodings Armv6-M has
    (BL, MRS, MSR, DMB, DSB, ISB) and no others: no hardware divide, no IT blocks, no Thumb-2."""
    allowed = {"bl", "mrs", "msr", "dmb", "dsb", "isb", "udf.w"}
    for board in ("microbit", "an385-m0plus"):
        dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(runners[board])], capture_output=True, text=True,
                             check=True).stdout
        wide, narrow = set(), set()
        for line in dis.splitlines():
            m = re.match(r"\s+[0-9a-f]+:\t([0-9a-f]{4})(?: ([0-9a-f]{4}))?\s+\t(\S+)", line)
            if m:
                (wide if m[2] else narrow).add(m[3])
        assert wide and wide <= allowed, f"{board}: Armv7-M instructions {sorted(wide - allowed)}"
        assert narrow and not {n for n in narrow if re.fullmatch(r"it[te]{0,3}|cbn?z|sdiv|udiv", n)}


@needs_gcc
def test_float_abi_of_the_images(runners: dict[str, Path]) -> None:
    want = {
        "microbit": ("v6S-M", None), "mps2-an385": ("v7", None), "mps2-an386": ("v7E-M", "VFPv4-D16"),
        "mps2-an500": ("v7E-M", "FPv5/FP-D16 for ARMv8"), "mps2-an505": ("v8-M.mainline", "FPv5/FP-D16 for ARMv8"),
    }
    for board, (arch, fp) in want.items():
        attrs = subprocess.run(["arm-none-eabi-readelf", "-A", str(runners[board])], capture_output=True, text=True,
                               check=True).stdout
        assert f"Tag_CPU_arch: {arch}\n" in attrs, (board, attrs)
        if fp is None:  # soft float: no FP instructions, no FP registers for arguments
            assert "Tag_FP_arch" not in attrs and "VFP registers" not in attrs, (board, attrs)
        else:
            assert f"Tag_FP_arch: {fp}" in attrs and "Tag_ABI_VFP_args: VFP registers" in attrs, (board, attrs)
    sp_only = subprocess.run(["arm-none-eabi-readelf", "-A", str(runners["mps2-an505"])], capture_output=True,
                             text=True, check=True).stdout
    assert "Tag_ABI_HardFP_use: SP only" in sp_only  # fpv5-sp-d16 on the M33, double precision on the M7


# ---------------------------------------------------------------- whole models


def _run(compiled, model: str, target: str, board: str):
    from emlkit.run import execute

    return execute(compiled(model, target), board, "qemu", 600, "mve", None)


@needs_qemu
@pytest.mark.parametrize("board", list(BOARDS))
def test_mlp_passes_on_every_core(compiled, board: str) -> None:
    target = next(t for t, v in TARGETS.items() if v[0] == board) if board != "an385-m0plus" else "cortex-m0plus"
    o = _run(compiled, "mlp", target, board)
    assert o.status == "PASS", o.reason
    r = o.result
    assert r.unit == "instructions" and r.total > 0 and all(x.max_steps == 0 for x in r.outputs)
    assert o.fit is not None and o.fit.fits and o.fit.runtime_bytes == r.runtime_bytes  # the fit check's prediction
    if board == "an385-m0plus":
        assert "stand-in" in o.label


@pytest.mark.slow
@needs_qemu
@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("model", ["conv_relu", "dw_separable", "pool", "lut_activations", "softmax", "attention",
                                   "scalar_arith", "global_avgpool"])
def test_zoo_models_pass_per_core(compiled, model: str, target: str) -> None:
    """Bit-exact with the host on every core (the M0+ on its stand-in: these do not fit 16 KiB)."""
    board = "an385-m0plus" if target == "cortex-m0plus" else TARGETS[target][0]
    o = _run(compiled, model, target, board)
    assert o.status == "PASS", o.reason
    assert all(x.max_steps in (0, None) and (x.max_abs or 0) == 0 for x in o.result.outputs)
