"""A sum over dimensions as their mean times the number of elements summed (before quantization, Cortex-M).

Matches, in the exported float graph: `aten.sum.dim_IntList` of a float tensor over any of its dimensions (trailing,
leading or in between: mean_as_pool.py lowers each such mean, and ExecuTorch the spatial mean) and `aten.sum.default`
(every element), without a dtype change.

Produces `mean(x, dims, keepdim) * R`, R the number of elements each output sums: the same value. A sum over
dimensions of size 1 only (R = 1) is a `reshape` to its output's shape.

Why: ExecuTorch 1.5.1's Cortex-M quantizer leaves a sum as a float op (random model fam:26, `torch.sum(x, (3,),
keepdim=True)`, was refused; `torch.sum(x, 0)` over a leading dim was too); a mean runs as an int8 average pool
with its own output qparams (mean_as_pool.py, which moves leading reduced dims last with an int8 permute) and the
product by a constant as an int8 table.
"""

from __future__ import annotations

import math

import torch

from emlkit.passes.graph import FloatRewrite, node_arg, replace_node
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_quant", ("aten.sum",), runs_before=("MeanAsPool",), order=24, flows=("cortex_m",))
class SumAsMean(FloatRewrite):
    matches = (aten.sum.dim_IntList, aten.sum.default)
    what = "sum as mean * count"

    def rewrite_float(self, gm: torch.fx.GraphModule, n: torch.fx.Node, xv: torch.Tensor, yv: torch.Tensor) -> bool:
        whole = n.target is aten.sum.default
        if xv.dim() == 0 or node_arg(n, 1 if whole else 3, "dtype") is not None:
            return False
        x = n.args[0]
        rank = xv.dim()
        dims = None if whole else node_arg(n, 1, "dim")
        dims = list(range(rank)) if not dims else sorted({d % rank for d in ([dims] if isinstance(dims, int) else dims)})
        keepdim = False if whole else bool(node_arg(n, 2, "keepdim", False))
        count = math.prod(int(xv.shape[d]) for d in dims)
        g = gm.graph
        with g.inserting_before(n):
            if count == 1:  # nothing is added up: the sum only drops (or keeps) size-1 dims
                out = g.call_function(aten.reshape.default, (x, list(yv.shape)))
                made = [out]
            else:
                mean = g.call_function(aten.mean.dim, (x, dims, keepdim))
                out = g.call_function(aten.mul.Tensor, (mean, float(count)))
                mean.meta["val"] = torch.empty_like(yv)
                made = [mean, out]
        out.meta["val"] = torch.empty_like(yv)
        replace_node(n, made, out)
        return True
