"""scripts/bench_cmsis_nn.py without CMSIS-NN: the cores it knows, its usage errors and its report arithmetic
(per-class ratios, the worst layer, the average-pool rounding split). The measurement itself needs a CMSIS-NN
checkout and is run by hand (docs/measurements.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from script_modules import load_module

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_cmsis_nn.py"


def _script() -> Any:
    return load_module(SCRIPT, register=True)


def test_every_core_has_its_board_and_cmsis_build() -> None:
    b = _script()
    assert set(b.CORES) == {"cortex-m55", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m3", "cortex-m0plus"}
    variant = {core: spec[3] for core, spec in b.CORES.items()}
    assert variant == {"cortex-m55": "mve", "cortex-m4": "dsp", "cortex-m7": "dsp", "cortex-m33": "dsp",
                       "cortex-m3": "c", "cortex-m0plus": "c"}
    boards = {core: spec[1] for core, spec in b.CORES.items()}
    assert boards["cortex-m7"] == "mps2-an500" and boards["cortex-m0plus"] == "an385-m0plus"
    for _, board, _, _ in b.CORES.values():
        assert (ROOT / "boards" / board / "board.toml").is_file()
    # the benchmark image's CMake accepts exactly the variants the script passes
    cmake = (ROOT / "scripts" / "cmsis_bench" / "CMakeLists.txt").read_text()
    for v in set(variant.values()):
        assert f'CMSIS_NN_VARIANT STREQUAL "{v}"' in cmake


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = _script()
    assert b.main(["--core", "all"]) == 2
    assert "no --cmsis-nn checkout given" in capsys.readouterr().err
    assert b.main(["--cmsis-nn", str(tmp_path), "--core", "cortex-m0plus"]) == 2
    assert "is not a CMSIS-NN checkout" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        b.main(["--cmsis-nn", str(tmp_path), "--core", "cortex-m1"])


def test_report_classes_worst_layer_and_rounding_split(capsys: pytest.CaptureFixture[str]) -> None:
    b = _script()
    blob = b.Blob()
    blob.layers = [b.Layer(1, 1, "conv 1x1/1 4x4x8->4x4x8"), b.Layer(2, 2, "dw 3x3/1 4x4x8->4x4x8"),
                   b.Layer(3, 1, "conv 3x3/1 4x4x8->4x4x8"), b.Layer(4, 5, "avgpool 2x2 4x4x8")]
    rows = [{"ours": 90, "cmsis": 100, "equal": True, "cmsis_status": 0},
            {"ours": 120, "cmsis": 100, "equal": True, "cmsis_status": 0},
            {"ours": 50, "cmsis": 100, "equal": True, "cmsis_status": 0},
            {"ours": 30, "cmsis": 10, "equal": False, "cmsis_status": 0, "tie_diffs": 3, "other_diffs": 0}]
    rep = b.report("m", blob, rows)
    assert rep["classes"]["conv"] == {"ours": 140, "cmsis_nn": 200, "layers": 2, "bit_identical": 2, "ratio": 0.7}
    assert rep["classes"]["depthwise"]["ratio"] == 1.2
    assert rep["total"] == {"ours": 290, "cmsis_nn": 310, "ratio": 0.935, "layers": 4, "bit_identical": 3}
    assert rep["worst"]["instruction"] == 4 and rep["worst"]["ratio"] == 3.0
    rep["core"] = "cortex-m3"
    b.print_report(rep, "mps2-an385", "CMSIS-NN pure C", verbose=False)
    b.print_summary([rep])
    out = capsys.readouterr().out
    assert "DIFFERENT only at 3 half-way means" in out
    assert "#1 " not in out                      # at or below 1.0: listed only with --verbose-layers
    assert "cortex-m3      m" in out and "3/4" in out and "3.0x avgpool 2x2 4x4x8" in out
    # a difference away from the ties is reported as a plain DIFFERENT
    rows[3]["other_diffs"] = 1
    b.print_report(b.report("m", blob, rows) | {"core": "cortex-m3"}, "mps2-an385", "CMSIS-NN pure C", verbose=False)
    out = capsys.readouterr().out
    assert "DIFFERENT" in out and "half-way" not in out
