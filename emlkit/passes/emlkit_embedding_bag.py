"""Embedding bags as int8 table sums (after quantization, Cortex-M, and the bags an int8 Ethos-U compile leaves on the
CPU): `embedding_bag` -> `emlkit::embedding_bag`.

Matches, in the quantized graph: `embedding_bag(W, indices, offsets, ...)` (the `.default` and `.padding_idx`
overloads and `_embedding_bag`) with a constant float table W, 1-D int64 indices and offsets, mode sum, mean or max,
per-sample weights (mode sum) that are an int8 per-tensor `dequantize` or a float constant, whose bag values
(output 0) feed only one per-tensor int8 `quantize` and whose other outputs are unused. include_last_offset in any
mode: outside mode sum without padding_idx torch's CPU kernel (the float model's) does not stop its last bag at the
last offset (it reads on to the end of the indices, or divides the mean by another count), against its
documentation, which has the last offset be len(indices); the op follows the documentation and refuses any other
last offset there (emlkit/emlkit_ops.py), so a compile whose inputs have one ends with one line saying so.

Produces `emlkit::embedding_bag(Wq, indices, offsets, mode, include_last_offset, padding_idx, zp_w, zp_out, M, T,
P, zp_p)` (semantics in emlkit/emlkit_ops.py): Wq = quantize(W) with W's own range (a bag's sum or mean can lie far
inside it, so the output's qparams would clip the table), summed per bag in integers (each row times its weight's
code P, when given) and requantized once, the mean through a Q16 reciprocal of the bag's count.

Why: ExecuTorch 1.5.1's quantizers leave `embedding_bag` unannotated, so it ran as a float op on a float32 table
(ExecuTorch's operator suite's test_embedding_bag.py). int8_around_own_ops.py gives its output (and the per-sample
weights' edge) qparams of their own, so the bag lowers wherever its output goes (a `cat` included).
"""

from __future__ import annotations

import logging

import torch

import emlkit.emlkit_ops as eo
from emlkit.passes.graph import (DQ_TARGETS, EMBEDDING_BAGS, Q_TARGETS, NodeRewrite, add_parameter, const_tensor,
                                 copy_region_meta, get_attrs, per_tensor_qparams, qparams, values_output)
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten
qd = torch.ops.quantized_decomposed


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


def _int64_source(x: object) -> object:
    """X, or for an int32 copy of a 1-D int64 tensor (the Arm flow casts int64 inputs to int32 before the
    quantizer sees them) the int64 tensor: the op reads int64 indices and offsets."""
    if isinstance(x, torch.fx.Node) and x.target is torch.ops.dim_order_ops._to_dim_order_copy.default \
            and x.args and _long_1d(x.args[0]):
        v = x.meta.get("val")
        if isinstance(v, torch.Tensor) and v.dtype == torch.int32:
            return x.args[0]
    return x


def _weights(gm: torch.fx.GraphModule, psw: object, n_idx: int) -> tuple[object, float, int] | None:
    """Per-sample weights as (int8 codes: a node or a constant tensor, scale, zero point): an int8 per-tensor
    dequantize's input, or a float constant quantized over its own range; None for anything else."""
    if isinstance(psw, torch.fx.Node) and psw.target in DQ_TARGETS and per_tensor_qparams(psw) \
            and qparams(psw)[2:5] == (-128, 127, torch.int8) and isinstance(psw.args[0], torch.fx.Node):
        v = psw.meta.get("val")
        if isinstance(v, torch.Tensor) and tuple(v.shape) != (n_idx,):
            return None
        return psw.args[0], *qparams(psw)[:2]
    c = const_tensor(gm, psw)
    if c is None or not c.is_floating_point() or tuple(c.shape) != (n_idx,):
        return None
    s_p, zp_p = table_qparams(c.detach().float())
    return qd.quantize_per_tensor.default(c.detach().float(), s_p, zp_p, -128, 127, torch.int8), s_p, zp_p


