"""`emlkit export MODEL --target T --board B -o DIR`: a self-contained firmware project.

DIR builds anywhere with CMake and arm-none-eabi-gcc alone:

    DIR/CMakeLists.txt          the application + add_subdirectory(emlkit/lib)
    DIR/cmake/arm-none-eabi.cmake   toolchain file
    DIR/main.c                  runs the model on its test input, checks, prints on the UART
    DIR/emlkit/                 the library: a subset of the repo's firmware/ in the same layout
        include/emlkit.h        the C API
        api/ runtime/           always
        ops/ kernels/           only the files the program's operators need; ops/*.def list only them
        npu/                    only for programs with an Ethos-U delegate
        lib/CMakeLists.txt      the library build (the repo's firmware/lib/CMakeLists.txt)
    DIR/board/                  start-up, platform layer (UART console), link script, generated memory map
    DIR/model/                  model_data.c/.h (program as a 16-byte aligned constant array, test
                                input, expected output), model.pte, model.etrecord, compile report
    DIR/README.md

The project is written to a temporary folder next to DIR and renamed into place at the end, so a failed or
interrupted export leaves an existing DIR as it was.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emlkit.deploy import boards
from emlkit.deploy.boards import BOARDS_DIR, REPO_ROOT, Board, BoardError
from emlkit.deploy.opset import IDENT as _IDENT
from emlkit.deploy.opset import ETHOSU_BACKEND, ProgramFacts, program_facts, registration
from emlkit.deploy.program_io import BundledCase, TensorBytes, bundled_case
from emlkit.errors import AotError
from emlkit.requests import HOST, BoardRef, ExportRequest

log = logging.getLogger(__name__)

FIRMWARE = REPO_ROOT / "firmware"
CORTEXM = BOARDS_DIR / "common" / "cortexm"
TEMPLATES = FIRMWARE / "export"


_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
_DEFINITION = re.compile(r"^(?P<head>[A-Za-z_][\w \t\*]*?)\b(?P<name>[A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{", re.M)


@dataclass
class ExportResult:
    out: Path
    model: str
    target: str
    board: str
    operators: list[str]
    sources: list[str]                     # library .c files copied, relative to emlkit/
    model_bytes: int
    uses_npu: bool
    files: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- what the program needs


def _c_text(path: Path) -> str:
    return _STRING.sub('""', _COMMENT.sub(" ", path.read_text()))


_MACRO = re.compile(r"^#define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
_INCLUDE = re.compile(r'^#include[ \t]+"([^"]+)"', re.M)
_MAX_NESTING = 8   # macros that expand to other generating macros (a file's own one to op_entry.h's)


def _parse_macros(text: str) -> dict[str, tuple[list[str], str]]:
    """name -> (parameters, body) of each function-like macro defined in `text` (`...` as __VA_ARGS__)."""
    macros = {}
    for m in _MACRO.finditer(text):
        params = [p.strip() for p in m.group(2).split(",")]
        params = ["__VA_ARGS__" if p == "..." else p for p in params]
        macros[m.group(1)] = (params, "\n".join(line.rstrip("\\").strip() for line in m.group(3).split("\n")))
    return macros


def _split_args(text: str) -> list[str]:
    """A call's arguments, split at the commas outside parentheses."""
    args, depth, cur = [], 0, []
    for ch in text:
        if ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            continue
        depth += (ch == "(") - (ch == ")")
        cur.append(ch)
    args.append("".join(cur).strip())
    return args


def _substitute(body: str, params: list[str], args: list[str]) -> str | None:
    """The body with the call's arguments in place: `#p` stringified (joined to a string literal just before
    it), `##` pasted; None when the argument count does not fit."""
    if params and params[-1] == "__VA_ARGS__":
        if len(args) < len(params) - 1:
            return None
        args = args[:len(params) - 1] + [", ".join(args[len(params) - 1:])]
    elif len(args) != len(params):
        return None
    values = dict(zip(params, args))
    names = "|".join(re.escape(p) for p in values)
    # one pass, so an argument that spells another parameter's name is not substituted again
    token = re.compile(rf'"([^"\\\n]*)"\s*(?<!#)#\s*({names})\b|(?<!#)#\s*({names})\b(?!\s*#)|\b({names})\b')

    def one(q: re.Match) -> str:
        if q.group(2):
            return f'"{q.group(1)}{values[q.group(2)]}"'
        if q.group(3):
            return f'"{values[q.group(3)]}"'
        return values[q.group(4)]
    return re.sub(r"\s*##\s*", "", token.sub(one, body))


