"""Whole-map average pools -> depthwise convolutions on Ethos-U (own output qparams).

Matches, in the exported float graph before quantization (Ethos-U flows), an
`avg_pool2d`, `adaptive_avg_pool2d` or `mean` over H and W (with keepdim) whose
single window covers the whole [1, C, H, W] map (output 1x1: a global pool
before the classifier, a squeeze-excite pool), when the U55's depthwise limits
allow the window (H <= 64, H * W <= 4096, as ExecuTorch's Ethos-U55 operator
support checks).

Produces `conv2d(x, W, None, stride 1, padding 0, groups=C)` with W [C, 1, H, W]
all 1 / (H * W): the same float function. The Arm quantizer then quantizes W
per channel (each weight exactly 127 at scale 1 / (127 * H * W)) and gives the
conv its own observed output qparams, so the NPU computes the window sum in
its 32-bit accumulator and rescales it once to a format sized for the mean.

Why: the Arm quantizer gives average pools their input's qparams (TOSA
AVG_POOL2D has zero points but no output scale), and a global mean's range is
a fraction of its input's, so the classifier read a few dozen codes; on the CPU
`own_output_qparams.py` fixes the same format loss. Measured with
scripts/parity.py (8 inputs), see docs/parity.md.
Squeeze-excite pools too: with its input's scale a 4x4 pool's mean is an exact
tie (a sum of 8 mod 16) once in 16, and TOSA's AVG_POOL2D rounds ties up where
the quantized PyTorch model rounds them to even; through mobilenet_v3_small's
nine squeeze-excite gates those single steps grew to 6 output steps between
the TOSA graph and its quantized model (tosa_check refuses more than 4). As
depthwise convs with their own output scale the ratio is arbitrary, ties do
not occur, and the two agree exactly (0 steps on U55, U65 and U85); parity on
64 held-out inputs -0.4 dB (-0.5 with only the classifier's pool).
Cost: C * H * W bytes of weights (before Vela's compression), and the NPU runs
a depthwise convolution where it ran a pool.
"""

from __future__ import annotations


import torch

from emlkit.passes.graph import AVG_POOLS, Rewrite, add_parameter, copy_meta, get_attrs, pool_geometry, rewrite_calls
from emlkit.passes.manager import declare

aten = torch.ops.aten

# ExecuTorch's Ethos-U55 depthwise limits (operator_support/convolution_support.py, from Vela).
MAX_KERNEL_H = 64
MAX_KERNEL_TAPS = 4096


@declare("pre_quant", ("aten.avg_pool2d", "aten.adaptive_avg_pool2d", "aten.mean"),
         runs_after=("AvgPoolForNpu", "Conv1dAsConv2d"), order=90, flows=("ethos_u",))
class NpuPoolAsDepthwise(Rewrite):
    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        done: list[str] = []
        for target in sorted(AVG_POOLS, key=str):
            done += rewrite_calls(gm, target, self._rewrite, "whole-map pool -> depthwise conv")
        return done

    def _rewrite(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        x = n.args[0]
        geo = pool_geometry(n)
        xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if geo is None or not isinstance(xval, torch.Tensor) or xval.dtype != torch.float32:
            return False
        c, h, w = (int(d) for d in xval.shape[1:])
        if geo[0] != [h, w] or h > MAX_KERNEL_H or h * w > MAX_KERNEL_TAPS:
            return False
        name = add_parameter(gm, "_aot_pool_weight", torch.full((c, 1, h, w), 1.0 / (h * w)))
        fake_mode = getattr(xval, "fake_mode", None)
        wnode = get_attrs(gm, n, [name], fake_mode)[0]
        g = gm.graph
        with g.inserting_before(n):
            conv = g.call_function(aten.conv2d.default, (x, wnode, None, [1, 1], [0, 0], [1, 1], c))
        if fake_mode is not None:
            with fake_mode:
                conv.meta["val"] = torch.nn.functional.conv2d(xval, wnode.meta["val"], None, 1, 0, 1, c)
        copy_meta(n, (wnode, conv))
        n.replace_all_uses_with(conv)
        g.erase_node(n)
        return True
