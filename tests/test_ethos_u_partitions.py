"""emlkit/lower/ethos_u.py records each NPU partition (TOSA graph, Vela blob, Vela estimates) through public
ExecuTorch interfaces: the TOSA backend's intermediate dump and the delegates' processed_bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from emlkit.compile import make_options
from emlkit.lower import ethos_u
from emlkit.reference import delegate_names
from emlkit.targets import get_target
from executorch.exir.lowered_backend_module import get_lowered_submodules

pytest.importorskip("ethosu.vela")


class TwoPartitions(torch.nn.Module):
    """A sort (no NPU form) between two convolutions splits the graph into two delegates."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3)
        self.c2 = torch.nn.Conv2d(8, 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c2(torch.sort(torch.relu(self.c1(x)), dim=3).values)


def test_each_partition_has_its_own_graph_blob_and_estimates(tmp_path: Path) -> None:
    torch.manual_seed(0)
    x = (torch.randn(1, 3, 12, 12),)
    opts = make_options(allow_float=True)
    opts.intermediates = str(tmp_path / "vela")
    (tmp_path / "vela").mkdir()
    (tmp_path / "vela" / "output_tag7_stale.tosa").write_bytes(b"from an earlier compile")
    low = ethos_u.lower(TwoPartitions().eval(), x, [x], get_target("ethos-u55-128"), opts)
    parts = low.extra["vela_partitions"]
    gm = low.edge.exported_program().graph_module
    modules = get_lowered_submodules(gm)
    assert len(parts) == len(modules) == len(delegate_names(gm)) == 2
    for p, (_, module, _) in zip(parts, modules):
        assert p.blob == bytes(module.processed_bytes)
        assert p.tosa[4:8] == b"TOSA"          # flatbuffer file identifier
        assert int(p.summary["cycles_npu"]) > 0 and int(p.summary["nn_macs"]) > 0
    # Different layers: different graphs and different estimates (c1 has 3 input channels, c2 8).
    assert parts[0].tosa != parts[1].tosa
    assert parts[0].summary["nn_macs"] != parts[1].summary["nn_macs"]
    assert not (tmp_path / "vela" / "output_tag7_stale.tosa").exists()
    # Each partition's per-command NPU estimates come from its own Vela debug database (one recompiled).
    from emlkit.npu.perf import delegate_estimate

    for p in parts:
        est = delegate_estimate(p.blob, p.debug_db, "u55")
        assert est["cycles"] == int(p.summary["cycles_total"]) and est["unplaced"] == []
