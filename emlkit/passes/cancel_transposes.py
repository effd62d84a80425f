"""Back-to-back transposes that undo each other, removed from the final Cortex-M program.

Matches `cortex_m::transpose(cortex_m::transpose(x, p), q)` where applying p
then q is the identity permutation. This comes from `q @ k.transpose(-2, -1)`:
the model's transpose of k becomes one cortex_m::transpose, and the
quantized_batch_matmul lowering transposes its right operand again (the
kernel wants it as [B, N, K]), so k is copied twice to end up where it was.

Produces `x` for the outer transpose's users; the inner transpose goes too
when nothing else reads it. Pure data movement, so outputs are bit-identical.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx.passes.infra.pass_base import PassResult

from executorch.exir.dialects._ops import ops as exir_ops

from emlkit.passes.graph import PostPass
from emlkit.passes.manager import declare


def _is_transpose(n: Any) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and \
        n.target is exir_ops.edge.cortex_m.transpose.default


def _compose(p: list[int], q: list[int]) -> list[int]:
    """The permutation of transpose(transpose(x, p), q): output dim i reads input dim p[q[i]]."""
    return [p[i] for i in q]


@declare("post", ("cortex_m.transpose",), order=290)
class CancelTransposes(PostPass):
    def __init__(self) -> None:
        super().__init__()
        self.removed = 0

    def report(self) -> dict[str, Any]:
        return {"removed_pairs": self.removed}

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        changed = False
        self.removed = 0
        for n in list(graph_module.graph.nodes):
            if not _is_transpose(n) or not _is_transpose(n.args[0]):
                continue
            inner = n.args[0]
            p, q = list(inner.args[1]), list(n.args[1])
            if len(p) != len(q) or _compose(p, q) != list(range(len(p))):
                continue
            n.replace_all_uses_with(inner.args[0])
            graph_module.graph.erase_node(n)
            if not inner.users:
                graph_module.graph.erase_node(inner)
            self.removed += 1
            changed = True
        if changed:
            graph_module.graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, changed)
