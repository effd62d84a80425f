"""Issue 7 models compile for cortex-m55 with no float islands and stay close to the float model."""

from __future__ import annotations

import pytest
import torch

from aot import models, numerics, reference
from aot.compile import make_options
from aot.lower import cortex_m
from aot.targets import get_target

M55 = get_target("cortex-m55")

# SNR floors (dB): int8 activations give ~6 dB/bit * 8 bits minus the loss of a few chained
# requantizations; every model here measured 36-56 dB, the floors leave ~6 dB of margin.
CASES = {"conv_hardsigmoid": 45.0, "relu6_net": 35.0, "scalar_arith": 32.0, "fc_autoencoder": 28.0,
         "global_avgpool": 36.0}


@pytest.mark.parametrize("name", list(CASES))
def test_cortex_m_int8_no_float_islands(name: str) -> None:
    zm = models.build(name)
    with torch.no_grad():
        low = cortex_m.lower(zm.module, zm.inputs, [zm.inputs], M55, make_options(allow_float=False))
        out = reference.run_lowered(low.edge, low.inputs)
        ref = numerics.flatten_outputs(zm.module(*zm.inputs))
    assert low.extra["verify"]["float_islands"] == []
    assert low.extra["verify"]["quantized_op_coverage"] == 1.0
    assert numerics.compare(ref, out)[0]["snr_db"] >= CASES[name]


@pytest.mark.xfail(strict=True, reason="attn @ v with a Linear operand: ExecuTorch's ReplaceScalarWithTensorArgPass "
                                       "retraces the int8 bmm with an int32 operand; not fixed yet")
def test_attention_compiles_for_cortex_m() -> None:
    zm = models.build("attention")
    with torch.no_grad():
        cortex_m.lower(zm.module, zm.inputs, [zm.inputs], M55, make_options(allow_float=False))
