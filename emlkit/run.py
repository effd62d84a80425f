"""`run`: compile (cached), build the firmware (cached), execute on a board, check, summarise.

Exit statuses: 0 pass, 1 output mismatch, 2 usage/set-up error, 3 simulator timeout or crash,
4 the program does not fit the board's memories (emlkit/deploy/fit.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from emlkit.compile import CompileResult, compile_model
from emlkit.errors import EXIT_DEVICE, EXIT_FIT, EXIT_MISMATCH, EXIT_OK, EXIT_SKIP, EXIT_TIMEOUT, EXIT_USAGE, AotError
from emlkit.measures import VELA_NPU_ONLY, VELA_NPU_ONLY_KEY, VELA_TOTAL, VELA_TOTAL_KEY, cpu_count_label, npu_pmu_label
from emlkit.requests import BoardRef, RunRequest, board_name
from emlkit.summary import npu_check_text, print_run, vela_config_text
from emlkit.targets import get_target

log = logging.getLogger(__name__)

CYCLES_MODEL_LABEL = "cycles (model, not measured)"


@dataclass
class RunOutcome:
    """One model x target x board run, as `run` and the suite report it."""

    model: str
    target: str
    board: str
    sim: str
    status: str                    # PASS, FAIL, SKIP, ERROR, TIMEOUT, CRASH
    reason: str = ""
    label: str = ""                # e.g. "functional model" for NPU rows on the host
    compile: dict[str, Any] = field(default_factory=dict)   # the compile report
    result: Any = None             # emlkit.deploy.result.RunResult when the device ran
    image_bytes: int | None = None
    fit: Any = None                # emlkit.deploy.fit.FitResult (Cortex-M programs on a board)
    etdump: Any = None             # Path of the ETDump the firmware wrote (--etdump)
    debug_buffer: Any = None       # Path of its debug buffer (every call's output; emlkit debug)
    elf: Any = None                # Path of the image that ran (Cortex-M programs on a board)
    cycles: Any = None             # emlkit.cycle_run.CycleReport with --cycles

    @property
    def exit_code(self) -> int:
        if self.status == "SKIP" and self.fit is not None and not self.fit.fits:
            return EXIT_FIT
        return {"PASS": EXIT_OK, "FAIL": EXIT_MISMATCH, "TIMEOUT": EXIT_TIMEOUT, "CRASH": EXIT_DEVICE,
                "SKIP": EXIT_SKIP}.get(self.status, EXIT_DEVICE)


def execute(cres: CompileResult, board: BoardRef, sim: str, timeout: float, kernels: str,
            save_outputs: str | None, npu_trace: bool = False, etdump: str | None = None,
            debug: bool = False) -> RunOutcome:
    """Run a compiled program on BOARD and turn the device's result line into an outcome."""
    from emlkit.deploy.execute import execute_bpte

    target = cres.target
    out = RunOutcome(cres.name, target.name, board_name(board), sim, "ERROR", compile=cres.report)
    dres = execute_bpte(cres, board=board, sim=sim, timeout=timeout, kernels=kernels,
                        save_outputs=save_outputs, npu_trace=npu_trace, etdump=etdump, debug=debug)
    out.sim = dres.sim
    out.etdump = dres.etdump
    out.debug_buffer = dres.debug_buffer
    out.elf = dres.elf
    out.board = dres.board or board_name(board)
    out.label = dres.label
    out.image_bytes = dres.image_bytes
    out.fit = dres.fit
    if dres.skip_reason:
        out.status, out.reason = "SKIP", dres.skip_reason
        return out
    res = dres.result
    out.result = res
    status = {"pass": "PASS", "fail": "FAIL", "timeout": "TIMEOUT", "crash": "CRASH"}.get(res.status, "ERROR")
    if status == "FAIL" and float_ops(cres.report) and within_float_slack(res):
        status = "PASS"
        out.label = (out.label + "; " if out.label else "") + f"float ops: within {FLOAT_SLACK_STEPS} step"
    out.status = status
    if status != "PASS":
        out.reason = res.error or res.status
    return out


