"""The executed instruction stream of a QEMU run, rebuilt from `-d in_asm,exec,nochain`.

Debian's QEMU 7.2 ships no TCG plugins, so the stream comes from its debug log: `in_asm` prints each
translation block once when it is translated ("IN: symbol" and its instructions), `exec` prints a
"Trace" line each time a block runs (`nochain` makes every run go through the logged path). Two more
exec-log lines correct the stream: "Stopped execution of TB chain before PTR" (the block was entered
but no instruction ran: the icount budget ran out) and "cpu_io_recompile: rewound execution of TB to
ADDR" (the block ran up to an I/O access at ADDR, then a one-instruction block re-ran that access).

QEMU's disassembler (capstone) does not know MVE, so only the blocks' byte ranges are taken from the
log; the instructions in each range come from GNU objdump's disassembly of the ELF.
"""

from __future__ import annotations

import bisect
import logging
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from emlkit.cycles import Instr

log = logging.getLogger(__name__)

QEMU_LOG_FLAGS = ["-d", "in_asm,exec,nochain"]
_OBJDUMP_ARCH = {"cortex-m55": ["-marmv8.1-m.main"], "cortex-m85": ["-marmv8.1-m.main"]}
_DIS_RE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f]{4}(?: [0-9a-f]{4})?)\s*\t(\S+)\s*(.*)$")
_IN_RE = re.compile(r"^0x([0-9a-f]+):\s+([0-9a-f]{4})( [0-9a-f]{4})?\s")


class StreamError(RuntimeError):
    """The log or the ELF cannot be read into an instruction stream (a tool missing, a corrupt log)."""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise StreamError(f"{name} not found: apt-get install binutils-arm-none-eabi (or run ./scripts/setup.sh)")
    return path


@dataclass
class Disassembly:
    """Every instruction of an ELF by address (GNU objdump), for looking up a block's byte range."""

    addrs: list[int]
    instrs: list[Instr]

    @staticmethod
    def from_objdump_text(text: str) -> "Disassembly":
        found: dict[int, Instr] = {}
        for line in text.splitlines():
            m = _DIS_RE.match(line)
            if m is None:
                continue
            mnem = m.group(3)
            if mnem.startswith("."):  # data in code (.word, .short): never executed as an instruction
                continue
            ops = m.group(4).split("@", 1)[0].split(";", 1)[0]
            ops = re.sub(r"\s*<[^>]*>", "", ops).strip()
            addr = int(m.group(1), 16)
            size = 4 if " " in m.group(2) else 2
            found[addr] = Instr.make(addr, size, mnem, ops)
        addrs = sorted(found)
        return Disassembly(addrs, [found[a] for a in addrs])

    @staticmethod
    def of_elf(elf: Path, core: str) -> "Disassembly":
        cmd = [_tool("arm-none-eabi-objdump"), "-d", *_OBJDUMP_ARCH.get(core, []), str(elf)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise StreamError(f"{elf}: objdump failed: {out.stderr.strip().splitlines()[-1:] or out.returncode}")
        return Disassembly.from_objdump_text(out.stdout)

    def block(self, start: int, end: int) -> tuple[Instr, ...]:
        """The instructions in [start, end)."""
        i = bisect.bisect_left(self.addrs, start)
        j = bisect.bisect_left(self.addrs, end)
        return tuple(self.instrs[i:j])


@dataclass(frozen=True)
class Symbol:
    name: str
    addr: int
    size: int


def elf_symbols(elf: Path) -> dict[str, Symbol]:
    """Function symbols (Thumb bit cleared) by name, from arm-none-eabi-nm."""
    out = subprocess.run([_tool("arm-none-eabi-nm"), "-S", "--defined-only", str(elf)], capture_output=True, text=True)
    if out.returncode != 0:
        raise StreamError(f"{elf}: nm failed: {out.stderr.strip()}")
    syms: dict[str, Symbol] = {}
    for line in out.stdout.splitlines():
        parts = line.split()  # "addr size type name", or "addr type name" for a symbol without a size
        if len(parts) == 3:
            parts = [parts[0], "0", parts[1], parts[2]]
        if len(parts) == 4 and parts[2] in ("t", "T", "w", "W"):
            syms[parts[3]] = Symbol(parts[3], int(parts[0], 16) & ~1, int(parts[1], 16))
    return syms


@dataclass(frozen=True)
class Block:
    """One executed translation block: its start address and the instructions that ran."""

    pc: int
    key: tuple[int, int]         # (start, end) byte range, a cache key for its cost
    instrs: tuple[Instr, ...]


def exec_blocks(lines: Iterable[str], dis: Disassembly) -> Iterator[Block]:
    """The executed blocks, in order, from a QEMU `-d in_asm,exec,nochain` log."""
    pending: dict[int, tuple[int, int]] = {}   # translated, not yet seen running: pc -> byte range
    by_ptr: dict[str, tuple[int, int]] = {}    # host code pointer -> byte range of the block it holds
    cache: dict[tuple[int, int], tuple[Instr, ...]] = {}
    held: Block | None = None                  # the last block, until the next line may correct it
    held_ptr = ""
    start = end = -1                           # byte range of the IN: listing being read
    reading = False
    for line in lines:
        if reading:
            m = _IN_RE.match(line)
            if m is not None:
                a = int(m.group(1), 16)
                if start < 0:
                    start = a
                end = a + (4 if m.group(3) else 2)
                continue
            if start >= 0:  # the listing ended (blank line or the next log line)
                pending[start] = (start, end)
            reading = False
        if line.startswith("Trace "):
            parts = line.split(" ", 4)
            ptr = parts[2]
            pc = int(parts[3][1:].split("/", 2)[1], 16)
            rng = pending.pop(pc, None)
            if rng is not None:
                by_ptr[ptr] = rng
            else:
                rng = by_ptr.get(ptr)
                if rng is None or rng[0] != pc:
                    raise StreamError(f"exec log: the block at {pc:#x} ran before its in_asm listing: the log is "
                                      "incomplete (run QEMU with -d in_asm,exec,nochain from the start)")
            if held is not None:
                yield held
            instrs = cache.get(rng)
            if instrs is None:
                instrs = cache[rng] = dis.block(*rng)
            held, held_ptr = Block(pc, rng, instrs), ptr
        elif line.startswith("IN:"):
            reading, start, end = True, -1, -1
        elif line.startswith("Stopped execution of TB chain before "):
            # entered, but not one instruction ran (icount budget): the block did not execute
            if held is not None and line.split(" ", 7)[6] == held_ptr:
                held = None
        elif line.startswith("cpu_io_recompile: rewound execution of TB to "):
            # ran up to an I/O access, which a one-instruction block then re-runs
            to = int(line.rsplit(" ", 1)[1], 16)
            if held is not None:
                kept = tuple(i for i in held.instrs if i.addr < to)
                held = Block(held.pc, (held.key[0], to), kept) if kept else None
    if held is not None:
        yield held
