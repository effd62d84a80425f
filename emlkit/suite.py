"""The baremetal suite behind ./test_cortex_m.sh: every model x target x board, checked and tabulated."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from emlkit import models
from emlkit.errors import AotError
from emlkit.measures import VELA_NPU_ONLY, VELA_NPU_ONLY_KEY, VELA_TOTAL, VELA_TOTAL_KEY, cpu_count_label, npu_pmu_label
from emlkit.requests import SuiteRequest
from emlkit.targets import TARGETS, get_target

log = logging.getLogger("emlkit.suite")

QUICK_MODELS = ["add", "conv_relu", "lut_activations", "softmax"]
DEFAULT_TARGETS = ["cortex-m55", "ethos-u55-128", "ethos-u65-256", "ethos-u85-256",
                   "cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33"]
# One small zoo model on every other Ethos-U configuration ExecuTorch's Arm flow accepts (and the a16w8
# variants), so each passes through the firmware in the default run without multiplying its time.
CONFIG_ROWS = [("conv_relu", t) for t in ("ethos-u55-32", "ethos-u55-64", "ethos-u55-256", "ethos-u55-128-a16w8",
                                          "ethos-u65-512", "ethos-u85-128", "ethos-u85-512", "ethos-u85-1024",
                                          "ethos-u85-2048", "ethos-u85-256-a16w8")]


@dataclass
class Case:
    model: str
    target: str
    board: str
    sim: str
    kernels: str = "mve"
    lut_fusion: bool = True
    variant: str = "main"        # main rows go in the table; others feed the plots


@dataclass
class Row:
    model: str
    target: str
    board: str
    sim: str
    variant: str
    status: str
    reason: str = ""
    label: str = ""
    max_steps: int | None = None
    snr_db: float | str | None = None
    count: int | None = None
    unit: str = ""
    count_label: str = ""              # what `count` is: "QEMU instructions", "FVP cycles (DWT)", ...
    vela_npu_only_cycles_estimate: int | None = None  # Vela's estimate of the delegates' NPU cycles alone
    vela_total_cycles_estimate: int | None = None     # Vela's estimate including memory transfers (up to 6.8x)
    npu_pmu_cycles: int | None = None  # the NPU's PMU, where something times the NPU (FVP model, board)
    npu_pmu_label: str = ""
    npu_pmu_cycles_estimate: int | None = None  # QEMU's co-simulated NPU: Vela per-op estimates, all inferences
    arena_bytes: int | None = None
    image_bytes: int | None = None
    model_bytes: int | None = None     # the .bpte (program, constants, bundled inputs and outputs)
    fit: dict[str, Any] | None = None  # per memory need / size on the board (emlkit/deploy/fit.py)
    macs: int | None = None
    seconds: float = 0.0
    per_op: list[dict[str, Any]] = field(default_factory=list)
    asked_board: str = ""        # the board the case named; `board` is the one that ran it (may be a stand-in)


def _fvp_on_path() -> bool:
    return any(shutil.which(b) for b in ("FVP_Corstone_SSE-300_Ethos-U55", "FVP_Corstone_SSE-300_Ethos-U65", "FVP_Corstone_SSE-320"))


def run_case(case: Case, programs: str, timeout: float) -> Row:
    """Compile (cached under `programs`), run and check one case; never raises for a case-level failure."""
    from emlkit.compile import compile_model, make_options, program_cache_dir
    from emlkit.locks import held
    from emlkit.run import execute

    t0 = time.monotonic()
    row = Row(case.model, case.target, case.board, case.sim, case.variant, "ERROR", asked_board=case.board)
    try:
        # Without LUT fusion, pointwise chains stay partly in float by design: that is the comparison.
        opts = make_options(lut_fusion=case.lut_fusion, allow_float=not case.lut_fusion)
        progdir = program_cache_dir(Path(programs), case.target, lut_fusion=case.lut_fusion, allow_float=not case.lut_fusion)
        # One compile per model and target: rows on several boards (a core and its stand-in), and the tests
        # when they share the folder, wait for it and reuse the cached program (the lock tests/conftest.py takes).
        with held(progdir / case.model):
            try:
                cres = compile_model(case.model, case.target, progdir, options=opts, reuse_cache=True)
            except AotError as err:
                if case.variant == "no-lut":
                    raise  # handled below: a missing baseline is a SKIP
                # The compile refused the model for this target with one line naming the op or the
                # pattern (an unsupported feature, reported as such): a REFUSED row, not a failure.
                row.status, row.reason = "REFUSED", str(err)
                row.seconds = round(time.monotonic() - t0, 1)
                return row
        rep = cres.report
        row.snr_db = rep["numerics"]["snr_db"]
        row.vela_npu_only_cycles_estimate = (rep.get("vela") or {}).get(VELA_NPU_ONLY_KEY)
        row.vela_total_cycles_estimate = (rep.get("vela") or {}).get(VELA_TOTAL_KEY)
        row.arena_bytes = rep["memory"]["arena_total"]
        row.model_bytes = cres.bpte.stat().st_size
        row.macs = rep.get("macs")
        o = execute(cres, case.board, case.sim, timeout, case.kernels, None)
        row.status, row.reason, row.label, row.sim = o.status, o.reason, o.label, o.sim
        flagged = [d for d in (rep.get("npu_check") or {}).get("delegates", []) if d.get("max_diff_steps")]
        if o.status == "FAIL" and flagged:
            # Vela's command stream disagrees with its own TOSA graph (the compile warned with MISMATCH):
            # the device computed what Vela compiled. A known, flagged Vela miscompile, not our failure.
            row.status = "MISCOMPILED"
            row.reason = (f"Vela's command stream is {flagged[0]['max_diff_steps']} steps off its TOSA graph "
                          f"(flagged at compile time; docs/ethos-u.md: Known Vela miscompiles); {o.reason}")
        row.board = o.board  # a stand-in board may run what the target's own board cannot run here
        row.image_bytes = o.image_bytes
        row.fit = o.fit.to_dict() if o.fit is not None else None
        r = o.result
        if r is not None:
            steps = [x.max_steps for x in r.outputs if x.max_steps is not None]
            row.max_steps = max(steps) if steps else None
            row.count, row.unit = r.total, r.unit or ""
            row.count_label = cpu_count_label(r.unit, o.sim) if r.total is not None else ""
            if o.sim == "qemu":  # the co-simulated NPU's PMU counts Vela's estimate: kept apart from real counts
                row.npu_pmu_cycles_estimate = r.npu_pmu_cycles
            else:
                row.npu_pmu_cycles = r.npu_pmu_cycles
                row.npu_pmu_label = npu_pmu_label(o.sim) if r.npu_pmu_cycles else ""
            row.per_op = [{"op": p.op, "calls": p.calls, "count": p.count} for p in r.per_op]
            if r.arena_bytes:
                row.arena_bytes = int(sum(r.arena_bytes))
    except AotError as err:
        row.status, row.reason = "ERROR", str(err)
        if case.variant == "no-lut" and row.snr_db is None:
            # The comparison baseline itself does not compile (ExecuTorch's unfused lowering of
            # some chains is broken and our verifier rejects it): nothing to compare, not a failure.
            row.status, row.reason = "SKIP", f"no baseline without LUT fusion: {err}"
    except Exception as exc:  # a broken case must not take the whole suite down
        row.status, row.reason = "ERROR", f"{type(exc).__name__}: {exc}"
    row.seconds = round(time.monotonic() - t0, 1)
    return row


def plan(models_: list[str], targets: list[str], boards: list[str] | None, sim: str,
         extra: list[tuple[str, str]] | None = None) -> list[Case]:
    """Every model x target x board, then the EXTRA (model, target) rows on the target's boards."""
    cases: list[Case] = []
    for m, t in extra or []:
        if t not in targets:
            cases += [Case(m, t, b, sim) for b in boards or list(get_target(t).boards)]
    for m in models_:
        for t in targets:
            tgt = get_target(t)
            for b in boards or list(tgt.boards):
                cases.append(Case(m, t, b, sim))
                if tgt.flow == "cortex_m" and b != "host" and tgt.isa == "MVE":
                    # Variants for the plots: portable kernels, and no LUT fusion. Cores without MVE
                    # have one (portable) image: their main row is the portable figure.
                    cases.append(Case(m, t, b, sim, kernels="portable", variant="portable"))
                    cases.append(Case(m, t, b, sim, lut_fusion=False, variant="no-lut"))
    return cases


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _status_cell(r: Row) -> str:
    s = r.status + (f" ({r.label})" if r.label else "")
    return s + (f": {r.reason}" if r.reason and r.status != "PASS" else "")