def _calls(name: str, text: str, top_level: bool) -> list[str]:
    """The argument texts of the calls of macro `name` in `text`: at a line's start only for a file's own text
    (its top-level calls), anywhere in an expansion."""
    found = []
    head = re.compile(rf"^{name}\(" if top_level else rf"(?<![\w#]){name}\(", re.M)
    for m in head.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += (text[i] == "(") - (text[i] == ")")
            i += 1
        if depth == 0 and (not top_level or "\n" not in text[m.end():i]):
            found.append(text[m.end():i - 1])
    return found


def expand_generators(text: str, header_macros: str = "") -> str:
    """`text` plus the expansion of each top-level call of a function-like macro defined in it or in
    `header_macros` (the #define lines of the headers it includes; e.g. cortex_m_conv.c's CONV_OP(name, ...),
    which is op_entry.h's OP_ENTRIES, which defines two entry points per call): enough for _DEFINITION to see
    the functions they define. Expansions are expanded again, up to _MAX_NESTING levels."""
    macros = {**_parse_macros(header_macros), **_parse_macros(text)}
    out = [text]
    todo = [(_MACRO.sub("", text), True)]   # the definitions' own bodies are not calls
    for _ in range(_MAX_NESTING):
        nxt = []
        for chunk, top in todo:
            for name, (params, body) in macros.items():
                for call in _calls(name, chunk, top):
                    exp = _substitute(body, params, _split_args(call))
                    if exp is not None:
                        out.append(exp)
                        nxt.append((exp, False))
        if not nxt:
            break
        todo = nxt
    return "\n".join(out)


def included_macros(path: Path, dirs: tuple[Path, ...]) -> str:
    """The #define lines of the local headers `path` includes, directly or through other headers, found next
    to it or in `dirs`: where the generating macros its entry points use may live (firmware/ops/op_entry.h)."""
    seen: set[Path] = set()
    defines: list[str] = []
    todo = [path]
    while todo:
        src = todo.pop()
        raw = src.read_text()
        if src != path:
            defines += [m.group(0) for m in _MACRO.finditer(_COMMENT.sub(" ", raw))]
        for inc in _INCLUDE.findall(raw):
            for d in (src.parent, *dirs):
                h = (d / inc).resolve()
                if h.is_file() and h not in seen:
                    seen.add(h)
                    todo.append(h)
                    break
    return "\n".join(defines)


_HEADER_DIRS = (FIRMWARE / "ops", FIRMWARE / "kernels", FIRMWARE / "runtime", FIRMWARE / "include")


def c_symbols(path: Path) -> tuple[set[str], set[str]]:
    """(functions a C file defines with external linkage, identifiers it mentions)."""
    text = expand_generators(_c_text(path), included_macros(path, _HEADER_DIRS))
    defined = {m.group("name") for m in _DEFINITION.finditer(text)
               if "static" not in m.group("head").split() and m.group("name") not in ("if", "for", "while", "switch")}
    return defined, set(_IDENT.findall(text))


def source_closure(adapters: set[str], dirs: tuple[Path, ...] = (FIRMWARE / "ops", FIRMWARE / "kernels")) -> list[Path]:
    """The .c files of `dirs` that define the adapters, and every file they reach through the functions
    the others define: whole files, so the copy links whatever the linker keeps."""
    files = sorted(p for d in dirs for p in d.glob("*.c"))
    defs: dict[Path, set[str]] = {}
    uses: dict[Path, set[str]] = {}
    owner: dict[str, Path] = {}
    for f in files:
        defs[f], uses[f] = c_symbols(f)
        for name in defs[f]:
            owner.setdefault(name, f)
    missing = sorted(a for a in adapters if a not in owner)
    if missing:
        raise AotError(f"internal: no C file in firmware/ops defines {', '.join(missing)}")
    need = {owner[a] for a in adapters}
    todo = list(need)
    while todo:
        f = todo.pop()
        for ident in uses[f]:
            g = owner.get(ident)
            if g is not None and g not in need:
                need.add(g)
                todo.append(g)
    return sorted(need)


