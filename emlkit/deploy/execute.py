"""One entry point for running a compiled program on any board: host, QEMU or FVP.

Picks the executor from the board and simulator, builds what it needs (cached),
and turns every failure to start into an AotError; device-level outcomes
(pass, fail, timeout, crash) come back in the RunResult.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emlkit.errors import EXIT_SKIP, EXIT_USAGE, AotError

log = logging.getLogger(__name__)

FVP_BINARIES = ("FVP_Corstone_SSE-300_Ethos-U55", "FVP_Corstone_SSE-300_Ethos-U65", "FVP_Corstone_SSE-320")


@dataclass
class DeployResult:
    sim: str                      # host, qemu, fvp, npu-model
    result: Any = None            # emlkit.deploy.result.RunResult
    skip_reason: str = ""
    label: str = ""
    image_bytes: int | None = None
    board: str = ""               # the board that ran it (a stand-in may replace the one asked for)
    fit: Any = None               # emlkit.deploy.fit.FitResult for Cortex-M programs on a board
    etdump: Path | None = None    # the ETDump the firmware wrote, where it was asked for


def _build_options(kernels: str, board: Any = None) -> Any:
    """Build options for a kernel variant; a board without MVE has one image, used for both."""
    from emlkit.deploy.build import BuildOptions

    if kernels not in ("mve", "portable"):
        raise AotError(f"unknown kernel variant '{kernels}': use mve or portable")
    return BuildOptions(mve=(kernels == "mve" or (board is not None and not board.has_mve_variant)))


def prebuild(board: str, kernels: str = "mve") -> int | None:
    """Build BOARD's full image once up front (so parallel runs don't race; each program's own image is
    linked from its objects, emlkit/deploy/program_image.py); returns the full image's size."""
    if board == "host":
        from emlkit.deploy.sim_host import build_host_runner

        build_host_runner()
        return None
    from emlkit.deploy.boards import load_board
    from emlkit.deploy.build import BuildError, build_image

    try:
        res = build_image(board, _build_options(kernels, load_board(board)))
    except (BuildError, ValueError) as err:
        raise AotError(f"firmware image for {board} does not build: {err}") from err
    return _image_size(res)


def _program_file(cres: Any) -> Path:
    """The file to read the program's operators from: the .pte where there is one (reading the program out
    of a large .bpte takes seconds), else the .bpte."""
    pte = Path(cres.pte) if getattr(cres, "pte", None) else None
    return pte if pte is not None and pte.is_file() else Path(cres.bpte)


def _image_size(build_result: Any) -> int | None:
    s = build_result.sizes or {}
    return int(s.get("text", 0) + s.get("data", 0)) or None


def _sim_error(err: Exception) -> AotError:
    """A simulator that could not start: missing tools are a skip (exit 5), anything else a usage error."""
    from emlkit.deploy.sim_qemu import ToolMissing

    return AotError(str(err), EXIT_SKIP if isinstance(err, ToolMissing) else EXIT_USAGE)


def _fvp_available(board: Any) -> bool:
    return board.fvp is not None and any(shutil.which(b) for b in FVP_BINARIES)


def _from_sim(sres: Any) -> Any:
    from emlkit.deploy.result import RunResult

    run = sres.run
    if sres.status in ("timeout", "crash"):
        tail = sres.console.splitlines()[-20:]
        why = sres.fault or ("killed at the timeout" if sres.status == "timeout" else "no result line")
        r = run if run is not None else RunResult(status=sres.status)
        r.status, r.error, r.console = sres.status, why, tail
        return r
    return run


def _save_npy(raw: list[bytes], bpte: Path, save_outputs: str) -> None:
    from emlkit.deploy.sim_host import save_outputs_npy

    if not raw:
        raise AotError("the device wrote no outputs to save")
    with tempfile.TemporaryDirectory() as d:
        for i, data in enumerate(raw):
            (Path(d) / f"output_{i}.bin").write_bytes(data)
        for p in save_outputs_npy(d, bpte, save_outputs):
            log.info("saved %s", p)


def _keep_etdump(sres: Any, etdump: str | None) -> Path | None:
    """Copy the ETDump the firmware wrote in the simulator's folder to where the user asked for it."""
    if not etdump:
        return None
    if sres.etdump_data is None:
        log.warning("warning: the firmware wrote no ETDump (status %s)", sres.status)
        return None
    dst = Path(etdump)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")  # a failed write never leaves a half ETDump under the user's name
    tmp.write_bytes(sres.etdump_data)
    tmp.replace(dst)
    return dst