@declare("pre_edge", ("aten.embedding_bag", "aten._embedding_bag"), runs_after=("LutFusion",), order=217,
         flows=("cortex_m", "ethos_u_cpu"), bits=("int8",))
class EmlkitEmbeddingBag(NodeRewrite):
    matches = EMBEDDING_BAGS
    what = "embedding bags as int8 table sums"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        g = gm.graph
        w = const_tensor(gm, n.args[0])
        idx, off = _int64_source(n.args[1]), _int64_source(_arg(n, 2, None))
        mode, psw, last = _arg(n, 4, 0), _arg(n, 6, None), bool(_arg(n, 7, False))
        pad = _arg(n, 8, None if n.target is not aten._embedding_bag.default else -1)
        pad = -1 if pad is None else int(pad)  # type: ignore[call-overload]
        if w is None or not w.is_floating_point() or w.dim() != 2 or mode not in (0, 1, 2) \
                or not _long_1d(idx) or not _long_1d(off):
            return False
        n_idx = int(idx.meta["val"].shape[0])  # type: ignore[union-attr]
        weights = None if psw is None else _weights(gm, psw, n_idx)
        if psw is not None and (mode != 0 or weights is None or n_idx > eo.EMBEDDING_BAG_WEIGHTED_MAX_INDICES):
            log.info("embedding_bag %s left in float: per-sample weights neither int8 nor constant, outside mode "
                     "sum, or over %d indices", n.name, eo.EMBEDDING_BAG_WEIGHTED_MAX_INDICES)
            return False
        users, value = list(n.users), values_output(n)
        if value is None or len(value.users) != 1:
            return False
        q = next(iter(value.users))
        if q.target not in Q_TARGETS or not per_tensor_qparams(q) or qparams(q)[2:5] != (-128, 127, torch.int8):
            return False
        if pad < 0:
            pad = -1
        elif pad >= w.shape[0]:
            return False
        s_out, zp_out = qparams(q)[:2]
        s_w, zp_w = table_qparams(w.detach().float())
        s_p, zp_p = (1.0, 0) if weights is None else weights[1:]
        try:
            shift_bits = eo.EMBEDDING_BAG_MEAN_BITS if mode == 1 else 0
            mult, shift = eo.multiplier_shift(s_w * s_p / (s_out * (1 << shift_bits)))
        except ValueError as exc:
            log.info("embedding_bag %s left in float: %s", n.name, exc)
            return False
        if not 1 <= shift <= 62:
            log.info("embedding_bag %s left in float: requantization shift %d outside [1, 62]", n.name, shift)
            return False
        codes = qd.quantize_per_tensor.default(w.detach().float(), s_w, zp_w, -128, 127, torch.int8)
        qv = q.meta.get("val")
        consts = {f"{n.name}_table_int8": codes}
        if weights is not None and isinstance(weights[0], torch.Tensor):
            consts[f"{n.name}_weights_int8"] = weights[0]
        attrs = get_attrs(gm, q, [add_parameter(gm, k, v) for k, v in consts.items()], getattr(qv, "fake_mode", None))
        p = None if weights is None else (attrs[1] if len(attrs) > 1 else weights[0])
        with g.inserting_before(q):
            args = (attrs[0], idx, off, int(mode), int(last), pad, zp_w, zp_out, mult, shift, p, zp_p)
            new = g.call_function(torch.ops.emlkit.embedding_bag.default, args)  # type: ignore[arg-type]
        copy_region_meta(q, new)
        new.meta["stack_trace"] = n.meta.get("stack_trace", "")
        q.replace_all_uses_with(new)
        for dead in (q, value, *[u for u in users if u is not value], n):
            g.erase_node(dead)
        if isinstance(psw, torch.fx.Node) and not psw.users:
            g.erase_node(psw)  # the weights' dequantize: the op reads their codes
        return True