# ---------------------------------------------------------------- generated C


def c_array(decl: str, data: bytes) -> str:
    """`decl = {...};` with the bytes as hex, 16 to a line."""
    lines = [decl + " = {"]
    for i in range(0, len(data), 16):
        lines.append("  " + " ".join(f"0x{b:02x}," for b in data[i:i + 16]))
    lines.append("};")
    return "\n".join(lines)


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _describe(t: TensorBytes) -> str:
    return f"{t.c_type} {'x'.join(map(str, t.sizes))}, dim order {tuple(t.dim_order)}"


def int8_io_defines(io: dict[str, Any]) -> list[str]:
    """`--io int8` (emlkit/passes/int8_io.py): each int8 input's and output's scale and zero point as macros, since
    the program has no quantize there for eml_input_info to read them from."""
    lines = []
    for kind, what in (("inputs", "INPUT"), ("outputs", "OUTPUT")):
        for e in io.get(kind, []):
            lines += [f"/* {kind[:-1]} {e['index']} is int8 codes (--io): real = scale * (q - zero_point), "
                      f"q = clamp(round(real / scale) + zero_point, {e['qmin']}, {e['qmax']}) */",
                      f"#define EMLKIT_{what}{e['index']}_SCALE {float(e['scale'])!r}",
                      f"#define EMLKIT_{what}{e['index']}_ZERO_POINT ({int(e['zero_point'])})"]
    return lines + [""] if lines else []


def model_data(case: BundledCase, model: str, target: str, board: str, facts: ProgramFacts,
               io: dict[str, Any] | None = None) -> tuple[str, str]:
    """model_data.h and model_data.c; IO: the compile report's int8_io entry (--io int8)."""
    uses_npu = ETHOSU_BACKEND in facts.delegates
    h = [
        f"/* Generated by emlkit export: {model} compiled for {target}, for {board}. */",
        "#ifndef EMLKIT_MODEL_DATA_H",
        "#define EMLKIT_MODEL_DATA_H",
        "",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        f"#define EMLKIT_MODEL_NAME {_c_string(model)}",
        f"#define EMLKIT_MODEL_TARGET {_c_string(target)}",
        f"#define EMLKIT_BOARD_NAME {_c_string(board)}",
        f"#define EMLKIT_MODEL_USES_NPU {int(uses_npu)}",
        f"#define EMLKIT_MODEL_INSTRUCTIONS {facts.instructions}u /* in the method's chains */",
        f"#define EMLKIT_NUM_INPUTS {len(case.inputs)}u",
        f"#define EMLKIT_NUM_OUTPUTS {len(case.expected)}u",
        "",
        *int8_io_defines(io or {}),
        "typedef struct {",
        "  const void *data; /* in the tensor's dim order, as eml_set_input takes and eml_output gives it */",
        "  size_t nbytes;",
        "} emlkit_tensor_data;",
        "",
        "/* The compiled program (.pte), used in place: 16-byte aligned, in section .emlkit_model, which the",
        " * link script puts in the board's model memory. */",
        "extern const uint8_t emlkit_model[];",
        "extern const size_t emlkit_model_size;",
        "/* One test case: inputs, and the outputs the device must reproduce bit for bit (computed by the",
        " * compiler from the lowered, quantized program). */",
        "extern const emlkit_tensor_data emlkit_inputs[EMLKIT_NUM_INPUTS];",
        "extern const emlkit_tensor_data emlkit_expected[EMLKIT_NUM_OUTPUTS];",
        "",
        "#endif",
        "",
    ]
    c = [f"/* Generated by emlkit export: {model} compiled for {target}, for {board}. Do not edit. */",
         '#include "model_data.h"', "",
         "/* Where the program goes: section .emlkit_model, which board/link.ld places in the board's model",
         " * memory. Another build (e.g. the Zephyr sample) may define its own placement. */",
         "#ifndef EMLKIT_MODEL_ATTRIBUTES",
         '#define EMLKIT_MODEL_ATTRIBUTES __attribute__((aligned(16), section(".emlkit_model")))',
         "#endif", ""]
    c.append(f"/* {len(case.program)} bytes */")
    c.append(c_array(f"EMLKIT_MODEL_ATTRIBUTES const uint8_t emlkit_model[{len(case.program)}]", case.program))
    c.append(f"const size_t emlkit_model_size = {len(case.program)};")
    for kind, tensors in (("input", case.inputs), ("expected", case.expected)):
        for i, t in enumerate(tensors):
            c += ["", f"/* {kind} {i}: {_describe(t)} */"]
            c.append(c_array(f"static const uint8_t {kind}_{i}[{max(len(t.data), 1)}] __attribute__((aligned(16)))",
                             t.data or b"\0"))
        arr = "emlkit_inputs" if kind == "input" else "emlkit_expected"
        items = ", ".join(f"{{{kind}_{i}, {len(t.data)}u}}" for i, t in enumerate(tensors))
        c += ["", f"const emlkit_tensor_data {arr}[{len(tensors)}] = {{{items}}};"]
    c.append("")
    return "\n".join(h), "\n".join(c)


