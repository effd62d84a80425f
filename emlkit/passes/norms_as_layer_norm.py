"""InstanceNorm2d and GroupNorm as a layer norm, then their per-channel scale and shift (before quantization,
Cortex-M).

Matches, in the exported float graph: `aten.instance_norm` over a 4-D map that normalises with the input's own
statistics (`use_input_stats`, InstanceNorm2d's default; with running statistics it is a BatchNorm and left
alone) and `aten.group_norm` over a 4-D map, each with constant weight and bias or none.

Produces, by their definitions: instance norm as `layer_norm(x, [H, W])`; group norm with G groups as
`layer_norm(x.reshape(N, G, C/G*H*W), [C/G*H*W]).reshape(N, C, H, W)`; then `* weight` and `+ bias` as (1, C, 1, 1)
constants when given.

Why: ExecuTorch 1.5.1's Cortex-M quantizer annotates neither, and both stayed float ops (random model fam:22 was
refused with `_native_batch_norm_legit` left in float, a GroupNorm with `native_group_norm`); a layer norm over
trailing dims runs as emlkit::quantized_layer_norm (int8_layer_norm.py) and the affine part as int8 mul/add.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import FloatRewrite, add_parameter, const_tensor, node_arg, replace_node
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_quant", ("aten.instance_norm", "aten.group_norm"), order=32, flows=("cortex_m",))
class NormsAsLayerNorm(FloatRewrite):
    matches = (aten.instance_norm.default, aten.group_norm.default)
    what = "instance/group norm as layer norm"

    def rewrite_float(self, gm: torch.fx.GraphModule, n: torch.fx.Node, xv: torch.Tensor, yv: torch.Tensor) -> bool:
        instance = n.target is aten.instance_norm.default
        if xv.dim() != 4 or (instance and not node_arg(n, 5, "use_input_stats", True)):
            return False
        x = n.args[0]
        w_node, b_node = (node_arg(n, 1, "weight"), node_arg(n, 2, "bias")) if instance else \
            (node_arg(n, 2, "weight"), node_arg(n, 3, "bias"))
        eps = float(node_arg(n, 7, "eps", 1e-5) if instance else node_arg(n, 4, "eps", 1e-5))
        affine = [(aten.mul.Tensor, w_node, "norm_weight"), (aten.add.Tensor, b_node, "norm_bias")]
        consts = [(op, const_tensor(gm, node), stem) for op, node, stem in affine if node is not None]
        if any(t is None for _, t, _ in consts):
            return False
        nb, c, h, w = (int(d) for d in xv.shape)
        groups = 0 if instance else int(n.args[1])
        fake = getattr(xv, "fake_mode", None)
        g, made = gm.graph, []
        with g.inserting_before(n):
            if instance:
                y = g.call_function(aten.layer_norm.default, (x, [h, w], None, None, eps))
            else:
                row = c // groups * h * w
                rows = g.call_function(aten.reshape.default, (x, [nb, groups, row]))
                rows.meta["val"] = yv.new_empty((nb, groups, row))
                ln = g.call_function(aten.layer_norm.default, (rows, [row], None, None, eps))
                ln.meta["val"] = yv.new_empty((nb, groups, row))
                made += [rows, ln]
                y = g.call_function(aten.reshape.default, (ln, [nb, c, h, w]))
            y.meta["val"] = torch.empty_like(yv)
            made.append(y)
            for op, t, stem in consts:
                attr = g.get_attr(add_parameter(gm, stem, t.detach().reshape(1, c, 1, 1).clone()))  # type: ignore[union-attr]
                if fake is not None:
                    attr.meta["val"] = fake.from_tensor(getattr(gm, str(attr.target)))
                y = g.call_function(op, (y, attr))
                y.meta["val"] = torch.empty_like(yv)
                made += [attr, y]
        replace_node(n, made, y)
        return True
