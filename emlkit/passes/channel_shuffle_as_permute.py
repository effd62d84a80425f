"""Channel shuffle as a view, a transpose and a reshape (before quantization).

Matches, in the exported float graph: `aten.channel_shuffle` / `aten.native_channel_shuffle` (nn.ChannelShuffle,
F.channel_shuffle) over an input of at least 3 dims whose channels split into the given groups.

Produces `x.view(N, g, C/g, *rest).transpose(1, 2).reshape(N, C, *rest)`: the op's definition, and the form
users who write ShuffleNet by hand already use.

Why: the quantizers annotate neither op, so the int8 activation after it (random model dec7b:1, a softplus after
nn.ChannelShuffle) saw a float input and stayed float (6 ops refused on Cortex-M). Views and transposes share their
input's qparams: the shuffle moves int8 codes, and the pointwise op after it becomes a table.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import NodeRewrite, node_arg, node_val, replace_node
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_quant", ("aten.channel_shuffle", "aten.native_channel_shuffle"), order=22)
class ChannelShuffleAsPermute(NodeRewrite):
    matches = (aten.channel_shuffle.default, aten.native_channel_shuffle.default)
    what = "channel shuffle as view + transpose + reshape"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        x = n.args[0]
        xv = node_val(x)
        groups = node_arg(n, 1, "groups")
        if xv is None or xv.dim() < 3 or not isinstance(groups, int) or groups < 1 or xv.shape[1] % groups:
            return False
        shape = list(xv.shape)
        split = [shape[0], groups, shape[1] // groups, *shape[2:]]
        g = gm.graph
        with g.inserting_before(n):
            v = g.call_function(aten.view.default, (x, split))
            t = g.call_function(aten.transpose.int, (v, 1, 2))
            out = g.call_function(aten.reshape.default, (t, shape))
        v.meta["val"] = xv.reshape(split)
        t.meta["val"] = v.meta["val"].transpose(1, 2)
        out.meta["val"] = t.meta["val"].reshape(shape)
        replace_node(n, [v, t, out], out)
        return True
