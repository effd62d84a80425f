"""Lowering (Cortex-M, and the resizes an Ethos-U compile leaves on the CPU; converted pt2e graph): quantized bilinear
resize -> `emlkit::upsample_bilinear2d`.

Matches `dequantize(x_q, s_in, zp_in) -> upsample_bilinear2d -> quantize(s_out, zp_out)`, int8 per-tensor, a 4-D
input, `.vec` (output size or scale factors) and `.default` (output size, optional scales) forms, align_corners
True or False (not the antialiased op).

Emits `emlkit::upsample_bilinear2d(x_q, rows, cols, zp_in, zp_out, M, T)` (semantics in emlkit/emlkit_ops.py):
rows / cols are int32 [n, 3] constants (i0, i1, w) per output row / column. The source positions are torch's
own: its float64 kernel, called with the node's arguments on a ramp (every row, then every column, holding
its index), returns (1 - lambda) * i0 + lambda * i1 at each output position, so whatever torch does with
align_corners, sizes and scale factors is what the tables hold. i0 = min(floor(p), in - 1),
i1 = min(i0 + 1, in - 1), w = floor((p - i0) * 2^11 + 1/2). M / 2^T = s_in / (s_out * 2^22).

Accuracy: a weight is at most 2^-12 off its lambda, and the bilinear value moves by at most 255 input steps per
unit of lambda along each axis, so the integer value is within 255 * 2^-11 * s_in / s_out output steps of the
float one before rounding; with that below 1 (the pass takes only s_in / s_out <= MAX_SCALE_RATIO, which keeps
it <= 0.997), the op's output is within 1 int8 step of quantizing torch's float result (tests/test_kernels.py
checks it). A larger ratio (an output range far narrower than the input's) leaves the float op.

Why: ExecuTorch 1.5.1's Cortex-M flow has no bilinear resize: it ran in float between the dequantize and the
quantize (a float island). On Ethos-U the NPU keeps the resizes its partitioner takes (TOSA RESIZE); one it leaves
on the CPU (e.g. align_corners=True on the U55) was such a float island, and a compile without --allow-float refused
the model.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch

import emlkit.emlkit_ops as eo
from emlkit.passes.graph import DqOpQLowering, add_parameter, get_attrs, qparams, shape_of
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten

BILINEAR = (aten.upsample_bilinear2d.vec, aten.upsample_bilinear2d.default)
MAX_SCALE_RATIO = 8.0     # 255 * 8 / 2^11 = 0.996: the 1-step bound holds
MAX_SIDE = 1 << 16        # positions of a ramp this long are exact in float64 many times over


def source_tables(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any], h: int, w: int
                  ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(rows, cols): int32 [out, 3] tables (i0, i1, w) of torch's bilinear kernel OP called with ARGS and
    KWARGS after its input, on an h x w map; None if the output is empty or not 4-D."""
    if not (0 < h <= MAX_SIDE and 0 < w <= MAX_SIDE):
        return None
    ramp_h = torch.arange(h, dtype=torch.float64).view(1, 1, h, 1).expand(1, 1, h, w).contiguous()
    ramp_w = torch.arange(w, dtype=torch.float64).view(1, 1, 1, w).expand(1, 1, h, w).contiguous()
    ph, pw = op(ramp_h, *args, **kwargs), op(ramp_w, *args, **kwargs)
    if ph.dim() != 4 or ph.numel() == 0:
        return None
    return _table(ph[0, 0, :, 0], h), _table(pw[0, 0, 0, :], w)


def _table(pos: torch.Tensor, size: int) -> torch.Tensor:
    rows = []
    for p in pos.tolist():
        i0 = min(max(math.floor(p), 0), size - 1)
        i1 = min(i0 + 1, size - 1)
        lam = min(max(p - i0, 0.0), 1.0) if i1 != i0 else 0.0
        rows.append((i0, i1, math.floor(lam * eo.BILINEAR_ONE + 0.5)))
    return torch.tensor(rows, dtype=torch.int32).reshape(-1, 3)


@declare("pre_edge", ("aten.upsample_bilinear2d",), runs_after=("LutFusion", "EmlkitAvgPool"), order=212,
         flows=("cortex_m", "ethos_u_cpu"), bits=("int8",))
class EmlkitBilinear(DqOpQLowering):
    """An int8 bilinear resize (`align_corners` either way, any scale): source rows and columns with their
    fixed-point weights, precomputed from PyTorch's own coordinate rule."""

    op_targets, ranks = BILINEAR, range(4, 5)

    def lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node,
              q: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, Any]] | None:
        (s_in, zp_in), (s_out, zp_out) = qparams(dq)[:2], qparams(q)[:2]
        shape, qv = shape_of(n.args[0]), q.meta.get("val")
        if shape is None:
            return None
        h, w = int(shape[2]), int(shape[3])
        tables = source_tables(n.target, tuple(n.args[1:]), dict(n.kwargs), h, w)
        if tables is None:
            log.debug("bilinear resize %s left in float: empty output or a side over %d", n.name, MAX_SIDE)
            return None
        if s_in / s_out > MAX_SCALE_RATIO:
            log.info("bilinear resize %s left in float: input scale %.3g is over %g times the output's %.3g "
                     "(the int8 op's 1-step accuracy bound needs it)", n.name, s_in, MAX_SCALE_RATIO, s_out)
            return None
        try:
            mult, shift = eo.multiplier_shift(s_in / (s_out * eo.BILINEAR_ONE * eo.BILINEAR_ONE))
            if not 1 <= shift <= 62:
                raise ValueError(f"shift {shift} outside [1, 62]")
        except ValueError as exc:
            log.info("bilinear resize %s left in float: %s", n.name, exc)
            return None
        rows, cols = tables
        names = [add_parameter(gm, f"{n.name}_rows", rows), add_parameter(gm, f"{n.name}_cols", cols)]
        rn, cn = get_attrs(gm, q, names, getattr(qv, "fake_mode", None))
        new = gm.graph.call_function(torch.ops.emlkit.upsample_bilinear2d.default,
                                     (dq.args[0], rn, cn, zp_in, zp_out, mult, shift))
        return new, {"size": [int(rows.shape[0]), int(cols.shape[0])], "in_scale": s_in, "out_scale": s_out}
