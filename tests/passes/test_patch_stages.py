"""patch_stages.py: with --patch-stages N the high-resolution first stages run as N row bands whose outputs meet in
one concat; each band's rows equal the whole map's bit for bit, and the bands' maps take less arena."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from emlkit.lower import PATCH_AUTO
from emlkit.passes.patch_stages import MAX_EXTRA_MACS, PatchStages, _Conv
from pass_graphs import assert_pipelines, installed, lowered
from toolchain import needs_qemu

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "models" / "patch_chain.py"


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5), st.integers(1, 3), st.integers(0, 2), st.integers(1, 2), st.integers(6, 30), st.data())
def test_a_band_s_rows_are_the_whole_map_s(k: int, s: int, p: int, d: int, rows: int, data: Any) -> None:
    """Integer-valued convolutions (exact in float): the band form of output rows [a, z) (its input rows, H
    padding and the rows cut after it) gives the whole map's rows [a, z)."""
    span = (k - 1) * d + 1
    if p >= span:  # PyTorch computes it, but no model pads a window entirely
        return
    out_rows = (rows + 2 * p - span) // s + 1
    if out_rows < 1:
        return
    a = data.draw(st.integers(0, out_rows - 1))
    z = data.draw(st.integers(a + 1, out_rows))
    torch.manual_seed(k * 1000 + s * 100 + p * 10 + d)
    x = torch.randint(-8, 8, (1, 2, rows, 5)).float()
    w = torch.randint(-3, 4, (3, 2, k, 3)).float()
    whole = F.conv2d(x, w, stride=(s, 1), padding=(p, 1), dilation=(d, 1))
    i0, i1, pad, first, n = _Conv(k, s, p, d).band(a, z, rows)
    assert 0 <= i0 < i1 <= rows and pad in (0, p)
    part = F.conv2d(x[:, :, i0:i1], w, stride=(s, 1), padding=(pad, 1), dilation=(d, 1))
    assert part.shape[2] == n and first <= a and z <= first + n
    assert torch.equal(part[:, :, a - first:z - first], whole[:, :, a:z])


def _model() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    ns: dict[str, Any] = {}
    exec(compile(MODEL.read_text(), str(MODEL), "exec"), ns)  # noqa: S102 - our own test model
    return ns["ModelUnderTest"]().eval(), ns["ModelInputs"]


def _calls(low: Any) -> list[str]:
    gm = low.edge.exported_program().graph_module
    return [str(n.target).split(".")[1] for n in gm.graph.nodes if n.op == "call_function" and "." in str(n.target)]


@pytest.mark.parametrize("bands", [2, 3, 7])
def test_bands_compute_the_whole_map_s_outputs(bands: int) -> None:
    model, x = _model()
    whole, _ = lowered(model, x, "cortex-m55")
    low, opts = lowered(model, x, "cortex-m55", patch_bands=bands)
    rep = installed(opts, PatchStages).report()
    # stem, depthwise, pointwise, add, strided conv: the exit has 10 of the input's 40 rows.
    assert rep["patch_bands"] == bands and len(rep["patched_nodes"]) == 5
    assert rep["rows_computed"] > rep["rows_whole_map"] == 20 * 4 + 10
    calls = _calls(low)
    assert calls.count("quantized_depthwise_conv2d") == bands and calls.count("cat") == 1
    assert _calls(whole).count("quantized_depthwise_conv2d") == 1
    a = whole.edge.exported_program().module()(*whole.inputs)
    b = low.edge.exported_program().module()(*low.inputs)
    assert torch.equal(a, b)


def test_off_and_without_a_chain_nothing_changes() -> None:
    model, x = _model()
    low, opts = lowered(model, x, "cortex-m55")
    assert "cat" not in _calls(low) and not installed(opts, PatchStages).applicable
    # No map shrinks to a quarter of the input's rows: no exit, the program is the whole-map one.
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3, padding=1))
    low, opts = lowered(net, torch.randn(1, 3, 16, 16), "cortex-m55", patch_bands=4)
    assert installed(opts, PatchStages).report()["patch_bands"] == 0 and "cat" not in _calls(low)


def test_auto_leaves_a_chain_whose_halo_costs_over_the_limit() -> None:
    """patch_chain's 40-row input (measured: 2 bands +13% instructions for -6% arena, 3 bands +20%): the counts
    that take the chain down to the rest of the graph cost > 10% MACs, the cheaper one saves only partly."""
    model, x = _model()
    low, opts = lowered(model, x, "cortex-m55", patch_bands=PATCH_AUTO)
    rep = installed(opts, PatchStages).report()
    assert rep["patch_bands"] == 0 and "cat" not in _calls(low)
    auto, limit = rep["auto"], 100 * MAX_EXTRA_MACS
    assert auto["chose"] == "off" and auto["rest_of_graph_estimate"] < auto["arena_estimate_whole_map"]
    tried = auto["tried"]
    rest = auto["rest_of_graph_estimate"]
    assert tried[2]["extra_macs_pct"] <= limit < tried[3]["extra_macs_pct"]
    assert all(t["arena_estimate"] > rest for t in tried.values() if t["extra_macs_pct"] <= limit)
    assert min(t["arena_estimate"] for t in tried.values()) == rest
    assert "no band count within +10% MACs" in auto["why"]


