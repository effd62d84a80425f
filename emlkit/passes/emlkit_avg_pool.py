"""Lowering (Cortex-M, converted pt2e graph): quantized average pool -> `emlkit::quantized_avg_pool2d`.

Matches `dequantize(x_q, s_in, zp_in) -> pool -> quantize(s_out, zp_out)`, int8
per-tensor, where pool is one of the forms `own_output_qparams.pool_geometry`
accepts (avg_pool2d without padding, adaptive_avg_pool2d with whole windows,
mean over H and W with keepdim), so every window has k_h * k_w taps.

Emits `emlkit::quantized_avg_pool2d(x_q, kernel, stride, zp_in, zp_out, M, T)`
(semantics in emlkit/emlkit_ops.py): an integer window sum requantized by
M / 2^T = s_in / (s_out * k_h * k_w) to the pool's own output qparams.
ExecuTorch's `cortex_m::quantized_avg_pool2d` needs s_out == s_in.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

import emlkit.emlkit_ops as eo
from emlkit.passes.graph import AVG_POOLS, OWN_QPARAMS_KEY, DqOpQLowering, pool_geometry, qparams
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)


@declare("pre_edge", ("aten.avg_pool2d", "aten.mean"), runs_after=("LutFusion", "EmlkitSoftmax"),
         order=210, flows=("cortex_m",))
class EmlkitAvgPool(DqOpQLowering):
    """Pre-edge pass (LowerOptions.pre_edge_passes), Cortex-M targets only."""


    def takes(self, n: torch.fx.Node) -> bool:
        # Only pools own_output_qparams.py annotated; the others keep cortex_m:: semantics.
        return n.target in AVG_POOLS and bool(n.meta.get(OWN_QPARAMS_KEY)) and pool_geometry(n) is not None

    def lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node,
              q: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, Any]] | None:
        geom = pool_geometry(n)
        if geom is None:
            return None
        k, s = geom
        (s_in, zp_in), (s_out, zp_out) = qparams(dq)[:2], qparams(q)[:2]
        try:
            mult, shift = eo.multiplier_shift(s_in / (s_out * k[0] * k[1]))
            if not 1 <= shift <= 62 or k[0] * k[1] > 1 << 16:
                raise ValueError("requantization or window out of range")
        except ValueError as exc:
            log.debug("average pool %s left to ExecuTorch: %s", n.name, exc)
            return None
        new = gm.graph.call_function(torch.ops.emlkit.quantized_avg_pool2d.default,
                                     (dq.args[0], list(k), list(s), zp_in, zp_out, mult, shift))
        return new, {"kernel": list(k), "stride": list(s), "in_scale": s_in, "out_scale": s_out}
