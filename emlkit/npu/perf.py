"""Per-command NPU cycle estimates from Vela's own per-operation performance model.

QEMU has no NPU and the functional model keeps no time, so the co-simulated NPU's PMU and the trace's NPU track
take their cycles from Vela. With `--enable-debug-db` Vela (regor) writes `<name>_debug.xml`, whose tables give:

* `perf`: one row per scheduled operation with `op_cycles` (its estimate including the memory transfers that
  stall it) and `npu_cycles` (the NPU alone). They sum to the summary CSV's `cycles_total` and `cycles_npu`.
* `queue`: the byte offset in the command stream of each operation's NPU_OP_* command(s), with its scheduled id.

A stream has more commands than `queue` rows: an operation Vela cut into stripes (or a layout change run as many
1x1 pools) has one queued command followed by unqueued ones of the same operation, and weight/LUT DMAs come just
before the operation that reads them. So each executed command is attributed to an operation: a compute command
to the last queued one at or before it, a DMA to the next queued compute command's operation (its prefetch).
The operation's `op_cycles` are then split over its commands: its DMAs share the memory-bound excess
(`op_cycles - npu_cycles`) by bytes, its compute commands the rest by OFM elements, each command at least one
cycle (so that every command is visible in a timeline). A chained group (U85) is one budget: Vela books the
group's time on its leader and 0 on the chained operation. The split is deterministic and the commands of an
operation sum to its `op_cycles` exactly; the stream's sum equals Vela's total estimate unless an operation has
no command (reported in `unplaced`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emlkit.npu.commands import Command
from emlkit.npu.errors import NpuError

log = logging.getLogger(__name__)

MODEL = "Vela per-op model"
# Commands the functional model runs (emlkit/npu/execute.py Machine.run); the rest only synchronise.
SYNC_COMMANDS = frozenset({"NPU_OP_STOP", "NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT", "NPU_OP_PMU_MASK", "NPU_OP_IRQ"})


@dataclass(frozen=True)
class VelaOp:
    """One scheduled operation of Vela's performance table."""

    id: int
    name: str
    operator: str
    op_cycles: int
    npu_cycles: int


@dataclass
class VelaPerf:
    """The tables of Vela's debug database the estimates need."""

    ops: dict[int, VelaOp]            # scheduled id -> operation, in Vela's order
    queue: dict[int, int]             # command-stream byte offset -> scheduled id
    groups: dict[int, int] = field(default_factory=dict)  # fused/chained op id -> the id of its group's leader


@dataclass(frozen=True)
class CommandEstimate:
    offset: int        # byte offset in the command stream (as decode() with base 0 numbers it)
    kind: str          # CONV, DEPTHWISE, POOL, ELEMENTWISE, RESIZE, DMA
    op: str            # Vela's operation the command belongs to
    cycles: int        # its share of that operation's op_cycles

    def to_json(self) -> list[Any]:
        return [self.offset, self.kind, self.op, self.cycles]

    @classmethod
    def from_json(cls, row: list[Any]) -> "CommandEstimate":
        return cls(int(row[0]), str(row[1]), str(row[2]), int(row[3]))


def _tables(xml_text: str) -> dict[str, tuple[list[str], list[list[str]]]]:
    root = ET.fromstring(xml_text)
    out: dict[str, tuple[list[str], list[list[str]]]] = {}
    for t in root.iter("table"):
        rows = [r for r in csv.reader((t.text or "").strip().splitlines()) if r]
        if rows:
            out[t.get("name", "")] = (rows[0], rows[1:])
    return out


def parse_debug_db(xml_text: str) -> VelaPerf:
    """Vela's `_debug.xml` -> its performance, queue and group tables."""
    try:
        tables = _tables(xml_text)
    except ET.ParseError as err:
        raise NpuError(f"Vela's debug database is not valid XML ({err})") from None
    for need in ("perf", "queue"):
        if need not in tables:
            raise NpuError(f"Vela's debug database has no '{need}' table: compile with Vela's --enable-debug-db")

    def col(table: str, name: str) -> int:
        header = tables[table][0]
        if name not in header:
            raise NpuError(f"Vela's '{table}' table has no '{name}' column (columns: {', '.join(header)})")
        return header.index(name)

    pid, pname, pop, poc, pnc = (col("perf", c) for c in ("id", "name", "operator", "op_cycles", "npu_cycles"))
    ops = {int(r[pid]): VelaOp(int(r[pid]), r[pname], r[pop], int(r[poc]), int(r[pnc])) for r in tables["perf"][1]}
    qoff, qid = col("queue", "offset"), col("queue", "scheduled_id")
    queue = {int(r[qoff]): int(r[qid]) for r in tables["queue"][1]}
    groups: dict[int, int] = {}
    if "group" in tables and tables["group"][1]:
        gid, ggroup = col("group", "id"), col("group", "group_id")
        groups = {int(r[gid]): int(r[ggroup]) for r in tables["group"][1]}
    return VelaPerf(ops, queue, groups)


