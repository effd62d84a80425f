"""Every Ethos-U55 MAC configuration runs through the firmware with the co-simulated NPU, bit-exact: the
functional model orders each configuration's weight stream by its micro-block (4 OFM channels on the 32-MAC
U55, 8 elsewhere), and the firmware's driver checks the NPU it finds against the program's."""

from __future__ import annotations

from pathlib import Path

import pytest

from emlkit.cli import main
from emlkit.npu.blob import DriverConfig
from emlkit.npu.run import machine_for


class _Blob:
    def __init__(self, macs_log2: int) -> None:
        self.config = DriverConfig(product=0, macs_per_cc=macs_log2, shram_kib=16, arch_id=0)
        self.weights, self.scratch_size = b"", 16


@pytest.mark.parametrize("macs_log2, ofm_ublock", [(5, 4), (6, 8), (7, 8), (8, 8)])
def test_micro_block_per_configuration(macs_log2: int, ofm_ublock: int) -> None:
    m = machine_for(_Blob(macs_log2))  # type: ignore[arg-type]
    assert (m.ifm_ublock, m.ofm_ublock) == (8, ofm_ublock)


@pytest.mark.parametrize("target, model", [
    ("ethos-u55-32", "conv_relu"),
    pytest.param("ethos-u55-32", "mlperf_kws_dscnn", marks=pytest.mark.slow),
    pytest.param("ethos-u55-64", "mlperf_kws_dscnn", marks=pytest.mark.slow),
    pytest.param("ethos-u55-256", "mlperf_kws_dscnn", marks=pytest.mark.slow),
])
def test_configuration_runs_bit_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str,
                                      model: str) -> None:
    assert main(["run", model, "--target", target, "-o", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"PASS (QEMU + co-simulated {target}" in out, out[-2000:]   # exit 0: bit-exact on the device
    assert "NPU model vs TOSA (compile) bit-exact" in out
