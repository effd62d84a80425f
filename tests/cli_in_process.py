"""`emlkit ARGS` run by emlkit.cli.main inside the test process.

A subprocess pays ~5 s of torch and ExecuTorch imports before it does anything; most CLI tests check an error line
or a short command, which in this process costs what the command itself costs. What needs a process of its own
(the console script, `python -m emlkit`, Ctrl-C, a changed environment, fresh imports, a timeout) stays a
subprocess in its test."""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest


@dataclass
class CliResult:
    """What the command ended with, named as subprocess.CompletedProcess names it: assertions read either alike."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _logging_kept() -> Iterator[None]:
    """The CLI sets the root handler and quiets torch's loggers for its process; in this one, put them back so the
    next test sees what it would have seen."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: lg.level for name, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, lg in logging.root.manager.loggerDict.items():
            if isinstance(lg, logging.Logger):
                lg.setLevel(levels.get(name, logging.NOTSET))


def cli_runner(capfd: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """run(args, cwd=None): main's return value or argparse's SystemExit code, and stdout and stderr captured at the
    file descriptors (so the output of simulators the command starts is caught as a subprocess's would be)."""
    from emlkit.cli import main

    def run(args: list[str], cwd: Path | None = None) -> CliResult:
        capfd.readouterr()  # only this command's output
        with _logging_kept(), warnings.catch_warnings(), contextlib.chdir(cwd or os.getcwd()):
            try:
                rc = main([str(a) for a in args])
            except SystemExit as exc:  # argparse: usage errors (2) and --help (0)
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capfd.readouterr()
        return CliResult(rc, out.out, out.err)

    return run
