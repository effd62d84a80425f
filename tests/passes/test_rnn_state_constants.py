"""rnn_state_constants.py: an LSTM's or GRU's initial state computed from constants alone becomes a constant (the
same function), zero states and states computed from the inputs are left; with it, LSTMs and GRUs from constant or
computed states lower to emlkit::lstm / emlkit::gru with no float op (lstm_output_qparams.py, emlkit_lstm.py)."""

from __future__ import annotations

import pytest
import torch

from emlkit import reference
from emlkit.passes.emlkit_lstm import EmlkitLstm
from emlkit.passes.rnn_state_constants import RnnStateConstants
from pass_graphs import assert_pipelines, bound, called, graph_of, installed, lowered, program_ops

aten = torch.ops.aten


class _States(torch.nn.Module):
    """An LSTM from a filled h0 and a scaled buffer c0, a GRU from a state computed from the second input, and an
    LSTM from zeros."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.lstm = torch.nn.LSTM(5, 6, batch_first=True)
        self.gru = torch.nn.GRU(5, 4, batch_first=True)
        self.zero = torch.nn.LSTM(5, 3, batch_first=True)
        self.init = torch.nn.Linear(3, 4)
        self.register_buffer("c0", torch.randn(1, 2, 6))

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y, (_, c) = self.lstm(x, (torch.full((1, 2, 6), 0.3), self.c0 * 0.5))
        g, _ = self.gru(x, torch.tanh(self.init(z)).unsqueeze(0))
        w, _ = self.zero(x)
        return y, c, g, w


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, 6, 5, generator=gen), torch.randn(2, 3, generator=gen)


def _snr(a: torch.Tensor, f: torch.Tensor) -> float:
    return float(10 * torch.log10((f ** 2).sum() / ((a - f) ** 2).sum()))


def test_constant_states_become_constants() -> None:
    m, x = _States().eval(), _inputs(0)
    p = bound(RnnStateConstants(), "cortex-m55")
    gm = p(graph_of(m, *x))
    assert p.report()["rewritten"] == ["lstm"]  # the GRU's state depends on z, the zero LSTM's is the default
    assert aten.full.default not in called(gm) and aten.mul.Tensor not in called(gm)
    lstm = next(n for n in gm.graph.nodes if n.target is aten.lstm.input and n.name == "lstm")
    assert all(h.op == "get_attr" for h in lstm.args[1])
    for got, want in zip(gm(*x), m(*x)):  # the same function: the state's value is computed as forward() would
        torch.testing.assert_close(got, want, rtol=0.0, atol=0.0)


def test_constant_and_computed_states_lowered_int8() -> None:
    m, x = _States().eval(), _inputs(0)
    low, opts = lowered(m, x, "cortex-m55")
    entries = installed(opts, EmlkitLstm).report()["lowered"]
    assert sorted((e["kind"], e["given_state"]) for e in entries) == [("gru", True), ("lstm", False), ("lstm", True)]
    ops = program_ops(low)
    assert not any(o.startswith("aten.") and any(k in o for k in ("lstm", "gru", "full", "mul", "sigmoid", "linear"))
                   for o in ops), ops
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    got, want = reference.run_lowered(low.edge, x), m(*x)
    assert all(_snr(a, f.detach()) > 30.0 for a, f in zip(got, want)), [_snr(a, f.detach()) for a, f in zip(got, want)]


@pytest.mark.parametrize("drop", ["RnnStateConstants"])
def test_without_the_pass_the_constant_state_stays_float(drop: str) -> None:
    m, x = _States().eval(), _inputs(0)
    low, opts = lowered(m, x, "cortex-m55", drop=(drop,), allow_float=True)
    assert len(installed(opts, EmlkitLstm).report()["lowered"]) == 2 and low.extra["verify"]["float_islands"]


def test_pipelines() -> None:
    assert_pipelines(RnnStateConstants, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128", "ethos-u85-256"))
