"""A comparison of a dequantized int8 tensor with a number, made on its codes (after quantization, Cortex-M).

Matches, in the quantized graph: `aten.gt/ge/lt/le/eq/ne.Scalar(dequantize(x), c)`, x per-tensor int8 with a
positive scale, c a number.

Produces one comparison of the codes with an integer: the pass dequantizes each of the 256 codes exactly as the
program would (float32) and compares each with c as PyTorch does, then writes the set of codes that come out true
as `ge(x, q0)`, `le(x, q1)`, `eq(x, k)` or `ne(x, k)` (no code: `gt(x, 127)`, every code: `ge(x, -128)`). A set
none of these forms describes is left alone (a scale so small that float32 maps two codes to one value). Each
element is therefore what the float comparison gave.

Why: the quantizers leave comparisons unannotated; a mask computed from a quantized input
(`key_padding_mask = x[..., 0] > 1.0`) then reached ExecuTorch's Cortex-M lowering as a float comparison of a
dequantize, which it folded away, leaving a float kernel reading int8 codes (a broken program, even with
--allow-float). The firmware compares integer tensors exactly (int64), so no float op is left.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import NodeRewrite, copy_meta, increasing_dequantize, qparams
from emlkit.passes.manager import declare

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

_COMPARE = {aten.gt.Scalar: torch.gt, aten.ge.Scalar: torch.ge, aten.lt.Scalar: torch.lt, aten.le.Scalar: torch.le,
            aten.eq.Scalar: torch.eq, aten.ne.Scalar: torch.ne}
CODES = torch.arange(-128, 128, dtype=torch.int8)


def codes_form(truth: torch.Tensor) -> tuple[object, int] | None:
    """(op, integer) whose comparison with every int8 code (in order, -128 first) gives TRUTH, or None."""
    n = int(truth.sum())
    first = int(truth.int().argmax()) - 128
    if n == 0:
        return aten.gt.Scalar, 127
    if n == 256:
        return aten.ge.Scalar, -128
    if bool(truth[first + 128:first + 128 + n].all()):   # one run of true codes
        if first + n - 1 == 127:
            return aten.ge.Scalar, first
        if first == -128:
            return aten.le.Scalar, first + n - 1
        if n == 1:
            return aten.eq.Scalar, first
    if n == 255:
        return aten.ne.Scalar, int((~truth).int().argmax()) - 128
    return None


@declare("pre_edge", ("aten.gt", "aten.ge", "aten.lt", "aten.le", "aten.eq", "aten.ne"), runs_after=("LutFusion",),
         order=206, flows=("cortex_m",))
class CompareOnCodes(NodeRewrite):
    matches = tuple(_COMPARE)
    what = "comparisons of int8 values with a number, on their codes"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        dq, c = increasing_dequantize(n.args[0]), n.args[1]
        if dq is None or not isinstance(c, (int, float)) or isinstance(c, bool):
            return False
        scale, zp, qmin, qmax, dtype = qparams(dq)
        if dtype != torch.int8 or (qmin, qmax) != (-128, 127):
            return False
        values = qd.dequantize_per_tensor.default(CODES, scale, zp, qmin, qmax, dtype)
        form = codes_form(_COMPARE[n.target](values, c))
        if form is None:
            return False
        op, k = form
        with gm.graph.inserting_before(n):
            new = gm.graph.call_function(op, (dq.args[0], k))
        copy_meta(n, [new])
        new.meta["val"] = n.meta.get("val")
        n.replace_all_uses_with(new)
        gm.graph.erase_node(n)
        if not dq.users:
            gm.graph.erase_node(dq)
        return True
