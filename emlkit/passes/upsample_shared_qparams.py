"""Nearest upsampling quantized with its input's qparams on Cortex-M (quantizer configuration).

Matches `aten.upsample_nearest2d` (`.vec` and `.default`) in the graph the
Cortex-M quantizer annotates.

What this does: ExecuTorch 1.5.1's CortexMQuantizer has no annotation for
nearest upsampling, so it stayed a float op between a dequantize and a
quantize, and the program was refused (a float island). Nearest upsampling
only copies elements, so it is exact on int8 codes with its input's scale and
zero point (the Arm/Ethos-U quantizer treats it the same way). The hook gives
the quantizer's shared-qparams stage (ExecuTorch's SharedQspecQuantizer, which
already handles cat, slice, permute, ...) the upsample ops as extra targets,
so an upsample and the ops sharing qparams with it (the U-Net's skip `cat`)
get one set of qparams. The program then runs `aten::upsample_nearest2d` on
int8 data (firmware/ops/aten_resize.c).
"""

from __future__ import annotations

from typing import Any

import torch

from emlkit.passes.graph import QuantizerHook
from emlkit.passes.manager import declare

aten = torch.ops.aten
UPSAMPLE = [aten.upsample_nearest2d.vec, aten.upsample_nearest2d.default]


@declare("quantizer_hook", ("aten.upsample_nearest2d",), runs_after=("Int8MatmulOnU55",),
         runs_before=("ActivationAlone", "SymmetricWeightRange"), order=130, flows=("cortex_m",))
class UpsampleSharedQparams(QuantizerHook):
    # Cortex-M only: the Arm quantizer already shares qparams over upsampling.
    report_name = "shared_qspec_targets_added"

    def configure(self, quantizer: Any, target: Any) -> Any:
        from executorch.backends.arm.quantizer.arm_quantizer_utils import SharedQspecQuantizer

        parts = getattr(quantizer, "quantizers", None)
        if parts is None:
            return quantizer
        for i, q in enumerate(parts):
            if type(q) is SharedQspecQuantizer:
                extra = [op for op in UPSAMPLE if op not in q.targets]
                parts[i] = SharedQspecQuantizer(targets=list(q.targets) + extra)
                self.done = [str(op) for op in extra]
        return quantizer
