"""The folded bias of windows inside the input, computed at compile time for padded convolutions and depthwise.

Matches, in the final Cortex-M ExportedProgram, `cortex_m::quantized_conv2d` (and `_nhwc`) nodes
(grouped ones and any input offset included) and `cortex_m::quantized_depthwise_conv2d` (and `_nhwc`)
nodes with depth multiplier 1, whose input offset is not zero (FoldInputOffset has already removed
it from the convolutions that read no padding), with constant weights, bias, multipliers and shifts,
multipliers that no other node uses.

Produces the same node with the requantize_multipliers tensor extended past its out_c multipliers by
the start value of every window that lies inside the input, per output channel bias + input_offset *
sum(all the channel's weights), wrapped to int32 like the kernels' arithmetic:
- convolutions: those out_c values, zero-padded to a multiple of 4 channels (the MVE fast path reads
  them in whole vectors, in place; the MVE general path of grouped convolutions and wide offsets
  starts full windows from them);
- depthwise: those out_c values, then (on targets with MVE) per 16 channels the 48-int32 block the
  MVE loops read through one pointer: the 16 start values, the 16 multipliers, the 16 shifts, zero
  past out_c (`dw_blocks`; 12 bytes a channel, 16 with the start values).
Our kernels used to compute all of it on every call (the weight sums; the depthwise blocks and the
conv's padded copy in scratch). Border windows still add the offset per valid tap, from the unchanged
bias. The runtime tells the forms apart by the tensor's length.

Why the multipliers tensor: no cortex_m:: argument carries the data, and this way the node keeps its
op and meaning. ExecuTorch's reference (operators.py) and CMSIS-NN read one multiplier per output
channel (the first out_c entries), so the program's outputs are unchanged and still bit-exact with
the reference; our runtime (firmware/ops/cortex_m_conv.c) checks the extra entries against the
weights, bias, multipliers and shifts once at load and refuses a program whose entries disagree (and so
does compile, which runs that load on the host).

Runs on the ExportedProgram (it owns the constants), after FoldInputOffset; KernelScratch and
VerifyProgram run after it.
"""

from __future__ import annotations

from typing import Any

import torch
from executorch.backends.transforms.utils import get_param_tensor, is_param_node, set_param_tensor

from emlkit.passes.graph import ProgramRewrite, wrap_int32
from emlkit.passes.manager import declare

CONV_OPS = ("quantized_conv2d", "quantized_conv2d_nhwc")
DW_OPS = ("quantized_depthwise_conv2d", "quantized_depthwise_conv2d_nhwc")
# argument positions: (input_offset, requantize_multipliers); the shifts follow the multipliers
CONV_ARGS, DW_ARGS = (6, 8), (7, 9)
DW_BLOCK_CHANNELS = 16   # channels per depthwise block; 3 x 16 int32 each (DW_BLOCK in the kernel)


def window_bias(w: torch.Tensor, b: torch.Tensor | None, off: int, depthwise: bool) -> torch.Tensor:
    """bias + off * sum(weights) per output channel (conv OHWI, depthwise 1HWO), wrapped to int32."""
    w64 = w.to(torch.int64)
    wsum = w64.sum(dim=(0, 1, 2)) if depthwise else w64.reshape(w.shape[0], -1).sum(dim=1)
    base = b.to(torch.int64) if b is not None else torch.zeros_like(wsum)
    return wrap_int32(base + off * wsum)


def _pad(v: torch.Tensor, multiple: int) -> torch.Tensor:
    return torch.cat([v, v.new_zeros((-v.numel()) % multiple)])


def conv_extension(beff: torch.Tensor) -> torch.Tensor:
    """A convolution's entries after its multipliers: the start values, zero-padded to whole vectors of 4."""
    return _pad(beff.to(torch.int32), 4)


def dw_blocks(beff: torch.Tensor, mult: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Per 16 channels: 16 start values, 16 multipliers, 16 shifts (int32, zero past the last channel)."""
    parts = [_pad(t.to(torch.int32).flatten(), DW_BLOCK_CHANNELS).reshape(-1, DW_BLOCK_CHANNELS)
             for t in (beff, mult, shift)]
    return torch.stack(parts, dim=1).flatten()


@declare("program", ("cortex_m.quantized_conv2d", "cortex_m.quantized_depthwise_conv2d"),
         runs_after=("FoldInputOffset",), order=270, flows=("cortex_m",))
class WindowBias(ProgramRewrite):
    report_name = "nodes_with_folded_window_bias"
    cm_ops = (*CONV_OPS, *DW_OPS)
    blocks = True    # store the depthwise 16-channel blocks (targets whose kernels have MVE)

    def __init__(self) -> None:
        super().__init__()
        self.dw_blocks = 0
        self.bytes_added = 0

    def bind(self, target: Any, options: Any) -> None:
        self.blocks = target.isa == "MVE"   # cores without MVE read the start values alone

    def report(self) -> dict[str, Any]:
        return {**super().report(), "depthwise_with_16_channel_blocks": self.dw_blocks,
                "constant_bytes_added": self.bytes_added}

    def reset(self) -> None:
        super().reset()
        self.dw_blocks = self.bytes_added = 0

    def rewrite(self, ep: Any, n: torch.fx.Node, name: str) -> bool:
        dw = name in DW_OPS
        off_i, m_i = DW_ARGS if dw else CONV_ARGS
        x, wnode, bnode, mnode, snode = n.args[0], n.args[1], n.args[2], n.args[m_i], n.args[m_i + 1]
        off = int(n.args[off_i])
        if off == 0 or not isinstance(x, torch.fx.Node) or "val" not in x.meta:
            return False
        if not all(isinstance(a, torch.fx.Node) and is_param_node(ep, a) for a in (wnode, mnode, snode)):
            return False
        if bnode is not None and not (isinstance(bnode, torch.fx.Node) and is_param_node(ep, bnode)):
            return False
        if len(mnode.users) != 1:
            return False
        w, m, s = get_param_tensor(ep, wnode), get_param_tensor(ep, mnode), get_param_tensor(ep, snode)
        b = get_param_tensor(ep, bnode) if bnode is not None else None
        xs = list(x.meta["val"].shape)
        if w is None or m is None or s is None or w.dim() != 4 or len(xs) != 4 or m.dtype != torch.int32 \
                or m.dim() != 1 or s.dtype != torch.int32:
            return False
        in_c = xs[3] if name.endswith("_nhwc") else xs[1]
        out_c = w.shape[3] if dw else w.shape[0]
        if m.numel() != out_c or s.numel() != out_c or (b is not None and (b.dtype != torch.int32
                                                                           or b.numel() != out_c)):
            return False
        if dw and (w.shape[0] != 1 or out_c != in_c):
            return False  # depth multipliers above 1 run other kernel paths
        if not dw and (w.shape[3] == 0 or in_c % w.shape[3] or out_c % (in_c // w.shape[3])):
            return False  # not a convolution the runtime accepts: leave its refusal to the verifier
        beff = window_bias(w, b, off, dw)
        if not dw:
            ext = torch.cat([m, conv_extension(beff)])
        elif self.blocks:
            ext = torch.cat([m, beff, dw_blocks(beff, m, s)])
            self.dw_blocks += 1
        else:
            ext = torch.cat([m, beff])
        self.bytes_added += 4 * (ext.numel() - m.numel())
        set_param_tensor(ep, mnode, ext)
        old = mnode.meta.get("val")
        fake_mode = getattr(old, "fake_mode", None)
        mnode.meta["val"] = fake_mode.from_tensor(ext, static_shapes=True) if fake_mode is not None else ext
        return True