# ---------------------------------------------------------------- the project


def _check_board(board: BoardRef, facts: ProgramFacts) -> Board:
    if board == HOST:
        raise AotError("export writes firmware for a microcontroller board; 'host' is not one (use corstone-300)")
    if isinstance(board, Board):
        b = board
    else:
        try:
            b = boards.load_board(board)
        except BoardError as err:
            raise AotError(str(err)) from err
    cmake = (b.directory / "board.cmake").read_text() if (b.directory / "board.cmake").is_file() else ""
    if "common/cortexm/cortexm.cmake" not in cmake:
        raise AotError(f"board '{b.name}' does not use the Cortex-M platform layer (boards/common/cortexm): export "
                       "supports only those boards")
    if b.uart_base is None:
        raise AotError(f"board '{b.name}' has no uart_base in board.toml [board]: the exported firmware prints on the UART")
    other = [d for d in facts.delegates if d != ETHOSU_BACKEND]
    if other:
        raise AotError(f"the program delegates to {', '.join(other)}; the firmware has only the {ETHOSU_BACKEND}")
    if facts.delegates and b.npu is None:
        raise AotError(f"the program has an Ethos-U delegate but board '{b.name}' has no NPU ([npu] in board.toml): "
                       "export it for corstone-300 or corstone-320")
    return b


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def _library(root: Path, facts: ProgramFacts) -> tuple[list[str], list[str]]:
    """emlkit/ in `root`; returns (operators, .c files relative to emlkit/)."""
    tables, adapters = registration(facts.operators)
    lib = root / "emlkit"
    sources = source_closure(adapters)
    picked = [FIRMWARE / "include" / "emlkit.h", FIRMWARE / "lib" / "CMakeLists.txt"]
    for d in ("runtime", "api"):
        picked += sorted((FIRMWARE / d).glob("*.[ch]"))
    picked += [FIRMWARE / "ops" / "registry.c", *sources]  # the operator table, compiled against the cut .def files
    picked += sorted(p for d in ("ops", "kernels") for p in (FIRMWARE / d).glob("*.h"))
    if facts.delegates:
        picked += sorted((FIRMWARE / "npu").glob("*.[ch]"))
    for p in picked:
        _copy(p, lib / p.relative_to(FIRMWARE))
    for name, text in tables.items():
        (lib / "ops" / name).write_text(text)
    ops = [f"{n}.{o}" for n, o in facts.operators]
    return ops, sorted(str(p.relative_to(FIRMWARE)) for p in picked if p.suffix == ".c")


def _board(root: Path, b: Board, kernels: str) -> str:
    """board/ in `root`; returns the CPU flags as a CMake list."""
    d = root / "board"
    for name in ("startup.c", "platform.c", "cortexm.h", "region_bounds.h"):
        _copy(CORTEXM / name, d / name)
    link = b.directory / "link.ld" if (b.directory / "link.ld").is_file() else CORTEXM / "link.ld"
    _copy(link, d / "link.ld")
    _copy(FIRMWARE / "platform" / "platform.h", d / "platform.h")
    _copy(FIRMWARE / "platform" / "plat_fmt.c", d / "plat_fmt.c")
    (d / "board_memory.ld").write_text(boards.memory_ld(b))
    (d / "board_config.h").write_text(boards.config_h(b, model_in_image=True))
    flags = b.cflags if kernels == "mve" else b.nomve_cflags
    return ";".join(flags)


