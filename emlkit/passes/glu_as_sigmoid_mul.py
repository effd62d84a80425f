"""GLU as its halves, a sigmoid and a product (before quantization, Cortex-M).

Matches, in the exported float graph: `aten.glu` (F.glu, nn.GLU) over a dimension of even size.

Produces `slice(x, dim, 0, h) * sigmoid(slice(x, dim, h, 2h))`, h = half the size: GLU's definition.

Why: ExecuTorch 1.5.1's Cortex-M quantizer does not annotate `glu`, and to_edge decomposes it afterwards
into a float sigmoid and mul; decomposed before quantization, the slices move int8 codes, the sigmoid
becomes a table and the product an int8 mul.
"""

from __future__ import annotations


import torch

from emlkit.passes.graph import FloatRewrite, node_arg, replace_node
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_quant", ("aten.glu",), runs_after=("MeanAsPool",), order=28, flows=("cortex_m",))
class GluAsSigmoidMul(FloatRewrite):
    matches = (aten.glu.default,)
    what = "GLU as sigmoid * half"

    def rewrite_float(self, gm: torch.fx.GraphModule, n: torch.fx.Node, xv: torch.Tensor, yv: torch.Tensor) -> bool:
        x = n.args[0]
        dim = int(node_arg(n, 1, "dim", -1)) % xv.dim()
        size = int(xv.shape[dim])
        if size % 2:
            return False
        h, g = size // 2, gm.graph
        with g.inserting_before(n):
            a = g.call_function(aten.slice.Tensor, (x, dim, 0, h))
            b = g.call_function(aten.slice.Tensor, (x, dim, h, size))
            s = g.call_function(aten.sigmoid.default, (b,))
            out = g.call_function(aten.mul.Tensor, (a, s))
        half = xv.narrow(dim, 0, h)
        a.meta["val"], b.meta["val"] = half, xv.narrow(dim, h, h)
        s.meta["val"] = out.meta["val"] = half.clone(memory_format=torch.contiguous_format)
        replace_node(n, [a, b, s, out], out)
        return True
