"""fc_rows_as_pixels.py: on int16 (a16w8) Ethos-U targets a Linear over M > 1 rows -> a 1x1 conv over M
pixels (same float function); int8 targets and Cortex-M keep the Linear."""

from __future__ import annotations

import torch

from emlkit.passes.fc_rows_as_pixels import FcRowsAsPixels
from pass_graphs import assert_pipelines, bound, called, graph_of

aten = torch.ops.aten


def test_rows_become_pixels() -> None:
    torch.manual_seed(0)
    m, x = torch.nn.Linear(8, 4).eval(), torch.randn(3, 8)
    p = bound(FcRowsAsPixels(), "ethos-u55-128-a16w8")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1
    ops = called(gm)
    assert aten.conv2d.default in ops and aten.linear.default not in ops
    got = gm(x)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, m(x), rtol=1e-5, atol=1e-5)


def test_one_row_kept() -> None:
    p = bound(FcRowsAsPixels(), "ethos-u55-128-a16w8")
    gm = p(graph_of(torch.nn.Linear(8, 4), torch.randn(1, 8)))
    assert p.report()["rewritten"] == [] and aten.linear.default in called(gm)


def test_pipelines() -> None:
    assert_pipelines(FcRowsAsPixels, on=("ethos-u55-128-a16w8",), off=("ethos-u55-128", "ethos-u85-256", "cortex-m55"))
