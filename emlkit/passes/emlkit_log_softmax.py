"""Lowering (Cortex-M, converted pt2e graph): quantized log_softmax -> `emlkit::log_softmax` with free output qparams.

Matches `dequantize(x_q, s_in, zp_in) -> log_softmax(dim) -> quantize(s_out, zp_out)`, int8 per-tensor on both
sides, any dim (the kernel walks the reduced dim with a stride, so no permute), the log_softmax used only by that
quantize (the form `own_output_qparams.py` gives every log_softmax).

Emits `emlkit::log_softmax(x_q, exp_table, dim, K, zp_out, M, T)` (semantics in emlkit/emlkit_ops.py): softmax's
256-entry exp table from s_in, one input step in log2 units K = round(s_in / ln 2 * 2^20), and the output
requantization (M, T) for ln 2 / (s_out * 2^20).

Why: ExecuTorch's Cortex-M flow has no int8 log_softmax (it stayed an aten:: float op, run only with
--allow-float). An input scale so large that K leaves [1, 2^23] (s_in above 5.8) or an output scale the
requantization cannot express leaves the op as it was.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

import emlkit.emlkit_ops as eo
from emlkit.passes.graph import LOG_SOFTMAX, DqOpQLowering, qparams, unique_name
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)


@declare("pre_edge", ("aten.log_softmax",), runs_after=("LutFusion",), order=201, flows=("cortex_m",))
class EmlkitLogSoftmax(DqOpQLowering):
    def takes(self, n: torch.fx.Node) -> bool:
        return n.target in LOG_SOFTMAX

    def lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node,
              q: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, Any]] | None:
        s_in, s_out, zp_out = qparams(dq)[0], qparams(q)[0], qparams(q)[1]
        rank = len(n.meta["val"].shape)
        dim = int(n.args[1]) % max(rank, 1)
        length = int(n.meta["val"].shape[dim]) if rank else 1
        k = eo.log_softmax_input_scale(s_in)
        try:
            mult, shift = eo.log_softmax_output_requant(s_out)
            if not 1 <= shift <= 62:
                raise ValueError(f"output scale {s_out} out of range")
            if not 1 <= k <= eo.LOG_MAX_K or length > eo.LOG_MAX_LEN:
                raise ValueError(f"input scale {s_in} or length {length} out of range")
        except ValueError as exc:
            log.debug("log_softmax %s left in float: %s", n.name, exc)
            return None
        name = unique_name(gm, "_aot_log_softmax_exp")
        gm.register_buffer(name, eo.softmax_exp_table(s_in))
        table = gm.graph.get_attr(name)
        new = gm.graph.call_function(torch.ops.emlkit.log_softmax.default,
                                     (dq.args[0], table, dim, k, zp_out, mult, shift))
        return new, {"dim": dim, "in_scale": s_in, "out_scale": s_out, "out_zero_point": zp_out}
