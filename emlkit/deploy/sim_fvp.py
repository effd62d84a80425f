"""Run a .bpte on a board image under an Arm FVP (Fixed Virtual Platform).

    python -m emlkit.deploy.sim_fvp model.bpte --board corstone-300 [--fvp FVP_Corstone_SSE-300_Ethos-U65]
    python -m emlkit.deploy.sim_fvp model.bpte --board corstone-320 --print-command

The command line comes from board.toml [fvp]: every `params` entry becomes
`-C instance.parameter=value` (semihosting on, visualisation and telnet off,
UART0 to stdout), the variant's own params are added, the image is loaded with
`-a`, model.bin with `--data <target>=model.bin@<model address>`, and the run
is limited to --timeout seconds of wall clock (`--timelimit`) and optionally
`--cyclelimit`. FVPs are not installed on this project's machines: the command
lines are tested, the run needs the FVP on PATH.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Unpack

from emlkit.deploy.boards import Board, BoardError, load_board
from emlkit.deploy.build import BuildError
from emlkit.deploy.sim_qemu import (
    FAULT_MARKER, RunOptions, SimError, SimResult, ToolMissing, _collect_outputs, classify, finish, prepare_run,
    run_command, run_dir, run_options)
from emlkit.deploy.simulator import SimRun, from_firmware

log = logging.getLogger(__name__)

# Slack on top of the FVP's own --timelimit before the host kills it.
KILL_GRACE_S = 10.0


def fvp_variant(board: Board, fvp: str | None) -> str:
    if board.fvp is None:
        raise SimError(f"board '{board.name}' has no [fvp] section in board.toml")
    names = list(board.fvp.variants)
    if fvp is None:
        return names[0]
    if fvp not in board.fvp.variants:
        raise SimError(f"FVP '{fvp}' is not listed for {board.name} (board.toml [fvp.variants]: {', '.join(names)})")
    return fvp


def fvp_command(
    board: Board,
    elf: Path,
    model_bin: Path,
    cwd: Path,
    timeout: float = 60.0,
    fvp: str | None = None,
    cycle_limit: int | None = None,
    npu: str | None = None,
) -> list[str]:
    """The FVP command line for one run (the binary is not looked up here). `npu` (e.g. ethos-u55-256)
    sets the NPU's MAC count through board.toml [fvp].npu_macs_param."""
    name = fvp_variant(board, fvp)
    assert board.fvp is not None
    params = list(board.fvp.params + board.fvp.variants[name])
    if npu is not None:
        key = board.fvp.npu_macs_param
        if key is None:
            raise SimError(f"board '{board.name}' does not say how its FVP sets the NPU's MAC count ([fvp].npu_macs_param)")
        macs = npu.rsplit("-", 1)[-1]
        if not macs.isdigit():
            raise SimError(f"NPU '{npu}' names no MAC count (e.g. ethos-u55-128)")
        params = [p for p in params if not p.startswith(key + "=")] + [f"{key}={macs}"]
    cmd = [name]
    for p in params:
        cmd += ["-C", p.format(cwd=cwd, timeout=int(timeout))]
    cmd += ["-a", str(elf)]
    cmd += ["--data", f"{board.fvp.data_target}={model_bin}@{board.model.address:#x}"]
    cmd += ["--timelimit", str(max(1, int(timeout)))]
    if cycle_limit is not None:
        cmd += ["--cyclelimit", str(int(cycle_limit))]
    return cmd


def run_fvp(bpte: Path | bytes, board: str | Board = "corstone-300", fvp: str | None = None,
            cycle_limit: int | None = None, **options: Unpack[RunOptions]) -> SimResult:
    """Run one .bpte under the board's FVP (`fvp`: which binary); `npu` sets the Ethos-U configuration."""
    o = run_options(options)
    timeout, workdir = float(o["timeout"]), o["workdir"]
    b = board if isinstance(board, Board) else load_board(board)
    name = fvp_variant(b, fvp)
    if shutil.which(name) is None:
        raise ToolMissing(f"{name} not found on PATH: install the Arm FVP (developer.arm.com, Arm Ecosystem FVPs) or run under QEMU")
    with run_dir(workdir, "fvp", b.name) as wd:
        elf, wd, model_bin = prepare_run(bpte, b, wd, "fvp", **o)
        cmd = fvp_command(b, Path(elf).resolve(), model_bin.resolve(), wd.resolve(), timeout, name, cycle_limit,
                          o["npu"])
        console, code, timed_out, secs = run_command(cmd, wd, timeout + KILL_GRACE_S)
        # The FVP ends itself at --timelimit; a run that stopped there printed no result.
        status, parsed = classify(console, code, timed_out)
        if parsed is None and secs >= timeout and FAULT_MARKER not in console:
            status = "timeout"
        return finish(SimResult(status, code, console, parsed, secs, wd, _collect_outputs(wd), cmd), workdir)


