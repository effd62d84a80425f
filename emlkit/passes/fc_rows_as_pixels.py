"""Linear layers over several rows as one 1x1 convolution over pixels (int16 Ethos-U targets).

Matches, in the exported float graph before quantization annotation,
`aten.linear(x, W, b)` with constant W [N, C] (constant b or none) and an input
x [..., C] whose leading dimensions hold M > 1 rows, when the target is an
Ethos-U target with int16 activations (`ethos-u55-128-a16w8`).

Produces
    permute(conv2d(permute(view(x, [1, M, 1, C]), [0, 3, 1, 2]), W[N, C, 1, 1], b), [0, 2, 3, 1])
viewed back to [..., N]: one image of M x 1 pixels with C channels. In the
NHWC layout the NPU works in, both permutes are the identity on the data
(x is already [1, M, 1, C] in NHWC), so the delegate holds one 1x1 conv.

Why: Vela 5.1.0 miscompiles int16 fully connected stacks at batch > 1 (docs/ethos-u.md,
"Known Vela miscompiles"): the command stream never reads batch rows 1 and 3
of fc_autoencoder's [4, 128] input and is off by up to 951 steps. The same
layers as a 1x1 conv over batch rows ([M, C, 1, 1]) are miscompiled the same
way. Over pixels there is no batch, and Vela's stream is bit-exact with the
TOSA reference. Same arithmetic per row, same per-channel weight scales.
"""

from __future__ import annotations

import math

import torch

from emlkit.passes.graph import (FUSABLE_ACTIVATIONS, LinearOperands, LinearRewrite, conv_val, conv_weight,
                                 replace_linear)
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_quant", ("aten.linear",), order=70, flows=("ethos_u",), bits=("a16w8",))
class FcRowsAsPixels(LinearRewrite):
    what = "linear rows as conv pixels"

    def rewrite_linear(self, gm: torch.fx.GraphModule, n: torch.fx.Node, ops: LinearOperands) -> bool:
        x, w, b_node, xval, lead = ops.x, ops.w, ops.b_node, ops.xval, ops.lead
        rows = math.prod(lead)
        if rows < 2:
            return False
        cout, cin = w.shape
        w4 = conv_weight(gm, n, ops, "_aot_pixel_conv_weight")
        g = gm.graph
        with g.inserting_before(n):
            x2 = g.call_function(aten.view.default, (x, [1, rows, 1, cin]))
            x4 = g.call_function(aten.permute.default, (x2, [0, 3, 1, 2]))
            conv = g.call_function(aten.conv2d.default, (x4, w4, b_node))
            y4 = g.call_function(aten.permute.default, (conv, [0, 2, 3, 1]))
            y = g.call_function(aten.view.default, (y4, [*lead, cout]))
        fake_mode = getattr(xval, "fake_mode", None)
        if fake_mode is not None:
            with fake_mode:
                x2.meta["val"] = xval.reshape(1, rows, 1, cin)
                x4.meta["val"] = x2.meta["val"].permute(0, 3, 1, 2)
                conv.meta["val"] = conv_val(x4, w4, b_node)
                y4.meta["val"] = conv.meta["val"].permute(0, 2, 3, 1)
                y.meta["val"] = y4.meta["val"].reshape(*lead, cout)
        replace_linear(n, (w4, x2, x4, conv, y4, y))
        _hoist_activation(conv, y4, y)
        return True


def _hoist_activation(conv: torch.fx.Node, perm: torch.fx.Node, view: torch.fx.Node) -> None:
    """conv -> permute -> view -> act  becomes  conv -> act -> permute -> view.

    Behind the data movement the quantizer would not fuse the activation into the
    conv's output range. Pointwise, so the order does not change the function.
    """
    users = list(view.users)
    if len(users) != 1 or len(conv.users) != 1 or len(perm.users) != 1:
        return
    act = users[0]
    if act.op != "call_function" or act.target not in FUSABLE_ACTIVATIONS or act.args[0] is not view:
        return
    act.replace_all_uses_with(view)
    act.args = (conv, *act.args[1:])
    perm.args = (act, *perm.args[1:])
    conv.append(act)
    if "val" in conv.meta:
        act.meta["val"] = conv.meta["val"]
