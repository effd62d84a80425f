"""`emlkit flash ELF`: put a firmware image on a board.

Two ways, chosen by the options:
- `--probe UID|auto --pyocd-target NAME`: pyOCD programs the image through a CMSIS-DAP, ST-Link or J-Link
  probe (`pyocd flash`), for boards with on-chip flash. pyOCD must be installed (requirements.txt pins it).
- `--mps3 DRIVE` (or `--mps3-dir DIR`): an Arm MPS3 FPGA board loads images from its SD card at power-on.
  The ELF's loadable bytes are cut into one raw binary per board memory (SOFTWARE/<memory>.bin, 8.3 names as
  the MCC requires) and images.txt (in the board's [mps3].images_dir) lists them at the MCC's address of that
  memory. The existing images.txt is kept as images.bak; every file is written under a temporary name and
  renamed, so an interrupted flash leaves the card's old files whole.
No board was connected while this was written: the files and the pyOCD command are what is tested.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from emlkit.deploy.boards import Board
from emlkit.errors import AotError
from emlkit.requests import FlashRequest

log = logging.getLogger(__name__)

PT_LOAD = 1
EM_ARM = 40


@dataclass(frozen=True)
class Segment:
    address: int   # load (physical) address: where the bytes must be at reset
    data: bytes


def load_segments(elf: Path) -> list[Segment]:
    """The bytes an ELF32 little-endian ARM image loads (PT_LOAD with file bytes), by load address."""
    raw = elf.read_bytes()
    if raw[:4] != b"\x7fELF":
        raise AotError(f"{elf}: not an ELF file")
    if raw[4] != 1 or raw[5] != 1:
        raise AotError(f"{elf}: not a 32-bit little-endian ELF (an Arm Cortex-M image is)")
    (e_machine,) = struct.unpack_from("<H", raw, 18)
    if e_machine != EM_ARM:
        raise AotError(f"{elf}: built for machine {e_machine}, not Arm (40)")
    e_phoff, = struct.unpack_from("<I", raw, 28)
    e_phentsize, e_phnum = struct.unpack_from("<HH", raw, 42)
    segs = []
    for k in range(e_phnum):
        p_type, p_offset, _vaddr, p_paddr, p_filesz, _memsz, _flags, _align = struct.unpack_from(
            "<IIIIIIII", raw, e_phoff + k * e_phentsize)
        if p_type != PT_LOAD or p_filesz == 0:
            continue
        if p_offset + p_filesz > len(raw):
            raise AotError(f"{elf}: segment {k} runs past the end of the file: the ELF is truncated")
        segs.append(Segment(p_paddr, raw[p_offset:p_offset + p_filesz]))
    if not segs:
        raise AotError(f"{elf}: no loadable bytes")
    return sorted(segs, key=lambda s: s.address)


# ---------------------------------------------------------------- MPS3 SD card


@dataclass
class Mps3Image:
    memory: str
    cpu_address: int     # where the CPU sees the first byte
    mcc_address: int     # where the MCC writes it
    file: str            # SOFTWARE\<file>
    data: bytes


def mps3_images(segments: list[Segment], b: Board) -> list[Mps3Image]:
    """One raw image per board memory the segments fall in (gaps inside a memory are zero-filled)."""
    if b.mps3 is None:
        raise AotError(f"board '{b.name}' is not an MPS3 board (no [mps3] in board.toml): flash it with --probe")
    by_mem: dict[str, list[Segment]] = {}
    for s in segments:
        mem = next((m for m in b.memories if m.contains(s.address, len(s.data))), None)
        if mem is None:
            raise AotError(f"the image loads {len(s.data)} bytes at {s.address:#x}, outside every memory of "
                           f"{b.name}: was it built for this board?")
        if mem.name not in b.mps3.mcc_address:
            raise AotError(f"the image loads bytes into '{mem.name}' at {s.address:#x}, which the MPS3's "
                           f"controller cannot load ([mps3].mcc_address has {', '.join(b.mps3.mcc_address)})")
        by_mem.setdefault(mem.name, []).append(s)
    images = []
    for name, segs in by_mem.items():
        start = segs[0].address
        buf = bytearray(segs[-1].address + len(segs[-1].data) - start)
        for s in segs:
            buf[s.address - start:s.address - start + len(s.data)] = s.data
        mem = b.memory(name)
        images.append(Mps3Image(name, start, b.mps3.mcc_address[name] + (start - mem.base), f"{name[:8]}.bin",
                                bytes(buf)))
    if len(images) > 32:
        raise AotError("the MPS3 loads at most 32 images")
    return sorted(images, key=lambda i: i.cpu_address)


def images_txt(images: list[Mps3Image], elf: Path, b: Board) -> str:
    lines = ["TITLE: Arm MPS3 FPGA prototyping board Images Configuration File",
             f"; Written by emlkit flash: {elf.name} for {b.name}", "", "[IMAGES]",
             f"TOTALIMAGES: {len(images)}                      ;Number of Images (Max: 32)", ""]
    for k, im in enumerate(images):
        lines += [f"IMAGE{k}ADDRESS: {im.mcc_address:#010x}           ;MCC address of {im.memory} "
                  f"(CPU {im.cpu_address:#010x}, {len(im.data)} bytes)",
                  f"IMAGE{k}UPDATE: AUTO                  ;Image Update:NONE/AUTO/FORCE",
                  f"IMAGE{k}FILE: \\SOFTWARE\\{im.file}", ""]
    return "\r\n".join(lines)  # the MCC reads DOS text files


def _replace(path: Path, data: bytes) -> None:
    """Write under a temporary name in the same folder, then rename: never a half-written file."""
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_mps3(root: Path, images: list[Mps3Image], elf: Path, b: Board, card: bool) -> list[Path]:
    """SOFTWARE/*.bin and <images_dir>/images.txt under `root`. `card`: root is the board's drive, which
    must already hold the images_dir of the FPGA image (the board's own files are not created here)."""
    assert b.mps3 is not None
    idir = root / b.mps3.images_dir
    if card:
        if not (root / "MB").is_dir():
            raise AotError(f"{root} is not an MPS3 drive (no MB folder): mount the board's USB drive (V2M-MPS3)")
        # another board revision (HBI0309B for HBI0309C) keeps the same application note folder
        idir = next((d for d in [idir, *sorted(root.glob(f"MB/*/{idir.name}"))] if d.is_dir()), idir)
        if not idir.is_dir():
            raise AotError(f"{idir} does not exist: the SD card has no {Path(b.mps3.images_dir).name} FPGA image "
                           "(install it from Arm's AN547 package first)")
    idir.mkdir(parents=True, exist_ok=True)
    soft = root / "SOFTWARE"
    soft.mkdir(exist_ok=True)
    written = []
    for im in images:
        _replace(soft / im.file, im.data)
        written.append(soft / im.file)
    txt = idir / "images.txt"
    if txt.is_file() and not (idir / "images.bak").exists():
        shutil.copyfile(txt, idir / "images.bak")
    _replace(txt, images_txt(images, elf, b).encode())
    written.append(txt)
    return written


