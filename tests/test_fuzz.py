"""A short seeded libFuzzer pass over the firmware's parsers (ASan + UBSan), from the committed corpus in
tests/fuzz_seeds/: the loader (programs, bundles, delegates) and the Ethos-U delegate data. Long runs:
`scripts/bench_fuzz.py --target loader|ethosu --seconds N`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("clang") is None, reason="clang missing (./scripts/setup.sh installs it)")
@pytest.mark.parametrize("target", ["loader", "ethosu"])
def test_seeded_fuzz_pass(target: str) -> None:
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_fuzz.py"), "--target", target, "--seconds", "15",
                        "--seed", "1"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                       text=True, timeout=900)
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["crashes"] == 0 and p.returncode == 0, p.stderr[-3000:]
    assert report["execs"] > 10_000 and report["target"] == target
