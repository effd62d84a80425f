"""An add or mul operand in another dim order than its output, copied to the output's order first (Cortex-M).

Matches, in the lowered program: `cortex_m::quantized_add` / `quantized_mul` whose two operands have the output's
sizes but an operand's dim order differs from the output's.

Produces a `_clone_dim_order` of that operand to the output's dim order, read by the op instead.

Why: the firmware's add and mul take equal-size operands in one layout, the output's (firmware/ops/
cortex_m_elementwise.c), and refuse others at load. ExecuTorch 1.5.1 gives `cortex_m::maximum`/`minimum` against a
(1, C, 1, 1) constant a contiguous output even for a channels-last input, and adds such a value to a channels-last
one without a copy (random model fam:0: a clamp with tensor bounds, then an add).
"""

from __future__ import annotations

from typing import Any

import torch

from emlkit.passes.graph import ProgramRewrite, dim_order_of
from emlkit.passes.manager import declare

# The operand slots of each op (its schema: self first; other after self's qparams).
_OPERANDS = {"quantized_add": (0, 4), "quantized_mul": (0, 2)}


@declare("program", ("cortex_m.quantized_add", "cortex_m.quantized_mul"), order=287, runs_after=("PatchStages",),
         flows=("cortex_m",))
class OperandsInOutOrder(ProgramRewrite):
    cm_ops = tuple(_OPERANDS)
    report_name = "copied"

    def rewrite(self, ep: Any, n: torch.fx.Node, op: str) -> bool:
        from executorch.exir.dialects._ops import ops as exir_ops

        out, want = n.meta.get("val"), dim_order_of(n)
        if not isinstance(out, torch.Tensor) or want is None:
            return False
        changed = False
        for slot in _OPERANDS[op]:
            x = n.args[slot]
            xv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
            if not isinstance(xv, torch.Tensor) or xv.shape != out.shape or dim_order_of(x) == want:
                continue
            g = ep.graph_module.graph
            with g.inserting_before(n):
                copy = g.call_function(exir_ops.edge.dim_order_ops._clone_dim_order.default, (x,), {"dim_order": want})
            copy.meta.update(x.meta)
            back = [want.index(d) for d in range(xv.dim())]
            copy.meta["val"] = xv.permute(want).contiguous().permute(back)
            n.update_arg(slot, copy)
            changed = True
        return changed
