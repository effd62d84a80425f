"""`roll` as slices joined by a `cat` per rolled dim (Cortex-M, before quantization).

Matches, in the exported float graph, `aten.roll(x, shifts, dims)` with a static shape and as many dims as shifts.

Produces, for each (shift, dim) with s = shift mod n != 0, `cat([x[n - s:], x[:n - s]], dim)` (slices along dim):
the same values.

Why: the quantizer shares qparams over slices and `cat` (pure data movement, run on the int8 codes by the block
copies) but not over `roll`, which it left in float; and ExecuTorch decomposes `roll` into an int64 index
computation (arange, fmod) and an index_select. `softplus` followed by `roll` was refused with 12 float ops (the
random-model generator, seed 71:36): without a quantize after it, LUT fusion had no table to make.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import Rewrite, copy_meta, rewrite_calls
from emlkit.passes.manager import declare

aten = torch.ops.aten


def _call(g: torch.fx.Graph, op: object, args: tuple, val: object, like: torch.fx.Node) -> torch.fx.Node:
    n = g.call_function(op, args)
    n.meta["val"] = val
    copy_meta(like, (n,))
    return n


@declare("pre_quant", ("aten.roll",), order=36, flows=("cortex_m",))
class RollAsSlices(Rewrite):
    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        return rewrite_calls(gm, aten.roll.default, self._rewrite, "roll -> slices + cat")

    @staticmethod
    def _rewrite(gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        x = n.args[0]
        xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        shifts = list(n.args[1]) if len(n.args) > 1 else list(n.kwargs.get("shifts", []))
        dims = list(n.args[2]) if len(n.args) > 2 else list(n.kwargs.get("dims", []))
        if not isinstance(xval, torch.Tensor) or not dims or len(dims) != len(shifts) \
                or not all(isinstance(v, int) for v in [*xval.shape, *shifts, *dims]):
            return False
        g, cur, val = gm.graph, x, xval
        with g.inserting_before(n):
            for shift, dim in zip(shifts, dims):
                dim %= val.dim()
                size = val.shape[dim]
                s = shift % size if size else 0
                if s == 0:
                    continue
                tail = _call(g, aten.slice.Tensor, (cur, dim, size - s, size), val.narrow(dim, size - s, s), n)
                head = _call(g, aten.slice.Tensor, (cur, dim, 0, size - s), val.narrow(dim, 0, size - s), n)
                val = torch.cat([val.narrow(dim, size - s, s), val.narrow(dim, 0, size - s)], dim)
                cur = _call(g, aten.cat.default, ([tail, head], dim), val, n)
        n.replace_all_uses_with(cur)
        g.erase_node(n)
        return True
