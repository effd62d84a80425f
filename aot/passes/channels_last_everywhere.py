"""Every 4-D activation channels-last in the Cortex-M flow (before quantization).

Matches, in the exported float graph of the default (dim-order) Cortex-M flow,
any op whose 4-D float output is not channels-last in memory: a permute or
transpose of H and W, a reshape to a new 4-D shape, and ops computed from them.

Produces `clone(y, memory_format=torch.channels_last)` after each such op (a
dim-order copy in the program; its quantization is shared with y, so it moves
bytes only).

Why: the Cortex-M flow runs CMSIS-NN's NHWC kernels on channels-last tensors;
our firmware checks every 4-D operand's dim order. A `permute(0, 1, 3, 2)`
returns a tensor in NCHW order, and the conv after it compiled into a program
whose device run stopped with "quantized_conv2d: input must be channels-last
(dim order 0,2,3,1); got dim order 0,1,2,3" (found by scripts/fuzz_models.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from aot.passes._graph import Rewrite, copy_meta
from aot.passes.manager import declare

aten = torch.ops.aten


def _needs_copy(n: torch.fx.Node) -> bool:
    val = n.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dim() != 4 or not val.dtype.is_floating_point:
        return False
    if n.op != "call_function" or not n.users:
        return False
    if n.target is aten.clone.default and n.kwargs.get("memory_format") is torch.channels_last:
        return False
    return not val.is_contiguous(memory_format=torch.channels_last)


@declare("pre_quant", ("aten.permute", "aten.transpose", "aten.view", "aten.reshape"), runs_after=("*",))
@dataclass
class ChannelsLastEverywhere(Rewrite):
    report_key: str = "channels_last_everywhere"
    report_name = "copied"

    def set_target(self, target: Any, options: Any) -> None:
        self.active = target.flow == "cortex_m" and not options.explicit_layout

    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        g, copied = gm.graph, []
        for n in list(g.nodes):
            if not _needs_copy(n):
                continue
            with g.inserting_after(n):
                cl = g.call_function(aten.clone.default, (n,), {"memory_format": torch.channels_last})
            n.replace_all_uses_with(cl, delete_user_cb=lambda u: u is not cl)
            copy_meta(n, [cl])
            val = n.meta["val"]
            cl.meta["val"] = val.clone(memory_format=torch.channels_last)
            copied.append(n.name)
        if copied:
            g.lint()
            gm.recompile()
        return copied
