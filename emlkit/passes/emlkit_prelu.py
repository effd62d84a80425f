"""Lowering (Cortex-M, converted pt2e graph): quantized PReLU -> `emlkit::prelu`, one slope per channel.

Matches `dequantize(x_q, s_in, zp_in) -> prelu(., w) -> quantize(s_out, zp_out)`, int8 per-tensor, x of 2 or more
dims, w a constant of one slope or one per channel (dim 1), left by LUT fusion (which turns a single slope into a
table when it can).

Emits `emlkit::prelu(x_q, neg, zp_in, zp_out, M, T)` (semantics in emlkit/emlkit_ops.py): the positive side
requantized by M / 2^T = s_in / s_out, the negative side by neg[c] = w_c * s_in / s_out per channel (a signed
multiplier). Each side is one rounding of the exact product, so the result is within 1 step of quantizing the
float PReLU of the dequantized input.

Why: ExecuTorch 1.5.1's Cortex-M flow has no PReLU; a per-channel slope cannot be one table, so it ran in float
(gt, mul, where) between the dequantize and the quantize.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

import emlkit.emlkit_ops as eo
from emlkit.passes.graph import DqOpQLowering, add_parameter, const_tensor, get_attrs, qparams, shape_of
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten


def prelu_table(slopes: torch.Tensor, channels: int, s_in: float, s_out: float) -> torch.Tensor | None:
    """int32 [channels, 2] (multiplier, shift) of each channel's negative side, or None when a factor is out of
    the op's range."""
    w = slopes.detach().double().reshape(-1)
    if w.numel() == 1:
        w = w.expand(channels)
    if w.numel() != channels or not bool(torch.isfinite(w).all()):
        return None
    rows = []
    for v in w.tolist():
        m, t = eo.signed_multiplier_shift(v * s_in / s_out)
        if t > 62:      # |factor| < 2^-32: |q * factor| < 1/2 for every code, so it rounds to 0 as a 0 slope does
            m, t = 0, 1
        if t < 1:
            return None
        rows.append((m, t))
    return torch.tensor(rows, dtype=torch.int32).reshape(-1, 2)


@declare("pre_edge", ("aten.prelu",), runs_after=("LutFusion",), order=214, flows=("cortex_m",))
class EmlkitPrelu(DqOpQLowering):
    """Pre-edge pass (LowerOptions.pre_edge_passes), Cortex-M targets only."""

    op_targets, ranks = (aten.prelu.default,), range(2, 64)  # dim 1 holds the channels

    def lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node,
              q: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, Any]] | None:
        (s_in, zp_in), (s_out, zp_out) = qparams(dq)[:2], qparams(q)[:2]
        shape, w = shape_of(n.args[0]), const_tensor(gm, n.args[1])
        if shape is None or w is None or not w.is_floating_point():
            return None
        try:
            mult, shift = eo.multiplier_shift(s_in / s_out)
            table = prelu_table(w, int(shape[1]), s_in, s_out) if 1 <= shift <= 62 else None
        except ValueError as exc:
            log.info("prelu %s left in float: %s", n.name, exc)
            return None
        if table is None:
            log.info("prelu %s left in float: its slopes do not match %d channels or a factor is out of range",
                     n.name, int(shape[1]))
            return None
        (neg,) = get_attrs(gm, q, [add_parameter(gm, f"{n.name}_neg", table)],
                           getattr(q.meta.get("val"), "fake_mode", None))
        new = gm.graph.call_function(torch.ops.emlkit.prelu.default, (dq.args[0], neg, zp_in, zp_out, mult, shift))
        return new, {"channels": int(shape[1]), "in_scale": s_in, "out_scale": s_out}
