"""emlkit_embedding_bag.py: embedding_bag in sum, mean and max mode (padding_idx, include_last_offset, an empty bag)
-> emlkit::embedding_bag on Cortex-M, no float op left, within a few output steps of torch's float bags (the table
is quantized with its own range, the mean through a Q16 reciprocal); include_last_offset outside mode sum without
padding_idx keeps the float op (torch's kernel does not stop its last bag at the last offset there); the table's
qparams cover its range."""

from __future__ import annotations

import pytest
import torch

from emlkit import reference
from emlkit.passes.emlkit_embedding_bag import EmlkitEmbeddingBag, table_qparams
from pass_graphs import assert_pipelines, installed, lowered, program_ops

IDX = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 11, 7])
OFF = torch.tensor([0, 4, 4, 9])


class _Bag(torch.nn.Module):
    def __init__(self, mode: str, last: bool = False, pad: int | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.bag = torch.nn.EmbeddingBag(12, 6, mode=mode, include_last_offset=last, padding_idx=pad)

    def forward(self, idx: torch.Tensor, off: torch.Tensor) -> torch.Tensor:
        return self.bag(idx, off)


@pytest.mark.parametrize("mode, last, pad", [("mean", False, None), ("sum", False, 0), ("max", False, None),
                                             ("sum", True, None), ("mean", False, 4)])
def test_embedding_bag_lowered(mode: str, last: bool, pad: int | None) -> None:
    model = _Bag(mode, last, pad)
    low, opts = lowered(model, (IDX, OFF), "cortex-m55")
    assert installed(opts, EmlkitEmbeddingBag).report()["rewritten"]
    assert any("emlkit.embedding_bag" in o for o in program_ops(low))
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    (a,) = reference.run_lowered(low.edge, (IDX, OFF))
    want = model(IDX, OFF)
    step = [float(n.args[1]) for n in low.quantized.graph.nodes if n.op == "call_function"
            and n.target is torch.ops.quantized_decomposed.dequantize_per_tensor.default][-1]
    s_w = table_qparams(model.bag.weight.detach())[0]
    assert a.shape == want.shape
    # each table entry is within s_w / 2 of its float value: a sum of n entries within n * s_w / 2, then one rounding
    n = max(int((OFF[1:] - OFF[:-1]).max()), len(IDX) - int(OFF[-1]))
    bound = (n if mode == "sum" else 1) * s_w / 2 + step / 2 + (step if mode == "mean" else 0)
    assert (a - want).abs().max() <= bound * (1 + 1e-5)


@pytest.mark.parametrize("mode, pad", [("max", None), ("mean", 4), ("mean", None), ("sum", 4)])
def test_last_offset_torch_reads_past_keeps_the_float_op(mode: str, pad: int | None) -> None:
    low, opts = lowered(_Bag(mode, last=True, pad=pad), (IDX, OFF), "cortex-m55", allow_float=True)
    assert installed(opts, EmlkitEmbeddingBag).report()["rewritten"] == []
    assert any("embedding_bag" in f["op"] for f in low.extra["verify"]["float_islands"])


def test_table_qparams_cover_the_range() -> None:
    for w in (torch.tensor([[-1.0, 3.0]]), torch.tensor([[0.5, 2.0]]), torch.tensor([[-4.0, -0.25]])):
        s, zp = table_qparams(w)
        codes = torch.clamp(torch.round(w / s) + zp, -128, 127)
        assert ((codes - zp) * s - w).abs().max() <= s / 2 + 1e-6


def test_pipelines() -> None:
    assert_pipelines(EmlkitEmbeddingBag, on=("cortex-m55", "cortex-m4", "cortex-m0plus"), off=("ethos-u55-128",))
