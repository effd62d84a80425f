"""A clamp with tensor bounds as a maximum and a minimum (before quantization, Cortex-M).

Matches, in the exported float graph: `aten.clamp.Tensor` (torch.clamp(x, lo, hi) with tensor bounds, either may
be None).

Produces `minimum(maximum(x, lo), hi)`: torch.clamp's definition (a lower bound above the upper one gives hi, as
clamp does).

Why: ExecuTorch 1.5.1's Cortex-M quantizer annotates neither the tensor form of clamp nor its bounds, so the
program read int8 codes with a float clamp and the verifier refused it as broken (random model fam:0);
`maximum` and `minimum` are annotated and run as int8 ops sharing their inputs' qparams.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import FloatRewrite, node_arg, node_val, replace_node
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_quant", ("aten.clamp.Tensor",), order=31, flows=("cortex_m",))
class ClampTensorAsMinMax(FloatRewrite):
    matches = (aten.clamp.Tensor,)
    what = "clamp with tensor bounds as maximum/minimum"

    def rewrite_float(self, gm: torch.fx.GraphModule, n: torch.fx.Node, xv: torch.Tensor, yv: torch.Tensor) -> bool:
        x, lo, hi = n.args[0], node_arg(n, 1, "min"), node_arg(n, 2, "max")
        if lo is None and hi is None:
            return False
        if any(b is not None and node_val(b) is None for b in (lo, hi)):
            return False
        g, made, y, shape = gm.graph, [], x, xv.shape
        with g.inserting_before(n):
            for op, bound in ((aten.maximum.default, lo), (aten.minimum.default, hi)):
                if bound is None:
                    continue
                y = g.call_function(op, (y, bound))
                shape = torch.broadcast_shapes(shape, node_val(bound).shape)  # type: ignore[union-attr]
                y.meta["val"] = torch.empty_like(yv) if shape == yv.shape else yv.new_empty(shape)
                made.append(y)
        replace_node(n, made, y)
        return True
