"""Input offsets of convolutions that never read padding, folded into their bias at compile time.

Matches, in the final Cortex-M ExportedProgram, `cortex_m::quantized_conv2d` (and `_nhwc`) nodes
with padding (0, 0), a non-zero input_offset and a constant int32 bias that no other node uses.
Without padding every tap of every window reads the input, so
conv(x + off, w) + b == conv(x, w) + (b + off * sum(w)) exactly in int32 (ExecuTorch's reference
computes the same integer convolution either way).

Produces the same node with bias b + off * sum(w) per output channel (wrapped to int32 like the
kernels' arithmetic) and input_offset 0: the kernels, which fold off * sum(w) themselves on every
call when the offset is not zero, then skip that pass over the weights. 1x1 convolutions (MobileNet's
expand and project layers) are the common case. Outputs are bit-identical (the suite checks them).

Runs on the ExportedProgram (it owns the constants) right after CortexMPassManager, which creates
these nodes; KernelScratch and VerifyProgram run after it.
"""

from __future__ import annotations

from typing import Any

import torch
from executorch.backends.transforms.utils import get_param_tensor, is_param_node, set_param_tensor

from emlkit.passes.graph import ProgramRewrite, wrap_int32
from emlkit.passes.manager import declare

CONV_OPS = ("quantized_conv2d", "quantized_conv2d_nhwc")
OFFSET_ARG, BIAS_ARG, PAD_ARG = 6, 2, 4


@declare("program", ("cortex_m.quantized_conv2d",), order=260, flows=("cortex_m",))
class FoldInputOffset(ProgramRewrite):
    report_name = "folded_convolutions"
    cm_ops = CONV_OPS

    def rewrite(self, ep: Any, n: torch.fx.Node, op: str) -> bool:
        off, bias, pad = int(n.args[OFFSET_ARG]), n.args[BIAS_ARG], tuple(n.args[PAD_ARG])
        if off == 0 or pad != (0, 0) or not isinstance(bias, torch.fx.Node) or len(bias.users) != 1 \
                or not is_param_node(ep, bias) or not is_param_node(ep, n.args[1]):
            return False
        b, w = get_param_tensor(ep, bias), get_param_tensor(ep, n.args[1])
        if b is None or w is None or b.dtype != torch.int32 or w.dim() != 4 or b.numel() != w.shape[0]:
            return False
        wsum = w.to(torch.int64).reshape(w.shape[0], -1).sum(dim=1)
        set_param_tensor(ep, bias, wrap_int32(b.to(torch.int64) + off * wsum))
        args = list(n.args)
        args[OFFSET_ARG] = 0
        n.args = tuple(args)
        return True
