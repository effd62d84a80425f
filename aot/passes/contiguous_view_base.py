"""A contiguous copy before every view_copy whose input is not contiguous in memory.

Matches, in the final edge program, `aten.view_copy(x, shape)` where x's dim order
is not the default one and x's bytes are not already in contiguous order (a
channels-last [1, C, H, W] with C > 1 and H * W > 1, say).

Produces `view_copy(_clone_dim_order(x, dim_order=[0, 1, ..]), shape)`.

Why: ExecuTorch's ReplaceViewCopyWithViewPass (run by to_executorch) turns every
view_copy that does not feed the output into a memory alias of its input and
gives it contiguous strides, whatever the input's dim order. On a channels-last
input the alias reads NHWC bytes as NCHW: `x.reshape(1, 4, 32, 1).reshape(1, 4, 4, 8)`
became "quantize, dequantize" with the output aliasing the channels-last
quantized input, 181 steps off on the device (found by scripts/fuzz_models.py,
tests/data/fuzz_repros/cortex_m55_reshape_roundtrip_mismatch.py). With a
contiguous base the alias is exact; the copy is pure data movement.
"""

from __future__ import annotations

from typing import Any

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from torch.fx.passes.infra.pass_base import PassBase, PassResult

_VIEW = exir_ops.edge.aten.view_copy.default
_CLONE = exir_ops.edge.dim_order_ops._clone_dim_order.default


def _needs_copy(n: torch.fx.Node) -> bool:
    if n.op != "call_function" or n.target is not _VIEW:
        return False
    base = n.args[0]
    val = base.meta.get("val") if isinstance(base, torch.fx.Node) else None
    # is_contiguous() ignores size-1 dims, so e.g. a channels-last [1, C, 1, 1] needs no copy.
    return isinstance(val, torch.Tensor) and not val.is_contiguous()


class ContiguousViewBase(PassBase):
    report_key = "contiguous_view_base"

    def __init__(self) -> None:
        super().__init__()
        self.copied: list[str] = []

    def report(self) -> dict[str, Any]:
        return {"copied": list(self.copied)}

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        self.copied = []
        g = graph_module.graph
        for n in list(g.nodes):
            if not _needs_copy(n):
                continue
            base = n.args[0]
            with g.inserting_before(n):
                cp = g.call_function(_CLONE, (base,), {"dim_order": list(range(base.meta["val"].dim()))})
            cp.meta.update({k: v for k, v in n.meta.items() if k in ("stack_trace", "nn_module_stack", "from_node")})
            cp.meta["val"] = base.meta["val"].clone(memory_format=torch.contiguous_format)
            n.replace_input_with(base, cp)
            self.copied.append(n.name)
        if self.copied:
            g.lint()
            graph_module.recompile()
        return PassResult(graph_module, bool(self.copied))
