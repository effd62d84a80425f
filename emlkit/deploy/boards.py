"""Board descriptions: boards/<name>/board.toml read into dataclasses and validated.

A board folder holds board.toml (CPU flags, memory map, model slot, arena
regions, simulator command lines) and board.cmake. The firmware build does not
parse TOML itself: board.cmake runs this file (`python boards.py gen ...`) at
configure time to write board_memory.ld (MEMORY block + region aliases for the
shared linker script), board_config.h (model slot, arena regions, UART, clock)
and board_flags.cmake (CPU flags). So board.toml is the single source of truth.

Only the standard library is used here, so CMake can run it with any Python 3.11+.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
BOARDS_DIR = REPO_ROOT / "boards"
EMDL_HEADER_SIZE = 16
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_ACCESS_RE = re.compile(r"^r?w?x?$")


class BoardError(ValueError):
    """board.toml is missing, malformed or inconsistent; the message names the fix."""


@dataclass(frozen=True)
class Memory:
    name: str
    base: int
    size: int
    access: str = "rwx"

    @property
    def end(self) -> int:
        return self.base + self.size

    def contains(self, addr: int, size: int = 0) -> bool:
        return self.base <= addr and addr + size <= self.end


@dataclass(frozen=True)
class LinkPlan:
    vectors: str
    code: str
    data: str
    stack: str
    stack_size: int
    libc_heap_size: int
    code_fallback: str | None = None


@dataclass(frozen=True)
class ModelSlot:
    region: str
    address: int
    max_size: int  # header + .bpte


@dataclass(frozen=True)
class QemuConfig:
    machine: str
    binary: str = "qemu-system-arm"
    args: tuple[str, ...] = ()
    counter_unit: str = "instructions"


@dataclass(frozen=True)
class FvpConfig:
    params: tuple[str, ...]
    data_target: str
    variants: dict[str, tuple[str, ...]] = field(default_factory=dict)
    counter_unit: str = "cycles"
    npu_macs_param: str | None = None  # instance.parameter that sets the Ethos-U's MAC count


@dataclass(frozen=True)
class Mps3Config:
    """How an MPS3 board's SD card loads images: the images.txt folder and the MCC's address of each memory."""

    images_dir: str                       # e.g. MB/HBI0309C/AN547
    mcc_address: dict[str, int]           # memory name -> address the MCC writes it at


@dataclass(frozen=True)
class NpuConfig:
    """The board's Ethos-U: where the driver finds it and what the NPU can reach."""

    base: int                        # register block
    irq: int                         # interrupt line, -1: none wired (the driver polls)
    secure: bool = True
    privileged: bool = True
    timeout_ms: int = 2000           # per inference
    products: tuple[str, ...] = ()   # NPUs the board exists with, e.g. ("ethos-u55", "ethos-u65")
    dma_regions: tuple[str, ...] = ()  # memories the NPU's AXI masters reach


@dataclass(frozen=True)
class Board:
    name: str                        # boards/<name>/board.toml
    description: str
    cpu: str                         # -mcpu, e.g. cortex-m55
    cflags: tuple[str, ...]
    nomve_cflags: tuple[str, ...]    # the portable-kernel image's flags (equal to cflags: no second image)
    cpu_hz: int                      # BOARD_CPU_HZ in the generated board header
    uart_base: int | None            # None: no UART (semihosting runs only; `export` refuses the board)
    memories: tuple[Memory, ...]
    link: LinkPlan
    model: ModelSlot
    arena_regions: tuple[str, ...]
    qemu: QemuConfig | None
    fvp: FvpConfig | None
    directory: Path
    npu: NpuConfig | None = None
    fpgaio: tuple[int, int] | None = None  # (base, prescaler clock Hz) of an MPS2/MPS3 FPGAIO COUNTER
    stand_in_for: str | None = None  # a board this one imitates where the real one cannot run here
    kernel_scratch: int = 4096       # bytes of per-call kernel scratch the runner places beside the arenas
    label: str = ""                  # said on every result from this board (e.g. what a stand-in really is)
    uart_hz: int = 0                 # the UART's clock (its baud divisor), default cpu_hz
    mps3: Mps3Config | None = None   # SD-card image loading, for MPS3 FPGA boards

    def memory(self, name: str) -> Memory:
        for m in self.memories:
            if m.name == name:
                return m
        raise KeyError(name)

    @property
    def has_mve_variant(self) -> bool:
        """True when the board builds a separate portable-kernel image (nomve_cflags differ)."""
        return self.nomve_cflags != self.cflags

    @property
    def max_model_bytes(self) -> int:
        """Largest .bpte the model slot holds (the EMDL header takes 16 bytes)."""
        return self.model.max_size - EMDL_HEADER_SIZE


