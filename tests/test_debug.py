"""`emlkit debug`: the firmware records every call's output as ETDump debug events (read back here and by
ExecuTorch's Inspector), each is matched to its graph node, compared with the host reference (0 steps) and the
float model (SNR); a deliberately wrong layer is named as the first departure; bad input is one line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from emlkit.cli import main
from emlkit.debug import DebugReport, debug_model
from emlkit.errors import EXIT_USAGE
from emlkit.requests import HOST, DebugRequest, ProgramSpec
from emlkit.targets import get_target

CONV = "cortex_m.quantized_conv2d.default"


def _request(tmp_path: Path, model: str = "digits_cnn", target: str = "cortex-m55", board: Any = HOST) -> DebugRequest:
    return DebugRequest(ProgramSpec(model, get_target(target)), tmp_path, board)


@pytest.fixture(scope="module")
def digits_host(tmp_path_factory: pytest.TempPathFactory) -> DebugReport:
    return debug_model(_request(tmp_path_factory.mktemp("debug")))


def test_every_call_is_recorded_matched_and_exact(digits_host: DebugReport) -> None:
    rep = digits_host
    ops = [r.op for r in rep.layers]
    assert ops[0] == "cortex_m::quantize_per_tensor" and ops[-1] == "cortex_m::dequantize_per_tensor", ops
    assert sum("conv2d" in op for op in ops) == 3, ops                 # two convs and the classifier as a 1x1 conv
    assert all(r.node for r in rep.layers), [r.instruction for r in rep.layers if not r.node]
    assert all(r.steps == 0 for r in rep.layers), [(r.op, r.steps) for r in rep.layers]
    assert rep.first_departure is None
    # The float tensors the layers stand for: the input, the ReLUs folded into the convs, the classifier.
    assert [r.float_node for r in rep.layers][:3] == ["x", "relu", "relu_1"]
    assert rep.layers[-1].float_node == "linear"
    snrs = [r.snr_db for r in rep.layers]
    assert all(s is not None and 25.0 < s < 80.0 for s in snrs), snrs
    assert rep.layers[1].drop_db == pytest.approx(rep.layers[0].snr_db - rep.layers[1].snr_db)
    assert rep.worst and all(rep.layers[i].drop_db > 0 for i in rep.worst)
    assert rep.plot and Path(rep.plot).stat().st_size > 10_000
    assert rep.layers[1].module == "features.0" and rep.layers[1].source.startswith("digits_cnn.py:")


def test_recorded_outputs_are_the_host_reference_values(digits_host: DebugReport) -> None:
    """The debug buffer holds each output in logical order: the channels-last conv outputs compare equal with the
    reference (above), and here the last one decodes to the program's output the reference gives."""
    from emlkit.debug import device_outputs

    rec, names = device_outputs(Path(digits_host.etdump).read_bytes(), Path(digits_host.debug_buffer).read_bytes())
    assert sorted(rec) == [r.instruction for r in digits_host.layers]
    assert names[0] == "cortex_m::quantize_per_tensor.out"
    assert rec[max(rec)].dtype == torch.float32 and rec[max(rec)].shape == (1, 10)


def test_executorch_inspector_reads_the_debug_events(digits_host: DebugReport) -> None:
    from executorch.devtools import Inspector

    from emlkit.debug import device_outputs
    from emlkit.etdump import _register_ops

    _register_ops()
    ins = Inspector(etdump_path=digits_host.etdump, etrecord=digits_host.etrecord,
                    debug_buffer_path=digits_host.debug_buffer)
    ours, _ = device_outputs(Path(digits_host.etdump).read_bytes(), Path(digits_host.debug_buffer).read_bytes())
    seen = 0
    for e in ins.event_blocks[0].events:
        instr = getattr(e, "_instruction_id", None)
        if instr in ours and e.debug_data:
            assert torch.equal(e.debug_data[0], ours[instr]), e.name
            seen += 1
    assert seen == len(ours)


def _bump_shift(k: int) -> Any:
    """A tamper: the k-th quantized conv's requantization shifts made one larger, as a wrong shift in a kernel
    would make its outputs; returns the callable and a holder for that conv's node name."""
    hit: dict[str, str] = {}

    def tamper(edge: Any) -> None:
        ep = edge.exported_program()
        convs = [n for n in ep.graph.nodes if n.op == "call_function" and CONV in str(n.target)]
        conv = convs[k]
        shifts = conv.args[9]
        sig = ep.graph_signature
        name = (sig.inputs_to_lifted_tensor_constants.get(shifts.name) or sig.inputs_to_buffers.get(shifts.name)
                or sig.inputs_to_parameters.get(shifts.name))
        table = ep.constants if name in ep.constants else ep.state_dict
        table[name].add_(1)
        hit["node"] = conv.name

    return tamper, hit


