"""A stacked or bidirectional LSTM or GRU as single-layer, one-direction ones, h_n and c_n as their last steps and
cells, and nn.LSTMCell / nn.GRUCell as one-step layers (before quantization, Cortex-M and int8 Ethos-U).

Matches, in the exported float graph: `aten.lstm.input` (nn.LSTM) in eval mode with several layers, two directions
or its h_n read, from a zero or a given initial state, its c_n read or not (one layer, one direction with a given
state or a read c_n: its h_n read becomes `unsqueeze(select(y, time, -1), 0)`, the layer stays for the kernel);
`aten.lstm_cell` (nn.LSTMCell) with its h read (one step of a one-layer LSTM over `unsqueeze(x, 0)`, h its
`select(y, 0, 0)`, a read c its c_n's `select(c_n, 0, 0)`, a given state `unsqueeze(h, 0)`); `aten.gru.input`
(nn.GRU) and `aten.gru_cell` (nn.GRUCell) the same way.

Produces per layer one single-layer `aten.lstm.input` per direction (its own slice of the parameters and, given a
state, `slice(h0, 0, i, i + 1)` (and c0's) for layer and direction i in nn.LSTM's order, else a zero state of its
own), each reading the previous layer's output; the reverse direction as `flip(lstm(flip(x, time)), time)` and the
two directions joined by `cat` on the feature dim; where h_n is read, `stack` of each layer and direction's last
step (`select(y, time, -1)`, time 0 for the reverse direction), in nn.LSTM's order (`unsqueeze` for one); where c_n
is read, `cat` of each one's c_n (the kernel's last cell: the reverse direction's too, as it ends at time 0). Exact
in float (eval mode has no dropout between layers).

With --streaming-state a bidirectional layer is refused (one line naming it): its reverse direction reads the
sequence from its end, which a stream fed one frame per call does not have.

Why: the int8 kernel (emlkit::lstm, emlkit_lstm.py) runs one layer in one direction from a [1, B, H] state and
writes the sequence output and its last cell only. Split, each layer's output gets its own observed qparams (h
ranges differ from layer to layer; with a given state: those of its slice of h0), each layer is lowered on its own,
and flip, cat, select, slice and stack are data movement on int8 codes (on c0 and c_n: on float or int16 values).
"""

from __future__ import annotations

import operator
from typing import Any

import torch

from emlkit.errors import EXIT_UNSUPPORTED, AotError
from emlkit.passes.graph import GRU_OPS, LSTM_OPS, NodeRewrite, copy_meta, lstm_zero_state
from emlkit.passes.manager import declare
from emlkit.verify import source_line

aten = torch.ops.aten


def _val(target: Any, args: tuple[Any, ...], fake: Any, kwargs: dict[str, Any] | None = None) -> Any:
    """TARGET's fake value on the fake values of its node arguments."""
    vals = torch.fx.node.map_arg(args, lambda a: a.meta["val"])
    with fake:
        return target(*vals, **(kwargs or {}))


@declare("pre_quant", ("aten.lstm", "aten.lstm_cell", "aten.gru", "aten.gru_cell"), runs_after=("GluAsSigmoidMul",),
         order=29, bits=("int8",))
