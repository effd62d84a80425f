"""channels_last_everywhere.py: a channels-last copy after any op whose 4-D output is not channels-last
(default Cortex-M flow; not with the explicit layout, not on Ethos-U)."""

from __future__ import annotations

import torch

from emlkit.passes.channels_last_everywhere import ChannelsLastEverywhere
from pass_graphs import assert_pipelines, bound, graph_of

aten = torch.ops.aten


class _Permuted(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x).permute(0, 1, 3, 2))


def _copies(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.target == aten.clone.default
            and n.kwargs.get("memory_format") is torch.channels_last]


def test_permute_output_copied_channels_last() -> None:
    m, x = _Permuted().eval(), torch.randn(1, 3, 6, 5)
    gm = graph_of(m, x)
    p = bound(ChannelsLastEverywhere(), "cortex-m55")
    out = p(gm)
    assert p.report()["copied"] and len(_copies(out)) == len(p.report()["copied"])
    got = out(x)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, m(x))


def test_pipelines() -> None:
    assert_pipelines(ChannelsLastEverywhere, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128",))
    assert_pipelines(ChannelsLastEverywhere, on=(), off=("cortex-m55",), explicit_layout=True)
