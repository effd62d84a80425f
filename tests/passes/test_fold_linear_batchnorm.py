"""emlkit/passes/fold_linear_batchnorm.py: Linear + BatchNorm1d -> one Linear with the same values (Cortex-M);
the Ethos-U flow keeps the BatchNorm (the Arm flow folds it itself)."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.fold_linear_batchnorm import FoldLinearBatchNorm
from pass_graphs import assert_pipelines, bound, called, graph_of

aten = torch.ops.aten


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.BatchNorm1d(4)).eval()
    m[1].running_mean.uniform_(-1, 1)
    m[1].running_var.uniform_(0.5, 2)
    return m


@pytest.mark.parametrize("target, folds", [("cortex-m55", True), ("ethos-u55-128", False)])
def test_batchnorm_folded_on_cortex_m_only(target: str, folds: bool) -> None:
    m, x = _model(), torch.randn(3, 6)
    gm = graph_of(m, x)
    p = bound(FoldLinearBatchNorm(), target)
    out = p(gm)
    has_bn = any("batch_norm" in str(t) for t in called(out))
    assert has_bn != folds and bool(p.report()["folded"]) == folds
    got = out(x)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, m(x), rtol=1e-5, atol=1e-5)


def test_pipelines() -> None:
    assert_pipelines(FoldLinearBatchNorm, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128",))
