"""own_output_qparams.py: on Cortex-M softmax, and average pools feeding the final classifier, observe their
own output qparams (marked for the emlkit:: lowerings)."""

from __future__ import annotations

import torch

from emlkit.passes.graph import OWN_QPARAMS_KEY
from emlkit.passes.own_output_qparams import OwnOutputQparams, candidates
from pass_graphs import assert_pipelines, graph_of, installed, lowered


class _PoolHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1).flatten(1)
        return self.fc(y), torch.softmax(self.conv(x).flatten(1), dim=-1)   # a classifier head, a softmax


def test_softmax_and_classifier_pool_are_candidates() -> None:
    gm = graph_of(_PoolHead(), torch.randn(1, 3, 8, 8))
    assert sorted(str(n.target).split(".")[1] for n in candidates(gm)) == ["adaptive_avg_pool2d", "softmax"]


def test_annotated_and_marked() -> None:
    low, opts = lowered(_PoolHead(), torch.randn(1, 3, 8, 8), "cortex-m55")
    hook = installed(opts, OwnOutputQparams)
    assert len(hook.done) == 2
    assert low.extra["own_output_qparams"] == {"annotated": hook.done}
    assert OWN_QPARAMS_KEY == "emlkit_own_output_qparams"


def test_pipelines() -> None:
    assert_pipelines(OwnOutputQparams, on=("cortex-m55", "cortex-m3"), off=("ethos-u55-128", "ethos-u65-256"))
