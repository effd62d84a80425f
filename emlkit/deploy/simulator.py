"""One interface for everything that runs a bundled program: the host runner, QEMU and the Arm FVPs.

Each simulator module provides one (emlkit/deploy/sim_host.py HostSimulator, sim_qemu.py QemuSimulator,
sim_fvp.py FvpSimulator); emlkit/deploy/execute.py picks one by name and never asks which it is.
A simulator that cannot start raises (SimError from emlkit/deploy/sim_qemu.py, or the host runner's build
error); what the device did (pass, fail, timeout, crash) comes back in the SimRun.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from emlkit.errors import AotError

if TYPE_CHECKING:
    from emlkit.deploy.boards import Board
    from emlkit.deploy.result import RunResult

log = logging.getLogger("emlkit.deploy.execute")


@dataclass
class SimRun:
    """What one run of a bundled program gave."""

    result: RunResult | None            # the device's result line (timeouts and crashes included)
    etdump: Path | None = None          # where the ETDump was kept, when one was asked for and written
    debug_buffer: Path | None = None    # its debug buffer (debug_buffer_path), when every output was asked for
    skip_reason: str = ""               # the run could not be judged (e.g. a feature the NPU model lacks)


class Simulator(Protocol):
    """Runs a bundled program (.bpte) on a board's firmware image, or natively (the host runner)."""

    name: str                           # host, qemu, fvp: what the run reports as its simulator

    def available(self, board: Board | None, npu: str | None = None) -> bool:
        """Whether this simulator can run programs for BOARD here (with NPU, for Ethos-U programs)."""
        ...

    def run(self, bpte: Path, board: Board | None, *, elf: Path | None = None, timeout: float = 120.0,
            save_outputs: str | None = None, npu: str | None = None, etdump: str | None = None,
            debug: bool = False) -> SimRun:
        """Run every bundled test case of BPTE; `save_outputs`: a folder for output_<i>.npy; `etdump`: a file for
        the ETDump of the measured runs; `debug` (with etdump): the first measured run also records every call's
        output, kept at debug_buffer_path(etdump); `npu`: the NPU an Ethos-U program's delegate runs on."""
        ...


def collect_outputs(workdir: Path) -> list[Path]:
    """The runner's output_<i>.bin files in `workdir`, in index order."""
    outs = [p for p in workdir.glob("output_*.bin") if p.stem.split("_")[1].isdigit()]
    return sorted(outs, key=lambda p: int(p.stem.split("_")[1]))


def save_npy(raw: list[bytes], bpte: Path, save_outputs: str) -> None:
    """The device's raw outputs as SAVE_OUTPUTS/output_<i>.npy."""
    from emlkit.deploy.outputs_npy import save_outputs_npy

    if not raw:
        raise AotError("the device wrote no outputs to save")
    with tempfile.TemporaryDirectory() as d:
        for i, data in enumerate(raw):
            (Path(d) / f"output_{i}.bin").write_bytes(data)
        for p in save_outputs_npy(d, bpte, save_outputs):
            log.info("saved %s", p)


def debug_buffer_path(etdump: str | Path) -> Path:
    """Where the debug buffer of an ETDump goes: beside it, NAME.etdp -> NAME.debug.bin."""
    p = Path(etdump)
    return p.with_name(p.stem + ".debug.bin")


def _keep(data: bytes, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")  # a failed write never leaves half a file under the user's name
    tmp.write_bytes(data)
    tmp.replace(dst)
    return dst


def keep_etdump(data: bytes | None, status: str, etdump: str | None) -> Path | None:
    """Copy the ETDump the firmware wrote in the simulator's folder to where the user asked for it."""
    if not etdump:
        return None
    if data is None:
        log.warning("warning: the firmware wrote no ETDump (status %s)", status)
        return None
    return _keep(data, Path(etdump))


def from_firmware(sres: Any, bpte: Path, save_outputs: str | None, etdump: str | None) -> SimRun:
    """A SimRun from a firmware simulator's result (emlkit/deploy/sim_qemu.py SimResult): a timeout or crash
    becomes the result's status with the console's tail; outputs and the ETDump are kept where asked."""
    from emlkit.deploy.result import RunResult

    if getattr(sres, "skip_reason", ""):
        return SimRun(None, skip_reason=sres.skip_reason)
    res = sres.run
    if sres.status in ("timeout", "crash"):
        tail = sres.console.splitlines()[-20:]
        why = sres.fault or ("killed at the timeout" if sres.status == "timeout" else "no result line")
        res = res if res is not None else RunResult(status=sres.status)
        res.status, res.error, res.console = sres.status, why, tail
    if save_outputs and res is not None and res.status in ("pass", "fail"):
        save_npy(sres.output_data, bpte, save_outputs)
    kept = keep_etdump(sres.etdump_data, sres.status, etdump)
    debug = getattr(sres, "debug_data", None)
    dbuf = _keep(debug, debug_buffer_path(kept)) if kept is not None and debug is not None else None
    return SimRun(res, etdump=kept, debug_buffer=dbuf)
