"""Quantizer annotation: activations the Cortex-M fold would get wrong keep their own quantization.

Targets (Cortex-M flow, the graph the quantizer annotates) an activation that
reads a conv, linear or add/sub directly and that ExecuTorch's CortexMQuantizer
annotates together with it as one fused pattern:
1. `relu`, `hardtanh`, `clamp` or `hardsigmoid` (in-place forms too) whose
   output reaches, through ops that only move data, an op that shares one set
   of qparams between several inputs (`cat`, `stack`, `minimum`, `maximum`);
2. every `hardsigmoid`.

Why: a fused pattern has no quantize between producer and activation;
ActivationFusionPass later folds the activation into the producer's output
qparams.
1. That fold is only possible when the activation's output qparams are the
   activation's own range. A concat shares one observer over all its inputs, so
   the other branches widen that range, the fold is refused, and the producer is
   left with no output qparams: a float `aten.convolution` reading int8 data,
   which our verifier rejects ("float kernel reads integer tensor"). (The
   Ethos-U flow has its own fix for ReLU -> cat: explicit_npu_clamp.py.)
2. For hardsigmoid the fold moves the zero point by round(1 / (2 * scale)), a
   rounding of up to half a step added to every output (127.5 -> 128 for a
   [0, 1] range): conv_hardsigmoid 56.0 dB against 57.3 dB on ethos-u55-128, whose
   quantizer also quantizes the conv and the hardsigmoid separately.

What this does: before ExecuTorch's pattern quantizers run, it annotates such
an activation on its own (int8 per-tensor input and output, the quantizer's
activation spec) and marks it as matched, so the pattern matcher falls back
to the producer alone (which then gets its own output qparams). The
activation becomes `dequantize -> act -> quantize`, which LUT fusion turns
into one exact table lookup per element.
"""

from __future__ import annotations


import torch

from emlkit.passes.graph import PASS_THROUGH, QuantizerHook, reaches
from emlkit.passes.manager import declare

aten = torch.ops.aten

ACTIVATIONS = {
    aten.relu.default, aten.relu_.default, aten.hardtanh.default, aten.hardtanh_.default,
    aten.clamp.default, aten.clamp_.default, aten.hardsigmoid.default, aten.hardsigmoid_.default,
}
HARDSIGMOID = {aten.hardsigmoid.default, aten.hardsigmoid_.default}
# Producers the Cortex-M quantizer fuses one of the activations above into.
PRODUCERS = {
    aten.conv1d.default, aten.conv2d.default, aten.conv_transpose2d.input, aten.linear.default,
    aten.add.Tensor, aten.add_.Tensor, aten.sub.Tensor, aten.sub_.Tensor,
}
# Ops that share one set of qparams over several inputs and their output.
SHARING = {aten.cat.default, aten.concat.default, aten.stack.default, aten.minimum.default,
           aten.maximum.default}


def _float_tensor_inputs(n: torch.fx.Node) -> int:
    count = 0
    for a in n.all_input_nodes:
        val = a.meta.get("val")
        if isinstance(val, torch.Tensor) and val.dtype.is_floating_point:
            count += 1
    return count


def reaches_shared_concat(act: torch.fx.Node) -> bool:
    """Does `act`'s output flow, through pass-through ops, into a multi-input qparam-sharing op?"""
    def verdict(u: torch.fx.Node) -> bool | None:
        if u.target in SHARING:
            args = u.args[0] if u.target in (aten.cat.default, aten.concat.default, aten.stack.default) else u.args
            if isinstance(args, (list, tuple)) and sum(isinstance(a, torch.fx.Node) for a in args) > 1:
                return True
            return None
        return None if u.target in PASS_THROUGH else False

    return reaches(act, verdict)


def candidates(gm: torch.fx.GraphModule, hardsigmoid: bool = True) -> list[torch.fx.Node]:
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target not in ACTIVATIONS:
            continue
        src = n.args[0]
        if not isinstance(src, torch.fx.Node) or src.op != "call_function" or src.target not in PRODUCERS:
            continue
        if (hardsigmoid and n.target in HARDSIGMOID) or reaches_shared_concat(n):
            out.append(n)
    return out


@declare("quantizer_hook", ("aten.relu", "aten.hardtanh", "aten.clamp", "aten.hardsigmoid"),
         order=140, flows=("cortex_m",))
class ActivationAlone(QuantizerHook):
    # Tried on Ethos-U: the Arm flow's wrong ReLU -> cat lowering stays wrong (72 steps instead of 28).
    report_name = "annotated_alone"
    alone = candidates
    alone_what = "activations quantized on their own"
