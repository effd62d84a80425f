"""Build firmware images for a board with CMake (cached), and make model.bin.

    python -m emlkit.deploy.build --board corstone-300            # build/corstone-300-Release
    python -m emlkit.deploy.build --board corstone-300 --no-mve   # build/corstone-300-Release-nomve

The build directory is build/<board>-<type>[-<variant>...]. A stamp of the
inputs (source tree state + options) skips CMake entirely when nothing changed;
otherwise CMake's own dependency tracking rebuilds only what changed.

model.bin = 16-byte EMDL header + .bpte (see firmware/platform/platform.h); the
simulators load it at the board's model address.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from emlkit.deploy.boards import BOARDS_DIR, REPO_ROOT, Board, BoardError, load_board
from emlkit.hostfw import cmake_binary
from emlkit.locks import held

log = logging.getLogger(__name__)

FIRMWARE_DIR = REPO_ROOT / "firmware"
TOOLCHAIN_FILE = FIRMWARE_DIR / "cmake" / "arm-none-eabi.cmake"
BUILD_ROOT = REPO_ROOT / "build"
EMDL_MAGIC = b"EMDL"
FLAG_SAVE_OUTPUTS = 1
FLAG_ETDUMP = 2  # firmware/platform/platform.h PLAT_FLAG_ETDUMP
FLAG_DEBUG = 4  # PLAT_FLAG_DEBUG: with an ETDump, every call's output (debug.bin)
_SOURCE_SUFFIXES = {".c", ".h", ".S", ".s", ".ld", ".cmake", ".txt", ".toml", ".def", ".py", ".in"}


class BuildError(RuntimeError):
    """CMake or the compiler failed; the message carries the tail of the log."""


@dataclass(frozen=True)
class BuildOptions:
    build_type: str = "Release"
    mve: bool = True
    console: str = "semihosting"  # or "uart"
    semihosting: bool = True
    code_in_sram: bool = False
    embed_model: Path | None = None
    source_dir: Path = FIRMWARE_DIR  # tests use tests/board_fw
    extra_defines: tuple[tuple[str, str], ...] = ()

    def variant_suffix(self) -> str:
        parts = []
        if self.source_dir.resolve() != FIRMWARE_DIR.resolve():
            parts.append(self.source_dir.name)
        if not self.mve:
            parts.append("nomve")
        if self.console != "semihosting":
            parts.append(self.console)
        if not self.semihosting:
            parts.append("nosh")
        if self.code_in_sram:
            parts.append("sramcode")
        if self.embed_model is not None:
            parts.append("embed-" + self.embed_model.stem)
        return "".join("-" + p for p in parts)

    def cmake_defines(self) -> dict[str, str]:
        d = {
            "CMAKE_BUILD_TYPE": self.build_type,
            "FW_USE_MVE": "ON" if self.mve else "OFF",
            "FW_CONSOLE": self.console,
            "FW_SEMIHOSTING": "ON" if self.semihosting else "OFF",
            "FW_CODE_IN_SRAM": "ON" if self.code_in_sram else "OFF",
            "EMBED_MODEL": str(self.embed_model.resolve()) if self.embed_model else "",
        }
        d.update(dict(self.extra_defines))
        return d


@dataclass
class BuildResult:
    board: str
    build_dir: Path
    elf: Path
    sizes: dict[str, int] = field(default_factory=dict)  # text/data/bss from arm-none-eabi-size
    rebuilt: bool = False
    overflow: str | None = None  # the full link's overflow error, when only the objects were built (OVERFLOW_NOTE)


def build_dir_for(board: str, opts: BuildOptions) -> Path:
    return BUILD_ROOT / f"{board}-{opts.build_type}{opts.variant_suffix()}"


def _cmake() -> str:
    found = cmake_binary()
    if not found:
        raise BuildError("cmake not found: install it (pip install cmake, or apt-get install cmake)")
    return found


def _tree_state(paths: list[Path]) -> list[tuple[str, int, int]]:
    out = []
    for root in paths:
        if root.is_file():
            files = [root]
        elif root.is_dir():
            files = [p for p in root.rglob("*") if p.is_file() and p.suffix in _SOURCE_SUFFIXES and "__pycache__" not in p.parts]
        else:
            continue
        for p in files:
            st = p.stat()
            out.append((str(p), st.st_mtime_ns, st.st_size))
    return sorted(out)


def _inputs_digest(board: str, opts: BuildOptions) -> str:
    watched = [opts.source_dir, FIRMWARE_DIR, BOARDS_DIR / board, BOARDS_DIR / "common", Path(__file__).with_name("boards.py")]
    if opts.embed_model:
        watched.append(opts.embed_model)
    payload = json.dumps({"defines": opts.cmake_defines(), "files": _tree_state(watched)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _run(cmd: list[str], cwd: Path, what: str) -> str:
    log.debug("$ %s", " ".join(cmd))
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        tail = "\n".join(p.stdout.splitlines()[-40:])
        raise BuildError(f"{what} failed (exit {p.returncode}):\n{tail}")
    return p.stdout


def image_sizes(elf: Path) -> dict[str, int]:
    """text/data/bss of an ELF (Berkeley format of arm-none-eabi-size)."""
    tool = shutil.which("arm-none-eabi-size")
    if not tool:
        return {}
    out = subprocess.run([tool, str(elf)], stdout=subprocess.PIPE, text=True, check=True).stdout.splitlines()
    text, data, bss = (int(x) for x in out[1].split()[:3])
    return {"text": text, "data": data, "bss": bss}


# A board's full image (every operator) may not fit its flash while a program's image does (the micro:bit's 220 KB):
# the full link's overflow is kept here, and the per-program images link from the objects all the same.
OVERFLOW_NOTE = "full-image-overflow.txt"
OVERFLOW_RE = re.compile(r"region [`'](\w+)' overflowed by (\d+) bytes")  # ld: a memory region too small


def build_image(board: str, opts: BuildOptions | None = None, jobs: int = 2, force: bool = False,
                objects_only: bool = False) -> BuildResult:
    """Configure and build `runner` for `board`; skip when the inputs are unchanged. OBJECTS_ONLY: a full image
    that overflows the board's memories is no error (its `elf` is then absent): the caller links its own image
    from the objects (emlkit/deploy/program_image.py)."""
    opts = opts or BuildOptions()
    b: Board | None = None
    if board != "host":
        b = load_board(board)  # validates board.toml with a clear error before CMake runs
        if opts.embed_model is not None:
            if not opts.embed_model.is_file():
                raise BuildError(f"--embed-model {opts.embed_model}: file not found")
            size = opts.embed_model.stat().st_size
            if size > b.max_model_bytes:
                raise BuildError(
                    f"{opts.embed_model} is {size} bytes; the {b.name} model slot holds {b.max_model_bytes} "
                    f"bytes at {b.model.address:#x} ([model].max_size in board.toml): use a smaller model"
                )
    bdir = build_dir_for(board, opts)
    with held(bdir):  # one build of a folder at a time; a waiter then finds it up to date
        res = _build_locked(board, b, opts, bdir, jobs, force)
    if not objects_only and res.overflow is not None:
        raise BuildError(res.overflow)
    return res


def _build_locked(board: str, b: Board | None, opts: BuildOptions, bdir: Path, jobs: int, force: bool) -> BuildResult:
    elf = bdir / ("runner.elf" if b is not None else "runner")
    stamp = bdir / ".inputs.sha256"
    digest = _inputs_digest(board, opts)
    note = bdir / OVERFLOW_NOTE
    if not force and stamp.exists() and stamp.read_text() == digest and (elf.exists() or note.is_file()):
        if not elf.exists():
            return BuildResult(board, bdir, elf, {}, rebuilt=False, overflow=note.read_text())
        return BuildResult(board, bdir, elf, image_sizes(elf) if b else {}, rebuilt=False)
    note.unlink(missing_ok=True)

    bdir.mkdir(parents=True, exist_ok=True)
    cmd = [_cmake(), "-S", str(opts.source_dir), "-B", str(bdir), f"-DBOARD={board}", f"-DFW_PYTHON={sys.executable}"]
    if b is not None:
        cmd.append(f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN_FILE}")
    cmd += [f"-D{k}={v}" for k, v in opts.cmake_defines().items()]
    _run(cmd, REPO_ROOT, f"CMake configure for {board}")
    # fw_runner_cpu: the objects per-program images link instead of the NPU part (emlkit/deploy/program_image.py)
    targets = ["runner", "fw_runner_cpu"] if b is not None and opts.source_dir.resolve() == FIRMWARE_DIR.resolve() else ["runner"]
    try:
        _run([_cmake(), "--build", str(bdir), "--target", *targets, "-j", str(jobs)], REPO_ROOT, f"building {board} firmware")
    except BuildError as err:
        overflow = OVERFLOW_RE.search(str(err))
        if len(targets) < 2 or overflow is None:
            raise
        # the objects are built (the link comes last); the CPU-only part the program images take too
        _run([_cmake(), "--build", str(bdir), "--target", targets[1], "-j", str(jobs)], REPO_ROOT, f"building {board} objects")
        elf.unlink(missing_ok=True)
        note.write_text(str(err))
        stamp.write_text(digest)
        log.info("%s: the full image does not fit the board (%s); program images link from its objects", bdir.name,
                 overflow.group(0))
        return BuildResult(board, bdir, elf, {}, rebuilt=True, overflow=str(err))
    if not elf.exists():
        raise BuildError(f"build finished but {elf} is missing")
    stamp.write_text(digest)
    sizes = image_sizes(elf) if b else {}
    if sizes:
        log.info("%s: text %d, data %d, bss %d bytes (%s)", bdir.name, sizes["text"], sizes["data"], sizes["bss"], elf)
    return BuildResult(board, bdir, elf, sizes, rebuilt=True)



# ---------------------------------------------------------------- model image


def emdl_image(bpte: bytes, save_outputs: bool = False, etdump: bool = False, debug: bool = False) -> bytes:
    """The bytes a simulator loads at the model address: EMDL header + .bpte. The flags ask the
    runner to write output_<i>.bin, etdump.etdp and debug.bin into the simulator's working directory."""
    if len(bpte) == 0:
        raise ValueError("empty .bpte: compile the model first (emlkit compile ...)")
    flags = (FLAG_SAVE_OUTPUTS if save_outputs else 0) | (FLAG_ETDUMP if etdump else 0) | (FLAG_DEBUG if debug else 0)
    return EMDL_MAGIC + struct.pack("<III", len(bpte), flags, 0) + bpte


