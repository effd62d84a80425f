"""A sum over dimensions as their mean times the number of elements summed (before quantization, Cortex-M).

Matches, in the exported float graph: `aten.sum.dim_IntList` of a float tensor over its last dimensions (those a
mean has an int8 lowering for: mean_as_pool.py, and ExecuTorch's spatial mean), without a dtype change.

Produces `mean(x, dims, keepdim) * R`, R the number of elements each output sums: the same value.

Why: ExecuTorch 1.5.1's Cortex-M quantizer leaves a sum as a float op (random model fam:26, `torch.sum(x, (3,),
keepdim=True)`, was refused); a mean over trailing or spatial dims runs as an int8 average pool with its own
output qparams (mean_as_pool.py) and the product by a constant as an int8 table.
"""

from __future__ import annotations

import math

import torch

from emlkit.passes.graph import NodeRewrite, node_arg, node_val, replace_node
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_quant", ("aten.sum",), runs_before=("MeanAsPool",), order=24, flows=("cortex_m",))
class SumAsMean(NodeRewrite):
    matches = (aten.sum.dim_IntList,)
    what = "sum as mean * count"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        x = n.args[0]
        xv, out_val = node_val(x), node_val(n)
        if xv is None or out_val is None or not xv.is_floating_point() or node_arg(n, 3, "dtype") is not None:
            return False
        dims = node_arg(n, 1, "dim")
        if not dims or xv.dim() == 0:
            return False
        rank = xv.dim()
        dims = sorted({d % rank for d in ([dims] if isinstance(dims, int) else dims)})
        if dims != list(range(rank - len(dims), rank)):
            return False  # a mean over leading dims has no int8 lowering either: the sum stays and is named
        count = math.prod(int(xv.shape[d]) for d in dims)
        g = gm.graph
        with g.inserting_before(n):
            mean = g.call_function(aten.mean.dim, (x, dims, bool(node_arg(n, 2, "keepdim", False))))
            out = g.call_function(aten.mul.Tensor, (mean, float(count)))
        mean.meta["val"], out.meta["val"] = torch.empty_like(out_val), torch.empty_like(out_val)
        replace_node(n, [mean, out], out)
        return True
