"""`--calibration` from real data: a folder of .npy/.pt samples, an .npz (sample axis first), bad shapes and
dtypes (one line, exit status 2), the cache key over a folder's files, the compile report's entry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from emlkit.errors import EXIT_USAGE, AotError
from emlkit.load import calibration_digest, calibration_set, load_calibration

ONE = (torch.zeros(1, 1, 8, 8),)
TWO = (torch.zeros(1, 4), torch.zeros(1, 3))


def test_folder_of_npy_and_pt_sorted_by_name(tmp_path: Path) -> None:
    np.save(tmp_path / "b.npy", np.full((1, 1, 8, 8), 2.0, np.float32))
    torch.save(torch.full((1, 8, 8), 1.0), tmp_path / "a.pt")   # batch dim of 1 left out
    np.save(tmp_path / "c.npy", np.full((1, 1, 8, 8), 3, np.int64))  # integer pixels into a float input
    (tmp_path / "notes.txt").write_text("ignored")
    cs = calibration_set(str(tmp_path), ONE)
    assert cs.kind == "folder" and len(cs.samples) == 3
    assert [float(s[0].flatten()[0]) for s in cs.samples] == [1.0, 2.0, 3.0]
    assert all(s[0].shape == (1, 1, 8, 8) and s[0].dtype == torch.float32 for s in cs.samples)
    assert cs.report_entry() == {"source": str(tmp_path), "kind": "folder", "samples": 3}


def test_folder_multi_input_pt_tuples(tmp_path: Path) -> None:
    for i in range(2):
        torch.save((torch.randn(1, 4), torch.randn(1, 3)), tmp_path / f"s{i}.pt")
    samples = load_calibration(str(tmp_path), TWO)
    assert len(samples) == 2 and [t.shape for t in samples[1]] == [(1, 4), (1, 3)]


def test_npz_one_and_several_inputs(tmp_path: Path) -> None:
    np.savez(tmp_path / "one.npz", x=np.random.rand(5, 1, 8, 8).astype(np.float32))
    assert len(load_calibration(str(tmp_path / "one.npz"), ONE)) == 5
    # several inputs: arrays in sorted key order (a feeds input 0, b input 1)
    np.savez(tmp_path / "two.npz", b=np.ones((3, 1, 3), np.float32), a=np.zeros((3, 1, 4), np.float32))
    cs = calibration_set(str(tmp_path / "two.npz"), TWO)
    assert cs.kind == "npz" and len(cs.samples) == 3
    assert float(cs.samples[0][0].sum()) == 0.0 and float(cs.samples[0][1].sum()) == 3.0
    assert calibration_set(str(tmp_path / "two.npz"), TWO).report_entry()["samples"] == 3
    assert calibration_set(None, TWO).report_entry() == {"source": None, "kind": "example", "samples": 1}


@pytest.mark.parametrize("make, words", [
    (lambda d: np.savez(d / "c.npz", x=np.zeros((4, 1, 7, 8), np.float32)), ["shape 1x7x8", "float32 1x1x8x8"]),
    (lambda d: np.savez(d / "c.npz", x=np.zeros((4, 1, 8, 8)), y=np.zeros(4)), ["2 array(s)", "one array per input"]),
    (lambda d: np.savez(d / "c.npz", x=np.zeros((4, 1, 8, 8), np.complex64)), ["complex64", "save float32"]),
    (lambda d: (d / "c.npz").write_bytes(b"not a zip"), ["not a numpy .npz", "numpy.savez"]),
])
def test_bad_npz_is_one_line(tmp_path: Path, make, words) -> None:
    make(tmp_path)
    with pytest.raises(AotError) as exc:
        load_calibration(str(tmp_path / "c.npz"), ONE)
    msg = str(exc.value)
    assert exc.value.exit_code == EXIT_USAGE and "\n" not in msg
    assert all(w in msg for w in words), msg


def test_bad_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(AotError, match="has no .npy or .pt files"):
        load_calibration(str(tmp_path), ONE)
    np.save(tmp_path / "a.npy", np.zeros((1, 1, 8, 8), np.float32))
    torch.save((torch.zeros(1, 1, 8, 8), torch.zeros(1)), tmp_path / "b.pt")
    with pytest.raises(AotError, match=r"b\.pt has 2 input\(s\), the model takes 1"):
        load_calibration(str(tmp_path), ONE)
    with pytest.raises(AotError, match="calibration file not found"):
        load_calibration(str(tmp_path / "missing.npz"), ONE)


def test_digest_covers_a_folders_files(tmp_path: Path) -> None:
    assert calibration_digest(None) == "-"
    np.save(tmp_path / "a.npy", np.zeros((1, 1, 8, 8), np.float32))
    d1 = calibration_digest(str(tmp_path))
    np.save(tmp_path / "a.npy", np.ones((1, 1, 8, 8), np.float32))
    d2 = calibration_digest(str(tmp_path))
    np.save(tmp_path / "b.npy", np.ones((1, 1, 8, 8), np.float32))
    d3 = calibration_digest(str(tmp_path))
    (tmp_path / "b.npy").rename(tmp_path / "c.npy")
    assert len({d1, d2, d3, calibration_digest(str(tmp_path))}) == 4
    (tmp_path / "notes.txt").write_text("not a sample")
    assert calibration_digest(str(tmp_path)) == calibration_digest(str(tmp_path))


def test_compile_with_bad_calibration_shape_one_line_exit_2(emlkit_cli, tmp_path: Path) -> None:
    """Through the command: one `error:` line, status 2, no traceback (mlp takes 1 x 64)."""
    np.savez(tmp_path / "c.npz", x=np.zeros((4, 32), np.float32))
    r = emlkit_cli(["compile", "mlp", "--target", "cortex-m55", "-o", str(tmp_path / "out"), "--calibration",
                    str(tmp_path / "c.npz")])
    assert r.returncode == EXIT_USAGE, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "has shape 32, the model takes float32 1x64" in lines[0]