def _readme(model: str, target: str, b: Board, facts: ProgramFacts, case: BundledCase, report: dict[str, Any],
            ops: list[str], sources: list[str]) -> str:
    uses_npu = bool(facts.delegates)
    lines = _readme_build(model, target, b)
    if b.qemu is not None and not uses_npu:
        lines += _readme_qemu(b)
    if uses_npu:
        lines += _readme_npu(target, b)
    if b.fvp is not None:
        lines += _readme_fvp(b)
    lines += _readme_flash_profile(b)
    lines += _readme_library(b, facts, case, report, ops, sources)
    return "\n".join(lines)


def _readme_build(model: str, target: str, b: Board) -> list[str]:
    return [
        f"# {model} for {target} on {b.name}",
        "",
        f"Written by `emlkit export {model} --target {target} --board {b.name}`: the emlkit runtime with only the "
        "operators this program uses, the board's start-up code, link script and UART console, a toolchain file, "
        "and the compiled program embedded in the image. It needs CMake (3.20 or newer) and the GNU Arm toolchain "
        "(`arm-none-eabi-gcc` with newlib), nothing else.",
        "",
        "## Build",
        "",
        "```sh",
        "cmake -S . -B build -DCMAKE_TOOLCHAIN_FILE=cmake/arm-none-eabi.cmake",
        "cmake --build build",
        "```",
        "",
        "`build/app.elf` is the image. `-DEMLKIT_ETDUMP=OFF` leaves out the profile dump; a toolchain that is not on "
        "PATH: `ARM_NONE_EABI_PREFIX=/path/to/bin/arm-none-eabi- cmake ...`.",
        "",
        "## Run",
        "",
    ]


def _readme_qemu(b: Board) -> list[str]:
    assert b.qemu is not None
    return [
        f"Under QEMU (machine `{b.qemu.machine}`), with nothing but the image:",
        "",
        "```sh",
        f"qemu-system-arm -M {b.qemu.machine} -nographic -icount shift=0 -kernel build/app.elf",
        "```",
        "",
        "The firmware prints on UART0, which QEMU connects to its terminal with `-nographic`. It ends with "
        "`RESULT: PASS ...` when every output equals the expected one bit for bit; then the core sleeps, as "
        "a board would: quit QEMU with Ctrl-A X. Under `-icount shift=0` the counter is QEMU's instruction "
        "count (`instructions`), not cycles.",
        "",
    ]


def _readme_npu(target: str, b: Board) -> list[str]:
    assert b.npu is not None
    return [
        "The program has an Ethos-U delegate. The image drives the NPU through emlkit's Ethos-U driver at "
        f"{b.npu.base:#x} (interrupt {b.npu.irq}) and runs unchanged on an FVP with that NPU or on a board. "
        "QEMU has no NPU: there the driver stops with `npu_config` (no Ethos-U responds). To run Ethos-U "
        "programs under QEMU, emlkit co-simulates the NPU through QEMU's debug stub: `emlkit run MODEL "
        f"--target {target}`.",
        "",
    ]


def _readme_fvp(b: Board) -> list[str]:
    assert b.fvp is not None
    variant = next(iter(b.fvp.variants))
    return [
        f"On an Arm FVP (`{variant}`; not run by emlkit's tests, no FVP was available):",
        "",
        "```sh",
        f"{variant} -a build/app.elf -C {b.fvp.params[0]} "
        + " ".join(f"-C {p}" for p in [*b.fvp.params[1:], *b.fvp.variants[variant]] if "uart0" in p or "num_macs" in p),
        "```",
        "",
    ]