# ---------------------------------------------------------------- parsing helpers


class _Table:
    """A TOML table that reports missing, mistyped and unknown keys by name."""

    def __init__(self, data: Any, where: str, path: Path) -> None:
        if not isinstance(data, dict):
            raise BoardError(f"{path}: [{where}] must be a table")
        self.data = data
        self.where = where
        self.path = path
        self.used: set[str] = set()

    def _fail(self, msg: str) -> BoardError:
        return BoardError(f"{self.path}: [{self.where}] {msg}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is ...:
                raise self._fail(f"missing key '{key}': add it (see boards/README.md)")
            return default
        value = self.data[key]
        # bool is an int subclass: never accept it where a number is meant.
        if isinstance(value, bool) and kind is int:
            raise self._fail(f"'{key}' must be an integer, got {value!r}")
        if not isinstance(value, kind):
            want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise self._fail(f"'{key}' must be {want}, got {type(value).__name__} {value!r}")
        return value

    def str_list(self, key: str, default: Any = ...) -> tuple[str, ...]:
        value = self.get(key, list, default)
        if value is None:
            return ()
        if not all(isinstance(v, str) for v in value):
            raise self._fail(f"'{key}' must be a list of strings, got {value!r}")
        return tuple(value)

    def table(self, key: str, optional: bool = False) -> "_Table | None":
        self.used.add(key)
        if key not in self.data:
            if optional:
                return None
            raise self._fail(f"missing table [{self.where}.{key}]" if self.where else f"missing table [{key}]")
        return _Table(self.data[key], f"{self.where}.{key}" if self.where else key, self.path)

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise self._fail(f"unknown key(s) {', '.join(unknown)}: check the spelling (see boards/README.md)")


def _u32(t: _Table, key: str, default: Any = ..., minimum: int = 0) -> Any:
    v = t.get(key, int, default)
    if v is None:
        return None
    if not minimum <= v <= 0xFFFFFFFF:
        raise t._fail(f"'{key}' = {v:#x} is outside the 32-bit address space (>= {minimum})")
    return v


# ---------------------------------------------------------------- loading


def board_dir(name_or_path: str | Path) -> Path:
    """boards/<name>, or the folder itself when given a path."""
    p = Path(name_or_path)
    if p.is_dir() or p.suffix == ".toml" or "/" in str(name_or_path):
        return p.parent if p.suffix == ".toml" else p
    return BOARDS_DIR / str(name_or_path)


def list_boards(boards_dir: Path = BOARDS_DIR) -> list[str]:
    """Names of the folders under boards/ that have a board.toml (host has none)."""
    return sorted(p.parent.name for p in boards_dir.glob("*/board.toml"))


_LOADED: dict[Path, tuple[tuple[int, int], Board]] = {}


def load_board(name_or_path: str | Path) -> Board:
    """Read and validate boards/<name>/board.toml; raises BoardError with a fix. Each file is parsed once per
    process (again only when it changed): callers share the one (frozen) Board."""
    d = board_dir(name_or_path)
    path = d / "board.toml"
    if not path.is_file():
        known = ", ".join(list_boards()) or "none"
        raise BoardError(f"unknown board '{name_or_path}': no {path} (known boards: {known})")
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    key = path.resolve()
    hit = _LOADED.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise BoardError(f"{path}: not valid TOML ({e}): fix the syntax") from None
    board = parse_board(data, path)
    _LOADED[key] = (stamp, board)
    return board


def parse_board(data: dict[str, Any], path: Path) -> Board:
    root = _Table(data, "", path)
    head = _parse_head(root, path)
    memories = _parse_memories(root, path)
    by_name = {m.name: m for m in memories}
    link = _parse_link(root, by_name)
    model = _parse_model(root, by_name, link)
    arenas, kernel_scratch = _parse_arenas(root, by_name, link)
    npu = _parse_npu(root, by_name, arenas)
    mps3 = _parse_mps3(root, by_name)
    qemu = _parse_qemu(root)
    fvp = _parse_fvp(root)
    root.finish()
    return Board(memories=tuple(memories), link=link, model=model, arena_regions=arenas, qemu=qemu, fvp=fvp,
                 directory=path.parent, npu=npu, kernel_scratch=kernel_scratch, mps3=mps3, **head)


def _parse_head(root: _Table, path: Path) -> dict[str, Any]:
    """[board]: name, CPU, flags, clocks, UART, the stand-in and FPGAIO timer."""
    b = root.table("board")
    assert b is not None
    name = b.get("name", str)
    if name != path.parent.name:
        raise b._fail(f"name '{name}' differs from the folder name '{path.parent.name}': make them equal")
    description = b.get("description", str, "")
    cpu = b.get("cpu", str)
    cflags = b.str_list("cflags")
    if not cflags:
        raise b._fail("'cflags' is empty: give the CPU flags, e.g. [\"-mcpu=cortex-m55\", \"-mfloat-abi=hard\"]")
    nomve = b.str_list("nomve_cflags", None) or cflags
    cpu_hz = b.get("cpu_hz", int)
    if cpu_hz <= 0:
        raise b._fail(f"'cpu_hz' must be positive, got {cpu_hz}")
    uart_base = _u32(b, "uart_base", None)
    uart_hz = b.get("uart_hz", int, cpu_hz)
    if uart_hz <= 0:
        raise b._fail(f"'uart_hz' must be positive, got {uart_hz}")
    stand_in_for = b.get("stand_in_for", str, None)
    label = b.get("label", str, "")
    fpgaio_base = _u32(b, "fpgaio_base", None)
    fpgaio_hz = b.get("fpgaio_hz", int, None)
    if (fpgaio_base is None) != (fpgaio_hz is None) or (fpgaio_hz is not None and fpgaio_hz <= 0):
        raise b._fail("give both 'fpgaio_base' and a positive 'fpgaio_hz', or neither")
    b.finish()
    return {"name": name, "description": description, "cpu": cpu, "cflags": cflags, "nomve_cflags": nomve,
            "cpu_hz": cpu_hz, "uart_base": uart_base, "uart_hz": uart_hz, "stand_in_for": stand_in_for,
            "label": label, "fpgaio": (fpgaio_base, fpgaio_hz) if fpgaio_base is not None else None}


def _parse_memories(root: _Table, path: Path) -> list[Memory]:
    """[[memory]]: named, non-overlapping address ranges inside 32 bits."""
    raw_mems = root.get("memory", list)
    memories: list[Memory] = []
    for i, raw in enumerate(raw_mems):
        t = _Table(raw, f"memory #{i + 1}", path)
        m = Memory(
            name=t.get("name", str),
            base=_u32(t, "base"),
            size=_u32(t, "size", minimum=1),
            access=t.get("access", str, "rwx"),
        )
        t.finish()
        if not _NAME_RE.match(m.name):
            raise t._fail(f"name '{m.name}' must be lower-case letters, digits and _ (it becomes a linker region)")
        if not _ACCESS_RE.match(m.access) or not m.access:
            raise t._fail(f"access '{m.access}' must be a subset of 'rwx' in that order")
        if m.end > 1 << 32:
            raise t._fail(f"'{m.name}' ends at {m.end:#x}, beyond the 32-bit address space: reduce size")
        memories.append(m)
    if not memories:
        raise root._fail("no [[memory]] entries: describe the board's memories")
    names = [m.name for m in memories]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise root._fail(f"memory name(s) {', '.join(sorted(dup))} given twice: names must be unique")
    ordered = sorted(memories, key=lambda m: m.base)
    for a, c in zip(ordered, ordered[1:]):
        if c.base < a.end:
            raise root._fail(
                f"memories '{a.name}' [{a.base:#x}, {a.end:#x}) and '{c.name}' [{c.base:#x}, {c.end:#x}) overlap: fix base/size"
            )
    return memories


def _region(by_name: dict[str, Memory], t: _Table, key: str, default: Any = ..., need: str = "") -> Any:
    """A key naming a [[memory]], with the access the use needs."""
    v = t.get(key, str, default)
    if v is None:
        return None
    if v not in by_name:
        raise t._fail(f"'{key}' = '{v}' is not a [[memory]] name (have {', '.join(by_name)})")
    if need and any(ch not in by_name[v].access for ch in need):
        raise t._fail(f"'{key}' = '{v}' needs access '{need}' but the memory is '{by_name[v].access}'")
    return v


def _parse_link(root: _Table, by_name: dict[str, Memory]) -> LinkPlan:
    """[link]: where the vectors, code, data and stack go."""
    def region(t: _Table, key: str, default: Any = ..., need: str = "") -> Any:
        return _region(by_name, t, key, default, need)

    lt = root.table("link")
    assert lt is not None
    link = LinkPlan(
        vectors=region(lt, "vectors", need="r"),
        code=region(lt, "code", need="rx"),
        code_fallback=region(lt, "code_fallback", None, need="rx"),
        data=region(lt, "data", need="rw"),
        stack=region(lt, "stack", need="rw"),
        stack_size=_u32(lt, "stack_size", minimum=256),
        libc_heap_size=_u32(lt, "libc_heap_size", 0),
    )
    lt.finish()
    if link.stack_size % 8:
        raise lt._fail(f"'stack_size' = {link.stack_size:#x} must be a multiple of 8 (AAPCS stack alignment)")
    if link.stack_size > by_name[link.stack].size:
        raise lt._fail(f"'stack_size' {link.stack_size:#x} exceeds memory '{link.stack}' ({by_name[link.stack].size:#x})")
    return link


def _placed(link: LinkPlan) -> set[str]:
    return {link.vectors, link.code, link.data, link.stack} | ({link.code_fallback} if link.code_fallback else set())


def _parse_model(root: _Table, by_name: dict[str, Memory], link: LinkPlan) -> ModelSlot:
    """[model]: the model slot, 16-byte aligned inside a memory of its own."""
    def region(t: _Table, key: str, default: Any = ..., need: str = "") -> Any:
        return _region(by_name, t, key, default, need)

    mt = root.table("model")
    assert mt is not None
    model = ModelSlot(region=region(mt, "region", need="r"), address=_u32(mt, "address"), max_size=_u32(mt, "max_size", minimum=EMDL_HEADER_SIZE + 1))
    mt.finish()
    mreg = by_name[model.region]
    if model.address % 16:
        raise mt._fail(f"'address' {model.address:#x} must be 16-byte aligned (the .bpte needs it)")
    if not mreg.contains(model.address, model.max_size):
        raise mt._fail(
            f"model slot [{model.address:#x}, {model.address + model.max_size:#x}) is not inside memory "
            f"'{mreg.name}' [{mreg.base:#x}, {mreg.end:#x}): fix address/max_size"
        )
    placed = _placed(link)
    if model.region in placed:
        raise mt._fail(f"region '{model.region}' also holds code/data/stack ([link]): put the model in a memory of its own")
    return model


def _parse_arenas(root: _Table, by_name: dict[str, Memory], link: LinkPlan) -> tuple[tuple[str, ...], int]:
    """[arenas]: the writable memories the runner may place arenas in, and the kernel scratch."""
    names = list(by_name)
    placed = _placed(link)
    at = root.table("arenas")
    assert at is not None
    arenas = at.str_list("regions")
    kernel_scratch = at.get("kernel_scratch", int, 4096)
    at.finish()
    if not 0 <= kernel_scratch <= 1 << 24 or kernel_scratch % 16:
        raise at._fail(f"'kernel_scratch' = {kernel_scratch} must be a multiple of 16 in 0..16 MiB")
    if not arenas:
        raise at._fail("'regions' is empty: list the memories the runner may place arenas in")
    for r in arenas:
        if r not in by_name:
            raise at._fail(f"arena region '{r}' is not a [[memory]] name (have {', '.join(names)})")
        if r in placed and r != link.data:
            raise at._fail(
                f"arena region '{r}' also holds code/stack ([link]): remove it from arenas.regions "
                "or move the [link] placement (only the data memory may be shared: arenas get what "
                ".data, .bss, the libc heap and the stack leave free)"
            )
        if "w" not in by_name[r].access:
            raise at._fail(f"arena region '{r}' is not writable (access '{by_name[r].access}')")
    if len(set(arenas)) != len(arenas):
        raise at._fail(f"'regions' lists a memory twice: {list(arenas)}")
    return arenas, kernel_scratch


def _parse_npu(root: _Table, by_name: dict[str, Memory], arenas: tuple[str, ...]) -> NpuConfig | None:
    """[npu] (optional): the Ethos-U's registers, interrupt and what its DMA reaches."""
    names = list(by_name)
    npu = None
    nt = root.table("npu", optional=True)
    if nt is not None:
        irq = nt.get("irq", int)
        if not -1 <= irq < 480:
            raise nt._fail(f"'irq' = {irq} must be an external interrupt number 0..479, or -1 for none (the driver polls)")
        npu = NpuConfig(base=_u32(nt, "base", minimum=1), irq=irq, secure=nt.get("secure", bool, True),
                        privileged=nt.get("privileged", bool, True), timeout_ms=nt.get("timeout_ms", int, 2000),
                        products=nt.str_list("products", []), dma_regions=nt.str_list("dma_regions", []))
        nt.finish()
        if npu.timeout_ms <= 0 or npu.timeout_ms > 3_600_000:
            raise nt._fail(f"'timeout_ms' = {npu.timeout_ms} must be 1..3600000")
        if npu.base % 4:
            raise nt._fail(f"'base' = {npu.base:#x} must be 4-byte aligned")
        for r in npu.dma_regions:
            if r not in by_name:
                raise nt._fail(f"dma region '{r}' is not a [[memory]] name (have {', '.join(names)})")
        unreachable = [r for r in arenas if npu.dma_regions and r not in npu.dma_regions]
        if unreachable:
            raise nt._fail(f"arena region(s) {', '.join(unreachable)} are not in dma_regions: the NPU could not reach "
                           "delegate memory placed there")
        bad = [p for p in npu.products if p not in ("ethos-u55", "ethos-u65", "ethos-u85")]
        if bad:
            raise nt._fail(f"unknown NPU product(s) {', '.join(bad)}: use ethos-u55, ethos-u65 or ethos-u85")
    return npu


def _parse_mps3(root: _Table, by_name: dict[str, Memory]) -> Mps3Config | None:
    """[mps3] (optional): how the MPS3's SD card loads images."""
    st = root.table("mps3", optional=True)
    if st is None:
        return None
    raw = st.get("mcc_address", dict)
    bad = sorted(k for k in raw if k not in by_name)
    if bad:
        raise st._fail(f"mcc_address names {', '.join(bad)}, not [[memory]] names (have {', '.join(by_name)})")
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 0xFFFFFFFF for v in raw.values()):
        raise st._fail("mcc_address values must be 32-bit addresses")
    mps3 = Mps3Config(images_dir=st.get("images_dir", str), mcc_address=dict(raw))
    st.finish()
    return mps3


