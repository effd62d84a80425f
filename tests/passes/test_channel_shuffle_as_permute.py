"""channel_shuffle_as_permute.py: nn.ChannelShuffle as a view, a transpose and a reshape, so the shuffle moves int8
codes and the activation after it is a table (random model dec7b:1: a softplus after the shuffle was refused)."""

from __future__ import annotations

import torch
import torch.nn as nn

from emlkit import reference
from emlkit.passes.channel_shuffle_as_permute import ChannelShuffleAsPermute
from pass_graphs import installed, lowered


class Shuffle(nn.Module):
    def __init__(self, by_hand: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.c, self.s, self.by_hand = nn.Conv2d(4, 8, 1), nn.ChannelShuffle(4), by_hand

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c(x)
        y = y.view(1, 4, 2, 8, 6).transpose(1, 2).reshape(1, 8, 8, 6) if self.by_hand else self.s(y)
        return nn.functional.softplus(y, beta=1.684)


def test_shuffle_is_int8_and_equals_the_hand_written_one() -> None:
    x = torch.randn(1, 4, 8, 6, generator=torch.Generator().manual_seed(2))
    low, opts = lowered(Shuffle(False), x, "cortex-m55")
    assert installed(opts, ChannelShuffleAsPermute).report()["rewritten"]
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    ref, _ = lowered(Shuffle(True), x, "cortex-m55")
    (a,), (b,) = reference.run_lowered(low.edge, (x,)), reference.run_lowered(ref.edge, (x,))
    assert torch.equal(a, b)
    assert torch.equal(Shuffle(False)(x), Shuffle(True)(x))   # the rewrite is the op's definition


def test_shuffle_on_the_npu_target_leaves_no_float_op() -> None:
    x = torch.randn(1, 4, 8, 6, generator=torch.Generator().manual_seed(2))
    low, opts = lowered(Shuffle(False), x, "ethos-u55-128")
    assert installed(opts, ChannelShuffleAsPermute).report()["rewritten"]
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