def test_auto_patches_a_tall_input_where_the_halo_is_cheap() -> None:
    """The same layers over 160 rows: the halo is a few rows of 80, the full-resolution maps bound the arena, so
    auto patches with the count of least estimated arena within the limit, bit-identical to the whole map."""
    model, _ = _model()
    x = (torch.randn(1, 3, 160, 24),)
    whole, _ = lowered(model, x, "cortex-m55")
    low, opts = lowered(model, x, "cortex-m55", patch_bands=PATCH_AUTO)
    rep = installed(opts, PatchStages).report()
    auto = rep["auto"]
    bands = auto["chose"]
    assert bands != "off" and rep["patch_bands"] == bands and _calls(low).count("cat") == 1
    tried = auto["tried"]
    assert 0 < tried[bands]["extra_macs_pct"] == auto["extra_macs_pct"] <= 100 * MAX_EXTRA_MACS
    within = [t["arena_estimate"] for t in tried.values() if t["extra_macs_pct"] <= 100 * MAX_EXTRA_MACS]
    assert tried[bands]["arena_estimate"] == min(within) == auto["rest_of_graph_estimate"]
    assert min(within) < auto["arena_estimate_whole_map"]
    # More bands, more halo: the extra MACs grow with the count.
    pcts = [tried[b]["extra_macs_pct"] for b in sorted(tried)]
    assert pcts[-1] > pcts[0]
    a = whole.edge.exported_program().module()(*whole.inputs)
    b = low.edge.exported_program().module()(*low.inputs)
    assert torch.equal(a, b)


def test_pipelines() -> None:
    assert_pipelines(PatchStages, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128",), patch_bands=4)
    assert_pipelines(PatchStages, on=("cortex-m55", "cortex-m4"), off=("ethos-u55-128",), patch_bands=PATCH_AUTO)
    assert_pipelines(PatchStages, on=(), off=("cortex-m55",))


def test_the_cli_s_default_is_auto() -> None:
    from emlkit.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["compile", "m", "--target", "cortex-m55"]).patch_stages == PATCH_AUTO
    assert parse(["compile", "m", "--target", "cortex-m55", "--patch-stages", "off"]).patch_stages == 0
    assert parse(["run", "m", "--target", "cortex-m55", "--patch-stages", "5"]).patch_stages == 5


def test_a_bad_band_count_is_one_usage_line() -> None:
    p = subprocess.run([sys.executable, "-m", "emlkit", "compile", str(MODEL), "--target", "cortex-m55",
                        "--patch-stages", "1"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "'1' is not auto, off or a band count of 2 or more" in p.stderr
    assert "Traceback" not in p.stderr


# Slow cases: the quick pass runs a banded program bit-exact on the M55 in less arena through the fit check's
# fallback (tests/test_fit_search.py::test_run_falls_back_to_bands_and_runs_bit_exact).
@needs_qemu
@pytest.mark.slow
@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4"])
def test_bands_run_bit_exact_on_the_device_in_less_arena(tmp_path: Path, target: str) -> None:
    """The bands (MVE / DSP kernels, band outputs planned inside the concat) match the reference bit for bit,
    and the arena is smaller than the whole-map program's."""
    arenas = {}
    for bands in ("off", "3"):
        p = subprocess.run([sys.executable, "-m", "emlkit", "run", str(MODEL), "--target", target, "--patch-stages",
                            bands, "-o", str(tmp_path / bands)], capture_output=True, text=True, timeout=900)
        assert p.returncode == 0 and "PASS" in p.stdout, (p.stdout + p.stderr)[-2000:]
        line = next(ln for ln in p.stdout.splitlines() if "arena bytes" in ln)
        arenas[bands] = int(line.split("+")[-1].strip().replace(",", ""))
    assert arenas["3"] < arenas["off"]


def test_the_compile_summary_line() -> None:
    from emlkit.summary import patch_text

    why = "estimated arena 92160 -> 57600 B for +3.1% MACs"
    assert patch_text({"patch_stages": {"patch_bands": 3, "auto": {"chose": 3, "why": why}}}) == f"auto: 3 bands ({why})"
    assert patch_text({"patch_stages": {"patch_bands": 0, "auto": {"chose": "off", "why": "x"}}}) == "auto: off (x)"
    assert patch_text({"patch_stages": {"patch_bands": 4, "rows_computed": 99, "rows_whole_map": 90}}) == \
        "4 bands, 99 rows computed for 90"
    assert patch_text({}) is None and patch_text({"patch_stages": {"patch_bands": 0}}) is None
