"""Decode an Ethos-U register command stream into a list of commands.

Each command is one 32-bit word: bits 0-9 the opcode, bits 14-15 the payload
size (0: none, 1: one 32-bit word follows), bits 16-31 a 16-bit parameter.
U55/U65 opcode names and values come from Vela's ethos_u55_regs; the U85 map is
emlkit/npu/regs_u85.py (Vela has no Python one for it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from emlkit.npu import regs_u85
from emlkit.npu.errors import NpuError

CMD0_NAMES: dict[int, str] = {c.value: c.name for c in cmd0}
CMD1_NAMES: dict[int, str] = {c.value: c.name for c in cmd1}
OPERATIONS = {n for n in CMD0_NAMES.values() if n.startswith("NPU_OP_")} | {
    n for n in regs_u85.CMD0.values() if n.startswith("NPU_OP_")}
# arch -> (display name, cmd0 map, cmd1 map)
MAPS = {"u55": ("Ethos-U55", CMD0_NAMES, CMD1_NAMES), "u85": ("Ethos-U85", regs_u85.CMD0, regs_u85.CMD1)}


@dataclass(frozen=True)
class Command:
    offset: int          # byte offset in the command stream
    code: int            # 10-bit opcode
    name: str
    param: int           # 16-bit parameter (bits 16-31 of the first word)
    payload: int | None  # the 32-bit word that follows, for cmd1 commands

    @property
    def is_operation(self) -> bool:
        return self.name in OPERATIONS

    @property
    def word_count(self) -> int:
        return 1 if self.payload is None else 2


def decode(words: np.ndarray | bytes, base_offset: int = 0, arch: str = "u55") -> list[Command]:
    """Words -> commands; NpuError naming the opcode and offset for anything not in the arch's register map
    (arch "u55" covers the U65 too; "u85")."""
    product, names0, names1 = MAPS[arch]
    if isinstance(words, (bytes, bytearray)):
        if len(words) % 4:
            raise NpuError(f"command stream is {len(words)} bytes, not a whole number of 32-bit words")
        words = np.frombuffer(words, dtype="<u4")
    w = [int(x) for x in words]
    out: list[Command] = []
    i = 0
    while i < len(w):
        word = w[i]
        off = base_offset + 4 * i
        code = word & 0x3FF
        size = (word >> 14) & 0x3
        reserved = (word >> 10) & 0xF
        param = word >> 16
        if reserved:
            raise NpuError(f"malformed command word 0x{word:08x} at offset 0x{off:06x}: reserved bits 10-13 set")
        if size == 0:
            name = names0.get(code)
            if name is None:
                raise NpuError(f"unknown {product} command 0x{code:03x} (word 0x{word:08x}) at offset 0x{off:06x}")
            out.append(Command(off, code, name, param, None))
            i += 1
        elif size == 1:
            name = names1.get(code)
            if name is None:
                raise NpuError(f"unknown {product} register 0x{code:03x} with payload (word 0x{word:08x}) "
                               f"at offset 0x{off:06x}")
            if i + 1 >= len(w):
                raise NpuError(f"command stream truncated: {name} at offset 0x{off:06x} lacks its payload word")
            out.append(Command(off, code, name, param, w[i + 1]))
            i += 2
        else:
            raise NpuError(f"command word 0x{word:08x} at offset 0x{off:06x} has payload size {size}, "
                           f"which {product} does not use (corrupt data or a stream for another NPU)")
    if not out or out[-1].name != "NPU_OP_STOP":
        raise NpuError("command stream does not end with NPU_OP_STOP: it is truncated")
    return out


def disassemble(cmds: list[Command]) -> list[tuple[int, int | None, int, int, str]]:
    """(offset, payload, param, code-with-flags, name) rows, the columns of `vela --verbose-register-command-stream`."""
    return [(c.offset, c.payload, c.param, c.code | (0x4000 if c.payload is not None else 0), c.name) for c in cmds]
