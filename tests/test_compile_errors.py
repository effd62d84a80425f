"""Bad input to `emlkit compile`: one clear line on stderr, the documented exit status (2 usage error,
4 unsupported model), no traceback. The command runs in this process (tests/cli_in_process.py); the same errors
from a real process are in tests/test_cli.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_in_process import CliResult
from model_files import line_of, module_source
from toolchain import needs_qemu


def _error_line(proc: CliResult, status: int = 2) -> str:
    assert proc.returncode == status, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
    assert len(lines) == 1, proc.stderr[-2000:]
    return lines[0]


def _write(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(body)
    return p


def test_unknown_model(emlkit_cli, tmp_path: Path) -> None:
    line = _error_line(emlkit_cli(["compile", "no_such_model", "--target", "cortex-m55", "-o", str(tmp_path)], tmp_path))
    assert "unknown model 'no_such_model'" in line and "mobilenet_v2" in line


def test_missing_model_file(emlkit_cli, tmp_path: Path) -> None:
    line = _error_line(emlkit_cli(["compile", str(tmp_path / "nope.py"), "--target", "cortex-m55"], tmp_path))
    assert "model file not found" in line


def test_unknown_target(emlkit_cli, tmp_path: Path) -> None:
    line = _error_line(emlkit_cli(["compile", "add", "--target", "cortex-m4000", "-o", str(tmp_path)], tmp_path))
    assert "unknown target 'cortex-m4000'" in line and "ethos-u55-128" in line


def test_file_without_attributes(emlkit_cli, tmp_path: Path) -> None:
    p = _write(tmp_path, "m.py", "import torch\nNet = torch.nn.ReLU()\n")
    line = _error_line(emlkit_cli(["compile", str(p), "--target", "cortex-m55"], tmp_path))
    assert "does not define ModelUnderTest and ModelInputs" in line


def test_file_that_fails_to_import(emlkit_cli, tmp_path: Path) -> None:
    p = _write(tmp_path, "m.py", "import torch\nraise RuntimeError('boom')\n")
    line = _error_line(emlkit_cli(["compile", str(p), "--target", "cortex-m55"], tmp_path))
    assert "failed to import" in line and "boom" in line


def test_model_that_fails_to_export(emlkit_cli, tmp_path: Path) -> None:
    p = _write(tmp_path, "m.py", module_source("", "if x.sum() > 0:\n    return x * 2\nreturn x", "torch.randn(1, 4)"))
    line = _error_line(emlkit_cli(["compile", str(p), "--target", "cortex-m55"], tmp_path), 4)
    assert "failed to export" in line


def test_unsupported_op_names_op_and_source_line(emlkit_cli, tmp_path: Path) -> None:
    src = module_source("", "return torch.cumsum(x, dim=1)", "torch.randn(1, 8)")
    p = _write(tmp_path, "m.py", src)
    line = _error_line(emlkit_cli(["compile", str(p), "--target", "cortex-m55", "-o", str(tmp_path / "o")], tmp_path), 4)
    assert "cumsum" in line and f"m.py:{line_of(src, 'cumsum')}" in line and "cortex-m55" in line


def test_bad_calibration_shapes(emlkit_cli, tmp_path: Path) -> None:
    import torch

    cal = tmp_path / "cal.pt"
    torch.save([(torch.randn(1, 3),)], cal)
    line = _error_line(emlkit_cli(["compile", "mlp", "--target", "cortex-m55", "--calibration", str(cal), "-o", str(tmp_path)], tmp_path))
    assert "calibration sample 0" in line and "(1, 64)" in line


_VELA_REJECTS = module_source("""
    self.c1 = nn.Conv2d(3, 8, 3, padding=2, dilation=2)
    self.dw = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=8)
    self.mp = nn.MaxPool2d(3, stride=2, padding=1)
    self.pw = nn.Conv2d(24, 16, 1)
    self.bias = nn.Parameter(torch.randn(1, 16, 1, 1))""", """
    a = F.hardswish(self.c1(x))
    y = torch.cat([self.dw(a), self.mp(a)[:, :8]], dim=1)
    z = self.pw(y) + self.bias
    z = z * torch.sigmoid(z)
    return torch.tanh(z[:, :, 1:, :]) + z.mean(dim=1, keepdim=True)[:, :, 1:, :]""",
    "torch.randn(1, 3, 16, 16)", imports="import torch.nn.functional as F\n")


def test_vela_rejecting_a_partition_is_one_line(emlkit_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ExecuTorch 1.5.1's partitioner hands Vela a DepthwiseConv2D it cannot place; Vela raises a bare
    RuntimeError deep inside to_edge_transform_and_lower, which must not reach the user as a traceback. With no
    op kind to keep on the CPU (no retries), the refusal is one line."""
    from emlkit.lower import ethos_u

    monkeypatch.setattr(ethos_u, "MAX_VELA_RETRIES", 0)
    model = _write(tmp_path, "vela_rejects.py", _VELA_REJECTS)
    line = _error_line(emlkit_cli(["compile", str(model), "--target", "ethos-u55-128", "-o", str(tmp_path / "o")], tmp_path), 4)
    assert "Vela could not compile an NPU partition for ethos-u55-128" in line and "cortex-m" in line


@needs_qemu
def test_vela_rejecting_a_partition_keeps_an_op_on_the_cpu(emlkit_cli, tmp_path: Path) -> None:
    """The same model compiles once one kind of data movement stays on the CPU; the report names it, the log warns,
    and it runs bit-exact under QEMU with the co-simulated NPU (the CPU copies include an aten::alias_copy)."""
    import json

    model = _write(tmp_path, "vela_rejects.py", _VELA_REJECTS)
    proc = emlkit_cli(["run", str(model), "--target", "ethos-u55-128", "-o", str(tmp_path / "o")], tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "o" / "vela_rejects_ethos-u55-128.json").read_text())
    kept = report["kept_on_cpu_for_vela"]
    assert len(kept) == 1 and f"{kept[0]} runs on the CPU instead" in proc.stderr
    assert "aten::alias_copy" in report["ops"] and "PASS" in proc.stdout


def test_cause_chain_outermost_first_and_cut_at_loops() -> None:
    from emlkit.errors import AotError, cause_chain
    inner = AotError("op X is not supported", 4)
    mid = RuntimeError("pass failed")
    mid.__cause__ = inner
    outer = Exception("pass manager")
    outer.__cause__ = mid
    assert cause_chain(outer) == [outer, mid, inner]
    ctx = ValueError("while handling")
    ctx.__context__ = outer
    assert cause_chain(ctx) == [ctx]
    assert cause_chain(ctx, context=True) == [ctx, outer, mid, inner]
    inner.__cause__ = outer  # a cycle ends the chain instead of looping
    assert cause_chain(outer) == [outer, mid, inner]
