"""One inference as a timeline that Perfetto (ui.perfetto.dev) and chrome://tracing open: the firmware's
ETDump turned into Chrome's trace-event JSON.

Tracks (one process "emlkit", one thread each): "CPU" holds every instruction the method ran (operator
calls and the CPU's side of each delegate call), "NPU" the delegate calls, during which the Ethos-U runs
its command stream. With the compile report's per-command estimates (emlkit/npu/perf.py: each command's
share of Vela's per-operation cycles), each NPU span holds one span per command, placed inside the call in
proportion to those estimates and labelled an estimate: the firmware's counter times the call, not the
NPU's commands (under QEMU the NPU's time is not simulated at all). Each event carries its instruction index and, with the program's ETRecord, the graph
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


def npu_command_spans(ts: float, dur: float, delegate: dict[str, Any], instruction: int) -> list[dict[str, Any]]:
    """One span per NPU command of `delegate` (a compile report's npu_estimates entry), laid end to end over
    [ts, ts + dur] in proportion to each command's estimated cycles."""
    rows = delegate["commands"]
    total = sum(int(r[3]) for r in rows)
    events: list[dict[str, Any]] = []
    done = 0
    start = float(ts)
    for i, (offset, kind, op, cycles) in enumerate(rows):
        done += int(cycles)
        end = ts + dur * done / total if total else ts + dur * (i + 1) / len(rows)
        end = min(float(end), float(ts + dur))
        events.append({"name": f"{kind} {op}", "cat": "npu-command", "ph": "X", "pid": PID, "tid": NPU_TID,
                       "ts": start, "dur": end - start,
                       "args": {"command": i, "offset": offset, "vela_op": op, "estimated_cycles": int(cycles),
                                "instruction": instruction, "estimate": ESTIMATE_NOTE}})
        start = end
    return events


ESTIMATE_NOTE = ("Vela per-op model estimate (emlkit/npu/perf.py): placed in proportion to the estimated cycles "
                 "inside the delegate call, not measured")


def trace_events(etdump: bytes, run: int = 0, nodes: dict[int, dict[str, Any]] | None = None,
                 npu: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The trace of run `run` of the ETDump (0: the first); `nodes` maps an instruction index to what the
    ETRecord says of it ({"nodes": [...], "source": "model.py:12"}); `npu` is the compile report's
    npu_estimates delegates, in program order (the k-th delegate instruction runs the k-th)."""
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
    delegate_ids = sorted({p.instruction_id for p in prof if p.name == _DELEGATE})
    commands = 0
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
            k = delegate_ids.index(p.instruction_id) if p.instruction_id in delegate_ids else -1
            if npu and 0 <= k < len(npu) and npu[k].get("commands"):
                spans = npu_command_spans(start, dur, npu[k], p.instruction_id)
                commands += len(spans)
                events.extend(spans)
    other: dict[str, Any] = {"method": method, "unit": unit, "run": run, "runs": len(runs),
                             "time": f"ts and dur are {unit} from the run's start, written as microseconds"}
    if commands:
        other["npu_commands"] = f"{commands} NPU command spans: {ESTIMATE_NOTE}"
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def write_trace(etdump: bytes, out: Path, run: int = 0, nodes: dict[int, dict[str, Any]] | None = None,
                npu: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write the trace to `out` (renamed into place whole) and return it."""
    trace = trace_events(etdump, run, nodes, npu)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, prefix=f".{out.name}.", delete=False) as f:
        json.dump(trace, f)
    Path(f.name).replace(out)
    return trace
