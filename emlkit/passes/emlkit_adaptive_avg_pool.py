"""Lowering (Cortex-M, converted pt2e graph): adaptive average pools whose output does not divide the input ->
`emlkit::adaptive_avg_pool2d`.

Matches `dequantize(x_q, s_in, zp_in) -> adaptive_avg_pool2d -> quantize(s_out, zp_out)`, int8 per-tensor, a 4-D
input, left by AdaptivePoolAsPool and EmlkitAvgPool (which take the pools whose windows are all alike).

Emits `emlkit::adaptive_avg_pool2d(x_q, rows, cols, requant, zp_in, zp_out)` (semantics in emlkit/emlkit_ops.py):
rows / cols hold PyTorch's windows [floor(i*H/oh), ceil((i+1)*H/oh)) (unequal, possibly overlapping), requant one
factor s_in / (s_out * taps) per output position, so each output is its window's integer sum rounded once.

Why: ExecuTorch 1.5.1's Cortex-M flow lowers only pools with one window size; these ran in float between the
dequantize and the quantize.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

import emlkit.emlkit_ops as eo
from emlkit.passes.graph import DqOpQLowering, add_parameter, get_attrs, qparams, shape_of
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten

ADAPTIVE_AVG = (aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default)


def adaptive_tables(h: int, w: int, oh: int, ow: int, s_in: float, s_out: float
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(rows, cols, requant) of the op for an h x w input pooled to oh x ow; None if a window has too many taps or
    a factor is out of range."""
    rows, cols = eo.adaptive_windows(h, oh), eo.adaptive_windows(w, ow)
    rq = []
    for r0, r1 in rows.tolist():
        for c0, c1 in cols.tolist():
            taps = (r1 - r0) * (c1 - c0)
            if taps > eo.ADAPTIVE_MAX_TAPS:
                return None
            m, t = eo.multiplier_shift(s_in / (s_out * taps))
            if not 1 <= t <= 62:
                return None
            rq.append((m, t))
    return rows, cols, torch.tensor(rq, dtype=torch.int32).reshape(-1, 2)


@declare("pre_edge", ("aten.adaptive_avg_pool2d",), runs_after=("LutFusion", "EmlkitAvgPool"), order=215,
         flows=("cortex_m",))
class EmlkitAdaptiveAvgPool(DqOpQLowering):
    """An int8 adaptive average pool to any output size: PyTorch's window of each output row and column,
    with a requantization per window, precomputed (`emlkit::adaptive_avg_pool2d`)."""

    op_targets, ranks = ADAPTIVE_AVG, range(4, 5)

    def lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node,
              q: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, Any]] | None:
        (s_in, zp_in), (s_out, zp_out) = qparams(dq)[:2], qparams(q)[:2]
        shape, out = shape_of(n.args[0]), shape_of(n)
        if shape is None or out is None or len(out) != 4 or 0 in out or 0 in shape:
            return None
        try:
            tables = adaptive_tables(int(shape[2]), int(shape[3]), int(out[2]), int(out[3]), s_in, s_out)
        except ValueError as exc:
            log.info("adaptive average pool %s left in float: %s", n.name, exc)
            return None
        if tables is None:
            log.info("adaptive average pool %s left in float: a window over %d taps or a factor out of range",
                     n.name, eo.ADAPTIVE_MAX_TAPS)
            return None
        names = [add_parameter(gm, f"{n.name}_{k}", t) for k, t in zip(("rows", "cols", "requant"), tables)]
        rn, cn, qn = get_attrs(gm, q, names, getattr(q.meta.get("val"), "fake_mode", None))
        new = gm.graph.call_function(torch.ops.emlkit.adaptive_avg_pool2d.default, (dq.args[0], rn, cn, qn, zp_in,
                                                                                     zp_out))
        return new, {"size": [int(out[2]), int(out[3])], "in_scale": s_in, "out_scale": s_out}
