"""Quantizer annotation (Cortex-M): an LSTM layer's input and sequence output get int8 per-tensor qparams.

Targets: `aten.lstm.input` and `aten.gru.input` calls the int8 kernels take (graph.lstm_layer: one unidirectional
layer, zero initial state, constant weights, the sequence output read and, for an LSTM, c_n: that stays float,
emlkit_lstm.py dequantizes the kernel's int16 cell into it; a given (h0, c0): h0's edge shares the sequence
output's qparams, c0 stays float, emlkit_lstm.py quantizes it to the cell format).

Why: ExecuTorch's CortexMQuantizer does not annotate `aten.lstm`; its output reached a quantize only after the
next op (a select or view), so no `dequantize -> lstm -> quantize` region existed for emlkit_lstm.py to lower.

What this does: before the pattern quantizers run, the LSTM's input edge and the `getitem` of its sequence
output are annotated with the quantizer's int8 per-tensor activation spec (observers of their own) and marked
as matched. The converted graph then holds `dequantize -> lstm -> getitem -> quantize`.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, SharedQuantizationSpec
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

from emlkit.lower.quantizer_steps import WithSteps
from emlkit.passes.graph import QuantizerHook, lstm_layer, matched_key
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
        n.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(edges, None, _annotated=True)
        layer.output.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation({}, out_spec, _annotated=True)
        n.meta[key] = layer.output.meta[key] = True
        record.append(n.name)
    if record:
        log.debug("LSTM layers given int8 input and output qparams: %s", ", ".join(record))


@declare("quantizer_hook", ("aten.lstm", "aten.gru"), order=165, flows=("cortex_m",))
class LstmOutputQparams(QuantizerHook):
    report_name = "annotated"

    def configure(self, quantizer: Any, target: Any) -> Any:
        return WithSteps(quantizer, before=lambda m: annotate_lstms(m, self.done))