def test_a_wrong_layer_is_named_first(tmp_path: Path) -> None:
    tamper, hit = _bump_shift(0)
    rep = debug_model(_request(tmp_path), tamper=tamper)
    assert rep.first_departure is not None
    bad = rep.layers[rep.first_departure]
    assert bad.node == hit["node"] and bad.steps > 0, bad
    assert all(r.steps == 0 for r in rep.layers[:rep.first_departure])
    assert main(["debug", "digits_cnn", "--target", "cortex-m55", "--board", "host", "-o", str(tmp_path / "ok")]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("target", ["cortex-m55", "ethos-u55-128"])
def test_on_the_simulator(tmp_path: Path, target: str) -> None:
    """Through QEMU: the runner's semihosted debug.bin, and for Ethos-U the co-simulated NPU's delegate output."""
    code = main(["debug", "digits_cnn", "--target", target, "-o", str(tmp_path)])
    assert code == 0
    rep = json.loads((tmp_path / f"digits_cnn_{target}_debug.json").read_text())
    assert rep["sim"] == "qemu" and rep["first_departure"] is None
    assert all(r["steps"] == 0 for r in rep["layers"])
    assert (tmp_path / f"digits_cnn_{target}_debug.png").is_file()
    if target.startswith("ethos"):
        assert any(r["op"] == "delegate:EthosUBackend" for r in rep["layers"])
        checked = [c for c in rep["npu_commands"] if c["steps"] is not None]
        assert len(checked) >= 3 and all(c["steps"] == 0 for c in checked), rep["npu_commands"]
        assert {c["op"] for c in checked} >= {"CONV", "POOL_MAX"}
        # each of those commands' OFM is one quantize of the delegate's graph: it gets an SNR against float there,
        # and the last one's is the delegate output's (the CPU table's delegate row)
        with_snr = [c for c in checked if c["snr_db"] is not None]
        assert {c["op"] for c in with_snr} >= {"CONV", "POOL_MAX"} and all(c["float_node"] for c in with_snr)
        delegate = next(r for r in rep["layers"] if r["op"] == "delegate:EthosUBackend")
        assert with_snr[-1]["snr_db"] == pytest.approx(delegate["snr_db"], abs=0.01)
    snr = [r["snr_db"] for r in rep["layers"] if r["snr_db"] is not None]
    assert snr and all(isinstance(s, float) and math.isfinite(s) for s in snr)


@pytest.mark.parametrize("extra, words", [
    (["--inputs", "missing.pt"], ["--inputs", "no such file"]),
    (["--inputs", "CORRUPT"], ["--inputs file", "is not a torch .pt file"]),
    (["--target", "cortex-m99"], ["cortex-m99"]),
])
def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                               words: list[str]) -> None:
    args = ["debug", "digits_cnn", "--board", "host", "-o", str(tmp_path)]
    if "CORRUPT" in extra:
        bad = tmp_path / "corrupt.pt"
        bad.write_bytes(b"not a pickle")
        extra = [str(bad) if e == "CORRUPT" else e for e in extra]
    if "--target" not in extra:
        args += ["--target", "cortex-m55"]
    try:
        code = main(args + extra)
    except SystemExit as e:  # argparse refuses an unknown target itself
        code = int(e.code)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == EXIT_USAGE and "Traceback" not in err, err
    assert all(w in lines[-1] for w in words), lines


def test_suggest_measures_each_remedy(tmp_path: Path, digits_host: DebugReport) -> None:
    """The remedies are compiled and measured: the as-compiled figure is the output SNR the device run showed
    (the device equals the reference), and every remedy has a figure or says why it has none."""
    import dataclasses

    from emlkit.debug import _suggest

    req = dataclasses.replace(_request(tmp_path), suggest=True)
    rep = dataclasses.replace(digits_host)
    _suggest(req, rep)
    assert rep.remedies is not None and rep.remedies["as_compiled_db"] == pytest.approx(rep.layers[-1].snr_db, abs=1e-6)
    by = {r["name"]: r for r in rep.remedies["remedies"]}
    assert set(by) == {"per-channel weights", "more calibration data", "int16 activations (a16w8)",
                       "the layer in int16 (a16w8)", "the layer in float"}
    assert by["the layer in int16 (a16w8)"]["output_snr_db"] is None  # Cortex-M: int8 kernels only
    more = by["more calibration data"]
    assert isinstance(more["output_snr_db"], float) and more["gain_db"] == pytest.approx(
        more["output_snr_db"] - rep.remedies["as_compiled_db"])
    assert "already per channel" in by["per-channel weights"]["note"]
    assert "no a16w8 variant" in by["int16 activations (a16w8)"]["note"]
    flt = by["the layer in float"]
    # measured on the program, or (when ExecuTorch cannot lower it) on the quantize-dequantize model, said so
    assert isinstance(flt["output_snr_db"], float), flt
    assert not flt["note"] or flt["note"].startswith("measured on the quantize-dequantize model"), flt


@pytest.mark.slow
def test_one_layer_in_int16_on_ethos_u(tmp_path: Path) -> None:
    """On Ethos-U the worst layer alone gets int16 activations: the quantizer annotated that module's nodes int16
    (recorded, so a name that matched nothing cannot pass), and the program compiles through Vela and runs on
    the host reference to a finite SNR."""
    from emlkit.debug_suggest import _layer_a16w8
    from emlkit.compile import make_options
    from emlkit.load import load_model
    from emlkit.targets import TARGETS

    model = load_model("digits_cnn")
    rem = _layer_a16w8(model, TARGETS["ethos-u55-128"], make_options(), [model.inputs], model.inputs, "features.0",
                       tmp_path, 0.0)
    assert rem.output_snr_db is not None and math.isfinite(rem.output_snr_db), rem
    assert rem.gain_db == pytest.approx(rem.output_snr_db)
    none = _layer_a16w8(model, TARGETS["ethos-u55-128"], make_options(), [model.inputs], model.inputs, "no.such",
                        tmp_path / "none", 0.0)
    assert none.output_snr_db is None and "no node of module no.such" in none.note
