"""Average pools on Ethos-U keep their real zero points in the TOSA graph (inside ExecuTorch's Arm pipeline).

Matches, in ExecuTorch 1.5.1's Arm TOSA pipeline (Ethos-U flows), every
`tosa.AVG_POOL2D` whose input or output zero point is an `aten.full` that
carries quantization parameters (`output_qparams` in its meta). That is every
quantized pool: RewriteAvgPool2dPass makes each zero point a one-element
`full` with `call_scalar(zp, meta)`, and the meta it copies is the pool's own.

Produces the same `full` nodes without `input_qparams` / `output_qparams`, so
ComputeConstantOpsAOTPass (the next pass) evaluates them as the plain int8
values they are. On the converted graph (before to_edge) the pass changes
nothing; the report lists the int8 pools whose zero point the folding would
have changed, with the value it would have had.

Why: ComputeConstantOpsAOTPass quantizes a constant that has output_qparams,
so each zero point z became clamp(round(z / scale) + z, -128, 127): 3 -> 127 at
scale 0.0176 (random model 100:56); a positive z saturates to 127 once
z * (1 / scale + 1) >= 127, a negative one to -128 likewise (0 and -128 stay).
The input and output zero points change together, so the mean is the same, but
TOSA rounds sum / count half away from the input zero point (its reciprocal
multiplier is a little above 1/count): with 127 every tie went down, with -128
every tie up. A 2x2 pool ties on about a quarter of its outputs, and PyTorch's
reference rounds ties to even, so about one output in eight was one step off,
all in the same direction, and a Linear after the pool summed them (model
100:56 on ethos-u55-128: 5 steps off the quantized model, refused by
tosa_check). With the real zero point ties go away from it, both ways: model
100:56 is 3 steps from the quantized model (tosa_check allows 4) and the NPU
is bit-exact with the TOSA graph. (Pools whose input and output zero points
differ would have been off by the difference of the two quantized values; the
Arm quantizer gives a pool its input's qparams, so that did not occur.)

The Arm-pipeline part is an `ArmPipelineHook` (emlkit/passes/graph.py) after
RewriteAvgPool2dPass: registered once per process, acting only while
`arm_pipeline()` is entered, which the Ethos-U flow does around its lowering
when this pass is configured and the target is an Ethos-U one.
"""

from __future__ import annotations

from typing import Any

import torch

from emlkit.passes.graph import ArmPipelineHook, ArmPipelinePass
from emlkit.passes.manager import declare

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

POOLS = {aten.avg_pool2d.default, aten.adaptive_avg_pool2d.default, aten.mean.dim}
QPARAM_KEYS = ("input_qparams", "output_qparams")


def raw_zero_points(gm: torch.fx.GraphModule, avg_pool_op: Any, full_op: Any) -> list[str]:
    """Drop the qparams from the `full` zero-point arguments of every AVG_POOL2D; the pools changed."""
    done = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target != avg_pool_op:
            continue
        changed = False
        for zp in n.args[1:3]:  # AVG_POOL2D(input, input_zp, output_zp, kernel, stride, pad, acc_type)
            if isinstance(zp, torch.fx.Node) and zp.target == full_op and any(k in zp.meta for k in QPARAM_KEYS):
                for k in QPARAM_KEYS:
                    zp.meta.pop(k, None)
                changed = True
        if changed:
            done.append(n.name)
    return done


def _after() -> type:
    from executorch.backends.arm._passes.rewrite_avg_pool2d_pass import RewriteAvgPool2dPass
    return RewriteAvgPool2dPass


def _arm_rewrite(gm: torch.fx.GraphModule) -> list[str]:
    from executorch.exir.dialects._ops import ops as exir_ops
    return raw_zero_points(gm, exir_ops.backend.tosa.AVG_POOL2D.default, exir_ops.edge.aten.full.default)


ARM_HOOK = ArmPipelineHook("npu_pool_zero_point", _after, _arm_rewrite)


def folded_zero_point(pool: torch.fx.Node) -> dict[str, Any] | None:
    """For an int8 `dequantize -> pool -> quantize`: its zero point and the value ExecuTorch's constant folding
    gives it (quantized with the pool's output qparams), when the two differ; else None."""
    dq, users = pool.args[0], list(pool.users)
    if not isinstance(dq, torch.fx.Node) or dq.target != qd.dequantize_per_tensor.default or len(users) != 1 \
            or users[0].target != qd.quantize_per_tensor.default:
        return None
    zp, dtype = dq.args[2], dq.args[-1]
    if not isinstance(zp, int) or dtype != torch.int8:
        return None
    qargs = users[0].args[1:]
    folded = int(qd.quantize_per_tensor.default(torch.tensor([float(zp)]), *qargs)[0])
    return None if folded == zp else {"node": pool.name, "zero_point": zp, "folded_to": folded}


@declare("pre_edge", ("aten.avg_pool2d", "aten.adaptive_avg_pool2d", "aten.mean.dim", "tosa.AVG_POOL2D"),
         order=230, flows=("ethos_u",))
class NpuPoolZeroPoint(ArmPipelinePass):
    report_name = "pools"
    arm_hook = ARM_HOOK

    def run(self, gm: torch.fx.GraphModule) -> list[Any]:
        # The graph is left as it is; the report names the pools whose zero point the Arm-pipeline part keeps.
        found = [folded_zero_point(n) for n in gm.graph.nodes if n.op == "call_function" and n.target in POOLS]
        return [f for f in found if f is not None]