def _parse_qemu(root: _Table) -> QemuConfig | None:
    """[qemu] (optional): the machine that runs the board's image."""
    qt = root.table("qemu", optional=True)
    if qt is None:
        return None
    qemu = QemuConfig(machine=qt.get("machine", str), binary=qt.get("binary", str, "qemu-system-arm"),
                      args=qt.str_list("args", []), counter_unit=qt.get("counter_unit", str, "instructions"))
    qt.finish()
    return qemu


def _fvp_variants(ft: _Table) -> dict[str, tuple[str, ...]]:
    """[fvp.variants.NAME] params: the FVP binaries the board runs on, each with its own parameters."""
    vt = ft.table("variants")
    assert vt is not None
    variants: dict[str, tuple[str, ...]] = {}
    for vname in list(vt.data):
        sub = vt.table(vname)
        assert sub is not None
        variants[vname] = sub.str_list("params", [])
        sub.finish()
    vt.finish()
    if not variants:
        raise ft._fail("[fvp.variants] is empty: name at least one FVP binary, e.g. [fvp.variants.FVP_Corstone_SSE-300_Ethos-U55]")
    return variants


def _parse_fvp(root: _Table) -> FvpConfig | None:
    """[fvp] (optional): the FVP binaries and parameters that run the board's image."""
    ft = root.table("fvp", optional=True)
    if ft is None:
        return None
    variants = _fvp_variants(ft)
    fvp = FvpConfig(params=ft.str_list("params"), data_target=ft.get("data_target", str), variants=variants,
                    counter_unit=ft.get("counter_unit", str, "cycles"),
                    npu_macs_param=ft.get("npu_macs_param", str, None))
    ft.finish()
    for p in fvp.params + tuple(x for v in variants.values() for x in v):
        if "=" not in p:
            raise ft._fail(f"FVP parameter '{p}' must look like instance.parameter=value")
    return fvp


