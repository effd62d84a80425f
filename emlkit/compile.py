"""`compile`: model -> quantized, lowered ExecuTorch program + bundled test cases + report."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from executorch.exir import ExecutorchBackendConfig

import emlkit
from emlkit import emit, hostfw, macs, numerics, program_info, reference, verify
from emlkit.errors import EXIT_INTERNAL, EXIT_UNSUPPORTED, AotError
from emlkit.memory_plan import DEFAULT_PLANNER, memory_planning_pass
from emlkit.load import LoadedModel, calibration_digest, calibration_set, load_model
from emlkit.lower import LowerOptions, Lowered
from emlkit.measures import VELA_NPU_ONLY_KEY, VELA_TOTAL_KEY
from emlkit.npu import compile_check
from emlkit.passes import configure
from emlkit.program_needs import ProgramNeeds
from emlkit.targets import TARGETS, Target, get_target

log = logging.getLogger(__name__)


@dataclass
class CompileResult:
    name: str
    target: Target
    pte: Path
    bpte: Path
    report_path: Path
    report: dict[str, Any]


def make_options(lut_fusion: bool = True, explicit_layout: bool = False, allow_float: bool = False,
                 linear_mode: str = "all", streaming_state: bool = False,
                 memory_planner: str = DEFAULT_PLANNER, patch_bands: int = 0, io: str = "float") -> LowerOptions:
    """LowerOptions with our passes configured (emlkit.passes.configure)."""
    opts = LowerOptions(lut_fusion=lut_fusion, explicit_layout=explicit_layout, linear_mode=linear_mode,
                        allow_float=allow_float, streaming_state=streaming_state, memory_planner=memory_planner,
                        patch_bands=patch_bands, io=io)
    configure(opts, allow_float=allow_float)
    return opts


# The user's choices among LowerOptions' fields (the rest are the pass lists make_options configures from them).
CHOICES = ("lut_fusion", "explicit_layout", "allow_float", "linear_mode", "streaming_state", "memory_planner",
           "patch_bands", "io")


def options_like(opts: LowerOptions | None, **changes: Any) -> LowerOptions:
    """make_options with OPTS' choices (the defaults when None), CHANGES applied: passes configured afresh."""
    choices = {name: getattr(opts, name) for name in CHOICES} if opts is not None else {}
    return make_options(**{**choices, **changes})


def program_cache_dir(root: Path, target: str, lut_fusion: bool = True, explicit_layout: bool = False,
                      allow_float: bool = False) -> Path:
    """Where programs compiled with these options are kept under `root`, one folder per target and option set
    (compile_model's cache key covers the rest). The tests' cache (build/test-programs) and `emlkit suite`
    share this layout, so ./scripts/test.sh's quick suite reuses what the tests compiled."""
    return root / target / f"lut{int(lut_fusion)}-el{int(explicit_layout)}-af{int(allow_float)}"


def flow_for(target: Target) -> Any:
    if target.flow == "cortex_m":
        from emlkit.lower import cortex_m
        return cortex_m
    from emlkit.lower import ethos_u
    return ethos_u


def cache_key(model: LoadedModel, target: Target, options: LowerOptions, calibration: str | None) -> str:
    calib = calibration_digest(calibration)  # a file's bytes, or a folder's sample files
    src = Path(emlkit.__file__).parent
    # The toolkit version here is the content of the AOT sources and of the firmware the compiler asks (scratch
    # sizes, load check, program needs: emlkit.hostfw), so a change to either invalidates caches.
    sources = sorted(src.rglob("*.py")) + sorted(p for p in hostfw.FIRMWARE_DIR.rglob("*") if p.suffix in (".c", ".h", ".def"))
    tool = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    text = f"{model.fingerprint}|{target.name}|{target.system_config}|{target.memory_mode}|{options.lut_fusion}|{options.explicit_layout}|{options.linear_mode}|{options.allow_float}|{options.streaming_state}|{options.memory_planner}|{options.patch_bands}|{options.io}|{calib}|{tool}|{emlkit.__version__}"
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _vela_config(target: Target) -> dict[str, str] | None:
    """The accelerator config, system config and memory mode Vela compiled with (ExecuTorch's defaults filled in)."""
    if target.npu is None:
        return None
    from emlkit.vela_ini import resolve

    sys_cfg, mode = resolve(target.npu, target.system_config, target.memory_mode)
    return {"accelerator": target.npu, "system_config": sys_cfg, "memory_mode": mode}


