"""The toolkit as an installed package: the `emlkit` command with every subcommand, `python -m emlkit` as an
alias, and no sys.path manipulation anywhere (everything imports through the installed package)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUBCOMMANDS = ["compile", "run", "evaluate", "debug", "export", "inspect", "flash", "models", "suite", "opsuite"]


def test_console_script_is_installed() -> None:
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "emlkit"]
    assert ep.value == "emlkit.cli:main"
    script = Path(sys.executable).parent / "emlkit"
    assert script.is_file(), "the venv has no emlkit command: run ./scripts/setup.sh"


def test_every_subcommand_through_emlkit_and_python_m_aot() -> None:
    # PYTHONPATH: a git worktree that shares another checkout's venv must run its own sources.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for cmd in ([str(Path(sys.executable).parent / "emlkit")], [sys.executable, "-m", "emlkit"]):
        r = subprocess.run([*cmd, "--help"], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("usage: emlkit")
        listed = r.stdout.split("{", 1)[1].split("}", 1)[0].split(",")
        assert listed == SUBCOMMANDS
        for sub in SUBCOMMANDS:
            r = subprocess.run([*cmd, sub, "--help"], capture_output=True, text=True, env=env, timeout=300)
            assert r.returncode == 0 and f"emlkit {sub}" in r.stdout, (sub, r.stderr)


def test_no_sys_path_manipulation() -> None:
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    offenders = []
    for rel in tracked.split():
        tree = ast.parse((REPO / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
                    and node.value.id == "sys":
                offenders.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "__package__":
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == []


# Each: arguments, what the one error line says. emlkit.commands.check_arguments refuses them from the command line
# alone, before torch and ExecuTorch are imported (setup_logging imports torch).
EARLY_ERRORS = [
    (["compile", "no_such_model", "--target", "cortex-m55"], "unknown model 'no_such_model'"),
    (["compile", "nope.py", "--target", "cortex-m55"], "model file not found: nope.py"),
    (["run", "nope.pt", "--target", "cortex-m55", "--board", "host"], "case file not found: nope.pt"),
    (["compile", "add", "--target", "cortex-m4000"], "unknown target 'cortex-m4000'"),
    (["run", "add", "--target", "cortex-m55", "--board", "mps9"], "unknown board 'mps9'"),
    (["export", "add", "--target", "cortex-m4", "--board", "mps9", "-o", "x"], "unknown board 'mps9'"),
    (["run", "add", "--target", "ethos-u85-256", "--board", "corstone-300"], "not an ethos-u85"),
    (["evaluate", "add", "--target", "ethos-u55-128", "--board", "mps2-an386", "--data", "d.npz"], "has no Ethos-U NPU"),
    (["flash", "none.elf", "--mps3-dir", "sd"], "none.elf: no such image"),
]

_EARLY_SCRIPT = """
import json, sys
from emlkit.cli import main
rcs = [main(args) for args in json.loads(sys.argv[1])]
print(json.dumps({"rcs": rcs, "loaded": sorted(m for m in ("torch", "executorch", "torchao") if m in sys.modules)}))
"""


def test_argument_errors_are_refused_before_torch_is_imported(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # as above: this checkout's sources
    r = subprocess.run([sys.executable, "-c", _EARLY_SCRIPT, json.dumps([a for a, _ in EARLY_ERRORS])], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    got = json.loads(r.stdout.strip().splitlines()[-1])
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    assert got["rcs"] == [2] * len(EARLY_ERRORS) and len(errors) == len(EARLY_ERRORS), r.stderr[-3000:]
    for line, (args, says) in zip(errors, EARLY_ERRORS):
        assert says in line, (args, line)
    assert got["loaded"] == [], got  # nothing heavy was imported on the way to these errors
    assert "Traceback" not in r.stderr


def test_argument_error_exit_status_from_a_process(tmp_path: Path) -> None:
    """The exit status and the one line reach the shell through `python -m emlkit` (the tests above call main)."""
    r = subprocess.run([sys.executable, "-m", "emlkit", "compile", "add", "--target", "cortex-m4000"], cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [r.stderr.strip()] and r.stderr.startswith("error: unknown target 'cortex-m4000'")