# ---------------------------------------------------------------- generated build inputs


def memory_ld(board: Board, code_in_fallback: bool = False) -> str:
    """MEMORY block, region aliases and sizes for boards/common/cortexm/link.ld."""
    if code_in_fallback and not board.link.code_fallback:
        raise BoardError(f"board '{board.name}' has no [link].code_fallback: cannot move code out of '{board.link.code}'")
    code = board.link.code_fallback if code_in_fallback else board.link.code
    lines = [f"/* Generated from {board.directory.name}/board.toml by emlkit/deploy/boards.py: do not edit. */", "MEMORY", "{"]
    for m in board.memories:
        lines.append(f"  {m.name.upper()} ({m.access}) : ORIGIN = {m.base:#010x}, LENGTH = {m.size:#010x}")
    lines.append("}")
    for alias, reg in (("VECTORS", board.link.vectors), ("CODE", code), ("DATA", board.link.data), ("STACK", board.link.stack), ("MODEL", board.model.region)):
        lines.append(f'REGION_ALIAS("REGION_{alias}", {reg.upper()});')
    lines += [
        f"__stack_size = {board.link.stack_size:#x};",
        f"__libc_heap_size = {board.link.libc_heap_size:#x};",
        f"__model_address = {board.model.address:#010x};",
        f"__model_max_size = {board.model.max_size:#x};",
        "",
    ]
    return "\n".join(lines)


