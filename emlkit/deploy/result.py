"""The runner's one-line JSON result (format: docs/result-line.md), parsed.

Every board's runner prints exactly one line like
  {"status": "pass", "cases": 1, "outputs": [{"max_abs": 0.0, "max_steps": 0}],
   "instructions": 1234, "unit": "instructions", "per_op": [...], "arena_bytes": [0, 8560],
   "stack_bytes": 1200}
or {"status": "error", "error": "..."}; the total's key is the unit's name. Board images print max_abs as
a hex-float string ("0x1.8p-3", exact; they carry no decimal float formatting), the host runner as a number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("pass", "fail", "error")


class ResultError(ValueError):
    """The console output holds no valid result line."""


@dataclass(frozen=True)
class OutputDiff:
    max_abs: float | None  # output units; None when a NaN differed
    max_steps: int | None  # quantization steps; None when unknown (float output, no step)
    passed: bool | None = None


@dataclass(frozen=True)
class OpCount:
    op: str
    calls: int
    count: int


@dataclass
class RunResult:
    status: str
    cases: int = 0
    outputs: list[OutputDiff] = field(default_factory=list)
    total: int | None = None
    unit: str | None = None
    per_op: list[OpCount] = field(default_factory=list)
    arena_bytes: list[int] = field(default_factory=list)
    stack_bytes: int | None = None
    runtime_bytes: int | None = None
    error: str | None = None
    code: str | None = None               # the firmware's status name with an error ("npu_timeout", ...)
    npu_pmu_cycles: int | None = None     # the NPU's PMU cycle counter (FVP, hardware; under QEMU the co-simulated
                                          # NPU's Vela per-op estimate, emlkit/measures.py); None when absent or 0
    console: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "pass"


def _float(v: Any) -> float | None:
    """A number, or the hex-float string ("0x1.8p-3") that board images print: they carry no decimal float
    formatting (firmware/runtime/et_fmt.h)."""
    if isinstance(v, str):
        try:
            return float.fromhex(v)
        except ValueError:
            raise ResultError(f"result line has max_abs {v!r}: not a number or hex float") from None
    return v


def _from_dict(d: dict[str, Any], console: list[str]) -> RunResult:
    status = d.get("status")
    if status not in STATUSES:
        raise ResultError(f"result line has status {status!r}; expected one of {STATUSES}")
    unit = d.get("unit")
    total = d.get(unit) if isinstance(unit, str) else None
    return RunResult(
        status=status,
        cases=int(d.get("cases", 0)),
        outputs=[OutputDiff(_float(o.get("max_abs")), o.get("max_steps"), o.get("pass")) for o in d.get("outputs", [])],
        total=int(total) if total is not None else None,
        unit=unit,
        per_op=[OpCount(str(o["op"]), int(o["calls"]), int(o["count"])) for o in d.get("per_op", [])],
        arena_bytes=[int(x) for x in d.get("arena_bytes", [])],
        stack_bytes=d.get("stack_bytes"),
        runtime_bytes=d.get("runtime_bytes"),
        error=d.get("error"),
        code=d.get("code"),
        npu_pmu_cycles=(d.get("npu") or {}).get("pmu_cycles") or None,
        console=console,
        raw=d,
    )


def parse_result(console: str | list[str]) -> RunResult:
    """The last console line that is a JSON object with a "status" key."""
    lines = console.splitlines() if isinstance(console, str) else list(console)
    for line in reversed(lines):
        s = line.strip()
        if not (s.startswith("{") and s.endswith("}")):
            continue
        try:
            d = json.loads(s)
        except json.JSONDecodeError:
            continue
        if isinstance(d, dict) and "status" in d:
            return _from_dict(d, lines)
    tail = " | ".join(lines[-3:]) if lines else "(no output)"
    raise ResultError(f"no JSON result line in the runner's output (last lines: {tail}): did the runner crash?")
