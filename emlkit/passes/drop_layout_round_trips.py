"""Layout copies that undo each other or change nothing, removed from the final Cortex-M program.

Matches, in the final edge program, `_clone_dim_order(x, dim_order=B)`:
- whose input is itself `_clone_dim_order(y, dim_order=A)` read by nothing else: the copy then reads y;
- whose input (after that) already has dim order B: the copy goes, its readers read x.
Not a copy that the program outputs (an output must not alias an input or another output).

Produces the same values with fewer copies. Taken in graph order, a chain y -> A -> B -> A ... collapses to one
copy or none.

Why: the channels-last flow and contiguous_view_base.py each add copies where their own rule needs them, and
attention's reshapes between batch matmuls meet both. A 64-token nn.MultiheadAttention with masks ran 19 layout
copies on cortex-m55, a quarter of its instructions, most of them round trips (NCHW to NHWC and back) or copies
to the order the tensor already had. Pure data movement, so outputs are bit-identical.
"""

from __future__ import annotations

from typing import Any

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from torch.fx.passes.infra.pass_base import PassResult

from emlkit.passes.graph import PostPass, dim_order_of
from emlkit.passes.manager import declare

_CLONE = exir_ops.edge.dim_order_ops._clone_dim_order.default


def _is_copy(n: Any) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target is _CLONE


@declare("post", ("dim_order_ops._clone_dim_order",), order=305, runs_after=("ContiguousViewBase",),
         flows=("cortex_m",))
class DropLayoutRoundTrips(PostPass):
    report_name = "removed"

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        self.done = []
        g = graph_module.graph
        for n in list(g.nodes):
            if not _is_copy(n) or any(u.op == "output" for u in n.users):
                continue
            inner = n.args[0]
            if _is_copy(inner) and len(inner.users) == 1:  # y -> A -> B: read y
                n.replace_input_with(inner, inner.args[0])
                g.erase_node(inner)
                self.done.append(inner.name)
            x = n.args[0]
            order = dim_order_of(x)  # None unless x is a node with an example tensor
            if order is not None and order == dim_order_of(n) and x.meta["val"].dtype == n.meta["val"].dtype:
                n.replace_all_uses_with(x)
                g.erase_node(n)
                self.done.append(n.name)
        if self.done:
            g.lint()
            graph_module.recompile()
        return PassResult(graph_module, bool(self.done))
