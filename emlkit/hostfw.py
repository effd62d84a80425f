"""The firmware built for the host: the runner as a Linux program (cached build), and the firmware's own load
check run on a program at compile time.

The load check is the firmware itself, not a copy of its rules: `runner PROGRAM.bpte --load-only` loads the
program, places it, and runs every op adapter's prepare and the loader's checks (dtypes, ranges, layouts,
requantization bounds, scratch, aliasing of outputs over inputs) exactly as the device does at start-up,
then stops before the first inference. A program the device would refuse is refused at compile time with
the device's own message.

`runner --list-ops` prints the firmware's operator registry: which (operator, overload) pairs it implements,
the per-call state bytes of each and the inputs its output may be planned over (in place).

The host library libemlkit_host.so (boards/host/query.c, built with the runner) answers the rest through
ctypes, from the firmware's own code: what a program needs from the runtime with a device image's struct
sizes, where the runner places it in a board's regions, each kernel's scratch bytes and MVE path, and the lead
by which a depthwise convolution's output may start before its input.

The build lives in build/host-<type>[-asan]. CMake runs only when a source under firmware/ or boards/host
changed (a stamp of paths, sizes and mtimes). Below `compile` and `deploy`: it imports neither.
"""

from __future__ import annotations

import ctypes as C
import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from emlkit.errors import EXIT_SKIP, AotError
from emlkit.locks import held

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
FIRMWARE_DIR = REPO_ROOT / "firmware"
HOST_BOARD_DIR = REPO_ROOT / "boards" / "host"
BUILD_ROOT = REPO_ROOT / "build"
_SUFFIXES = {".c", ".h", ".def", ".txt", ".cmake"}
LOAD_CHECK_TIMEOUT_S = 120
# One region far larger than any board's: whether the program fits a board is the fit check's question, not
# the load check's. Linux reserves the pages lazily, so only what the program touches is backed.
LOAD_CHECK_REGION_BYTES = 1 << 30
QUERY_LIBRARY = "libemlkit_host.so"


class HostBuildError(RuntimeError):
    """CMake or the compiler failed; the message carries the log's tail."""


def unavailable(what: str, exc: HostBuildError) -> AotError:
    """The one-line error when the host build of the firmware failed or a tool for it is missing."""
    return AotError(f"cannot {what} on the host: {str(exc).splitlines()[0].rstrip(':')}; install a host C compiler and cmake "
                    "(./scripts/setup.sh does)", EXIT_SKIP)


def cmake_binary() -> str | None:
    """The venv's cmake (pinned in requirements.txt) first, then PATH; None if there is none."""
    venv = Path(sys.executable).parent / "cmake"
    if venv.exists():
        return str(venv)
    return shutil.which("cmake")


def _cmake() -> str:
    found = cmake_binary()
    if not found:
        raise HostBuildError("cmake not found: pip install cmake (requirements.txt pins it)")
    return found


def _sources_stamp(extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for root in (FIRMWARE_DIR, HOST_BOARD_DIR):
        for p in sorted(root.rglob("*")):
            if p.is_file() and (p.suffix in _SUFFIXES or p.name == "CMakeLists.txt"):
                st = p.stat()
                h.update(f"{p.relative_to(REPO_ROOT)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def host_build_dir(build_type: str = "Release", sanitize: bool = False) -> Path:
    return BUILD_ROOT / f"host-{build_type}{'-asan' if sanitize else ''}"


def _run(cmd: list[str], what: str) -> None:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).splitlines()[-25:])
        raise HostBuildError(f"{what} failed ({' '.join(cmd)}):\n{tail}")


def build_host_runner(build_type: str = "Release", sanitize: bool = False, jobs: int = 2) -> Path:
    """Configure and build the host runner if its sources changed; returns its path."""
    bdir = host_build_dir(build_type, sanitize)
    with held(bdir):  # one build of a folder at a time; a waiter then finds it up to date
        return _build_host_locked(bdir, build_type, sanitize, jobs)


