"""Issue 30: on the int8 Ethos-U flows an nn.LSTM or nn.GRU the int8 kernels take stays whole and runs on the CPU
(emlkit::lstm / emlkit::gru), instead of being unrolled by Arm's quantizer into some 56 NPU ops a step, which took
233 s to compile for an LSTM(16, 32) over 10 steps. The model around it still goes to the NPU; the compile report
says where each layer runs, and the device reproduces the host reference bit for bit under QEMU with the NPU
co-simulated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qemu_run_lib import run_bit_exact

_MODEL = '''
import torch
import torch.nn as nn

torch.manual_seed(0)


class Rnns(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.gru = nn.GRU(32, 8, batch_first=True)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        z, _ = self.gru(torch.relu(y))
        return self.fc(z[:, -1])


ModelUnderTest = Rnns().eval()
ModelInputs = (torch.randn(1, 12, 16),)
'''


@pytest.mark.slow
def test_lstm_and_gru_run_on_the_cpu_of_an_ethos_u55_program(tmp_path: Path) -> None:
    ops, snrs = run_bit_exact(tmp_path, "rnns", _MODEL, "ethos-u55-128", None, outputs=1, timeout=900)
    assert ops.get("emlkit::lstm") == 1 and ops.get("emlkit::gru") == 1 and ops.get("delegate:EthosUBackend"), ops
    assert snrs[0] > 30, snrs
    (report_file,) = (tmp_path / "o").glob("*.json")
    report = json.loads(report_file.read_text())
    where = {p["layer"]: p for p in report["layer_placement"]}
    assert where["lstm (LSTM)"]["runs_on"] == "CPU" and where["lstm (LSTM)"]["cpu_ops"] == {"emlkit::lstm": 1}
    assert where["gru (GRU)"]["runs_on"] == "CPU" and where["gru (GRU)"]["cpu_ops"] == {"emlkit::gru": 1}
    assert where["fc (Linear)"]["runs_on"] == "NPU", where
    # the unrolled form delegated hundreds of ops (560 for the LSTM alone over 10 steps) and took minutes
    assert sum(report["delegated_ops"].values()) < 40, report["delegated_ops"]
    assert report["compile_seconds"] < 60, report["compile_seconds"]
