"""Depthwise convolutions of a one-channel input, rewritten as ordinary convolutions at compile time.

Matches, in the final Cortex-M ExportedProgram, `cortex_m::quantized_depthwise_conv2d` (and `_nhwc`)
nodes whose input has one channel and a depth multiplier above 1 (ExecuTorch lowers a
convolution of a one-channel map this way, e.g. DS-CNN's first 10x4 layer on the MFCC map),
with a constant weight that no other node uses.

Produces `cortex_m::quantized_conv2d` (`_nhwc` for `_nhwc`) with the same input, bias, geometry,
offsets, requantization and scratch, and the weight transposed once from 1HWO [1][KH][KW][OC] to
OHWI [OC][KH][KW][1]. With one input channel, a depthwise convolution (groups = in_c = 1) and a
convolution (groups = 1) are the same integer computation in ExecuTorch's references, so the
outputs are bit-identical. Our kernels ran this case as a convolution already, but transposed the
weights into scratch on every call (1HWO -> OHWI, one byte at a time): now that repacking is done
here, and an unpadded one is then folded by FoldInputOffset like any convolution.

Not on cores that run the portable C kernels (M0/M0+/M3), where the depthwise loop is the cheaper.
Runs on the ExportedProgram (it owns the constants) right after CortexMPassManager, before
FoldInputOffset; KernelScratch (which sizes the new node's scratch for the convolution kernel) and
VerifyProgram run after it.
"""

from __future__ import annotations

from typing import Any

import torch
from executorch.backends.transforms.utils import get_param_tensor, is_param_node, set_param_tensor
from executorch.exir.dialects._ops import ops as exir_ops

from emlkit.passes.manager import Pass, declare

DW_TO_CONV = {"quantized_depthwise_conv2d": "quantized_conv2d",
              "quantized_depthwise_conv2d_nhwc": "quantized_conv2d_nhwc"}
DM_ARG = 6  # depth_multiplier: the one argument the depthwise schema has and the conv schema has not


# Cores with CMSIS-NN kernels. The others (cortex-m0, m0plus, m3) run the portable C kernels: their
# depthwise loop is cheaper than the convolution loop on one input channel (mlperf_kws_dscnn on the M3:
# 37.3 M -> 40.8 M instructions with the rewrite), so the program keeps the depthwise node there.
CMSIS_NN_CPUS = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55", "cortex-m85")


@declare("program", ("cortex_m.quantized_depthwise_conv2d",), runs_before=("FoldInputOffset",),
         order=250, flows=("cortex_m",), targets=CMSIS_NN_CPUS)
class DepthwiseOneChannelAsConv(Pass):
    def __init__(self) -> None:
        self.rewritten = 0

    def report(self) -> dict[str, Any]:
        return {"rewritten_convolutions": self.rewritten}

    def reset(self) -> None:
        self.rewritten = 0

    def work(self, ep: Any) -> Any:
        cm = exir_ops.edge.cortex_m
        dw_ops = {getattr(cm, dw).default: (dw, getattr(cm, conv).default)
                  for dw, conv in DW_TO_CONV.items() if hasattr(cm, dw) and hasattr(cm, conv)}
        for n in ep.graph_module.graph.nodes:
            if n.op != "call_function" or n.target not in dw_ops:
                continue
            name, conv = dw_ops[n.target]
            x, wnode = n.args[0], n.args[1]
            if not isinstance(x, torch.fx.Node) or "val" not in x.meta or not isinstance(wnode, torch.fx.Node) \
                    or len(wnode.users) != 1 or not is_param_node(ep, wnode):
                continue
            xs = list(x.meta["val"].shape)
            if len(xs) != 4 or (xs[3] if name.endswith("_nhwc") else xs[1]) != 1:
                continue
            w = get_param_tensor(ep, wnode)
            if w is None or w.dim() != 4 or w.shape[0] != 1 or w.shape[3] <= 1 or int(n.args[DM_ARG]) != w.shape[3]:
                continue
            ohwi = w.permute(3, 1, 2, 0).contiguous()  # 1HWO -> OHWI with I = 1
            set_param_tensor(ep, wnode, ohwi)
            old = wnode.meta.get("val")
            fake_mode = getattr(old, "fake_mode", None)
            wnode.meta["val"] = fake_mode.from_tensor(ohwi, static_shapes=True) if fake_mode is not None else ohwi
            args = list(n.args)
            del args[DM_ARG]
            n.target = conv
            n.args = tuple(args)
            self.rewritten += 1
        if self.rewritten:
            ep.graph_module.recompile()
        return ep
