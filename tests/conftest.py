"""Shared fixtures: compiled zoo programs cached across test files and runs; the CLI run in this process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from emlkit.locks import held

ROOT = Path(__file__).resolve().parent.parent

# Compiled programs are cached here by compile_model's cache key (model source,
# target, options, toolkit sources), so a rerun only recompiles what changed.
CACHE = Path(os.environ.get("AOT_TEST_CACHE", ROOT / "build" / "test-programs"))


def compile_cached(model: str, target: str, lut_fusion: bool = True, explicit_layout: bool = False,
                   allow_float: bool = False):
    """Compile (or reuse) MODEL for TARGET; returns emlkit.compile.CompileResult."""
    from emlkit.compile import compile_model, make_options, program_cache_dir

    opts = make_options(lut_fusion, explicit_layout, allow_float)
    out = program_cache_dir(CACHE, target, lut_fusion, explicit_layout, allow_float)
    with held(out / Path(model).stem):  # parallel workers: one compiles, the other then reuses it
        return compile_model(model, target, out, options=opts, reuse_cache=True)


@pytest.fixture(scope="session")
def compiled():
    return compile_cached


@pytest.fixture
def emlkit_cli(capfd):
    """`emlkit ARGS` in this process (tests/cli_in_process.py): emlkit_cli([...], cwd) -> returncode, stdout, stderr."""
    from cli_in_process import cli_runner

    return cli_runner(capfd)
