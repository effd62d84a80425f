"""npu_bag_outputs.py: on the int8 Ethos-U targets an embedding bag's values get an int8 output of their own, so
emlkit_embedding_bag.py lowers bags into a cat that the partitioner leaves on the CPU."""

from __future__ import annotations

import torch

from emlkit.passes.npu_bag_outputs import NpuBagOutputs
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class _BagsIntoCat(torch.nn.Module):
    """Two bags into a cat: the cat shares its inputs' qparams, and no reader quantizes the bags' values."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.EmbeddingBag(10, 6, mode="mean"), torch.nn.EmbeddingBag(10, 6, mode="sum")

    def forward(self, idx: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.a(idx, offsets), self.b(idx, offsets)], dim=1)


INPUTS = (torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4]))


def _bags(low: object) -> list[str]:
    return [o for o in program_ops(low) if "embedding_bag" in o]


def test_bags_into_a_cat_lowered_on_the_cpu() -> None:
    low, opts = lowered(_BagsIntoCat(), INPUTS, "ethos-u55-128")
    assert len(installed(opts, NpuBagOutputs).done) == 2
    ops = _bags(low)
    assert len(ops) == 2 and all("emlkit.embedding_bag" in o for o in ops), ops


def test_without_the_hook_the_bags_stay_float() -> None:
    low, _ = lowered(_BagsIntoCat(), INPUTS, "ethos-u55-128", drop=("NpuBagOutputs",), allow_float=True)
    ops = _bags(low)
    assert len(ops) == 2 and not any("emlkit.embedding_bag" in o for o in ops), ops


def test_pipelines() -> None:
    assert_pipelines(NpuBagOutputs, on=("ethos-u55-128", "ethos-u85-256"), off=("cortex-m55", "ethos-u55-128-a16w8"))
