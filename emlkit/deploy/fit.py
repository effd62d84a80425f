"""Does a compiled program fit a board's memories? Checked before anything runs.

What the runner (firmware/runner/main.c) will need, memory by memory:
- the image: code, read-only data and the .data load image where board.toml [link] puts code;
  .data, .bss, the libc heap and the stack where it puts data and the stack (read from the ELF);
- the model slot: the 16-byte EMDL header + the .bpte, used in place (constants stay there);
- the arena regions, filled by the runner's own placement (firmware/runtime/place.c, run on the host
  through emlkit.hostfw): the method's pieces, then the warm-up copy of the outputs. The region
  holding the model starts after it; the data region offers what the image leaves between the heap
  and the stack.

The runtime's memory is the firmware's own formula (et_runtime_bytes) applied to the loader's
counts with the image's struct sizes, which it carries as symbol sizes (firmware/runner/layout.c);
tests/test_fit.py checks the prediction against what the runner reports. A program that does not
fit gets one line naming, per memory, what it needs and what the board has.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from emlkit import hostfw
from emlkit.deploy.boards import EMDL_HEADER_SIZE, Board
from emlkit.program_needs import ProgramNeeds  # noqa: F401 (re-exported: fit.ProgramNeeds)

LAYOUT_PREFIX = "fw_layout_"
LAYOUT_NAMES = ("et_value", "et_tensor", "et_op_slot", "et_instr", "pointer")


class FitError(ValueError):
    """The image cannot be read or sized; the message names the fix."""


# ---------------------------------------------------------------- the image


class Section(NamedTuple):
    """An ELF section header: where the section lives and whether it takes memory (SHF_ALLOC)."""

    name: str
    addr: int
    size: int
    alloc: bool


@dataclass
class ImageFacts:
    """What a linked runner image occupies, and its ABI's struct sizes."""

    sections: list[Section]
    symbols: dict[str, tuple[int, int]]     # name -> (value, size)
    layout: dict[str, int]                  # LAYOUT_NAMES -> bytes

    def symbol(self, name: str) -> int:
        try:
            return self.symbols[name][0]
        except KeyError:
            raise FitError(f"the image has no symbol {name}: is it built with boards/common/cortexm/link.ld?") from None


