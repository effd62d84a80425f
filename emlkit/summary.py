"""Short terminal tables for compile and run results."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

from emlkit.measures import VELA_NPU_ONLY, VELA_NPU_ONLY_KEY, VELA_TOTAL, VELA_TOTAL_KEY

_console = Console(stderr=False)


def _fmt_db(v: Any) -> str:
    if v in ("inf", None) or (isinstance(v, float) and math.isinf(v)):
        return "inf"
    return f"{float(v):.1f} dB"


def print_compile(report: dict[str, Any]) -> None:
    t = Table(title=f"{report['model']} -> {report['target']}", show_header=False, box=None, pad_edge=False)
    mem = report["memory"]
    ops = report["ops"]
    t.add_row("compile time", f"{report['compile_seconds']:.1f} s")
    t.add_row("ops", ", ".join(f"{k} x{v}" for k, v in ops.items()))
    if report.get("partitions"):
        t.add_row("NPU partitions", f"{report['partitions']} ({sum(report['delegated_ops'].values())} ops delegated)")
    on_cpu = [p for p in report.get("layer_placement") or [] if "CPU" in p["runs_on"]]
    if on_cpu:
        t.add_row("layers on the CPU", "; ".join(f"{p['layer']}: {', '.join(p['cpu_ops'])}" for p in on_cpu))
    t.add_row("arena bytes", " + ".join(str(v) for v in mem["arena_bytes"].values()) or "0")
    t.add_row("constants / program", f"{mem['constant_bytes']} / {mem['program_bytes']} bytes")
    num = report["numerics"]
    t.add_row("vs float model", f"SNR {_fmt_db(num['snr_db'])}, max abs {num['max_abs']:.4g}")
    if vela_config_text(report):
        t.add_row("Vela config", vela_config_text(report))
    if report.get("vela"):
        v = report["vela"]
        t.add_row(VELA_NPU_ONLY, f"{v[VELA_NPU_ONLY_KEY]:,}")
        t.add_row(VELA_TOTAL, f"{v[VELA_TOTAL_KEY]:,}")
        t.add_row("Vela memory estimate", f"SRAM {v['sram_kib']} KiB, flash {v['flash_kib']} KiB")
    if report.get("tosa_check"):
        steps = [r["max_steps"] for r in report["tosa_check"]["outputs"] if r["max_steps"] is not None]
        t.add_row("TOSA ref vs fake-quant", f"max {max(steps) if steps else '?'} steps")
    if report.get("npu_check"):
        t.add_row("NPU model vs TOSA", npu_check_text(report["npu_check"]["delegates"]))
    fit = report.get("fit")
    if fit:
        t.add_row(f"memory on {fit['board']}", fit_text(fit))
    if report.get("lut_fusion"):
        lf = report["lut_fusion"]
        t.add_row("LUT fusion", f"{lf.get('regions_fused', 0)} regions, ops {lf.get('ops_before')} -> {lf.get('ops_after')}")
    if patch_text(report):
        t.add_row("patch stages", patch_text(report))
    for kind, text in int8_io_rows(report):
        t.add_row(kind, text)
    _console.print(t)


def int8_io_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """`--io int8`: each int8 input's (and output's) qparams, what a caller quantizes with (emlkit/passes/int8_io.py)."""
    io = report.get("int8_io") or {}
    return [(f"int8 {kind[:-1]} {e['index']}", f"scale {e['scale']:.9g}, zero point {e['zero_point']} "
             f"(real = scale * (q - zero_point))") for kind in ("inputs", "outputs") for e in io.get(kind, [])]


def patch_text(report: dict[str, Any]) -> str | None:
    """What the patch-based pass did (emlkit/passes/patch_stages.py): auto's choice and why, or N's bands."""
    ps = report.get("patch_stages")
    if not ps:
        return None
    auto = ps.get("auto")
    if auto:
        return f"auto: {auto['chose']}{' bands' if auto['chose'] != 'off' else ''} ({auto['why']})"
    if ps.get("patch_bands"):
        return f"{ps['patch_bands']} bands, {ps['rows_computed']} rows computed for {ps['rows_whole_map']}"
    return None


def vela_config_text(report: dict[str, Any]) -> str | None:
    """"accelerator, system config, memory mode" of an Ethos-U compile report (None for a CPU program)."""
    cfg = report.get("vela_config")
    return f"{cfg['accelerator']}, {cfg['system_config']}, {cfg['memory_mode']}" if cfg else None


def print_run(summary: dict[str, Any]) -> None:
    t = Table(title=f"{summary['model']} on {summary['board']} ({summary['sim']})", show_header=False, box=None)
    for k, v in summary["rows"]:
        t.add_row(k, v)
    _console.print(t)


def npu_check_text(rows: list[dict[str, Any]]) -> str:
    """One line for the compile-time check of Vela's command streams (emlkit/npu/compile_check.py)."""
    bad = [r for r in rows if r.get("checked") and r["max_diff_steps"]]
    if bad:
        return "MISMATCH: " + ", ".join(f"{r['delegate']} up to {r['max_diff_steps']} steps" for r in bad)
    unchecked = [r for r in rows if not r.get("checked")]
    done = len(rows) - len(unchecked)
    text = f"bit-exact ({done} of {len(rows)} delegates)" if done else ""
    if unchecked:
        text += ("; " if text else "") + "not checked: " + unchecked[0]["reason"]
    return text


def fit_text(fit: dict[str, Any]) -> str:
    """The compile report's fit entry (emlkit/deploy/fit.py) in one cell: each memory's need / size."""
    if not fit.get("checked"):
        return f"not checked: {fit.get('reason', '?')}"
    cells = [f"{m['memory']} {m['need']:,} / {m['size']:,} B{'' if m['fits'] else ' (does not fit)'}"
             for m in fit["memories"] if m["need"]]
    return ("fits: " if fit["fits"] else "DOES NOT FIT: ") + ", ".join(cells)
