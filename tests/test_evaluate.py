"""`emlkit evaluate`: accuracy of the float model, the int8 host reference and the device (every sample in one
firmware run) on a data set; the digits CNN trained on scikit-learn's 8x8 digits; bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from emlkit.cli import main
from emlkit.errors import EXIT_USAGE, AotError
from emlkit.evaluate import load_data

REPO = Path(__file__).resolve().parents[1]
DIGITS = REPO / "emlkit" / "models" / "digits_cnn.py"
EXAMPLE = (torch.zeros(1, 64),)   # the zoo's mlp


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_load_data_labels_limit_and_task(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", x=np.random.rand(6, 64).astype(np.float32), y=np.arange(6), t=np.ones(6))
    d = load_data(tmp_path / "d.npz", None, 4, EXAMPLE)
    assert len(d.samples) == 4 and d.samples[0][0].shape == (1, 64)
    assert d.task == "classification" and d.label_key == "y" and list(d.labels) == [0, 1, 2, 3]
    assert load_data(tmp_path / "d.npz", "t", None, EXAMPLE).task == "regression"
    np.savez(tmp_path / "n.npz", x=np.zeros((2, 1, 64), np.float32))
    assert load_data(tmp_path / "n.npz", None, None, EXAMPLE).task == "none"


@pytest.mark.parametrize("arrays, extra, words", [
    (None, [], ["data file not found"]),
    ({"x": np.zeros((3, 32), np.float32)}, [], ["has shape 32", "float32 1x64"]),
    ({"inputs": np.zeros((3, 64), np.float32)}, [], ["no array 'x'", "np.savez"]),
    ({"x": np.zeros((3, 64), np.float32), "y": np.zeros(3, np.int64)}, ["--labels", "lbl"], ["no labels array 'lbl'"]),
    ({"x": np.zeros((3, 64), np.float32), "y": np.zeros(2, np.int64)}, [], ["2 entries for 3 samples"]),
    ({"x": np.zeros((3, 64), np.float32)}, ["--limit", "0"], ["positive number"]),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], arrays, extra,
                                      words) -> None:
    data = tmp_path / "d.npz"
    if arrays is not None:
        np.savez(data, **arrays)
    code = main(["evaluate", "mlp", "--target", "cortex-m55", "--data", str(data), "-o", str(tmp_path / "o"), *extra])
    line = _error_line(capsys)
    assert code == EXIT_USAGE, line
    assert all(w in line for w in words), line


def test_load_data_not_an_npz(tmp_path: Path) -> None:
    (tmp_path / "d.npz").write_text("text")
    with pytest.raises(AotError, match="not a numpy .npz file") as exc:
        load_data(tmp_path / "d.npz", None, None, EXAMPLE)
    assert exc.value.exit_code == EXIT_USAGE


def test_digits_split_is_deterministic_held_out(tmp_path: Path) -> None:
    from emlkit.models import digits_cnn

    out = digits_cnn.write_split(tmp_path / "s.npz")
    with np.load(out) as z:
        x, y = z["x"], z["y"]
    assert x.shape == (359, 1, 8, 8) and x.dtype == np.float32 and y.dtype == np.int64
    assert 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    x_train = digits_cnn.digits_split()[0]
    train_rows = {r.tobytes() for r in x_train}
    assert sum(r.tobytes() in train_rows for r in x) < 10  # held out (a few digits images repeat in the set)
    with torch.no_grad():
        acc = float((digits_cnn.ModelUnderTest(torch.from_numpy(x)).argmax(1).numpy() == y).mean())
    assert acc > 0.95


@pytest.mark.slow
def test_digits_on_cortex_m55(emlkit_cli, tmp_path: Path) -> None:
    """The whole held-out split in one QEMU run: the device agrees with the int8 reference on every sample and
    its top-1 is within 1 point of the float model's."""
    from emlkit.models import digits_cnn

    data = digits_cnn.write_split(tmp_path / "test.npz")
    calib = digits_cnn.write_calibration(tmp_path / "calib.npz")
    r = emlkit_cli(["evaluate", str(DIGITS), "--target", "cortex-m55", "--data", str(data), "--calibration", str(calib),
                    "-o", str(tmp_path / "out")])
    assert r.returncode == 0, r.stderr[-2000:]
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert "top-1" in r.stdout and "device vs reference" in r.stdout  # the table
    assert rec["samples"] == 359 and rec["device"]["cases"] == 359 and rec["task"] == "classification"
    assert rec["agreement"]["argmax"] == 1.0 and rec["agreement"]["max_steps"] == 0
    assert rec["device"]["top1"] == rec["reference"]["top1"]
    assert abs(rec["device"]["top1"] - rec["float"]["top1"]) <= 0.01
    assert rec["calibration"] == {"source": str(calib), "kind": "npz", "samples": 256}


def test_device_bounds_when_not_bit_exact() -> None:
    """A device K steps off somewhere: samples whose reference lead is more than 2K steps keep their argmax."""
    from emlkit.evaluate import EvalData, device_bounds

    ref = [np.array([[0.0, 1.0, 0.1]]), np.array([[0.5, 0.45, 0.0]]), np.array([[0.9, 0.0, 0.0]])]
    data = EvalData([], np.array([1, 1, 0]), "y", "classification")   # sample 1: the reference is wrong
    agree, top1 = device_bounds(ref, data, 0.01, 3)   # leads 90, 5 and 90 steps against 2 x 3
    assert agree == pytest.approx(2 / 3) and top1 == pytest.approx([2 / 3, 1.0])
    assert device_bounds(ref, data, 0.01, None) == (0.0, [0.0, 1.0])   # unknown steps: nothing is sure