COLUMNS = ["model", "target", "board", "sim", "status", "max steps", "SNR dB", "CPU count", "CPU count is",
           VELA_NPU_ONLY, VELA_TOTAL, "NPU cycles (PMU of an FVP NPU model or a board)", "arena B", "image B"]


def _cells(r: Row) -> list[str]:
    return [r.model, r.target, r.board, r.sim, _status_cell(r), _fmt(r.max_steps), _fmt(r.snr_db if r.snr_db != "inf" else math.inf),
            _fmt(r.count), r.count_label or "-", _fmt(r.vela_npu_only_cycles_estimate),
            _fmt(r.vela_total_cycles_estimate), _fmt(r.npu_pmu_cycles), _fmt(r.arena_bytes),
            _fmt(r.image_bytes)]


def write_markdown(rows: list[Row], path: Path) -> None:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "/") for c in _cells(r)) + " |")
    path.write_text("\n".join(lines) + "\n")


def write_plots(rows: list[Row], outdir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    by = {(r.model, r.target, r.board, r.variant): r for r in rows}
    for other, title, fname, labels in (
            ("portable", "portable C vs MVE kernels", "kernels_portable_vs_mve.png", ("portable C kernels", "MVE kernels")),
            ("no-lut", "without vs with LUT fusion", "lut_fusion.png", ("without LUT fusion", "with LUT fusion"))):
        pairs = [(k[0] + "\n" + k[1], by[(k[0], k[1], k[2], other)].count, r.count)
                 for k, r in by.items() if k[3] == "main" and (k[0], k[1], k[2], other) in by
                 and r.count and by[(k[0], k[1], k[2], other)].count]
        if not pairs:
            continue
        fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(pairs)), 4))
        xs = range(len(pairs))
        ax.bar([x - 0.2 for x in xs], [p[1] for p in pairs], 0.4, label=labels[0])
        ax.bar([x + 0.2 for x in xs], [p[2] for p in pairs], 0.4, label=labels[1])
        ax.set_xticks(list(xs), [p[0] for p in pairs], fontsize=7)
        ax.set_yscale("log")
        labels_ = {by[(k[0], k[1], k[2], v)].count_label for k in by if k[3] == "main" for v in ("main", other)
                   if (k[0], k[1], k[2], v) in by and by[(k[0], k[1], k[2], v)].count_label}
        ax.set_ylabel(f"{labels_.pop() if len(labels_) == 1 else 'count (mixed: see results.json)'} per inference")
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        path = outdir / fname
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="emlkit suite", description="Run every model on every target and board; check and report (what ./test_cortex_m.sh runs).")
    ap.add_argument("--models", default="all", help="comma-separated zoo models or 'all'")
    ap.add_argument("--targets", default=",".join(DEFAULT_TARGETS), help=f"comma-separated, from: {', '.join(TARGETS)}")
    ap.add_argument("--boards", default=None, help="comma-separated boards (default: each target's board)")
    ap.add_argument("--sim", choices=["qemu", "fvp", "auto"], default="auto")
    ap.add_argument("--quick", action="store_true", help=f"models {','.join(QUICK_MODELS)} only (a few minutes)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", default="out/suite")
    ap.add_argument("--programs", default=None,
                    help="where compiled programs are cached (default OUT/programs; ./scripts/test.sh gives the tests' "
                         "cache, build/test-programs, to reuse what they compiled)")
    ap.add_argument("--timeout", type=float, default=300.0, help="per-run simulator timeout in seconds")
    ap.add_argument("-v", "--verbose", action="store_true")
    return ap


