"""Microbenchmarks for the cycle model: short assembly sequences whose cycle counts follow from Arm's documents.

Each benchmark is a straight-line (or one-loop) assembly sequence between the labels `bench_start` and
`bench_end`, built per core into a bare image (vector table, the sequence, a semihosting exit), run under the
core's QEMU machine with the exec log, and charged by the timing model over the instructions in that range.
Its `documented` figure is the cycle count (or range) that the instruction timing tables give for the same
sequence, derived by hand in each entry's `derivation`; scripts/cycle_validation.py tabulates both into
docs/cycle-model.md. Without an FVP or hardware here, neither figure is checked against measured cycles.
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from emlkit.cycles import START, CoreModel, Instr, State, branch_taken
from emlkit.exec_stream import Disassembly, elf_symbols, exec_blocks

log = logging.getLogger(__name__)

# The board each core's benchmark image runs on (QEMU machine, memory map) and the compiler flags.
BENCH_BOARDS = {"cortex-m0plus": "microbit", "cortex-m3": "mps2-an385", "cortex-m4": "mps2-an386",
                "cortex-m7": "mps2-an500", "cortex-m33": "mps2-an505", "cortex-m55": "corstone-300"}
N = 32  # repetitions in the unrolled sequences


@dataclass(frozen=True)
class Bench:
    name: str
    what: str
    body: str                                   # assembly between bench_start and bench_end
    documented: dict[str, tuple[int, int]]      # core -> (low, high) cycles per the documents
    derivation: str
    cores: tuple[str, ...] = ()                 # cores it runs on (default: the documented ones)
    setup: str = ""                             # assembly before bench_start (not counted)

    def on(self) -> tuple[str, ...]:
        return self.cores or tuple(self.documented)


def _rep(line: str, n: int = N) -> str:
    return "".join(line.format(i=i) + "\n" for i in range(n))


_INDEP_REGS = ("r1", "r2", "r3", "r4", "r5", "r6", "r7")
BENCHES: list[Bench] = [
    Bench("mul_independent", f"{N} MULS on rotating registers, no dependences",
          "".join(f"muls {_INDEP_REGS[i % 7]}, r0, {_INDEP_REGS[i % 7]}\n" for i in range(N)),
          {"cortex-m0plus": (N, N), "cortex-m3": (N, N), "cortex-m4": (N, N)},
          "MUL: 1 cycle on M0+ (single-cycle multiplier), M3 and M4",
          cores=("cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")),
    Bench("ldr_chain", f"{N} dependent loads (LDR r0, [r0] on a word that points to itself)",
          _rep("ldr r0, [r0]"),
          {"cortex-m0plus": (2 * N, 2 * N), "cortex-m3": (2 * N, 2 * N), "cortex-m4": (2 * N, 2 * N)},
          "LDR: 2 cycles; M3/M4 pipelining does not apply when the address is the previous load's result",
          cores=("cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"),
          setup="ldr r0, =self_word\n"),
    Bench("ldr_independent", f"{N} independent loads from the same base",
          "".join(f"ldr {_INDEP_REGS[i % 7]}, [r0, #{4 * (i % 8)}]\n" for i in range(N)),
          {"cortex-m0plus": (2 * N, 2 * N), "cortex-m3": (N + 1, N + 1), "cortex-m4": (N + 1, N + 1)},
          "M0+: LDR 2 each; M3/M4: 2 for the first, neighbouring loads pipeline to 1 each (N + 1)",
          cores=("cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"),
          setup="ldr r0, =self_word\n"),
    Bench("mla", f"{N} MLA on rotating destinations",
          "".join(f"mla {_INDEP_REGS[i % 7]}, r0, r0, r8\n" for i in range(N)),
          {"cortex-m3": (2 * N, 2 * N), "cortex-m4": (N, N)},
          "MLA: 2 cycles on the M3, 1 on the M4",
          cores=("cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")),
    Bench("smull", f"{N} SMULL", "".join(f"smull r1, r2, {_INDEP_REGS[2 + i % 5]}, r0\n" for i in range(N)),
          {"cortex-m3": (3 * N, 5 * N), "cortex-m4": (N, N)},
          "SMULL: 3 to 5 cycles on the M3 (early termination), 1 on the M4",
          cores=("cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")),
    Bench("smlad", f"{N} SMLAD (dual 16-bit MAC)", "".join(f"smlad {_INDEP_REGS[i % 7]}, r0, r8, r9\n" for i in range(N)),
          {"cortex-m4": (N, N)}, "SMLAD: 1 cycle on the M4",
          cores=("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")),
    Bench("sdiv", f"{N} SDIV", _rep("sdiv r1, r2, r3"),
          {"cortex-m3": (2 * N, 12 * N), "cortex-m4": (2 * N, 12 * N)},
          "SDIV: 2 to 12 cycles depending on the operands (M3/M4)",
          cores=("cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"),
          setup="movs r2, #100\nmovs r3, #7\n"),
    Bench("ldm8", "8 x LDMIA of 8 registers", _rep("ldmia r0, {{r1, r2, r3, r4, r5, r6, r7, r8}}", 8),
          {"cortex-m3": (72, 72), "cortex-m4": (72, 72)}, "LDM: 1 + N cycles, N = 8",
          cores=("cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"),
          setup="ldr r0, =self_word\n"),
    Bench("countdown_loop", "a 16-iteration SUBS/BNE loop",
          "movs r0, #16\n1:\nsubs r0, #1\nbne 1b\n",
          {"cortex-m0plus": (1 + 16 + 15 * 2 + 1, 1 + 16 + 15 * 2 + 1),
           "cortex-m3": (1 + 16 + 15 * 2 + 1, 1 + 16 + 15 * 4 + 1),
           "cortex-m4": (1 + 16 + 15 * 2 + 1, 1 + 16 + 15 * 4 + 1)},
          "MOVS 1; per iteration SUBS 1 and BNE: M0+ 2 taken, 1 not taken; M3/M4 1 + P taken (P = 1 to 3), "
          "1 not taken",
          cores=("cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")),
    Bench("fp_vadd", f"{N} VADD.F32", "".join(f"vadd.f32 s{1 + i % 8}, s0, s9\n" for i in range(N)),
          {"cortex-m4": (N, N)}, "VADD.F32: 1 cycle (FPv4-SP)",
          cores=("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")),
    Bench("fp_vfma", f"{N} VFMA.F32", "".join(f"vfma.f32 s{1 + i % 8}, s0, s9\n" for i in range(N)),
          {"cortex-m4": (3 * N, 3 * N)}, "VFMA.F32: 3 cycles (FPv4-SP)",
          cores=("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")),
    Bench("mve_vmladava", f"{N} back-to-back VMLADAVA.S8 (one resource: no overlap)",
          "".join(f"vmladava.s8 r{2 + 2 * (i % 3)}, q0, q1\n" for i in range(N)),
          {"cortex-m55": (2 * N, 2 * N)},
          "a 4-beat MVE instruction on a dual-beat core: 2 cycles; consecutive MACs cannot overlap"),
    Bench("mve_load_mac", f"{N // 2} VLDRB.U8 + VMLADAVA.S8 pairs, interleaved",
          "".join(f"vldrb.u8 q{i % 2 + 2}, [r0]\nvmladava.s8 r2, q0, q1\n" for i in range(N // 2)),
          {"cortex-m55": (N + 1, N + 1)},
          "dual-beat overlap: the first instruction 2 cycles, each following one of the other resource "
          "overlaps two of its beats with its predecessor's last two: 1 cycle each (2 + (N - 1))",
          setup="ldr r0, =self_word\n"),
]


# Enables the FPU (and with it MVE) in CPACR: FP and vector instructions fault while it is off.
_FPU_ON = """ldr r1, =0xE000ED88
ldr r2, [r1]
orr r2, r2, #0xF00000
str r2, [r1]
dsb
isb
"""
_NO_FPU = ("cortex-m0plus", "cortex-m3")


def _source(b: Bench, core: str, stack_top: int) -> str:
    fpu = "" if core in _NO_FPU else _FPU_ON
    return f""".syntax unified