FVP_BINARIES = ("FVP_Corstone_SSE-300_Ethos-U55", "FVP_Corstone_SSE-300_Ethos-U65", "FVP_Corstone_SSE-320")


def fvp_for_npu(board: Board, npu: str) -> str | None:
    """An FVP on PATH that models this board with this NPU product."""
    if board.fvp is None:
        return None
    product = npu.rsplit("-", 1)[0]           # ethos-u55
    suffix = product.replace("ethos-", "Ethos-").replace("-u", "-U")
    for name in board.fvp.variants:
        if (suffix in name or (product == "ethos-u85" and "SSE-320" in name)) and shutil.which(name):
            return name
    return None


class FvpSimulator:
    """The Simulator (emlkit/deploy/simulator.py) for boards with an Arm FVP ([fvp] in board.toml): `binary`
    picks the FVP (default: the board's first variant); an Ethos-U program's NPU is modelled by the FVP.
    Counts are cycles."""

    name = "fvp"

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary

    def available(self, board: Board | None, npu: str | None = None) -> bool:
        if board is None or board.fvp is None:
            return False
        if npu is not None:
            return fvp_for_npu(board, npu) is not None
        return any(shutil.which(b) for b in FVP_BINARIES)

    def run(self, bpte: Path, board: Board | None, *, elf: Path | None = None, timeout: float = 120.0,
            save_outputs: str | None = None, npu: str | None = None, etdump: str | None = None,
            debug: bool = False) -> SimRun:
        assert board is not None
        sres = run_fvp(bpte, board, fvp=self.binary, elf=elf, timeout=timeout, save_outputs=bool(save_outputs),
                       npu=npu, etdump=bool(etdump), debug=debug and bool(etdump))
        return from_firmware(sres, Path(bpte), save_outputs, etdump)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run a .bpte on a board image under an Arm FVP")
    ap.add_argument("bpte", type=Path)
    ap.add_argument("--board", default="corstone-300")
    ap.add_argument("--fvp", help="FVP binary (default: the first in board.toml [fvp.variants])")
    ap.add_argument("--elf", type=Path, help="firmware image (default: build it)")
    ap.add_argument("--timeout", type=float, default=60.0, help="wall-clock seconds (--timelimit)")
    ap.add_argument("--cycle-limit", type=int, help="stop after this many cycles (--cyclelimit)")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--save-outputs", action="store_true")
    ap.add_argument("--print-command", action="store_true", help="print the command line and exit")
    ap.add_argument("--npu", help="NPU configuration for Ethos-U programs, e.g. ethos-u55-256 (sets the MAC count)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        b = load_board(args.board)
        if args.print_command:
            wd = (args.workdir or Path(".")).resolve()
            elf = args.elf or Path(f"build/{b.name}-Release/runner.elf")
            sys.stdout.write(" ".join(fvp_command(b, elf, wd / "model.bin", wd, args.timeout, args.fvp, args.cycle_limit,
                                                  args.npu)) + "\n")
            return 0
        r = run_fvp(args.bpte, b, args.fvp, args.cycle_limit, elf=args.elf, timeout=args.timeout, workdir=args.workdir,
                    save_outputs=args.save_outputs, npu=args.npu)
    except (SimError, BoardError, BuildError) as e:
        log.error("error: %s", e)
        return 2
    sys.stdout.write(json.dumps(r.result) + "\n" if r.result else r.tail + "\n")
    log.info("status: %s (exit %s, %.1f s)", r.status, r.exit_code, r.elapsed_s)
    return 0 if r.status == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
