"""A mean over trailing dimensions as an average pool over one row (before quantization, Cortex-M).

Matches, in the exported float graph: `aten.mean.dim` (and `aten.mean.default`, over everything) whose
reduced dimensions are the last ones of its input (`x.mean(-1)`, a token mean `x.mean(1)` of [B, T]...,
the mean of every element) or other ones (the token mean `x.mean(1)` of [B, T, D], nn.MultiheadAttention's
mean of its weights over the heads), without a dtype change. A 4-D input's spatial mean (dims 2, 3) is left to ExecuTorch's Cortex-M flow, which
lowers it already.

Produces `view(avg_pool2d(view(x', [1, 1, P, R]), kernel [1, R]), out_shape)`, where x' is x with the reduced
dimensions permuted last (x itself when they are), P is the product of the kept dimensions and R of the
reduced ones: the same sums over the same elements, divided by R.

Why: ExecuTorch 1.5.1's Cortex-M flow leaves these means as float ops; the average pool is quantized and
runs as an int8 pool kernel. The pool is marked (MEAN_POOL_KEY) so that own_output_qparams.py gives it its
own output qparams: a mean's range is a fraction of its input's.
"""

from __future__ import annotations

import math

import torch

from emlkit.passes.graph import MEAN_POOL_KEY, FloatRewrite, replace_node
from emlkit.passes.manager import declare

aten = torch.ops.aten


def _reduced(n: torch.fx.Node, rank: int) -> list[int] | None:
    """The reduced dimensions, normalized and sorted."""
    if n.target is aten.mean.default:
        return list(range(rank))
    dims = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
    if dims is None or dims == []:
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    norm = sorted({d % rank for d in dims}) if rank else []
    return norm or None


@declare("pre_quant", ("aten.mean",), runs_after=("AdaptivePoolAsPool",), order=27, flows=("cortex_m",))
class MeanAsPool(FloatRewrite):
    matches = (aten.mean.dim, aten.mean.default)
    what = "means as pools"

    def rewrite_float(self, gm: torch.fx.GraphModule, n: torch.fx.Node, xv: torch.Tensor, out: torch.Tensor) -> bool:
        x, g = n.args[0], gm.graph
        if n.kwargs.get("dtype") is not None or (n.target is aten.mean.dim and len(n.args) > 3):
            return False
        dims = _reduced(n, xv.dim())
        if dims is None or (xv.dim() == 4 and dims == [2, 3]):
            return False
        trailing = dims == list(range(xv.dim() - len(dims), xv.dim()))
        order = [d for d in range(xv.dim()) if d not in dims] + dims  # the kept dims first, in their order
        k = xv.dim() - len(dims)
        moved = xv.permute(order)
        kept, red = int(math.prod(moved.shape[:k])), int(math.prod(moved.shape[k:]))
        if red <= 1:
            return False
        made = []
        with g.inserting_before(n):
            src = x
            if not trailing:  # e.g. x.mean(1) of [B, T, D]: the tokens moved last (an int8 transpose)
                src = g.call_function(aten.permute.default, (x, order))
                src.meta["val"] = moved
                made.append(src)
            row = g.call_function(aten.reshape.default, (src, [1, 1, kept, red]))
            pool = g.call_function(aten.avg_pool2d.default, (row, [1, red], [1, red], [0, 0], False, True))
            back = g.call_function(aten.view.default, (pool, list(out.shape)))
        row.meta["val"] = moved.reshape(1, 1, kept, red)
        pool.meta["val"] = out.reshape(1, 1, kept, 1)
        back.meta["val"] = out
        replace_node(n, [*made, row, pool, back], back)
        pool.meta[MEAN_POOL_KEY] = True  # own output qparams (own_output_qparams.py)
        return True
