"""ReLU6 as hardtanh(0, 6), before quantization annotation.

Matches `aten.relu6` (what `F.relu6` exports to) in the exported float graph.
Produces `aten.hardtanh(x, 0.0, 6.0)`, the op `nn.ReLU6` exports to, which the
Cortex-M and Arm quantizers annotate as a fused activation (conv/linear +
hardtanh -> activation bounds) and the TOSA partitioner delegates as a clamp.
Same function, so the float model is unchanged.
"""

from __future__ import annotations

import torch

from emlkit.passes.manager import Pass, declare

aten = torch.ops.aten


@declare("pre_quant", ("aten.relu6",), order=10)
class Relu6ToHardtanh(Pass):
    def work(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        changed = False
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target in (aten.relu6.default, getattr(aten, "relu6_").default):
                n.target = aten.hardtanh.default
                n.args = (n.args[0], 0.0, 6.0)
                n.kwargs = {}
                changed = True
        if changed:
            gm.graph.lint()
            gm.recompile()
        return gm