# ---------------------------------------------------------------- pyOCD


def pyocd_command(elf: Path, target: str, probe: str, frequency: int | None = None, erase: str = "auto",
                  pyocd: list[str] | None = None) -> list[str]:
    """`pyocd flash` for this image: the target type, the probe (unless auto; a UID, optionally prefixed with
    pyOCD's probe type: cmsisdap:, stlink:, jlink:) and the ELF. --no-wait: fail at once without a probe."""
    cmd = list(pyocd or ["pyocd"]) + ["flash", "--no-wait", "--target", target]
    if probe != "auto":
        cmd += ["--uid", probe]
    if frequency:
        cmd += ["--frequency", str(frequency)]
    cmd += ["--erase", erase, "--format", "elf", str(elf)]
    return cmd


def find_pyocd() -> list[str] | None:
    """How to start pyOCD: its script next to this Python, on PATH, or None when it is not installed."""
    here = Path(sys.executable).parent / "pyocd"
    if here.is_file():
        return [str(here)]
    found = shutil.which("pyocd")
    return [found] if found else None


# ---------------------------------------------------------------- command


def check_arguments(elf: Path, probe: str | None, pyocd_target: str | None) -> None:
    """The usage errors the options alone show (the CLI asks before anything heavy is imported)."""
    if not elf.is_file():
        raise AotError(f"{elf}: no such image (build the exported project: cmake --build build)")
    if probe and not pyocd_target:
        raise AotError("--probe needs --pyocd-target (the chip, e.g. stm32h743zitx; `pyocd list --targets` lists "
                       "them); an MPS3 board is flashed through its SD card: --mps3 DRIVE")


def flash(req: FlashRequest) -> int:
    """`emlkit flash`: program a board through pyOCD (--probe) or write an MPS3's SD-card files."""
    elf = Path(req.elf)
    check_arguments(elf, req.probe, req.pyocd_target)
    segments = load_segments(elf)
    if req.probe:
        return _flash_probe(req, elf, segments)
    b = req.board
    if b is None:
        raise AotError("--mps3/--mps3-dir need --board (the board whose memory map the image uses)")
    images = mps3_images(segments, b)
    root = Path(req.mps3 or req.mps3_dir or ".")
    if req.dry_run:
        for im in images:
            print(f"SOFTWARE/{im.file}: {len(im.data)} bytes, {im.memory} at {im.cpu_address:#010x} "
                  f"(MCC {im.mcc_address:#010x})")
        print(images_txt(images, elf, b).replace("\r\n", "\n"))
        return 0
    if req.mps3 and not root.is_dir():
        raise AotError(f"{root}: no such drive: mount the MPS3's USB drive (V2M-MPS3) and give its folder")
    written = write_mps3(root, images, elf, b, card=bool(req.mps3))
    for p in written:
        log.info("wrote %s", p)
    if req.mps3:
        log.info("sync the drive (or eject it), then reset the board: the MCC loads the images at power-on")
    return 0


def _flash_probe(req: FlashRequest, elf: Path, segments: list[Segment]) -> int:
    pyocd = find_pyocd()
    assert req.probe is not None and req.pyocd_target is not None  # check_arguments
    cmd = pyocd_command(elf, req.pyocd_target, req.probe, req.frequency, req.erase, pyocd)
    if req.dry_run:
        print(" ".join(cmd))
        return 0
    if pyocd is None:
        raise AotError("pyOCD is not installed: pip install pyocd==0.46.0 (it is in requirements.txt)")
    log.info("$ %s", " ".join(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        last = [ln for ln in p.stdout.splitlines() if ln.strip()][-1:] or [f"exit {p.returncode}"]
        raise AotError(f"pyOCD could not flash {elf.name}: {last[0].strip()}")
    log.info("flashed %s (%d bytes in %d segments)", elf, sum(len(s.data) for s in segments), len(segments))
    return 0
