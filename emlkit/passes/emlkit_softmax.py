"""Lowering (Cortex-M, converted pt2e graph): quantized softmax -> `emlkit::softmax` with free output qparams.

Matches `dequantize(x_q, s_in, zp_in) -> softmax(dim) -> quantize(s_out, zp_out)`,
int8 per-tensor on both sides, the softmax used only by that quantize (the
form `own_output_qparams.py` gives every softmax).

Emits `emlkit::softmax(x_q, exp_table, dim, zp_out, M, T)` (semantics in
emlkit/emlkit_ops.py): the 256-entry exp table is built from s_in on the host, the
output requantization (M, T) from s_out. ExecuTorch's `cortex_m::softmax` could
only write at 1/256, zero point -128.

`dequantize -> emlkit_float::masked_softmax(x, mask, dim) -> quantize` (the attention with a mask from the
inputs, sdpa_as_matmuls.py) becomes `emlkit::masked_softmax(x_q, mask, exp_table, dim, zp_out, M, T)` the same
way, the bool mask passed as it is.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

import emlkit.emlkit_ops as eo
from emlkit.passes.graph import FLOAT_MASKED_SOFTMAX, SOFTMAX, DqOpQLowering, qparams, unique_name
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)


@declare("pre_edge", ("aten.softmax", "emlkit_float.masked_softmax"), runs_after=("LutFusion",), order=200,
         flows=("cortex_m",))
class EmlkitSoftmax(DqOpQLowering):
    def takes(self, n: torch.fx.Node) -> bool:
        return n.target in SOFTMAX or n.target is FLOAT_MASKED_SOFTMAX

    def lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node,
              q: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, Any]] | None:
        s_in, s_out, zp_out = qparams(dq)[0], qparams(q)[0], qparams(q)[1]
        try:
            mult, shift = eo.softmax_output_requant(s_out)
            if not 1 <= shift <= 62:
                raise ValueError(f"output scale {s_out} out of range")
        except ValueError as exc:
            log.debug("softmax %s left to ExecuTorch: %s", n.name, exc)
            return None
        rank = len(n.meta["val"].shape)
        masked = n.target is FLOAT_MASKED_SOFTMAX
        dim = int(n.args[2] if masked else n.args[1]) % max(rank, 1)
        name = unique_name(gm, "_aot_softmax_exp")
        gm.register_buffer(name, eo.softmax_exp_table(s_in))
        table = gm.graph.get_attr(name)
        if masked:
            new = gm.graph.call_function(torch.ops.emlkit.masked_softmax.default,
                                         (dq.args[0], n.args[1], table, dim, zp_out, mult, shift))
        else:
            new = gm.graph.call_function(torch.ops.emlkit.softmax.default,
                                         (dq.args[0], table, dim, zp_out, mult, shift))
        return new, {"dim": dim, "in_scale": s_in, "out_scale": s_out, "out_zero_point": zp_out}
