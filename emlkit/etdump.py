"""`emlkit inspect`: the firmware's ETDump read by ExecuTorch's own Inspector, as a per-operator table.

The ETDump comes from
- `emlkit run ... --etdump FILE` (the runner writes it through semihosting or, on the host, to a file), or
- the console of an exported project (`emlkit export`): the firmware prints it between
  "ETDUMP BEGIN bytes=N crc32=X" and "ETDUMP END" as base64 (`--log FILE`).
The ETRecord (`emlkit compile` writes NAME_TARGET.etrecord) maps each instruction to its graph nodes and
their source lines. Times are raw counter ticks (TimeScale.CYCLES on both sides): the run name in the
ETDump carries the counter's unit, and the table names the figure (emlkit/measures.py).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import warnings
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from emlkit.errors import AotError
from emlkit.measures import cpu_count_label
from emlkit.requests import InspectRequest

log = logging.getLogger(__name__)

_BEGIN = re.compile(r"ETDUMP BEGIN bytes=(\d+) crc32=([0-9a-fA-F]{8})")
_RUN_UNIT = re.compile(r"^(?P<method>.*) \((?P<unit>[^()]*)\)$")
_FRAMEWORK = {"Method::execute", "Method::init", "Program::load_method"}


def etdumps_from_log(text: str) -> list[bytes]:
    """Every ETDump printed on a console log, each checked against its length and CRC-32."""
    dumps: list[bytes] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _BEGIN.search(lines[i])
        i += 1
        if not m:
            continue
        body = []
        while i < len(lines) and "ETDUMP END" not in lines[i]:
            body.append(lines[i].strip())
            i += 1
        if i >= len(lines):
            raise AotError("the console log ends inside an ETDump (no ETDUMP END line): capture the whole output")
        i += 1
        try:
            data = base64.b64decode("".join(body), validate=True)
        except binascii.Error as exc:
            raise AotError(f"an ETDump in the log is not valid base64 ({exc}): the console dropped characters") from None
        want, crc = int(m.group(1)), int(m.group(2), 16)
        if len(data) != want or zlib.crc32(data) != crc:
            raise AotError(f"an ETDump in the log is damaged: {len(data)} bytes with CRC-32 {zlib.crc32(data):08x}, "
                           f"the firmware sent {want} bytes with {crc:08x}")
        dumps.append(data)
    if not dumps:
        raise AotError("no ETDump in the log (no 'ETDUMP BEGIN' line): build the exported project with "
                       "-DEMLKIT_ETDUMP=ON (the default) and capture the whole console")
    return dumps


@dataclass
class OpRow:
    name: str                 # operator ("cortex_m::quantized_conv2d.out"), DELEGATE_CALL or Method::execute
    instruction: int | None   # index in the method's instruction chain
    calls: int                # samples (runs)
    total: float              # sum of the samples, counter ticks
    mean: float
    nodes: list[str] = field(default_factory=list)    # graph operators this instruction came from (ETRecord)
    source: str = ""          # model source line, from the ETRecord's stack traces
    backend: str = ""         # delegate backend (ETRecord)


@dataclass
class Profile:
    method: str
    unit: str                 # the firmware counter's unit: instructions, cycles, ns
    label: str                # what the figures are, e.g. "QEMU instructions"
    runs: int
    rows: list[OpRow]
    run_total: float          # Method::execute, mean over the runs

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["figure"] = d.pop("label")
        return d


def _register_ops() -> None:
    """The ETRecord's graphs name cortex_m:: and our own ops; they must exist before it is parsed."""
    from emlkit.npu.program import _cortex_m_ops

    _cortex_m_ops()
    import emlkit.passes.lut_ethos_u  # noqa: F401  registers the op our Ethos-U LUT pass defines


def _source_line(traces: dict[str, Any], model_hint: str | None) -> str:
    """The innermost frame of a node's stack trace that is in the user's model file."""
    best = ""
    for trace in traces.values():
        if not trace:
            continue
        for f, line in re.findall(r'File "([^"]+)", line (\d+)', str(trace)):
            if "site-packages" in f or f.startswith("<") or "/emlkit/lower/" in f or "/emlkit/passes/" in f:
                continue
            if model_hint and Path(f).name != Path(model_hint).name:
                continue
            best = f"{Path(f).name}:{line}"
    return best


