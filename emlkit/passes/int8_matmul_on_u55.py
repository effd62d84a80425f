"""Quantizer annotation: activation-by-activation matmuls in int8 on int16 (a16w8) Ethos-U55/U65 targets.

Targets `aten.bmm`, `aten.mm` and `aten.matmul` (q @ k^T, attn @ v) when the
target quantizes activations to int16 and its NPU is an Ethos-U55 or U65.

Why: ExecuTorch's Ethos-U55 operator support (EthosU55DtypeSupport) delegates
bmm/mm only with int8 inputs: the U55 runs a matmul of two feature maps as
elementwise and reduction steps with 8-bit inputs. With the a16w8 config the
Arm quantizer gives the matmul int16 inputs, the partitioner refuses it, and
it stays a float `aten::bmm` on the CPU (our verifier stops the compile).

What this does: sets the Arm quantizer's int8 config (the one the int8
targets use) for those op targets through its public `set_node_target`, so
each matmul reads int8 (the NPU rescales the int16 producers' outputs down
with a RESCALE) and writes int8 (rescaled up for int16 consumers). The rest of
the graph stays int16. Softmax and Linear layers around it keep their 16-bit
activations.
"""

from __future__ import annotations

from typing import Any

import torch

from emlkit.passes.graph import QuantizerHook
from emlkit.passes.manager import declare

MATMULS = (torch.ops.aten.bmm.default, torch.ops.aten.mm.default, torch.ops.aten.matmul.default)


@declare("quantizer_hook", ("aten.bmm", "aten.mm", "aten.matmul"),
         runs_before=("ActivationAlone", "SymmetricWeightRange"),
         order=120, flows=("ethos_u",), targets=("ethos-u55*", "ethos-u65*"), bits=("a16w8",))
class Int8MatmulOnU55(QuantizerHook):
    report_name = "int8_targets"

    def configure(self, quantizer: Any, target: Any) -> Any:
        from executorch.backends.arm.quantizer import get_symmetric_quantization_config

        int8 = get_symmetric_quantization_config(is_per_channel=True)
        for op in MATMULS:
            quantizer.set_node_target(op, int8)
            self.done.append(str(op))
        return quantizer
