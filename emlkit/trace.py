"""One inference as a timeline that Perfetto (ui.perfetto.dev) and chrome://tracing open: the firmware's
ETDump turned into Chrome's trace-event JSON.

Tracks (one process "emlkit", one thread each): "CPU" holds every instruction the method ran (operator
calls and the CPU's side of each delegate call), "NPU" the delegate calls, during which the Ethos-U runs
its command stream. Each event carries its instruction index and, with the program's ETRecord, the graph
nodes and the model's source line. Timestamps and durations are the firmware counter's ticks from the
run's start (QEMU instructions, cycles or ns: `otherData.unit` says which), written where the format
expects microseconds, so Perfetto's "us" read as ticks. One run is drawn: the first measured one, or
`run`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from emlkit.errors import AotError

CPU_TID, NPU_TID = 1, 2
PID = 1
_DELEGATE = "DELEGATE_CALL"


def _runs(etdump: bytes) -> list[Any]:
    """The ETDump's run blocks, read with ExecuTorch's own deserializer."""
    if len(etdump) < 12 or etdump[8:12] != b"ED00":
        raise AotError("not an ETDump: the file identifier ED00 is missing (give the .etdp the firmware wrote)")
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    try:
        return list(deserialize_from_etdump_flatcc(etdump).run_data)
    except Exception as exc:  # flatc's reader raises whatever it hits on damaged bytes
        raise AotError(f"the ETDump cannot be read ({type(exc).__name__}): write it again with emlkit run "
                       "--etdump") from None


def _unit(run_name: str) -> tuple[str, str]:
    """("forward", "instructions") from the firmware's run name "forward (instructions)"."""
    if run_name.endswith(")") and " (" in run_name:
        method, unit = run_name[:-1].rsplit(" (", 1)
        return method, unit
    return run_name, "ticks"


def _meta(name: str, tid: int | None, value: str) -> dict[str, Any]:
    ev: dict[str, Any] = {"name": name, "ph": "M", "pid": PID, "args": {"name": value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def trace_events(etdump: bytes, run: int = 0, nodes: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The trace of run `run` of the ETDump (0: the first); `nodes` maps an instruction index to what the
    ETRecord says of it ({"nodes": [...], "source": "model.py:12"})."""
    runs = [r for r in _runs(etdump) if r.events]
    if not runs:
        raise AotError("the ETDump holds no profiled run: run with --etdump on a program with test cases")
    if not 0 <= run < len(runs):
        raise AotError(f"the ETDump holds {len(runs)} run(s): choose --trace-run 0..{len(runs) - 1}")
    block = runs[run]
    method, unit = _unit(block.name)
    prof = [e.profile_event for e in block.events if e.profile_event is not None]
    whole = next((p for p in prof if p.name == "Method::execute"), None)
    t0 = whole.start_time if whole is not None else min(p.start_time for p in prof)
    events: list[dict[str, Any]] = [_meta("process_name", None, f"emlkit: {method}"), _meta("thread_name", CPU_TID, "CPU"),
                                    _meta("thread_name", NPU_TID, "NPU")]
    for p in prof:
        start, dur = p.start_time - t0, max(0, p.end_time - p.start_time)
        if p.name == "Method::execute":
            events.append({"name": f"{method} (whole run)", "cat": "run", "ph": "X", "pid": PID, "tid": CPU_TID,
                           "ts": start, "dur": dur, "args": {"unit": unit}})
            continue
        args: dict[str, Any] = {"instruction": p.instruction_id, "chain": p.chain_index, unit: dur}
        args.update((nodes or {}).get(p.instruction_id, {}))
        delegate = p.name == _DELEGATE or p.delegate_debug_id_int not in (None, -1)
        name = f"delegate (instruction {p.instruction_id})" if p.name == _DELEGATE else str(p.name)
        events.append({"name": name, "cat": "delegate" if delegate else "op", "ph": "X", "pid": PID, "tid": CPU_TID,
                       "ts": start, "dur": dur, "args": args})
        if delegate:
            events.append({"name": f"Ethos-U command stream (instruction {p.instruction_id})", "cat": "npu", "ph": "X",
                           "pid": PID, "tid": NPU_TID, "ts": start, "dur": dur, "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"method": method, "unit": unit, "run": run, "runs": len(runs),
                          "time": f"ts and dur are {unit} from the run's start, written as microseconds"}}


def write_trace(etdump: bytes, out: Path, run: int = 0, nodes: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write the trace to `out` (renamed into place whole) and return it."""
    trace = trace_events(etdump, run, nodes)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, prefix=f".{out.name}.", delete=False) as f:
        json.dump(trace, f)
    Path(f.name).replace(out)
    return trace
