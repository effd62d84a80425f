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

from dataclasses import dataclass
from typing import Any

import torch

from emlkit.passes.graph import Q_TARGETS, Rewrite, add_parameter, const_tensor, copy_meta, finish, get_attrs
from emlkit.passes.manager import declare

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed


@declare("pre_edge", ("aten.embedding",), runs_after=("LutFusion",), order=205, flows=("cortex_m",))
@dataclass
class EmbeddingAsInt8Gather(Rewrite):
    def run(self, gm: torch.fx.GraphModule) -> list[Any]:
        g, done = gm.graph, []
        for n in list(g.nodes):
            if n.op != "call_function" or n.target is not aten.embedding.default or len(n.users) != 1:
                continue
            table, idx = n.args[0], n.args[1]
            w = const_tensor(gm, table)
            q = next(iter(n.users))
            if w is None or not w.is_floating_point() or q.target not in Q_TARGETS or q.args[0] is not n:
                continue
            scale, zp, qmin, qmax, dtype = q.args[1:6]
            codes = qd.quantize_per_tensor.default(w.detach().float(), scale, zp, qmin, qmax, dtype)
            name = add_parameter(gm, f"{table.target}_int8".replace(".", "_"), codes)
            out = q.meta.get("val")
            fake = getattr(out, "fake_mode", None)
            (wq,) = get_attrs(gm, n, [name], fake)
            with g.inserting_before(q):
                flat = g.call_function(aten.reshape.default, (idx, [-1]))
                rows = g.call_function(aten.index_select.default, (wq, 0, flat))
                back = g.call_function(aten.view.default, (rows, list(out.shape) if out is not None else list(n.meta["val"].shape)))
            iv = idx.meta.get("val")
            if iv is not None and out is not None:
                flat.meta["val"] = iv.reshape(-1)
                rows.meta["val"] = out.reshape(-1, out.shape[-1])
                back.meta["val"] = out
            copy_meta(n, [flat, rows, back])
            q.replace_all_uses_with(back)
            g.erase_node(q)
            g.erase_node(n)
            done.append(n.name)
        finish(gm, "embeddings as int8 gathers", done)
        return done
