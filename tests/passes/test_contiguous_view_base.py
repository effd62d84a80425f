"""contiguous_view_base.py: a view_copy of a non-contiguous (channels-last) tensor reads a contiguous copy."""

from __future__ import annotations

from pathlib import Path

from emlkit.load import load_model
from emlkit.passes.contiguous_view_base import ContiguousViewBase
from pass_graphs import assert_pipelines, installed, lowered

REPRO = Path(__file__).parents[1] / "data" / "fuzz_repros" / "cortex_m55_reshape_roundtrip_mismatch.py"


def test_channels_last_view_gets_contiguous_base() -> None:
    model = load_model(str(REPRO))
    low, opts = lowered(model.module, model.inputs[0], "cortex-m55")
    copied = installed(opts, ContiguousViewBase).report()["copied"]
    assert copied
    assert low.extra["contiguous_view_base"] == {"copied": copied}


def test_pipelines() -> None:
    assert_pipelines(ContiguousViewBase, on=("cortex-m55", "ethos-u55-128"))
