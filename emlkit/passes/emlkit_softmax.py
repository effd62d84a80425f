"""Lowering (Cortex-M, converted pt2e graph): quantized softmax -> `emlkit::softmax` with free output qparams.

Matches `dequantize(x_q, s_in, zp_in) -> softmax(dim) -> quantize(s_out, zp_out)`,
int8 per-tensor on both sides, the softmax used only by that quantize (the
form `own_output_qparams.py` gives every softmax).

Emits `emlkit::softmax(x_q, exp_table, dim, zp_out, M, T)` (semantics in
emlkit/emlkit_ops.py): the 256-entry exp table is built from s_in on the host, the
output requantization (M, T) from s_out. ExecuTorch's `cortex_m::softmax` could
only write at 1/256, zero point -128.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch

import emlkit.emlkit_ops as eo
from emlkit.passes._graph import copy_region_meta, per_tensor_qparams, qparams, unique_name
from emlkit.passes.lut_fusion import DQ_TARGETS, Q_TARGETS
from emlkit.passes.own_output_qparams import SOFTMAX
from emlkit.passes.manager import Pass, declare

log = logging.getLogger(__name__)


def match_dq_op_q(n: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """(dequantize, quantize) around `n` when it reads one int8 dequantize and only feeds one int8 quantize."""
    dq = n.args[0] if n.args else None
    if not (isinstance(dq, torch.fx.Node) and dq.op == "call_function" and dq.target in DQ_TARGETS
            and per_tensor_qparams(dq) and isinstance(dq.args[0], torch.fx.Node)):
        return None
    if len(n.users) != 1:
        return None
    q = next(iter(n.users))
    if q.op != "call_function" or q.target not in Q_TARGETS or not per_tensor_qparams(q):
        return None
    if qparams(dq)[4] != torch.int8 or qparams(q)[4] != torch.int8 or qparams(q)[2:4] != (-128, 127):
        return None
    return dq, q


def replace(gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node, q: torch.fx.Node,
            new: torch.fx.Node) -> None:
    copy_region_meta(q, new)
    new.meta["stack_trace"] = n.meta.get("stack_trace", "")
    q.replace_all_uses_with(new)
    for dead in (q, n, dq):
        if not dead.users:
            gm.graph.erase_node(dead)


@dataclass
class CortexMLowering(Pass):
    """What the pre-edge passes lowering to emlkit:: ops share: on for Cortex-M targets only, the walk
    over `dequantize -> op -> quantize` matches, and a report of the nodes they lowered.

    Subclasses say which ops they take (`takes`) and build the replacement (`lower`, called with the
    graph inserting before the quantize): the new node and its report entry, or None to leave the op.
    """

    report_key: str = ""
    applicable: bool = False  # until bound (emlkit.passes.manager.Pass)
    lowered: list[dict[str, Any]] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        return {"lowered": list(self.lowered)}

    def takes(self, n: torch.fx.Node) -> bool:
        raise NotImplementedError

    def lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node,
              q: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, Any]] | None:
        raise NotImplementedError

    def __call__(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        self.lowered = []
        if not self.applicable:
            return gm
        for n in list(gm.graph.nodes):
            m = match_dq_op_q(n) if n.op == "call_function" and self.takes(n) else None
            if m is None:
                continue
            dq, q = m
            with gm.graph.inserting_before(q):
                got = self.lower(gm, n, dq, q)
            if got is None:
                continue
            new, entry = got
            replace(gm, n, dq, q, new)
            self.lowered.append({"node": n.name, **entry})
        if self.lowered:
            gm.graph.eliminate_dead_code()
            gm.graph.lint()
            gm.recompile()
        return gm


@declare("pre_edge", ("aten.softmax",), runs_after=("LutFusion",), order=200, flows=("cortex_m",))
@dataclass
class EmlkitSoftmax(CortexMLowering):
    """Pre-edge pass (LowerOptions.pre_edge_passes), Cortex-M targets only."""

    report_key: str = "emlkit_softmax"

    def takes(self, n: torch.fx.Node) -> bool:
        return n.target in SOFTMAX

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
        dim = int(n.args[1]) % max(rank, 1)
        name = unique_name(gm, "_aot_softmax_exp")
        gm.register_buffer(name, eo.softmax_exp_table(s_in))
        table = gm.graph.get_attr(name)
        new = gm.graph.call_function(torch.ops.emlkit.softmax.default, (dq.args[0], table, dim, zp_out, mult, shift))
        return new, {"dim": dim, "in_scale": s_in, "out_scale": s_out, "out_zero_point": zp_out}