def _vela_summary(lowered: Lowered) -> dict[str, Any] | None:
    parts = lowered.extra.get("vela_partitions")
    if parts is None:
        return None

    def num(row: dict[str, str], key: str) -> float:
        try:
            return float(row.get(key, 0) or 0)
        except ValueError:
            return 0.0

    rows = [p.summary for p in parts]
    return {
        "partitions": len(rows),
        # Vela's two cycle estimates differ by up to 6.8x on the zoo: named apart everywhere (emlkit/measures.py).
        VELA_NPU_ONLY_KEY: int(sum(num(r, "cycles_npu") for r in rows)),
        VELA_TOTAL_KEY: int(sum(num(r, "cycles_total") for r in rows)),
        "sram_kib": round(max([num(r, "sram_memory_used") for r in rows], default=0.0), 2),
        "flash_kib": round(sum(num(r, "off_chip_flash_memory_used") + num(r, "on_chip_flash_memory_used") for r in rows), 2),
        "macs": int(sum(num(r, "nn_macs") for r in rows)),
        "clock_hz": num(rows[0], "core_clock") if rows else 0.0,
    }


def _npu_estimates(lowered: Lowered, target: Target) -> dict[str, Any] | None:
    """Every NPU command's estimated cycles (emlkit/npu/perf.py), per delegate; None on the CPU. A delegate whose
    estimates cannot be made is left out with a warning: the co-simulated PMU then reads 0 for it."""
    parts = delegate_partitions(lowered, target)
    if not parts:
        return None
    from emlkit.npu.errors import NpuError
    from emlkit.npu.perf import delegate_estimate, report_entry

    arch = "u85" if (target.npu or "").startswith("ethos-u85") else "u55"
    delegates = {}
    for name, part in parts.items():
        if not part.debug_db:
            log.warning("warning: Vela wrote no debug database for %s: no per-command NPU estimates", name)
            continue
        try:
            delegates[name] = delegate_estimate(part.blob, part.debug_db, arch)
        except NpuError as err:
            log.warning("warning: no per-command NPU estimates for %s: %s", name, err)
    return report_entry(delegates)


def _tosa_agreement(lowered: Lowered, tosa_out: list[torch.Tensor], qparams: list[Any]) -> dict[str, Any]:
    """How far the program run with delegates on tosa_reference_model is from the fake-quantized torch model.

    The two differ only where TOSA's integer arithmetic rounds differently from
    PyTorch's float simulation of quantization, so the difference should be a
    step or so; more points at a lowering bug.
    """
    with torch.no_grad():
        fq = numerics.flatten_outputs(reference.run_graph(lowered.quantized, lowered.inputs))
    rows = []
    for i, (a, b) in enumerate(zip(fq, tosa_out)):
        diff = float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
        q = qparams[i] if i < len(qparams) else None
        rows.append({"max_abs": diff, "max_steps": round(diff / q["scale"], 2) if q else None})
    return {"reference": "tosa_reference_model vs fake-quantized torch model", "outputs": rows}


# tosa_reference_model against the fake-quantized torch model, in int8-sized steps: the zoo's programs
# agree within 1 (rounding); a lowering that drops an op is off by tens of steps or more.
TOSA_AGREEMENT_STEPS = 4
# Lowered.extra entries that are the flow's working data, not a pass's report (emlkit/lower/ethos_u.py).
FLOW_EXTRAS = frozenset({"vela_partitions", "workdir", "compile_spec"})


def _refuse_wrong_lowering(check: dict[str, Any], target: Target) -> None:
    per_step = 2 ** (target.activation_bits - 8)
    for i, row in enumerate(check["outputs"]):
        steps = row.get("max_steps")
        if steps is not None and steps / per_step > TOSA_AGREEMENT_STEPS:
            raise AotError(
                f"ExecuTorch's TOSA lowering for {target.name} computes output {i} {steps:g} steps away from the "
                "quantized model it was given (tosa_reference_model vs the fake-quantized graph), so the NPU would "
                "give wrong answers (an ExecuTorch 1.5.1 Arm-flow lowering bug our passes do not work around yet; "
                "README 'Not supported yet'): compile for a cortex-m target", EXIT_UNSUPPORTED)


