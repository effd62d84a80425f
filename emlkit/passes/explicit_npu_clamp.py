"""ReLU / ReLU6 after a conv or linear kept as an int8 clamp when its zero point is not int8's minimum (Ethos-U).

Matches, in the quantized (converted) graph before to_edge, on Ethos-U targets:
`relu(y)` or `hardtanh(y, 0, max)` where y is a conv or linear read by nothing
else, and the activation's one user is `quantize_per_tensor(scale, zp)` with
zp above its qmin (and, for hardtanh, `max` quantizing to qmax). That happens
when the activation's output shares qparams with other tensors: the branches
of a `torch.cat` (branch_concat: a ReLU6 branch beside hardsigmoid and
hardswish branches, zero point -93).

Produces `y -> quantize(scale, zp) -> dequantize -> activation -> quantize`: the
producer's output is quantized with the activation's own qparams, and the
activation runs on those codes. The quantized function is unchanged: with q
monotonic, q(0) = zp and q(max) = qmax, clamp(q(y), zp, qmax) = q(act(y)), so
the fake-quantized model (tosa_check's reference) gives the same outputs.

Why: ExecuTorch 1.5.1's Arm flow (FuseQuantizedActivationPass) removes such an
activation and keeps its lower bound only as the quantize node's qmin (set to
the zero point); RewriteConvPass then builds the conv's output RESCALE from the
scale and zero point alone, so the bound is lost. That is right only when the
zero point is qmin (the activation's own range starts at 0, and saturation does
the clamp). With the concat's qparams every negative output of branch_concat's
ReLU6 conv went through unclamped: its TOSA graph was 28 steps from the
quantized model (170 on other models) and the compile was refused. The fuse
pass only takes an activation that reads the conv itself; after a dequantize
it lowers as RESCALE (conv to the activation's qparams) + an int8 CLAMP from zp
to qmax. (A plain `clamp` between conv and quantize is not enough: the
partitioner then leaves the conv on the CPU, its output being unquantized.)
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from emlkit.passes.graph import Rewrite
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten
# looked up when the pass runs: the quantized_decomposed ops exist once the quantizer's modules are imported
qd = torch.ops.quantized_decomposed

RELU = {aten.relu.default, aten.relu_.default}
HARDTANH = {aten.hardtanh.default, aten.hardtanh_.default}
# What ExecuTorch's FuseQuantizedActivationPass folds an activation into (edge convolution / linear).
PRODUCERS = {aten.conv1d.default, aten.conv2d.default, aten.convolution.default, aten.conv_transpose2d.input,
             aten.linear.default}


def lost_lower_bound(n: torch.fx.Node) -> dict[str, Any] | None:
    """What ExecuTorch's fold of activation n would drop (bounds, qparams), or None for any other node."""
    if n.op != "call_function" or n.target not in RELU | HARDTANH:
        return None
    upper = None
    if n.target in HARDTANH:
        lo = n.args[1] if len(n.args) > 1 else n.kwargs.get("min_val", -1.0)
        if lo != 0:
            return None  # ExecuTorch folds only zero lower bounds
        upper = float(n.args[2] if len(n.args) > 2 else n.kwargs.get("max_val", 1.0))
    src = n.args[0]
    if not isinstance(src, torch.fx.Node) or src.op != "call_function" or src.target not in PRODUCERS \
            or len(src.users) != 1:
        return None
    users = list(n.users)
    if len(users) != 1 or users[0].target != qd.quantize_per_tensor.default:
        return None
    scale, zp, qmin, qmax = users[0].args[1:5]
    if not all(isinstance(v, int) for v in (zp, qmin, qmax)) or zp == qmin:
        return None  # saturation at qmin == zp does the clamp: the fold is right
    if upper is not None and round(upper / float(scale)) + zp < qmax:
        return None  # ExecuTorch does not fold it either (its upper bound is inside the range)
    return {"node": n.name, "producer": src.name, "max": upper, "scale": float(scale), "zero_point": zp, "qmin": qmin}


@declare("pre_edge", ("aten.relu", "aten.hardtanh"), order=220, flows=("ethos_u",))
class ExplicitNpuClamp(Rewrite):
    def run(self, gm: torch.fx.GraphModule) -> list[Any]:
        g, done = gm.graph, []
        for n in list(g.nodes):
            found = lost_lower_bound(n)
            if found is None:
                continue
            src, qargs = n.args[0], tuple(next(iter(n.users)).args[1:])
            with g.inserting_before(n):
                q = g.call_function(qd.quantize_per_tensor.default, (src, *qargs))
                dq = g.call_function(qd.dequantize_per_tensor.default, (q, *qargs))
            for new in (q, dq):
                new.meta.update({k: v for k, v in src.meta.items() if k != "val"})
                if "val" in src.meta:  # fake tensors: q has the codes' dtype, dq the producer's
                    new.meta["val"] = src.meta["val"] if new is dq else src.meta["val"].to(qargs[-1])
            n.replace_input_with(src, dq)
            done.append(found)
        if done:
            g.lint()
            gm.recompile()
            log.debug("activations kept as int8 clamps: %s", ", ".join(r["node"] for r in done))
        return done
