"""int16 convolutions feeding int32 arithmetic keep their int16 output on Ethos-U (inside ExecuTorch's Arm pipeline).

Matches, in ExecuTorch 1.5.1's Arm TOSA pipeline on int16-activation targets
(`ethos-u55-128-a16w8`), a `tosa.RESCALE` to int32 that reads a convolution's
accumulator directly (`tosa.CONV2D` / `DEPTHWISE_CONV2D` on an int16 input)
while the convolution also has its ordinary int16 output RESCALE. That is what
RewriteConvPass makes of an A16W8 convolution whose output feeds an add, mul
or other op InsertRescaleInt32Pass widened to int32: it folds the consumer's
int16 -> int32 rescale into the convolution's and skips the int16 step.

Produces `conv -> RESCALE(int16) -> RESCALE(int32)`: the consumer's rescale
reads the convolution's int16 output again, with its own scale (the combined
scale divided by the convolution's, per channel) and the int16 zero point.

Why: Vela 5.1.0 cannot give a convolution an int32 output on the Ethos-U55
("Non-passthrough operation (Conv2D) could not run on NPU"), so every a16w8
model with a convolution before a residual add or a gating mul was refused
(random models 100:34, 100:46; mobilenet_v2's inverted residuals). The int16
step is also what the quantized PyTorch model does (the convolution's output is
quantized to int16 before the add reads it), so the NPU now rounds and clamps
where the reference does.

The Arm-pipeline part is an `ArmPipelineHook` (emlkit/passes/graph.py) after
RewriteConvPass: registered once per process, acting only while `arm_pipeline()`
is entered for an int16-activation Ethos-U compile.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from emlkit.passes.graph import ArmPipelineHook, ArmPipelinePass
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)

_REL_TOL = 1e-6


def _uniform_ratio(combined: list[float], conv: list[float]) -> float | None:
    """combined[i] / conv[i] when it is the same for every channel (the consumer's per-tensor scale)."""
    if not conv or len(combined) not in (1, len(conv)):
        return None
    ratios = [combined[i % len(combined)] / c for i, c in enumerate(conv) if c]
    if len(ratios) != len(conv) or any(abs(r - ratios[0]) > _REL_TOL * abs(ratios[0]) for r in ratios):
        return None
    return ratios[0]


def split_int32_rescales(gm: torch.fx.GraphModule, rescale_op: Any, conv_ops: set[Any]) -> list[str]:
    """Rewire every int32 RESCALE of an int16 convolution's accumulator through its int16 RESCALE; the names."""
    pos = {n: i for i, n in enumerate(gm.graph.nodes)}
    done = []
    for r in list(gm.graph.nodes):
        if r.op != "call_function" or r.target != rescale_op or r.args[1] is not torch.int32:
            continue
        conv = r.args[0]
        if not isinstance(conv, torch.fx.Node) or conv.target not in conv_ops:
            continue
        x = conv.args[0]
        xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if not isinstance(xval, torch.Tensor) or xval.dtype != torch.int16:
            continue
        narrow = [u for u in conv.users if u.op == "call_function" and u.target == rescale_op
                  and u.args[1] is torch.int16 and pos[u] < pos[r]]
        if not narrow:
            log.debug("%s: no int16 output before it; left as ExecuTorch made it", r.name)
            continue
        d = narrow[0]
        scale = _uniform_ratio(list(r.args[2]), list(d.args[2]))
        if scale is None:
            continue
        r.args = (d, torch.int32, [scale], d.args[4], r.args[4])
        done.append(r.name)
    if done:
        gm.graph.lint()
        gm.recompile()
    return done


def _after() -> type:
    from executorch.backends.arm._passes.rewrite_conv_pass import RewriteConvPass
    return RewriteConvPass


def _arm_rewrite(gm: torch.fx.GraphModule) -> list[str]:
    from executorch.exir.dialects._ops import ops as exir_ops
    tosa = exir_ops.backend.tosa
    return split_int32_rescales(gm, tosa.RESCALE.default, {tosa.CONV2D.default, tosa.DEPTHWISE_CONV2D.default})


ARM_HOOK = ArmPipelineHook("npu_a16w8_conv_rescale", _after, _arm_rewrite)


@declare("pre_edge", ("tosa.CONV2D", "tosa.DEPTHWISE_CONV2D", "tosa.RESCALE"),
         order=240, flows=("ethos_u",), bits=("a16w8",))
class NpuA16w8ConvRescale(ArmPipelinePass):
    report_name = "rescales"
    arm_hook = ARM_HOOK

    def arm_record(self) -> list[str]:
        self.done = []  # the report lists what the Arm-pipeline part changed
        return self.done

    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        return []  # the work is done inside the Arm pipeline (arm_pipeline), after this call