def config_h(board: Board, model_in_image: bool = False) -> str:
    """C view of the board: model slot, arena regions, console and clock. `model_in_image`: the
    application links its program in (emlkit export), so the platform reads no EMDL slot."""
    g = "BOARD_CONFIG_H"
    out = [f"/* Generated from {board.directory.name}/board.toml by emlkit/deploy/boards.py: do not edit. */", f"#ifndef {g}", f"#define {g}", ""]
    out.append(f'#define BOARD_NAME "{board.name}"')
    if model_in_image:
        out.append("#define BOARD_MODEL_IN_IMAGE 1")
    out.append(f"#define BOARD_CPU_HZ {board.cpu_hz}u")
    if board.uart_base is not None:
        out.append(f"#define BOARD_UART_BASE {board.uart_base:#010x}u")
        out.append(f"#define BOARD_UART_HZ {board.uart_hz or board.cpu_hz}u")
    if board.fpgaio is not None:
        out.append(f"#define BOARD_FPGAIO_BASE {board.fpgaio[0]:#010x}u")
        out.append(f"#define BOARD_FPGAIO_HZ {board.fpgaio[1]}ull")
    out.append(f"#define BOARD_MODEL_ADDR {board.model.address:#010x}u")
    out.append(f"#define BOARD_MODEL_MAX {board.model.max_size:#x}u")
    out.append(f"#define BOARD_ARENA_COUNT {len(board.arena_regions)}u")
    # {name, base, size, shared}: 1 the model's region (the runner gets the part after the
    # loaded model), 2 the data region (the part between the libc heap and the stack).
    items = []
    for r in board.arena_regions:
        m = board.memory(r)
        shared = 1 if r == board.model.region else 2 if r == board.link.data else 0
        items.append(f'{{"{m.name}", {m.base:#010x}u, {m.size:#x}u, {shared}}}')
    out.append("#define BOARD_ARENA_REGIONS { " + ", ".join(items) + " }")
    if board.npu is not None:
        out.append(f"#define BOARD_NPU_BASE {board.npu.base:#010x}u")
        out.append(f"#define BOARD_NPU_IRQ {board.npu.irq}")
        out.append(f"#define BOARD_NPU_SECURE {int(board.npu.secure)}")
        out.append(f"#define BOARD_NPU_PRIVILEGED {int(board.npu.privileged)}")
        out.append(f"#define BOARD_NPU_TIMEOUT_US {board.npu.timeout_ms * 1000}u")
    out += ["", "#endif", ""]
    return "\n".join(out)


