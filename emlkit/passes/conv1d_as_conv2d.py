"""1-D convolutions and pools as their 2-D forms over a [N, C, 1, L] map (before quantization, every flow).

Matches, in the exported float graph: `aten.conv1d` with constant weight (and
bias), optionally followed by an eval `aten.batch_norm` that only it feeds, `aten.conv_transpose1d`
with constant weight (and bias)
(folded into the conv: k = gamma / sqrt(var + eps), W' = W * k, b' = (b - mean) * k + beta),
`aten.max_pool1d`, `aten.avg_pool1d`, `aten.adaptive_avg_pool1d` and `aten.adaptive_max_pool1d` (output
size dividing the length, indices unread: a max pool with kernel = stride).

Produces `squeeze(op2d(unsqueeze(x, 2), ...), 2)` with kernel, stride, padding
and dilation (1, k): the same function. Then `unsqueeze(squeeze(y, 2), 2)`
pairs cancel and a squeeze is moved behind the pointwise activations that
follow it, so a chain of 1-D layers becomes a chain of 2-D layers with the
activations right after their convs (where the quantizers fuse them).

Why: ExecuTorch 1.5.1's Cortex-M quantizer annotates conv1d only in its
experimental explicit-layout mode, so in the default flow every Conv1d stayed a
float op; on Ethos-U the partitioner leaves `adaptive_avg_pool1d` (a mean over
the last axis of a 3-D tensor) on the CPU in float. Both flows quantize and
lower the 2-D forms. prepare_pt2e's conv + BatchNorm fold only sees a conv
directly followed by a BatchNorm of the same rank, hence the fold here.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch

from emlkit.passes.graph import (Rewrite, add_parameter, const_tensor, copy_meta, finish, fold_into, get_attrs,
                                 node_arg)
from emlkit.passes.manager import declare

aten = torch.ops.aten

POINTWISE = {aten.relu.default, aten.relu_.default, aten.hardtanh.default, aten.hardtanh_.default,
             aten.clamp.default, aten.sigmoid.default, aten.tanh.default, aten.hardswish.default,
             aten.hardsigmoid.default, aten.gelu.default, aten.silu.default, aten.relu6.default}


def _one(v: Any) -> int:
    return int(v[0]) if isinstance(v, (list, tuple)) else int(v)


@declare("pre_quant", ("aten.conv1d", "aten.conv_transpose1d", "aten.batch_norm", "aten.max_pool1d",
                       "aten.avg_pool1d", "aten.adaptive_avg_pool1d", "aten.adaptive_max_pool1d"),
         runs_after=("Relu6ToHardtanh",), order=20)
@dataclass
class Conv1dAsConv2d(Rewrite):
    channels_last: bool = True  # the layout the 2-D forms are fed in (a parameter of the target, set in bind)

    def bind(self, target: Any, options: Any) -> None:
        # The Cortex-M flow runs NHWC kernels and its quantizer takes only channels-last convs and pools.
        self.channels_last = target.flow == "cortex_m" and not options.explicit_layout

    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        done = []
        for n in list(gm.graph.nodes):
            if n.op != "call_function":
                continue
            new = None
            if n.target is aten.conv1d.default:
                new = self._conv(gm, n)
            elif n.target is aten.conv_transpose1d.default:
                new = self._conv_transpose(gm, n)
            elif n.target in (aten.max_pool1d.default, aten.avg_pool1d.default, aten.adaptive_avg_pool1d.default):
                new = self._pool(gm, n)
            elif n.target is aten.adaptive_max_pool1d.default:
                new = self._adaptive_max(gm, n)
            if new is not None:
                done.append(n.name)
        if done:
            self._tidy(gm)
        finish(gm, "1-D ops as 2-D", done)
        return done

    # ---------------------------------------------------------------- rewrites
    def _wrap(self, gm: torch.fx.GraphModule, n: torch.fx.Node, target: Any, args: tuple[Any, ...],
              replaced: torch.fx.Node | None = None) -> torch.fx.Node:
        """unsqueeze(x, 2) -> target(*args) -> squeeze(., 2), replacing `replaced` (default n)."""
        g = gm.graph
        x = n.args[0]
        old = replaced or n
        with g.inserting_before(old):
            x4 = g.call_function(aten.unsqueeze.default, (x, 2))
            fed = x4
            if self.channels_last:
                fed = g.call_function(aten.clone.default, (x4,), {"memory_format": torch.channels_last})
            op = g.call_function(target, (fed, *args))
            y = g.call_function(aten.squeeze.dim, (op, 2))
        copy_meta(n, (x4, fed, op, y))
        xval = x.meta.get("val")
        fake_mode = getattr(xval, "fake_mode", None)
        if fake_mode is not None:
            # Shapes from concrete tensors: fake-tensor pool shapes come out symbolic here.
            shape = [int(d) for d in xval.shape]
            real = [torch.zeros([int(d) for d in a.meta["val"].shape]) if isinstance(a, torch.fx.Node) else a
                    for a in args]
            x4_real = torch.zeros(shape).unsqueeze(2)
            fed_real = x4_real.contiguous(memory_format=torch.channels_last) if self.channels_last else x4_real
            with torch.no_grad():
                out = target(fed_real, *real)
            x4.meta["val"] = fake_mode.from_tensor(x4_real)
            fed.meta["val"] = fake_mode.from_tensor(fed_real)
            op.meta["val"] = fake_mode.from_tensor(out)
            y.meta["val"] = fake_mode.from_tensor(out.squeeze(2))
        old.replace_all_uses_with(y)
        return y

    @staticmethod
    def _weights(gm: torch.fx.GraphModule, n: torch.fx.Node) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """The constant 3-D weight and bias (None: no bias) of a 1-D (transposed) convolution; None if not constant."""
        w = const_tensor(gm, n.args[1])
        b_node = node_arg(n, 2, "bias", None)
        b = const_tensor(gm, b_node) if b_node is not None else None
        if w is None or w.dim() != 3 or (b_node is not None and b is None):
            return None
        return w, b

    def _conv(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> torch.fx.Node | None:
        wb = self._weights(gm, n)
        if wb is None:
            return None
        w, b = wb
        padding = node_arg(n, 4, "padding", [0])
        if isinstance(padding, str):
            return None           # "same"/"valid" strings: leave them
        stride, dil, groups = _one(node_arg(n, 3, "stride", [1])), _one(node_arg(n, 5, "dilation", [1])), node_arg(n, 6, "groups", 1)
        w2, b2 = w.detach().clone(), None if b is None else b.detach().clone()
        replaced = n
        users = list(n.users)
        if len(users) == 1 and users[0].op == "call_function" and users[0].target is aten.batch_norm.default:
            folded = fold_into(gm, users[0], w2, b2)
            if folded is not None:
                w2, b2 = folded
                replaced = users[0]
        names = [add_parameter(gm, "_aot_conv2d_weight", w2.unsqueeze(2).contiguous())]
        if b2 is not None:
            names.append(add_parameter(gm, "_aot_conv2d_bias", b2.contiguous()))
        fake_mode = getattr(n.args[0].meta.get("val"), "fake_mode", None)
        got = get_attrs(gm, n, names, fake_mode)
        w_get, b_get = got[0], (got[1] if b2 is not None else None)
        args = (w_get, b_get, [1, stride], [0, _one(padding)], [1, dil], groups)
        y = self._wrap(gm, n, aten.conv2d.default, args, replaced)
        if replaced is not n:
            gm.graph.erase_node(replaced)
        return y

    def _conv_transpose(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> torch.fx.Node | None:
        """conv_transpose1d(x, w [Cin, Cout/g, K], b, stride, padding, output_padding, groups, dilation)."""
        wb = self._weights(gm, n)
        if wb is None:
            return None
        w, b = wb
        stride, pad = _one(node_arg(n, 3, "stride", [1])), _one(node_arg(n, 4, "padding", [0]))
        out_pad, groups, dil = _one(node_arg(n, 5, "output_padding", [0])), node_arg(n, 6, "groups", 1), _one(node_arg(n, 7, "dilation", [1]))
        names = [add_parameter(gm, "_aot_conv_transpose2d_weight", w.detach().clone().unsqueeze(2).contiguous())]
        if b is not None:
            names.append(add_parameter(gm, "_aot_conv_transpose2d_bias", b.detach().clone().contiguous()))
        got = get_attrs(gm, n, names, getattr(n.args[0].meta.get("val"), "fake_mode", None))
        args = (got[0], got[1] if b is not None else None, [1, stride], [0, pad], [0, out_pad], groups, [1, dil])
        return self._wrap(gm, n, aten.conv_transpose2d.input, args)

    def _adaptive_max(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> torch.fx.Node | None:
        """adaptive_max_pool1d whose output size divides the length and whose indices are not read: a max pool
        with kernel = stride (the same windows)."""
        xv = n.args[0].meta.get("val")
        size = _one(n.args[1])
        users = list(n.users)
        if xv is None or xv.dim() != 3 or size <= 0 or int(xv.shape[2]) % size:
            return None
        if any(u.target is not operator.getitem or (u.args[1] != 0 and u.users) for u in users):
            return None
        values = [u for u in users if u.args[1] == 0]
        if len(values) != 1:
            return None
        k = int(xv.shape[2]) // size
        y = self._wrap(gm, n, aten.max_pool2d.default, ([1, k], [1, k], [0, 0], [1, 1], False), values[0])
        for u in users:
            gm.graph.erase_node(u)
        gm.graph.erase_node(n)
        return y

    def _pool(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> torch.fx.Node | None:
        if n.target is aten.adaptive_avg_pool1d.default:
            return self._wrap(gm, n, aten.adaptive_avg_pool2d.default, ([1, _one(n.args[1])],))
        k = _one(n.args[1])
        s = _one(node_arg(n, 2, "stride", []) or [k])
        p = _one(node_arg(n, 3, "padding", [0]))
        if n.target is aten.max_pool1d.default:
            d = _one(node_arg(n, 4, "dilation", [1]))
            ceil = bool(node_arg(n, 5, "ceil_mode", False))
            return self._wrap(gm, n, aten.max_pool2d.default, ([1, k], [1, s], [0, p], [1, d], ceil))
        ceil = bool(node_arg(n, 4, "ceil_mode", False))
        incl = bool(node_arg(n, 5, "count_include_pad", True))
        return self._wrap(gm, n, aten.avg_pool2d.default, ([1, k], [1, s], [0, p], ceil, incl))

    # ---------------------------------------------------------------- clean-up
    @staticmethod
    def _tidy(gm: torch.fx.GraphModule) -> None:
        g = gm.graph
        changed = True
        while changed:
            changed = False
            for sq in list(g.nodes):
                if sq.op != "call_function" or sq.target is not aten.squeeze.dim or sq.args[1] != 2:
                    continue
                users = list(sq.users)
                if len(users) != 1:
                    continue
                u = users[0]
                if u.op == "call_function" and u.target is aten.unsqueeze.default and u.args[1] == 2:
                    # squeeze -> unsqueeze [-> channels-last clone]: the 4-D value was there already
                    nxt = list(u.users)
                    if len(nxt) == 1 and nxt[0].target is aten.clone.default and len(nxt[0].users) >= 1:
                        nxt[0].replace_all_uses_with(sq.args[0])
                        g.erase_node(nxt[0])
                    u.replace_all_uses_with(sq.args[0])
                    g.erase_node(u)
                    g.erase_node(sq)
                    changed = True
                elif u.op == "call_function" and u.target in POINTWISE and u.args[0] is sq:
                    # squeeze -> act  becomes  act -> squeeze (pointwise: same values)
                    src = sq.args[0]
                    u.replace_all_uses_with(sq)
                    u.args = (src, *u.args[1:])
                    sq.args = (u, 2)
                    src.append(u)
                    u.append(sq)
                    if "val" in src.meta:
                        u.meta["val"] = src.meta["val"]
                    changed = True