def read_image(elf: Path) -> ImageFacts:
    """Sections, symbols and the layout sizes of a runner image (a plain ELF32 reader)."""
    data = Path(elf).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 1 or data[5] != 1:
        raise FitError(f"{elf}: not a little-endian 32-bit ELF image")
    shoff, = struct.unpack_from("<I", data, 0x20)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x2E)
    # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
    heads = [struct.unpack_from("<IIIIIIIIII", data, shoff + i * shentsize) for i in range(shnum)]

    def cstr(table: int, off: int) -> str:
        base = heads[table][4]
        return data[base + off:data.index(b"\0", base + off)].decode()

    sections = [Section(cstr(shstrndx, h[0]), h[3], h[5], bool(h[2] & 2)) for h in heads if h[0]]
    symbols: dict[str, tuple[int, int]] = {}
    for h in heads:
        if h[1] != 2:  # SHT_SYMTAB
            continue
        entsize = h[9] or 16
        for k in range(h[5] // entsize):
            st_name, value, st_size = struct.unpack_from("<III", data, h[4] + k * entsize)
            if st_name:
                symbols[cstr(h[6], st_name)] = (value, st_size)
    layout = {k: symbols[LAYOUT_PREFIX + k][1] for k in LAYOUT_NAMES if LAYOUT_PREFIX + k in symbols}
    missing = [k for k in LAYOUT_NAMES if k not in layout]
    if missing:
        raise FitError(f"{elf} lacks the layout symbols {', '.join(LAYOUT_PREFIX + k for k in missing)} "
                       "(firmware/runner/layout.c): rebuild the image")
    return ImageFacts(sections, symbols, layout)


# ---------------------------------------------------------------- the program


# ProgramNeeds (what the program asks for) lives in emlkit/program_needs.py: compiling reads it off the
# program without the deploy package.


# ---------------------------------------------------------------- the check


@dataclass
class MemoryUse:
    memory: str
    size: int
    parts: list[tuple[str, int]] = field(default_factory=list)   # (what, bytes)
    slot: int | None = None      # the model slot's size, in the memory that holds it
    unplaced: bool = False       # the runner could not place a piece charged here

    @property
    def need(self) -> int:
        return sum(b for _, b in self.parts)

    @property
    def model_bytes(self) -> int:
        return sum(b for w, b in self.parts if w == "model")

    @property
    def fits(self) -> bool:
        if self.slot is not None and self.model_bytes > self.slot:
            return False
        return self.need <= self.size and not self.unplaced

    def text(self) -> str:
        parts = ", ".join(f"{w} {b:,}" for w, b in self.parts if b)
        if self.slot is not None and self.model_bytes > self.slot:
            return f"{self.memory} needs {self.model_bytes:,} B for the model (EMDL header + .bpte), has a {self.slot:,} B model slot"
        return f"{self.memory} needs {self.need:,} B ({parts}), has {self.size:,} B"


@dataclass
class FitResult:
    board: str
    fits: bool
    memories: list[MemoryUse]
    runtime_bytes: int | None = None
    note: str = ""

    def line(self, what: str) -> str:
        """One line: what does not fit where, with needs and sizes per memory."""
        if self.fits:
            return f"{what} fits {self.board}"
        bad = [m.text() for m in self.memories if not m.fits]
        return f"{what} does not fit {self.board}: " + "; ".join(bad) + (f" ({self.note})" if self.note else "")

    def to_dict(self) -> dict[str, Any]:
        return {"board": self.board, "fits": self.fits, "runtime_bytes": self.runtime_bytes,
                "memories": [{"memory": m.memory, "size": m.size, "need": m.need, "fits": m.fits,
                              "parts": {w: b for w, b in m.parts if b}} for m in self.memories]}


def _memory_of(board: Board, addr: int) -> str | None:
    for m in board.memories:
        if m.contains(addr):
            return m.name
    return None


_SECTION_KIND = {".vectors": "code", ".text": "code", ".ARM.extab": "code", ".ARM.exidx": "code",
                 ".init_array": "code", ".eh_frame": "code", ".data": ".data+.bss", ".bss": ".data+.bss",
                 ".heap": "libc heap", ".stack": "stack", ".model": "embedded model"}


def image_use(board: Board, facts: ImageFacts) -> dict[str, list[tuple[str, int]]]:
    """Bytes the image takes in each memory: code (+ the .data load image) and data (+ heap, stack)."""
    use: dict[str, dict[str, int]] = {}

    def add(mem: str, what: str, n: int) -> None:
        acc = use.setdefault(mem, {})
        acc[what] = acc.get(what, 0) + n

    for s in facts.sections:
        if not s.alloc or s.size == 0:
            continue
        mem = _memory_of(board, s.addr)
        if mem is None:
            raise FitError(f"image section {s.name} at {s.addr:#x} lies in no memory of {board.name}: rebuild the image")
        add(mem, _SECTION_KIND.get(s.name, "code"), s.size)
        if s.name == ".data" and "__data_load__" in facts.symbols:
            load = _memory_of(board, facts.symbol("__data_load__"))
            if load is not None:
                add(load, ".data load image", s.size)
    return {mem: list(acc.items()) for mem, acc in use.items()}


@dataclass
class _Region:
    name: str
    base: int
    end: int


def arena_regions(board: Board, facts: ImageFacts, bpte_bytes: int) -> list[_Region]:
    """The regions plat_regions() hands the runner, narrowed by the platform's own rule
    (boards/common/cortexm/region_bounds.h, asked through emlkit.hostfw)."""
    out = []
    for name in board.arena_regions:
        m = board.memory(name)
        shared, model_used, heap_end, stack_limit = 0, 0, 0, 0
        if name == board.model.region:
            shared, model_used = 1, board.model.address + EMDL_HEADER_SIZE + bpte_bytes
        elif name == board.link.data:
            shared, heap_end, stack_limit = 2, facts.symbol("__heap_end__"), facts.symbol("__stack_limit__")
        free = hostfw.region_bounds(shared, m.base, m.end, model_used, heap_end, stack_limit)
        if free is not None:
            out.append(_Region(name, *free))
    return out


def check(board: Board, facts: ImageFacts, needs: ProgramNeeds, bpte_bytes: int) -> FitResult:
    uses = {m.name: MemoryUse(m.name, m.size) for m in board.memories}
    for mem, parts in image_use(board, facts).items():
        uses[mem].parts.extend(parts)
    uses[board.model.region].parts.append(("model", EMDL_HEADER_SIZE + bpte_bytes))
    uses[board.model.region].slot = board.model.max_size
    runtime = needs.runtime_bytes(facts.layout)
    regions = arena_regions(board, facts, bpte_bytes)
    names = {"arena": "arenas", "after": "output copy"}  # the other pieces keep hostfw.PIECE_KINDS' names
    # The runner's own placement (firmware/runtime/place.c, asked through emlkit.hostfw).
    placed = hostfw.place([(r.base, r.end - r.base) for r in regions], needs.arenas, runtime, board.kernel_scratch,
                          needs.delegate_bytes, [needs.output_bytes or 1])
    unplaced: list[str] = []
    for p in placed:
        what, size = names.get(p.kind, p.kind), p.size
        if p.region is not None:
            target = uses[regions[p.region].name]
        else:  # charged to the arena memory with the most room left: there it comes closest to fitting
            target = uses[regions[p.roomiest].name if p.roomiest is not None else board.arena_regions[0]]
            target.unplaced = True
            unplaced.append(f"{what} ({size:,} B)")
        acc = dict(target.parts)
        acc[what] = acc.get(what, 0) + size
        target.parts = list(acc.items())
    note = f"no free block holds {', '.join(unplaced)}" if unplaced else ""
    mems = [uses[m.name] for m in board.memories]
    fits = all(m.fits for m in mems)
    return FitResult(board.name, fits, mems, runtime, note if not fits else "")


def overflow_result(board: Board, build_log: str) -> FitResult | None:
    """A link that failed because the image does not fit: ld's "region `X' overflowed by N bytes"."""
    from emlkit.deploy.build import OVERFLOW_RE

    found = OVERFLOW_RE.findall(build_log)
    if not found:
        return None
    mems = []
    for region, over in found:
        m = next((x for x in board.memories if x.name.upper() == region), None)
        if m is None:
            continue
        mems.append(MemoryUse(m.name, m.size, [("image", m.size + int(over))]))
    return FitResult(board.name, False, mems, note="the runner image does not link") if mems else None


def check_board(board: str | Board, needs: ProgramNeeds, bpte_bytes: int, kernels: str = "mve",
                program: bytes | Path | None = None) -> FitResult | None:
    """Build (cached) the runner image that would run `program` (.pte/.bpte: the image with only its
    operators, emlkit/deploy/program_image.py; None: the board's full image) and check; None when no image
    can be built here."""
    import shutil

    from emlkit.deploy.boards import load_board
    from emlkit.deploy.build import BuildError, BuildOptions, build_image
    from emlkit.deploy.program_image import program_image

    board = board if isinstance(board, Board) else load_board(board)
    if shutil.which("arm-none-eabi-gcc") is None:
        return None
    opts = BuildOptions(mve=kernels == "mve" or not board.has_mve_variant)
    try:
        img = build_image(board.name, opts) if program is None else program_image(board.name, opts, program)
    except BuildError as err:
        res = overflow_result(board, str(err))
        if res is None:
            raise
        return res
    return check(board, read_image(img.elf), needs, bpte_bytes)


def fit_report(board: Board, needs: ProgramNeeds, bpte_bytes: int, what: str,
               program: Path | None = None) -> dict[str, Any]:
    """The compile report's "fit" entry: per memory, what the program needs on BOARD and what it has, with the
    image that runs `program` (only its operators) when it is given. A board or image that cannot be read is
    an AotError; an image that does not build here is reported unchecked."""
    import logging

    from emlkit.deploy.boards import BoardError
    from emlkit.deploy.build import BuildError
    from emlkit.errors import AotError

    try:
        res = check_board(board, needs, bpte_bytes, program=program)
    except (BoardError, FitError) as err:
        raise AotError(str(err)) from err
    except BuildError as err:
        logging.getLogger("emlkit.compile").warning(
            "warning: no fit check for %s: its firmware image does not build (%s)", board.name, str(err).splitlines()[0])
        return {"board": board.name, "checked": False, "reason": "firmware image does not build"}
    if res is None:
        return {"board": board.name, "checked": False, "reason": "arm-none-eabi-gcc not installed"}
    return {"checked": True, **res.to_dict(), "line": res.line(what)}