def _build_host_locked(bdir: Path, build_type: str, sanitize: bool, jobs: int) -> Path:
    runner = bdir / "runner"
    if not (bdir / QUERY_LIBRARY).exists():
        runner.unlink(missing_ok=True)  # a build from before the library: build both
    stamp_file = bdir / ".emlfw-stamp"
    stamp = _sources_stamp(f"{build_type}:{sanitize}")
    if runner.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return runner
    cmake = _cmake()
    log.info("building host runner in %s", bdir)
    _run([cmake, "-S", str(FIRMWARE_DIR), "-B", str(bdir), f"-DCMAKE_BUILD_TYPE={build_type}",
          f"-DFW_SANITIZE={'ON' if sanitize else 'OFF'}", "-DBOARD=host"], "cmake configure")
    _run([cmake, "--build", str(bdir), "-j", str(jobs), "--target", "runner", "emlkit_host"], "cmake build")
    stamp_file.write_text(stamp)
    return runner


@dataclass(frozen=True)
class LoadRefusal:
    """The firmware refused the program at load: its status code, message and, for a kernel call, the
    instruction's index in the method's chain (None for a refusal of the whole program)."""

    code: str
    message: str
    instruction: int | None


_INSTRUCTION = re.compile(r"^instruction (\d+) ")


def load_check(bpte: Path) -> LoadRefusal | None:
    """Run the firmware's load on the bundled program `bpte` on the host; None if it loads."""
    runner = build_host_runner()
    try:
        p = subprocess.run([str(runner), str(bpte), "--load-only", "--regions", str(LOAD_CHECK_REGION_BYTES)],
                           capture_output=True, text=True,
                           timeout=LOAD_CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise HostBuildError(f"the host runner did not finish loading {bpte} in {LOAD_CHECK_TIMEOUT_S} s") from exc
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    try:
        res = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError) as exc:
        raise HostBuildError(f"the host runner printed no result line for {bpte} (exit {p.returncode}): "
                             f"{(p.stdout + p.stderr).strip()[-400:]}") from exc
    if res.get("status") == "loaded":
        return None
    msg = str(res.get("error", "?"))
    m = _INSTRUCTION.match(msg)
    return LoadRefusal(str(res.get("code", "?")), msg, int(m.group(1)) if m else None)


def registry_ops() -> frozenset[tuple[str, str]]:
    """(`ns::name`, overload) pairs the firmware's operator registry implements, as the firmware lists them."""
    return frozenset(op for op, _ in _registry())


IN_PLACE_START, IN_PLACE_END, IN_PLACE_LIST, IN_PLACE_AHEAD = "start", "end", "list", "ahead"


def in_place_ops() -> dict[tuple[str, str], dict[int, str]]:
    """(`ns::name`, overload) -> {argument slot: how the output may lie over that input}, as the firmware's
    registry gives them (firmware/ops/registry.c k_in_place): IN_PLACE_START (the output starts at the input,
    elements no larger), IN_PLACE_END (it ends where the input ends, as many elements, each no smaller) or
    IN_PLACE_LIST (a tensor list whose items may each lie where the op writes them in its output, when that is
    one run of bytes: a concat's inputs inside it) or IN_PLACE_AHEAD (the output starts before the input by the
    lead the call needs: depthwise_lead). Ops without any are left out."""
    table: dict[tuple[str, str], dict[int, str]] = {}
    for op, _, start, end, items, ahead in _listed_ops_full():
        slots = {k: IN_PLACE_START for k in range(32) if start >> k & 1}
        slots.update({k: IN_PLACE_END for k in range(32) if end >> k & 1 and k not in slots})
        slots.update({k: IN_PLACE_LIST for k in range(32) if items >> k & 1 and k not in slots})
        slots.update({k: IN_PLACE_AHEAD for k in range(32) if ahead >> k & 1 and k not in slots})
        if slots:
            table[op] = slots
    return table


def _registry() -> tuple[tuple[tuple[str, str], int], ...]:
    return tuple((op, state) for op, state, _, _, _, _ in _listed_ops_full())