# A float op on the device rounds like PyTorch's CPU kernel but not always to the same last bit (summation
# order, libm), and a quantize after it can then land one step away from the host reference. Programs
# without float ops stay bit-exact (0 steps); with --allow-float, one step is accepted and reported.
FLOAT_SLACK_STEPS = 1


def within_float_slack(res: Any) -> bool:
    """Every output either passed the firmware's own check or is a quantized output at most one step off."""
    return bool(res.outputs) and all(o.passed or (o.max_abs is not None and o.max_steps is not None
                                                   and 0 <= o.max_steps <= FLOAT_SLACK_STEPS)
                                     for o in res.outputs)


def float_ops(report: dict[str, Any], result: Any = None) -> list[dict[str, Any]]:
    """Every op the program runs in float on the CPU (--allow-float), with its source line and, when the device
    ran with per-op counts, its share of the run's instructions (or cycles): per op name, split evenly over
    that name's nodes when several nodes share it (the firmware counts by op name)."""
    islands = ((report.get("verify") or {}).get("float_islands")) or []
    by_name: dict[str, list[dict[str, Any]]] = {}
    for f in islands:
        by_name.setdefault(f["op"], []).append(f)
    counts: dict[str, int] = {}
    if result is not None:
        for op in result.per_op:
            base = op.op.split(".")[0]
            counts[base] = counts.get(base, 0) + op.count
    total = result.total if result is not None and result.total else None
    rows = []
    for name, nodes in by_name.items():
        each = counts[name] / len(nodes) if name in counts else None
        for f in nodes:
            rows.append({"op": name, "node": f["node"], "source": f["source"], "count": each,
                         "share": each / total if each is not None and total else None})
    return rows


def _summary_rows(o: RunOutcome) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = [("status", o.status + (f" ({o.label})" if o.label else "") + (f": {o.reason}" if o.reason else ""))]
    r = o.result
    num = o.compile.get("numerics", {})
    if r is not None and r.outputs:
        rows.append(("max diff vs expected", ", ".join(
            f"{'?' if x.max_steps is None else x.max_steps} steps / {x.max_abs if x.max_abs is not None else float('nan'):.3g}"
            for x in r.outputs)))
    if num:
        snr = num.get("snr_db")
        rows.append(("SNR vs float model", f"{snr if isinstance(snr, str) else round(float(snr), 1)} dB"))
    if r is not None and r.total is not None:
        rows.append((cpu_count_label(r.unit, o.sim), f"{r.total:,}"))
        if o.cycles is not None:
            rows.append((CYCLES_MODEL_LABEL, f"{round(o.cycles.cycles):,} ({o.cycles.core} timing model)"))
        for op in sorted(r.per_op, key=lambda p: -p.count)[:5]:
            mod = o.cycles.op(op.op) if o.cycles is not None else None
            extra = f"; {round(mod.cycles):,} cycles (model)" if mod is not None else ""
            rows.append(("  " + op.op, f"{op.count:,} ({op.calls} calls){extra}"))
    floats = float_ops(o.compile, r)
    if floats:
        share = sum(f["count"] or 0 for f in floats) / r.total if r is not None and r.total else None
        head = f"{len(floats)} ops" + (f", {100 * share:.1f}% of {cpu_count_label(r.unit, o.sim)}" if share is not None else "")
        rows.append(("float ops (--allow-float)", head))
        for f in floats[:8]:
            pct = f" {f['share']:.1%}" if f["share"] is not None else ""
            rows.append(("  " + f["op"], f"{f['source']}{pct}"))
        if len(floats) > 8:
            rows.append(("  ...", f"{len(floats) - 8} more in the report"))
    if r is not None and r.arena_bytes:
        rows.append(("arena bytes", " + ".join(str(a) for a in r.arena_bytes)))
    npu = (r.raw or {}).get("npu") if r is not None else None
    if npu:
        rows.append(("NPU (device)", f"{npu.get('config')} ID {npu.get('id')}, {npu.get('invocations')} inferences"))
        if npu.get("pmu_cycles"):  # 0 where nothing counts (a co-simulated program without Vela's estimates)
            per = f" ({npu['pmu_cycles'] // npu['invocations']:,} per inference)" if npu.get("invocations") else ""
            rows.append((npu_pmu_label(o.sim), f"{npu['pmu_cycles']:,}{per}"))
    if r is not None and (r.raw or {}).get("delegate_bytes"):
        rows.append(("delegate bytes (NPU scratch)", f"{r.raw['delegate_bytes']:,}"))
    if r is not None and r.stack_bytes:
        rows.append(("stack bytes", str(r.stack_bytes)))
    if o.image_bytes:
        rows.append(("image bytes", f"{o.image_bytes:,}"))
    if o.fit is not None:
        from emlkit.summary import fit_text

        rows.append((f"memory on {o.fit.board}", fit_text({"checked": True, **o.fit.to_dict()})))
    if vela_config_text(o.compile):
        rows.append(("Vela config", vela_config_text(o.compile)))
    vela = o.compile.get("vela")
    if vela:
        rows.append((VELA_NPU_ONLY, f"{vela[VELA_NPU_ONLY_KEY]:,}"))
        rows.append((VELA_TOTAL, f"{vela[VELA_TOTAL_KEY]:,}"))
    check = o.compile.get("npu_check")
    if check:  # a MISMATCH here explains a FAIL: Vela's stream disagrees with the graph it was given
        rows.append(("NPU model vs TOSA (compile)", npu_check_text(check["delegates"])))
    if r is not None and r.status in ("timeout", "crash") and r.console:
        rows.append(("last console lines", " | ".join(r.console[-5:])))
    return rows


