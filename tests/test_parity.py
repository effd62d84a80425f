"""scripts/parity.py: one zoo model scored on cortex-m55 and ethos-u55-128, programs and quantized models."""

from __future__ import annotations

import json

import pytest

from scripts import parity


def test_parity_row_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert parity.main(["--models", "mul", "--samples", "2", "--markdown"]) == 0
    out, err = capsys.readouterr()
    row = json.loads(err.splitlines()[0])
    for t in (parity.CPU, parity.NPU):
        # Both programs and both quantized models are scored; a quantized model is the program's ideal.
        assert 20.0 < row[t] < 80.0 and 20.0 < row[f"{t} quantized model"] < 80.0
    assert row["gap_db"] == pytest.approx(row[parity.NPU] - row[parity.CPU])
    line = [ln for ln in out.splitlines() if ln.startswith("| mul |")][0]
    assert len(line.strip("|").split("|")) == 6
    assert "1 of 1 models" in err and "within 1.0 dB both ways" in err
