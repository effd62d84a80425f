"""int8 LSTM (emlkit::lstm, issue 30) on the device under QEMU: a model with a batch_first LSTM over a batch of
two and a sequence-first LSTM feeding a Linear compiles without --allow-float (no float op), and the device's
outputs equal the host reference bit for bit on cortex-m55 (MVE build), cortex-m4 (DSP build) and cortex-m0plus
(Armv6-M, the micro:bit)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from model_files import module_source

_MODEL = module_source("""
    self.a = nn.LSTM(6, 12, batch_first=True)
    self.b = nn.LSTM(6, 9)
    self.fc = nn.Linear(9, 3)""", """
    ya, _ = self.a(x)
    yb, _ = self.b(x.transpose(0, 1))
    return ya, self.fc(yb[-1])""", "torch.randn(2, 7, 6)", name="TwoLstms", seed=5)


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4", "cortex-m0plus"])
def test_lstm_int8_bit_exact_on_qemu(tmp_path: Path, target: str) -> None:
    (tmp_path / "two_lstms.py").write_text(_MODEL)
    proc = subprocess.run([sys.executable, "-m", "emlkit", "run", str(tmp_path / "two_lstms.py"), "--target", target,
                           "-o", str(tmp_path / "o")], cwd=tmp_path, env=dict(os.environ), capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    diffs = re.search(r"max diff vs expected\s+(.*?)\n\s*SNR", proc.stdout, re.S)
    assert "PASS" in proc.stdout and diffs, proc.stdout[-2000:]
    cells = " ".join(diffs.group(1).split()).split(",")
    assert [d.split()[0] for d in cells] == ["0"] * 2, diffs.group(1)
    (report,) = (tmp_path / "o").glob("*.json")
    rep = json.loads(report.read_text())
    assert rep["ops"].get("emlkit::lstm") == 2, rep["ops"]
    assert not any(op.startswith("aten::") and "copy" not in op and "view" not in op for op in rep["ops"]), rep["ops"]
