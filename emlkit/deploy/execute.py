"""One entry point for running a compiled program on any board: host, QEMU or FVP.

Picks the Simulator (emlkit/deploy/simulator.py: sim_host, sim_qemu, sim_fvp each provide one) from the board
and the --sim choice, builds what it needs (cached), and turns every failure to start into an AotError;
device-level outcomes (pass, fail, timeout, crash) come back in the RunResult.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emlkit.deploy.sim_fvp import FVP_BINARIES
from emlkit.deploy.simulator import Simulator, SimRun
from emlkit import hostfw
from emlkit.errors import EXIT_SKIP, EXIT_USAGE, AotError

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
    debug_buffer: Path | None = None  # its debug buffer (every call's output), where asked for
    elf: Path | None = None       # the image that ran (Cortex-M programs on a board), for `run --cycles`


def _build_options(kernels: str, board: Any = None) -> Any:
    """Build options for a kernel variant; a board without MVE has one image, used for both."""
    from emlkit.deploy.build import BuildOptions

    if kernels not in ("mve", "portable"):
        raise AotError(f"unknown kernel variant '{kernels}': use mve or portable")
    return BuildOptions(mve=(kernels == "mve" or (board is not None and not board.has_mve_variant)))


def prebuild(board: str, kernels: str = "mve") -> int | None:
    """Build BOARD's full image once up front (so parallel runs don't race; each program's own image is
    linked from its objects, emlkit/deploy/program_image.py); returns the full image's size, None where it
    overflows the board (the objects are built all the same)."""
    if board == "host":
        from emlkit.hostfw import build_host_runner

        build_host_runner()
        return None
    from emlkit.deploy.boards import load_board
    from emlkit.deploy.build import BuildError, build_image

    try:
        res = build_image(board, _build_options(kernels, load_board(board)), objects_only=True)
    except (BuildError, ValueError) as err:
        raise AotError(f"firmware image for {board} does not build: {err}") from err
    return _image_size(res) if res.elf.exists() else None


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


def simulator(name: str, **config: Any) -> Simulator:
    """The Simulator called NAME (host, qemu, fvp); `config`: the FVP binary for fvp (binary=...)."""
    if name == "host":
        from emlkit.deploy.sim_host import HostSimulator

        return HostSimulator()
    if name == "qemu":
        from emlkit.deploy.sim_qemu import QemuSimulator

        return QemuSimulator()
    if name == "fvp":
        from emlkit.deploy.sim_fvp import FvpSimulator

        return FvpSimulator(**config)
    raise AotError(f"unknown simulator '{name}': use qemu, fvp or auto")


def _run_on(sim: Simulator, cres: Any, b: Any, elf: Path | None, timeout: float, save_outputs: str | None,
            npu: str | None, etdump: str | None, debug: bool = False) -> SimRun:
    """One run on a firmware simulator; one that cannot start is an AotError (a missing tool: a skip)."""
    from emlkit.deploy.sim_qemu import SimError

    try:
        return sim.run(cres.bpte, b, elf=elf, timeout=timeout, save_outputs=save_outputs, npu=npu, etdump=etdump,
                       debug=debug)
    except SimError as err:
        raise _sim_error(err) from err


def _board(board: Any) -> Any:
    """A Board from a Board or a board name (loaded once, emlkit/deploy/boards.py)."""
    from emlkit.deploy.boards import Board, BoardError, load_board

    if isinstance(board, Board):
        return board
    try:
        return load_board(board)
    except (BoardError, FileNotFoundError) as err:
        raise AotError(str(err)) from err


def execute_bpte(cres: Any, board: Any, sim: str = "auto", timeout: float = 120.0, kernels: str = "mve",
                 save_outputs: str | None = None, npu_trace: bool = False, etdump: str | None = None,
                 debug: bool = False) -> DeployResult:
    """Run CRES's bundled program on BOARD (a Board, a board name, or "host"). `sim`: qemu, fvp or auto (an FVP
    where one is on PATH). `etdump`: a path for the ETDump of the measured runs (the firmware records every
    instruction); with `debug`, also every call's output in the first run (emlkit/debug.py)."""
    if cres.target.flow == "ethos_u":
        return _execute_npu(cres, board, sim, timeout, kernels, save_outputs, npu_trace, etdump, debug)
    if board == "host":
        return _execute_host(cres, save_outputs, etdump, debug)
    return _execute_cortex_m(cres, _board(board), sim, timeout, kernels, save_outputs, etdump, debug)


def _execute_host(cres: Any, save_outputs: str | None, etdump: str | None, debug: bool = False) -> DeployResult:
    try:
        run = simulator("host").run(cres.bpte, None, save_outputs=save_outputs, etdump=etdump, debug=debug)
    except Exception as err:  # build failures
        raise AotError(f"host runner: {err}") from err
    return DeployResult("host", run.result, etdump=run.etdump, debug_buffer=run.debug_buffer)


