"""Embedding lookups as gathers of int8 codes (after quantization, Cortex-M).

Matches, in the quantized graph: `aten.embedding(W, indices)` with a constant float table W whose only user
is a per-tensor `quantize` (the quantizer observes the embedding's output where the next layer reads it).

Produces `view(index_select(Wq, 0, flatten(indices)), out_shape)`, where Wq = quantize(W) with that
quantize's own scale and zero point, computed once here: a gather commutes with an elementwise quantize,
so the codes are exactly those the float lookup followed by the quantize gave.

Why: ExecuTorch 1.5.1's quantizers leave `embedding` unannotated, so its lookup stayed a float op (and its
table float32, four times the bytes); `index_select` on int8 codes is a plain copy in the firmware.
"""

from __future__ import annotations


import torch

from emlkit.passes.graph import (Q_TARGETS, NodeRewrite, add_parameter, const_tensor, copy_meta, get_attrs,
                                 replace_node)
from emlkit.passes.manager import declare

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed


@declare("pre_edge", ("aten.embedding",), runs_after=("LutFusion",), order=205, flows=("cortex_m",))
class EmbeddingAsInt8Gather(NodeRewrite):
    matches = (aten.embedding.default,)
    what = "embeddings as int8 gathers"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        g = gm.graph
        table, idx = n.args[0], n.args[1]
        w, q = const_tensor(gm, table), next(iter(n.users)) if len(n.users) == 1 else None
        shape, out, iv = n.meta.get("val"), q.meta.get("val") if q is not None else None, idx.meta.get("val")
        if w is None or not w.is_floating_point() or q is None or q.target not in Q_TARGETS or q.args[0] is not n \
                or shape is None:
            return False
        scale, zp, qmin, qmax, dtype = q.args[1:6]
        codes = qd.quantize_per_tensor.default(w.detach().float(), scale, zp, qmin, qmax, dtype)
        name = add_parameter(gm, f"{table.target}_int8".replace(".", "_"), codes)
        (wq,) = get_attrs(gm, n, [name], getattr(out, "fake_mode", None))  # quantize nodes may carry no value
        with g.inserting_before(q):
            flat = g.call_function(aten.reshape.default, (idx, [-1]))
            rows = g.call_function(aten.index_select.default, (wq, 0, flat))
            back = g.call_function(aten.view.default, (rows, list(shape.shape)))
        if out is not None:
            rows.meta["val"], back.meta["val"] = out.reshape(-1, out.shape[-1]), out
        if iv is not None:
            flat.meta["val"] = iv.reshape(-1)
        copy_meta(n, [flat, rows])
        replace_node(q, [back], back)
        g.erase_node(n)
        return True
