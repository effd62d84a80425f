"""split_as_slices.py: split / chunk not on a Linear's output compile for Cortex-M as slices, bit-exact on QEMU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from emlkit.lower.export import export_graph
from emlkit.passes.split_as_slices import SplitAsSlices
from emlkit.passes.graph import SPLITS
from emlkit.targets import get_target
from pass_graphs import assert_pipelines

from model_files import module_source
from toolchain import needs_qemu


class _Cuts(torch.nn.Module):
    def __init__(self, form: str) -> None:
        super().__init__()
        self.form = form

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.form == "chunk":
            a, b = x.chunk(2, dim=1)
            return a * torch.sigmoid(b)
        if self.form == "split_sizes":
            p, q, r = torch.split(x, [1, 3, 2], dim=1)
            return torch.cat([r, p], dim=1) + 0.5        # q unread
        a, b, c = x.split(2, dim=-1)                     # equal pieces along the last dim
        return a - c


@pytest.mark.parametrize("form", ["chunk", "split_sizes", "split_last"])
def test_split_as_slices_keeps_float_function(form: str) -> None:
    mod = _Cuts(form).eval()
    x = torch.randn(1, 6, 4, 6)
    p = SplitAsSlices()
    p.set_target(get_target("cortex-m4"), None)
    gm = p(export_graph(mod, (x,)))
    assert len(p.report()["rewritten"]) == 1
    assert not [n for n in gm.graph.nodes if n.target in SPLITS]
    out = gm(x)
    torch.testing.assert_close(out[0] if isinstance(out, (tuple, list)) else out, mod(x))


def test_split_as_slices_is_cortex_m_only() -> None:
    p = SplitAsSlices()
    p.set_target(get_target("ethos-u55-128"), None)
    gm = p(export_graph(_Cuts("chunk").eval(), (torch.randn(1, 6, 4, 6),)))
    assert p.report()["rewritten"] == [] and [n for n in gm.graph.nodes if n.target in SPLITS]


_GATED = module_source("""
    self.c = nn.Conv2d(3, 16, 3, padding=1)
    self.d = nn.Conv2d(8, 4, 1)""", """
    a, b = self.c(x).chunk(2, dim=1)
    y = a * torch.sigmoid(b)
    p, q, r = torch.split(y, [2, 3, 3], dim=1)
    return self.d(torch.cat([r, p, q], dim=1))""", "torch.randn(1, 3, 8, 8)", name="Gated")


@needs_qemu
@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4"])
def test_gated_chunk_model_runs_bit_exact(tmp_path: Path, target: str) -> None:
    """A GLU-style `chunk` gate and a `split` into a cat: refused before (no split_with_sizes_copy kernel)."""
    from emlkit.compile import compile_model, make_options
    from emlkit.run import execute

    (tmp_path / "gated.py").write_text(_GATED)
    res = compile_model(str(tmp_path / "gated.py"), target, tmp_path / "o", options=make_options())
    assert len(res.report["split_as_slices"]["rewritten"]) == 2
    assert res.report["numerics"]["snr_db"] > 30
    o = execute(res, res.target.default_board, "qemu", 300, "mve", None)
    assert o.status == "PASS" and all(d.max_steps == 0 for d in o.result.outputs), o.reason


def test_pipelines() -> None:
    assert_pipelines(SplitAsSlices, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128", "ethos-u85-256"))
