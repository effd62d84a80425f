"""median of a dequantized tensor taken on its int8 codes (after quantization, Cortex-M).

Matches, in the quantized graph: `aten.median` (all elements) and `aten.median.dim` whose input is a per-tensor
`dequantize` with a positive scale (for `.dim`: only when its indices are not used).

Produces the median of the dequantize's input, the codes, followed by the same dequantize: dequantization is
strictly increasing (a positive scale), so the k-th smallest value is the dequantized k-th smallest code, and
`median(dequantize(x)) == dequantize(median(x))` exactly; the quantize after it (the output's qparams) then
requantizes one code. The output therefore has the input's grid, and its qparams stay those of the quantize that
followed the float median.

Why: the median ran as a float op on dequantized floats (a float island); the firmware's aten::median takes int8
(firmware/ops/aten_float_reduce.c). Indices are left alone: codes tie where the floats tie, but which of equal
elements torch's kernel reports is not specified, so a program using them keeps the float median.
"""

from __future__ import annotations

import operator

import torch

from emlkit.passes.graph import CodesRewrite, copy_meta
from emlkit.passes.manager import declare

aten = torch.ops.aten


def _fake(n: torch.fx.Node, f: object) -> None:
    """n.meta['val'] from f applied to its input's value, when that has one."""
    v = n.args[0].meta.get("val") if isinstance(n.args[0], torch.fx.Node) else None
    if isinstance(v, torch.Tensor):
        n.meta["val"] = f(v)  # type: ignore[operator]


@declare("pre_edge", ("aten.median",), runs_after=("LutFusion",), order=208, flows=("cortex_m",))
class MedianOnCodes(CodesRewrite):
    matches = (aten.median.default, aten.median.dim)
    what = "median on int8 codes"

    def on_codes(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node) -> bool:
        g = gm.graph
        if n.target is aten.median.default:
            with g.inserting_after(n):
                med = g.call_function(aten.median.default, (dq.args[0],))
            with g.inserting_after(med):
                back = g.call_function(dq.target, (med, *dq.args[1:]), dict(dq.kwargs))
            _fake(med, aten.median.default)
            made, values = [med, back], n
        else:
            items = list(n.users)
            if any(u.target is not operator.getitem for u in items) or any(u.args[1] != 0 for u in items):
                return False  # the indices are used (or the tuple escapes)
            if not items:
                return False
            with g.inserting_after(n):
                med = g.call_function(aten.median.dim, (dq.args[0], *n.args[1:]), dict(n.kwargs))
            with g.inserting_after(med):
                first = g.call_function(operator.getitem, (med, 0))
            with g.inserting_after(first):
                back = g.call_function(dq.target, (first, *dq.args[1:]), dict(dq.kwargs))
            dim_args = tuple(n.args[1:])
            _fake(med, lambda v: aten.median.dim(v, *dim_args, **dict(n.kwargs)))
            if isinstance(med.meta.get("val"), tuple):
                first.meta["val"] = med.meta["val"][0]
            made, values = [med, first, back], items[0]
            for extra in items[1:]:  # several getitem 0: one value
                extra.replace_all_uses_with(items[0])
                g.erase_node(extra)
        if isinstance(values.meta.get("val"), torch.Tensor):
            back.meta["val"] = values.meta["val"]
        copy_meta(n, made)
        values.replace_all_uses_with(back)
        g.erase_node(values)
        if values is not n:
            g.erase_node(n)
        return True
