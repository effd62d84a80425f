"""Embedding bags as int8 table sums (after quantization, Cortex-M): `embedding_bag` -> `emlkit::embedding_bag`.

Matches, in the quantized graph: `embedding_bag(W, indices, offsets, ...)` (the `.default` and `.padding_idx`
overloads and `_embedding_bag`) with a constant float table W, 1-D int64 indices and offsets, no per-sample weights,
mode sum, mean or max, whose bag values (output 0) feed only one per-tensor int8 `quantize` and whose other outputs
are unused. Not matched: include_last_offset outside mode sum without padding_idx: there torch's CPU kernel (the float
model's) reads past the last offset to the end of the indices (max, padding_idx) or divides the last bag by another
count (mean), against its documentation; that op stays as it is.

Produces `emlkit::embedding_bag(Wq, indices, offsets, mode, include_last_offset, padding_idx, zp_w, zp_out, M, T)`
(semantics in emlkit/emlkit_ops.py): Wq = quantize(W) with W's own range (a bag's sum or mean can lie far
inside it, so the output's qparams would clip the table), summed per bag in integers and requantized once, the
mean through a Q16 reciprocal of the bag's count.

Why: ExecuTorch 1.5.1's quantizers leave `embedding_bag` unannotated, so it ran as a float op on a float32 table
(ExecuTorch's operator suite's test_embedding_bag.py).
"""

from __future__ import annotations

import logging
import operator

import torch

import emlkit.emlkit_ops as eo
from emlkit.passes.graph import (Q_TARGETS, NodeRewrite, add_parameter, const_tensor, copy_region_meta, get_attrs,
                                 per_tensor_qparams, qparams)
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

BAGS = (aten.embedding_bag.default, aten.embedding_bag.padding_idx, aten._embedding_bag.default)


def table_qparams(w: torch.Tensor) -> tuple[float, int]:
    """Per-tensor int8 (scale, zero point) covering W's range and 0."""
    lo, hi = min(float(w.min()), 0.0), max(float(w.max()), 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zp = int(max(-128, min(127, round(-128 - lo / scale))))
    return scale, zp


def _arg(n: torch.fx.Node, i: int, default: object) -> object:
    return n.args[i] if len(n.args) > i else default


def _long_1d(x: object) -> bool:
    v = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    return isinstance(v, torch.Tensor) and v.dim() == 1 and v.dtype == torch.int64


@declare("pre_edge", ("aten.embedding_bag", "aten._embedding_bag"), runs_after=("LutFusion",), order=217,
         flows=("cortex_m",))
class EmlkitEmbeddingBag(NodeRewrite):
    matches = BAGS
    what = "embedding bags as int8 table sums"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        g = gm.graph
        w = const_tensor(gm, n.args[0])
        idx, off = n.args[1], _arg(n, 2, None)
        mode, psw, last = _arg(n, 4, 0), _arg(n, 6, None), bool(_arg(n, 7, False))
        pad = _arg(n, 8, None if n.target is not aten._embedding_bag.default else -1)
        pad = -1 if pad is None else int(pad)  # type: ignore[call-overload]
        if w is None or not w.is_floating_point() or w.dim() != 2 or psw is not None or mode not in (0, 1, 2) \
                or not _long_1d(idx) or not _long_1d(off):
            return False
        if last and (mode != 0 or pad >= 0):
            log.info("embedding_bag %s left in float: include_last_offset outside mode sum without padding_idx "
                     "(torch's kernel does not stop its last bag at the last offset there)", n.name)
            return False
        users = list(n.users)
        if any(u.target is not operator.getitem or (u.args[1] != 0 and u.users) for u in users):
            return False
        values = [u for u in users if u.args[1] == 0]
        if len(values) != 1 or len(values[0].users) != 1:
            return False
        q = next(iter(values[0].users))
        if q.target not in Q_TARGETS or not per_tensor_qparams(q) or qparams(q)[2:5] != (-128, 127, torch.int8):
            return False
        if pad < 0:
            pad = -1
        elif pad >= w.shape[0]:
            return False
        s_out, zp_out = qparams(q)[:2]
        s_w, zp_w = table_qparams(w.detach().float())
        try:
            shift_bits = eo.EMBEDDING_BAG_MEAN_BITS if mode == 1 else 0
            mult, shift = eo.multiplier_shift(s_w / (s_out * (1 << shift_bits)))
        except ValueError as exc:
            log.info("embedding_bag %s left in float: %s", n.name, exc)
            return False
        if not 1 <= shift <= 62:
            log.info("embedding_bag %s left in float: requantization shift %d outside [1, 62]", n.name, shift)
            return False
        codes = qd.quantize_per_tensor.default(w.detach().float(), s_w, zp_w, -128, 127, torch.int8)
        qv = q.meta.get("val")
        (wq,) = get_attrs(gm, q, [add_parameter(gm, f"{n.name}_table_int8", codes)], getattr(qv, "fake_mode", None))
        with g.inserting_before(q):
            new = g.call_function(torch.ops.emlkit.embedding_bag.default,
                                  (wq, idx, off, int(mode), int(last), pad, zp_w, zp_out, mult, shift))  # type: ignore[call-overload]
        copy_region_meta(q, new)
        new.meta["stack_trace"] = n.meta.get("stack_trace", "")
        q.replace_all_uses_with(new)
        for dead in (q, values[0], *[u for u in users if u is not values[0]], n):
            g.erase_node(dead)
        return True
