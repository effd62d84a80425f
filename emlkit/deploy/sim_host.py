"""Build the host runner (cached) and run a .bpte on the host.

    python -m emlkit.deploy.sim_host MODEL.bpte [--save-outputs DIR] [--sanitize] [--build-type Debug]

The build lives in build/host-<type>[-asan]. CMake runs only when a source
under firmware/ or boards/host changed (a stamp of paths, sizes and mtimes).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from emlkit.deploy.locks import held
from emlkit.deploy.result import ResultError, RunResult, parse_result

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
FIRMWARE_DIR = REPO_ROOT / "firmware"
HOST_BOARD_DIR = REPO_ROOT / "boards" / "host"
BUILD_ROOT = REPO_ROOT / "build"
_SUFFIXES = {".c", ".h", ".def", ".txt", ".cmake"}


class HostBuildError(RuntimeError):
    """CMake or the compiler failed; the message carries the log's tail."""


def _cmake() -> str:
    from emlkit.deploy.build import cmake_binary

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


def run_host(bpte: Path | str, *, save_outputs_dir: Path | str | None = None, regions: list[int] | None = None,
             build_type: str = "Release", sanitize: bool = False, timeout: float = 600,
             etdump: Path | str | None = None) -> RunResult:
    """Run every bundled test case of `bpte` with the host runner; the parsed result line.

    A crash (no result line, or a sanitizer report) raises ResultError with the output's tail.
    """
    bpte = Path(bpte)
    if not bpte.is_file():
        raise FileNotFoundError(f"{bpte}: no such bundled program (python -m emlkit compile MODEL --target T writes OUT/MODEL_T.bpte)")
    runner = build_host_runner(build_type, sanitize)
    cmd = [str(runner), str(bpte)]
    if save_outputs_dir is not None:
        Path(save_outputs_dir).mkdir(parents=True, exist_ok=True)
        cmd += ["--save-outputs", str(save_outputs_dir)]
    if regions:
        cmd += ["--regions", ",".join(str(int(r)) for r in regions)]
    if etdump is not None:
        cmd += ["--etdump", str(etdump)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = (p.stdout + p.stderr).splitlines()
    res = parse_result(p.stdout)
    res.console = lines
    expected = {"pass": 0, "fail": 1, "error": 2}[res.status]
    if p.returncode != expected:
        raise ResultError(f"runner exited {p.returncode} but reported {res.status!r}: {' | '.join(lines[-5:])}")
    return res


# ---- saved outputs -> .npy ----

_NP_DTYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64", 11: "bool"}


def _suite_method_name(data: bytes) -> str | None:
    """Method name of test suite 0, read straight from the flatbuffer (the
    generated accessors for nested tables are broken in this wheel)."""
    import struct

    def table(pos: int) -> tuple[int, list[int]]:
        vt = pos - struct.unpack_from("<i", data, pos)[0]
        vlen = struct.unpack_from("<H", data, vt)[0]
        return pos, [struct.unpack_from("<H", data, vt + 4 + 2 * k)[0] for k in range((vlen - 4) // 2)]

    def ref(pos: int) -> int:
        return pos + struct.unpack_from("<I", data, pos)[0]

    root, fields = table(struct.unpack_from("<I", data, 0)[0])
    if len(fields) < 2 or not fields[1]:  # BundledProgram.method_test_suites
        return None
    vec = ref(root + fields[1])
    if struct.unpack_from("<I", data, vec)[0] == 0:
        return None
    suite, sf = table(ref(vec + 4))
    if not sf or not sf[0]:  # BundledMethodTestSuite.method_name
        return None
    s = ref(suite + sf[0])
    n = struct.unpack_from("<I", data, s)[0]
    return data[s + 4 : s + 4 + n].decode()


def _method_outputs(bpte_path: Path) -> list[tuple[str, list[int], list[int]]]:
    """(numpy dtype, sizes, dim_order) of each output of the bundled method."""
    from executorch.devtools.bundled_program.serialize.generated.bundled_program_flatbuffer.BundledProgram import (
        BundledProgram,
    )
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import Tensor

    data = bpte_path.read_bytes()
    if data[4:8] != b"BP08":
        raise ValueError(f"{bpte_path}: not a bundled program (identifier {data[4:8]!r}, expected b'BP08')")
    bp = BundledProgram.GetRootAs(data, 0)
    program = deserialize_pte_binary(bytes(bp.ProgramAsNumpy())).program
    method = _suite_method_name(data) or "forward"
    plans = [p for p in program.execution_plan if p.name == method]
    if not plans:
        raise ValueError(f"{bpte_path}: program has no method {method!r}")
    plan = plans[0]
    outs = []
    for idx in plan.outputs:
        val = plan.values[idx].val
        if not isinstance(val, Tensor):
            raise ValueError(f"{bpte_path}: output value {idx} is not a tensor")
        st = int(val.scalar_type)
        if st not in _NP_DTYPES:
            raise ValueError(f"{bpte_path}: output value {idx} has unsupported dtype {st}")
        dim_order = list(val.dim_order) if val.dim_order else list(range(len(val.sizes)))
        outs.append((_NP_DTYPES[st], list(val.sizes), dim_order))
    return outs


def save_outputs_npy(raw_dir: Path | str, bpte_path: Path | str, out_dir: Path | str) -> list[Path]:
    """Convert the runner's output_<i>.bin (memory order) to output_<i>.npy (logical, contiguous)."""
    import numpy as np

    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i, (dtype, sizes, order) in enumerate(_method_outputs(Path(bpte_path))):
        raw = raw_dir / f"output_{i}.bin"
        if not raw.is_file():
            raise FileNotFoundError(f"{raw}: missing; run the runner with --save-outputs {raw_dir}")
        data = np.frombuffer(raw.read_bytes(), dtype=dtype)
        want = int(np.prod(sizes)) if sizes else 1
        if data.size != want:
            raise ValueError(f"{raw}: {data.size} elements, the program's output {i} has {want}")
        # Memory holds dims in dim_order (outermost first); transpose back to logical order.
        arr = data.reshape([sizes[d] for d in order]) if sizes else data.reshape(())
        arr = np.ascontiguousarray(arr.transpose(np.argsort(order))) if sizes else arr
        path = out_dir / f"output_{i}.npy"
        np.save(path, arr)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bpte", type=Path)
    ap.add_argument("--save-outputs", type=Path, help="write output_<i>.npy here")
    ap.add_argument("--sanitize", action="store_true", help="ASan+UBSan build")
    ap.add_argument("--build-type", default="Release")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        with tempfile.TemporaryDirectory() as raw:
            res = run_host(args.bpte, save_outputs_dir=raw if args.save_outputs else None,
                           build_type=args.build_type, sanitize=args.sanitize)
            if args.save_outputs and res.status != "error":
                save_outputs_npy(raw, args.bpte, args.save_outputs)
    except (HostBuildError, ResultError, FileNotFoundError, ValueError) as e:
        log.error("%s", e)
        return 2
    sys.stdout.write(res.console[-1] + "\n" if res.console else "")
    return {"pass": 0, "fail": 1, "error": 2}[res.status]


if __name__ == "__main__":
    sys.exit(main())
