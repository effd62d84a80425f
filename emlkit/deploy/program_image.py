"""Per-program runner images: link only what a program uses.

    python -m emlkit.deploy.program_image model.bpte --board corstone-300        # prints the image's sizes
    python -m emlkit.deploy.program_image --ops cortex_m::quantized_add.out,... --board corstone-300
    python -m emlkit.deploy.program_image --core --board corstone-300           # the runtime core's size

The board's full image (emlkit/deploy/build.py, every operator registered) is built once and cached; its
objects and libraries are what a program's image links from. For a program, only the operator table
(firmware/ops/registry.c) is compiled again, against the firmware's ops/*.def cut down to the
program's operators (emlkit/deploy/opset.py), and the runner is linked with --gc-sections, so only the
adapters and kernels that table reaches stay in. Programs without an Ethos-U delegate link
runner/cpu_only.c instead of runner/npu.c and so carry no backend or driver.

Images are cached per operator set in <board build dir>/programs/<hash>/runner.elf: the hash covers
the operator list, the delegate flag and the full image's identity (path, time, size), so the ~40
zoo models of a suite run share a few images and any firmware change relinks them.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from emlkit.deploy.boards import BoardError
from emlkit.locks import held
from emlkit.deploy.build import FIRMWARE_DIR, BuildError, BuildOptions, BuildResult, build_image, image_sizes
from emlkit.deploy.opset import ETHOSU_BACKEND, program_facts, registration
from emlkit.errors import EXIT_USAGE, AotError

log = logging.getLogger(__name__)

RECIPE = "link_recipe.txt"          # written by firmware/CMakeLists.txt
REGISTRY_C = FIRMWARE_DIR / "ops" / "registry.c"
CORE_ENTRY_C = FIRMWARE_DIR / "tools" / "core_entry.c"
NPU_OBJECT = "npu.c"                # runner/npu.c's object: replaced by cpu_only.c without a delegate


@dataclass(frozen=True)
class OpSet:
    """What a program needs linked: its operators (name, overload) and whether it has an Ethos-U delegate."""

    operators: tuple[tuple[str, str], ...]
    npu: bool

    @classmethod
    def of_program(cls, data: bytes) -> OpSet:
        """From a .pte or .bpte. A delegate other than the Ethos-U one is refused: no image runs it."""
        facts = program_facts(data)
        other = [d for d in facts.delegates if d != ETHOSU_BACKEND]
        if other:
            raise AotError(f"the program delegates to {', '.join(other)}; the firmware has only the {ETHOSU_BACKEND}")
        return cls(tuple(sorted(set(facts.operators))), bool(facts.delegates))

    @classmethod
    def of_file(cls, path: Path) -> OpSet:
        """of_program of a file; its problems (missing, unreadable, damaged) name the file."""
        if not path.is_file():
            raise AotError(f"{path}: no such file", EXIT_USAGE)
        try:
            return cls.of_program(path.read_bytes())
        except OSError as e:
            raise AotError(f"{path}: cannot read it ({e.strerror})", EXIT_USAGE) from e
        except AotError as e:
            raise AotError(f"{path}: {e}", e.exit_code) from e

    @classmethod
    def parse(cls, text: str, npu: bool = False) -> OpSet:
        """`name.overload,...` (an explicit list, e.g. for an image shared by several models)."""
        ops = []
        for item in filter(None, (s.strip() for s in text.split(","))):
            name, dot, overload = item.rpartition(".")
            if not dot or not name:
                raise AotError(f"operator '{item}': write it as namespace::name.overload, e.g. cortex_m::quantized_add.out")
            ops.append((name, overload))
        return cls(tuple(sorted(set(ops))), npu)

    def union(self, other: OpSet) -> OpSet:
        return OpSet(tuple(sorted(set(self.operators) | set(other.operators))), self.npu or other.npu)

    def key(self, base_stamp: str) -> str:
        text = "\n".join([base_stamp, f"npu={int(self.npu)}", *(f"{n}.{o}" for n, o in self.operators)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_recipe(build_dir: Path) -> dict[str, list[str]]:
    """The compile and link facts CMake wrote for `runner` (firmware/CMakeLists.txt), as argument lists."""
    path = build_dir / RECIPE
    if not path.is_file():
        raise BuildError(f"{path} is missing: the base image was built by an older firmware/CMakeLists.txt "
                         f"(rebuild it: python -m emlkit.deploy.build --board ... --force)")
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        if not key:
            continue
        if key in ("c_flags", "link_flags", "compiler"):
            out[key] = shlex.split(value)
        else:  # CMake lists
            out[key] = [v for v in value.split(";") if v]
    return out


def _run(cmd: list[str], what: str) -> None:
    log.debug("$ %s", shlex.join(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        tail = "\n".join(p.stdout.splitlines()[-30:])
        raise BuildError(f"{what} failed (exit {p.returncode}):\n{tail}")


def _compile(recipe: dict[str, list[str]], src: Path, obj: Path, first_includes: list[Path]) -> None:
    incs = [f"-I{d}" for d in first_includes] + [f"-I{d}" for d in recipe.get("includes", [])]
    defs = [f"-D{d}" for d in recipe.get("defines", [])]
    _run([*recipe["compiler"], *recipe.get("c_flags", []), *recipe.get("compile_options", []), *defs, *incs,
          "-c", str(src), "-o", str(obj)], f"compiling {src.name}")


def _link(recipe: dict[str, list[str]], objects: list[str], libraries: list[str], link_opts: list[str], elf: Path,
          what: str) -> None:
    _run([*recipe["compiler"], *recipe.get("c_flags", []), *recipe.get("link_flags", []), *link_opts, *objects,
          "-Wl,--start-group", *libraries, "-lm", "-Wl,--end-group", "-o", str(elf)], what)


def _write_tables(tables: dict[str, str], ops_dir: Path) -> None:
    ops_dir.mkdir()
    for name, text in tables.items():
        (ops_dir / name).write_text(text)


def _install(tmp: Path, out_dir: Path) -> None:
    """Rename the finished folder into place; parallel suite workers never see half an image."""
    try:
        os.rename(tmp, out_dir)
    except OSError:  # another worker linked the same set first
        if not (out_dir / "runner.elf").is_file():
            raise


def link_program_image(base: BuildResult, ops: OpSet) -> BuildResult:
    """The runner for `ops`, linked from the base build's objects (cached by operator set)."""
    # The full image is relinked whenever an object or option changes (also with --force and the
    # same source stamp), so its identity keys the per-program images built from the same objects.
    if base.elf.exists():
        st = base.elf.stat()
        base_stamp = f"{base.elf.resolve()}:{st.st_mtime_ns}:{st.st_size}"
    else:  # the full image overflows the board (build.OVERFLOW_NOTE): the inputs' digest names the objects
        base_stamp = f"{base.build_dir.resolve()}:{(base.build_dir / '.inputs.sha256').read_text()}"
    out_dir = base.build_dir / "programs" / ops.key(base_stamp)
    elf = out_dir / "runner.elf"
    if elf.is_file():
        return BuildResult(base.board, out_dir, elf, image_sizes(elf), rebuilt=False)
    tables, _ = registration(list(ops.operators), generator="emlkit/deploy/program_image.py")
    recipe = read_recipe(base.build_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=out_dir.parent))
    try:
        _write_tables(tables, tmp / "ops")
        (tmp / "operators.txt").write_text("".join(f"{n}.{o}\n" for n, o in ops.operators)
                                           + (f"delegate {ETHOSU_BACKEND}\n" if ops.npu else ""))
        registry_obj = tmp / "registry.c.obj"
        # The cut tables come first on the include path: registry.c includes "cortex_m_ops.def" etc.
        _compile(recipe, REGISTRY_C, registry_obj, [tmp / "ops"])
        objects = [o for o in recipe["runner_objects"]
                   if not o.endswith(("/registry.c.obj", "/registry.c.o"))
                   and (ops.npu or not o.endswith((f"/{NPU_OBJECT}.obj", f"/{NPU_OBJECT}.o")))]
        if not ops.npu:
            objects += recipe["cpu_only_objects"]
        link_opts = [o if not o.startswith("-Wl,-Map=") else f"-Wl,-Map={tmp / 'runner.map'}"
                     for o in recipe.get("link_options", [])]
        _link(recipe, [str(registry_obj), *objects], recipe["libraries"], link_opts, tmp / "runner.elf",
              "linking the program's image")
        _install(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sizes = image_sizes(elf)
    log.info("%s: program image %s: text %d, data %d, bss %d bytes", base.build_dir.name, out_dir.name,
             sizes.get("text", 0), sizes.get("data", 0), sizes.get("bss", 0))
    return BuildResult(base.board, out_dir, elf, sizes, rebuilt=True)


_MAP_INPUT = re.compile(r"^ (\.(?:text|rodata|data)\S*)\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)\s+(\S+)", re.M)


def map_contributions(map_file: Path) -> dict[str, int]:
    """Bytes of code, read-only data and initialised data per input file (archive(member) or object),
    from a GNU ld map."""
    text = map_file.read_text()
    text = text[text.find("Linker script and memory map"):]
    out: dict[str, int] = {}
    for m in _MAP_INPUT.finditer(text):
        name = Path(m.group(3)).name
        out[name] = out.get(name, 0) + int(m.group(2), 16)
    return out


@dataclass
class CoreSize:
    elf: Path
    text: int
    data: int
    runtime: dict[str, int]     # runtime object -> bytes (code + rodata + data)
    libc: dict[str, int]        # C library / libgcc member -> bytes

    @property
    def total(self) -> int:
        return self.text + self.data


def core_size(board: str, opts: BuildOptions | None = None) -> CoreSize:
    """Link firmware/tools/core_entry.c with an empty operator table and the runtime library alone (no
    kernels reachable, no board: no start-up code or link script), and size what the linker keeps."""
    if board == "host":
        raise AotError("the core is sized for a board's CPU: give --board corstone-300 or another board", EXIT_USAGE)
    base = build_image(board, opts or BuildOptions(), objects_only=True)
    with held(base.build_dir / "core"):  # the folder is rebuilt from scratch: one caller at a time
        return _core_size_locked(base)


def _core_size_locked(base: BuildResult) -> CoreSize:
    recipe = read_recipe(base.build_dir)
    out_dir = base.build_dir / "core"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    tables, _ = registration([], generator="emlkit/deploy/program_image.py --core")
    _write_tables(tables, out_dir / "ops")
    _compile(recipe, REGISTRY_C, out_dir / "registry.c.obj", [out_dir / "ops"])
    _compile(recipe, CORE_ENTRY_C, out_dir / "core_entry.c.obj", [])
    # The CPU flags of the runner's link, without its board: no link script, map or start-up.
    cpu = [o for o in recipe.get("link_options", []) if o.startswith(("-mcpu", "-march", "-mfloat-abi", "-mfpu", "-mthumb"))]
    elf = out_dir / "core.elf"
    runtime_lib = [lib for lib in recipe["libraries"] if Path(lib).name == "libfw_runtime.a"]
    _link(recipe, [str(out_dir / "core_entry.c.obj"), str(out_dir / "registry.c.obj")], runtime_lib,
          [*cpu, "-nostartfiles", "--specs=nosys.specs", "-Wl,--gc-sections", "-Wl,-e,core_entry",
           f"-Wl,-Map={out_dir / 'core.map'}"], elf, "linking the runtime core")
    sizes = image_sizes(elf)
    parts = map_contributions(out_dir / "core.map")
    runtime = {k: v for k, v in parts.items() if k.startswith("libfw_runtime.a(") or k.endswith(".c.obj")}
    libc = {k: v for k, v in parts.items() if k not in runtime}
    return CoreSize(elf, sizes.get("text", 0), sizes.get("data", 0), runtime, libc)


def program_image(board: str, opts: BuildOptions | None, program: bytes | Path | OpSet, jobs: int = 2) -> BuildResult:
    """The image that runs `program` (.pte/.bpte bytes or path, or an OpSet) on `board`."""
    if board == "host":
        raise AotError("per-program images are for the boards; the host runner registers every operator", EXIT_USAGE)
    if isinstance(program, OpSet):
        ops = program
    elif isinstance(program, Path):
        ops = OpSet.of_file(program)
    else:
        ops = OpSet.of_program(program)
    base = build_image(board, opts or BuildOptions(), jobs=jobs, objects_only=True)
    return link_program_image(base, ops)


T = TypeVar("T")


def _or_exit(work: Callable[[], T]) -> T | int:
    """work()'s result, or the exit status after its error's one line (AotError: its own; a build or board
    problem: EXIT_USAGE)."""
    try:
        return work()
    except AotError as e:
        log.error("error: %s", e)
        return e.exit_code
    except (BuildError, BoardError) as e:
        log.error("error: %s", e)
        return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Link the runner image for one program (or an operator list)")
    ap.add_argument("program", type=Path, nargs="*", help=".pte/.bpte files: one image for all of them")
    ap.add_argument("--ops", default="", help="explicit operators: namespace::name.overload,...")
    ap.add_argument("--npu", action="store_true", help="with --ops: include the Ethos-U backend and driver")
    ap.add_argument("--core", action="store_true",
                    help="size the runtime core (loader, planner, method, status; no kernels, no board) and exit")
    ap.add_argument("--board", default="corstone-300")
    ap.add_argument("--no-mve", action="store_true", help="portable C kernels")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    if args.core:
        c = _or_exit(lambda: core_size(args.board, BuildOptions(mve=not args.no_mve)))
        if isinstance(c, int):
            return c
        for name, n in sorted(c.runtime.items(), key=lambda kv: -kv[1]):
            print(f"  {n:7,d}  {name}")
        print(f"  {sum(c.libc.values()):7,d}  C library and libgcc ({len(c.libc)} members)")
        print(f"runtime core ({c.elf}): text {c.text:,}, data {c.data:,}: {c.total:,} bytes "
              f"({sum(c.runtime.values()):,} runtime, {sum(c.libc.values()):,} C library)")
        return 0
    def link() -> BuildResult:
        ops = OpSet.parse(args.ops, args.npu)
        for p in args.program:
            ops = ops.union(OpSet.of_file(p))
        if not ops.operators and not ops.npu:
            raise AotError("give a program or --ops", EXIT_USAGE)
        return program_image(args.board, BuildOptions(mve=not args.no_mve), ops)

    r = _or_exit(link)
    if isinstance(r, int):
        return r
    s = r.sizes
    print(f"{r.elf}: text {s.get('text', 0)}, data {s.get('data', 0)}, bss {s.get('bss', 0)}; "
          f"image bytes (text+data) {s.get('text', 0) + s.get('data', 0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
