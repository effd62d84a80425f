"""No run leaves files in the temp directory (success, failure, timeout, Ctrl-C), and an interrupted compile
never leaves a program that a later run would trust."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _aot(args: list[str], tmp: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    return subprocess.run([sys.executable, "-m", "emlkit", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def empty_tmp(tmp_path: Path) -> Path:
    d = tmp_path / "tmp"
    d.mkdir()
    return d


@pytest.mark.slow
@pytest.mark.parametrize("target", ["cortex-m55", "ethos-u55-128"])
def test_run_leaves_tmp_empty(tmp_path: Path, empty_tmp: Path, target: str) -> None:
    out = tmp_path / "o"
    p = _aot(["run", "conv_relu", "--target", target, "-o", str(out), "--save-outputs", str(tmp_path / "npy")], empty_tmp)
    assert p.returncode == 0, p.stderr[-2000:]
    assert list(empty_tmp.iterdir()) == []
    assert (tmp_path / "npy" / "output_0.npy").is_file()
    # a simulator timeout (exit 3) leaves nothing either
    p = _aot(["run", "conv_relu", "--target", target, "-o", str(out), "--timeout", "0.01"], empty_tmp)
    assert p.returncode == 3 and list(empty_tmp.iterdir()) == []


def _qemu_children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid,ppid,comm"], capture_output=True, text=True).stdout.split("\n")[1:]
    rows = [r.split() for r in out if r.strip()]
    return [int(p) for p, pp, c in rows if c.startswith("qemu-system") and int(pp) == pid]


@pytest.mark.slow
def test_ctrl_c_during_run_kills_the_simulator(tmp_path: Path, empty_tmp: Path) -> None:
    """SIGINT while QEMU runs: QEMU is killed, the temp folder is removed, the cached program is intact."""
    out = tmp_path / "o"
    assert _aot(["compile", "mobilenet_v2", "--target", "cortex-m55", "-o", str(out)], empty_tmp).returncode == 0
    bpte = out / "mobilenet_v2_cortex-m55.bpte"
    before = bpte.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(empty_tmp)}
    # the portable-kernel image takes seconds under QEMU: time to interrupt it
    proc = subprocess.Popen([sys.executable, "-m", "emlkit", "run", "mobilenet_v2", "--target", "cortex-m55", "-o", str(out),
                             "--kernels", "portable"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not _qemu_children(proc.pid):
        time.sleep(0.2)
    assert _qemu_children(proc.pid), "QEMU never started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "Traceback" not in err
    time.sleep(0.5)
    assert _qemu_children(proc.pid) == []
    assert list(empty_tmp.iterdir()) == []
    assert bpte.read_bytes() == before


def test_atomic_write_leaves_old_file_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from emlkit import emit

    f = tmp_path / "p.bpte"
    emit.atomic_write(f, b"old")

    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt  # Ctrl-C right before the rename

    monkeypatch.setattr(emit.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        emit.atomic_write(f, b"new")
    assert f.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["p.bpte"]  # the half-written temp file is gone


@pytest.mark.slow
def test_ctrl_c_during_compile_keeps_the_previous_program(tmp_path: Path, empty_tmp: Path) -> None:
    out = tmp_path / "o"
    t0 = time.monotonic()
    assert _aot(["compile", "dw_separable", "--target", "ethos-u55-128", "-o", str(out)], empty_tmp).returncode == 0
    first = time.monotonic() - t0
    before = {p.name: p.read_bytes() for p in out.glob("dw_separable_ethos-u55-128.*") if p.is_file()}
    assert len(before) == 4  # .pte, .bpte, .etrecord, .json
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(empty_tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "emlkit", "compile", "dw_separable", "--target", "ethos-u55-128",
                             "--no-lut-fusion", "-o", str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # Three quarters into the time the first compile took (imports are the first ~half): inside quantization or
    # Vela. A fixed 8 s sleep missed it once the machine was idle (the compile had finished).
    time.sleep(0.75 * first)
    assert proc.poll() is None, f"the compile ended within {0.75 * first:.1f} s, before the interrupt"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "error: interrupted" in err and "Traceback" not in err, err[-2000:]
    after = {p.name: p.read_bytes() for p in out.glob("dw_separable_ethos-u55-128.*") if p.is_file()}
    assert after == before
    assert list(empty_tmp.iterdir()) == []
