"""drop_layout_round_trips.py: layout copies that undo each other or change nothing leave the Cortex-M program; the
program computes the same codes."""

from __future__ import annotations

import torch

from emlkit.passes.drop_layout_round_trips import DropLayoutRoundTrips
from pass_graphs import assert_pipelines, installed, lowered, program_ops


class MaskedAttention(torch.nn.Module):
    """nn.MultiheadAttention with a causal mask and a key padding mask from the input: its reshapes between the
    batch matmuls meet the channels-last copies."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = x[..., -1] > 0.5
        causal = torch.nn.Transformer.generate_square_subsequent_mask(8)
        return self.mha(x, x, x, attn_mask=causal, key_padding_mask=pad, need_weights=False)[0]


def _input() -> torch.Tensor:
    x = torch.randn(1, 8, 16, generator=torch.Generator().manual_seed(1))
    x[..., -1] = 0.0
    x[0, 6:, -1] = 1.0
    return x


def _copies(low) -> int:  # noqa: ANN001
    return sum("_clone_dim_order" in op for op in program_ops(low))


def test_round_trips_removed_and_the_codes_are_the_same() -> None:
    from emlkit import reference

    x = _input()
    low, opts = lowered(MaskedAttention(), (x,), "cortex-m55")
    removed = installed(opts, DropLayoutRoundTrips).report()["removed"]
    kept, _ = lowered(MaskedAttention(), (x,), "cortex-m55", drop=("DropLayoutRoundTrips",))
    assert len(removed) >= 6 and _copies(kept) - _copies(low) == len(removed), (removed, _copies(kept))
    (a,), (b,) = reference.run_lowered(low.edge, (x,)), reference.run_lowered(kept.edge, (x,))
    assert torch.equal(a, b)
    assert low.extra["verify"]["broken"] == []


def test_pipelines() -> None:
    assert_pipelines(DropLayoutRoundTrips, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
