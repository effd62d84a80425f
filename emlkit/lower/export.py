"""torch.export with the settings every flow needs, export errors made readable, and the quantization
steps every flow shares (our passes around torchao's prepare/calibrate/convert)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from emlkit.errors import EXIT_UNSUPPORTED, AotError
from emlkit.lower import LowerOptions, apply_quantizer_hooks


@contextlib.contextmanager
def _no_fused_attention() -> Iterator[None]:
    """nn.MultiheadAttention and nn.TransformerEncoderLayer take a fused fast path in eval mode without grad
    (aten::_native_multi_head_attention, aten::_transformer_encoder_layer_fwd): single ops no backend lowers or
    quantizes. PyTorch's public switch makes them export as the matmuls, softmax and layer norms they are."""
    was = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(was)


def export_module(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.export.ExportedProgram:
    try:
        with _no_fused_attention():
            return torch.export.export(module, inputs, strict=True)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AotError(
            f"model failed to export with torch.export: {type(exc).__name__}: {first} "
            "(make forward() traceable: no data-dependent Python control flow; run with --verbose for the trace)",
            EXIT_UNSUPPORTED,
        ) from exc


def export_graph(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.fx.GraphModule:
    # check_guards=False: the guard submodule it would add is rejected by ExecuTorch's passes.
    return export_module(module, inputs).module(check_guards=False)


class _StreamCalibration(torch.fx.Interpreter):
    """Runs the observed model with every single-layer, one-direction LSTM/GRU stepped one frame at a time from the
    state the previous step (of this sample or the previous one) left: the calibration samples form one stream, as
    a --streaming-state program sees its calls. Stepping every sequence frame by frame (not one call over all frames)
    makes the observed values those a one-frame model fed the same frames computes, bit for bit, so a one-frame and
    an N-frame program of the same model and frames get the same qparams."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.states: dict[str, list[torch.Tensor]] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        from emlkit.passes.graph import GRU_OPS, LSTM_OPS

        if n.op != "call_function" or n.target not in (LSTM_OPS | GRU_OPS) or len(n.args) < 9:
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        x, hx, rest = args[0], args[1], list(args[2:])
        layers, bidirectional, batch_first = rest[2], rest[5], rest[6]
        if layers != 1 or bidirectional:
            return super().run_node(n)
        gru = n.target in GRU_OPS
        state = self.states.get(n.name) or ([hx] if gru else list(hx))
        time = 1 if batch_first else 0
        ys = []
        for t in range(x.shape[time]):
            out = n.target(x.narrow(time, t, 1).contiguous(), state[0] if gru else state, *rest, **kwargs)
            ys.append(out[0])
            state = list(out[1:])
        self.states[n.name] = [s.detach() for s in state]
        return (torch.cat(ys, time), *state)


def calibrate(prepared: torch.fx.GraphModule, calibration: list[tuple[torch.Tensor, ...]],
              streaming: bool = False) -> None:
    """Feed the observers every sample; STREAMING: in order, as one stream (_StreamCalibration)."""
    stream = _StreamCalibration(prepared) if streaming else None
    for sample in calibration:
        if stream is None:
            prepared(*sample)
        else:
            stream.run(*sample)


def quantize(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], calibration: list[tuple[torch.Tensor, ...]],
             quantizer: Any, target: Any, options: LowerOptions) -> torch.fx.GraphModule:
    """Export, pre-quant passes, annotate (quantizer hooks), calibrate, convert, pre-edge passes."""
    graph = export_graph(module, inputs)
    for p in options.pre_quant_passes:
        graph = p(graph)
    prepared = prepare_pt2e(graph, apply_quantizer_hooks(quantizer, target, options))
    calibrate(prepared, calibration, options.streaming_state)
    quantized = convert_pt2e(prepared)
    for p in options.pre_edge_passes:
        quantized = p(quantized)
    return quantized
