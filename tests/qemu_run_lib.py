"""Shared by the whole-model QEMU tests: `emlkit run` on a model source, the bit-exact check of its outputs, the
operators it ran and each output's SNR against the float model."""
from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from emlkit.verify import COMPARE_ON_CODES, DATA_MOVEMENT, LOGIC_ON_BOOLS


def snr_db(got: np.ndarray, want: np.ndarray) -> float:
    err = float(np.mean((got.astype(np.float64) - want) ** 2))
    return float("inf") if err == 0 else 10 * np.log10(float(np.mean(want ** 2)) / err)


def run_bit_exact(tmp_path: Path, name: str, source: str, target: str, board: str | None, outputs: int,
                  timeout: int) -> tuple[dict[str, int], list[float]]:
    """Run SOURCE (saved as NAME.py) on TARGET's QEMU (BOARD if given); assert it passes with OUTPUTS outputs, each
    with max diff 0, and that no arithmetic aten op ran. Returns the report's op counts and each output's SNR (dB)
    against the float model."""
    model = tmp_path / f"{name}.py"
    model.write_text(source)
    cmd = [sys.executable, "-m", "emlkit", "run", str(model), "--target", target, "-o", str(tmp_path / "o"),
           "--save-outputs", str(tmp_path / "saved")] + (["--board", board] if board else [])
    proc = subprocess.run(cmd, cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    diffs = re.search(r"max diff vs expected\s+(.*?)\n\s*SNR", proc.stdout, re.S)  # the table wraps long cells
    assert "PASS" in proc.stdout and diffs, proc.stdout[-2000:]
    cells = " ".join(diffs.group(1).split()).split(",")
    assert [d.split()[0] for d in cells] == ["0"] * outputs, diffs.group(1)
    (report,) = (tmp_path / "o").glob("*.json")
    ops: dict[str, int] = json.loads(report.read_text())["ops"]
    # int8 all through (a comparison of codes with a number is exact: compare_on_codes.py, and so is logic on bools;
    # the verifier checks their operands)
    assert not any(op.startswith("aten::") and op not in DATA_MOVEMENT | COMPARE_ON_CODES | LOGIC_ON_BOOLS
                   for op in ops), ops
    ns = runpy.run_path(str(model))
    with torch.no_grad():
        want = ns["ModelUnderTest"](*ns["ModelInputs"])
    want = (want,) if isinstance(want, torch.Tensor) else want
    snrs = [snr_db(np.load(tmp_path / "saved" / f"output_{i}.npy"), w.numpy().astype(np.float64))
            for i, w in enumerate(want)]
    assert len(snrs) == outputs, snrs
    return ops, snrs
