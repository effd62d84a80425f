"""fold_input_offset.py: Cortex-M convolutions without padding get input_offset * sum(w) folded into their bias
(input offset 0 in the program)."""

from __future__ import annotations

import torch

from emlkit.passes.fold_input_offset import FoldInputOffset
from pass_graphs import assert_pipelines, installed, lowered


def _offsets(low: object) -> list[int]:
    gm = low.edge.exported_program().graph_module  # type: ignore[attr-defined]
    return [int(n.args[6]) for n in gm.graph.nodes if n.op == "call_function" and "quantized_conv2d" in str(n.target)]


def test_unpadded_conv_offset_folded() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 1), torch.nn.Conv2d(8, 4, 1))
    x = torch.randn(1, 3, 6, 6) + 1.0
    low, opts = lowered(net, x, "cortex-m55")
    folded = installed(opts, FoldInputOffset).done
    assert len(folded) == 2 and _offsets(low) == [0, 0]
    low2, _ = lowered(net, x, "cortex-m55", drop=("FoldInputOffset",))
    assert any(_offsets(low2))


def test_pipelines() -> None:
    assert_pipelines(FoldInputOffset, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