def _kind(c: Command) -> str:
    return "DMA" if c.name == "NPU_OP_DMA_START" else c.name[len("NPU_OP_"):]


def _split(total: int, weights: list[int]) -> list[int]:
    """`total` over len(weights) parts, each at least 1 when total allows, the rest in proportion to the weights
    (largest remainder, ties to the earlier part): the parts sum to `total`."""
    n = len(weights)
    if n == 0:
        return []
    floor = 1 if total >= n else 0
    rest = total - floor * n
    wsum = sum(weights)
    if wsum <= 0:
        weights, wsum = [1] * n, n
    exact = [rest * w / wsum for w in weights]
    parts = [int(x) for x in exact]
    order = sorted(range(n), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in order[:rest - sum(parts)]:
        parts[i] += 1
    return [floor + p for p in parts]


def executed(commands: list[Command]) -> list[Command]:
    """The commands the NPU runs (and the functional model traces), in stream order, up to NPU_OP_STOP."""
    out = []
    for c in commands:
        if c.name == "NPU_OP_STOP":
            break
        if c.is_operation and c.name not in SYNC_COMMANDS:
            out.append(c)
    return out


def _weights(commands: list[Command]) -> dict[int, int]:
    """Each executed command's size: OFM elements for compute, bytes for a DMA (the registers set before it)."""
    regs: dict[str, int] = {}
    out: dict[int, int] = {}
    for c in commands:
        if not c.is_operation:
            regs[c.name] = c.payload if c.payload is not None else c.param
            continue
        if c.name == "NPU_OP_DMA_START":
            out[c.offset] = regs.get("NPU_SET_DMA0_LEN", 1)
        elif c.name not in SYNC_COMMANDS:
            out[c.offset] = ((regs.get("NPU_SET_OFM_HEIGHT_M1", 0) + 1) * (regs.get("NPU_SET_OFM_WIDTH_M1", 0) + 1)
                             * (regs.get("NPU_SET_OFM_DEPTH_M1", 0) + 1))
    return out


@dataclass
class StreamEstimate:
    commands: list[CommandEstimate]
    vela_total: int        # sum of Vela's op_cycles (= the summary's cycles_total for this stream)
    vela_npu_only: int     # sum of Vela's npu_cycles
    unplaced: list[str]    # Vela operations no command of the stream was attributed to

    @property
    def cycles(self) -> int:
        return sum(c.cycles for c in self.commands)


def estimate_stream(commands: list[Command], perf: VelaPerf) -> StreamEstimate:
    """Each executed command's estimated cycles (see the module's docstring)."""
    run = executed(commands)
    size = _weights(commands)
    owner: dict[int, int] = {}
    current: int | None = None
    pending_dma: list[int] = []
    for c in run:
        if c.name == "NPU_OP_DMA_START":
            pending_dma.append(c.offset)
            continue
        if c.offset in perf.queue:
            current = perf.queue[c.offset]
        if current is None:
            continue  # a compute command before any queued one: attributed below to the first operation
        owner[c.offset] = current
        for d in pending_dma:
            owner[d] = current
        pending_dma = []
    first = next((perf.queue[c.offset] for c in run if c.offset in perf.queue), None)
    if first is None:
        raise NpuError("no command of the stream is in Vela's queue table: the debug database is not this stream's")
    last = current if current is not None else first
    for c in run:  # leading unqueued commands belong to the first operation, trailing DMAs to the last one
        owner.setdefault(c.offset, first if c.offset < min(perf.queue) else last)

    # A fused or chained operation (Vela's group table: U85 chaining) is timed with its group's leader, whose
    # op_cycles hold the group's time: the group's cycles are split over all its commands.
    def unit(op_id: int) -> int:
        leader = perf.groups.get(op_id)
        return leader if leader is not None and leader in perf.ops else op_id

    for op_id in owner.values():
        if op_id not in perf.ops:
            raise NpuError(f"Vela's queue names scheduled operation {op_id}, which its perf table lacks")
    placed = {unit(o) for o in owner.values()}
    unplaced = [op.name for op in perf.ops.values() if unit(op.id) not in placed]
    budget: dict[int, tuple[int, int]] = {}
    for op in perf.ops.values():
        total, npu = budget.get(unit(op.id), (0, 0))
        budget[unit(op.id)] = (total + op.op_cycles, npu + op.npu_cycles)
    cycles: dict[int, int] = {}
    for u in dict.fromkeys(unit(owner[c.offset]) for c in run):
        mine = [c for c in run if unit(owner[c.offset]) == u]
        dmas = [c for c in mine if c.name == "NPU_OP_DMA_START"]
        comp = [c for c in mine if c.name != "NPU_OP_DMA_START"]
        total, npu = budget[u]
        dma_budget = 0
        if dmas:  # the memory-bound excess, at least a cycle per DMA, leaving a cycle per compute command
            dma_budget = max(total - npu, len(dmas))
            dma_budget = min(dma_budget, total - len(comp)) if comp else total
        for c, n in zip(dmas, _split(dma_budget, [size[c.offset] for c in dmas])):
            cycles[c.offset] = n
        for c, n in zip(comp, _split(total - dma_budget, [size[c.offset] for c in comp])):
            cycles[c.offset] = n
    ests = [CommandEstimate(c.offset, _kind(c), perf.ops[owner[c.offset]].name, cycles[c.offset]) for c in run]
    return StreamEstimate(ests, sum(o.op_cycles for o in perf.ops.values()),
                          sum(o.npu_cycles for o in perf.ops.values()), unplaced)


def stream_key(stream: bytes) -> str:
    """How the co-simulation recognises a command stream it is given: the SHA-256 of its bytes."""
    return hashlib.sha256(stream).hexdigest()


def delegate_estimate(blob: bytes, debug_xml: str, arch: str) -> dict[str, Any]:
    """The compile report's entry for one delegate: its stream's key and every command's estimate."""
    from emlkit.npu.blob import parse_blob
    from emlkit.npu.commands import decode

    vb = parse_blob(blob)
    est = estimate_stream(decode(vb.commands, 0, arch), parse_debug_db(debug_xml))
    if est.unplaced:
        log.info("Vela operations without an NPU command (not in the per-command estimate): %s", ", ".join(est.unplaced))
    return {"stream_sha256": stream_key(vb.commands.astype("<u4").tobytes()), "cycles": est.cycles,
            "vela_total_cycles": est.vela_total, "vela_npu_only_cycles": est.vela_npu_only, "unplaced": est.unplaced,
            "commands": [c.to_json() for c in est.commands]}


def report_entry(delegates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"model": f"{MODEL}: each NPU command's share of Vela's op_cycles (emlkit/npu/perf.py); an estimate, "
                     "not a measurement", "delegates": [{"delegate": n, **d} for n, d in delegates.items()]}


def cycles_by_stream(report: dict[str, Any] | None) -> dict[str, dict[int, int]]:
    """stream key -> {command offset: estimated cycles}, from a compile report (empty without estimates)."""
    out: dict[str, dict[int, int]] = {}
    for d in ((report or {}).get("npu_estimates") or {}).get("delegates", []):
        out[d["stream_sha256"]] = {int(r[0]): int(r[3]) for r in d["commands"]}
    return out


def estimates_beside(bpte: Path | bytes) -> dict[str, dict[int, int]]:
    """The estimates of the compile report beside a .bpte (NAME_TARGET.json, as `compile` writes them); empty for
    bytes, a program without a report (e.g. ExecuTorch's aot_arm_compiler's) or a report without estimates."""
    if isinstance(bpte, (bytes, bytearray)):
        return {}
    report = Path(bpte).with_suffix(".json")
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        return {}
    return cycles_by_stream(data) if isinstance(data, dict) else {}


def delegates_beside(path: Path) -> list[dict[str, Any]]:
    """The npu_estimates delegates of the compile report beside `path` (an .etrecord or .bpte), in program order;
    empty without one."""
    try:
        data = json.loads(Path(path).with_suffix(".json").read_text())
    except (OSError, ValueError):
        return []
    est = data.get("npu_estimates") if isinstance(data, dict) else None
    return list((est or {}).get("delegates") or [])
