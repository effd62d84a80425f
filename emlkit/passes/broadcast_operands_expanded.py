"""The broadcast operand of an elementwise add, sub or mul expanded to the output's shape (before quantization,
Cortex-M).

Matches, in the exported float graph: `aten.add.Tensor`, `aten.sub.Tensor` or `aten.mul.Tensor` of two computed
float tensors (not constants), one or both of a shape other than the output's, other than a per-channel vector.

Produces `op(expand(a, out_shape), expand(b, out_shape))` for the operands that broadcast: the same function.

Why: ExecuTorch 1.5.1's Cortex-M quantizer annotates an add, sub or mul only when both inputs have one shape or
one is a per-channel vector, so `x - x[:, :, :1]` (a row broadcast over the height) stayed a float op (random model
72:32). An expand shares its input's qparams (the quantizer's shared-qparams ops), so it moves int8 bytes only,
and the op becomes quantized_add/quantized_mul. Constants are left to the passes that fold them (LUT fusion,
scalar_ops_as_tables.py).
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import FloatRewrite, copy_meta, node_val
from emlkit.passes.manager import declare

aten = torch.ops.aten


def _broadcasts(v: torch.Tensor, out: torch.Size) -> bool:
    """Does operand value v broadcast to out, other than as the per-channel vector the quantizer takes?"""
    if v.shape == out:
        return False
    # The quantizer takes that vector only on a 4-D (channels-last) map.
    per_channel = v.dim() == len(out) == 4 and v.shape[1] == out[1] and v.numel() == out[1]
    return not per_channel


@declare("pre_quant", ("aten.add", "aten.sub", "aten.mul"), order=105, flows=("cortex_m",))
class BroadcastOperandsExpanded(FloatRewrite):
    matches = (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor)
    what = "broadcast operands expanded"

    def rewrite_float(self, gm: torch.fx.GraphModule, n: torch.fx.Node, xv: torch.Tensor, yv: torch.Tensor) -> bool:
        ab = n.args[:2]
        if len(ab) != 2 or not all(isinstance(a, torch.fx.Node) and a.op != "get_attr" for a in ab):
            return False
        vals = [node_val(a) for a in ab]
        if any(v is None or not v.is_floating_point() for v in vals):
            return False
        grow = [_broadcasts(v, yv.shape) for v in vals]  # type: ignore[arg-type]
        if not any(grow):
            return False
        args = list(n.args)
        for i, (a, v) in enumerate(zip(ab, vals)):
            if not grow[i]:
                continue
            with gm.graph.inserting_before(n):
                e = gm.graph.call_function(aten.expand.default, (a, list(yv.shape)))
            copy_meta(n, [e])
            e.meta["val"] = v.expand(yv.shape)  # type: ignore[union-attr]
            args[i] = e
        n.args = tuple(args)
        return True