def prebuilt(path: str, target_name: str) -> CompileResult:
    """A bundled program given on the command line instead of a model (e.g. from an earlier `compile`, or from
    ExecuTorch's own aot_arm_compiler --bundleio): checked enough to give one clear line when it is not one."""
    from pathlib import Path

    target = get_target(target_name)
    p = Path(path)
    if p.suffix == ".pte":
        raise AotError(f"{p}: a .pte has no test cases to check on the device: give its .bpte (emlkit compile writes "
                       "one; ExecuTorch's aot_arm_compiler writes one with --bundleio)")
    if not p.is_file():
        raise AotError(f"bundled program not found: {p}")
    try:
        head = p.open("rb").read(8)
    except OSError as exc:
        raise AotError(f"{p}: cannot be read ({exc.strerror})") from None
    if len(head) < 8 or head[4:8] != b"BP08":
        raise AotError(f"{p} is not a bundled program (identifier BP08 missing at byte 4): it is truncated, corrupt "
                       "or another kind of file")
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program

    from executorch.exir._serialize._program import deserialize_pte_binary

    try:
        bundle = deserialize_from_flatbuffer_to_bundled_program(p.read_bytes())
    except Exception as exc:  # the flatbuffer reader raises whatever it hits first on bad bytes
        raise AotError(f"{p} is a damaged bundled program ({type(exc).__name__}): recompile it") from None
    try:  # the bundle's own table may be intact around a damaged program
        deserialize_pte_binary(bytes(bundle.program))
    except Exception as exc:
        raise AotError(f"{p} is a damaged bundled program (its program does not parse: {type(exc).__name__}): "
                       "recompile it") from None
    return CompileResult(p.stem, target, p, p, p, {})


def run_model(req: RunRequest) -> int:
    """Compile (cached) or check the given bundled program, run it on the request's board, print the summary;
    the exit status, or an AotError for anything but a pass or a mismatch."""
    spec = req.program
    target = spec.target
    if req.prebuilt:
        cres = prebuilt(spec.model, target.name)
    else:
        cres = compile_model(spec.model, target, req.output, spec.calibration, spec.options, reuse_cache=True)
    outcome = execute(cres, req.board, req.sim, req.timeout, req.kernels, req.save_outputs, req.npu_trace, req.etdump)
    if not req.prebuilt and target.flow == "cortex_m" and _arena_short(outcome):
        # as `compile`: an arena the board cannot hold tries row bands
        from emlkit.fitting import fit_program

        cres, error = fit_program(spec, req.output, req.board, cres)
        if error:
            raise AotError(error, EXIT_FIT)
        outcome = execute(cres, req.board, req.sim, req.timeout, req.kernels, req.save_outputs, req.npu_trace,
                          req.etdump)
    if req.cycles:
        add_cycle_model(outcome, cres, req.board, req.timeout)
    print_run({"model": outcome.model, "board": outcome.board, "sim": outcome.sim, "rows": _summary_rows(outcome)})
    if outcome.etdump is not None:
        etrecord = (cres.report.get("files") or {}).get("etrecord")
        hint = f" --etrecord {cres.pte.parent / etrecord}" if etrecord else ""
        log.info("ETDump: %s (per-operator table: emlkit inspect --etdump %s%s)", outcome.etdump, outcome.etdump, hint)
    return exit_status(outcome, spec.model if req.prebuilt else None)


