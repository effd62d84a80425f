"""`python -m emlkit run`: compile + build + execute + check, on the host and on corstone-300 under QEMU."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emlkit import models

from model_files import module_source

ROOT = Path(__file__).resolve().parent.parent


def _aot(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "emlkit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _run_outcome(compiled, model: str, board: str, kernels: str = "mve", timeout: float = 600):
    from emlkit.run import execute

    return execute(compiled(model, "cortex-m55"), board, "qemu", timeout, kernels, None)


def test_run_host_cli_pass_and_save_outputs(compiled, emlkit_cli, tmp_path: Path) -> None:
    # -o the tests' program cache: the command reuses the program other tests compiled (same options, same key)
    out = compiled("conv_relu", "cortex-m55").pte.parent
    proc = emlkit_cli(["run", "conv_relu", "--target", "cortex-m55", "--board", "host", "-o", str(out),
                       "--save-outputs", str(tmp_path / "npy")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "PASS" in proc.stdout and "0 steps" in proc.stdout
    out = np.load(tmp_path / "npy" / "output_0.npy")
    assert out.dtype == np.float32 and out.shape == (1, 32, 8, 8)


def test_run_qemu_cli_pass(compiled, emlkit_cli, tmp_path: Path) -> None:
    out = compiled("add", "cortex-m55").pte.parent  # the cached program, as above
    proc = emlkit_cli(["run", "add", "--target", "cortex-m55", "--board", "corstone-300", "-o", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "PASS" in proc.stdout and "instructions" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("model", list(models.ZOO))
def test_zoo_passes_on_corstone300_qemu(compiled, model: str) -> None:
    o = _run_outcome(compiled, model, "corstone-300")
    assert o.status == "PASS", o.reason
    r = o.result
    assert r.unit == "instructions" and r.total > 0
    assert all(x.max_steps in (0, None) and (x.max_abs or 0) == 0 for x in r.outputs)
    assert r.stack_bytes and r.stack_bytes > 0


@pytest.mark.slow
@pytest.mark.parametrize("model", ["conv_relu", "dw_separable", "mlp", "lut_activations", "softmax", "pool"])
def test_portable_kernels_match_mve_on_device(compiled, model: str) -> None:
    """Both images reproduce the bundled outputs exactly, so MVE == portable bit for bit."""
    mve = _run_outcome(compiled, model, "corstone-300", "mve")
    port = _run_outcome(compiled, model, "corstone-300", "portable")
    assert mve.status == "PASS" and port.status == "PASS", (mve.reason, port.reason)


def _wrong_expected(bpte: Path, out: Path) -> None:
    from executorch.devtools.bundled_program.serialize import (
        _bundled_program_schema_to_flatbuffer,
        deserialize_from_flatbuffer_to_bundled_program,
    )

    bp = deserialize_from_flatbuffer_to_bundled_program(bpte.read_bytes())
    t = bp.method_test_suites[0].test_cases[0].expected_outputs[0].val
    data = bytearray(t.data)
    (v,) = struct.unpack_from("<f", data, 0)
    struct.pack_into("<f", data, 0, v + 1.0)
    t.data = bytes(data)
    out.write_bytes(_bundled_program_schema_to_flatbuffer(bp))


@pytest.mark.parametrize("board", ["host", "corstone-300"])
def test_wrong_expected_output_fails_with_exit_1(compiled, tmp_path: Path, board: str) -> None:
    from emlkit.run import execute

    cres = compiled("add", "cortex-m55")
    bad = tmp_path / "bad.bpte"
    _wrong_expected(cres.bpte, bad)
    cres.bpte = bad
    o = execute(cres, board, "qemu", 120, "mve", None)
    assert o.status == "FAIL" and o.exit_code == 1, o.reason
    assert o.result.outputs[0].max_abs == pytest.approx(1.0, abs=0.02)


def test_simulator_timeout_exits_3(compiled, tmp_path: Path) -> None:
    out = compiled("conv_relu", "cortex-m55").pte.parent  # the cached program, as above
    proc = _aot(["run", "conv_relu", "--target", "cortex-m55", "--board", "corstone-300", "--timeout", "0.01",
                 "-o", str(out)], tmp_path)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "timeout" in proc.stderr


def test_ethos_u_on_qemu_runs_the_firmware(compiled) -> None:
    """On a board, an Ethos-U program runs in the firmware (EthosUBackend + driver) with the NPU co-simulated,
    and says so; the U85 runs on the labelled stand-in board because QEMU has no Cortex-M85."""
    from emlkit.run import execute

    o = execute(compiled("add", "ethos-u55-128"), "corstone-300", "qemu", 120, "mve", None)
    assert o.status == "PASS", o.reason
    assert "co-simulated ethos-u55-128" in o.label and "Vela estimate" in o.label
    assert any(p.op == "delegate:EthosUBackend" for p in o.result.per_op)
    o = execute(compiled("add", "ethos-u85-256"), "corstone-320", "auto", 120, "mve", None)
    assert o.status == "PASS" and o.board == "an547-u85" and "stand-in for corstone-320" in o.label


def test_cortex_m85_on_qemu_runs_on_the_stand_in(compiled) -> None:
    """QEMU has no Cortex-M85: a cortex-m85 program runs on the labelled AN547 stand-in (M55 + MVE) instead
    of SKIPping, as Ethos-U85 programs do."""
    from emlkit.run import execute

    o = execute(compiled("add", "cortex-m85"), "corstone-320", "qemu", 120, "mve", None)
    assert o.status == "PASS" and o.board == "an547-u85", o.reason
    assert "stand-in for corstone-320" in o.label and "M55" in o.label


_DILATED = module_source("""
    self.c1 = nn.Conv2d(3, 8, 3, padding=2, dilation=2)
    self.c2 = nn.Conv2d(8, 8, 3, padding=3, dilation=(3, 2), groups=8)""",
    "return self.c2(torch.relu(self.c1(x)))", "torch.randn(1, 3, 16, 16)", name="Dilated")


def test_dilated_convs_run_on_qemu(emlkit_cli, tmp_path: Path) -> None:
    """ExecuTorch's Python reference cannot run an int dilated conv (torch has no such CPU kernel); ours
    computes it exactly, so the bundle holds expected outputs and the MVE firmware matches them."""
    (tmp_path / "dilated.py").write_text(_DILATED)
    proc = emlkit_cli(["run", str(tmp_path / "dilated.py"), "--target", "cortex-m55", "-o", str(tmp_path / "o")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "PASS" in proc.stdout and "0 steps" in proc.stdout


_CATS = module_source("""
    self.a, self.b = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 12, 3, padding=1)
    self.c, self.d = nn.Conv2d(3, 20, 1), nn.Conv2d(3, 60, 1)""", """
    a, b, c, d = (torch.relu(m(x)) for m in (self.a, self.b, self.c, self.d))
    y = torch.cat([a, b, c], dim=1)          # NHWC rows of 4, 12, 20 bytes, 36 apart
    z = torch.cat([d, a], dim=1)             # rows of 60 and 4 bytes
    s = c[:, 4:16]                           # 12-byte rows read 20 bytes apart
    return y, z, s + 0.0""", "torch.randn(1, 3, 7, 5)", name="Cats", seed=1)


def test_short_row_block_copies_on_qemu(emlkit_cli, tmp_path: Path) -> None:
    """cat and slice with short rows (4-60 bytes) on a 7x5 map (35 rows: 8 groups of four and a tail of
    three) run through the MVE word gather/scatter copy and match the host bit for bit."""
    (tmp_path / "cats.py").write_text(_CATS)
    proc = emlkit_cli(["run", str(tmp_path / "cats.py"), "--target", "cortex-m55", "-o", str(tmp_path / "o")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    diffs = re.search(r"max diff vs expected\s+(.*)", proc.stdout)
    assert "PASS" in proc.stdout and diffs, proc.stdout[-2000:]
    assert [d.strip().split()[0] for d in diffs.group(1).split(",")] == ["0", "0", "0"], diffs.group(1)
    # the run's table lists only the five costliest ops; the compile report lists them all
    (report,) = (tmp_path / "o").glob("*.json")
    assert json.loads(report.read_text())["ops"].get("aten::cat") == 2


def test_run_ethos_u_host_cli_in_a_fresh_process(tmp_path: Path) -> None:
    """A new interpreter must run an NPU program, also when the compile comes from the cache (so the
    compiler's imports never ran): import order inside ExecuTorch's cortex_m package once broke exactly
    that second run and nothing else."""
    for _ in range(2):
        proc = _aot(["run", "add", "--target", "ethos-u55-128", "--board", "host", "-o", str(tmp_path / "o")], tmp_path)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "PASS" in proc.stdout and "Ethos-U55 functional model" in proc.stdout


_UPSAMPLE_7x11 = module_source("""
    self.c = nn.Conv2d(3, 8, 3, padding=1)
    self.d = nn.Conv2d(8, 4, 1)""", """
    y = nn.functional.interpolate(torch.relu(self.c(x)), size=(7, 11), mode="nearest")
    return self.d(y)""", "torch.randn(1, 3, 5, 6)", name="Up")


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4"])
def test_non_integer_upsample_runs_bit_exact(emlkit_cli, tmp_path: Path, target: str) -> None:
    """5x6 -> 7x11 nearest (was refused by name: no kernel took a non-integer factor) runs as
    emlkit::upsample_nearest2d_index with torch's own row and column choices, bit-exact on QEMU
    (Cortex-M55 with MVE, Cortex-M4 without)."""
    (tmp_path / "up.py").write_text(_UPSAMPLE_7x11)
    proc = emlkit_cli(["run", str(tmp_path / "up.py"), "--target", target, "-o", str(tmp_path / "o")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    diffs = re.search(r"max diff vs expected\s+(\S+)", proc.stdout)
    assert "PASS" in proc.stdout and diffs and diffs.group(1) == "0", proc.stdout[-2000:]
    snr = re.search(r"SNR vs float model\s+([\d.]+) dB", proc.stdout)
    assert snr and float(snr.group(1)) > 35.0, proc.stdout[-2000:]     # the float model's rows and columns
    (report,) = (tmp_path / "o").glob("*.json")
    ops = json.loads(report.read_text())["ops"]
    assert ops.get("emlkit::upsample_nearest2d_index") == 1 and "aten::upsample_nearest2d" not in ops, ops
