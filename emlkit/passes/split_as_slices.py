"""`split` / `chunk` as one slice per piece (Cortex-M).

Matches, in the exported float graph before quantization (Cortex-M targets),
`aten.split.Tensor`, `aten.split_with_sizes` and `aten.chunk` with a static
shape, whose pieces are read through `getitem` (after split_fused_projection.py,
which takes the ones that cut a Linear's output into a Linear per piece).

Produces, for every piece that is read, `aten.slice.Tensor(x, dim, start,
start + size)`: the same values. The unread pieces are dropped.

Why: ExecuTorch lowers a split to `split_with_sizes_copy`, which returns a list
of tensors and which no firmware kernel implements (the compile stopped with the
op named: `a, b = conv(x).chunk(2, dim=1)`, a GLU-style gate, did not compile
for any Cortex-M target). A slice is quantized like its input (shared qparams)
and has a kernel (`aten::slice_copy`, any dim, any dim order).
"""

from __future__ import annotations


import torch

from emlkit.passes.graph import SPLITS, Rewrite, copy_meta, finish, split_pieces
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_quant", ("aten.split", "aten.chunk"), runs_after=("SplitFusedProjection",), order=50, flows=("cortex_m",))
class SplitAsSlices(Rewrite):
    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        done = [n.name for n in list(gm.graph.nodes)
                if n.op == "call_function" and n.target in SPLITS and self._rewrite(gm, n)]
        finish(gm, "split -> slices", done)
        return done

    @staticmethod
    def _rewrite(gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        x = n.args[0]
        xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if not isinstance(xval, torch.Tensor) or not all(isinstance(d, int) for d in xval.shape):
            return False
        dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", 0)
        dim = int(dim) % xval.dim()
        pieces = split_pieces(n, dim)
        if pieces is None:
            return False
        g = gm.graph
        for item, start, size in pieces:
            with g.inserting_before(item):
                sl = g.call_function(aten.slice.Tensor, (x, dim, start, start + size))
            if "val" in item.meta:
                sl.meta["val"] = item.meta["val"]
            copy_meta(n, (sl,))
            item.replace_all_uses_with(sl)
        return True