def check_model_fits(board: Board, nbytes: int, what: str = "model") -> None:
    if nbytes > board.max_model_bytes:
        raise ValueError(
            f"{what} is {nbytes} bytes ({nbytes / 2**20:.1f} MiB) but the {board.name} model slot holds "
            f"{board.max_model_bytes} bytes at {board.model.address:#x} ([model].max_size in "
            f"boards/{board.name}/board.toml): use a smaller model or a board with more memory"
        )


def write_model_bin(bpte_path: Path, out: Path, board: Board, save_outputs: bool = False) -> Path:
    if not bpte_path.is_file():
        raise FileNotFoundError(f"{bpte_path}: no such .bpte (compile it with python -m emlkit compile)")
    data = bpte_path.read_bytes()
    check_model_fits(board, len(data), str(bpte_path))
    out.write_bytes(emdl_image(data, save_outputs))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build the firmware image for a board (cached)")
    ap.add_argument("--board", default="corstone-300")
    ap.add_argument("--build-type", default="Release", choices=["Release", "Debug", "RelWithDebInfo", "MinSizeRel"])
    ap.add_argument("--no-mve", action="store_true", help="portable C kernels: the board's nomve_cflags + -DFW_NO_MVE")
    ap.add_argument("--console", default="semihosting", choices=["semihosting", "uart"])
    ap.add_argument("--no-semihosting", action="store_true", help="for hardware without a debugger (needs --console uart)")
    ap.add_argument("--code-in-sram", action="store_true", help="code in [link].code_fallback")
    ap.add_argument("--embed-model", type=Path, help="link this .bpte into the image")
    ap.add_argument("--source", type=Path, default=FIRMWARE_DIR, help="CMake project (default firmware/)")
    ap.add_argument("--force", action="store_true", help="run CMake even if nothing changed")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    opts = BuildOptions(
        build_type=args.build_type,
        mve=not args.no_mve,
        console=args.console,
        semihosting=not args.no_semihosting,
        code_in_sram=args.code_in_sram,
        embed_model=args.embed_model,
        source_dir=args.source,
    )
    try:
        r = build_image(args.board, opts, jobs=args.jobs, force=args.force)
    except (BuildError, BoardError) as e:
        log.error("error: %s", e)
        return 2
    if not r.rebuilt:
        log.info("%s: up to date (%s)%s", r.build_dir.name, r.elf,
                 "" if not r.sizes else f", text {r.sizes['text']}, data {r.sizes['data']}, bss {r.sizes['bss']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
