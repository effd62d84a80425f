"""int8 LSTM and GRU (emlkit::lstm, emlkit::gru) on the device under QEMU: a model with a batch_first
LSTM over a batch of two whose c_n is read too, a sequence-first LSTM feeding a Linear, a two-layer bidirectional
LSTM whose h_n is read, an LSTMCell, a two-layer bidirectional GRU (output and h_n) and a GRUCell compiles
without --allow-float (no float op), and the device's outputs equal the host reference bit for bit on cortex-m55 (MVE build), cortex-m4 (DSP
build) and cortex-m0plus (the Armv6-M image on the an385-m0plus stand-in: the micro:bit's 16 KiB RAM is too small
for this model; tests/models/lstm_kws.py fits it). Likewise given states (the model's inputs) of every form: a
stacked LSTM's (h0, c0), a stacked bidirectional GRU's h0, an LSTMCell's and a GRUCell's; and a bidirectional
LSTM's c_n."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from emlkit.verify import DATA_MOVEMENT
from model_files import module_source

_MODEL = module_source("""
    self.a = nn.LSTM(6, 12, batch_first=True)
    self.b = nn.LSTM(6, 9)
    self.fc = nn.Linear(9, 3)
    self.c = nn.LSTM(6, 8, num_layers=2, batch_first=True, bidirectional=True)
    self.d = nn.LSTMCell(6, 5)
    self.e = nn.GRU(6, 7, num_layers=2, batch_first=True, bidirectional=True)
    self.f = nn.GRUCell(6, 4)""", """
    ya, (_, ca) = self.a(x)
    yb, _ = self.b(x.transpose(0, 1))
    _, (h, _) = self.c(x)
    ye, he = self.e(x)
    return ya, self.fc(yb[-1]), h[-1], self.d(x[:, 3])[0], ye, he, self.f(x[:, 2]), ca""", "torch.randn(2, 7, 6)", name="Lstms", seed=5)


# The quick pass runs the models on the M55; the M4 (DSP gates) and M0+ (portable) runs are slow cases: their
# gate kernels are checked against the reference in the quick pass (test_kernels.py's DSP self-test, host build).
_TARGETS = [("cortex-m55", []), pytest.param("cortex-m4", [], marks=pytest.mark.slow),
            pytest.param("cortex-m0plus", ["--board", "an385-m0plus"], marks=pytest.mark.slow)]
_GIVEN = module_source("""
    self.a = nn.LSTM(6, 8, num_layers=2, batch_first=True)
    self.b = nn.LSTM(6, 5, bidirectional=True)
    self.g = nn.GRU(6, 7, num_layers=2, batch_first=True, bidirectional=True)
    self.lc = nn.LSTMCell(6, 4)
    self.gc = nn.GRUCell(6, 3)""", """
    ya, (ha, ca) = self.a(x, (h0, c0))
    yb, (_, cb) = self.b(x.transpose(0, 1))
    yg, hg = self.g(x, g0)
    h1, c1 = self.lc(x[:, 2], (hc, cc))
    return ya, ca, yb, cb, yg, hg, torch.cat((h1, c1), 1), self.gc(x[:, 4], gc)""",
                       "torch.randn(2, 7, 6), torch.tanh(torch.randn(2, 2, 8)), torch.randn(2, 2, 8), "
                       "torch.tanh(torch.randn(4, 2, 7)), torch.tanh(torch.randn(2, 4)), torch.randn(2, 4), "
                       "torch.tanh(torch.randn(2, 3))", name="Given", seed=3).replace(
    "def forward(self, x):", "def forward(self, x, h0, c0, g0, hc, cc, gc):")


def _run_bit_exact(cli, tmp_path: Path, name: str, text: str, target: str, board: list[str], outputs: int) -> dict:
    """`emlkit run` (in this process: CLI) of the model TEXT (as NAME) on TARGET: PASS with every one of OUTPUTS
    outputs 0 steps off the host reference; the compile report."""
    (tmp_path / name).write_text(text)
    proc = cli(["run", tmp_path / name, "--target", target, *board, "-o", tmp_path / "o"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    diffs = re.search(r"max diff vs expected\s+(.*?)\n\s*SNR", proc.stdout, re.S)
    assert "PASS" in proc.stdout and diffs, proc.stdout[-2000:]
    assert [d.split()[0] for d in " ".join(diffs.group(1).split()).split(",")] == ["0"] * outputs, diffs.group(1)
    (report,) = (tmp_path / "o").glob("*.json")
    return json.loads(report.read_text())


@pytest.mark.parametrize("target, board", _TARGETS)
def test_lstm_int8_bit_exact_on_qemu(tmp_path: Path, target: str, board: list[str], emlkit_cli) -> None:
    rep = _run_bit_exact(emlkit_cli, tmp_path, "lstms.py", _MODEL, target, board, outputs=8)
    assert rep["ops"].get("emlkit::lstm") == 7 and rep["ops"].get("emlkit::gru") == 5, rep["ops"]
    assert not [op for op in rep["ops"] if op.startswith("aten::") and op.split(".")[0] not in DATA_MOVEMENT], rep["ops"]


@pytest.mark.parametrize("target, board", _TARGETS)
def test_lstm_given_state_bit_exact_on_qemu(tmp_path: Path, target: str, board: list[str], emlkit_cli) -> None:
    """Given states as model inputs, quantized on the device (h0 to int8 at h's qparams, c0 to the int16 cell) and
    fed to the kernels: a two-layer LSTM's (h0, c0) (each layer its slice; y and c_n read), a two-layer
    bidirectional GRU's h0, an LSTMCell's (h, c) (both read) and a GRUCell's h; and a bidirectional LSTM's c_n (each
    direction's cell, joined). All eight outputs (the M0+ runner reports 8) equal the host reference, no float
    op."""
    rep = _run_bit_exact(emlkit_cli, tmp_path, "given.py", _GIVEN, target, board, outputs=8)
    entries = rep["emlkit_lstm"]["lowered"]
    assert sum(e["given_state"] for e in entries) == 2 + 4 + 1 + 1, entries
    assert sum(e["cell_out"] for e in entries) == 2 + 2 + 1, entries
    assert rep["ops"].get("emlkit::lstm") == 5 and rep["ops"].get("emlkit::gru") == 5, rep["ops"]
    assert not [op for op in rep["ops"] if op.startswith("aten::") and op.split(".")[0] not in DATA_MOVEMENT], rep["ops"]