def _readme_flash_profile(b: Board) -> list[str]:
    return [
        "## Flash",
        "",
        "An MPS3 board (AN547 bitfile) loads images from its SD card at power-on. With the board's USB mass storage "
        "mounted (it shows up as `V2M-MPS3`):",
        "",
        "```sh",
        "emlkit flash build/app.elf --mps3 /media/$USER/V2M-MPS3",
        "```",
        "",
        "writes one binary per memory the image uses into `SOFTWARE/` and points `MB/HBI0309C/AN547/images.txt` at "
        "them (the previous images.txt is kept as images.bak). `--mps3-dir DIR` writes the same layout into a folder "
        "instead. Boards with flash and a CMSIS-DAP, ST-Link or J-Link probe: `emlkit flash build/app.elf --probe "
        "auto --pyocd-target <target>` (pyOCD). The UART runs at 115200 baud, 8N1. No board was flashed while "
        "emlkit was developed: these steps are tested up to the files and commands they produce.",
        "",
        "## Profile",
        "",
        "With `EMLKIT_ETDUMP=ON` the firmware prints an ETDump (ExecuTorch's profiling format) of the measured run "
        "between `ETDUMP BEGIN` and `ETDUMP END`. Save the console and read it with ExecuTorch's Inspector and the "
        "program's ETRecord:",
        "",
        "```sh",
        f"qemu-system-arm -M {b.qemu.machine if b.qemu else 'mps3-an547'} -nographic -icount shift=0 "
        "-kernel build/app.elf | tee console.txt",
        "emlkit inspect --log console.txt --etrecord model/model.etrecord",
        "```",
        "",
    ]


def _int8_io_note(report: dict[str, Any]) -> list[str]:
    """The README's word on a `--io int8` program: what it takes and where the qparams are."""
    io = report.get("int8_io") or {}
    if not io:
        return []
    mode, what = ("int8-all", "inputs and outputs") if io.get("outputs") else ("int8", "inputs")
    return [f"Compiled with `--io {mode}`: the {what} are int8 codes; `model/model_data.h` gives each one's scale "
            "and zero point (`EMLKIT_INPUT0_SCALE`, `EMLKIT_INPUT0_ZERO_POINT`, ...).", ""]


def _readme_library(b: Board, facts: ProgramFacts, case: BundledCase, report: dict[str, Any], ops: list[str],
                    sources: list[str]) -> list[str]:
    uses_npu = bool(facts.delegates)
    mem = report.get("memory", {})
    kernels = [s for s in sources if s.startswith(("ops/", "kernels/"))]
    return [
        "## Use the library in your firmware",
        "",
        "`emlkit/` is a CMake library (`add_subdirectory(emlkit/lib)`, then link `emlkit::emlkit`); its one header is "
        "`emlkit/include/emlkit.h`. `main.c` shows every step: give the library RAM (`eml_init`), load the program "
        "from memory (`eml_load`), query inputs and outputs (`eml_input_info`: shape, dtype, scale, zero point), set "
        "inputs, run, read outputs, profile. Every call returns a status; nothing is allocated dynamically.",
        "",
        *_int8_io_note(report),
        f"This program needs {mem.get('arena_total', '?')} bytes of planned tensors plus the method's tables "
        "(eml_load reports the exact total when memory is short).",
        "",
        "## What is in here",
        "",
        f"- `model/model_data.c`: the program ({len(case.program)} bytes) as a 16-byte aligned constant array in "
        f"section `.emlkit_model`, which `board/link.ld` places in `{b.model.region}` at {b.model.address:#x}; "
        f"{len(case.inputs)} test input(s) and {len(case.expected)} expected output(s).",
        f"- `model/`: also the program as `model.pte`, its ETRecord and the compile report.",
        f"- operators: {', '.join(ops) or 'none'}" + (f"; delegates: {', '.join(facts.delegates)}" if uses_npu else ""),
        f"- their adapters and kernels (whole files; the linker drops what is not called): {', '.join(kernels)}",
        "- `emlkit/ops/*.def`: the operator table cut down to these operators.",
        f"- `board/`: {b.description}; memory map generated from emlkit's boards/{b.name}/board.toml.",
        "",
    ]


