"""Linear weights and biases computed from parameters, as parameters of their own (before quantization, Cortex-M).

Matches, in the exported float graph: `aten.linear` whose weight or bias is not a parameter but computed from
constants only, such as the slices of `in_proj_weight` nn.MultiheadAttention takes when the query is not also the
key and value (`w_q, w_kv = w.split(...)`: TransformerDecoderLayer's cross-attention).

Produces the same linear reading a new parameter that holds the computed value (the ops that computed it are
erased when nothing else reads them).

Why: ExecuTorch 1.5.1's Cortex-M lowering (AtenToCortexMPass) takes a linear's weight only from a parameter and
failed on a computed one ("unsupported param type, call_function"); the quantizer also observes a parameter as a
weight (per channel), a computed tensor as an activation.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import NodeRewrite, add_parameter, constant_values, drop_constant_remains, get_attrs
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_quant", ("aten.linear",), runs_after=("FoldLinearBatchNorm",), runs_before=("LinearToConv",), order=33,
         flows=("cortex_m",))
class ConstantLinearWeights(NodeRewrite):
    matches = (aten.linear.default,)
    what = "computed linear weights as parameters"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        computed = [(i, a) for i, a in enumerate(n.args[1:3], start=1)
                    if isinstance(a, torch.fx.Node) and a.op == "call_function"]
        if not computed:
            return False
        env = constant_values(gm, n)
        if any(not isinstance(env.get(a), torch.Tensor) for _, a in computed):
            return False  # computed from the model's inputs: a matmul, not a layer
        args = list(n.args)
        for i, a in computed:
            name = add_parameter(gm, f"_{n.name}_{'weight' if i == 1 else 'bias'}", env[a].detach().contiguous())
            args[i] = get_attrs(gm, n, [name], getattr(a.meta.get("val"), "fake_mode", None))[0]
        n.args = tuple(args)
        drop_constant_remains(gm, env)
        return True
