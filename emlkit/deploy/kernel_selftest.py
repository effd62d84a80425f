"""Build the bare-metal MVE self-test / bench image (sources in tests/mve_selftest)
for QEMU mps3-an547, or the DSP-extension one (tests/dsp_selftest, same
start-up and link script) for the Cortex-M4 of mps2-an386, and run it. Shared
by tests/test_kernels.py and scripts/bench_kernels.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from emlkit.deploy.boards import REPO_ROOT

HERE = REPO_ROOT / "tests" / "mve_selftest"
DSP_HERE = REPO_ROOT / "tests" / "dsp_selftest"
KERNELS = REPO_ROOT / "firmware" / "kernels"
GCC = shutil.which("arm-none-eabi-gcc")
QEMU = shutil.which("qemu-system-arm")


def _compile(out: Path, cpu_flags: list[str], main_c: Path, bench: bool) -> Path:
    """main_c + startup.c + every kernel into one ELF (the self-test link script); returns its path."""
    if GCC is None:
        raise RuntimeError("arm-none-eabi-gcc not found: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi")
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [GCC, *cpu_flags, "-mfloat-abi=hard", "-mthumb", "-O2", "-std=gnu11", "-Wall", "-Wextra",
           "-Wno-unused-parameter", "-Werror", "-ffunction-sections", "-fdata-sections",
           "-I", str(KERNELS), *(["-DBENCH"] if bench else []),
           str(main_c), str(HERE / "startup.c"), *sorted(map(str, KERNELS.glob("*.c"))),
           "-T", str(HERE / "link.ld"), "--specs=nano.specs", "--specs=rdimon.specs", "-nostartfiles",
           "-Wl,--gc-sections", "-lm", "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"building {out.name} failed:\n{r.stderr}")
    return out


def build(out: Path, bench: bool = False, mve: bool = True) -> Path:
    """The MVE self-test / bench (tests/mve_selftest/main.c) for the Cortex-M55, with or without MVE."""
    return _compile(out, ["-mcpu=cortex-m55" if mve else "-mcpu=cortex-m55+nomve"], HERE / "main.c", bench)


def build_dsp(out: Path, bench: bool = False, cpu: str = "cortex-m4") -> Path:
    """The DSP-extension self-test (tests/dsp_selftest/main.c) for a core with
    DSP and no MVE: *_dsp kernels against *_ref. The link script's 512 KiB at
    0x0 and 0x20000000 lie inside the AN386's code and data SSRAMs."""
    fpu = {"cortex-m4": ["-mfpu=fpv4-sp-d16"], "cortex-m7": ["-mfpu=fpv5-d16"]}.get(cpu, [])
    return _compile(out, [f"-mcpu={cpu}", *fpu], DSP_HERE / "main.c", bench)


def run(elf: Path, icount: bool = False, timeout: float = 300.0,
        machine: str = "mps3-an547") -> subprocess.CompletedProcess:
    """Run an image under QEMU (semihosting console); -icount shift=0 makes
    one virtual nanosecond one instruction. machine="mps2-an386" for the
    DSP self-test."""
    if QEMU is None:
        raise RuntimeError("qemu-system-arm not found: apt-get install qemu-system-arm")
    cmd = [QEMU, "-M", machine, "-nographic", "-semihosting",
           *(["-icount", "shift=0"] if icount else []), "-kernel", str(elf)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
