"""A BatchNorm that follows no convolution, as a 1x1 depthwise convolution (Cortex-M flow, before quantization).

Matches, in the exported float graph, `aten.batch_norm(x, gamma, beta, mean, var, training=False, momentum, eps)`
on a 4-D x with constant statistics, where x is not a convolution that prepare_pt2e folds the BatchNorm into
(one read by the BatchNorm alone).

Produces `aten.conv2d(x, W, b, groups=C)` with W [C, 1, 1, 1] = gamma / sqrt(var + eps) and
b = beta - mean * W: the same per-channel affine map in float.

Why: the Cortex-M quantizer has no BatchNorm pattern, so a BatchNorm after a PReLU, an activation, a pool or an
input stayed a float op between a dequantize and a quantize and the model was refused (the random-model
generator's `batchnorm` block after a PReLU, seed 71:11). As a depthwise convolution it gets per-channel int8
weights and its own output range, and runs on the depthwise kernels.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import Rewrite, copy_meta, folded_params, rewrite_calls
from emlkit.passes.manager import declare

aten = torch.ops.aten

# Convolutions prepare_pt2e folds a following BatchNorm into.
_CONVS = {aten.conv1d.default, aten.conv2d.default, aten.convolution.default, aten.conv_transpose2d.input}


@declare("pre_quant", ("aten.batch_norm",), runs_after=("Conv1dAsConv2d", "FoldLinearBatchNorm"), order=34,
         flows=("cortex_m",))
class BatchNormAsDepthwise(Rewrite):
    report_name = "as_depthwise"

    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        return rewrite_calls(gm, aten.batch_norm.default, self._rewrite, "batch norm as a depthwise convolution")

    def _rewrite(self, gm: torch.fx.GraphModule, bn: torch.fx.Node) -> bool:
        x = bn.args[0]
        xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if not isinstance(xval, torch.Tensor) or xval.dim() != 4 or not xval.is_floating_point():
            return False
        if x.op == "call_function" and x.target in _CONVS and len(x.users) == 1:
            return False  # folded into the convolution by prepare_pt2e
        c = xval.shape[1]
        params = folded_params(gm, bn, torch.ones(c, 1, 1, 1, dtype=xval.dtype), None, "_aot_bn_depthwise", bn,
                               getattr(xval, "fake_mode", None))
        if params is None:
            return False
        w_get, b_get = params
        g = gm.graph
        with g.inserting_after(b_get):
            conv = g.call_function(aten.conv2d.default, (x, w_get, b_get, [1, 1], [0, 0], [1, 1], c))
        copy_meta(bn, [conv])
        conv.meta["val"] = bn.meta.get("val")
        bn.replace_all_uses_with(conv)
        g.erase_node(bn)
        return True
