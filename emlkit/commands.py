"""The command layer: each `emlkit` command's arguments become a typed request (emlkit/requests.py) with its
Target and Board resolved once here, and the request goes to the library.

Data flows one way: emlkit/cli.py (argument parsing) -> here -> compile, run, deploy, suite. No library module
imports this one.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any, Callable

from emlkit.errors import EXIT_FIT, AotError
from emlkit.requests import (HOST, BoardRef, CompileRequest, DebugRequest, EvaluateRequest, ExportRequest, FlashRequest,
                             InspectRequest, MergeRequest, OpsuiteRequest, ProgramSpec, RunRequest)

log = logging.getLogger("emlkit")


# ---------------------------------------------------------------- resolving names


def resolve_board(name: str) -> BoardRef:
    """The board NAME (loaded once, emlkit/deploy/boards.py), or HOST; an unknown or malformed board is an
    AotError naming the fix."""
    return HOST if name == HOST else _load_board(name)


def _load_board(name: str) -> Any:
    from emlkit.deploy.boards import BoardError, load_board

    try:
        return load_board(name)
    except (BoardError, FileNotFoundError) as err:
        raise AotError(str(err)) from err


def program_spec(args: argparse.Namespace) -> ProgramSpec:
    from emlkit.compile import make_options
    from emlkit.targets import get_target, with_vela_config

    from emlkit.compile import check_io

    io = getattr(args, "io", "float")
    if io != "float" and args.cmd in ("evaluate", "debug"):
        raise AotError(f"--io {io} is for compile, run and export: {args.cmd} feeds float samples and compares "
                       "float outputs; drop --io")
    options = make_options(not args.no_lut_fusion, args.explicit_layout, args.allow_float, args.per_channel_linear,
                           args.streaming_state, args.memory_planner, args.patch_stages, io)
    target = with_vela_config(get_target(args.target), args.system_config, args.memory_mode)
    check_io(target, options)
    if args.streaming_state and target.flow != "cortex_m":
        raise AotError(f"--streaming-state is for the Cortex-M targets (the int8 LSTM/GRU kernels keep the state); "
                       f"{target.name} runs LSTMs on the NPU or in float: drop the option or pick a cortex-m target")
    return ProgramSpec(args.model, target, args.calibration, options)


# ---------------------------------------------------------------- checks before the library loads

_RUNS_ON_A_BOARD = ("run", "evaluate", "debug")


def check_arguments(args: argparse.Namespace) -> None:
    """The mistakes the command line alone shows (unknown target, board or model, a missing model file or image,
    an Ethos-U target on a board without its NPU), refused before torch and ExecuTorch are imported: such an error
    costs well under a second instead of seconds of imports. The requests below and the library check the same
    things again, with the same messages, for callers that do not come through here."""
    if args.cmd == "flash":
        from emlkit.deploy.flash import check_arguments as check_flash

        check_flash(Path(args.elf), args.probe, args.pyocd_target)
        return
    if args.cmd not in ("compile", "export", *_RUNS_ON_A_BOARD):
        return
    from emlkit.targets import get_target

    target = get_target(args.target)
    name = args.board or target.default_board
    board = None
    if name != HOST and (args.cmd != "compile" or target.flow == "cortex_m"):  # as compile_request: the fit check's board
        board = _load_board(name)
    if board is not None and target.flow == "ethos_u" and args.cmd in _RUNS_ON_A_BOARD:
        from emlkit.deploy.execute import npu_board

        npu_board(target, board)
    if not (args.cmd == "run" and str(args.model).endswith((".bpte", ".pte"))):  # run also takes a bundled program
        from emlkit.model_spec import model_kind

        model_kind(args.model)


# ---------------------------------------------------------------- requests from the command line


def compile_request(args: argparse.Namespace) -> CompileRequest:
    spec = program_spec(args)
    name = args.board or spec.target.default_board
    # The fit check is for Cortex-M programs on a board (Ethos-U programs are checked when they run).
    board = resolve_board(name) if spec.target.flow == "cortex_m" and name != HOST else None
    return CompileRequest(spec, Path(args.output), board)


def run_request(args: argparse.Namespace) -> RunRequest:
    spec = program_spec(args)
    board = resolve_board(args.board or spec.target.default_board)
    return RunRequest(spec, Path(args.output), board, args.sim, args.timeout, args.kernels, args.save_outputs,
                      args.npu_trace, getattr(args, "etdump", None), bool(getattr(args, "cycles", False)))


def evaluate_request(args: argparse.Namespace) -> EvaluateRequest:
    spec = program_spec(args)
    board = resolve_board(args.board or spec.target.default_board)
    return EvaluateRequest(spec, Path(args.data), Path(args.output), board, args.labels, args.limit, args.sim,
                           args.timeout, args.kernels)


def debug_request(args: argparse.Namespace) -> DebugRequest:
    spec = program_spec(args)
    board = resolve_board(args.board or spec.target.default_board)
    return DebugRequest(spec, Path(args.output), board, Path(args.inputs) if args.inputs else None, args.sim,
                        args.timeout, args.kernels, args.suggest)


def export_request(args: argparse.Namespace) -> ExportRequest:
    spec = program_spec(args)
    name = args.board or spec.target.default_board
    board = HOST if name == HOST else resolve_board(name)  # export refuses HOST with its own message
    return ExportRequest(spec, Path(args.output), board, args.force, args.kernels)


def inspect_request(args: argparse.Namespace) -> InspectRequest:
    return InspectRequest(args.etdump, args.log, args.etrecord, args.sim, args.json, args.trace, args.trace_run)


def flash_request(args: argparse.Namespace) -> FlashRequest:
    elf = Path(args.elf)
    board = None
    if not args.probe and elf.is_file():  # the board's memory map places the MPS3 images (a missing image is said first)
        board = _load_board(args.board)
    return FlashRequest(elf, args.probe, args.mps3, args.mps3_dir, args.pyocd_target, board, args.frequency, args.erase,
                        args.dry_run)


def opsuite_request(args: argparse.Namespace) -> OpsuiteRequest | MergeRequest:
    if getattr(args, "opsuite_cmd", None) == "merge":
        return MergeRequest(list(args.shards), args.output, args.docs)
    return OpsuiteRequest(args.targets, args.allow_float, args.cases, args.k, args.shard, args.jobs, args.timeout,
                          args.out)


# ---------------------------------------------------------------- the commands


def compile_cmd(req: CompileRequest) -> int:
    from emlkit.compile import compile_model
    from emlkit.fitting import fit_program
    from emlkit.summary import print_compile

    spec = req.program
    res = compile_model(spec.model, spec.target, req.output, spec.calibration, spec.options)
    res, error = fit_program(spec, req.output, req.board, res)
    print_compile(res.report)
    log.info("program: %s  bundled: %s  report: %s", res.pte, res.bpte, res.report_path)
    if error:
        raise AotError(error, EXIT_FIT)
    return 0


def _library(module: str, func: str) -> Callable[[Any], int]:
    """The command that hands its request to MODULE.FUNC (imported when the command runs: startup stays fast)."""
    def cmd(req: Any) -> int:
        import importlib

        return int(getattr(importlib.import_module(module), func)(req))

    return cmd


run_cmd: Callable[[RunRequest], int] = _library("emlkit.run", "run_model")
evaluate_cmd: Callable[[EvaluateRequest], int] = _library("emlkit.evaluate", "evaluate_model")
debug_cmd: Callable[[DebugRequest], int] = _library("emlkit.debug", "debug_cmd")
export_cmd: Callable[[ExportRequest], int] = _library("emlkit.deploy.export", "export_model")
inspect_cmd: Callable[[InspectRequest], int] = _library("emlkit.etdump", "cmd_inspect")
flash_cmd: Callable[[FlashRequest], int] = _library("emlkit.deploy.flash", "flash")


def suite_cmd(argv: list[str]) -> int:
    """`emlkit suite ...`: the suite parses its own options (emlkit/suite.py) into a SuiteRequest."""
    from emlkit.suite import main

    return main(argv)


def opsuite_cmd(req: OpsuiteRequest | MergeRequest) -> int:
    if isinstance(req, MergeRequest):
        from emlkit.opsuite.report import main

        return main(req)
    from emlkit.opsuite.run import run

    return run(req)


def models_cmd() -> int:
    from rich.console import Console
    from rich.table import Table

    from emlkit import models

    t = Table(title="model zoo")
    for col in ("name", "inputs", "parameters", "description"):
        t.add_column(col)
    for name, desc in models.ZOO.items():
        zm = models.build(name)
        params = sum(p.numel() for p in zm.module.parameters())
        t.add_row(name, ", ".join("x".join(map(str, i.shape)) for i in zm.inputs), f"{params:,}", desc)
    Console().print(t)
    return 0
