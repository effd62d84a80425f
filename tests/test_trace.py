"""One inference as a Chrome/Perfetto trace (emlkit/trace.py, `emlkit inspect --trace`): the JSON loads, the
CPU and NPU tracks are named, and the events' durations are the firmware's own counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emlkit.errors import AotError
from emlkit.trace import CPU_TID, NPU_TID, npu_command_spans, trace_events


def _tracks(trace: dict) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}


def _spans(trace: dict, tid: int, cat: str | None = None) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == tid and (cat is None or e["cat"] == cat)]


def _inspect_trace(etdp: Path, pte: Path, out: Path) -> dict:
    """`emlkit inspect --trace` of an ETDump against the program's ETRecord: the trace it wrote."""
    r = subprocess.run([sys.executable, "-m", "emlkit", "inspect", "--etdump", str(etdp), "--etrecord",
                        str(pte.with_suffix(".etrecord")), "--trace", str(out)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(out.read_text())


def test_a_host_run_as_a_trace(tmp_path: Path, compiled) -> None:
    """Every instruction of one run on the CPU track, inside the whole run, with the runner's own counts."""
    from emlkit.deploy.sim_host import run_host

    cres = compiled("mlp", "cortex-m55")
    etdp, out = tmp_path / "run.etdp", tmp_path / "trace.json"
    res = run_host(cres.bpte, etdump=etdp)
    assert res.status == "pass" and res.raw["cases"] == 1
    trace = _inspect_trace(etdp, cres.pte, out)
    assert _tracks(trace) == {CPU_TID: "CPU", NPU_TID: "NPU"} and trace["otherData"]["unit"] == "ns"
    (whole,) = _spans(trace, CPU_TID, "run")
    ops = _spans(trace, CPU_TID, "op")
    assert ops and not _spans(trace, NPU_TID)
    assert all(e["dur"] >= 0 and whole["ts"] <= e["ts"] and e["ts"] + e["dur"] <= whole["ts"] + whole["dur"] for e in ops)
    assert [e["args"]["instruction"] for e in ops] == sorted(e["args"]["instruction"] for e in ops)
    assert all(e["args"]["nodes"] for e in ops)  # named from the ETRecord
    per_op: dict[str, int] = {}
    for e in ops:
        per_op[e["name"].rsplit(".", 1)[0]] = per_op.get(e["name"].rsplit(".", 1)[0], 0) + e["dur"]
    assert per_op == {o.op: o.count for o in res.per_op}  # one case: the run's counts are the runner's totals


@pytest.mark.slow
@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_an_ethos_u_run_has_its_npu_track(tmp_path: Path, compiled, target: str) -> None:
    """`run --etdump` then `inspect --trace`: the delegate call on both tracks, and inside it on the NPU track one
    span per command the NPU ran, in proportion to the compile report's estimates."""
    cres = compiled("conv_relu", target)
    etdp, out = tmp_path / "npu.etdp", tmp_path / "trace.json"
    r = subprocess.run([sys.executable, "-m", "emlkit", "run", "conv_relu", "--target", target, "-o",
                        str(cres.pte.parent), "--etdump", str(etdp)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "COLUMNS": "200"})  # the summary table's labels unwrapped
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "NPU cycles (estimate, Vela per-op model)" in r.stdout
    trace = _inspect_trace(etdp, cres.pte, out)
    assert _tracks(trace) == {CPU_TID: "CPU", NPU_TID: "NPU"} and trace["otherData"]["unit"] == "instructions"
    (cpu_side,) = _spans(trace, CPU_TID, "delegate")
    (npu,) = _spans(trace, NPU_TID, "npu")
    assert npu["dur"] > 0 and (npu["ts"], npu["dur"]) == (cpu_side["ts"], cpu_side["dur"])
    cmds = _spans(trace, NPU_TID, "npu-command")
    (est,) = cres.report["npu_estimates"]["delegates"]
    assert len(cmds) == len(est["commands"]) == cres.report["npu_check"]["delegates"][0]["commands"]
    assert all(e["dur"] > 0 and npu["ts"] <= e["ts"] and e["ts"] + e["dur"] <= npu["ts"] + npu["dur"] + 1e-9
               for e in cmds)
    assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-9 for a, b in zip(cmds, cmds[1:]))  # in stream order, no overlap
    assert abs(sum(e["dur"] for e in cmds) - npu["dur"]) < 1e-6
    assert [e["args"]["estimated_cycles"] for e in cmds] == [c[3] for c in est["commands"]]
    assert all("estimate" in e["args"]["estimate"] for e in cmds)
    assert "estimate" in trace["otherData"]["npu_commands"]


def test_npu_command_spans_are_proportional_and_nested() -> None:
    delegate = {"commands": [[0, "DMA", "a", 1], [8, "CONV", "a", 299], [16, "CONV", "b", 700]]}
    spans = npu_command_spans(100, 50, delegate, 3)
    assert [s["name"] for s in spans] == ["DMA a", "CONV a", "CONV b"]
    assert [round(s["dur"], 9) for s in spans] == [0.05, 14.95, 35.0]
    assert spans[0]["ts"] == 100 and spans[-1]["ts"] + spans[-1]["dur"] == 150
    assert all(s["tid"] == NPU_TID and s["cat"] == "npu-command" and s["args"]["instruction"] == 3 for s in spans)


def test_bad_etdumps_are_one_line() -> None:
    with pytest.raises(AotError, match="not an ETDump"):
        trace_events(b"\0" * 32)
