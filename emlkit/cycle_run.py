"""`emlkit run --cycles`: run a program once more under QEMU with its exec log and model each operator's cycles.

The log goes through a named pipe and is parsed as it is written (emlkit/exec_stream.py), so nothing
grows on disk however many instructions the program executes. Each executed block is charged by the
core's timing model (emlkit/cycles.py) and attributed to an operator by address: from the block that
enters an operator's adapter function (the registry's eval or prepare function, firmware/ops/*.def, found
in the ELF's symbol table) called from `et_method_execute`, until execution is back in
`et_method_execute`. The runner itself is not changed. Only the runner's measured runs count: the
last `cases` calls of `et_method_execute` (the first call is the warm-up run).

The figures are a model ("cycles (model)"), never a measurement; see README "Cycles (model)".
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from emlkit.cycles import START, CoreModel, State, branch_taken
from emlkit.exec_stream import QEMU_LOG_FLAGS, Block, Disassembly, elf_symbols, exec_blocks

log = logging.getLogger(__name__)

DISPATCHER = "et_method_execute"
RUNTIME = "(runtime)"   # blocks of a measured run outside any operator: the dispatcher, the profiler's timer reads
_ET_OP_LINE = re.compile(r'^\s*ET_OP\(\s*"([^"]+)"\s*,\s*"[^"]*"\s*,\s*(\w+)\s*(?:,\s*(\w+))?')


class CycleRunError(RuntimeError):
    """The cycle model cannot run on this program (no QEMU board, a stripped ELF, ...): one line saying why."""


@dataclass
class OpCycles:
    op: str
    calls: int = 0
    instructions: int = 0
    cycles: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "calls": self.calls, "instructions": self.instructions,
                "cycles_model": round(self.cycles)}


@dataclass
class CycleReport:
    core: str
    runs: int
    ops: list[OpCycles] = field(default_factory=list)
    instructions: int = 0          # over the measured runs, counted from the stream
    cycles: float = 0.0            # modelled, over the measured runs
    seconds: float = 0.0
    blocks: int = 0

    def op(self, name: str) -> OpCycles | None:
        return next((o for o in self.ops if o.op == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"label": "cycles (model)", "core": self.core, "runs": self.runs, "instructions": self.instructions,
                "cycles_model": round(self.cycles), "per_op": [o.to_dict() for o in self.ops],
                "note": "modelled from Arm's published instruction timings on QEMU's executed instruction stream "
                        "(zero-wait-state memory); not measured"}


def adapter_ops(ops_dir: Path) -> dict[str, tuple[str, bool]]:
    """Adapter function name -> (op name, is the eval function) from the registry tables (firmware/ops/*.def)."""
    out: dict[str, tuple[str, bool]] = {}
    for path in sorted(ops_dir.glob("*.def")):
        for line in path.read_text().splitlines():
            m = _ET_OP_LINE.match(line)
            if m is None:
                continue
            out[m.group(2)] = (m.group(1), True)
            if m.group(3):
                out[m.group(3)] = (m.group(1), False)
    return out


class OpAttribution:
    """Which operator (or the runtime) an executed block belongs to, and in which call of the dispatcher."""

    def __init__(self, dispatcher: tuple[int, int], entries: dict[int, tuple[str, bool]]) -> None:
        self.lo, self.hi = dispatcher
        self.entries = entries
        self.run = -1            # index of the dispatcher call (-1: before the first)
        self.active = False      # inside a dispatcher call (until it returns to its caller)
        self.ret = -1            # where the current dispatcher call returns: after the caller's BL
        self.current: str | None = None
        self.in_dispatcher = False

    def step(self, pc: int, prev_end: int | None) -> tuple[int, str | None, bool]:
        """(run index, op name, RUNTIME, or None outside the dispatcher's calls, whether this block starts an
        op call). `prev_end`: the address after the previous block's last instruction (its return address
        when it ended with a call)."""
        if pc == self.lo:
            self.run += 1
            self.active, self.ret = True, prev_end if prev_end is not None else -1
            self.current, self.in_dispatcher = None, True
            return self.run, RUNTIME, False
        if not self.active:
            return self.run, None, False
        if pc == self.ret and not (self.lo <= pc < self.hi):
            self.active, self.current, self.in_dispatcher = False, None, False
            return self.run, None, False
        if self.lo <= pc < self.hi:
            self.current, self.in_dispatcher = None, True
            return self.run, RUNTIME, False
        called = False
        if self.in_dispatcher and pc in self.entries:
            name, is_eval = self.entries[pc]
            self.current, called = name, is_eval
        self.in_dispatcher = False
        return self.run, self.current or RUNTIME, called

    @staticmethod
    def from_elf(elf: Path, ops_dir: Path) -> "OpAttribution":
        syms = elf_symbols(elf)
        if DISPATCHER not in syms:
            raise CycleRunError(f"{elf} has no symbol {DISPATCHER}: the cycle model needs the runner's unstripped ELF")
        d = syms[DISPATCHER]
        entries = {syms[fn].addr: op for fn, op in adapter_ops(ops_dir).items() if fn in syms}
        return OpAttribution((d.addr, d.addr + d.size), entries)


class CycleCounter:
    """Charges each executed block by the core model and adds it to its operator in its run."""

    def __init__(self, model: CoreModel, attribution: OpAttribution) -> None:
        self.model = model
        self.attr = attribution
        self.per_run: list[dict[str, OpCycles]] = []
        self.state: State = START
        self.cost_cache: dict[tuple[tuple[int, int], State, bool], tuple[float, State]] = {}
        self.prev: tuple[Block, int, str | None, bool] | None = None
        self.blocks = 0

    def feed(self, block: Block) -> None:
        prev_end = None
        if self.prev is not None and self.prev[0].instrs:
            last = self.prev[0].instrs[-1]
            prev_end = last.addr + last.size
        self._settle(block.pc)
        run, op, called = self.attr.step(block.pc, prev_end)
        self.prev = (block, run, op, called)
        self.blocks += 1

    def close(self) -> None:
        self._settle(None)

    def _settle(self, next_pc: int | None) -> None:
        """Charge the previous block, now that the next block's address says whether its branch was taken."""
        if self.prev is None:
            return
        block, run, op, called = self.prev
        self.prev = None
        if not block.instrs:
            return
        taken = branch_taken(block.instrs[-1], next_pc)
        key = (block.key, self.state, taken)
        hit = self.cost_cache.get(key)
        if hit is None:
            hit = self.cost_cache[key] = self.model.block_cycles(block.instrs, self.state, taken)
        cycles, self.state = hit
        if op is None or run < 0:
            return
        while len(self.per_run) <= run:
            self.per_run.append({})
        acc = self.per_run[run].get(op)
        if acc is None:
            acc = self.per_run[run][op] = OpCycles(op)
        acc.instructions += len(block.instrs)
        acc.cycles += cycles
        acc.calls += int(called)

    def report(self, runs: int) -> CycleReport:
        """The last `runs` dispatcher calls (the runner's measured runs), ops in first-call order."""
        if len(self.per_run) < runs:
            raise CycleRunError(f"the exec log shows {len(self.per_run)} runs of the program, the runner reported "
                                f"{runs}: the log is incomplete")
        rep = CycleReport(self.model.core, runs, blocks=self.blocks)
        merged: dict[str, OpCycles] = {}
        for r in self.per_run[len(self.per_run) - runs:]:
            for name, o in r.items():
                m = merged.setdefault(name, OpCycles(name))
                m.calls += o.calls
                m.instructions += o.instructions
                m.cycles += o.cycles
        rep.ops = list(merged.values())
        rep.instructions = sum(o.instructions for o in rep.ops)
        rep.cycles = sum(o.cycles for o in rep.ops)
        return rep


def count_stream(lines: Iterable[str], dis: Disassembly, model: CoreModel, attribution: OpAttribution,
                 runs: int) -> CycleReport:
    counter = CycleCounter(model, attribution)
    for block in exec_blocks(lines, dis):
        counter.feed(block)
    counter.close()
    return counter.report(runs)


def run_with_exec_log(cmd: list[str], workdir: Path, timeout: float, consume: Any) -> tuple[str, int | None, bool]:
    """Run QEMU (`cmd`, without log options) with its exec log in a named pipe that `consume(lines)` reads as
    it is written. Returns (console, exit code or None when killed, timed out)."""
    fifo = workdir / "exec.fifo"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    console_file = workdir / "console.txt"
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            with open(fifo, "r", buffering=1 << 20, errors="replace") as f:
                consume(f)
                for _ in f:  # drain, so QEMU never blocks on a full pipe
                    pass
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    with open(console_file, "wb") as out:
        proc = subprocess.Popen([*cmd, *QEMU_LOG_FLAGS, "-D", str(fifo)], cwd=workdir, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if t.is_alive():
        # QEMU ended; if it never opened the pipe the reader still waits in open(): give it an empty log
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
        t.join()
    fifo.unlink(missing_ok=True)
    if errors:
        raise errors[0]
    code = None if timed_out else proc.returncode
    return console_file.read_text(errors="replace"), code, timed_out


def model_cycles(bpte: Path, board: Any, elf: Path, core: str, runs: int, timeout: float,
                 ops_dir: Path | None = None) -> CycleReport:
    """Run `bpte` on `board`'s QEMU machine with `elf` and return the modelled cycles per operator over the
    runner's `runs` measured runs."""
    from emlkit.deploy.opset import OPS_DIR
    from emlkit.deploy.sim_qemu import SimError, prepare_run, qemu_command

    model = CoreModel.load(core)
    dis = Disassembly.of_elf(elf, core)
    attribution = OpAttribution.from_elf(elf, ops_dir or OPS_DIR)
    t0 = time.monotonic()
    result: list[CycleReport] = []
    with tempfile.TemporaryDirectory(prefix="cycles-") as tmp:
        wd = Path(tmp)
        try:
            elf_path, wd, model_bin = prepare_run(bpte, board, wd, "qemu", elf=elf)
            cmd = qemu_command(board, elf_path.resolve(), model_bin.resolve())
        except SimError as exc:
            raise CycleRunError(str(exc)) from None
        console, code, timed_out = run_with_exec_log(
            cmd, wd, timeout, lambda lines: result.append(count_stream(lines, dis, model, attribution, runs)))
    if timed_out:
        raise CycleRunError(f"the cycle-model run was stopped at --timeout {timeout:.0f} s (the exec log slows "
                            "QEMU down several times): give a larger --timeout")
    if not result:
        raise CycleRunError(f"QEMU wrote no exec log (exit {code}): {console.strip().splitlines()[-1:] or 'no output'}")
    rep = result[0]
    rep.seconds = time.monotonic() - t0
    return rep


