"""Checks on the final program before it is written: every op must have a firmware kernel."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aot.errors import AotError

FIRMWARE_OPS_DIR = Path(__file__).resolve().parent.parent / "firmware" / "ops"
_ET_OP = re.compile(r'^\s*ET_OP\(\s*"([^"]+)"\s*,\s*"([^"]*)"')


def firmware_ops() -> set[tuple[str, str]]:
    """(`ns::name`, overload) pairs the firmware registry implements, read from firmware/ops/*.def."""
    ops: set[tuple[str, str]] = set()
    for path in sorted(FIRMWARE_OPS_DIR.glob("*.def")):
        for line in path.read_text().splitlines():
            m = _ET_OP.match(line)
            if m:
                ops.add((m.group(1), m.group(2)))
    return ops


@dataclass
class OpUse:
    op: str
    node: str
    source: str


def _source_line(node: torch.fx.Node) -> str:
    trace = node.meta.get("stack_trace") or ""
    # The last 'File ..., line N' frame is the user's line that created the op.
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
    for f, line, fn, code in reversed(frames):
        if "/site-packages/" not in f and "/torch/" not in f and not f.startswith("<"):
            return f"{f}:{line} ({code.strip()})"
    return "unknown source line"


def edge_op_name(node: torch.fx.Node) -> str | None:
    if node.op != "call_function":
        return None
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return None
    return str(schema.name)


def unsupported_ops(program: Any, edge: Any) -> list[OpUse]:
    """Operators of the final program that no firmware kernel implements, with the edge node using each."""
    known = firmware_ops()
    plan = program.executorch_program.execution_plan[0]
    missing = [f"{o.name}.{o.overload}" for o in plan.operators if (o.name, o.overload) not in known]
    gm = edge.exported_program().graph_module
    bad = []
    for full in missing:
        name = full.rsplit(".", 1)[0]
        nodes = [n for n in gm.graph.nodes if edge_op_name(n) == name]
        if nodes:
            bad.extend(OpUse(full, n.name, _source_line(n)) for n in nodes)
        else:
            bad.append(OpUse(full, "?", "unknown source line"))
    return bad


def check_supported(program: Any, edge: Any, target: str, other_targets: list[str]) -> None:
    bad = unsupported_ops(program, edge)
    if not bad:
        return
    # Name an op the user wrote (one with a source line) before the Q/DQ plumbing around it.
    bad.sort(key=lambda b: (b.source == "unknown source line", b.op.startswith("cortex_m::")))
    first = bad[0]
    more = f" (and {len(bad) - 1} more: {', '.join(sorted({b.op for b in bad[1:]}))})" if len(bad) > 1 else ""
    hint = (f"try an ethos-u target ({', '.join(t for t in other_targets if t.startswith('ethos'))}), "
            "which may delegate it to the NPU, or replace the op in the model"
            if not target.startswith("ethos") else "Vela did not take it and the Cortex-M firmware has no kernel for it; replace the op in the model")
    raise AotError(f"op {first.op} (node {first.node}, at {first.source}) cannot be lowered for {target}: "
                   f"no firmware kernel implements it{more}; {hint}")
