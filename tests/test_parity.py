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
    assert len(line.strip("|").split("|")) == 7
    assert 0.0 < row["input_dependent_pct"] <= 100.0  # mul: x * y varies with its inputs
    assert "1 of 1 models" in err and "within 1.0 dB both ways" in err


def test_held_out_inputs_and_bad_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert parity.main(["--models", "mul", "--samples", "2", "--held-out", "3"]) == 0
    row = json.loads(capsys.readouterr().err.splitlines()[0])
    assert 20.0 < row[parity.CPU] < 80.0 and 0.0 < row["input_dependent_pct"] <= 100.0
    for bad in (["--samples", "0"], ["--held-out", "-1"]):
        with pytest.raises(SystemExit) as exc:
            parity.main(["--models", "mul", *bad])
        assert exc.value.code == 2
    assert "--samples must be at least 1" in capsys.readouterr().err
