"""adaptive_max_pool2d of a dequantized tensor taken on its int8 codes (after quantization, Cortex-M).

Matches, in the quantized graph: `aten.adaptive_max_pool2d` whose input is a per-tensor `dequantize` with a
positive scale and whose indices are not used.

Produces the adaptive max pool of the dequantize's input, the codes, followed by the same dequantize: dequantization
is strictly increasing, so each window's maximum is the dequantized maximum code and the result is exact at any
output size (windows of unequal sizes included). The quantize after it requantizes those codes.

Why: PyTorch's quantizers annotate max_pool2d (shared qparams) but not adaptive_max_pool2d, which then ran as a float
op between a dequantize and a quantize; the firmware's aten::adaptive_max_pool2d takes int8
(firmware/ops/aten_float_pool.c). A program that uses the indices keeps the float op (ties are unspecified).

On the int8 Ethos-U flows the adaptive max pools the NPU partitioner leaves on the CPU in float (manager.CPU_SIDE)
run on codes the same way (tests/test_npu_cpu_int8.py). The Arm quantizer observes the pool's output on its own,
so the quantize after it is a requantization (a dequantize and a quantize on the CPU, exact as before).
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import CodesRewrite
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_edge", ("aten.adaptive_max_pool2d",), runs_after=("LutFusion",), order=211,
         flows=("cortex_m", "ethos_u_cpu"), bits=("int8",))
class AdaptiveMaxOnCodes(CodesRewrite):
    matches = (aten.adaptive_max_pool2d.default,)
    what = "adaptive max pool on int8 codes"
