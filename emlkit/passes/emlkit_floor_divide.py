"""Lowering (Cortex-M, converted pt2e graph): floor division of two quantized tensors -> `emlkit::floor_divide`.

Matches `floor_divide(dequantize(a_q), dequantize(b_q))` (also `div(..., rounding_mode="floor")`) followed by one
`quantize(s_out, zp_out)`, int8 per-tensor, a and b of one shape and memory format.

Emits `emlkit::floor_divide(a_q, b_q, zp_a, zp_b, m_a, m_b, e, zp_out, M, T)` (semantics in emlkit/emlkit_ops.py):
the scales as 24-bit integer mantissas m_a, m_b and one exponent e (exact for float32 scales), so the quotient's
floor is exact in int64 (no rounding before the floor, where a float quotient of 4 / 2 can land on 1.9999999),
then requantized once by M / 2^T = 1 / s_out.

Why: ExecuTorch 1.5.1's Cortex-M quantizer has no rounding division: it ran in float between the dequantizes and
the quantize (ExecuTorch's operator suite's test_floor_divide.py).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

import emlkit.emlkit_ops as eo
from emlkit.passes.graph import DQ_TARGETS, DqOpQLowering, per_tensor_qparams, qparams
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten


def _int8_dq(arg: object) -> torch.fx.Node | None:
    if not (isinstance(arg, torch.fx.Node) and arg.target in DQ_TARGETS and per_tensor_qparams(arg)):
        return None
    return arg if qparams(arg)[4] == torch.int8 and isinstance(arg.args[0], torch.fx.Node) else None


def _value(n: object) -> torch.Tensor | None:
    """N's value meta, through the Q/DQ nodes convert_pt2e made without one (they keep their input's layout)."""
    while isinstance(n, torch.fx.Node):
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor):
            return v
        if not (n.op == "call_function" and n.args and "quantize_per_tensor" in str(n.target)):
            return None
        n = n.args[0]
    return None


def _same_layout(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    """Whether dequantizes A and B give tensors of one shape and memory format (the kernel walks both in one
    byte order)."""
    va, vb = _value(a), _value(b)
    return (isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor) and va.shape == vb.shape
            and va.stride() == vb.stride())


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
        return floor and len(n.args) == 2 and _int8_dq(n.args[1]) is not None

    def lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node,
              q: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, Any]] | None:
        dq_b = _int8_dq(n.args[1])
        if dq_b is None or not _same_layout(dq, dq_b):
            log.info("floor division %s left in float: its operands differ in shape or memory format", n.name)
            return None
        (s_a, zp_a), (s_b, zp_b), (s_out, zp_out) = qparams(dq)[:2], qparams(dq_b)[:2], qparams(q)[:2]
        try:
            consts = floor_divide_constants(s_a, s_b, s_out)
        except ValueError as exc:
            consts = None
            log.debug("floor division %s: %s", n.name, exc)
        if consts is None:
            log.info("floor division %s left in float: scales %.3g, %.3g, %.3g out of the op's range", n.name, s_a,
                     s_b, s_out)
            return None
        m_a, m_b, e, mult, shift = consts
        new = gm.graph.call_function(torch.ops.emlkit.floor_divide.default,
                                     (dq.args[0], dq_b.args[0], zp_a, zp_b, m_a, m_b, e, zp_out, mult, shift))
        return new, {"a_scale": s_a, "b_scale": s_b, "out_scale": s_out}