def _listed_ops_full() -> tuple[tuple[tuple[str, str], int, int, int, int, int], ...]:
    runner = build_host_runner()
    return _listed_ops(str(runner), runner.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _listed_ops(runner: str, mtime_ns: int) -> tuple[tuple[tuple[str, str], int, int, int, int, int], ...]:
    p = subprocess.run([runner, "--list-ops"], capture_output=True, text=True, timeout=LOAD_CHECK_TIMEOUT_S)
    try:
        ops = json.loads(p.stdout)["ops"]
    except (json.JSONDecodeError, KeyError) as exc:
        raise HostBuildError(f"the host runner did not list its operators (exit {p.returncode}): "
                             f"{(p.stdout + p.stderr).strip()[-400:]}") from exc
    return tuple(((str(name), str(overload)), int(state), int(start), int(end), int(items), int(ahead))
                 for name, overload, state, start, end, items, ahead in ops)


# ---------------------------------------------------------------- the host library (boards/host/query.c)

_u32p, _u64p, _i32p = C.POINTER(C.c_uint32), C.POINTER(C.c_uint64), C.POINTER(C.c_int32)
_i32 = C.c_int32
PIECE_KINDS = ("arena", "runtime", "kernel scratch", "delegate memory", "after")


def _library() -> C.CDLL:
    runner = build_host_runner()
    return _load_library(str(runner.parent / QUERY_LIBRARY), runner.stat().st_mtime_ns)


@lru_cache(maxsize=2)
def _load_library(path: str, mtime_ns: int) -> C.CDLL:
    lib = C.CDLL(path)
    lib.emq_program_needs.argtypes = [C.c_void_p, C.c_size_t, _u32p, C.c_char_p, C.c_size_t]
    lib.emq_program_needs.restype = C.c_int
    lib.emq_runtime_bytes.argtypes = [_u32p, C.c_uint64, _u32p]
    lib.emq_runtime_bytes.restype = C.c_uint64
    lib.emq_place.argtypes = [_u64p, _u64p, C.c_uint32, _u64p, C.c_uint32, C.c_uint64, C.c_uint64, C.c_uint64, _u64p,
                              C.c_uint32, _i32p, _i32p, _u32p, _u64p, _i32p]
    lib.emq_place.restype = C.c_uint32
    lib.emq_region_bounds.argtypes = [C.c_int32, C.c_uint64, C.c_uint64, C.c_uint64, _u64p, _u64p]
    lib.emq_region_bounds.restype = C.c_int
    lib.emq_conv2d_s8.argtypes = [_i32] * 10 + [C.POINTER(C.c_char_p)]
    lib.emq_conv2d_s8.restype = C.c_uint64
    lib.emq_depthwise_conv2d_s8.argtypes = [_i32] * 10 + [C.POINTER(C.c_char_p)]
    lib.emq_depthwise_conv2d_s8.restype = C.c_uint64
    lib.emq_depthwise_conv2d_s8_lead.argtypes = [_i32] * 15 + [_u32p]
    lib.emq_depthwise_conv2d_s8_lead.restype = C.c_int64
    lib.emq_avg_pool2d_s8.argtypes = [_i32] * 3
    lib.emq_avg_pool2d_s8.restype = C.c_uint64
    return lib


def _abi(layout: dict[str, int] | None) -> C.Array | None:
    if layout is None:
        return None
    return (C.c_uint32 * 5)(*(int(layout[k]) for k in ("et_value", "et_tensor", "et_op_slot", "et_instr", "pointer")))


class ProgramRefused(ValueError):
    """The firmware's loader could not read the program; the message is the firmware's."""


def program_needs(pte: bytes, layout: dict[str, int] | None = None) -> dict[str, object]:
    """What method 0 of the program `pte` (.pte bytes) needs from the runtime, as the firmware's loader counts it:
    arenas, table entries, kernel state, delegate bytes and runtime bytes with the struct sizes `layout` (a device
    image's, emlkit/deploy/fit.py read_image; None: the host build's)."""
    buf = C.create_string_buffer(len(pte) + 16)
    off = (-C.addressof(buf)) % 16  # the loader wants the program 16-byte aligned
    C.memmove(C.addressof(buf) + off, pte, len(pte))
    out = C.create_string_buffer(4096)
    st = _library().emq_program_needs(C.addressof(buf) + off, len(pte), _abi(layout), out, len(out))
    if st != 0:
        raise ProgramRefused(out.value.decode(errors="replace"))
    return json.loads(out.value.decode())


def runtime_bytes(counts: dict[str, int], layout: dict[str, int]) -> int:
    """The runtime memory of a method with these table counts (program_needs' keys) and kernel state on a build
    with the struct sizes `layout` (firmware/runtime/method.c et_runtime_bytes)."""
    n = (C.c_uint32 * 5)(*(int(counts[k]) for k in ("values", "tensors", "operators", "instructions", "arguments")))
    return int(_library().emq_runtime_bytes(n, int(counts["kernel_state"]), _abi(layout)))


@dataclass(frozen=True)
class Placed:
    """One piece the runner places: what (PIECE_KINDS), its arena's memory id - 1, its bytes, and the index of
    the region it lands in (None: no region has room; `roomiest` is then the region with the most room left)."""

    kind: str
    arena: int
    size: int
    region: int | None
    roomiest: int | None = None


def place(regions: list[tuple[int, int]], arenas: list[int], runtime: int, scratch: int, delegate: int,
          after: list[int]) -> list[Placed]:
    """The runner's placement (firmware/runtime/place.c) into regions (base, size), in order: the method's pieces
    then the blocks `after` (kind "after"). A piece that finds no room is reported and the rest still placed."""
    n = len(regions)
    npieces = len(arenas) + 3 + len(after)
    where, kind = (C.c_int32 * npieces)(), (C.c_int32 * npieces)()
    arena, size, roomiest = (C.c_uint32 * npieces)(), (C.c_uint64 * npieces)(), (C.c_int32 * npieces)()
    got = _library().emq_place((C.c_uint64 * n)(*(b for b, _ in regions)), (C.c_uint64 * n)(*(s for _, s in regions)), n,
                               (C.c_uint64 * max(1, len(arenas)))(*arenas), len(arenas), runtime, scratch, delegate,
                               (C.c_uint64 * max(1, len(after)))(*after), len(after), where, kind, arena, size,
                               roomiest)
    return [Placed(PIECE_KINDS[kind[i]], int(arena[i]), int(size[i]), None if where[i] < 0 else int(where[i]),
                   None if roomiest[i] < 0 else int(roomiest[i])) for i in range(got)]


def region_bounds(shared: int, base: int, end: int, model_used: int = 0, heap_end: int = 0,
                  stack_limit: int = 0) -> tuple[int, int] | None:
    """The part [base, end) of a Cortex-M board region the runner may place arenas in
    (boards/common/cortexm/region_bounds.h): shared 0 all of it, 1 after the model slot (in use up to model_used),
    2 after the libc heap and below the stack; None when nothing is free."""
    b, e = C.c_uint64(base), C.c_uint64(end)
    if not _library().emq_region_bounds(shared, model_used, heap_end, stack_limit, C.byref(b), C.byref(e)):
        return None
    return int(b.value), int(e.value)


def conv2d_s8(in_c: int, out_c: int, k_h: int, k_w: int, stride: tuple[int, int], pad: tuple[int, int], groups: int,
              input_offset: int) -> tuple[int, str]:
    """emk_conv2d_s8's scratch bytes for this shape, and the kernel its MVE path runs."""
    path = C.c_char_p()
    need = _library().emq_conv2d_s8(in_c, out_c, k_h, k_w, *stride, *pad, groups, input_offset, C.byref(path))
    return int(need), (path.value or b"").decode()


def depthwise_conv2d_s8(in_c: int, out_c: int, k_h: int, k_w: int, stride: tuple[int, int], pad: tuple[int, int],
                        input_offset: int, folded: bool) -> tuple[int, str]:
    """emk_depthwise_conv2d_s8's scratch bytes and MVE kernel; `folded`: the program carries the folded bias and
    the per-16-channel blocks."""
    path = C.c_char_p()
    need = _library().emq_depthwise_conv2d_s8(in_c, out_c, k_h, k_w, *stride, *pad, input_offset, int(folded),
                                              C.byref(path))
    return int(need), (path.value or b"").decode()


@dataclass(frozen=True)
class DepthwiseCall:
    """A depthwise convolution's geometry as the kernels take it: NHWC input and output sizes (batch, h, w, c),
    kernel, stride, padding and dilation (h, w)."""

    inp: tuple[int, int, int, int]
    out: tuple[int, int, int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int]
    dil: tuple[int, int]


def depthwise_lead(call: DepthwiseCall) -> tuple[int, int] | None:
    """In place with a lead (IN_PLACE_AHEAD): the bytes by which the call's output must start before its input,
    and the step (bytes) by which it may start further before it, from the firmware's rule
    (emk_depthwise_conv2d_s8_in_place_lead, which its loader checks); None when the output may not overlap it."""
    step = C.c_uint32(1)
    b, h, w, c = call.inp
    lead = _library().emq_depthwise_conv2d_s8_lead(b, h, w, c, *call.out[1:], *call.kernel, *call.stride, *call.pad,
                                                    *call.dil, C.byref(step))
    return None if lead < 0 else (int(lead), int(step.value))


def avg_pool2d_s8(k_h: int, k_w: int, c: int) -> int:
    """emk_avg_pool2d_s8's scratch bytes for a k_h x k_w window over c channels."""
    return int(_library().emq_avg_pool2d_s8(k_h, k_w, c))
