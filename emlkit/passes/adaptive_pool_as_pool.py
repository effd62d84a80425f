"""Adaptive average and max pools whose output divides their input, as plain pools (before quantization,
Cortex-M).

Matches, in the exported float graph: `aten.adaptive_avg_pool2d` and `aten.adaptive_max_pool2d` (its
indices unused) whose input height and width are multiples of the output's, other than a global pool
to 1x1 (which ExecuTorch's Cortex-M flow lowers already).

Produces `aten.avg_pool2d` / `aten.max_pool2d` with kernel = stride = input / output and no padding: the
same windows (adaptive window i spans [floor(i*H/oh), ceil((i+1)*H/oh)), which is [i*k, (i+1)*k) when
H = k*oh), so the same function.

Why: ExecuTorch 1.5.1's Cortex-M lowering leaves these adaptive pools as float ops; the plain pools are
quantized and run as int8 kernels. Adaptive pools to sizes that do not divide the input stay as they are.
"""

from __future__ import annotations

import operator


import torch

from emlkit.passes.graph import NodeRewrite, replace_node
from emlkit.passes.manager import declare

aten = torch.ops.aten


def _window(n: torch.fx.Node) -> list[int] | None:
    """kernel = stride (kh, kw) when the pool's output divides its 4-D input, else None."""
    x = n.args[0]
    xv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    size = n.args[1] if len(n.args) > 1 else n.kwargs.get("output_size")
    if not isinstance(xv, torch.Tensor) or xv.dim() != 4 or size is None:
        return None
    oh, ow = (int(size[0]), int(size[1])) if isinstance(size, (list, tuple)) else (int(size), int(size))
    h, w = int(xv.shape[2]), int(xv.shape[3])
    if oh <= 0 or ow <= 0 or h % oh or w % ow or (oh, ow) == (1, 1):
        return None
    return [h // oh, w // ow]


@declare("pre_quant", ("aten.adaptive_avg_pool2d", "aten.adaptive_max_pool2d"), runs_after=("Conv1dAsConv2d",),
         order=25, flows=("cortex_m",))
class AdaptivePoolAsPool(NodeRewrite):
    matches = (aten.adaptive_avg_pool2d.default, aten.adaptive_max_pool2d.default)
    what = "adaptive pools as pools"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        k, g = _window(n), gm.graph
        if k is None:
            return False
        if n.target is aten.adaptive_avg_pool2d.default:
            with g.inserting_before(n):
                new = g.call_function(aten.avg_pool2d.default, (n.args[0], k, k, [0, 0], False, True))
            new.meta["val"] = n.meta.get("val")
            replace_node(n, [new], new)
            return True
        users = list(n.users)
        if any(u.target is not operator.getitem or (u.args[1] != 0 and u.users) for u in users):
            return False  # the indices are read: leave it
        with g.inserting_before(n):
            new = g.call_function(aten.max_pool2d.default, (n.args[0], k, k, [0, 0], [1, 1], False))
        new.meta["val"] = n.meta["val"][0] if isinstance(n.meta.get("val"), (list, tuple)) else None
        for u in users:  # the values' getitem is replaced, the unread indices' dropped
            replace_node(u, [new], new)
        g.erase_node(n)
        return True
