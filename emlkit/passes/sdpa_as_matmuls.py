"""scaled_dot_product_attention as matmuls and a softmax, its constant mask applied by slicing (before
quantization, Cortex-M).

Matches, in the exported float graph: `aten.scaled_dot_product_attention` (F.scaled_dot_product_attention, and
nn.MultiheadAttention / nn.TransformerEncoderLayer / nn.TransformerDecoderLayer, which call it once the export
turns their fused fast path off) without dropout, with q, k, v of equal rank and head count, and a mask that is
absent, `is_causal`, or computed from constants only (a bool or a float mask made in forward(), such as a
key padding mask or `generate_square_subsequent_mask`).

Produces, for each run of consecutive query rows whose mask rows are equal, `softmax((q_rows @ k_kept^T) * scale
[+ bias]) @ v_kept`, the rows' results concatenated back: k_kept and v_kept are the keys a row attends to
(slices, concatenated when they are not one range), and the bias is the mask's finite values when any is not 0.
Masked-out keys (False, or -inf) are left out of the softmax, which is what the -inf they stand for does.

Why: ExecuTorch 1.5.1's Cortex-M quantizer does not annotate scaled_dot_product_attention and to_edge decomposes
it afterwards into float mul/full/softmax/bmm ops (a float island). As explicit matmuls and a softmax (the zoo's
transformer_block) it lowers to int8 bmm, softmax and tables. A mask cannot be written as an int8 add or fill:
-inf (or the -1e9 users write) would set the scores' quantization range, and a clipped fill leaks probability
into masked keys; leaving the masked keys out is exact. A mask that depends on the model's inputs keeps the
op (refused by name without --allow-float).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from emlkit.passes.graph import NodeRewrite, constant_values, copy_meta, drop_constant_remains, node_arg, node_val, unique_name
from emlkit.passes.manager import declare

aten = torch.ops.aten


def _runs(keep: torch.Tensor) -> list[tuple[int, int]]:
    """Consecutive query rows with equal mask rows, as (start, end) row ranges."""
    runs, start = [], 0
    for i in range(1, keep.shape[0] + 1):
        if i == keep.shape[0] or not torch.equal(keep[i], keep[start]):
            runs.append((start, i))
            start = i
    return runs


def _key_ranges(keep_row: torch.Tensor) -> list[tuple[int, int]]:
    """The kept keys of one mask row as ranges of consecutive indices."""
    idx = [int(i) for i in torch.nonzero(keep_row).flatten()]
    ranges: list[tuple[int, int]] = []
    for i in idx:
        if ranges and ranges[-1][1] == i:
            ranges[-1] = (ranges[-1][0], i + 1)
        else:
            ranges.append((i, i + 1))
    return ranges


class _Emitter:
    """Inserts calls before a node, each with a meta value computed from zero tensors of its inputs' shapes
    (under the graph's fake mode when it has one), and keeps the list of nodes made."""

    def __init__(self, gm: torch.fx.GraphModule, before: torch.fx.Node, fake_mode: Any) -> None:
        self.gm, self.before, self.fake_mode = gm, before, fake_mode
        self.made: list[torch.fx.Node] = []
        self.real: dict[torch.fx.Node, torch.Tensor] = {}

    def _example(self, a: torch.fx.Node) -> torch.Tensor:
        if a in self.real:
            return self.real[a]
        v = node_val(a)
        assert v is not None
        return torch.zeros([int(d) for d in v.shape], dtype=v.dtype)

    def call(self, target: Any, *args: Any) -> torch.fx.Node:
        with self.gm.graph.inserting_before(self.before):
            node = self.gm.graph.call_function(target, args)
        with torch.no_grad():
            out = target(*torch.fx.node.map_arg(args, self._example))
        self.real[node] = out
        node.meta["val"] = self.fake_mode.from_tensor(out) if self.fake_mode is not None else out
        self.made.append(node)
        return node

    def constant(self, stem: str, value: torch.Tensor) -> torch.fx.Node:
        name = unique_name(self.gm, stem)
        self.gm.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))
        with self.gm.graph.inserting_before(self.before):
            node = self.gm.graph.get_attr(name)
        self.real[node] = value
        node.meta["val"] = self.fake_mode.from_tensor(value) if self.fake_mode is not None else value
        return node


@declare("pre_quant", ("aten.scaled_dot_product_attention",), runs_after=("FoldLinearBatchNorm",),
         runs_before=("SplitAsSlices", "LinearToConv"), order=35, flows=("cortex_m",))