def execute_bpte(cres: Any, board: str, sim: str = "auto", timeout: float = 120.0, kernels: str = "mve",
                 save_outputs: str | None = None, npu_trace: bool = False, etdump: str | None = None) -> DeployResult:
    """`etdump`: a path for the ETDump of the measured runs (the firmware records every instruction)."""
    from emlkit.deploy.boards import BoardError, load_board

    target = cres.target
    if target.flow == "ethos_u":
        return _execute_npu(cres, board, sim, timeout, kernels, save_outputs, npu_trace, etdump)
    if board == "host":
        from emlkit.deploy.result import ResultError
        from emlkit.deploy.sim_host import run_host

        try:
            if etdump:
                Path(etdump).parent.mkdir(parents=True, exist_ok=True)
            res = run_host(cres.bpte, save_outputs_dir=None, etdump=etdump)
            if save_outputs:
                with tempfile.TemporaryDirectory() as raw:
                    run_host(cres.bpte, save_outputs_dir=raw)
                    from emlkit.deploy.sim_qemu import _collect_outputs

                    _save_npy([p.read_bytes() for p in _collect_outputs(Path(raw))], cres.bpte, save_outputs)
        except ResultError as err:
            from emlkit.deploy.result import RunResult

            return DeployResult("host", RunResult(status="crash", error=str(err)))
        except Exception as err:  # build failures
            raise AotError(f"host runner: {err}") from err
        return DeployResult("host", res, etdump=Path(etdump) if etdump and Path(etdump).is_file() else None)
    try:
        b = load_board(board)
    except (BoardError, FileNotFoundError) as err:
        raise AotError(str(err)) from err
    if sim == "auto":
        sim = "fvp" if _fvp_available(b) else "qemu"
    stand_in = ""
    if sim == "qemu" and b.qemu is None:
        # As for Ethos-U programs: QEMU has no Cortex-M85, so the labelled stand-in (AN547 map,
        # Cortex-M55 + MVE: the same instruction set the M85 image is built for) runs the program.
        alt = stand_in_for(b)
        if alt is not None:
            stand_in = f"stand-in for {b.name}: {alt.name}, Cortex-M55 + MVE (instruction counts of an M55)"
            b = alt
    from emlkit.deploy.build import BuildError
    from emlkit.deploy.program_image import program_image

    try:
        img = program_image(b.name, _build_options(kernels, b), _program_file(cres))
    except (BuildError, ValueError) as err:
        from emlkit.deploy.fit import overflow_result

        over = overflow_result(b, str(err))
        if over is not None:  # the image itself does not fit the board's memories
            return DeployResult(sim, skip_reason=over.line(f"{cres.name} ({target.name})"), fit=over, board=b.name)
        raise AotError(f"firmware image for {b.name} does not build: {err}") from err
    size = _image_size(img)
    fit = _check_fit(cres, b, img.elf)
    if not fit.fits:
        return DeployResult(sim, skip_reason=fit.line(f"{cres.name} ({target.name})"), image_bytes=size, fit=fit,
                            board=b.name, label=b.label)
    if sim == "qemu":
        if b.qemu is None:
            return DeployResult("qemu", skip_reason=f"QEMU has no machine for {b.name} ({b.cpu}); run it with --sim fvp "
                                                    f"where {', '.join(FVP_BINARIES[2:]) if '320' in b.name else 'an FVP'} is on PATH",
                                image_bytes=size)
        from emlkit.deploy.sim_qemu import SimError, run_qemu

        try:
            sres = run_qemu(cres.bpte, b, elf=img.elf, timeout=timeout, save_outputs=bool(save_outputs),
                            etdump=bool(etdump))
        except SimError as err:
            raise _sim_error(err) from err
    elif sim == "fvp":
        from emlkit.deploy.sim_fvp import run_fvp
        from emlkit.deploy.sim_qemu import SimError

        try:
            sres = run_fvp(cres.bpte, b, elf=img.elf, timeout=timeout, save_outputs=bool(save_outputs),
                           etdump=bool(etdump))
        except SimError as err:
            raise _sim_error(err) from err
    else:
        raise AotError(f"unknown simulator '{sim}': use qemu, fvp or auto")
    res = _from_sim(sres)
    if save_outputs and res is not None and res.status in ("pass", "fail"):
        _save_npy(sres.output_data, cres.bpte, save_outputs)
    return DeployResult(sim, res, image_bytes=size, fit=fit, board=b.name, label=stand_in or b.label,
                        etdump=_keep_etdump(sres, etdump))


