"""BatchNorm folded into the Linear layer before it (Cortex-M flow, before quantization).

Matches, in the exported float graph, `aten.batch_norm(y, gamma, beta, mean,
var, training=False, momentum, eps)` whose input `y = aten.linear(x, W, b)` is
used by nothing else, with W, b, gamma, beta, mean and var constants and the
normalized channel axis being the linear's feature axis (a 2-D [N, C] input,
the shape `nn.BatchNorm1d` after `nn.Linear` sees).

Produces `aten.linear(x, W', b')` with
    k = gamma / sqrt(var + eps),  W' = W * k[:, None],  b' = (b - mean) * k + beta.
Same function in float.

Why: torchao's prepare_pt2e folds BatchNorm into a preceding convolution but
not into a Linear layer; the Cortex-M quantizer has no BatchNorm pattern, so
each `nn.BatchNorm1d` stayed a float op on the CPU between a dequantize and a
quantize (a float island our verifier refuses; accepted with --allow-float it
costs accuracy: the Linear's output is quantized before the normalization
rescales it, 21.6 dB on an autoencoder the NPU flow, which folds it, runs at
34 dB). Folded, the layer quantizes its final weights and output range.
"""

from __future__ import annotations


import torch

from emlkit.passes.graph import Rewrite, const_tensor, copy_meta, folded_params, rewrite_calls
from emlkit.passes.manager import declare

aten = torch.ops.aten


# The Arm flow folds BatchNorm itself.
@declare("pre_quant", ("aten.linear", "aten.batch_norm"),
         runs_after=("Conv1dAsConv2d",), runs_before=("LinearToConv", "FcRowsAsPixels"),
         order=30, flows=("cortex_m",))
class FoldLinearBatchNorm(Rewrite):
    report_name = "folded"

    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        return rewrite_calls(gm, aten.batch_norm.default, self._fold, "batch norm folded into linear")

    def _fold(self, gm: torch.fx.GraphModule, bn: torch.fx.Node) -> bool:
        y = bn.args[0]
        if not isinstance(y, torch.fx.Node) or y.op != "call_function" or y.target is not aten.linear.default:
            return False
        if len(y.users) != 1:
            return False
        yval = y.meta.get("val")
        if not isinstance(yval, torch.Tensor) or yval.dim() != 2:
            return False      # BatchNorm1d on [N, C, L] normalizes C, not the linear's feature axis
        w = const_tensor(gm, y.args[1])
        b_node = y.args[2] if len(y.args) > 2 else y.kwargs.get("bias")
        b = const_tensor(gm, b_node) if b_node is not None else None
        if w is None or (b_node is not None and b is None):
            return False
        params = folded_params(gm, bn, w, b, "_aot_bn_folded", y, getattr(yval, "fake_mode", None))
        if params is None:
            return False
        w_get, b_get = params
        g = gm.graph
        with g.inserting_after(y):
            lin = g.call_function(aten.linear.default, (y.args[0], w_get, b_get))
        copy_meta(y, [lin])
        lin.meta["val"] = yval
        bn.replace_all_uses_with(lin)
        g.erase_node(bn)
        g.erase_node(y)
        return True