class SdpaAsMatmuls(NodeRewrite):
    matches = (aten.scaled_dot_product_attention.default,)
    what = "scaled_dot_product_attention as matmuls and a softmax"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        q, k, v = n.args[:3]
        qv, kv, vv = node_val(q), node_val(k), node_val(v)
        mask = node_arg(n, 3, "attn_mask")
        dropout = node_arg(n, 4, "dropout_p", 0.0)
        causal = bool(node_arg(n, 5, "is_causal", False))
        scale = node_arg(n, 6, "scale")
        if qv is None or kv is None or vv is None or dropout or node_arg(n, 7, "enable_gqa", False):
            return False
        if not (qv.dim() == kv.dim() == vv.dim() >= 3) or not qv.shape[:-2] == kv.shape[:-2] == vv.shape[:-2]:
            return False
        rows, keys = int(qv.shape[-2]), int(kv.shape[-2])
        env = constant_values(gm, n) if isinstance(mask, torch.fx.Node) else {}
        keep, bias = self._mask(mask, env, causal, rows, keys, qv.shape[:-2])
        if keep is None or not bool(keep.any(dim=-1).all()):
            return False  # an input-dependent mask, or a row that attends to nothing (NaN in torch)
        scale = 1.0 / math.sqrt(int(qv.shape[-1])) if scale is None else float(scale)
        em = _Emitter(gm, n, getattr(qv, "fake_mode", None))
        if qv.dim() != 3:
            # 3-D: a 4-D score tensor gets a channels-last copy (ChannelsLastEverywhere) that the mask's add
            # would then meet in another dim order than its bias (the kernels take one order)
            q, k, v = (em.call(aten.reshape.default, t, [-1, *[int(d) for d in tv.shape[-2:]]])
                       for t, tv in ((q, qv), (k, kv), (v, vv)))
        last = 1
        outs = []
        for r0, r1 in _runs(keep):
            qr = q if (r0, r1) == (0, rows) else em.call(aten.slice.Tensor, q, last, r0, r1)
            ranges = _key_ranges(keep[r0])
            kr, vr = self._keys(em, k, ranges, keys, last), self._keys(em, v, ranges, keys, last)
            s = em.call(aten.matmul.default, qr, em.call(aten.transpose.int, kr, -2, -1))
            s = em.call(aten.mul.Tensor, s, scale)
            if bias is not None:
                cols = torch.cat([bias[r0:r1, a:b] for a, b in ranges], dim=-1)
                if bool((cols != 0).any()):
                    # full shape: the Cortex-M quantizer annotates an add only without broadcasting
                    full = cols.to(qv.dtype).expand(*em.real[s].shape).contiguous()
                    s = em.call(aten.add.Tensor, s, em.constant("_sdpa_mask_bias", full))
            outs.append(em.call(aten.matmul.default, em.call(aten.softmax.int, s, -1), vr))
        out = outs[0] if len(outs) == 1 else em.call(aten.cat.default, outs, last)
        if qv.dim() != 3:
            out = em.call(aten.reshape.default, out, [*[int(d) for d in qv.shape[:-1]], int(vv.shape[-1])])
        copy_meta(n, em.made)
        n.replace_all_uses_with(out)
        gm.graph.erase_node(n)
        if env:
            drop_constant_remains(gm, env)
        return True

    @staticmethod
    def _keys(em: _Emitter, x: torch.fx.Node, ranges: list[tuple[int, int]], keys: int, dim: int) -> torch.fx.Node:
        if ranges == [(0, keys)]:
            return x
        parts = [em.call(aten.slice.Tensor, x, dim, a, b) for a, b in ranges]
        return parts[0] if len(parts) == 1 else em.call(aten.cat.default, parts, dim)

    @staticmethod
    def _mask(mask: Any, env: dict[torch.fx.Node, Any], causal: bool, rows: int, keys: int,
              batch: torch.Size) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(keep, bias) over [rows, keys]: which keys each query row attends to and the finite additive mask
        (None: no additive part); keep is None when the mask is not a constant the same for every batch entry
        and head."""
        keep = torch.ones(rows, keys, dtype=torch.bool)
        if causal:
            keep = keep.tril()
        if mask is None:
            return keep, None
        m = env.get(mask) if isinstance(mask, torch.fx.Node) else None
        if not isinstance(m, torch.Tensor):
            return None, None
        try:
            m = m.expand(*batch, rows, keys).reshape(-1, rows, keys)
        except RuntimeError:
            return None, None
        if not bool((m == m[0]).all()):
            return None, None  # a mask per batch entry or head: one graph per entry is not worth it
        m = m[0]
        if m.dtype == torch.bool:
            return keep & m, None
        finite = torch.isfinite(m)
        if bool((~finite & (m > 0)).any()) or bool(torch.isnan(m).any()):
            return None, None
        return keep & finite, torch.where(finite, m, torch.zeros_like(m)).to(torch.float32)
