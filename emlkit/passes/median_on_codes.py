"""median of a dequantized tensor taken on its int8 codes (after quantization, Cortex-M).

Matches, in the quantized graph: `aten.median` (all elements) and `aten.median.dim` whose input is a per-tensor
`dequantize` with a positive scale (for `.dim`: only when its indices are not used).

Produces the median of the dequantize's input, the codes, followed by the same dequantize: dequantization is
strictly increasing (a positive scale), so the k-th smallest value is the dequantized k-th smallest code, and
`median(dequantize(x)) == dequantize(median(x))` exactly; the quantize after it (the output's qparams) then
requantizes one code. The output therefore has the input's grid, and its qparams stay those of the quantize that
followed the float median.

Why: the median ran as a float op on dequantized floats (a float island); the firmware's aten::median takes int8
(firmware/ops/aten_float_reduce.c). Indices are left alone: codes tie where the floats tie, but which of equal
elements torch's kernel reports is not specified, so a program using them keeps the float median.

On the int8 Ethos-U flows the medians the NPU partitioner leaves on the CPU in float (manager.CPU_SIDE)
run on codes the same way (tests/test_npu_cpu_int8.py); a compile without --allow-float refused them.
"""

from __future__ import annotations

import torch

from emlkit.passes.graph import CodesRewrite
from emlkit.passes.manager import declare

aten = torch.ops.aten


@declare("pre_edge", ("aten.median",), runs_after=("LutFusion",), order=208,
         flows=("cortex_m", "ethos_u_cpu"), bits=("int8",))
class MedianOnCodes(CodesRewrite):
    matches = (aten.median.default, aten.median.dim)
    what = "median on int8 codes"
