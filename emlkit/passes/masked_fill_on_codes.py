"""masked_fill / where with a scalar fill as a select on int8 codes (after quantization, Cortex-M).

Matches, in the quantized graph: `aten.masked_fill.Scalar(dequantize(x), mask, value)`,
`aten.where.ScalarOther(mask, dequantize(x), value)` and `aten.where.ScalarSelf(mask, value, dequantize(x))`
whose only user is an int8 per-tensor `quantize` (the output's qparams s_out, zp_out), x per-tensor int8; also
`aten.where.self(mask, fill, dequantize(x))` (either value order) whose fill is a float `full`/`full_like` of a
scalar, or its int8 quantize/dequantize (then the fill value is the scalar on that grid): the form ExecuTorch's
Arm quantizer gives masked_fill on the U85, where it decomposes it before annotation.

Produces `aten.where.self(mask, fill, x')` (or with fill and x' swapped, as the match had them) on codes:
fill is a 0-dim int8 constant, the value quantized once with the output's qparams (the quantize's own rounding),
and x' is x's codes on the output's grid: x itself when the input and output qparams are equal, else
`quantize(dequantize(x))` with the output's qparams (a requantization, as the float select followed by the
quantize did element by element). Each output element is thus the code the float op and the quantize gave.

Why: the quantizers leave masked_fill / where unannotated on their inputs, so the select ran on dequantized
floats (a float island, and a float scalar_tensor for the fill); the firmware's aten::where copies elements of
any dtype. The output keeps its own qparams (the observer saw the fill value), so a fill outside the input's
range is not clipped.

On the int8 Ethos-U flows the masked_fills the NPU partitioner leaves on the CPU in float (manager.CPU_SIDE)
run on codes the same way (tests/test_npu_cpu_int8.py); a compile without --allow-float refused them.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import (DQ_TARGETS, Q_TARGETS, NodeRewrite, add_parameter, copy_meta, copy_region_meta,
                                 get_attrs, node_val, per_tensor_qparams, qparams,
                                 shape_of)
from emlkit.passes.manager import declare

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

# op -> (argument index of the mask, of the tensor, of the scalar fill)
_FULLS = (aten.full_like.default, aten.full.default)
_SLOTS = {
    aten.masked_fill.Scalar: (1, 0, 2),
    aten.where.ScalarOther: (0, 1, 2),
    aten.where.ScalarSelf: (0, 2, 1),
}


def _int8_q(node: object) -> bool:
    return (isinstance(node, torch.fx.Node) and per_tensor_qparams(node)
            and qparams(node)[4] == torch.int8 and qparams(node)[2:4] == (-128, 127))


@declare("pre_edge", ("aten.masked_fill", "aten.where"), runs_after=("LutFusion",), order=209,
         flows=("cortex_m", "ethos_u_cpu"), bits=("int8",))
class MaskedFillOnCodes(NodeRewrite):
    matches = (*_SLOTS, aten.where.self)
    what = "masked_fill/where with a scalar fill on int8 codes"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        got = _operands(n)
        if got is None:
            return False
        mask, dq, value, fill_first = got
        q = next(iter(n.users)) if len(n.users) == 1 else None
        mv = mask.meta.get("val") if isinstance(mask, torch.fx.Node) else None
        if not (isinstance(dq, torch.fx.Node) and dq.target in DQ_TARGETS and _int8_q(dq)
                and isinstance(dq.args[0], torch.fx.Node)):
            return False
        if q is None or q.target not in Q_TARGETS or not _int8_q(q) or not isinstance(value, (int, float)) \
                or isinstance(value, bool) or not isinstance(mv, torch.Tensor) or mv.dtype != torch.bool:
            return False
        out_q = qparams(q)
        fill = qd.quantize_per_tensor.default(torch.tensor(float(value)), *out_q)
        g = gm.graph
        name = add_parameter(gm, f"{n.name}_fill_code", fill)
        qv = q.meta.get("val")
        (fill_node,) = get_attrs(gm, n, [name], getattr(qv, "fake_mode", None))
        codes = dq.args[0]
        made = []
        if qparams(dq)[:2] != out_q[:2]:  # onto the output's grid: the requantization the float path did
            with g.inserting_before(n):
                codes = g.call_function(q.target, (dq, *q.args[1:]), dict(q.kwargs))
            if isinstance(dq.meta.get("val"), torch.Tensor):
                codes.meta["val"] = dq.meta["val"].to(torch.int8)
            made.append(codes)
        pair = (fill_node, codes) if fill_first else (codes, fill_node)
        with g.inserting_before(q):
            new = g.call_function(aten.where.self, (mask, *pair))
        copy_meta(n, made + [new])
        copy_region_meta(q, new)
        q.replace_all_uses_with(new)
        g.erase_node(q)
        g.erase_node(n)
        return True


def _operands(n: torch.fx.Node) -> tuple[object, object, object, bool] | None:
    """(mask, the tensor's dequantize, the scalar fill, whether the fill is where's first value) of a match, or None.
    A where.self qualifies when one value is a constant fill: ExecuTorch's Arm quantizer decomposes masked_fill into
    where.self(mask, full_like(x, v), x), and quantizes the full_like, so its value is v on that grid."""
    if n.target is not aten.where.self:
        im, ix, iv = _SLOTS[n.target]
        return n.args[im], n.args[ix], n.args[iv], ix == 2 or n.target is aten.masked_fill.Scalar
    mask, a, b = n.args[:3]
    for fill_first, f, x in ((True, a, b), (False, b, a)):
        value = _constant_fill(f)
        shapes = (shape_of(n), shape_of(x), shape_of(mask))
        if value is not None and None not in shapes \
                and shapes[0] == tuple(torch.broadcast_shapes(shapes[1], shapes[2])):  # the fill adds no dimension
            return mask, x, value, fill_first
    return None


def _constant_fill(f: object) -> float | None:
    """The value every element of F has: a float full/full_like of a scalar, or its int8 quantize/dequantize."""
    qp = None
    if isinstance(f, torch.fx.Node) and f.target in DQ_TARGETS and _int8_q(f) and isinstance(f.args[0], torch.fx.Node):
        q = f.args[0]
        if q.target not in Q_TARGETS or not _int8_q(q) or qparams(q) != qparams(f):
            return None
        qp, f = qparams(q), q.args[0]
    fv = node_val(f)
    if not (isinstance(f, torch.fx.Node) and f.target in _FULLS and len(f.args) == 2 and fv is not None
            and fv.dtype == torch.float32 and isinstance(f.args[1], (int, float)) and not isinstance(f.args[1], bool)):
        return None
    if set(f.kwargs) - {"dtype", "layout", "device", "pin_memory", "memory_format"} \
            or f.kwargs.get("dtype") not in (None, torch.float32):
        return None
    value = torch.tensor(float(f.args[1]))
    if qp is not None:  # the value the quantized graph carries: v on the full's grid
        value = qd.dequantize_per_tensor.default(qd.quantize_per_tensor.default(value, *qp), *qp)
    return float(value)
