"""emlkit_lstm.py + lstm_output_qparams.py: dq -> aten.lstm -> getitem -> q -> emlkit::lstm on Cortex-M (one
unidirectional layer, batch_first either way, sequence lengths 1 to 40), its SNR against the float model above
35 dB and within 3 dB of the program that ran the LSTM in float between quantize/dequantize (measured 38.4-43.0 dB
against 38.9-45.6 dB); stacked and bidirectional layers and h_n (lstm_as_layers.py); forms the int8 kernel does not take stay in
float; nn.GRU as emlkit::gru; given states and c_n of every form (read alone too); the cell format rule."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from emlkit import reference
from emlkit.compile import make_options
from emlkit.lower import cortex_m
from emlkit.passes.emlkit_lstm import EmlkitLstm, cell_frac_bits
from emlkit.passes.lstm_as_layers import LstmAsLayers
from emlkit.passes.lstm_output_qparams import LstmOutputQparams
from emlkit.targets import get_target
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class _Seq(torch.nn.Module):
    def __init__(self, i: int, h: int, batch_first: bool, read: str = "seq", **kw: object) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lstm, self.read = torch.nn.LSTM(i, h, batch_first=batch_first, **kw), read  # type: ignore[arg-type]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, (h, c) = self.lstm(x)
        if self.read == "both":
            return y, h[-1]
        if self.read == "seq_c":
            return y, c
        if self.read == "all":
            return y, h, c
        return {"h_n": h, "c_n": c, "seq": y}[self.read]


def _snr(a: torch.Tensor, f: torch.Tensor) -> float:
    return float(10 * torch.log10((f ** 2).sum() / ((a - f) ** 2).sum()))


def _close_to_the_float_layer(model: torch.nn.Module, x: torch.Tensor, low: Any) -> None:
    """LOW's output: above 35 dB SNR against float, at most 3 dB below the program with the layer in float."""
    ref, _ = lowered(model, x, "cortex-m55", drop=("EmlkitLstm", "LstmOutputQparams"), allow_float=True)
    (a,), (r,) = reference.run_lowered(low.edge, (x,)), reference.run_lowered(ref.edge, (x,))
    f = model(x).detach()
    assert a.shape == f.shape
    assert _snr(a, f) > 35.0 and _snr(a, f) > _snr(r, f) - 3.0, (_snr(a, f), _snr(r, f))


# Long sequences (20 and 40 steps) are slow cases: the quick pass keeps 1, 5 and 8 steps, both layouts, batch 2.
@pytest.mark.parametrize("i, h, batch_first, steps, batch", [(10, 24, True, 8, 1), (6, 16, False, 5, 2),
                                                             (10, 24, True, 1, 1),
                                                             pytest.param(8, 12, True, 20, 1, marks=pytest.mark.slow),
                                                             pytest.param(16, 32, False, 40, 1, marks=pytest.mark.slow)])
def test_lstm_lowered_int8_within_3_db_of_float_lstm(i, h, batch_first, steps, batch) -> None:
    x = torch.randn(*((batch, steps, i) if batch_first else (steps, batch, i)), generator=torch.Generator().manual_seed(4))
    model = _Seq(i, h, batch_first)
    low, opts = lowered(model, x, "cortex-m55")
    (entry,) = installed(opts, EmlkitLstm).report()["lowered"]
    assert entry["steps"] == steps and entry["cell_frac_bits"] == cell_frac_bits(steps)
    assert installed(opts, LstmOutputQparams).report()["annotated"]
    ops = program_ops(low)
    assert any("emlkit.lstm" in o for o in ops) and not any("aten.lstm" in o or "sigmoid" in o for o in ops)
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    _close_to_the_float_layer(model, x, low)


@pytest.mark.parametrize("i, h, batch_first, steps, batch", [(10, 24, True, 8, 1), (6, 16, False, 5, 2),
                                                             (10, 24, True, 1, 1),
                                                             pytest.param(8, 12, True, 20, 1, marks=pytest.mark.slow)])
def test_read_c_n_lowered(i, h, batch_first, steps, batch) -> None:
    """A read c_n of a one-layer LSTM: the op's int16 cell dequantized at 2^-K (no float op), the sequence output
    as before and c_n above 35 dB SNR against the float model (measured 41.0-43.8 dB)."""
    x = torch.randn(*((batch, steps, i) if batch_first else (steps, batch, i)), generator=torch.Generator().manual_seed(4))
    model = _Seq(i, h, batch_first, "seq_c")
    low, opts = lowered(model, x, "cortex-m55")
    (entry,) = installed(opts, EmlkitLstm).report()["lowered"]
    assert entry["cell_out"] and entry["cell_frac_bits"] == cell_frac_bits(steps)
    ops = program_ops(low)
    assert any("emlkit.lstm" in o for o in ops) and not any("aten.lstm" in o or "sigmoid" in o for o in ops)
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    (y, c), (fy, fc) = reference.run_lowered(low.edge, (x,)), model(x)
    assert c.shape == fc.shape == (1, batch, h)
    assert _snr(y, fy.detach()) > 33.0 and _snr(c, fc.detach()) > 33.0, (_snr(y, fy.detach()), _snr(c, fc.detach()))


