"""`--io int8` / `--io int8-all` (emlkit/passes/int8_io.py) through the commands: the program takes int8 inputs
(and gives int8 outputs), the bundled test case feeds them, host and QEMU runs are bit-exact, the arena loses the
float input, export writes the qparams, and where the option cannot apply the command ends with one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from emlkit.deploy.program_io import bundled_case
from model_files import module_source
from test_export import QEMU_CMD, _build, needs_tools, qemu_console

# A float input of 3 x 16 x 16 (3 KiB) bounds this model's arena; as int8 it is a quarter of that.
_SMALL = module_source("""
    self.c1 = nn.Conv2d(3, 4, 3, padding=1)
    self.c2 = nn.Conv2d(4, 8, 3, stride=2, padding=1)""",
    "return self.c2(torch.relu(self.c1(x)))", "torch.randn(1, 3, 16, 16)", name="Small")


def _one_line(p, status: int) -> str:  # type: ignore[no-untyped-def]
    assert p.returncode == status, (p.returncode, p.stdout[-1500:], p.stderr[-1500:])
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr[-2000:]
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, p.stderr[-2000:]
    return lines[0]


def _model(tmp_path: Path) -> Path:
    f = tmp_path / "small.py"
    f.write_text(_SMALL)
    return f


def test_compile_and_host_run_with_int8_inputs(emlkit_cli, tmp_path: Path) -> None:
    f = _model(tmp_path)
    proc = emlkit_cli(["run", str(f), "--target", "cortex-m55", "--board", "host", "--io", "int8",
                       "-o", str(tmp_path / "i8")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "PASS" in proc.stdout and "0 steps" in proc.stdout
    report = json.loads((tmp_path / "i8" / "small_cortex-m55.json").read_text())
    (entry,) = report["int8_io"]["inputs"]
    assert entry["index"] == 0 and entry["dtype"] == "int8" and entry["scale"] > 0 and report["int8_io"]["outputs"] == []
    assert "cortex_m::quantize_per_tensor" not in report["ops"] and report["numerics"]["snr_db"] > 30
    case = bundled_case((tmp_path / "i8" / "small_cortex-m55.bpte").read_bytes())
    assert case.inputs[0].c_type == "int8_t" and len(case.inputs[0].data) == 3 * 16 * 16
    assert case.expected[0].c_type == "float"
    # the same model with float inputs: the 3 KiB float input bounds its arena
    proc = emlkit_cli(["compile", str(f), "--target", "cortex-m55", "-o", str(tmp_path / "f32")], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    float_arena = json.loads((tmp_path / "f32" / "small_cortex-m55.json").read_text())["memory"]["arena_total"]
    assert float_arena >= 3 * 16 * 16 * 4 and report["memory"]["arena_total"] <= float_arena - 1024


def test_int8_all_on_qemu_m55_is_bit_exact(emlkit_cli, tmp_path: Path) -> None:
    f = _model(tmp_path)
    proc = emlkit_cli(["run", str(f), "--target", "cortex-m55", "--io", "int8-all", "-o", str(tmp_path / "o"),
                       "--save-outputs", str(tmp_path / "npy")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "PASS" in proc.stdout and "0 steps" in proc.stdout and "instructions" in proc.stdout
    report = json.loads((tmp_path / "o" / "small_cortex-m55.json").read_text())
    assert not any("quantize_per_tensor" in op for op in report["ops"])
    (out,) = report["int8_io"]["outputs"]
    assert report["output_qparams"][0]["scale"] == out["scale"]
    got = np.load(tmp_path / "npy" / "output_0.npy")
    assert got.dtype == np.int8 and got.shape == (1, 8, 8, 8)


def test_export_gives_the_qparams(emlkit_cli, tmp_path: Path) -> None:
    f = _model(tmp_path)
    proc = emlkit_cli(["export", str(f), "--target", "cortex-m55", "--io", "int8-all", "-o", str(tmp_path / "fw")],
                      tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((tmp_path / "fw" / "model" / "report.json").read_text())
    header = (tmp_path / "fw" / "model" / "model_data.h").read_text()
    for kind, what in (("inputs", "INPUT"), ("outputs", "OUTPUT")):
        (e,) = report["int8_io"][kind]
        assert f"#define EMLKIT_{what}0_SCALE {e['scale']!r}\n" in header
        assert f"#define EMLKIT_{what}0_ZERO_POINT ({e['zero_point']})\n" in header
    assert "--io int8-all" in (tmp_path / "fw" / "README.md").read_text()


def test_refusals_are_one_line(emlkit_cli, tmp_path: Path) -> None:
    f = _model(tmp_path)
    line = _one_line(emlkit_cli(["compile", str(f), "--target", "ethos-u55-128", "--io", "int8", "-o",
                                 str(tmp_path / "o")], tmp_path), 2)
    assert "--io int8 is for the Cortex-M targets" in line and "--io float" in line
    line = _one_line(emlkit_cli(["evaluate", str(f), "--target", "cortex-m55", "--io", "int8", "--data",
                                 str(tmp_path / "d.npz"), "-o", str(tmp_path / "o")], tmp_path), 2)
    assert "--io int8 is for compile, run and export" in line
    unused = tmp_path / "unused.py"
    unused.write_text("import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                      "        self.c = torch.nn.Conv2d(3, 4, 1)\n    def forward(self, x, mask):\n"
                      "        return self.c(x)\nModelUnderTest = M().eval()\n"
                      "ModelInputs = (torch.randn(1, 3, 4, 4), torch.randn(1, 4))\n")
    line = _one_line(emlkit_cli(["compile", str(unused), "--target", "cortex-m55", "--io", "int8", "-o",
                                 str(tmp_path / "o")], tmp_path), 4)
    assert "input 1 (mask) is not quantized at its first use (nothing reads it)" in line and "--io float" in line


@pytest.mark.slow
@needs_tools
def test_exported_int8_project_passes_on_qemu(emlkit_cli, tmp_path: Path) -> None:
    """The exported project of an int8-all program feeds its int8 test input and checks its int8 output on the
    board (built with CMake and the GNU Arm toolchain only, run on plain QEMU)."""
    f = _model(tmp_path)
    proc = emlkit_cli(["export", str(f), "--target", "cortex-m55", "--io", "int8-all", "-o", str(tmp_path / "fw")],
                      tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = _build(tmp_path / "fw", tmp_path / "build")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    console = qemu_console([*QEMU_CMD, "-kernel", str(tmp_path / "build" / "app.elf")])
    assert "RESULT: PASS small" in console and "0 of 512 elements differ" in console, console[-3000:]
    e = json.loads((tmp_path / "fw" / "model" / "report.json").read_text())["int8_io"]["inputs"][0]
    assert f"input 0 takes int8 codes: q = round(x / {e['scale']:.9g}) + {e['zero_point']}" in console, console[-3000:]
