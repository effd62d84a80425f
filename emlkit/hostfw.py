"""The firmware built for the host: the runner as a Linux program (cached build), and the firmware's own load
check run on a program at compile time.

The load check is the firmware itself, not a copy of its rules: `runner PROGRAM.bpte --load-only` loads the
program, places it, and runs every op adapter's prepare and the loader's checks (dtypes, ranges, layouts,
requantization bounds, scratch, aliasing of outputs over inputs) exactly as the device does at start-up,
then stops before the first inference. A program the device would refuse is refused at compile time with
the device's own message.

`runner --list-ops` prints the firmware's operator registry: which (operator, overload) pairs it implements
and the per-call state bytes of each.

The build lives in build/host-<type>[-asan]. CMake runs only when a source under firmware/ or boards/host
changed (a stamp of paths, sizes and mtimes). Below `compile` and `deploy`: it imports neither.
"""

from __future__ import annotations

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
    stamp_file = bdir / ".emlfw-stamp"
    stamp = _sources_stamp(f"{build_type}:{sanitize}")
    if runner.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return runner
    cmake = _cmake()
    log.info("building host runner in %s", bdir)
    _run([cmake, "-S", str(FIRMWARE_DIR), "-B", str(bdir), f"-DCMAKE_BUILD_TYPE={build_type}",
          f"-DFW_SANITIZE={'ON' if sanitize else 'OFF'}", "-DBOARD=host"], "cmake configure")
    _run([cmake, "--build", str(bdir), "-j", str(jobs), "--target", "runner"], "cmake build")
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


def registry_state_bytes() -> dict[tuple[str, str], int]:
    """Per-call state bytes of each registry entry (0: none): the runtime memory a kernel call of it takes."""
    return dict(_registry())


def _registry() -> tuple[tuple[tuple[str, str], int], ...]:
    runner = build_host_runner()
    return _listed_ops(str(runner), runner.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _listed_ops(runner: str, mtime_ns: int) -> tuple[tuple[tuple[str, str], int], ...]:
    p = subprocess.run([runner, "--list-ops"], capture_output=True, text=True, timeout=LOAD_CHECK_TIMEOUT_S)
    try:
        ops = json.loads(p.stdout)["ops"]
    except (json.JSONDecodeError, KeyError) as exc:
        raise HostBuildError(f"the host runner did not list its operators (exit {p.returncode}): "
                             f"{(p.stdout + p.stderr).strip()[-400:]}") from exc
    return tuple(((str(name), str(overload)), int(state)) for name, overload, state in ops)
