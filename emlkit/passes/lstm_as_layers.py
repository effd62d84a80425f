"""A stacked LSTM as its layers, and h_n as the last step of each layer's output (before quantization, Cortex-M).

Matches, in the exported float graph: `aten.lstm.input` (nn.LSTM) with zero initial state, unidirectional, in eval
mode, whose c_n is not read, when it has several layers or its h_n is read.

Produces one single-layer `aten.lstm.input` per layer, each reading the previous one's sequence output (the
layer's own slice of the parameters, a zero initial state of its own), and, where h_n is read,
`stack([select(y_l, time, -1) for each layer l])` (`unsqueeze` for one layer): what nn.LSTM returns as h_n.
Exact in float (eval mode has no dropout between layers).

Why: the int8 kernel (emlkit::lstm, emlkit_lstm.py) runs one layer and writes the sequence output only. As
separate layers, each layer's output gets its own observed qparams (h ranges differ from layer to layer) and
each layer is lowered on its own; h_n becomes data movement on int8 codes.
"""

from __future__ import annotations

import operator
from typing import Any

import torch

from emlkit.passes.graph import LSTM_OPS, NodeRewrite, copy_meta, lstm_zero_state
from emlkit.passes.manager import declare

aten = torch.ops.aten


def _val(target: Any, args: tuple[Any, ...], fake: Any, kwargs: dict[str, Any] | None = None) -> Any:
    """TARGET's fake value on the fake values of its node arguments."""
    vals = torch.fx.node.map_arg(args, lambda a: a.meta["val"])
    with fake:
        return target(*vals, **(kwargs or {}))


@declare("pre_quant", ("aten.lstm",), runs_after=("GluAsSigmoidMul",), order=29, flows=("cortex_m",))
class LstmAsLayers(NodeRewrite):
    matches = tuple(LSTM_OPS)
    what = "LSTM as single layers"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        if len(n.args) < 9:
            return False
        x, hx, params, has_biases, layers, dropout, train, bidirectional, batch_first = n.args[:9]
        xv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if not isinstance(xv, torch.Tensor) or xv.dim() != 3 or train or bidirectional or not isinstance(layers, int):
            return False
        if not isinstance(hx, (list, tuple)) or len(hx) != 2 or not all(lstm_zero_state(gm, h) for h in hx):
            return False
        per = 4 if has_biases else 2
        if not isinstance(params, (list, tuple)) or len(params) != per * layers:
            return False
        outs: dict[int, torch.fx.Node] = {}
        for u in n.users:
            if u.target is not operator.getitem:
                return False
            outs[int(u.args[1])] = u
        if 2 in outs and outs[2].users:
            return False                     # c_n: the int8 kernel does not write it
        h_n = outs.get(1)
        if layers == 1 and (h_n is None or not h_n.users):
            return False
        fake = xv.fake_mode
        g, time = gm.graph, 1 if batch_first else 0
        batch = int(xv.shape[0 if batch_first else 1])
        made: list[torch.fx.Node] = []
        cur, lasts = x, []
        with g.inserting_before(n):
            for k in range(layers):
                w = params[per * k:per * (k + 1)]
                hid = int(w[1].meta["val"].shape[1])
                zs = []
                for _ in range(2):
                    z = g.call_function(aten.zeros.default, ([1, batch, hid],), {"dtype": torch.float32})
                    z.meta["val"] = _val(aten.zeros.default, ([1, batch, hid],), fake, {"dtype": torch.float32})
                    zs.append(z)
                args = (cur, zs, list(w), has_biases, 1, dropout, False, False, batch_first)
                layer = g.call_function(aten.lstm.input, args)
                layer.meta["val"] = _val(aten.lstm.input, args, fake)
                y = g.call_function(operator.getitem, (layer, 0))
                y.meta["val"] = layer.meta["val"][0]
                made += [*zs, layer, y]
                cur = y
                if h_n is not None and h_n.users:
                    last = g.call_function(aten.select.int, (y, time, -1))
                    last.meta["val"] = _val(aten.select.int, (y, time, -1), fake)
                    made.append(last)
                    lasts.append(last)
            if lasts:
                if len(lasts) == 1:
                    hn = g.call_function(aten.unsqueeze.default, (lasts[0], 0))
                    hn.meta["val"] = _val(aten.unsqueeze.default, (lasts[0], 0), fake)
                else:
                    hn = g.call_function(aten.stack.default, (lasts, 0))
                    hn.meta["val"] = _val(aten.stack.default, (lasts, 0), fake)
                made.append(hn)
        copy_meta(n, made)
        if 0 in outs:
            outs[0].replace_all_uses_with(cur)
        if lasts:
            assert h_n is not None
            h_n.replace_all_uses_with(hn)
        for u in list(n.users):
            g.erase_node(u)
        g.erase_node(n)
        return True
