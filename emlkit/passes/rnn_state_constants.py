"""A constant initial state of an LSTM or GRU as a constant tensor (before quantization, Cortex-M).

Matches, in the exported float graph: `aten.lstm.input`, `aten.gru.input`, `aten.lstm_cell` and `aten.gru_cell`
whose h0 or c0 is computed from constants alone (`torch.full`, `torch.ones`, a buffer scaled or sliced...), not
all zeros (zero states are the kernels' default).

Produces the state's value, computed here once, as a constant the RNN reads in its place; the computation is
dropped when nothing else reads it.

Why: emlkit_lstm.py takes a given state as int8 h codes and a float c0 it quantizes to the int16 cell; an h0 or
c0 filled on the device (`aten::full`, float arithmetic on a buffer) stayed float ops, and the LSTM with them. A
constant h0 is then quantized by convert_pt2e at compile time (lstm_output_qparams.py gives its edge h's
qparams), a constant c0 goes to the cell format directly, without an int8 step.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import (GRU_OPS, LSTM_OPS, NodeRewrite, constant_values, drop_constant_remains, lstm_zero_state,
                                 unique_name)
from emlkit.passes.manager import declare

aten = torch.ops.aten
CELLS = (aten.lstm_cell.default, aten.gru_cell.default)


def _states(n: torch.fx.Node) -> list[torch.fx.Node]:
    """The RNN's initial-state argument nodes (h0, and an LSTM's c0)."""
    hx = n.args[1] if len(n.args) > 1 else None
    items = hx if isinstance(hx, (list, tuple)) else [hx]
    return [h for h in items if isinstance(h, torch.fx.Node)]


@declare("pre_quant", ("aten.lstm", "aten.gru", "aten.lstm_cell", "aten.gru_cell"), runs_before=("LstmAsLayers",),
         order=21, flows=("cortex_m",))
class RnnStateConstants(NodeRewrite):
    matches = (*LSTM_OPS, *GRU_OPS, *CELLS)
    what = "RNN states as constants"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        todo = [h for h in _states(n) if h.op == "call_function" and not lstm_zero_state(gm, h)]
        if not todo:
            return False
        env = constant_values(gm, upto=n)
        values = {h: env[h] for h in todo if isinstance(env.get(h), torch.Tensor) and env[h].is_floating_point()}
        if not values:
            return False
        for h, value in values.items():
            name = unique_name(gm, f"_aot_{n.name}_state")
            gm.register_buffer(name, value.detach().clone().contiguous())
            with gm.graph.inserting_before(n):
                const = gm.graph.get_attr(name)
            const.meta["val"] = h.meta.get("val")
            n.replace_input_with(h, const)
        drop_constant_remains(gm, env)
        return True
