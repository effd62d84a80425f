"""Transposed convolutions with `output_padding` as one without it plus a crop (before quantization, Cortex-M).

Matches, in the exported float graph: `aten.conv_transpose2d` (ConvTranspose2d, and ConvTranspose1d after
Conv1dAsConv2d) with a non-zero `output_padding` (or padding that the crop can take).

Produces `slice(slice(conv_transpose2d(x, w', b, stride, 0, 0, groups, dilation), H), W)`: the unpadded ("full")
transposed convolution, of length (in - 1) * s + d * (k - 1) + 1 along each axis, holds output i at full position
i + padding. The last output_padding - padding positions past the full length hold the bias alone; w' is w with
e = ceil((output_padding - padding) / d) zero taps appended along that axis, which lengthens the full output by
e * d bias-only positions and changes none before them; the slices keep [padding, padding + out).

Why: ExecuTorch 1.5.1's Cortex-M flow lowers transposed convolutions without padding (cropped or not) to int8, but
left those with output_padding in float; the crop and the zero pad are data movement on int8 codes.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from emlkit.passes.graph import NodeRewrite, add_parameter, const_tensor, get_attrs, node_arg, node_val, replace_node
from emlkit.passes.manager import declare

aten = torch.ops.aten


def _pair(v: Any) -> list[int]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return [int(v[0]), int(v[-1])]


@declare("pre_quant", ("aten.conv_transpose2d",), runs_after=("Conv1dAsConv2d",), order=26, flows=("cortex_m",))
class ConvTransposeOutputPadding(NodeRewrite):
    matches = (aten.conv_transpose2d.input,)
    what = "transposed convolutions' output_padding as a crop"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        x, w, b = n.args[0], n.args[1], node_arg(n, 2, "bias")
        stride, pad = _pair(node_arg(n, 3, "stride", [1, 1])), _pair(node_arg(n, 4, "padding", [0, 0]))
        out_pad = _pair(node_arg(n, 5, "output_padding", [0, 0]))
        groups, dil = int(node_arg(n, 6, "groups", 1)), _pair(node_arg(n, 7, "dilation", [1, 1]))
        xv, yv = node_val(x), node_val(n)
        if not any(out_pad) or not isinstance(xv, torch.Tensor) or not isinstance(yv, torch.Tensor) or xv.dim() != 4:
            return False
        w0 = const_tensor(gm, w)
        if w0 is None or w0.dim() != 4:
            return False
        taps = [math.ceil(max(op - p, 0) / d) for op, p, d in zip(out_pad, pad, dil)]
        wt = torch.nn.functional.pad(w0.detach(), [0, taps[1], 0, taps[0]]) if any(taps) else None
        g = gm.graph
        with g.inserting_before(n):
            w2 = w
            if wt is not None:
                (w2,) = get_attrs(gm, n, [add_parameter(gm, f"{n.name}_weight_taps", wt.contiguous())],
                                  getattr(xv, "fake_mode", None))
            full = g.call_function(aten.conv_transpose2d.input, (x, w2, b, stride, [0, 0], [0, 0], groups, dil))
            made: list[torch.fx.Node] = [full]
            bv, wv = node_val(b), node_val(w2)
            size = None
            if isinstance(wv, torch.Tensor):
                size = torch.nn.functional.conv_transpose2d(xv, wv, bv, stride, 0, 0, groups, dil)
                full.meta["val"] = size
            cur = full
            for axis, p in ((2, pad[0]), (3, pad[1])):
                end = p + int(yv.shape[axis])
                cur = g.call_function(aten.slice.Tensor, (cur, axis, p, end))
                if isinstance(size, torch.Tensor):
                    size = size.narrow(axis, p, end - p)
                    cur.meta["val"] = size
                made.append(cur)
        replace_node(n, made, cur)
        return True
