"""emlkit_embedding_bag.py: embedding_bag in sum, mean and max mode (padding_idx, include_last_offset, an empty bag,
per-sample weights given or computed, bags feeding a cat) -> emlkit::embedding_bag on Cortex-M, no float op left,
within a few output steps of torch's float bags (the table is quantized with its own range, the mean through a Q16
reciprocal); include_last_offset outside mode sum without padding_idx: int8 when the last offset is len(indices)
(torch's documented end), one clear refusal for any other (torch's kernel reads past it); the table's qparams cover
its range. On Ethos-U, the bags the partitioner leaves on the CPU, read through the int32 copies of their indices."""

from __future__ import annotations

import pytest
import torch

from emlkit import reference
from emlkit.errors import EXIT_UNSUPPORTED, AotError
from emlkit.passes.emlkit_embedding_bag import EmlkitEmbeddingBag, table_qparams
from pass_graphs import assert_pipelines, installed, lowered, program_ops

IDX = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 11, 7])
OFF = torch.tensor([0, 4, 4, 9])
OFF_END, OFF_SHORT = torch.tensor([0, 4, 4, 9, 11]), torch.tensor([0, 4, 4, 9, 10])  # last offset len(IDX), or not
PSW = torch.rand(11, generator=torch.Generator().manual_seed(3)) * 2 - 0.5


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


def _out_step(low: object) -> float:
    return [float(n.args[1]) for n in low.quantized.graph.nodes if n.op == "call_function"  # type: ignore[attr-defined]
            and n.target is torch.ops.quantized_decomposed.dequantize_per_tensor.default][-1]


@pytest.mark.parametrize("mode, pad", [("max", None), ("mean", 4), ("mean", None), ("sum", 4)])
def test_last_offset_outside_sum_int8_at_the_documented_end(mode: str, pad: int | None) -> None:
    model = _Bag(mode, last=True, pad=pad)
    low, opts = lowered(model, (IDX, OFF_END), "cortex-m55")
    assert installed(opts, EmlkitEmbeddingBag).report()["rewritten"]
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    (a,) = reference.run_lowered(low.edge, (IDX, OFF_END))
    s_w = table_qparams(model.bag.weight.detach())[0]
    n = 5 if mode == "sum" else 1
    assert (a - model(IDX, OFF_END)).abs().max() <= (n * s_w / 2 + 1.5 * _out_step(low)) * (1 + 1e-5)
    # a last offset short of len(indices): torch reads on past it there, the op refuses with one line
    with pytest.raises(AotError) as err:
        reference.run_lowered(low.edge, (IDX, OFF_SHORT))
    assert err.value.exit_code == EXIT_UNSUPPORTED
    msg = str(err.value)
    assert msg.startswith("emlkit::embedding_bag at ") and "\n" not in msg
    assert "the last offset to be len(indices) = 11, not 10" in msg and "end the offsets with len(indices)" in msg


class _Weighted(torch.nn.Module):
    """Per-sample weights as an input and computed (a sigmoid of them), constant ones, and two bags into a cat."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.EmbeddingBag(12, 6, mode="sum")
        self.b = torch.nn.EmbeddingBag(12, 6, mode="sum", padding_idx=4)
        self.m = torch.nn.EmbeddingBag(12, 6, mode="mean")
        self.register_buffer("fixed", torch.linspace(-1.0, 2.0, 11))

    def forward(self, idx: torch.Tensor, off: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (self.a(idx, off, per_sample_weights=w), self.b(idx, off, per_sample_weights=torch.sigmoid(w * 3)),
                self.a(idx, off, per_sample_weights=self.fixed), torch.cat([self.b(idx, off), self.m(idx, off)], 1))


def test_per_sample_weights_and_cat() -> None:
    model = _Weighted()
    low, opts = lowered(model, (IDX, OFF, PSW), "cortex-m55")
    assert len(installed(opts, EmlkitEmbeddingBag).report()["rewritten"]) == 5
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    got, want = reference.run_lowered(low.edge, (IDX, OFF, PSW)), model(IDX, OFF, PSW)
    for a, b in zip(got, want):
        # a few steps: each table entry and weight is within half a step of its value, and the sums add those up
        assert a.shape == b.shape and (a - b).abs().max() <= 0.1 * b.abs().max(), (a - b).abs().max()
    snr = [10 * torch.log10(b.pow(2).mean() / (a - b).pow(2).mean()) for a, b in zip(got, want)]
    assert min(snr) >= 30.0, snr


def test_table_qparams_cover_the_range() -> None:
    for w in (torch.tensor([[-1.0, 3.0]]), torch.tensor([[0.5, 2.0]]), torch.tensor([[-4.0, -0.25]])):
        s, zp = table_qparams(w)
        codes = torch.clamp(torch.round(w / s) + zp, -128, 127)
        assert ((codes - zp) * s - w).abs().max() <= s / 2 + 1e-6


def test_bag_left_on_the_cpu_of_an_npu_is_int8() -> None:
    """On Ethos-U the Arm flow feeds the bag int32 copies of its int64 indices and offsets: looked through, the bag the
    partitioner leaves on the CPU runs as emlkit::embedding_bag, and no aten bag is left."""
    low, opts = lowered(_Bag("mean"), (IDX, OFF), "ethos-u55-128")
    assert installed(opts, EmlkitEmbeddingBag).report()["rewritten"]
    ops = program_ops(low)
    assert any("emlkit.embedding_bag" in o for o in ops) and not any("aten._embedding_bag" in o for o in ops), ops


def test_pipelines() -> None:
    # on Ethos-U only for the bags the partitioner leaves on the CPU (manager.CPU_SIDE); int8 only
    assert_pipelines(EmlkitEmbeddingBag, on=("cortex-m55", "cortex-m4", "cortex-m0plus", "ethos-u55-128"),
                     off=("ethos-u55-128-a16w8",))