def flags_cmake(board: Board) -> str:
    def lst(v: tuple[str, ...]) -> str:
        return ";".join(v)

    return "\n".join(
        [
            f"# Generated from {board.directory.name}/board.toml by emlkit/deploy/boards.py: do not edit.",
            f'set(BOARD_CPU "{board.cpu}")',
            f'set(BOARD_CFLAGS "{lst(board.cflags)}")',
            f'set(BOARD_NOMVE_CFLAGS "{lst(board.nomve_cflags)}")',
            f"set(BOARD_MODEL_ADDR {board.model.address:#x})",
            f"set(BOARD_MODEL_MAX {board.model.max_size})",
            f'set(BOARD_HAS_UART {"ON" if board.uart_base is not None else "OFF"})',
            f"set(BOARD_KERNEL_SCRATCH {board.kernel_scratch})",
            "",
        ]
    )


def _write_if_changed(path: Path, text: str) -> None:
    # Unchanged outputs keep their timestamps, so a re-configure rebuilds nothing.
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def generate(board: Board, out_dir: Path, code_in_fallback: bool = False) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "board_memory.ld": memory_ld(board, code_in_fallback),
        "board_config.h": config_h(board),
        "board_flags.cmake": flags_cmake(board),
    }
    for fname, text in files.items():
        _write_if_changed(out_dir / fname, text)
    return [out_dir / f for f in files]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Read, check and use boards/<name>/board.toml")
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen", help="write board_memory.ld, board_config.h, board_flags.cmake")
    g.add_argument("board", help="board name or folder")
    g.add_argument("--out", required=True, type=Path)
    g.add_argument("--code-in-fallback", action="store_true", help="place code in [link].code_fallback")
    c = sub.add_parser("check", help="validate board.toml files")
    c.add_argument("boards", nargs="*", help="names (default: all)")
    sub.add_parser("list", help="list the boards")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.cmd == "gen":
            generate(load_board(args.board), args.out, args.code_in_fallback)
        elif args.cmd == "check":
            for name in args.boards or list_boards():
                b = load_board(name)
                log.info("%s: ok (%s)", b.name, ", ".join(f"{m.name} {m.size // 1024} KiB" for m in b.memories))
        else:
            for name in list_boards():
                log.info("%s", name)
    except BoardError as e:
        log.error("error: %s", e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