def _arena_short(outcome: RunOutcome) -> bool:
    """Whether OUTCOME was skipped because a memory holding the arenas is too small (row bands may fit)."""
    from emlkit.fit_search import arena_short

    fit = outcome.fit
    return outcome.status == "SKIP" and fit is not None and arena_short({"checked": True, **fit.to_dict()})


def add_cycle_model(outcome: RunOutcome, cres: CompileResult, board: BoardRef, timeout: float) -> None:
    """`run --cycles`: run the same image once more with QEMU's exec log and add the modelled cycles per op to the
    outcome and to its result line's dict (key "cycles_model"); printed as one JSON line."""
    import json

    from emlkit.cycle_run import CycleRunError, model_cycles
    from emlkit.cycles import CORE_ALIASES, CORES, TimingError
    from emlkit.deploy.boards import load_board
    from emlkit.exec_stream import StreamError

    r = outcome.result
    if outcome.status == "SKIP" or (r is not None and (r.status not in ("pass", "fail") or not r.cases)):
        return  # nothing ran to the end (does not fit, timeout, crash): that status is reported as usual
    if outcome.sim != "qemu" or outcome.elf is None:
        raise AotError(f"--cycles models a Cortex-M program's cycles on QEMU's instruction stream: {outcome.target} "
                       f"ran on {outcome.sim} ({outcome.board}); use a Cortex-M target on a QEMU board (not --board "
                       "host, --sim fvp or an Ethos-U target)", EXIT_USAGE)
    if r is None:
        return
    b = load_board(outcome.board)
    core = CORE_ALIASES.get(b.cpu, b.cpu)
    if core not in CORES or any(o.op.startswith("delegate:") for o in r.per_op):
        raise AotError(f"--cycles has no timing model for {outcome.target} on {b.name} ({b.cpu}): it models the "
                       f"CPU-only programs of {', '.join(CORES)}", EXIT_USAGE)
    try:
        rep = model_cycles(cres.bpte, b, outcome.elf, core, r.cases, timeout * 20)
    except (CycleRunError, StreamError, TimingError) as exc:
        raise AotError(f"--cycles: {exc}", EXIT_USAGE) from None
    outcome.cycles = rep
    r.raw["cycles_model"] = rep.to_dict()
    log.info("cycles (model): %s ran %s instructions in the exec log over %d measured run(s), modelled in %.1f s",
             core, f"{rep.instructions:,}", rep.runs, rep.seconds)
    print(json.dumps({**r.raw, "cycles_model": rep.to_dict()}))


def exit_status(outcome: RunOutcome, given: str | None) -> int:
    """PASS and FAIL are exit statuses; every other outcome is an AotError with one line. `given`: the bundled
    program named on the command line, if any."""
    if outcome.status == "SKIP":
        if outcome.exit_code == EXIT_FIT:
            raise AotError(outcome.reason, EXIT_FIT)
        raise AotError(f"{outcome.reason}; AOT figures above are from the compile step (no device run)", EXIT_SKIP)
    if outcome.status == "ERROR":
        code = (outcome.result.code if outcome.result is not None else None) or "error"
        if given and code in ("invalid_program", "delegate_corrupt"):  # the firmware's stricter checks found it
            raise AotError(f"{given} is a damaged bundled program ({code}): {outcome.reason}", EXIT_USAGE)
        raise AotError(f"the device stopped with {code}: {outcome.reason or 'device run failed'}", EXIT_DEVICE)
    if outcome.status == "TIMEOUT":
        raise AotError(f"simulator timeout: {outcome.reason}", EXIT_TIMEOUT)
    if outcome.status == "CRASH":
        raise AotError(f"the device crashed: {outcome.reason}", EXIT_DEVICE)
    return outcome.exit_code
