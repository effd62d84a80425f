"""Streaming LSTM/GRU state (--streaming-state): a model with a two-layer LSTM (sequence output and h_n) and a
two-layer GRU (sequence output and h_n), each layer keeping its own state, compiled once over N frames and once over
one frame, both with --streaming-state and calibrated on the same frames (the one-frame program on them one per
sample, in order). On the host reference, N one-frame executions in sequence give, frame by frame, the N-frame
execution's sequence outputs and, after the last frame, its h_n, bit for bit; a reset (a fresh state) restarts the
sequence. On the device (host build, cortex-m55 MVE, cortex-m4 DSP under QEMU), the one-frame program runs the
frames as N bundled test cases in sequence without a reset and must equal that reference bit for bit; the runner's
warm-up run of case 0 followed by eml_reset_state before the measured cases checks the reset on the device (without
it case 0 would start from the warm-up's state). The N-frame program runs on the device too."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from emlkit import emit, reference, verify
from emlkit.compile import CompileResult, lower_model, make_options, to_executorch
from emlkit.commands import resolve_board
from emlkit.load import load_model
from emlkit.run import execute
from emlkit.targets import get_target
from model_files import module_source

N, FEAT = 6, 5
_LAYERS = """
    self.a = nn.LSTM(5, 8, num_layers=2, batch_first=True)
    self.g = nn.GRU(5, 6, num_layers=2)"""
_FORWARD = """
    ya, (ha, _) = self.a(x)
    yg, hg = self.g(x.transpose(0, 1))
    return ya, ha, yg, hg"""


def _frames() -> tuple[torch.Tensor, list[tuple[torch.Tensor, ...]]]:
    seq = torch.randn(1, N, FEAT, generator=torch.Generator().manual_seed(7))
    return seq, [(seq[:, t:t + 1].clone(),) for t in range(N)]


def _model(tmp: Path, steps: int) -> Path:
    path = tmp / f"stream{steps}.py"
    path.write_text(module_source(_LAYERS, _FORWARD, f"torch.randn(1, {steps}, {FEAT})", name="Stream", seed=4))
    return path


def _lower(tmp: Path, steps: int, calibration: list[tuple[torch.Tensor, ...]], target: str):
    model = load_model(str(_model(tmp, steps)))
    lowered, _ = lower_model(model, get_target(target), make_options(streaming_state=True), calibration,
                             tmp / f"vela{steps}")
    return model, lowered


def _cat_frames(steps: list[list[torch.Tensor]], k: int, time: int) -> torch.Tensor:
    return torch.cat([s[k] for s in steps], dim=time)


def _streams(tmp: Path, target: str):
    """Both programs lowered, and their host references: the N-frame one from zero, the one-frame one frame by
    frame in one stream."""
    seq, frames = _frames()
    whole_model, whole = _lower(tmp, N, [(seq,)], target)
    one_model, one = _lower(tmp, 1, frames, target)
    with torch.no_grad():
        want = reference.run_lowered(whole.edge, (seq,))
        stream: reference.StreamState = {}
        got = [reference.run_lowered(one.edge, f, stream=stream) for f in frames]
    return (whole_model, whole, seq, want), (one_model, one, frames, got)


def test_streaming_reference_equals_the_whole_sequence(tmp_path: Path) -> None:
    (_, whole, seq, want), (_, one, frames, got) = _streams(tmp_path, "cortex-m55")
    for kind in ("lstm", "gru"):
        ops = [n for n in one.edge.exported_program().graph_module.graph.nodes
               if n.op == "call_function" and f"emlkit.{kind}" in str(n.target)]
        assert len(ops) == 2, (kind, ops)                                # one per layer, each with its state
        # state_bytes: the header and (LSTM) int16 c and int8 h of one row of 8, (GRU) int8 h of one row of 6
        assert all(op.args[-1] == (8 + 3 * 8 if kind == "lstm" else 8 + 6) for op in ops), [op.args for op in ops]
        if kind == "lstm":
            assert all(op.args[9] == 11 for op in ops), ops              # the cell format of any length
    # outputs: LSTM y [1, T, 8] (batch first), its h_n [2, 1, 8], GRU y [T, 1, 6] (sequence first), its h_n
    assert torch.equal(_cat_frames(got, 0, 1), want[0])
    assert torch.equal(_cat_frames(got, 2, 0), want[2])
    assert torch.equal(got[-1][1], want[1]) and torch.equal(got[-1][3], want[3])
    # the state matters: after the first frame the outputs differ from a zero-state execution of the same frame
    with torch.no_grad():
        fresh = reference.run_lowered(one.edge, frames[3])
    assert not torch.equal(fresh[0], got[3][0]) and not torch.equal(fresh[2], got[3][2])
    # a reset (a fresh stream) restarts the sequence
    with torch.no_grad():
        again: reference.StreamState = {}
        restart = [reference.run_lowered(one.edge, f, stream=again) for f in frames[:2]]
    assert all(torch.equal(a, b) for r, g in zip(restart, got[:2]) for a, b in zip(r, g))


def bundled(tmp: Path, model, lowered, target: str, cases) -> CompileResult:
    """LOWERED's program with CASES (inputs, expected outputs) bundled, written to TMP."""
    program = to_executorch(lowered, get_target(target))
    stem = f"{model.name}_{target}"
    bundled = emit.bpte_bytes(emit.bundle(program, cases))
    verify.check_device_load(program, bundled, target)
    pte, bpte = tmp / f"{stem}.pte", tmp / f"{stem}.bpte"
    emit.write_pte(program, pte)
    emit.atomic_write(bpte, bundled)
    needs = verify.program_needs(program)
    return CompileResult(model.name, get_target(target), pte, bpte, tmp / f"{stem}.json",
                         {"program_needs": needs.to_dict()})


