"""view_copy in the Cortex-M program: a contiguous input, and a channels-last 4-D output.

Matches, in the final edge program, `aten.view_copy(x, shape)` where x's dim order
is not the default one and x's bytes are not already in contiguous order (a
channels-last [1, C, H, W] with C > 1 and H * W > 1, say).

Produces `view_copy(_clone_dim_order(x, dim_order=[0, 1, ..]), shape)`. And where a view_copy's
output is 4-D, not channels-last in memory and read by an op other than a view or the
program output, a channels-last `_clone_dim_order` after it for those readers.

Why: ExecuTorch's ReplaceViewCopyWithViewPass (run by to_executorch) turns every
view_copy that does not feed the output into a memory alias of its input and
gives it contiguous strides, whatever the input's dim order. On a channels-last
input the alias reads NHWC bytes as NCHW: `x.reshape(1, 4, 32, 1).reshape(1, 4, 4, 8)`
became "quantize, dequantize" with the output aliasing the channels-last
quantized input, 181 steps off on the device (found by scripts/fuzz_models.py,
tests/data/fuzz_repros/cortex_m55_reshape_roundtrip_mismatch.py). With a
contiguous base the alias is exact; the copy is pure data movement. The second copy:
to_edge gives every view_copy a contiguous output, so after `x.reshape(1, 4, 144, 1).reshape(1, 4, 12, 12)`
a conv read NCHW data and the device stopped ("quantized_conv2d: input must be
channels-last"; fuzz seed 7:13). In the float graph that reshape was channels-last, so
channels_last_everywhere.py saw nothing to copy.
"""

from __future__ import annotations

from typing import Any

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from torch.fx.passes.infra.pass_base import PassResult

from emlkit.passes.graph import PostPass
from emlkit.passes.manager import declare

_VIEW = exir_ops.edge.aten.view_copy.default
_CLONE = exir_ops.edge.dim_order_ops._clone_dim_order.default
_CL_ORDER = [0, 2, 3, 1]


def _needs_channels_last_copy(n: torch.fx.Node) -> bool:
    val = n.meta.get("val")
    if n.op != "call_function" or n.target is not _VIEW or not isinstance(val, torch.Tensor) or val.dim() != 4:
        return False
    if val.is_contiguous(memory_format=torch.channels_last):
        return False
    return any(u.op != "output" and u.target is not _VIEW for u in n.users)


def _needs_copy(n: torch.fx.Node) -> bool:
    if n.op != "call_function" or n.target is not _VIEW:
        return False
    base = n.args[0]
    val = base.meta.get("val") if isinstance(base, torch.fx.Node) else None
    # is_contiguous() ignores size-1 dims, so e.g. a channels-last [1, C, 1, 1] needs no copy.
    return isinstance(val, torch.Tensor) and not val.is_contiguous()


@declare("post", ("aten.view_copy",), order=300)
class ContiguousViewBase(PostPass):
    report_name = "copied"

    def __init__(self) -> None:
        super().__init__()
        self.channels_last = True  # the layout 4-D activations take (a parameter of the target, set in bind)

    def bind(self, target: Any, options: Any) -> None:
        # Only the dim-order Cortex-M flow wants 4-D activations channels-last (an Ethos-U delegate or the
        # explicit-layout flow takes what the graph gives it); the contiguous base is right for every flow.
        self.channels_last = target.flow == "cortex_m" and not options.explicit_layout

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        self.done = []
        g = graph_module.graph
        for n in list(g.nodes):
            if self.channels_last and _needs_channels_last_copy(n):
                with g.inserting_after(n):
                    cl = g.call_function(_CLONE, (n,), {"dim_order": list(_CL_ORDER)})
                cl.meta.update({k: v for k, v in n.meta.items() if k in ("stack_trace", "nn_module_stack", "from_node")})
                cl.meta["val"] = n.meta["val"].clone(memory_format=torch.channels_last)
                n.replace_all_uses_with(cl, delete_user_cb=lambda u: u is not cl and u.op != "output"
                                        and u.target is not _VIEW)
                self.done.append(f"{n.name} (to channels-last)")
            if not _needs_copy(n):
                continue
            base = n.args[0]
            with g.inserting_before(n):
                cp = g.call_function(_CLONE, (base,), {"dim_order": list(range(base.meta["val"].dim()))})
            cp.meta.update({k: v for k, v in n.meta.items() if k in ("stack_trace", "nn_module_stack", "from_node")})
            cp.meta["val"] = base.meta["val"].clone(memory_format=torch.contiguous_format)
            n.replace_input_with(base, cp)
            self.done.append(n.name)
        if self.done:
            g.lint()
            graph_module.recompile()
        return PassResult(graph_module, bool(self.done))