def _execute_cortex_m(cres: Any, b: Any, sim: str, timeout: float, kernels: str, save_outputs: str | None,
                      etdump: str | None, debug: bool = False) -> DeployResult:
    """A Cortex-M program on a board's firmware: build the image with its operators, check the fit, run."""
    target = cres.target
    if sim == "auto":
        sim = "fvp" if simulator("fvp").available(b) else "qemu"
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
    runner = simulator(sim)
    if sim == "qemu" and not runner.available(b):
        return DeployResult("qemu", skip_reason=f"QEMU has no machine for {b.name} ({b.cpu}); run it with --sim fvp "
                                                f"where {', '.join(FVP_BINARIES[2:]) if '320' in b.name else 'an FVP'} is on PATH",
                            image_bytes=size)
    run = _run_on(runner, cres, b, img.elf, timeout, save_outputs, None, etdump, debug)
    return DeployResult(sim, run.result, image_bytes=size, fit=fit, board=b.name, label=stand_in or b.label,
                        etdump=run.etdump, debug_buffer=run.debug_buffer, elf=Path(img.elf))


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
            needs = ProgramNeeds.from_program(getattr(pte, "program", pte), data)
        except hostfw.HostBuildError as exc:  # the program may be fine: the firmware's host build failed
            raise hostfw.unavailable("read the program with the firmware's loader", exc) from exc
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


def npu_board(target: Any, board: Any) -> Any:
    """The board an Ethos-U program for TARGET runs on: it must have an NPU of the target's product. The CLI asks
    before compiling (emlkit/commands.py), execution again for library callers."""
    b = _board(board)
    npu = target.npu
    if b.npu is None:
        raise AotError(f"board '{b.name}' has no Ethos-U NPU ([npu] in its board.toml): run {target.name} programs "
                       f"on corstone-300 or corstone-320, or with --board host")
    product = npu.rsplit("-", 1)[0]
    if b.npu.products and product not in b.npu.products:
        raise AotError(f"board '{b.name}' has an {' or '.join(b.npu.products)}, not an {product}: use --board "
                       f"{target.default_board}")
    return b


def _npu_simulator(b: Any, sim: str, npu: str) -> tuple[str, Any, str, str | None]:
    """(sim, board, label, FVP binary): an FVP with the NPU where one is on PATH (or asked for), else QEMU with the
    NPU co-simulated, on the board's stand-in where QEMU has no machine for it."""
    from emlkit.deploy.sim_fvp import fvp_for_npu

    product = npu.rsplit("-", 1)[0]
    fvp = fvp_for_npu(b, npu)
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
    return sim, b, label, fvp


def _execute_npu(cres: Any, board: Any, sim: str, timeout: float, kernels: str, save_outputs: str | None,
                 npu_trace: bool, etdump: str | None = None, debug: bool = False) -> DeployResult:
    """Ethos-U programs: the host executor (--board host), or the firmware on a board: an FVP with the NPU where
    one is on PATH, else QEMU with the NPU co-simulated."""
    if board == "host":
        if etdump:
            raise AotError("--etdump records the firmware's runs; --board host runs Ethos-U programs on the Python "
                           "functional model: run on a board (corstone-300) instead")
        return _run_npu_model(cres, save_outputs, npu_trace)
    npu = cres.target.npu
    sim, b, label, fvp = _npu_simulator(npu_board(cres.target, board), sim, npu)
    from emlkit.deploy.build import BuildError
    from emlkit.deploy.program_image import OpSet, program_image

    try:
        img = program_image(b.name, _build_options(kernels, b), _program_file(cres))
    except (BuildError, ValueError) as err:
        raise AotError(f"firmware image for {b.name} does not build: {err}") from err
    size = _image_size(img)
    if not OpSet.of_file(_program_file(cres)).npu:
        # Nothing was delegated (e.g. a reshape alone): the image is built without the Ethos-U driver, and
        # the program runs on the CPU with nothing to co-simulate.
        npu = None
        label = (label + "; " if label else "") + "no NPU partition: every op on the CPU"
    runner = simulator(sim, binary=fvp) if sim == "fvp" else simulator(sim)
    run = _run_on(runner, cres, b, img.elf, timeout, save_outputs, npu, etdump, debug)
    if sim == "fvp":
        label = f"{fvp}; cycles from the FVP"
    elif npu is not None:
        label = label or f"QEMU + co-simulated {npu} (functional model)"
        label += "; NPU cycles: Vela estimate"
    if run.skip_reason:
        return DeployResult(sim, skip_reason=run.skip_reason, label=label, image_bytes=size, board=b.name)
    if npu_trace:
        _host_trace(cres)
    return DeployResult(sim, run.result, label=label, image_bytes=size, board=b.name, etdump=run.etdump,
                        debug_buffer=run.debug_buffer)


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
