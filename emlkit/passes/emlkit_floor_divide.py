"""Lowering (Cortex-M, converted pt2e graph): floor division of a quantized tensor -> `emlkit::floor_divide`.

Matches `floor_divide(dequantize(a_q), d)` (also `div(..., rounding_mode="floor")`) followed by one
`quantize(s_out, zp_out)`, int8 per-tensor, where the divisor d is `dequantize(b_q)` of a shape that broadcasts
with a's (either way, up to 6 dims, any memory formats), or a nonzero scalar: a Python number or a one-element
float constant.

Emits `emlkit::floor_divide(a_q, b_q, zp_a, zp_b, m_a, m_b, e, zp_out, M, T)` (semantics in emlkit/emlkit_ops.py):
the scales as 24-bit integer mantissas m_a, m_b and one exponent e (exact for float32 scales), so the quotient's
floor is exact in int64 (no rounding before the floor, where a float quotient of 4 / 2 can land on 1.9999999),
then requantized once by M / 2^T = 1 / s_out. A scalar divisor c is the one-element b_q = sign(c) with scale |c| in
float32 (the precision torch divides a float32 tensor by a Python number in), so it is exact too.

Why: ExecuTorch 1.5.1's Cortex-M quantizer has no rounding division: it ran in float between the dequantizes and
the quantize (ExecuTorch's operator suite's test_floor_divide.py).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import torch

import emlkit.emlkit_ops as eo
from emlkit.passes.graph import (DQ_TARGETS, DqOpQLowering, add_parameter, const_tensor, get_attrs, per_tensor_qparams,
                                 qparams, shape_of)
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten


def _int8_dq(arg: object) -> torch.fx.Node | None:
    if not (isinstance(arg, torch.fx.Node) and arg.target in DQ_TARGETS and per_tensor_qparams(arg)):
        return None
    return arg if qparams(arg)[4] == torch.int8 and isinstance(arg.args[0], torch.fx.Node) else None


def scalar_divisor(gm: torch.fx.GraphModule, arg: object) -> float | None:
    """A divisor that is one number (a Python number or a one-element float constant), as the float32 torch divides
    by; None for anything else, zero and non-finite values included (those stay float)."""
    if isinstance(arg, (int, float)) and not isinstance(arg, bool):
        c = float(np.float32(arg))
    else:
        t = const_tensor(gm, arg)
        if t is None or t.numel() != 1 or not t.is_floating_point():
            return None
        c = float(t.detach().float().reshape(()))
    return c if c != 0.0 and math.isfinite(c) else None


def floor_divide_constants(s_a: float, s_b: float, s_out: float) -> tuple[int, int, int, int, int] | None:
    """(m_a, m_b, e, M, T) of the op, or None when the scales are too far apart or 1 / s_out is out of range."""
    (m_a, e_a), (m_b, e_b) = eo.scale_mantissa(s_a), eo.scale_mantissa(s_b)
    mult, shift = eo.multiplier_shift(1.0 / s_out)
    if abs(e_a - e_b) > eo.FLOOR_DIV_MAX_EXP or not 1 <= shift <= 62:
        return None
    return m_a, m_b, e_a - e_b, mult, shift


@declare("pre_edge", ("aten.floor_divide", "aten.div"), runs_after=("LutFusion",), order=216, flows=("cortex_m",))
class EmlkitFloorDivide(DqOpQLowering):
    """Pre-edge pass (LowerOptions.pre_edge_passes), Cortex-M targets only."""

    def takes(self, n: torch.fx.Node) -> bool:
        floor = n.target is aten.floor_divide.default or (
            n.target is aten.div.Tensor_mode and n.kwargs.get("rounding_mode") == "floor")
        if not floor or len(n.args) != 2:
            return False
        d = n.args[1]
        return _int8_dq(d) is not None or (isinstance(d, (int, float)) and not isinstance(d, bool)) or (
            isinstance(d, torch.fx.Node) and d.op == "get_attr")

    def lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node,
              q: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, Any]] | None:
        dq_b, shape_a, shape_out = _int8_dq(n.args[1]), shape_of(dq), shape_of(n)
        c = None if dq_b is not None else scalar_divisor(gm, n.args[1])
        shape_b = shape_of(dq_b) if dq_b is not None else (1,)
        if (dq_b is None and c is None) or None in (shape_a, shape_b, shape_out) \
                or len(shape_out) > eo.FLOOR_DIV_MAX_DIMS:  # type: ignore[arg-type]
            log.info("floor division %s left in float: a divisor that is neither int8 nor a nonzero number, or over "
                     "%d dims", n.name, eo.FLOOR_DIV_MAX_DIMS)
            return None
        (s_a, zp_a), (s_out, zp_out) = qparams(dq)[:2], qparams(q)[:2]
        s_b, zp_b = qparams(dq_b)[:2] if dq_b is not None else (abs(c), 0)  # type: ignore[arg-type]
        try:
            consts = floor_divide_constants(s_a, s_b, s_out)
        except ValueError as exc:
            consts = None
            log.debug("floor division %s: %s", n.name, exc)
        if consts is None:
            log.info("floor division %s left in float: scales %.3g, %.3g, %.3g out of the op's range", n.name, s_a,
                     s_b, s_out)
            return None
        if dq_b is not None:
            b = dq_b.args[0]
        else:  # the divisor's sign as its one code, its magnitude as its scale
            code = torch.tensor([1 if c > 0 else -1], dtype=torch.int8)  # type: ignore[operator]
            (b,) = get_attrs(gm, q, [add_parameter(gm, f"{n.name}_divisor", code)],
                             getattr(q.meta.get("val"), "fake_mode", None))
        m_a, m_b, e, mult, shift = consts
        new = gm.graph.call_function(torch.ops.emlkit.floor_divide.default,
                                     (dq.args[0], b, zp_a, zp_b, m_a, m_b, e, zp_out, mult, shift))
        return new, {"a_scale": s_a, "b_scale": s_b, "out_scale": s_out, "divisor": "scalar" if c is not None else
                     ("broadcast" if shape_b != shape_a else "tensor")}