def streams(tmp: Path, target: str):
    return _streams(tmp, target)


def _device(tmp: Path, model, lowered, target: str, cases, board: str) -> None:
    cres = bundled(tmp, model, lowered, target, cases)
    outcome = execute(cres, resolve_board(board), "qemu", 600, "mve" if target == "cortex-m55" else "portable", None)
    assert outcome.status == "PASS", (outcome.status, outcome.reason, outcome.result)
    res = outcome.result
    assert res.cases == len(cases)
    assert all(o.max_abs == 0 for o in res.outputs), res.outputs


@pytest.mark.parametrize("target, board", [("cortex-m55", "host"), ("cortex-m55", "corstone-300"),
                                           ("cortex-m4", "mps2-an386")])
def test_streaming_on_the_device(tmp_path: Path, target: str, board: str) -> None:
    (wm, whole, seq, want), (om, one, frames, got) = _streams(tmp_path, target)
    _device(tmp_path, om, one, target, list(zip(frames, got)), board)
    _device(tmp_path, wm, whole, target, [((seq,), want)], board)


@pytest.mark.parametrize("layers, forward, words", [
    ("self.a = nn.GRU(5, 4, bidirectional=True)", "return self.a(x)[0]", "bidirectional GRU"),
    ("self.a = nn.LSTM(5, 4)", "return self.a(x, (torch.ones(1, 1, 4), torch.zeros(1, 1, 4)))[0]",
     "has no int8 kernel here"),
    ("self.a = nn.GRU(5, 4, num_layers=2)", "return self.a(x, x[:2, :, :4])[0]", "is given an initial state")])
def test_streaming_refuses_what_cannot_stream(tmp_path: Path, layers: str, forward: str, words: str,
                                              emlkit_cli) -> None:
    """A bidirectional layer; an LSTM the int8 kernel does not take (here: a constant initial state), which in
    float would not keep its state; a GRU given an initial state (a view of the model's input), which a stream
    would ignore: one line naming the layer and its source line, status 4."""
    path = tmp_path / "bi.py"
    path.write_text(module_source(layers, forward, "torch.randn(3, 1, 5)", name="Bi"))
    proc = emlkit_cli(["compile", path, "--target", "cortex-m4", "--streaming-state", "-o", tmp_path / "o"])
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and words in lines[0] and "bi.py:" in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_streaming_is_for_cortex_m_targets(tmp_path: Path, emlkit_cli) -> None:
    proc = emlkit_cli(["compile", "conv_relu", "--target", "ethos-u55-128", "--streaming-state", "-o", tmp_path / "o"])
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "--streaming-state is for the Cortex-M targets" in lines[0], proc.stderr[-2000:]
