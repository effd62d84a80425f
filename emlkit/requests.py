"""What each command asks for, as typed values: built from the command line by emlkit/commands, taken by the
library (emlkit/run.py, emlkit/deploy/export.py, emlkit/deploy/flash.py, emlkit/suite.py).

A request carries resolved values: the Target (emlkit/targets.py) and the Board (emlkit/deploy/boards.py, loaded
once) rather than their names. "host" (the native runner, which has no board.toml) stays the string HOST.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from emlkit.deploy.boards import Board
    from emlkit.lower import LowerOptions
    from emlkit.targets import Target

HOST = "host"
BoardRef = Union["Board", str]      # a loaded board, or HOST


def board_name(board: BoardRef) -> str:
    return board if isinstance(board, str) else board.name


@dataclass
class ProgramSpec:
    """A model to compile for a target: what compile, run and export share."""

    model: str                       # zoo name, .py file, .pt case file (run: also a .bpte)
    target: Target
    calibration: str | None = None
    options: LowerOptions | None = None


@dataclass
class CompileRequest:
    program: ProgramSpec
    output: Path
    board: BoardRef | None = None    # the board whose memories the fit check uses; None: no fit check


@dataclass
class RunRequest:
    program: ProgramSpec
    output: Path
    board: BoardRef
    sim: str = "auto"                # qemu, fvp or auto
    timeout: float = 120.0
    kernels: str = "mve"
    save_outputs: str | None = None
    npu_trace: bool = False
    etdump: str | None = None
    cycles: bool = False             # run once more with QEMU's exec log for "cycles (model)" per op

    @property
    def prebuilt(self) -> bool:
        """MODEL is a bundled program compiled earlier (checked, not compiled)."""
        return str(self.program.model).endswith((".bpte", ".pte"))


@dataclass
class ExportRequest:
    program: ProgramSpec
    output: Path
    board: BoardRef
    force: bool = False
    kernels: str = "mve"


@dataclass
class InspectRequest:
    etdump: str | None = None
    log: str | None = None
    etrecord: str | None = None
    sim: str | None = None
    json: str | None = None
    trace: str | None = None         # a Chrome/Perfetto trace of one run (emlkit/trace.py)
    trace_run: int = 0


@dataclass
class FlashRequest:
    elf: Path
    probe: str | None = None         # pyOCD probe UID or "auto"
    mps3: str | None = None          # the MPS3's mounted drive
    mps3_dir: str | None = None      # a folder for the SD-card files instead
    pyocd_target: str | None = None
    board: Board | None = None       # the memory map for --mps3/--mps3-dir (None with --probe)
    frequency: int | None = None
    erase: str = "auto"
    dry_run: bool = False


@dataclass
class SuiteRequest:
    models: list[str]
    targets: list[str]
    boards: list[str] | None         # None: each target's boards
    sim: str                         # qemu or fvp (auto resolved)
    jobs: int
    out: Path
    timeout: float
    verbose: bool = False
    programs: Path | None = None     # the compiled-program cache (None: out/programs)
    extra_rows: list[tuple[str, str]] = field(default_factory=list)   # (model, target) rows beyond models x targets


@dataclass
class OpsuiteRequest:
    """emlkit.opsuite.run.run reads these attributes."""

    targets: str
    allow_float: bool
    cases: str
    k: str | None
    shard: str
    jobs: int
    timeout: float
    out: str


@dataclass
class MergeRequest:
    """emlkit.opsuite.report.main reads these attributes."""

    shards: list[str] = field(default_factory=list)
    output: str = ""
    docs: str | None = None


@dataclass
class DebugRequest:
    """`emlkit debug`: every layer's output on the device against the host reference and the float model."""

    program: ProgramSpec
    output: Path
    board: BoardRef
    inputs: Path | None = None       # one input sample (.pt tuple, .npz, folder); default: the model's example
    sim: str = "auto"
    timeout: float = 600.0
    kernels: str = "mve"
    suggest: bool = False            # also measure remedies for the worst layer (emlkit/debug_suggest.py)


@dataclass
class EvaluateRequest:
    """`emlkit evaluate`: a model's accuracy on a data set, float vs quantized host reference vs device."""

    program: ProgramSpec
    data: Path                       # .npz with x (inputs, sample axis first) and optionally the labels
    output: Path
    board: BoardRef
    labels: str | None = None        # the labels' array name (default: y when present)
    limit: int | None = None         # the first N samples only
    sim: str = "auto"
    timeout: float = 600.0
    kernels: str = "mve"
