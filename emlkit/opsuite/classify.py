"""Statuses of `emlkit opsuite` rows, from the raw records of emlkit/opsuite/worker.py (pure functions).

emlkit flows (one per target):
  PASS            the device's outputs equal the host reference bit for bit (the run's status) AND they match the
                  eager float model: within the suite's atol 1e-1 / rtol 4e-2, or, for a quantized program's
                  float outputs, at an SNR of at least SNR_FLOOR_DB (the compile report's numerics: the same
                  figure as the device's, which equals the reference). `int8` marks a pass with 0 float ops.
  REFUSED         the compile refused the case (exit status 4): the op named in its one line, and that line
  WRONG           the device differs from the reference (exit 1), or the float comparison failed
  ERROR           any other end: internal error (6), device error (7), timeout (3), usage (2), skip (5)
  NOT_APPLICABLE  5-D inputs (no 3-D conv or pool on these targets); never compiled
  INVALID         the suite case itself fails in eager PyTorch (the suite's own check skips it); not applicable
ExecuTorch's own Cortex-M flow (compile only; emlkit.verify.check_program on its final graph): INT8 (no compute op
outside cortex_m:: ops and quantize/dequantize), FLOAT (float compute ops left, named), ATEN_ON_INT (an aten::
compute kernel reads int8 codes, e.g. the aten::clamp ExecuTorch leaves for a ReLU: int8, but not a cortex_m::
op), FAILED (the lowering raised: its line), ERROR (timeout, crash).
"""

from __future__ import annotations

import math
import re
from typing import Any

from emlkit.errors import EXIT_MISMATCH, EXIT_OK, EXIT_UNSUPPORTED

SNR_FLOOR_DB = 20.0
STATUSES = ("PASS", "REFUSED", "WRONG", "ERROR", "NOT_APPLICABLE", "INVALID")
ETREF_STATUSES = ("INT8", "FLOAT", "ATEN_ON_INT", "FAILED", "ERROR", "NOT_APPLICABLE", "INVALID")
_OP = re.compile(r"\b([a-z_]+::[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)")


def named_op(line: str) -> str:
    """The first `ns::op[.overload]` a one-line error names ('' when it names none, e.g. a memory fit)."""
    m = _OP.search(line or "")
    return m.group(1) if m else ""


def _snr(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, str):
        return float(v)  # "inf", "-inf", "nan"
    return float(v)


def snr_text(v: float | None) -> str | None:
    """An SNR for JSON: one decimal, or 'inf' / '-inf' (strict JSON has no infinities)."""
    if v is None or math.isnan(v):
        return None if v is None else "nan"
    return ("inf" if v > 0 else "-inf") if math.isinf(v) else f"{v:.1f}"


def _quantized(report: dict[str, Any]) -> bool:
    ops = report.get("ops") or {}
    return bool(report.get("partitions")) or any("quantize_per" in op or "::quantized_" in op for op in ops)


def _float_share(raw: dict[str, Any], float_ops: list[str]) -> float | None:
    """The float ops' share of the run's instruction count, where the run reports per-op counts."""
    total, per_op = raw.get("count"), raw.get("per_op") or []
    if not total or not per_op or not float_ops:
        return None
    base = {op.split(".")[0] for op in float_ops}
    return round(sum(p["count"] for p in per_op if p["op"].split(".")[0] in base) / total, 4)


def _comparison(raw: dict[str, Any], report: dict[str, Any], floor: float) -> str:
    """'' when every output matches the float model, else why not."""
    quantized = _quantized(report)
    outs = (report.get("numerics") or {}).get("outputs") or []
    for i, cmp in enumerate(raw.get("compare") or [{"ok": False, "why": "no outputs saved"}]):
        if cmp.get("why"):
            return cmp["why"]
        if cmp["ok"]:
            continue
        snr = _snr(outs[i]["snr_db"]) if i < len(outs) else None
        is_float = cmp.get("dtype", "float32").startswith(("float", "bfloat"))
        if quantized and is_float and snr is not None and snr >= floor:
            continue
        what = f"SNR {snr_text(snr)} dB < {floor:g} dB floor and " if quantized and is_float and snr is not None else ""
        return (f"output {i} vs the eager float model: {what}outside the suite's atol 1e-1 / rtol 4e-2 "
                f"(max diff {cmp.get('max_abs', float('nan')):.3g})")
    return ""


def classify(raw: dict[str, Any], floor: float = SNR_FLOOR_DB) -> dict[str, Any]:
    """A row's classified fields from one emlkit-flow record."""
    code, line = raw.get("exit"), raw.get("line") or ""
    report = raw.get("report") or {}
    verify = report.get("verify") or {}
    float_ops = sorted({f["op"] for f in verify.get("float_islands") or []})
    numerics = report.get("numerics") or {}
    row: dict[str, Any] = {"exit": code, "op": "", "reason": "", "int8": None, "float_ops": float_ops,
                           "float_share": _float_share(raw, float_ops),
                           "snr_db": snr_text(_snr(numerics.get("snr_db"))), "count": raw.get("count"),
                           "unit": raw.get("unit"), "seconds": raw.get("seconds")}
    if code == EXIT_OK:
        why = _comparison(raw, report, floor)
        if why:
            row.update(status="WRONG", reason=why)
        else:
            row.update(status="PASS", int8=not float_ops and not verify.get("broken"))
    elif code == EXIT_MISMATCH:
        row.update(status="WRONG", reason=f"device output differs from the host reference: {line}")
    elif code == EXIT_UNSUPPORTED:
        row.update(status="REFUSED", op=named_op(line), reason=line)
    else:
        row.update(status="ERROR", op=named_op(line), reason=f"exit {code}: {line}")
    return row


def classify_etref(raw: dict[str, Any]) -> dict[str, Any]:
    code, line = raw.get("exit"), raw.get("line") or ""
    row: dict[str, Any] = {"exit": code, "op": "", "reason": line, "float_ops": raw.get("float_ops") or [],
                           "aten_on_int": raw.get("aten_on_int") or [], "seconds": raw.get("seconds")}
    if code == EXIT_OK:
        status = "FLOAT" if row["float_ops"] else "ATEN_ON_INT" if row["aten_on_int"] else "INT8"
        row.update(status=status, op=", ".join(row["float_ops"] or row["aten_on_int"]))
    elif code == 1:
        row.update(status="FAILED", op=named_op(line))
    else:
        row.update(status="ERROR", reason=f"exit {code}: {line}")
    return row
