"""The folded bias of windows inside the input, computed at compile time for padded convolutions and depthwise.

Matches, in the final Cortex-M ExportedProgram, `cortex_m::quantized_conv2d` (and `_nhwc`) nodes with
groups 1 and an input offset in -127..128, and `cortex_m::quantized_depthwise_conv2d` (and `_nhwc`)
nodes with depth multiplier 1, whose input offset is not zero (FoldInputOffset has already removed
it from the convolutions that read no padding), with constant weights, bias and multipliers that no
other node uses.

Produces the same node with the requantize_multipliers tensor extended from out_c to 2 * out_c
entries: the multipliers, then per output channel bias + input_offset * sum(all the channel's
weights), wrapped to int32 like the kernels' arithmetic. That is the start value of every window
that lies inside the input; our kernels used to sum the weights for it on every call (conv: the
MVE and DSP fast paths' folded bias; depthwise: the MVE 16-channel blocks and the DSP start values).
Border windows still add the offset per valid tap, from the unchanged bias.

Why the multipliers tensor: no cortex_m:: argument carries the data, and this way the node keeps its
op and meaning. ExecuTorch's reference (operators.py) and CMSIS-NN read one multiplier per output
channel (the first out_c entries), so the program's outputs are unchanged and still bit-exact with
the reference; our runtime (firmware/ops/cortex_m_conv.c) checks the extra entries against the
weights once at load and refuses a program whose entries disagree.

Runs on the ExportedProgram (it owns the constants), after FoldInputOffset; KernelScratch and
VerifyProgram run after it.
"""

from __future__ import annotations

from typing import Any

import torch
from executorch.backends.transforms.utils import get_param_tensor, is_param_node, set_param_tensor

from aot.passes._graph import ProgramRewrite, wrap_int32
from aot.passes.manager import declare

CONV_OPS = ("quantized_conv2d", "quantized_conv2d_nhwc")
DW_OPS = ("quantized_depthwise_conv2d", "quantized_depthwise_conv2d_nhwc")
# argument positions: (input_offset, requantize_multipliers)
CONV_ARGS, DW_ARGS = (6, 8), (7, 9)


def window_bias(w: torch.Tensor, b: torch.Tensor | None, off: int, depthwise: bool) -> torch.Tensor:
    """bias + off * sum(weights) per output channel (conv OHWI, depthwise 1HWO), wrapped to int32."""
    w64 = w.to(torch.int64)
    wsum = w64.sum(dim=(0, 1, 2)) if depthwise else w64.reshape(w.shape[0], -1).sum(dim=1)
    base = b.to(torch.int64) if b is not None else torch.zeros_like(wsum)
    return wrap_int32(base + off * wsum)


@declare("program", ("cortex_m.quantized_conv2d", "cortex_m.quantized_depthwise_conv2d"),
         runs_after=("FoldInputOffset",))
class WindowBias(ProgramRewrite):
    report_key = "window_bias"
    report_name = "nodes_with_folded_window_bias"
    ops = (*CONV_OPS, *DW_OPS)

    def rewrite(self, ep: Any, n: torch.fx.Node, name: str) -> bool:
        dw = name in DW_OPS
        off_i, m_i = DW_ARGS if dw else CONV_ARGS
        x, wnode, bnode, mnode = n.args[0], n.args[1], n.args[2], n.args[m_i]
        off = int(n.args[off_i])
        if off == 0 or not isinstance(x, torch.fx.Node) or "val" not in x.meta:
            return False
        if not all(isinstance(a, torch.fx.Node) and is_param_node(ep, a) for a in (wnode, mnode)):
            return False
        if bnode is not None and not (isinstance(bnode, torch.fx.Node) and is_param_node(ep, bnode)):
            return False
        if len(mnode.users) != 1:
            return False
        w, m = get_param_tensor(ep, wnode), get_param_tensor(ep, mnode)
        b = get_param_tensor(ep, bnode) if bnode is not None else None
        xs = list(x.meta["val"].shape)
        if w is None or m is None or w.dim() != 4 or len(xs) != 4 or m.dtype != torch.int32 or m.dim() != 1:
            return False
        in_c = xs[3] if name.endswith("_nhwc") else xs[1]
        out_c = w.shape[3] if dw else w.shape[0]
        if m.numel() != out_c or (b is not None and (b.dtype != torch.int32 or b.numel() != out_c)):
            return False
        if dw and (w.shape[0] != 1 or out_c != in_c):
            return False  # depth multipliers above 1 run other kernel paths
        if not dw and (w.shape[3] != in_c or not -127 <= off <= 128):
            return False  # grouped convolutions and offsets outside the pad range run the general path
        ext = torch.cat([m, window_bias(w, b, off, dw)])
        set_param_tensor(ep, mnode, ext)
        old = mnode.meta.get("val")
        fake_mode = getattr(old, "fake_mode", None)
        mnode.meta["val"] = fake_mode.from_tensor(ext, static_shapes=True) if fake_mode is not None else ext
        return True
