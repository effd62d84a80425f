"""conv_transpose_output_padding.py: ConvTranspose2d/1d with output_padding (below, equal to and above the padding,
with dilation) become an unpadded transposed convolution (zero taps appended where output_padding passes the
padding) and a crop: the exported graph computes the same function, and the Cortex-M program has no float op and is
within 1 int8 step of the program that runs the float op between the same qparams."""

from __future__ import annotations

import pytest
import torch

from emlkit import reference
from emlkit.passes.conv_transpose_output_padding import ConvTransposeOutputPadding
from pass_graphs import assert_pipelines, bound, called, graph_of, installed, lowered, program_ops

CASES = [  # (in, out, kernel, stride, padding, output_padding, dilation)
    (3, 4, 3, 2, 1, 1, 1), (3, 2, (3, 2), (3, 2), 0, (2, 1), 1), (2, 3, 3, 3, 2, 1, 1), (3, 2, 2, 3, 0, 2, 2),
]


def _layer(c: tuple) -> torch.nn.ConvTranspose2d:
    torch.manual_seed(0)
    ci, co, k, s, p, op, d = c
    return torch.nn.ConvTranspose2d(ci, co, k, stride=s, padding=p, output_padding=op, dilation=d)


@pytest.mark.parametrize("case", CASES)
def test_same_function(case: tuple) -> None:
    layer = _layer(case).eval()
    x = torch.randn(1, case[0], 5, 6, generator=torch.Generator().manual_seed(1))
    gm = graph_of(layer, x)
    want = gm(x)
    p = bound(ConvTransposeOutputPadding(), "cortex-m55")
    p(gm)
    assert p.report()["rewritten"]
    assert all(n.args[5] == [0, 0] for n in gm.graph.nodes if n.target is torch.ops.aten.conv_transpose2d.input)
    assert torch.ops.aten.slice.Tensor in called(gm)
    got = gm(x)
    got, want = (got[0], want[0]) if isinstance(got, (tuple, list)) else (got, want)
    assert got.shape == want.shape and torch.allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("case", CASES[:2])
def test_lowered_within_one_step(case: tuple) -> None:
    layer = _layer(case)
    x = torch.randn(1, case[0], 5, 6, generator=torch.Generator().manual_seed(1))
    low, opts = lowered(layer, x, "cortex-m55")
    assert installed(opts, ConvTransposeOutputPadding).report()["rewritten"]
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    ref, _ = lowered(layer, x, "cortex-m55", drop=("ConvTransposeOutputPadding",), allow_float=True)
    assert ref.extra["verify"]["float_islands"]
    (a,), (b,) = reference.run_lowered(low.edge, (x,)), reference.run_lowered(ref.edge, (x,))
    step = [float(n.args[1]) for n in low.quantized.graph.nodes if n.op == "call_function"
            and n.target is torch.ops.quantized_decomposed.dequantize_per_tensor.default][-1]
    assert a.shape == b.shape == layer(x).shape
    assert (a - b).abs().max() <= step * (1 + 1e-5)
    assert any("transpose_conv" in o or "conv" in o for o in program_ops(low))


def test_pipelines() -> None:
    assert_pipelines(ConvTransposeOutputPadding, on=("cortex-m55", "cortex-m4", "cortex-m0plus"), off=("ethos-u55-128",))