def output_folder(outdir: str | Path) -> Path:
    out = Path(outdir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AotError(f"cannot create the output folder {out}: {exc.strerror or exc}: pass -o with a writable folder") from None
    if not os.access(out, os.W_OK):
        raise AotError(f"the output folder {out} is not writable: pass -o with a writable folder")
    return out


@dataclass
class _Files:
    """The files one compile writes: NAME_TARGET.pte/.bpte/.json/.etrecord in the output folder."""

    stem: str
    pte: Path
    bpte: Path
    report: Path
    etrecord: Path

    @classmethod
    def of(cls, out: Path, stem: str) -> "_Files":
        return cls(stem, out / f"{stem}.pte", out / f"{stem}.bpte", out / f"{stem}.json", out / f"{stem}.etrecord")


def _cached(files: _Files, key: str) -> dict[str, Any] | None:
    """The report of an earlier compile with this cache key whose files are all there, else None."""
    if not (files.pte.is_file() and files.bpte.is_file() and files.report.is_file()):
        return None
    try:
        old = json.loads(files.report.read_text())
    except json.JSONDecodeError:
        old = {}
    if old.get("cache_key") == key and (not (old.get("files") or {}).get("etrecord") or files.etrecord.is_file()):
        return old
    return None


def _float_outputs(model: LoadedModel) -> list[torch.Tensor]:
    with torch.no_grad():
        try:
            return numerics.flatten_outputs(model.module(*model.inputs))
        except Exception as exc:  # the user's inputs do not fit the user's module
            given = ", ".join(f"{str(t.dtype).replace('torch.', '')} {'x'.join(map(str, t.shape))}" for t in model.inputs)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AotError(f"ModelInputs ({given}) do not fit ModelUnderTest of {model.source}: PyTorch raised "
                           f"{type(exc).__name__}: {first}; give inputs of the shape and dtype the model takes") from None


@dataclass
class _Reference:
    """The lowered program run on the host references: what the device must produce."""

    device_out: list[torch.Tensor]
    tosa_graphs: dict[str, bytes] | None
    npu_check: Any


def delegate_partitions(lowered: Lowered, target: Target) -> dict[str, Any] | None:
    """Each Ethos-U delegate's Vela partition (its TOSA graph and command stream) by delegate name; None on the CPU."""
    if target.flow != "ethos_u":
        return None
    names = reference.delegate_names(lowered.edge.exported_program().graph_module)
    parts = lowered.extra["vela_partitions"]
    if len(names) != len(parts):
        raise AotError(f"internal: {len(names)} delegates but Vela compiled {len(parts)} graphs", EXIT_INTERNAL)
    return dict(zip(names, parts))


def _reference(lowered: Lowered, target: Target, out: Path, stem: str) -> _Reference:
    parts = delegate_partitions(lowered, target)
    tosa_graphs = None if parts is None else {n: p.tosa for n, p in parts.items()}
    if parts is not None:
        tdir = out / f"{stem}.tosa"
        tdir.mkdir(exist_ok=True)
        for n, p in parts.items():
            (tdir / f"{n}.tosa").write_bytes(p.tosa)
    calls: list[reference.DelegateIO] = []
    with torch.no_grad():
        device_out = reference.run_lowered(lowered.edge, lowered.inputs, tosa_graphs, calls)
    npu_check = None
    if parts:
        npu_check = compile_check.check_delegates({n: p.blob for n, p in parts.items()}, calls)
        compile_check.warn_on_mismatch(npu_check)
    return _Reference(device_out, tosa_graphs, npu_check)


def to_executorch(lowered: Lowered, target: Target, planner: str = DEFAULT_PLANNER) -> Any:
    """The ExecuTorch program of LOWERED, its arena placed by PLANNER (emlkit.memory_plan.PLANNERS)."""
    planning = memory_planning_pass(planner)
    config = ExecutorchBackendConfig(extract_delegate_segments=False, memory_planning_pass=planning)
    try:
        program = lowered.edge.to_executorch(config=config)
    except Exception as exc:
        raise AotError(f"ExecuTorch could not emit the program for {target.name}: {type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else ''}", EXIT_UNSUPPORTED) from exc
    verify.check_supported(program, lowered.edge, target.name, list(TARGETS))
    choice = getattr(planning, "choice", None)  # the calls' order (emlkit/op_order.py): a report entry
    if choice is not None:
        lowered.extra["op_order"] = dataclasses.asdict(choice)
    return program


def check_io(target: Target, options: LowerOptions | None) -> None:
    """`--io int8`/`int8-all` is a Cortex-M option: refused (usage, exit 2) elsewhere, with the fix."""
    io = options.io if options is not None else "float"
    if io != "float" and target.flow != "cortex_m":
        raise AotError(f"--io {io} is for the Cortex-M targets: on {target.name} the NPU delegate's int8 input is "
                       "fed by a CPU quantize this release keeps; compile with --io float or for a cortex-m target")


def int8_io_inputs(lowered: Lowered) -> tuple[torch.Tensor, ...]:
    """LOWERED's example inputs as its program takes them: with `--io int8`, each input the int8_io pass made int8
    quantized with its qparams by the same cortex_m op the program no longer runs (so the int8 program computes
    what the float one did), with the input's own strides; the others as they are."""
    entries = {e["index"]: e for e in (lowered.extra.get("int8_io") or {}).get("inputs", [])}
    if not entries:
        return lowered.inputs
    import executorch.backends.cortex_m.ops.operators  # noqa: F401  (registers torch.ops.cortex_m)

    out = []
    for i, x in enumerate(lowered.inputs):
        e = entries.get(i)
        if e is None:
            out.append(x)
            continue
        q = torch.ops.cortex_m.quantize_per_tensor(x, e["scale"], e["zero_point"], e["qmin"], e["qmax"], torch.int8)
        out.append(torch.empty_like(x, dtype=torch.int8).copy_(q))  # x's strides: the dim order the program planned
    return tuple(out)


def float_view(outputs: list[torch.Tensor], report: dict[str, Any]) -> list[torch.Tensor]:
    """The program's outputs in real units: with `--io int8-all`, the int8 outputs dequantized with their qparams
    (for the SNR against the float model); the others as they are."""
    entries = {e["index"]: e for e in (report.get("int8_io") or {}).get("outputs", [])}
    return [(o.float() - entries[k]["zero_point"]) * entries[k]["scale"] if k in entries else o
            for k, o in enumerate(outputs)]


def lower_model(model: LoadedModel, target: Target, options: LowerOptions | None,
                calibration: list[tuple[torch.Tensor, ...]], vela_dir: Path) -> tuple[Lowered, dict[str, bytes] | None]:
    """MODEL quantized with CALIBRATION and lowered for TARGET as `compile` does (Vela's files for an Ethos-U
    target in VELA_DIR unless the options name a folder), and the TOSA graph of each NPU delegate (for the host
    reference; None without delegates). For commands that build their own bundled program (evaluate, debug)."""
    options = copy.copy(options) if options is not None else make_options()
    if options.intermediates is None and target.flow == "ethos_u":
        options.intermediates = str(vela_dir)
    with torch.no_grad():
        lowered = flow_for(target).lower(model.module, model.inputs, calibration, target, options)
    parts = delegate_partitions(lowered, target)
    return lowered, None if parts is None else {n: p.tosa for n, p in parts.items()}


def compile_model(
    model_spec: str,
    target_name: str | Target,
    outdir: str | Path,
    calibration: str | None = None,
    options: LowerOptions | None = None,
    reuse_cache: bool = False,
) -> CompileResult:
    """Compile MODEL for TARGET into OUTDIR. The report's "program_needs" says what a Cortex-M program asks of
    the runner's memories; whether that fits a board is the command's fit check (emlkit/deploy/fit.py).
    TARGET_NAME: a target's name, or a Target (one with a Vela system config or memory mode chosen)."""
    target = target_name if isinstance(target_name, Target) else get_target(target_name)
    options = options or make_options()  # our passes, as the CLI configures them
    check_io(target, options)
    model = load_model(model_spec)
    out = output_folder(outdir)
    stem = f"{model.name}_{target.name}"
    files = _Files.of(out, stem)
    pte, bpte, etrecord = files.pte, files.bpte, files.etrecord
    key = cache_key(model, target, options, calibration)
    old = _cached(files, key) if reuse_cache else None
    if old is not None:
        log.debug("reusing cached program %s", bpte)
        return CompileResult(model.name, target, pte, bpte, files.report, old)

    t0 = time.monotonic()
    calib_set = calibration_set(calibration, model.inputs)
    calib = calib_set.samples
    float_out = _float_outputs(model)
    if options.intermediates is None and target.flow == "ethos_u":
        options.intermediates = str(out / f"{stem}.vela")
    with torch.no_grad():
        lowered = flow_for(target).lower(model.module, model.inputs, calib, target, options)
    lowered.inputs = int8_io_inputs(lowered)
    ref = _reference(lowered, target, out, stem)
    device_out = ref.device_out
    edge_before_emit = copy.deepcopy(lowered.edge)  # for the ETRecord: to_executorch changes the graph
    program = to_executorch(lowered, target, options.memory_planner)
    compile_s = time.monotonic() - t0

    # Each file is written then renamed, the report (which carries the cache key) last: a run stopped earlier
    # leaves the previous files whole, and a report only ever vouches for files of its own key.
    bundled = emit.bundle(program, [(lowered.inputs, device_out)])
    bundled_bytes = emit.bpte_bytes(bundled)
    verify.check_device_load(program, bundled_bytes, target.name)
    needs = verify.program_needs(program) if target.flow == "cortex_m" else None
    emit.write_pte(program, pte)
    emit.atomic_write(bpte, bundled_bytes)
    etrecord_error = emit.write_etrecord(edge_before_emit, bundled, etrecord)
    if etrecord_error:
        log.warning("warning: no ETRecord for %s (emlkit inspect will show operator names without graph "
                    "nodes): %s", stem, etrecord_error)
    report = _report(model, target, key, compile_s, float_out, program, lowered, needs, ref,
                     {"pte": pte.name, "bpte": bpte.name, "etrecord": None if etrecord_error else etrecord.name})
    report["calibration"] = calib_set.report_entry()
    emit.write_report(report, files.report)
    log.debug("wrote %s, %s, %s", pte, bpte, files.report)
    return CompileResult(model.name, target, pte, bpte, files.report, report)


def _report(model: LoadedModel, target: Target, key: str, compile_s: float, float_out: list[torch.Tensor],
            program: Any, lowered: Lowered, needs: ProgramNeeds | None, ref: _Reference,
            files: dict[str, Any]) -> dict[str, Any]:
    """The compile report (NAME_TARGET.json), in the order its keys have always had."""
    io = lowered.extra.get("int8_io") or {}
    acc = numerics.compare(float_out, float_view(ref.device_out, {"int8_io": io}))
    report: dict[str, Any] = {
        "model": model.name,
        "source": model.source,
        "target": target.name,
        "cpu": target.cpu,
        "flow": target.flow,
        "toolkit_version": emlkit.__version__,
        "cache_key": key,
        "compile_seconds": round(compile_s, 2),
        "inputs": [list(t.shape) for t in model.inputs],
        "outputs": [list(t.shape) for t in float_out],
        "macs": macs.model_macs(model.module, model.inputs),
        "ops": program_info.op_histogram(program),
        "delegated_ops": program_info.delegated_ops(lowered.edge),
        "layer_placement": program_info.layer_placement(lowered.edge) if target.flow == "ethos_u" else None,
        "partitions": program_info.partition_count(lowered.edge),
        "memory": program_info.memory_plan(program),
        "program_needs": needs.to_dict() if needs is not None else None,
        "numerics": {
            "outputs": acc,
            "snr_db": min(r["snr_db"] for r in acc),
            "max_abs": max(r["max_abs"] for r in acc),
            "reference": "tosa_reference_model + cortex_m Python references" if ref.tosa_graphs else "cortex_m Python references",
        },
        "output_qparams": program_info.output_qparams(lowered.edge, io.get("outputs", [])),
        "vela": _vela_summary(lowered),
        "vela_config": _vela_config(target),
        "notes": lowered.notes,
        "files": files,
    }
    if ref.npu_check is not None:
        report["npu_check"] = {"reference": "Vela's command streams on the NPU functional model vs "
                                            "tosa_reference_model, same inputs", "delegates": ref.npu_check}
    estimates = _npu_estimates(lowered, target)
    if estimates is not None:
        report["npu_estimates"] = estimates
    if ref.tosa_graphs and lowered.quantized is not None:
        report["tosa_check"] = _tosa_agreement(lowered, ref.device_out, report["output_qparams"])
        _refuse_wrong_lowering(report["tosa_check"], target)
    # Every pass's own report entry (its report_key); the flow's working data stays out.
    for extra, value in lowered.extra.items():
        if extra not in FLOW_EXTRAS:
            report[extra] = value
    return report