def write_project(root: Path, model: str, target: str, b: Board, pte: Path, bpte: Path, report_path: Path,
                  etrecord: Path | None, kernels: str = "mve") -> ExportResult:
    """Everything into `root` (an empty folder)."""
    case = bundled_case(bpte.read_bytes())
    if case.program != pte.read_bytes():
        raise AotError(f"{pte} and {bpte} hold different programs: compile again")
    if not case.inputs or not case.expected:
        raise AotError("the program has no inputs or no outputs: nothing to run")
    facts = program_facts(case.program)
    ops, sources = _library(root, facts)
    cflags = _board(root, b, kernels)
    name = re.sub(r"[^A-Za-z0-9_]", "_", f"{model}_{target}")
    cm = (TEMPLATES / "CMakeLists.txt.in").read_text()
    for k, v in {"NAME": name, "MODEL": model, "TARGET": target, "BOARD": b.name, "CFLAGS": cflags,
                 "ETHOSU": "ON" if facts.delegates else "OFF"}.items():
        cm = cm.replace(f"@{k}@", v)
    (root / "CMakeLists.txt").write_text(cm)
    _copy(FIRMWARE / "cmake" / "arm-none-eabi.cmake", root / "cmake" / "arm-none-eabi.cmake")
    _copy(TEMPLATES / "main.c", root / "main.c")
    report = json.loads(report_path.read_text())
    h, c = model_data(case, model, target, b.name, facts, report.get("int8_io"))
    (root / "model").mkdir(exist_ok=True)
    (root / "model" / "model_data.h").write_text(h)
    (root / "model" / "model_data.c").write_text(c)
    _copy(pte, root / "model" / "model.pte")
    _copy(report_path, root / "model" / "report.json")
    if etrecord is not None and etrecord.is_file():
        _copy(etrecord, root / "model" / "model.etrecord")
    (root / "README.md").write_text(_readme(model, target, b, facts, case, report, ops, sources))
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    return ExportResult(root, model, target, b.name, ops, sources, len(case.program), bool(facts.delegates), files)


def _install(tmp: Path, out: Path, force: bool) -> None:
    """Rename the finished project into place; an existing folder goes only once the new one is complete."""
    if out.exists() and not out.is_dir():
        raise AotError(f"{out} exists and is not a folder: choose another -o")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise AotError(f"{out} exists and is not empty: choose another -o, or --force to replace it")
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
        return
    if out.is_dir():
        out.rmdir()
    tmp.rename(out)


def export_compiled(cres: Any, board: BoardRef | None, out: Path, force: bool = False,
                    kernels: str = "mve") -> ExportResult:
    """Export an already compiled program (emlkit.compile.CompileResult) for BOARD (a Board, a board name, "host"
    (refused), or None: the target's board)."""
    if kernels not in ("mve", "portable"):
        raise AotError(f"unknown kernel variant '{kernels}': use mve or portable")
    board = board or cres.target.default_board
    out = Path(out).resolve()
    if out.exists() and not out.is_dir():
        raise AotError(f"{out} exists and is not a folder: choose another -o")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise AotError(f"{out} exists and is not empty: choose another -o, or --force to replace it")
    facts = program_facts(Path(cres.pte).read_bytes())
    b = _check_board(board, facts)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        etrecord = (cres.report.get("files") or {}).get("etrecord")
        res = write_project(tmp, cres.name, cres.target.name, b, Path(cres.pte), Path(cres.bpte), Path(cres.report_path),
                            Path(cres.pte).parent / etrecord if etrecord else None, kernels)
        _install(tmp, out, force)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    res.out = out
    return res


def export_model(req: ExportRequest) -> int:
    """`emlkit export`: compile into a scratch folder, then write the project (export_compiled)."""
    from emlkit.compile import compile_model

    spec = req.program
    with tempfile.TemporaryDirectory(prefix="emlkit-export-") as work:
        cres = compile_model(spec.model, spec.target, work, spec.calibration, spec.options)
        res = export_compiled(cres, req.board, req.output, req.force, req.kernels)
    log.info("wrote %s: %s for %s on %s, program %d bytes, %d operators (%s)%s", res.out, res.model, res.target,
             res.board, res.model_bytes, len(res.operators), ", ".join(res.operators),
             ", Ethos-U delegate" if res.uses_npu else "")
    log.info("build: cmake -S %s -B %s/build -DCMAKE_TOOLCHAIN_FILE=%s/cmake/arm-none-eabi.cmake && cmake --build %s/build",
             res.out, res.out, res.out, res.out)
    return 0
