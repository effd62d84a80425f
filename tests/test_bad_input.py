"""The bad-input campaign: every class of mistake a user can make ends with one `error:` line naming the
problem and the fix, the documented exit status (README.md "Exit statuses"), no traceback, and nothing lost.
(tests/test_compile_errors.py covers the model-file and model-content classes of `compile`; this file the rest.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_in_process import CliResult

ROOT = Path(__file__).resolve().parent.parent


def _aot(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "emlkit", *args], cwd=cwd, env=e, capture_output=True, text=True,
                          timeout=timeout)


def _one_line(p: subprocess.CompletedProcess[str] | CliResult, status: int) -> str:
    assert p.returncode == status, (p.returncode, p.stdout[-1500:], p.stderr[-1500:])
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr[-2000:]
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, p.stderr[-2000:]
    return lines[0]


def test_unreadable_model_file(emlkit_cli, tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("import torch\n")
    f.chmod(0)
    if os.access(f, os.R_OK):  # root reads anything: use a directory named like a model instead
        f.chmod(0o644)
        f.unlink()
        f.mkdir()
    line = _one_line(emlkit_cli(["compile", str(f), "--target", "cortex-m55", "-o", str(tmp_path / "o")], tmp_path), 2)
    assert "m.py" in line


def test_file_that_is_not_python(emlkit_cli, tmp_path: Path) -> None:
    f = tmp_path / "weights.py"
    f.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    line = _one_line(emlkit_cli(["compile", str(f), "--target", "cortex-m55"], tmp_path), 2)
    assert "failed to import" in line


def test_model_inputs_of_the_wrong_shape(emlkit_cli, tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("import torch\nModelUnderTest = torch.nn.Linear(8, 4)\nModelInputs = (torch.randn(1, 5),)\n")
    line = _one_line(emlkit_cli(["compile", str(f), "--target", "cortex-m55", "-o", str(tmp_path / "o")], tmp_path), 2)
    assert "ModelInputs" in line and "shape" in line


def test_model_inputs_of_the_wrong_dtype(emlkit_cli, tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("import torch\nModelUnderTest = torch.nn.Linear(8, 4)\nModelInputs = (torch.ones(1, 8, dtype=torch.int64),)\n")
    line = _one_line(emlkit_cli(["compile", str(f), "--target", "cortex-m55", "-o", str(tmp_path / "o")], tmp_path), 2)
    assert "ModelInputs" in line and "int64" in line


def test_unknown_board(emlkit_cli, tmp_path: Path) -> None:
    line = _one_line(emlkit_cli(["run", "add", "--target", "cortex-m55", "--board", "mps9", "-o", str(tmp_path)], tmp_path), 2)
    assert "unknown board 'mps9'" in line and "corstone-300" in line


def test_target_board_mismatch(emlkit_cli, tmp_path: Path) -> None:
    line = _one_line(emlkit_cli(["run", "add", "--target", "ethos-u85-256", "--board", "corstone-300", "-o", str(tmp_path)],
                          tmp_path), 2)
    assert "not an ethos-u85" in line and "--board corstone-320" in line


def test_unwritable_output_folder(emlkit_cli, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = _one_line(emlkit_cli(["compile", "add", "--target", "cortex-m55", "-o", str(blocker / "out")], tmp_path), 2)
    assert "output folder" in line and str(blocker) in line


def test_truncated_and_corrupt_bundled_programs(compiled, emlkit_cli, tmp_path: Path) -> None:
    good = compiled("add", "cortex-m55").bpte.read_bytes()
    cases = {"truncated.bpte": good[: len(good) // 3], "garbage.bpte": b"\x00" * 64,
             "flipped.bpte": good[:8] + bytes(b ^ 0xFF for b in good[8:200]) + good[200:]}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        line = _one_line(emlkit_cli(["run", str(tmp_path / name), "--target", "cortex-m55"], tmp_path), 2)
        assert name in line and ("bundled program" in line), line
    (tmp_path / "p.pte").write_bytes(compiled("add", "cortex-m55").pte.read_bytes())
    line = _one_line(emlkit_cli(["run", str(tmp_path / "p.pte"), "--target", "cortex-m55"], tmp_path), 2)
    assert ".bpte" in line


@pytest.mark.slow
def test_program_for_another_npu(compiled, emlkit_cli, tmp_path: Path) -> None:
    """An Ethos-U85 program run as an Ethos-U55 one: the firmware refuses it by name (device error, exit 7)."""
    bpte = tmp_path / "u85.bpte"
    bpte.write_bytes(compiled("conv_relu", "ethos-u85-256").bpte.read_bytes())
    line = _one_line(emlkit_cli(["run", str(bpte), "--target", "ethos-u55-128"], tmp_path), 7)
    assert "npu_config" in line and "Ethos-U85-256" in line and "--target ethos-u55-128" in line


def test_prebuilt_bundle_runs(compiled, emlkit_cli, tmp_path: Path) -> None:
    bpte = tmp_path / "add.bpte"
    bpte.write_bytes(compiled("add", "cortex-m55").bpte.read_bytes())
    p = emlkit_cli(["run", str(bpte), "--target", "cortex-m55"], tmp_path)
    assert p.returncode == 0 and "PASS" in p.stdout, p.stderr[-2000:]


def test_qemu_missing(tmp_path: Path) -> None:
    """No qemu-system-arm on PATH: one line naming the package, exit 5 (a tool is missing)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("arm-none-eabi-gcc", "arm-none-eabi-size", "arm-none-eabi-nm", "cmake"):
        if shutil.which(tool):
            (bindir / tool).symlink_to(shutil.which(tool))
    env = {"PATH": f"{bindir}:{Path(sys.executable).parent}"}
    line = _one_line(_aot(["run", "add", "--target", "cortex-m55", "--sim", "qemu", "-o", str(tmp_path / "o")], tmp_path,
                          env), 5)
    assert "qemu-system-arm not found" in line and "apt-get install qemu-system-arm" in line


def test_damaged_program_for_a_program_image(tmp_path: Path) -> None:
    """emlkit.deploy.program_image on a damaged program (no build needed: it is refused while reading): one line that
    names the file, usage status 2."""
    for name, data in (("garbage.pte", b"ET12" + bytes(range(256)) * 2), ("empty.bpte", b"")):
        f = tmp_path / name
        f.write_bytes(data)
        p = subprocess.run([sys.executable, "-m", "emlkit.deploy.program_image", str(f)], cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
        line = _one_line(p, 2)
        assert line.startswith(f"error: {f}: ") and "does not parse" in line, line
