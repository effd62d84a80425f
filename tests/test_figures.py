"""scripts/figures.py --zoo: the issue-18 zoo's per-target table from a suite's results.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _row(model: str, target: str, status: str = "PASS", **kw: object) -> dict:
    return {"model": model, "target": target, "variant": "main", "status": status, "board": "b",
            "asked_board": None, "count": 1000, "snr_db": 40.04, **kw}


def test_zoo_table(tmp_path: Path) -> None:
    rows = [_row("gru_kws", "cortex-m55"), _row("gru_kws", "ethos-u55-128", vela_npu_only_cycles_estimate=9685),
            _row("gru_kws", "ethos-u85-256", "FAIL"), _row("gru_kws", "cortex-m4", count=186160),
            _row("gru_kws", "cortex-m3", "SKIP"), _row("mlp", "cortex-m55")]  # mlp: not an issue-18 model
    res = tmp_path / "results.json"
    res.write_text(json.dumps(rows))
    out = subprocess.run([sys.executable, "scripts/figures.py", str(res), "--zoo"], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1]).stdout.splitlines()
    assert out[0].startswith("| model | cortex-m55 | ethos-u55-128 | ethos-u85-256")
    assert out[2:] == ["| gru_kws | PASS, 1,000 instr., 40.0 dB | PASS, 1,000 instr., 9,685 NPU cycles, 40.0 dB | FAIL "
                       "| M4 186,160 |"]


def test_bad_results_file_is_one_line(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    wrong_shape = tmp_path / "wrong.json"
    wrong_shape.write_text(json.dumps({"model": "x"}))
    for path in (tmp_path / "missing.json", bad_json, wrong_shape):
        p = subprocess.run([sys.executable, "scripts/figures.py", str(path), "--zoo"], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parents[1])
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert "results.json" in p.stderr.strip().splitlines()[-1]
