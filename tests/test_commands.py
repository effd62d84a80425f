"""The command layer (emlkit/commands.py): arguments become typed requests with the target and board resolved
once; the library takes those values, never an argparse Namespace; data flows one way (cli -> commands ->
library); host, QEMU and the FVPs are one Simulator interface. Fast: nothing is compiled or run."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from emlkit import commands
from emlkit.cli import build_parser
from emlkit.deploy import boards as B
from emlkit.errors import AotError
from emlkit.requests import HOST, CompileRequest, ExportRequest, FlashRequest, RunRequest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "emlkit"


def _args(*argv: str):
    return build_parser().parse_args(list(argv))


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_run_request_resolves_target_and_board_once() -> None:
    req = commands.run_request(_args("run", "conv_relu", "--target", "cortex-m55", "-o", "o", "--sim", "qemu"))
    assert isinstance(req, RunRequest)
    assert req.program.target.name == "cortex-m55" and req.program.options is not None
    assert isinstance(req.board, B.Board) and req.board.name == "corstone-300"
    assert req.board is B.load_board("corstone-300")  # the one loaded board, shared
    assert (req.sim, req.kernels, req.output, req.prebuilt) == ("qemu", "mve", Path("o"), False)
    host = commands.run_request(_args("run", "x.bpte", "--target", "cortex-m55", "--board", "host"))
    assert host.board == HOST and host.prebuilt


def test_compile_request_checks_fit_only_for_cortex_m_on_a_board() -> None:
    req = commands.compile_request(_args("compile", "mlp", "--target", "cortex-m0plus", "--board", "microbit"))
    assert isinstance(req, CompileRequest) and req.board is B.load_board("microbit")
    assert commands.compile_request(_args("compile", "mlp", "--target", "cortex-m55", "--board", "host")).board is None
    assert commands.compile_request(_args("compile", "add", "--target", "ethos-u55-128")).board is None


def test_unknown_board_and_target_are_one_line_errors() -> None:
    with pytest.raises(AotError, match="unknown board 'nope'.*known boards"):
        commands.run_request(_args("run", "add", "--target", "cortex-m55", "--board", "nope"))
    with pytest.raises(AotError, match="unknown target 'cortex-m99'"):
        commands.compile_request(_args("compile", "add", "--target", "cortex-m99"))


def test_export_and_flash_requests(tmp_path: Path) -> None:
    req = commands.export_request(_args("export", "add", "--target", "cortex-m55", "-o", str(tmp_path / "p")))
    assert isinstance(req, ExportRequest) and req.board is B.load_board("corstone-300") and not req.force
    assert commands.export_request(_args("export", "add", "--target", "cortex-m55", "--board", "host",
                                         "-o", "p")).board == HOST  # refused by export with its own message
    elf = tmp_path / "app.elf"
    elf.write_bytes(b"\x7fELF")
    f = commands.flash_request(_args("flash", str(elf), "--mps3-dir", str(tmp_path / "sd"), "--board", "corstone-320"))
    assert isinstance(f, FlashRequest) and f.board is B.load_board("corstone-320")
    assert commands.flash_request(_args("flash", str(elf), "--probe", "auto")).board is None


def test_library_takes_typed_values_not_a_namespace() -> None:
    from emlkit.deploy import export, flash
    from emlkit.run import run_model

    for fn in (run_model, export.export_model, flash.flash):
        (param,) = inspect.signature(fn).parameters.values()
        assert "Request" in str(param.annotation), fn
    for path in [PKG / "run.py", PKG / "compile.py", PKG / "suite.py", *sorted((PKG / "deploy").glob("*.py"))]:
        assert "argparse.Namespace" not in path.read_text(), path


def test_data_flows_one_way() -> None:
    """compile imports nothing from deploy; no library module imports the command layer or the CLI."""
    assert not {m for m in _imports(PKG / "compile.py") if m.startswith("emlkit.deploy")}
    for path in PKG.rglob("*.py"):
        if path.name in ("cli.py", "commands.py", "__main__.py"):
            continue
        up = {m for m in _imports(path) if m.split(".")[:2] in (["emlkit", "cli"], ["emlkit", "commands"])}
        assert not up, f"{path.relative_to(REPO)} imports {up}"


def test_simulators_share_one_interface() -> None:
    from emlkit.deploy.execute import simulator
    from emlkit.deploy.sim_fvp import FvpSimulator
    from emlkit.deploy.sim_host import HostSimulator
    from emlkit.deploy.sim_qemu import QemuSimulator
    from emlkit.deploy.simulator import Simulator

    want = inspect.signature(Simulator.run)
    for cls, name in ((HostSimulator, "host"), (QemuSimulator, "qemu"), (FvpSimulator, "fvp")):
        sim = simulator(name)
        assert isinstance(sim, cls) and sim.name == name
        assert list(inspect.signature(cls.run).parameters) == list(want.parameters)
    c300, c320 = B.load_board("corstone-300"), B.load_board("corstone-320")
    assert simulator("host").available(None)
    assert simulator("qemu").available(c300) and not simulator("qemu").available(c320)
    with pytest.raises(AotError, match="unknown simulator"):
        simulator("gem5")


def test_boards_are_parsed_once_and_again_when_changed(tmp_path: Path) -> None:
    src = B.BOARDS_DIR / "corstone-300" / "board.toml"
    d = tmp_path / "corstone-300"
    d.mkdir()
    (d / "board.toml").write_text(src.read_text())
    first = B.load_board(d)
    assert B.load_board(d) is first
    (d / "board.toml").write_text(src.read_text().replace('description = "', 'description = "changed: ', 1))
    again = B.load_board(d)
    assert again is not first and again.description.startswith("changed: ")


def test_no_long_functions_in_the_command_and_deploy_layers() -> None:
    files = [PKG / n for n in ("cli.py", "commands.py", "requests.py", "run.py", "compile.py", "suite.py",
                               "targets.py", "load.py", "summary.py", "program_needs.py")]
    files += sorted((PKG / "deploy").glob("*.py"))
    long = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80:
                long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert not long, long