class LstmAsLayers(NodeRewrite):
    matches = (*LSTM_OPS, *GRU_OPS, aten.lstm_cell.default, aten.gru_cell.default)
    what = "LSTM as single layers"
    streaming = False

    @classmethod
    def create(cls, opts: Any, allow_float: bool) -> "LstmAsLayers":
        made = cls()
        made.streaming = bool(getattr(opts, "streaming_state", False))
        return made

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        if n.target in (aten.lstm_cell.default, aten.gru_cell.default):
            return self._cell(gm, n)
        if len(n.args) < 9:
            return False
        x, hx, params, has_biases, layers, dropout, train, bidirectional, batch_first = n.args[:9]
        gru = n.target in GRU_OPS
        hx = [hx] if gru else hx
        xv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if not isinstance(xv, torch.Tensor) or xv.dim() != 3 or train or not isinstance(layers, int):
            return False
        dirs = 2 if bidirectional else 1
        if bidirectional and self.streaming:
            kind = "GRU" if gru else "LSTM"
            raise AotError(f"--streaming-state: the bidirectional {kind} {n.name} ({source_line(n)}) cannot stream: "
                           "its reverse direction starts from the sequence's end; make it unidirectional or compile "
                           "without --streaming-state", EXIT_UNSUPPORTED)
        if not isinstance(hx, (list, tuple)) or len(hx) != (1 if gru else 2):
            return False
        given = not all(lstm_zero_state(gm, h) for h in hx)
        per = 4 if has_biases else 2
        if not isinstance(params, (list, tuple)) or len(params) != per * layers * dirs:
            return False
        outs: dict[int, torch.fx.Node] = {}
        for u in n.users:
            if u.target is not operator.getitem:
                return False
            outs[int(u.args[1])] = u
        h_n = outs.get(1)
        read_h = h_n is not None and bool(h_n.users)
        read_c = 2 in outs and bool(outs[2].users)
        if layers == 1 and dirs == 1:
            if given or read_c:
                # the kernel reads a given state and writes c_n for the one layer it runs: that layer stays as it is
                return read_h and self._h_n_as_last_step(gm, n, outs, xv, bool(batch_first))
            if not read_h:
                return False
        if given and not all(isinstance(h, torch.fx.Node) and isinstance(h.meta.get("val"), torch.Tensor)
                             for h in hx):
            return False
        fake = xv.fake_mode
        g, time = gm.graph, 1 if batch_first else 0
        batch = int(xv.shape[0 if batch_first else 1])
        made: list[torch.fx.Node] = []
        cur, lasts, cells = x, [], []
        with g.inserting_before(n):
            for k in range(layers):
                ys = []
                for d in range(dirs):
                    i = dirs * k + d
                    w = params[per * i:per * (i + 1)]
                    # a given state: this layer and direction's [1, B, H] share of h0 (and c0), nn.LSTM's order
                    state = [self._call(g, aten.slice.Tensor, (h, 0, i, i + 1), fake, made) for h in hx] \
                        if given else None
                    src = cur
                    if d:                        # the reverse direction: the forward recurrence on the time-flipped input
                        src = self._call(g, aten.flip.default, (cur, [time]), fake, made)
                    y, layer = self._layer(g, src, list(w), has_biases, dropout, batch_first, batch, fake, made, gru,
                                           state)
                    if read_c:
                        cells.append(self._item(g, layer, 2, made))
                    if d:
                        y = self._call(g, aten.flip.default, (y, [time]), fake, made)
                    ys.append(y)
                    if read_h:                   # the reverse direction ends at time 0
                        lasts.append(self._call(g, aten.select.int, (y, time, 0 if d else -1), fake, made))
                cur = ys[0] if dirs == 1 else self._call(g, aten.cat.default, (ys, 2), fake, made)
            hn = self._join(g, lasts, fake, made, stack=True)
            cn = self._join(g, cells, fake, made, stack=False)
        copy_meta(n, made)
        self._replace_outputs(g, n, outs, cur, hn, cn)
        return True

    def _replace_outputs(self, g: torch.fx.Graph, n: torch.fx.Node, outs: dict[int, torch.fx.Node],
                         y: torch.fx.Node, hn: torch.fx.Node | None, cn: torch.fx.Node | None) -> None:
        """Point the users of N's (output, h_n, c_n) items OUTS at the layers' Y, HN and CN, then drop N."""
        if 0 in outs:
            outs[0].replace_all_uses_with(y)
        if hn is not None:  # made only where h_n is read, so its item exists
            outs[1].replace_all_uses_with(hn)
        if cn is not None:
            outs[2].replace_all_uses_with(cn)
        for u in list(n.users):
            g.erase_node(u)
        g.erase_node(n)

    def _join(self, g: torch.fx.Graph, parts: list[torch.fx.Node], fake: Any, made: list[torch.fx.Node],
              stack: bool) -> torch.fx.Node | None:
        """nn.LSTM's h_n from each layer's last step ([B, H]: STACK) or its c_n from each layer's ([1, B, H])."""
        if not parts:
            return None
        if len(parts) == 1:
            return self._call(g, aten.unsqueeze.default, (parts[0], 0), fake, made) if stack else parts[0]
        return self._call(g, aten.stack.default if stack else aten.cat.default, (parts, 0), fake, made)

    @staticmethod
    def _item(g: torch.fx.Graph, layer: torch.fx.Node, k: int, made: list[torch.fx.Node]) -> torch.fx.Node:
        node = g.call_function(operator.getitem, (layer, k))
        node.meta["val"] = layer.meta["val"][k]
        made.append(node)
        return node

    def _h_n_as_last_step(self, gm: torch.fx.GraphModule, n: torch.fx.Node, outs: dict[int, torch.fx.Node],
                          xv: torch.Tensor, batch_first: bool) -> bool:
        """A one-layer LSTM with a given state or a read c_n: kept, its h_n read as `unsqueeze(select(y, time,
        -1), 0)`."""
        time = 1 if batch_first else 0
        order = {m: i for i, m in enumerate(gm.graph.nodes)}
        h_n, y = outs[1], outs.get(0)
        if int(xv.shape[time]) < 1 or (y is not None and order[y] > order[h_n]):
            return False
        g, fake, made = gm.graph, xv.fake_mode, []
        with g.inserting_before(h_n):
            if y is None:
                y = g.call_function(operator.getitem, (n, 0))
                y.meta["val"] = n.meta["val"][0]
                made.append(y)
            last = self._call(g, aten.select.int, (y, time, -1), fake, made)
            hn = self._call(g, aten.unsqueeze.default, (last, 0), fake, made)
        copy_meta(n, made)
        h_n.replace_all_uses_with(hn)
        g.erase_node(h_n)
        return True

    def _cell(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        """nn.LSTMCell / nn.GRUCell, h read (an LSTMCell's c too or not), from a zero or a given state: one step of
        a one-layer LSTM or GRU over [1, B, I] (a given state unsqueezed to [1, B, H], c its c_n's only step)."""
        gru = n.target == aten.gru_cell.default
        x, hx, w_ih, w_hh = n.args[:4]
        biases = [b for b in n.args[4:6] if b is not None]
        xv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if not isinstance(xv, torch.Tensor) or xv.dim() != 2 or len(biases) not in (0, 2):
            return False
        states = [hx] if gru else hx
        if not isinstance(states, (list, tuple)) or len(states) != (1 if gru else 2):
            return False
        given = not all(lstm_zero_state(gm, h) for h in states)
        if given and not all(isinstance(h, torch.fx.Node) and isinstance(h.meta.get("val"), torch.Tensor) and
                             h.meta["val"].dim() == 2 for h in states):
            return False
        cell_out = None
        if gru:
            result = n
        else:
            outs = {int(u.args[1]): u for u in n.users if u.target is operator.getitem}
            if len(outs) != len(n.users) or 0 not in outs:
                return False
            result, cell_out = outs[0], outs[1] if 1 in outs and outs[1].users else None
        fake, g, made = xv.fake_mode, gm.graph, []
        with g.inserting_before(n):
            seq = self._call(g, aten.unsqueeze.default, (x, 0), fake, made)
            state = [self._call(g, aten.unsqueeze.default, (h, 0), fake, made) for h in states] if given else None
            y, layer = self._layer(g, seq, [w_ih, w_hh, *biases], bool(biases), 0.0, False, int(xv.shape[0]), fake,
                                   made, gru, state)
            h = self._call(g, aten.select.int, (y, 0, 0), fake, made)
            if cell_out is not None:
                c = self._call(g, aten.select.int, (self._item(g, layer, 2, made), 0, 0), fake, made)
        copy_meta(n, made)
        result.replace_all_uses_with(h)
        if cell_out is not None:
            cell_out.replace_all_uses_with(c)
        for u in list(n.users):
            g.erase_node(u)
        g.erase_node(n)
        return True

    @staticmethod
    def _call(g: torch.fx.Graph, target: Any, args: tuple[Any, ...], fake: Any, made: list[torch.fx.Node],
              kwargs: dict[str, Any] | None = None) -> torch.fx.Node:
        node = g.call_function(target, args, kwargs or {})
        node.meta["val"] = _val(target, args, fake, kwargs)
        made.append(node)
        return node

    def _layer(self, g: torch.fx.Graph, x: torch.fx.Node, w: list[Any], has_biases: bool, dropout: Any,
               batch_first: bool, batch: int, fake: Any, made: list[torch.fx.Node], gru: bool = False,
               state: list[torch.fx.Node] | None = None) -> tuple[torch.fx.Node, torch.fx.Node]:
        """One single-layer, one-direction LSTM (GRU) from STATE ([1, B, H] h0 and, for an LSTM, c0) or else a zero
        initial state: (its sequence output's getitem, the layer)."""
        hid = int(w[1].meta["val"].shape[1])
        if state is None:
            state = [self._call(g, aten.zeros.default, ([1, batch, hid],), fake, made, {"dtype": torch.float32})
                     for _ in range(1 if gru else 2)]
        layer = self._call(g, aten.gru.input if gru else aten.lstm.input,
                           (x, state[0] if gru else state, w, has_biases, 1, dropout, False, False, batch_first),
                           fake, made)
        return self._item(g, layer, 0, made), layer
