"""Collect ExecuTorch's backend operator suite's cases with the suite's own discovery: pytest over its
operators/ folder, in this process, with our plugin instead of the suite's conftest (emlkit/opsuite/plugin.py)."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

from emlkit.errors import EXIT_INTERNAL, AotError
from emlkit.opsuite import plugin


def operators_dir() -> Path:
    try:
        import executorch.backends.test.suite.operators as ops
    except Exception as exc:  # the wheel always ships it; without it there is nothing to measure
        raise AotError(f"ExecuTorch's backend test suite does not import ({type(exc).__name__}: {exc})") from None
    return Path(ops.__file__).parent


def capture(targets: list[str], files: list[str] | None = None) -> plugin.Sink:
    """Run the suite's operator tests (every file, or FILES: names like test_relu.py) for TARGETS' flows;
    every lower_and_run_model call becomes a plugin.Record. Quiet: pytest's own output is discarded."""
    import pytest

    opdir = operators_dir()
    paths = [str(opdir / f) for f in files] if files else [str(opdir)]
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise AotError(f"no such operator test file in ExecuTorch's suite: {', '.join(Path(p).name for p in missing)}")
    sink = plugin.Sink(list(targets))
    plugin.SINK = sink
    with tempfile.TemporaryDirectory(prefix="emlkit-opsuite-") as tmp:
        ini = Path(tmp) / "pytest.ini"   # not the repo's pytest.ini (its --strict-markers, testpaths)
        # importlib mode + namespace packages: the test modules import under their own names
        # (executorch.backends.test.suite.operators.test_relu; executorch/backends/test has no __init__.py),
        # so the models pickled from them load anywhere ExecuTorch is installed.
        ini.write_text("[pytest]\nconsider_namespace_packages = true\n")
        args = [*paths, "--noconftest", "-p", "emlkit.opsuite.plugin", "-c", str(ini), "--rootdir", str(opdir),
                "-p", "no:cacheprovider", "--assert=plain", "--import-mode=importlib", "-q", "-W", "ignore"]
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = pytest.main(args)
        finally:
            plugin.SINK = None
    if int(code) not in (0, 1) or sink.errors:  # 1: some test bodies failed (recorded in sink.outcomes)
        why = sink.errors[0] if sink.errors else (out.getvalue().strip().splitlines() or ["no output"])[-1]
        raise AotError(f"collecting ExecuTorch's operator suite failed (pytest exit {int(code)}): {why}", EXIT_INTERNAL)
    return sink


def recapture(file: str, test: str, subtest: int) -> tuple[object, tuple[object, ...]]:
    """One case's model and inputs, captured again (for case files that cannot hold a pickled model)."""
    for r in capture(["recapture"], [file]).records:
        if (r.test, r.subtest) == (test, subtest) and r.model is not None:
            return r.model, r.inputs
    raise AotError(f"ExecuTorch's operator suite has no case {file}::{test}#{subtest} (any more)")
