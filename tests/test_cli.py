"""The toolkit as an installed package: the `emlkit` command with every subcommand, `python -m emlkit` as an
alias, and no sys.path manipulation anywhere (everything imports through the installed package)."""

from __future__ import annotations

import ast
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