def request(argv: list[str] | None = None) -> SuiteRequest:
    """The suite's options as a SuiteRequest (models and targets checked: an AotError names the unknown ones)."""
    args = _parser().parse_args(argv)
    names = QUICK_MODELS if args.quick and args.models == "all" else (list(models.ZOO) if args.models == "all" else args.models.split(","))
    unknown = [m for m in names if m not in models.ZOO]
    if unknown:
        raise AotError(f"unknown model(s) {', '.join(unknown)}; the zoo has {', '.join(models.ZOO)}")
    targets = [get_target(t).name for t in args.targets.split(",")]
    sim = args.sim
    if sim == "auto":
        sim = "fvp" if _fvp_on_path() else "qemu"
    boards = args.boards.split(",") if args.boards else None
    # The configuration rows belong to the default run (its targets), for the models it runs.
    default_run = args.targets == ",".join(DEFAULT_TARGETS) and not args.quick
    extra = [(m, t) for m, t in CONFIG_ROWS if m in names] if default_run else []
    return SuiteRequest(names, targets, boards, sim, args.jobs, Path(args.out), args.timeout, args.verbose,
                        Path(args.programs) if args.programs else None, extra)


def main(argv: list[str] | None = None) -> int:
    """`emlkit suite [options]` (and python -m emlkit.suite): parse, check, run."""
    import warnings

    from emlkit.logsetup import setup_logging

    try:
        req = request(argv)
    except AotError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    setup_logging(req.verbose)
    warnings.filterwarnings("ignore")
    return run_suite(req)


