"""Quantizer annotation (Cortex-M and int8 Ethos-U): an LSTM layer's input and sequence output get int8 per-tensor qparams.

Targets: `aten.lstm.input` and `aten.gru.input` calls the int8 kernels take (graph.lstm_layer: one unidirectional
layer, zero initial state, constant weights, the sequence output read and, for an LSTM, c_n: that stays float,
emlkit_lstm.py dequantizes the kernel's int16 cell into it; a given (h0, c0) (a GRU: h0): h0's edge shares the
sequence output's qparams, c0 and the slice of it a stacked layer reads stay float, emlkit_lstm.py quantizes it to
the cell format).

Why: ExecuTorch's CortexMQuantizer does not annotate `aten.lstm`; its output reached a quantize only after the
next op (a select or view), so no `dequantize -> lstm -> quantize` region existed for emlkit_lstm.py to lower.

On Ethos-U, Arm's quantizer unrolls every LSTM and GRU in its transform for annotation (before any annotation
step): those layers are renamed to emlkit::lstm_hold / gru_hold for that transform and back after it (WithSteps'
`hide`), and their zero initial states are claimed unquantized, so emlkit_lstm.py finds them whole and puts them on
the CPU; the partitioner gives the NPU the rest.

What this does: before the pattern quantizers run, the LSTM's input edge and the `getitem` of its sequence
output are annotated with the quantizer's int8 per-tensor activation spec (observers of their own) and marked
as matched. The converted graph then holds `dequantize -> lstm -> getitem -> quantize`. An LSTM whose c_n alone is
read has no sequence output to observe (convert drops its unread quantize): only its input is annotated, its h
codes are fixed at graph.H_ALONE_QPARAMS (h = o * tanh(c) is in (-1, 1)), and a given h0's edge gets those fixed
qparams.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import torch
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, SharedQuantizationSpec
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

from emlkit.lower.quantizer_steps import WithSteps
from emlkit.passes.graph import (H_ALONE_QPARAMS, LSTM_OPS, STATE_VIEWS, QuantizerHook, lstm_layer, lstm_zero_state,
                                 matched_key, state_root)
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)


def annotate_lstms(model: torch.fx.GraphModule, record: list[str]) -> None:
    from executorch.backends.cortex_m.quantizer.quantization_configs import INT8_ACTIVATION_PER_TENSOR_QSPEC

    qspec, key = INT8_ACTIVATION_PER_TENSOR_QSPEC, matched_key()
    for n in list(model.graph.nodes):
        layer = lstm_layer(model, n)
        if layer is None:
            continue
        edges: dict[Any, Any] = {layer.x: qspec}
        out_spec: Any = qspec
        if layer.state is not None:          # a given h0 in h's codes: the kernel feeds h back in those
            edges[layer.state[0]] = qspec    # (the output shares h0's edge: prepare observes that edge first)
            out_spec = SharedQuantizationSpec((layer.state[0], n))
            if layer.output is None:         # c_n read alone: h's codes are fixed (graph.H_ALONE_QPARAMS)
                edges[layer.state[0]] = _h_alone_qspec()
        c0s = list(layer.state[1:]) if layer.state is not None else []
        for c0 in [c for c in c0s if state_root(c).op not in ("placeholder", "get_attr")]:
            edges[c0] = qspec  # a computed c0 reaches the LSTM as int8 codes (emlkit_lstm.py: then the int16 cell)
            c0s.remove(c0)
        n.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(edges, None, _annotated=True)
        n.meta[key] = True
        if layer.output is not None:
            layer.output.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation({}, out_spec, _annotated=True)
            layer.output.meta[key] = True
        zero_fills = [h for h in (n.args[1] if isinstance(n.args[1], (list, tuple)) else [n.args[1]])
                      if isinstance(h, torch.fx.Node) and h.op == "call_function" and len(h.users) == 1
                      and lstm_zero_state(model, h)] if layer.state is None else []
        for node in [*_float_c0(c0s), *zero_fills]:
            # c0 stays float up to the LSTM (the model's input, a stacked layer's slice of it, a cell's unsqueeze):
            # emlkit_lstm.py quantizes it to the int16 cell, which an int8 quantize on the way would coarsen; a zero
            # state stays the fill emlkit_lstm.py recognises (Arm's quantizer would give it a quantize of its own)
            node.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation({}, None, _annotated=True)
            node.meta[key] = True
        record.append(n.name)
    if record:
        log.debug("LSTM layers given int8 input and output qparams: %s", ", ".join(record))


def _h_alone_qspec() -> Any:
    from torchao.quantization.pt2e.quantizer import FixedQParamsQuantizationSpec

    scale, zp = H_ALONE_QPARAMS
    return FixedQParamsQuantizationSpec(dtype=torch.int8, scale=scale, zero_point=zp, quant_min=-128, quant_max=127,
                                        qscheme=torch.per_tensor_affine)


def _float_c0(states: Any) -> list[torch.fx.Node]:
    """A given c0's path from the model's input (or a constant) to the LSTM (graph.lstm_layer's given-state views):
    the nodes to keep float, the input itself when it is only ever read as an LSTM's c0."""
    path: list[torch.fx.Node] = []
    for node in states:
        while node.op == "call_function" and node.target in STATE_VIEWS and isinstance(node.args[0], torch.fx.Node):
            path.append(node)
            node = node.args[0]
        if all(_reads_as_c0(u, node) for u in node.users):
            path.append(node)
    return path


def _reads_as_c0(user: torch.fx.Node, src: torch.fx.Node) -> bool:
    """Whether USER reads SRC only as an LSTM's c0, itself or through views that all do."""
    if user.op != "call_function":
        return False
    if user.target in STATE_VIEWS:
        return user.args[0] is src and all(_reads_as_c0(u, user) for u in user.users)
    hx = user.args[1] if user.target in LSTM_OPS and len(user.args) > 1 else None
    return isinstance(hx, (list, tuple)) and len(hx) == 2 and hx[1] is src and hx[0] is not src and \
        user.args[0] is not src


def _holds() -> dict[Any, Any]:
    import emlkit.emlkit_ops  # noqa: F401  (defines the emlkit::*_hold ops)

    return {torch.ops.aten.lstm.input: torch.ops.emlkit.lstm_hold.default,
            torch.ops.aten.gru.input: torch.ops.emlkit.gru_hold.default}


def hide_kernel_layers(model: torch.fx.GraphModule) -> Callable[[torch.fx.GraphModule], None]:
    """Rename every layer the int8 kernels take (graph.lstm_layer) to its emlkit::*_hold stand-in, so the target
    quantizer's graph transform (Arm's unrolls LSTMs and GRUs into per-step ops for the NPU) leaves it whole;
    the step returned renames them back."""
    holds = _holds()
    held = [n for n in model.graph.nodes if n.op == "call_function" and n.target in holds and lstm_layer(model, n)]
    for n in held:
        n.target = holds[n.target]
    if held:
        model.recompile()
    back = {v: k for k, v in holds.items()}

    def restore(m: torch.fx.GraphModule) -> None:
        found = [n for n in m.graph.nodes if n.op == "call_function" and n.target in back]
        for n in found:
            n.target = back[n.target]
        if found:
            m.recompile()
    return restore


@declare("quantizer_hook", ("aten.lstm", "aten.gru"), order=165, bits=("int8",))
class LstmOutputQparams(QuantizerHook):
    report_name = "annotated"

    def configure(self, quantizer: Any, target: Any) -> Any:
        return WithSteps(quantizer, before=lambda m: annotate_lstms(m, self.done), hide=hide_kernel_layers)
