"""Build the host runner (cached) and run a .bpte on the host.

    python -m emlkit.deploy.sim_host MODEL.bpte [--save-outputs DIR] [--sanitize] [--build-type Debug]

The build (emlkit/hostfw.py) lives in build/host-<type>[-asan].
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from emlkit.hostfw import HostBuildError, build_host_runner
from emlkit.deploy.outputs_npy import save_outputs_npy
from emlkit.deploy.result import ResultError, RunResult, parse_result
from emlkit.deploy.simulator import SimRun, collect_outputs, debug_buffer_path, save_npy

log = logging.getLogger(__name__)

def run_host(bpte: Path | str, *, save_outputs_dir: Path | str | None = None, regions: list[int] | None = None,
             build_type: str = "Release", sanitize: bool = False, timeout: float = 600,
             etdump: Path | str | None = None, debug_buffer: Path | str | None = None) -> RunResult:
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
        if debug_buffer is not None:
            cmd += ["--debug-buffer", str(debug_buffer)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = (p.stdout + p.stderr).splitlines()
    res = parse_result(p.stdout)
    res.console = lines
    expected = {"pass": 0, "fail": 1, "error": 2}[res.status]
    if p.returncode != expected:
        raise ResultError(f"runner exited {p.returncode} but reported {res.status!r}: {' | '.join(lines[-5:])}")
    return res


class HostSimulator:
    """The Simulator (emlkit/deploy/simulator.py) that runs programs natively with the host runner: no board,
    no image, no cycle counts."""

    name = "host"

    def available(self, board: Any = None, npu: str | None = None) -> bool:
        return npu is None

    def run(self, bpte: Path, board: Any = None, *, elf: Path | None = None, timeout: float = 120.0,
            save_outputs: str | None = None, npu: str | None = None, etdump: str | None = None,
            debug: bool = False) -> SimRun:
        """A crash is a result (status crash); a runner that does not build raises."""
        try:
            if etdump:
                Path(etdump).parent.mkdir(parents=True, exist_ok=True)
            dbuf = debug_buffer_path(etdump) if etdump and debug else None
            if dbuf is not None:
                dbuf.unlink(missing_ok=True)  # a failed run must not leave an older buffer passing for its own
            res = run_host(bpte, save_outputs_dir=None, etdump=etdump, debug_buffer=dbuf)
            if save_outputs:
                with tempfile.TemporaryDirectory() as raw:
                    run_host(bpte, save_outputs_dir=raw)
                    save_npy([p.read_bytes() for p in collect_outputs(Path(raw))], Path(bpte), save_outputs)
        except ResultError as err:
            return SimRun(RunResult(status="crash", error=str(err)))
        return SimRun(res, etdump=Path(etdump) if etdump and Path(etdump).is_file() else None,
                      debug_buffer=dbuf if dbuf is not None and dbuf.is_file() else None)


# Saved outputs -> .npy: emlkit/deploy/outputs_npy.py (shared by every simulator).


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
