"""int8_layer_norm.py: dq -> layer_norm -> q in the Cortex-M program -> emlkit::quantized_layer_norm."""

from __future__ import annotations

import pytest
import torch

from emlkit.errors import AotError
from emlkit.passes.int8_layer_norm import Int8LayerNorm
from pass_graphs import assert_pipelines, installed, lowered, program_ops


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 8))


def test_layer_norm_lowered_to_integer_op() -> None:
    low, opts = lowered(_model(), torch.randn(4, 16), "cortex-m55")
    assert len(installed(opts, Int8LayerNorm).replaced) == 1
    ops = program_ops(low)
    assert any("quantized_layer_norm" in op for op in ops) and not any("native_layer_norm" in op for op in ops)
    with pytest.raises(AotError, match="float op"):  # without it the layer norm stays float: refused
        lowered(_model(), torch.randn(4, 16), "cortex-m55", drop=("Int8LayerNorm",))


def test_pipelines() -> None:
    assert_pipelines(Int8LayerNorm, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128",))
