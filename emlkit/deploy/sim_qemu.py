"""Run a .bpte on a board image under QEMU (instruction-counting, deterministic).

    python -m emlkit.deploy.sim_qemu model.bpte --board corstone-300 [--timeout 60] [--save-outputs DIR]

QEMU starts as board.toml [qemu] says (machine, -semihosting, -icount shift=0)
with the firmware as -kernel and model.bin (EMDL header + .bpte) placed at the
board's model address by `-device loader`. QEMU runs in a working directory
(a temporary one unless given) where the firmware's semihosting writes
output_<i>.bin. The status is:
  the runner's JSON status ("pass", "fail", ...) when it printed its line,
  "timeout"  killed after --timeout seconds (last console lines kept),
  "crash"    a fault report ("FAULT: ...") or no JSON line at all.
The semihosting exit status reaches QEMU's exit status (SYS_EXIT_EXTENDED), so
exit_code is the runner's return value (3 after a fault report).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, TypedDict, Unpack

from emlkit.deploy.boards import Board, BoardError, load_board
from emlkit.deploy.build import BuildError, BuildOptions, build_image, check_model_fits, emdl_image
from emlkit.deploy.result import ResultError, RunResult, parse_result
from emlkit.deploy.simulator import SimRun, collect_outputs, from_firmware

log = logging.getLogger(__name__)

FAULT_MARKER = "FAULT:"
QEMU_FATAL = "qemu: fatal:"
ETDUMP_FILE = "etdump.etdp"  # what the runner writes through semihosting when asked (PLAT_FLAG_ETDUMP)
DEBUG_FILE = "debug.bin"     # every call's output, which the ETDump's debug events point into (PLAT_FLAG_DEBUG)
TAIL_LINES = 20


class SimError(RuntimeError):
    """The simulation could not be started (missing simulator, model too big, ...)."""


class ToolMissing(SimError):
    """A simulator or tool this machine lacks (QEMU, an FVP): the run is skipped, not failed."""


@dataclass
class SimResult:
    status: str  # runner status, or "timeout" / "crash"
    exit_code: int | None
    console: str
    run: RunResult | None = None  # the runner's parsed JSON line
    elapsed_s: float = 0.0
    workdir: Path | None = None
    outputs: list[Path] = field(default_factory=list)  # output_<i>.bin, in index order
    command: list[str] = field(default_factory=list)
    output_data: list[bytes] = field(default_factory=list)  # the same outputs' bytes (kept after a temp workdir is gone)
    etdump_data: bytes | None = None  # the ETDump the runner wrote, when asked for one
    debug_data: bytes | None = None   # its debug buffer, when asked for every call's output
    npu: Any = None          # emlkit.deploy.npu_cosim.CosimResult when an NPU was co-simulated
    npu_spec: str = ""       # the NPU it played, e.g. ethos-u55-128
    skip_reason: str = ""    # the run could not be judged (a feature the NPU model lacks)

    @property
    def result(self) -> dict[str, Any] | None:
        """The JSON line as a dict (None without one)."""
        return self.run.raw if self.run is not None else None

    @property
    def tail(self) -> str:
        return "\n".join(self.console.splitlines()[-TAIL_LINES:])

    @property
    def fault(self) -> str | None:
        """The firmware's fault report, or QEMU's own fatal error (e.g. a locked-up core)."""
        lines = [ln for ln in self.console.splitlines() if ln.startswith(FAULT_MARKER)]
        for ln in self.console.splitlines():
            if QEMU_FATAL in ln:
                text = ln[ln.index(QEMU_FATAL):]
                if "Lockup" in text:
                    text += (" (the core faulted while taking a fault: on Armv6-M a stack overflow into the MPU "
                             "guard, or a corrupt stack pointer)")
                lines.append(text)
        return "\n".join(lines) or None


def _parse_result_line(console: str) -> RunResult | None:
    try:
        return parse_result(console)
    except ResultError:
        return None


def run_command(cmd: list[str], cwd: Path, timeout: float) -> tuple[str, int | None, bool, float]:
    """Run a simulator; kill its whole process group at `timeout`. Returns
    (console, exit_code or None when killed, timed_out, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    except BaseException:  # Ctrl-C: the simulator runs in its own session and would outlive us
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    code = None if timed_out else proc.returncode
    return out.decode("utf-8", errors="replace"), code, timed_out, time.monotonic() - t0


# The runner's exit status for each result status (firmware/runner/main.c).
EXIT_FOR_STATUS = {"pass": 0, "fail": 1, "error": 2}


def classify(console: str, exit_code: int | None, timed_out: bool) -> tuple[str, RunResult | None]:
    """(status, parsed line): timeout, crash (fault report, no line, or an exit
    status that contradicts the line), else the runner's own status."""
    parsed = _parse_result_line(console)
    if timed_out:
        return "timeout", parsed
    if FAULT_MARKER in console or QEMU_FATAL in console or parsed is None:
        return "crash", parsed
    if exit_code is not None and exit_code != EXIT_FOR_STATUS.get(parsed.status, exit_code):
        return "crash", parsed
    return parsed.status, parsed


def qemu_command(board: Board, elf: Path, model_bin: Path) -> list[str]:
    if board.qemu is None:
        raise SimError(f"board '{board.name}' has no [qemu] section: QEMU cannot run it (try sim_fvp)")
    binary = shutil.which(board.qemu.binary)
    if binary is None:
        raise ToolMissing(f"{board.qemu.binary} not found: apt-get install qemu-system-arm (or run ./scripts/setup.sh)")
    return [
        binary,
        "-M",
        board.qemu.machine,
        *board.qemu.args,
        "-kernel",
        str(elf),
        "-device",
        f"loader,file={model_bin},addr={board.model.address:#x},force-raw=on",
    ]


_collect_outputs = collect_outputs


@contextlib.contextmanager
def run_dir(workdir: Path | None, sim: str, board: str) -> Iterator[Path]:
    """The simulator's working folder: the caller's, or a temporary one removed afterwards (also on errors,
    timeouts and Ctrl-C), so no run leaves files behind in the temp directory."""
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        yield workdir
        return
    d = Path(tempfile.mkdtemp(prefix=f"{sim}-{board}-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def finish(res: SimResult, caller_dir: Path | None) -> SimResult:
    """Keep the outputs' bytes; paths only when the folder is the caller's (a temporary one is about to go)."""
    res.output_data = [p.read_bytes() for p in res.outputs]
    if res.workdir is not None and (Path(res.workdir) / ETDUMP_FILE).is_file():
        res.etdump_data = (Path(res.workdir) / ETDUMP_FILE).read_bytes()
    if res.workdir is not None and (Path(res.workdir) / DEBUG_FILE).is_file():
        res.debug_data = (Path(res.workdir) / DEBUG_FILE).read_bytes()
    if caller_dir is None:
        res.workdir, res.outputs = None, []
    return res


class RunOptions(TypedDict, total=False):
    """The options every simulator run takes (run_qemu, run_fvp); one left out takes its value in RUN_DEFAULTS."""

    elf: Path | None                     # firmware image (None: build the board's)
    timeout: float                       # seconds
    workdir: Path | None                 # working folder to keep (None: a temporary one)
    save_outputs: bool                   # the firmware writes output_<i>.bin there
    build_options: BuildOptions | None   # for the image built when elf is None
    npu: str | None                      # NPU for Ethos-U programs (each simulator says how it uses it)
    etdump: bool                         # the firmware writes an ETDump
    debug: bool                          # ... with every call's output (debug events + debug.bin)


RUN_DEFAULTS: RunOptions = {"elf": None, "timeout": 60.0, "workdir": None, "save_outputs": False,
                            "build_options": None, "npu": None, "etdump": False,
                            "debug": False}


def run_options(options: RunOptions) -> RunOptions:
    return {**RUN_DEFAULTS, **options}


def prepare_run(bpte: Path | bytes, b: Board, folder: Path, sim: str,
                **options: Unpack[RunOptions]) -> tuple[Path, Path, Path]:
    """What every simulator needs before it starts: a model that fits, the image, a clean work
    folder and model.bin (EMDL header + .bpte) in it. Returns (elf, folder, model_bin).
    `folder` is the run's (run_dir); options["workdir"] only says whether the caller keeps it."""
    o = run_options(options)
    elf = o["elf"]
    data = bpte if isinstance(bpte, bytes) else Path(bpte).read_bytes()
    try:
        check_model_fits(b, len(data), "model" if isinstance(bpte, bytes) else str(bpte))
    except ValueError as e:
        raise SimError(str(e)) from None
    if elf is None:
        elf = build_image(b.name, o["build_options"]).elf
    if not Path(elf).is_file():
        raise SimError(f"{elf}: firmware image not found (build it: python -m emlkit.deploy.build --board {b.name})")
    folder.mkdir(parents=True, exist_ok=True)
    for old in _collect_outputs(folder):
        old.unlink()  # stale outputs from an earlier run must not pass for new ones
    (folder / ETDUMP_FILE).unlink(missing_ok=True)
    (folder / DEBUG_FILE).unlink(missing_ok=True)
    model_bin = folder / "model.bin"
    model_bin.write_bytes(emdl_image(data, bool(o["save_outputs"]), bool(o["etdump"]), bool(o["debug"])))
    return Path(elf), folder, model_bin


def program_npu(bpte: bytes) -> str | None:
    """The NPU an Ethos-U program was compiled for (e.g. "ethos-u55-128", from its first delegate's
    driver header), or None for a program without an Ethos-U delegate."""
    if b"vela_bin_stream" not in bpte:
        return None
    from emlkit.npu.blob import parse_blob

    start = bpte.index(b"vela_bin_stream")
    end = bpte.find(b"vela_end_stream", start)
    if end < 0:
        raise SimError("the program's Ethos-U delegate data is truncated (no vela_end_stream): recompile it")
    try:
        blob = parse_blob(bpte[start:end + 32])
    except Exception as exc:  # the firmware reports corrupt delegates itself; only the NPU choice is needed here
        log.debug("delegate header unreadable: %s", exc)
        return "ethos-u55-128"
    if blob.config is None:
        return "ethos-u55-128"
    product = {0: "ethos-u55", 1: "ethos-u65", 2: "ethos-u85"}.get(blob.config.product, "ethos-u55")
    return f"{product}-{1 << blob.config.macs_per_cc}"


def run_qemu(bpte: Path | bytes, board: str | Board = "corstone-300", npu_fault: str | None = None,
             **options: Unpack[RunOptions]) -> SimResult:
    """Run one .bpte; builds the board image first when `elf` is not given.

    A program with an Ethos-U delegate runs with the NPU co-simulated (emlkit/deploy/npu_cosim.py): `npu`
    names the NPU to play (default: the one the program was compiled for), `npu_fault` injects a fault."""
    o = run_options(options)
    timeout, workdir = float(o["timeout"]), o["workdir"]
    b = board if isinstance(board, Board) else load_board(board)
    data = bpte if isinstance(bpte, bytes) else Path(bpte).read_bytes()
    with run_dir(workdir, "qemu", b.name) as wd:
        elf, wd, model_bin = prepare_run(bpte, b, wd, "qemu", **o)
        cmd = qemu_command(b, Path(elf).resolve(), model_bin.resolve())
        wanted = o["npu"] or program_npu(data)
        if wanted is not None and b.npu is not None:
            from emlkit.npu.perf import estimates_beside

            return finish(_run_cosim(b, Path(elf), wd, cmd, wanted, npu_fault, timeout, estimates_beside(bpte)), workdir)
        console, code, timed_out, secs = run_command(cmd, wd, timeout)
        status, parsed = classify(console, code, timed_out)
        res = finish(SimResult(status, code, console, parsed, secs, wd, _collect_outputs(wd), cmd), workdir)
    if status == "timeout":
        log.warning("%s: killed after %.0f s; last console lines:\n%s", b.name, timeout, res.tail)
    elif status == "crash":
        log.warning("%s: crashed (exit %s):\n%s", b.name, code, res.fault or res.tail)
    return res


class QemuSimulator:
    """The Simulator (emlkit/deploy/simulator.py) for boards with a QEMU machine ([qemu] in board.toml); an
    Ethos-U delegate runs on the co-simulated NPU (emlkit/deploy/npu_cosim.py). Counts are instructions."""

    name = "qemu"

    def available(self, board: Board | None, npu: str | None = None) -> bool:
        return board is not None and board.qemu is not None and (npu is None or board.npu is not None)

    def run(self, bpte: Path, board: Board | None, *, elf: Path | None = None, timeout: float = 120.0,
            save_outputs: str | None = None, npu: str | None = None, etdump: str | None = None,
            debug: bool = False) -> SimRun:
        assert board is not None
        sres = run_qemu(bpte, board, elf=elf, timeout=timeout, save_outputs=bool(save_outputs), npu=npu,
                        etdump=bool(etdump), debug=debug and bool(etdump))
        return from_firmware(sres, Path(bpte), save_outputs, etdump)


def _run_cosim(b: Board, elf: Path, workdir: Path, cmd: list[str], npu: str, fault: str | None,
               timeout: float, estimates: dict[str, dict[int, int]] | None = None) -> SimResult:
    from emlkit.deploy.npu_cosim import CosimError, NpuSpec, run_cosim

    assert b.npu is not None
    try:
        spec = NpuSpec.parse(npu)
    except ValueError as err:
        raise SimError(str(err)) from None
    if b.npu.products and spec.product not in b.npu.products:
        raise SimError(f"board '{b.name}' has an {' or '.join(b.npu.products)}, not an {spec.product}: "
                       f"pick a board with that NPU (see boards/*/board.toml [npu].products)")
    reach = [(m.base, m.end, m.name) for m in b.memories if not b.npu.dma_regions or m.name in b.npu.dma_regions]
    try:
        r = run_cosim(cmd, elf, workdir, spec, b.npu.base, b.npu.irq, reach, timeout, fault, estimates)
    except CosimError as err:
        return SimResult("skip", None, "", None, 0.0, workdir, [], cmd, npu_spec=spec.name, skip_reason=str(err))
    status, parsed = classify(r.console, r.exit_code, r.timed_out)
    res = SimResult(status, r.exit_code, r.console, parsed, r.seconds, workdir, _collect_outputs(workdir), cmd,
                    npu=r, npu_spec=spec.name)
    if status == "timeout":
        log.warning("%s: killed after %.0f s; last console lines:\n%s", b.name, timeout, res.tail)
    elif status == "crash":
        log.warning("%s: crashed (exit %s):\n%s", b.name, r.exit_code, res.fault or res.tail)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run a .bpte on a board image under QEMU")
    ap.add_argument("bpte", type=Path)
    ap.add_argument("--board", default="corstone-300")
    ap.add_argument("--elf", type=Path, help="firmware image (default: build it)")
    ap.add_argument("--no-mve", action="store_true", help="use the portable-kernel image")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before QEMU is killed")
    ap.add_argument("--workdir", type=Path, help="QEMU's working directory (default: a temp dir)")
    ap.add_argument("--save-outputs", action="store_true", help="write output_<i>.bin into the working directory")
    ap.add_argument("--npu", help="NPU to co-simulate for Ethos-U programs (default: the program's, e.g. ethos-u55-128)")
    ap.add_argument("--npu-fault", choices=["hang", "drop-irq", "bus-error"], help="inject an NPU fault (tests)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    if not args.bpte.is_file():
        log.error("error: %s: no such file (compile the model with python -m emlkit compile)", args.bpte)
        return 2
    try:
        r = run_qemu(args.bpte, args.board, args.npu_fault, elf=args.elf, timeout=args.timeout, workdir=args.workdir,
                     save_outputs=args.save_outputs, build_options=BuildOptions(mve=not args.no_mve), npu=args.npu)
    except (SimError, BoardError, BuildError) as e:
        log.error("error: %s", e)
        return 2
    sys.stdout.write(r.console if args.verbose else (json.dumps(r.result) + "\n" if r.result else r.tail + "\n"))
    log.info("status: %s (exit %s, %.1f s, workdir %s)", r.status, r.exit_code, r.elapsed_s, r.workdir)
    return 0 if r.status == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