def _check_fit(cres: Any, board: Any, elf: Path) -> Any:
    """Whether the compiled program fits the board with this image (emlkit/deploy/fit.py)."""
    from emlkit.deploy.fit import FitError, ProgramNeeds, check, read_image

    raw = cres.report.get("program_needs")
    if raw:
        needs = ProgramNeeds.from_dict(raw)
    else:  # a prebuilt .bpte, or a report from before the fit check: read the counts off the program
        from executorch.exir._serialize._program import deserialize_pte_binary

        path = Path(cres.pte)
        try:
            data = path.read_bytes()
            if data[4:8] == b"BP08":  # a bundled program: the program is one of its fields
                from executorch.devtools.bundled_program.serialize import \
                    deserialize_from_flatbuffer_to_bundled_program

                data = bytes(deserialize_from_flatbuffer_to_bundled_program(data).program)
            pte = deserialize_pte_binary(data)
            needs = ProgramNeeds.from_program(getattr(pte, "program", pte))
        except Exception as exc:  # the flatbuffer readers raise whatever they hit first on bad bytes
            raise AotError(f"{path} is a damaged {'bundled program' if path.suffix == '.bpte' else 'program'} "
                           f"({type(exc).__name__}): recompile it", EXIT_USAGE) from None
    try:
        return check(board, read_image(elf), needs, Path(cres.bpte).stat().st_size)
    except FitError as err:
        raise AotError(str(err), EXIT_USAGE) from err


def stand_in_for(board: Any) -> Any:
    """The board that stands in for `board` under QEMU (e.g. an547-u85 for corstone-320), or None."""
    from emlkit.deploy.boards import list_boards, load_board

    for name in list_boards():
        other = load_board(name)
        if other.stand_in_for == board.name and other.qemu is not None:
            return other
    return None


def _fvp_for_npu(board: Any, npu: str) -> str | None:
    """An FVP on PATH that models this board with this NPU product."""
    if board.fvp is None:
        return None
    product = npu.rsplit("-", 1)[0]           # ethos-u55
    suffix = product.replace("ethos-", "Ethos-").replace("-u", "-U")
    for name in board.fvp.variants:
        if (suffix in name or (product == "ethos-u85" and "SSE-320" in name)) and shutil.which(name):
            return name
    return None