def _prebuild_boards(cases: list[Case], sim: str) -> None:
    """Build every image the runs need once, before parallel runs race for it (a board that does not build is
    said and its rows fail on their own)."""
    from emlkit.deploy.boards import load_board
    from emlkit.deploy.execute import prebuild, stand_in_for

    builds = {(c.board, "mve" if c.board == "host" or not load_board(c.board).has_mve_variant else c.kernels)
              for c in cases}
    for b, k in list(builds):
        if b != "host" and sim != "fvp" and load_board(b).qemu is None:
            alt = stand_in_for(load_board(b))
            if alt is not None:
                builds.add((alt.name, k))  # runs go there: build it once, before parallel runs race for it
    for b, k in sorted(builds):
        try:
            prebuild(b, k)
        except AotError as err:
            log.warning("board %s (%s kernels) does not build: %s", b, k, err)


def run_suite(req: SuiteRequest) -> int:
    """Every case of REQ on the simulators, in parallel; the table, results.json/.md and plots in req.out."""
    from rich.console import Console

    from emlkit.deploy.boards import BoardError, load_board

    cases = plan(req.models, req.targets, req.boards, req.sim, req.extra_rows)
    out = req.out
    out.mkdir(parents=True, exist_ok=True)
    try:
        for b in sorted({c.board for c in cases} - {"host"}):
            load_board(b)
    except BoardError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    _prebuild_boards(cases, req.sim)
    # Wide enough for the table when the output is a log file, not a terminal.
    console = Console(width=None if sys.stdout.isatty() else 220)
    rows = _run_cases(cases, req, console)
    return _report(rows, cases, req, console)


def _run_cases(cases: list[Case], req: SuiteRequest, console: Any) -> list[Row]:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    rows: list[Row] = []
    t0 = time.monotonic()
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal) as prog:
        task = prog.add_task("suite", total=len(cases))
        with ProcessPoolExecutor(max_workers=max(1, req.jobs)) as pool:
            futs = {pool.submit(run_case, c, str(req.programs or req.out / "programs"), req.timeout): c for c in cases}
            for fut in as_completed(futs):
                row = fut.result()
                rows.append(row)
                prog.advance(task)
                el = time.monotonic() - t0
                detail = f"{row.count:,} {row.unit}" if row.count else row.reason[:100]
                console.print(f"[{len(rows)}/{len(cases)} {el:6.0f}s] {row.status:7s} {row.model} {row.target} {row.board} "
                              f"{row.variant} ({row.seconds}s) {detail}", highlight=False)
    return rows


def _report(rows: list[Row], cases: list[Case], req: SuiteRequest, console: Any) -> int:
    """The table, the files, the one-line summary; exit 1 when a row failed."""
    from rich.table import Table

    out = req.out
    order = {(c.model, c.target, c.board, c.variant): i for i, c in enumerate(cases)}
    rows.sort(key=lambda r: order[(r.model, r.target, r.asked_board, r.variant)])
    main_rows = [r for r in rows if r.variant == "main"]
    table = Table(title=f"baremetal suite ({req.sim})")
    for c in COLUMNS:
        table.add_column(c, overflow="fold")
    for r in main_rows:
        table.add_row(*_cells(r))
    console.print(table)
    (out / "results.json").write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    write_markdown(main_rows, out / "results.md")
    for p in write_plots(rows, out):
        log.info("plot: %s", p)
    failed = [r for r in rows if r.status not in ("PASS", "SKIP", "REFUSED", "MISCOMPILED")]
    passed = sum(1 for r in rows if r.status == "PASS")
    skipped = sum(1 for r in rows if r.status == "SKIP")
    refused = sum(1 for r in rows if r.status == "REFUSED")
    miscompiled = sum(1 for r in rows if r.status == "MISCOMPILED")
    print(f"suite: {passed} passed, {len(failed)} failed, {skipped} skipped, {refused} refused at compile time "
          f"(unsupported op or pattern, named), {miscompiled} Vela miscompiles flagged at compile time")
    log.info("results: %s, %s", out / "results.json", out / "results.md")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
