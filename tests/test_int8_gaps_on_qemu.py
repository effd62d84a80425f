"""The ops that were the CPU families' last float ops, in int8 on cortex-m55 and cortex-m4 under QEMU: log_softmax
over the last dim and over a middle one (nn.LogSoftmax); sums over leading dims (the batch, a middle dim, both); an
nn.LSTM's c_n read alone (one layer, stacked, from a given state); LSTMs and a GRU from constant and computed
initial states. Each model compiles without --allow-float (no aten::
compute op left), the device's outputs equal the host reference bit for bit, and each output's SNR against the
float model is at least the floor the README states."""

from __future__ import annotations

from pathlib import Path

import pytest
from model_files import module_source
from qemu_run_lib import run_bit_exact

# The heads: log_softmax over the last dim and over a middle one, and sums over leading dims, off one Linear.
_HEADS_MODEL = module_source(
    "self.fc = nn.Linear(12, 30)\nself.over_rows = nn.LogSoftmax(dim=1)",
    "y = self.fc(x)\nt = torch.tanh(y).reshape(2, 5, 6)\n"
    "return (F.log_softmax(y, dim=-1), self.over_rows(y.reshape(2, 5, 6)), torch.sum(t, 0), t.sum(1, keepdim=True), "
    "t.sum((0, 1)))",
    "torch.randn(2, 12, generator=torch.Generator().manual_seed(1)) * 2", name="Heads", seed=7,
    imports="import torch.nn.functional as F\n")

# The recurrent layers: c_n read alone (one layer, stacked, from a given state), then LSTMs and a GRU from constant
# and computed initial states.
_RNN_MODEL = '''
import torch
import torch.nn as nn


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(9)
        self.one = nn.LSTM(6, 8, batch_first=True)
        self.stacked = nn.LSTM(6, 5, num_layers=2)
        self.given = nn.LSTM(6, 7, batch_first=True)
        self.const_lstm = nn.LSTM(6, 8, batch_first=True)
        self.register_buffer("h0", torch.rand(1, 2, 8) * 1.2 - 0.6)
        self.init = nn.Linear(4, 14)
        self.comp_lstm = nn.LSTM(6, 7, batch_first=True)
        self.gru = nn.GRU(6, 5, batch_first=True)

    def forward(self, x, h0, c0, z):
        _, (_, c_one) = self.one(x)
        _, (_, c_stacked) = self.stacked(x.transpose(0, 1))
        _, (_, c_given) = self.given(x, (h0, c0))
        y1, _ = self.const_lstm(x, (self.h0, torch.full((1, 2, 8), 0.5)))
        s = self.init(z).unsqueeze(0)
        y2, (_, c2) = self.comp_lstm(x, (torch.tanh(s[..., :7]), s[..., 7:]))
        y3, _ = self.gru(x, torch.tanh(s[..., :5]))
        return c_one, c_stacked, c_given, y1, y2, c2, y3


ModelUnderTest = Recurrent().eval()
ModelInputs = (torch.randn(2, 5, 6, generator=torch.Generator().manual_seed(1)),
               torch.rand(1, 2, 7, generator=torch.Generator().manual_seed(2)) * 1.6 - 0.8,
               torch.randn(1, 2, 7, generator=torch.Generator().manual_seed(3)),
               torch.randn(2, 4, generator=torch.Generator().manual_seed(2)))
'''

# Per output: log_softmax 30 dB, sums 30 dB; c_n 33 dB, outputs and states from given states 30 dB.
SNR_FLOOR_DB = {"heads": [30.0, 30.0, 30.0, 30.0, 30.0], "rnn": [33.0, 33.0, 33.0, 30.0, 30.0, 30.0, 30.0]}
_OPS = {"heads": {"emlkit::log_softmax": 2, "emlkit::quantized_avg_pool2d": 3},
        "rnn": {"emlkit::lstm": 6, "emlkit::gru": 1}}
_SOURCE = {"heads": _HEADS_MODEL, "rnn": _RNN_MODEL}


@pytest.mark.parametrize("which", list(_SOURCE))
# The quick pass runs each model on the M55; the M4 runs are slow cases.
@pytest.mark.parametrize("target", ["cortex-m55", pytest.param("cortex-m4", marks=pytest.mark.slow)])
def test_int8_gaps_bit_exact_on_qemu(tmp_path: Path, target: str, which: str) -> None:
    ops, snrs = run_bit_exact(tmp_path, f"gap_{which}", _SOURCE[which], target, None, len(SNR_FLOOR_DB[which]),
                              timeout=1200)
    assert {k: ops.get(k) for k in _OPS[which]} == _OPS[which], ops
    assert all(s >= f for s, f in zip(snrs, SNR_FLOOR_DB[which])), snrs