def _execute_npu(cres: Any, board: str, sim: str, timeout: float, kernels: str, save_outputs: str | None,
                 npu_trace: bool, etdump: str | None = None) -> DeployResult:
    """Ethos-U programs: the host executor (--board host), or the firmware on a board: an FVP with the NPU where
    one is on PATH, else QEMU with the NPU co-simulated."""
    from emlkit.deploy.boards import BoardError, load_board

    if board == "host":
        if etdump:
            raise AotError("--etdump records the firmware's runs; --board host runs Ethos-U programs on the Python "
                           "functional model: run on a board (corstone-300) instead")
        return _run_npu_model(cres, save_outputs, npu_trace)
    npu = cres.target.npu
    try:
        b = load_board(board)
    except (BoardError, FileNotFoundError) as err:
        raise AotError(str(err)) from err
    if b.npu is None:
        raise AotError(f"board '{b.name}' has no Ethos-U NPU ([npu] in its board.toml): run {cres.target.name} programs "
                       f"on corstone-300 or corstone-320, or with --board host")
    product = npu.rsplit("-", 1)[0]
    if b.npu.products and product not in b.npu.products:
        raise AotError(f"board '{b.name}' has an {' or '.join(b.npu.products)}, not an {product}: use --board "
                       f"{cres.target.default_board}")
    fvp = _fvp_for_npu(b, npu)
    if sim == "fvp" and fvp is None:
        raise AotError(f"no FVP for {b.name} with an {product} on PATH: install Arm's Corstone FVP, or use --sim qemu "
                       "(the NPU is then co-simulated)", EXIT_SKIP)
    label = ""
    if sim in ("qemu", "auto") and not (sim == "auto" and fvp):
        sim = "qemu"
        if b.qemu is None:
            alt = stand_in_for(b)
            if alt is None:
                raise AotError(f"QEMU has no machine for {b.name} and no board stands in for it")
            label = f"stand-in for {b.name}: {alt.name}, Cortex-M55 + co-simulated {npu}"
            b = alt
    elif sim == "auto":
        sim = "fvp"
    from emlkit.deploy.build import BuildError
    from emlkit.deploy.program_image import OpSet, program_image

    try:
        img = program_image(b.name, _build_options(kernels, b), _program_file(cres))
    except (BuildError, ValueError) as err:
        raise AotError(f"firmware image for {b.name} does not build: {err}") from err
    size = _image_size(img)
    from emlkit.deploy.sim_qemu import SimError

    if not OpSet.of_file(_program_file(cres)).npu:
        # Nothing was delegated (e.g. a reshape alone): the image is built without the Ethos-U driver, and
        # the program runs on the CPU with nothing to co-simulate.
        npu = None
        label = (label + "; " if label else "") + "no NPU partition: every op on the CPU"

    try:
        if sim == "fvp":
            from emlkit.deploy.sim_fvp import run_fvp

            sres = run_fvp(cres.bpte, b, elf=img.elf, fvp=fvp, timeout=timeout, save_outputs=bool(save_outputs), npu=npu,
                           etdump=bool(etdump))
            label = f"{fvp}; cycles from the FVP"
        else:
            from emlkit.deploy.sim_qemu import run_qemu

            sres = run_qemu(cres.bpte, b, elf=img.elf, timeout=timeout, save_outputs=bool(save_outputs), npu=npu,
                            etdump=bool(etdump))
            if npu is not None:
                label = label or f"QEMU + co-simulated {npu} (functional model)"
                label += "; NPU cycles: Vela estimate"
    except SimError as err:
        raise _sim_error(err) from err
    if getattr(sres, "skip_reason", ""):
        return DeployResult(sim, skip_reason=sres.skip_reason, label=label, image_bytes=size, board=b.name)
    res = _from_sim(sres)
    if save_outputs and res is not None and res.status in ("pass", "fail"):
        _save_npy(sres.output_data, cres.bpte, save_outputs)
    if npu_trace:
        _host_trace(cres)
    return DeployResult(sim, res, label=label, image_bytes=size, board=b.name, etdump=_keep_etdump(sres, etdump))


def _host_trace(cres: Any) -> None:
    from emlkit.npu.trace import log_trace, trace_bundled

    data = Path(cres.bpte).read_bytes()
    tdir = Path(cres.bpte).with_suffix(".tosa")
    graphs = [p.read_bytes() for p in sorted(tdir.glob("lowered_module_*.tosa"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))]
    for i, rows in enumerate(trace_bundled(data, graphs)):
        log_trace(rows, i)


def _run_npu_model(cres: Any, save_outputs: str | None, npu_trace: bool) -> DeployResult:
    """The delegate on our Ethos-U functional model, the CPU remainder on the cortex_m references."""
    import json

    import numpy as np

    from emlkit.deploy.result import RunResult, parse_result
    from emlkit.npu.errors import NpuError
    from emlkit.npu.program import run_bundled

    data = Path(cres.bpte).read_bytes()
    try:
        d = run_bundled(data)
    except NpuError as err:
        if "not modelled" in str(err):
            # A command or weight format the functional model does not cover yet: the program may be fine.
            return DeployResult("npu-model", None, skip_reason=f"NPU functional model: {err}")
        return DeployResult("npu-model", RunResult(status="error", error=str(err)))
    runs = d.pop("runs", [])
    d["status"] = {"mismatch": "fail"}.get(d["status"], d["status"])
    label = d.pop("executor", "Ethos-U functional model")
    res = parse_result(json.dumps(d))
    if save_outputs and runs:
        out = Path(save_outputs)
        out.mkdir(parents=True, exist_ok=True)
        for i, t in enumerate(runs[0].outputs):
            np.save(out / f"output_{i}.npy", t.contiguous().numpy())
    if npu_trace:
        _host_trace(cres)
    return DeployResult("npu-model", res, label=f"{label}; cycles are Vela estimates")
