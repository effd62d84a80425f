"""argmax / argmin of a dequantized tensor taken on its int8 codes (after quantization; Cortex-M, and the
argmaxes an Ethos-U compile leaves on the CPU).

Matches, in the quantized graph: `aten.argmax` / `aten.argmin` whose input is a per-tensor `dequantize`
with a positive scale.

Produces the same op on the dequantize's input, the int8 codes: dequantization is increasing (a positive
scale), so the largest (smallest) code sits where the largest (smallest) value does, and equal values have
equal codes, so the first index of the extreme is the same too.

Why: the quantizers leave argmax unannotated, so it read the dequantized floats (a float op, and a float
copy of its input); the firmware's argmax takes int8 directly. On Ethos-U an argmax the NPU partitioner does not take
(its int64 result unless narrowed to int32) was the same float op.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import CodesRewrite
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_edge", ("aten.argmax", "aten.argmin"), runs_after=("LutFusion",), order=207, flows=("cortex_m", "ethos_u_cpu"),
         bits=("int8",))
class ArgmaxOnCodes(CodesRewrite):
    matches = (aten.argmax.default, aten.argmin.default)
    what = "argmax/argmin on int8 codes"

    def on_codes(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node) -> bool:
        n.replace_input_with(dq, dq.args[0])
        return True