class _Given(torch.nn.Module):
    """A one-layer LSTM from a given (h0, c0), the model's inputs; returns y, h_n and c_n."""

    def __init__(self, i: int, h: int, batch_first: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lstm = torch.nn.LSTM(i, h, batch_first=batch_first)

    def forward(self, x: torch.Tensor, h0: torch.Tensor,
                c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y, (h, c) = self.lstm(x, (h0, c0))
        return y, h, c


def _given_inputs(i: int, h: int, batch_first: bool, steps: int, batch: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*((batch, steps, i) if batch_first else (steps, batch, i)), generator=g)
    # h0 as an LSTM leaves it, in (-1, 1); c0 any size
    return x, torch.tanh(torch.randn(1, batch, h, generator=g)), torch.randn(1, batch, h, generator=g)


@pytest.mark.parametrize("i, h, batch_first, steps, batch", [(10, 24, True, 8, 1), (6, 16, False, 5, 2),
                                                             (10, 24, True, 1, 1),
                                                             pytest.param(8, 12, True, 20, 1, marks=pytest.mark.slow)])
def test_given_initial_state_lowered(i, h, batch_first, steps, batch) -> None:
    """A given (h0, c0): h0 quantized at the sequence output's qparams, c0 to the cell format (K = 11), both fed to
    emlkit::lstm; no float op, y and c_n above 33 dB against the float model (measured: y 35.6-38.6 dB, c_n
    40.3-45.3 dB; h shares its qparams with h0, so an h0 beyond (-1, 1) widens them and costs y a little)."""
    model, opts = _Given(i, h, batch_first), make_options()
    inputs = _given_inputs(i, h, batch_first, steps, batch, 4)
    data = [inputs] + [_given_inputs(i, h, batch_first, steps, batch, s) for s in (5, 6)]
    with torch.no_grad():
        low = cortex_m.lower(model.eval(), inputs, data, get_target("cortex-m55"), opts)
    (entry,) = installed(opts, EmlkitLstm).report()["lowered"]
    assert entry["given_state"] and entry["cell_out"] and entry["cell_frac_bits"] == 11
    ops = program_ops(low)
    assert any("emlkit.lstm" in o for o in ops) and not any("aten.lstm" in o or "sigmoid" in o for o in ops)
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    (y, hn, c), (fy, fh, fc) = reference.run_lowered(low.edge, inputs), model(*inputs)
    assert y.shape == fy.shape and c.shape == fc.shape
    # h_n read: lstm_as_layers.py makes it the last step of y, the same codes
    assert torch.equal(hn[0], y[:, -1] if batch_first else y[-1]) and _snr(hn, fh.detach()) > 30.0
    assert installed(opts, LstmAsLayers).report()["rewritten"]
    assert _snr(y, fy.detach()) > 33.0 and _snr(c, fc.detach()) > 33.0, (_snr(y, fy.detach()), _snr(c, fc.detach()))


def test_h_n_and_c_n_read_lowered() -> None:
    """A one-layer LSTM whose h_n and c_n are both read (nn.LSTM's whole result): h_n the last step of y
    (lstm_as_layers.py), c_n the kernel's cell, no float op."""
    model = _Seq(6, 10, False, "all")
    x = torch.randn(7, 2, 6, generator=torch.Generator().manual_seed(2))
    low, opts = lowered(model, x, "cortex-m55")
    (entry,) = installed(opts, EmlkitLstm).report()["lowered"]
    assert entry["cell_out"] and installed(opts, LstmAsLayers).report()["rewritten"]
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    (y, h, c), (fy, fh, fc) = reference.run_lowered(low.edge, (x,)), model(x)
    assert torch.equal(h[0], y[-1]) and h.shape == fh.shape and c.shape == fc.shape
    assert min(_snr(y, fy.detach()), _snr(h, fh.detach()), _snr(c, fc.detach())) > 33.0


class _CellAlone(torch.nn.Module):
    """An nn.LSTM whose c_n alone is read, from a zero or a given (h0, c0)."""

    def __init__(self, layers: int, given: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lstm, self.given = torch.nn.LSTM(6, 9, num_layers=layers, batch_first=True), given

    def forward(self, x: torch.Tensor, *state: torch.Tensor) -> torch.Tensor:
        _, (_, c) = self.lstm(x, tuple(state)) if self.given else self.lstm(x)
        return c


@pytest.mark.parametrize("layers, given", [(1, False), (2, False), (1, True), (2, True)])
def test_c_n_read_alone_lowered(layers: int, given: bool) -> None:
    """c_n read alone (neither the sequence output nor h_n): nothing observes h, so its codes are fixed at
    graph.H_ALONE_QPARAMS (a given h0 quantized to them); every layer an emlkit::lstm, no float op, c_n above 33 dB
    against the float model."""
    from emlkit.passes.graph import H_ALONE_QPARAMS

    model, opts = _CellAlone(layers, given).eval(), make_options()
    g = torch.Generator().manual_seed(3)
    inputs: tuple[torch.Tensor, ...] = (torch.randn(2, 7, 6, generator=g),)
    if given:
        inputs += (torch.tanh(torch.randn(layers, 2, 9, generator=g)), torch.randn(layers, 2, 9, generator=g))
    with torch.no_grad():
        low = cortex_m.lower(model, inputs, [inputs], get_target("cortex-m55"), opts)
    entries = installed(opts, EmlkitLstm).report()["lowered"]
    assert len(entries) == layers and all(e["given_state"] == given for e in entries)
    assert entries[-1]["cell_out"] and entries[-1]["out_scale"] == H_ALONE_QPARAMS[0]
    ops = program_ops(low)
    assert any("emlkit.lstm" in o for o in ops) and not any("aten.lstm" in o or "sigmoid" in o for o in ops)
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    (c,), fc = reference.run_lowered(low.edge, inputs), model(*inputs).detach()
    assert c.shape == fc.shape and _snr(c, fc) > 33.0, _snr(c, fc)


@pytest.mark.parametrize("kw, read", [({"proj_size": 3}, "seq")])
def test_forms_the_kernel_does_not_take_stay_float(kw, read) -> None:
    """Projections are not lowered (yet): the LSTM stays a float op, which --allow-float runs and which is refused
    by name without it."""
    model = _Seq(5, 8, True, read, **kw)
    x = torch.randn(1, 4, 5, generator=torch.Generator().manual_seed(1))
    low, opts = lowered(model, x, "cortex-m55", allow_float=True)
    assert installed(opts, EmlkitLstm).report()["lowered"] == []
    assert not any("emlkit.lstm" in o for o in program_ops(low)) and low.extra["verify"]["float_islands"]


@pytest.mark.parametrize("layers, batch_first, read, bidirectional", [
    (2, True, "both", False), (1, False, "h_n", False), (3, True, "h_n", False), (1, True, "both", True),
    (2, False, "both", True)])
def test_stacked_bidirectional_and_h_n_lowered(layers, batch_first, read, bidirectional) -> None:
    """lstm_as_layers.py: a stacked or bidirectional LSTM becomes one emlkit::lstm per layer and direction (the
    reverse one between two flips) and h_n the last step of each (int8 data movement): no float op left, every
    output above 35 dB against the float model (measured 37.5-42.1 dB; bidirectional 39.0-40.0 dB)."""
    model = _Seq(5, 8, batch_first, read, num_layers=layers, bidirectional=bidirectional)
    x = torch.randn(*((2, 6, 5) if batch_first else (6, 2, 5)), generator=torch.Generator().manual_seed(3))
    low, opts = lowered(model, x, "cortex-m55")
    runs = layers * (2 if bidirectional else 1)
    assert len(installed(opts, EmlkitLstm).report()["lowered"]) == runs
    assert installed(opts, LstmAsLayers).report()["rewritten"]
    ops = program_ops(low)
    assert sum("emlkit.lstm" in o for o in ops) == runs and not any("aten.lstm" in o for o in ops)
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    got, want = reference.run_lowered(low.edge, (x,)), model(x)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for a, f in zip(got, want):
        assert a.shape == f.shape and _snr(a, f.detach()) > 35.0


class _Cell(torch.nn.Module):
    def __init__(self, bias: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.cell, self.fc = torch.nn.LSTMCell(5, 8, bias=bias), torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.cell(x)[0])


@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell_lowered(bias) -> None:
    """nn.LSTMCell with a zero state: one emlkit::lstm step, no float op, above 45 dB (measured 48.3 / 53.8 dB)."""
    model, x = _Cell(bias), torch.randn(3, 5, generator=torch.Generator().manual_seed(3))
    low, opts = lowered(model, x, "cortex-m55")
    (entry,) = installed(opts, EmlkitLstm).report()["lowered"]
    assert entry["steps"] == 1 and low.extra["verify"]["float_islands"] == []
    assert not any("lstm_cell" in o for o in program_ops(low))
    (a,) = reference.run_lowered(low.edge, (x,))
    assert _snr(a, model(x).detach()) > 45.0


class _Gru(torch.nn.Module):
    def __init__(self, i: int, h: int, batch_first: bool, bias: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.gru = torch.nn.GRU(i, h, batch_first=batch_first, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gru(x)[0]


@pytest.mark.parametrize("i, h, batch_first, steps, batch, bias", [(10, 24, True, 8, 1, True),
                                                                   (6, 16, False, 5, 2, True),
                                                                   pytest.param(8, 12, True, 20, 1, False,
                                                                                marks=pytest.mark.slow)])
def test_gru_lowered_int8_within_3_db_of_float_gru(i, h, batch_first, steps, batch, bias) -> None:
    """nn.GRU (one layer, one direction) as emlkit::gru: no float op, above 35 dB against the float model and within
    3 dB of the program with the GRU in float (measured 37.8-41.0 dB against 40.0-42.8 dB)."""
    x = torch.randn(*((batch, steps, i) if batch_first else (steps, batch, i)), generator=torch.Generator().manual_seed(4))
    model = _Gru(i, h, batch_first, bias)
    low, opts = lowered(model, x, "cortex-m55")
    (entry,) = installed(opts, EmlkitLstm).report()["lowered"]
    assert entry["kind"] == "gru" and entry["steps"] == steps
    ops = program_ops(low)
    assert any("emlkit.gru" in o for o in ops) and not any("aten.gru" in o or "sigmoid" in o for o in ops)
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    _close_to_the_float_layer(model, x, low)


class _GruStack(torch.nn.Module):
    def __init__(self, layers: int, batch_first: bool, bidirectional: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.gru = torch.nn.GRU(5, 8, num_layers=layers, batch_first=batch_first, bidirectional=bidirectional)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.gru(x)


@pytest.mark.parametrize("layers, batch_first, bidirectional", [(2, True, False), (1, False, True), (2, True, True)])
def test_stacked_bidirectional_gru_and_h_n_lowered(layers, batch_first, bidirectional) -> None:
    """lstm_as_layers.py takes GRUs the same way: one emlkit::gru per layer and direction, h_n from the outputs; no
    float op, above 35 dB (measured 40.2-43.8 dB)."""
    model = _GruStack(layers, batch_first, bidirectional)
    x = torch.randn(*((2, 6, 5) if batch_first else (6, 2, 5)), generator=torch.Generator().manual_seed(3))
    low, _ = lowered(model, x, "cortex-m55")
    ops = program_ops(low)
    assert sum("emlkit.gru" in o for o in ops) == layers * (2 if bidirectional else 1)
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    for a, f in zip(reference.run_lowered(low.edge, (x,)), model(x)):
        assert a.shape == f.shape and _snr(a, f.detach()) > 35.0


def test_gru_cell_lowered() -> None:
    """nn.GRUCell with a zero state: one emlkit::gru step, no float op, above 40 dB (measured 43.0 dB)."""
    torch.manual_seed(0)
    model, x = torch.nn.GRUCell(5, 8).eval(), torch.randn(3, 5, generator=torch.Generator().manual_seed(3))
    low, _ = lowered(model, x, "cortex-m55")
    assert sum("emlkit.gru" in o for o in program_ops(low)) == 1 and low.extra["verify"]["float_islands"] == []
    (a,) = reference.run_lowered(low.edge, (x,))
    assert _snr(a, model(x).detach()) > 40.0


class _State(torch.nn.Module):
    """KIND (LSTM, GRU, LSTMCell, GRUCell) over x, from the given state (the model's further inputs) when there is
    one; returns everything the module does (y, h_n and an LSTM's c_n; a cell's h and an LSTMCell's c)."""

    def __init__(self, kind: str, **kw: object) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.kind, self.rnn = kind, getattr(torch.nn, kind)(5, 8, **kw)

    def forward(self, x: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        hx = (state if self.kind.startswith("LSTM") else state[0]) if state else None
        out = self.rnn(x, hx)
        if self.kind == "LSTM":
            return out[0], *out[1]
        return out if isinstance(out, tuple) else (out,)


def _state_inputs(kind: str, given: bool, states: int, batch_first: bool, seed: int) -> tuple[torch.Tensor, ...]:
    """x (batch 2, 6 steps) and, if GIVEN, h0 in (-1, 1) as an RNN leaves it ([STATES, 2, 8]; a cell's [2, 8]) and
    an LSTM's c0 of any size."""
    g = torch.Generator().manual_seed(seed)
    cell = kind.endswith("Cell")
    x = torch.randn(*((2, 5) if cell else (2, 6, 5) if batch_first else (6, 2, 5)), generator=g)
    shape = (2, 8) if cell else (states, 2, 8)
    given_state = [torch.tanh(torch.randn(*shape, generator=g))] if given else []
    if given and kind.startswith("LSTM"):
        given_state.append(torch.randn(*shape, generator=g))
    return (x, *given_state)


@pytest.mark.parametrize("kind, given, layers, bidirectional, batch_first", [
    ("LSTM", True, 2, False, True), ("LSTM", True, 1, True, False), ("LSTM", False, 2, True, False),
    ("GRU", True, 1, False, True), pytest.param("GRU", True, 2, True, False, marks=pytest.mark.slow),
    ("LSTMCell", True, 1, False, False), ("GRUCell", True, 1, False, False), ("LSTMCell", False, 1, False, False)])
def test_given_state_and_c_n_of_any_form_lowered(kind, given, layers, bidirectional, batch_first) -> None:
    """A stacked or bidirectional LSTM's c_n (each layer and direction's kernel cell, joined by a cat) and its given
    (h0, c0) (each layer and direction reads its slice: h0's int8 codes, c0 quantized to its int16 cell), a GRU's
    given h0 (one layer, stacked, bidirectional) and a cell's given state (unsqueezed; an LSTMCell's c read is its
    kernel cell): one kernel per layer and direction, no float op, every output above the state floor against the
    float model: the sequence output and c above 33 dB, h_n (the last steps, in h0's qparams) above 30 dB (measured:
    y 36.7-41.3, c 40.3-43.0, h_n 32.6-40.3 dB; h shares its qparams with the given h0, here over all of (-1, 1))."""
    kw = {} if kind.endswith("Cell") else {"num_layers": layers, "bidirectional": bidirectional,
                                           "batch_first": batch_first}
    model, opts = _State(kind, **kw).eval(), make_options()
    runs = layers * (2 if bidirectional else 1)
    inputs = _state_inputs(kind, given, runs, batch_first, 4)
    data = [inputs] + [_state_inputs(kind, given, runs, batch_first, s) for s in (5, 6)]
    with torch.no_grad():
        low = cortex_m.lower(model, inputs, data, get_target("cortex-m55"), opts)
    entries = installed(opts, EmlkitLstm).report()["lowered"]
    assert len(entries) == runs and all(e["given_state"] == given for e in entries), entries
    op = "emlkit.gru" if "GRU" in kind else "emlkit.lstm"
    ops = program_ops(low)
    assert sum(op in o for o in ops) == runs and not any("aten.lstm" in o or "aten.gru" in o for o in ops), ops
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    got = reference.run_lowered(low.edge, inputs)
    with torch.no_grad():
        want = model(*inputs)
    assert len(got) == len(want)
    # outputs: y, h_n, c_n (LSTM); y, h_n (GRU); h, c (LSTMCell); h (GRUCell)
    floors = {"LSTM": (33.0, 30.0, 33.0), "GRU": (33.0, 30.0), "LSTMCell": (33.0, 33.0), "GRUCell": (33.0,)}[kind]
    for a, f, floor in zip(got, want, floors):
        assert a.shape == f.shape and _snr(a, f) > floor, (_snr(a, f), floor)


def test_cell_format() -> None:
    """|c_t| < t + 1: 0 integer bits for one step, ceil(log2 T) up to 16 steps, then 4."""
    assert [cell_frac_bits(t) for t in (1, 2, 3, 4, 8, 9, 16, 17, 1000)] == [15, 14, 13, 13, 12, 11, 11, 11, 11]


def test_pipelines() -> None:
    # int8 Ethos-U flows too (the layers run on the CPU there, issue 30); int16-activation NPU targets unroll them
    assert_pipelines(EmlkitLstm, on=("cortex-m55", "cortex-m4", "cortex-m0plus", "ethos-u55-128"),
                     off=("ethos-u55-128-a16w8",))
    assert_pipelines(LstmOutputQparams, on=("cortex-m55", "cortex-m4", "ethos-u85-256"), off=("ethos-u85-256-a16w8",))
    assert_pipelines(LstmAsLayers, on=("cortex-m55", "cortex-m33", "ethos-u55-128"), off=("ethos-u55-128-a16w8",))