.thumb
.section .vectors, "a"
.word {stack_top:#x}
.word _start
.text
.thumb_func
.global _start
_start:
{fpu}{b.setup}
.thumb_func
.global bench_start
bench_start:
{b.body}
.thumb_func
.global bench_end
bench_end:
movs r0, #0x18
ldr r1, =0x20026
bkpt 0xab
1: b 1b
.ltorg
.data
.align 2
self_word:
.word self_word
.word 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
"""


def _link_script(code: int, ram: int) -> str:
    return f"""MEMORY {{ CODE (rx) : ORIGIN = {code:#x}, LENGTH = 64K
RAM (rw) : ORIGIN = {ram:#x}, LENGTH = 8K }}
SECTIONS {{
  .vectors : {{ KEEP(*(.vectors)) }} > CODE
  .text : {{ *(.text*) }} > CODE
  .data : {{ *(.data*) }} > RAM
}}
"""


@dataclass
class BenchResult:
    bench: str
    core: str
    instructions: int
    cycles: float
    documented: tuple[int, int] | None
    classes: dict[str, int] = field(default_factory=dict)

    @property
    def error(self) -> float | None:
        """Relative distance from the documented range (0 inside it), or None without a documented figure."""
        if self.documented is None:
            return None
        lo, hi = self.documented
        if lo <= self.cycles <= hi:
            return 0.0
        ref = lo if self.cycles < lo else hi
        return (self.cycles - ref) / ref


def build(b: Bench, core: str, folder: Path) -> Path:
    """The benchmark's bare image for `core` (its board's memory map)."""
    from emlkit.deploy.boards import load_board

    board = load_board(BENCH_BOARDS[core])
    code = next(m for m in board.memories if "x" in m.access)
    ram = next(m for m in board.memories if "w" in m.access and "x" not in m.access)
    src, lds, elf = folder / f"{b.name}.S", folder / f"{b.name}.ld", folder / f"{b.name}-{core}.elf"
    src.write_text(_source(b, core, ram.base + 8192))
    lds.write_text(_link_script(code.base, ram.base))
    cmd = ["arm-none-eabi-gcc", *board.cflags, "-nostdlib", "-nostartfiles", "-T", str(lds), str(src), "-o", str(elf)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark {b.name} does not assemble for {core}: {out.stderr.strip()}")
    return elf


def model_range(lines: Iterable[str], dis: Disassembly, model: CoreModel, lo: int, hi: int) -> tuple[int, float, dict[str, int]]:
    """(instructions, modelled cycles, class histogram) of the executed instructions with addresses in [lo, hi)."""
    state: State = START
    n, cycles = 0, 0.0
    classes: dict[str, int] = {}
    blocks = list(exec_blocks(lines, dis))
    for k, blk in enumerate(blocks):
        ins: tuple[Instr, ...] = tuple(i for i in blk.instrs if lo <= i.addr < hi)
        if not ins:
            continue
        nxt = blocks[k + 1].pc if k + 1 < len(blocks) else None
        taken = ins[-1] is blk.instrs[-1] and branch_taken(ins[-1], nxt)
        c, state = model.block_cycles(ins, state, taken)
        cycles += c
        n += len(ins)
        for i in ins:
            classes[i.cls] = classes.get(i.cls, 0) + 1
    return n, cycles, classes


def run_bench(b: Bench, core: str, timeout: float = 60.0) -> BenchResult:
    from emlkit.deploy.boards import load_board

    board = load_board(BENCH_BOARDS[core])
    assert board.qemu is not None
    with tempfile.TemporaryDirectory(prefix="cyclebench-") as tmp:
        folder = Path(tmp)
        elf = build(b, core, folder)
        logf = folder / "exec.log"  # a few hundred lines: a plain file is fine here
        cmd = [board.qemu.binary, "-M", board.qemu.machine, *board.qemu.args, "-kernel", str(elf),
               "-d", "in_asm,exec,nochain", "-D", str(logf)]
        subprocess.run(cmd, cwd=folder, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        syms = elf_symbols(elf)
        dis = Disassembly.of_elf(elf, core)
        with open(logf) as f:
            n, cycles, classes = model_range(f, dis, CoreModel.load(core), syms["bench_start"].addr,
                                             syms["bench_end"].addr)
    return BenchResult(b.name, core, n, cycles, b.documented.get(core), classes)
