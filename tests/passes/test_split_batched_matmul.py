"""emlkit/passes/split_batched_matmul.py: on Ethos-U85 a matmul of two feature maps with batch > 1 becomes one
batch-1 matmul per entry, concatenated (same values); the pass does not apply on U55 or Cortex-M."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.split_batched_matmul import SplitBatchedMatmul
from pass_graphs import assert_pipelines, bound, called, graph_of

aten = torch.ops.aten


class _Heads(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(1, 3, 4, 5, generator=g), torch.randn(1, 3, 5, 6, generator=g)


def _matmuls(gm: torch.fx.GraphModule) -> int:
    return sum(t in (aten.matmul.default, aten.bmm.default) for t in called(gm))


def test_u85_splits_per_batch_entry() -> None:
    a, b = _inputs()
    gm = graph_of(_Heads(), a, b)
    before = _matmuls(gm)
    p = bound(SplitBatchedMatmul(), "ethos-u85-256")
    out = p(gm)
    assert p.report()["rewritten"] and _matmuls(out) > before
    got = out(a, b)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, a @ b)


@pytest.mark.parametrize("target", ["ethos-u55-128", "cortex-m55"])
def test_not_applied_elsewhere(target: str) -> None:
    gm = graph_of(_Heads(), *_inputs())
    before = called(gm)
    p = bound(SplitBatchedMatmul(), target)
    assert not p.applicable
    assert called(p(gm)) == before and p.report() == {"rewritten": [], "skipped": []}


def test_pipelines() -> None:
    assert_pipelines(SplitBatchedMatmul, on=("ethos-u85-256",), off=("ethos-u55-128", "ethos-u65-256", "cortex-m55"))