def inspect_etdump(etdump: bytes, etrecord: Path | None = None, sim: str | None = None,
                   model_source: str | None = None) -> Profile:
    """Parse with ExecuTorch's Inspector and summarise per instruction."""
    if len(etdump) < 12 or etdump[8:12] != b"ED00":
        raise AotError("not an ETDump: the file identifier ED00 is missing (give the .etdp the firmware wrote)")
    if etrecord is not None and not etrecord.is_file():
        raise AotError(f"{etrecord}: no such ETRecord (emlkit compile writes NAME_TARGET.etrecord)")
    from executorch.devtools import Inspector
    from executorch.devtools.inspector import TimeScale

    _register_ops()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Output Buffer not found": the firmware records no tensor data
        quiet = logging.getLogger("executorch")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            ins = Inspector(etdump_data=etdump, etrecord=str(etrecord) if etrecord else None,
                            source_time_scale=TimeScale.CYCLES, target_time_scale=TimeScale.CYCLES)
        except Exception as exc:
            raise AotError(f"ExecuTorch's Inspector cannot read this ETDump/ETRecord pair: {type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
        finally:
            quiet.setLevel(level)
    if len(ins.event_blocks) != 1:
        names = ", ".join(b.name for b in ins.event_blocks) or "none"
        raise AotError(f"expected the runs of one method in the ETDump, found event blocks: {names}")
    block = ins.event_blocks[0]
    m = _RUN_UNIT.match(block.name)
    method, unit = (m.group("method"), m.group("unit")) if m else (block.name, "")
    rows: list[OpRow] = []
    run_total, runs = 0.0, 0
    for e in block.events:
        raw = list(e.perf_data.raw) if e.perf_data is not None else []
        if e.name == "Method::execute":
            runs = len(raw)
            run_total = sum(raw) / len(raw) if raw else 0.0
            continue
        if e.name in _FRAMEWORK:
            continue
        rows.append(OpRow(name=e.name, instruction=getattr(e, "_instruction_id", None), calls=len(raw), total=float(sum(raw)),
                          mean=float(sum(raw) / len(raw)) if raw else 0.0, nodes=list(dict.fromkeys(n.removesuffix(".default") for n in e.op_types)),
                          source=_source_line(e.stack_traces, model_source), backend=e.delegate_backend_name or ""))
    return Profile(method, unit, cpu_count_label(unit, sim), runs, rows, run_total)


def print_profile(p: Profile, title: str = "") -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title or f"{p.method}: per-instruction profile, {p.label}, mean of {p.runs} run(s)")
    for col, just in (("#", "right"), ("operator", "left"), ("graph nodes (ETRecord)", "left"), ("source", "left"),
                      (p.label, "right"), ("share", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in p.rows:
        name = r.name + (f" ({r.backend})" if r.backend else "")
        share = f"{100.0 * r.mean / p.run_total:.1f}%" if p.run_total else "-"
        t.add_row(str(r.instruction if r.instruction is not None else "-"), name, ", ".join(r.nodes) or "-",
                  r.source or "-", f"{r.mean:,.0f}", share)
    t.add_row("", "whole run (Method::execute)", "", "", f"{p.run_total:,.0f}", "100%")
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 140))  # a log or a pipe: do not squeeze the names
    console.print(t)


def cmd_inspect(req: InspectRequest) -> int:
    if (req.etdump is None) == (req.log is None):
        raise AotError("give exactly one of --etdump FILE.etdp or --log CONSOLE.txt")
    if req.etdump is not None:
        path = Path(req.etdump)
        if not path.is_file():
            raise AotError(f"{path}: no such ETDump (emlkit run MODEL --target T --etdump FILE writes one)")
        dumps = [path.read_bytes()]
    else:
        path = Path(req.log or "")
        if not path.is_file():
            raise AotError(f"{path}: no such console log")
        dumps = etdumps_from_log(path.read_text(errors="replace"))
    rec = Path(req.etrecord) if req.etrecord else None
    profiles = [inspect_etdump(d, rec, req.sim) for d in dumps]
    for i, p in enumerate(profiles):
        print_profile(p, "" if len(profiles) == 1 else f"ETDump {i + 1} of {len(profiles)}: {p.label}")
    if req.json:
        Path(req.json).write_text(json.dumps([p.to_json() for p in profiles], indent=2) + "\n")
        log.info("wrote %s", req.json)
    if req.trace:
        from emlkit.npu.perf import delegates_beside
        from emlkit.trace import write_trace

        nodes = {r.instruction: {"nodes": r.nodes, "source": r.source} for r in profiles[0].rows
                 if r.instruction is not None and (r.nodes or r.source)}
        # The per-command NPU estimates sit in the compile report beside the ETRecord (NAME_TARGET.json).
        npu = delegates_beside(rec) if rec is not None else []
        write_trace(dumps[0], Path(req.trace), req.trace_run, nodes, npu)
        log.info("wrote %s (run %d of the %s)", req.trace, req.trace_run,
                 "ETDump" if len(dumps) == 1 else f"first of {len(dumps)} ETDumps")
    return 0
