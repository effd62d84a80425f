"""Bilinear resize, masked_fill/where with a scalar fill, median and adaptive max pool in int8 on cortex-m55 and cortex-m4 under
QEMU: one model with all three compiles without --allow-float (no float op), and the device's outputs
equal the host reference bit for bit, NHWC (after a conv) and NCHW (a model input) resizes included."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from model_files import module_source

ROOT = Path(__file__).resolve().parent.parent

_MODEL = module_source("""
    self.conv = nn.Conv2d(3, 5, 3, padding=1)
    self.register_buffer("mask", torch.rand(4, 7, 9, generator=torch.Generator().manual_seed(2)) > 0.5)""", """
    a = F.interpolate(self.conv(x), size=(11, 6), mode="bilinear", align_corners=False)
    b = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=True)
    c = x[0].masked_fill(self.mask[:3], 0.75)
    d = torch.where(self.mask[3], -2.0, x[0, 1])
    e = F.adaptive_max_pool2d(self.conv(x), (3, 4))
    return a, b, c, d, torch.median(x), torch.median(x[0, 0], dim=1).values, e""",
                       "torch.randn(1, 3, 7, 9)", name="CodesOps", seed=3,
                       imports="import torch.nn.functional as F\n")


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4"])
def test_resize_select_median_int8_bit_exact_on_qemu(emlkit_cli, tmp_path: Path, target: str) -> None:
    (tmp_path / "codes_ops.py").write_text(_MODEL)
    proc = emlkit_cli(["run", str(tmp_path / "codes_ops.py"), "--target", target, "-o", str(tmp_path / "o")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    diffs = re.search(r"max diff vs expected\s+(.*?)\n\s*SNR", proc.stdout, re.S)  # the table wraps long cells
    assert "PASS" in proc.stdout and diffs, proc.stdout[-2000:]
    cells = " ".join(diffs.group(1).split()).split(",")
    assert [d.split()[0] for d in cells] == ["0"] * 7, diffs.group(1)
    (report,) = (tmp_path / "o").glob("*.json")
    rep = json.loads(report.read_text())
    assert rep["ops"].get("emlkit::upsample_bilinear2d") == 2 and rep["ops"].get("aten::median") == 2
    assert rep["ops"].get("aten::where") == 2 and rep["ops"].get("aten::adaptive_max_pool2d") == 1
    assert not any(op.startswith("aten::") and op not in ("aten::median", "aten::where", "aten::adaptive_max_pool2d")
                   and "copy" not in op
                   and "view" not in op and "select" not in op and "slice" not in op for op in rep["ops"]), rep["ops"]
