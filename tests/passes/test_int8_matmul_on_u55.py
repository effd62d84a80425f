"""int8_matmul_on_u55.py: on int16 (a16w8) Ethos-U55/U65 targets the quantizer takes bmm/mm/matmul in int8."""

from __future__ import annotations

import torch

from emlkit.passes.int8_matmul_on_u55 import MATMULS, Int8MatmulOnU55
from pass_graphs import QKScores, assert_pipelines, installed, lowered


def test_matmuls_quantized_int8() -> None:
    low, opts = lowered(QKScores(), torch.randn(1, 8, 16), "ethos-u55-128-a16w8")
    assert installed(opts, Int8MatmulOnU55).done == [str(op) for op in MATMULS]
    mm = [n for n in low.quantized.graph.nodes if n.op == "call_function" and n.target in MATMULS]
    assert mm and all(a.args[-1] == torch.int8 for n in mm for a in n.args)  # int8 dequantize inputs


def test_pipelines() -> None:
    assert_pipelines(Int8MatmulOnU55, on=("ethos-u55-128-a16w8",), off=("ethos-u55-128", "ethos-u85-256", "cortex-m55"))
