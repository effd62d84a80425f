"""The fit check's fallback (emlkit/fit_search.py): a program whose arena does not fit the board's RAM is compiled
again with its first stages in row bands, cheapest first; the first count that fits is kept, else one error line
names the shortfall."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from emlkit import fit_search
from emlkit.patch_bands import PATCH_AUTO
from toolchain import needs_gcc, needs_qemu

# --------------------------------------------------------------- the search, on made-up compiles

RAM = 100_000
EXTRA = 20_000  # what the memory holds besides the arena (runtime, scratch, output copy)


def _fit(arena: int) -> dict[str, Any]:
    need = arena + EXTRA
    return {"checked": True, "board": "b", "fits": need <= RAM,
            "memories": [{"memory": "ram", "size": RAM, "need": need, "fits": need <= RAM,
                          "parts": {"arenas": arena, "runtime": EXTRA}}]}


# bands -> (extra MACs %, estimated arena, compiled arena)
TABLE = {2: (5.0, 95_000, 96_000), 3: (3.0, 85_000, 84_000), 4: (8.0, 70_000, 70_000), 5: (12.0, 70_000, 69_000)}


def _result(bands: int, auto: bool) -> Any:
    ps: dict[str, Any] = {"patch_bands": bands, "rows_computed": 0, "rows_whole_map": 0}
    if auto:
        ps["auto"] = {"chose": bands or "off", "why": "made up", "extra_macs_pct": TABLE[bands][0] if bands else 0.0,
                      "tried": {b: {"extra_macs_pct": e, "arena_estimate": a} for b, (e, a, _) in TABLE.items()}}
    arena = TABLE[bands][2] if bands else 120_000
    return SimpleNamespace(report={"memory": {"arena_total": arena}, "patch_stages": ps}, bands=bands)


def _run(first_bands: int = 0, auto_choice: int = 3) -> tuple[fit_search.Search, list[int]]:
    compiled: list[int] = []

    def compile_with(bands: int, folder: Path) -> Any:
        compiled.append(bands)
        return _result(auto_choice if bands == PATCH_AUTO else bands, bands == PATCH_AUTO)

    first = _result(first_bands, False)
    return fit_search.search(first, _fit(first.report["memory"]["arena_total"]), compile_with,
                             lambda r: _fit(r.report["memory"]["arena_total"]), Path("unused")), compiled


def test_the_cheapest_count_that_fits_is_chosen() -> None:
    # 3 bands (+3%): 84,000 + 20,000 > 100,000; 2 bands (+5%) is estimated no lower than 3: skipped; 4 (+8%) fits
    s, compiled = _run()
    assert compiled == [PATCH_AUTO, 4]
    assert s.chosen is not None and s.chosen.bands == 4 and s.chosen.fits
    assert [(c.bands, c.fits) for c in s.tried] == [(0, False), (3, False), (4, True)]
    line = fit_search.summary_line("m (t)", "b", s)
    assert "arena whole map 120,000 B" in line and "3 bands 84,000 B (+3.0% MACs, does not fit)" in line
    assert line.endswith("chose --patch-stages 4, the fewest extra MACs that fit")


def test_nothing_fits_names_the_shortfall() -> None:
    global RAM
    old, RAM = RAM, 80_000
    try:
        s, compiled = _run()
    finally:
        RAM = old
    # 4 bands fails at 70,000 estimated: 5, estimated the same, is not compiled
    assert compiled == [PATCH_AUTO, 4] and s.chosen is None
    line = fit_search.error_line("m (t)", "b", s)
    assert "\n" not in line and "short by 10,000 B at best, with 4 bands (arena 70,000 B)" in line
    assert "ram needs 90,000 B, has 80,000 B" in line and "use a board with 10,000 B more RAM" in line


def test_a_model_without_a_chain_says_so() -> None:
    first = _result(0, False)

    def compile_with(bands: int, folder: Path) -> Any:
        r = _result(0, False)
        r.report["patch_stages"]["auto"] = {"chose": "off", "why": "no high-resolution chain with a single exit"}
        return r

    s = fit_search.search(first, _fit(120_000), compile_with, lambda r: _fit(120_000), Path("unused"))
    assert s.chosen is None and "no high-resolution chain" in s.why_not
    assert fit_search.error_line("m (t)", "b", s) == (
        "m (t) does not fit b: ram needs 140,000 B, has 100,000 B; short by 40,000 B (the first stages cannot run "
        "in bands (no high-resolution chain with a single exit)); use a board with 40,000 B more RAM or a smaller model")
    # compiled with auto already: its entry says there is no chain, and nothing is compiled again
    auto_first = _result(0, False)
    auto_first.report["patch_stages"]["auto"] = {"chose": "off", "why": "no high-resolution chain with a single exit"}
    s = fit_search.search(auto_first, _fit(120_000), lambda b, f: pytest.fail("compiled again"),
                          lambda r: _fit(120_000), Path("unused"))
    assert s.chosen is None and "no high-resolution chain" in s.why_not


def test_only_an_arena_shortfall_searches() -> None:
    assert fit_search.arena_short(_fit(120_000))
    assert not fit_search.arena_short(_fit(50_000))
    code = _fit(50_000)
    code.update(fits=False, memories=[{"memory": "flash", "size": 1, "need": 2, "fits": False, "parts": {"code": 2}}])
    assert not fit_search.arena_short(code)


# --------------------------------------------------------------- mobilenet_v2 on a board just too small for it


def _small_corstone(isram: int) -> Any:
    """corstone-300 with its arenas in ISRAM only, of ISRAM bytes (the image is corstone-300's)."""
    from emlkit.deploy.boards import load_board

    b = load_board("corstone-300")
    mems = tuple(dataclasses.replace(m, size=isram) if m.name == "isram" else m for m in b.memories)
    return dataclasses.replace(b, memories=mems, arena_regions=("isram",))


@needs_gcc
@pytest.mark.slow
def test_mobilenet_v2_falls_back_to_bands(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Compiled whole (`--patch-stages off`), mobilenet_v2's ISRAM needs 224,280 B (arena 142,704 B); on a board
    with 216 KiB the fallback keeps the band count of fewest extra MACs that fits; on 128 KiB nothing fits."""
    from emlkit.commands import compile_cmd
    from emlkit.compile import make_options
    from emlkit.errors import AotError
    from emlkit.requests import CompileRequest, ProgramSpec
    from emlkit.targets import get_target

    spec = ProgramSpec("mobilenet_v2", get_target("cortex-m55"), None, make_options(patch_bands=0))
    with caplog.at_level(logging.INFO, logger="emlkit"):
        assert compile_cmd(CompileRequest(spec, tmp_path, _small_corstone(216 << 10))) == 0
    import json

    report = json.loads((tmp_path / "mobilenet_v2_cortex-m55.json").read_text())
    search = report["fit_search"]
    fitting = [t for t in search["tried"] if t["fits"]]
    assert search["tried"][0] == {"bands": 0, "arena": 142_704, "extra_macs_pct": 0.0, "fits": False,
                                  "shortfall": 224_280 - (216 << 10)}
    # auto's count (3: the least estimated arena) fits, and so does 2, for fewer extra MACs: 2 is kept
    chosen = min(fitting, key=lambda t: t["extra_macs_pct"])
    assert chosen["bands"] == search["chose"] == report["patch_stages"]["patch_bands"] == 2 and report["fit"]["fits"]
    assert report["memory"]["arena_total"] == chosen["arena"] < 142_704
    line = next(r.getMessage() for r in caplog.records if "chose --patch-stages 2" in r.getMessage())
    assert "arena whole map 142,704 B" in line and "3 bands 110,592 B" in line

    caplog.clear()
    with pytest.raises(AotError) as err:
        compile_cmd(CompileRequest(spec, tmp_path, _small_corstone(128 << 10)))
    assert err.value.exit_code == 4
    msg = str(err.value)
    assert "\n" not in msg and "does not fit corstone-300, even with its first stages in bands" in msg
    assert "more RAM or a smaller model" in msg
    short = int(msg.split("short by ")[1].split(" B")[0].replace(",", ""))
    assert 0 < short < 224_280 - (128 << 10)  # the bands took some of the whole map's shortfall away


def _wide_patch_chain(tmp_path: Path) -> Any:
    """tests/models/patch_chain.py at 96x64, compiled whole: 159,968 B of ISRAM (arena 147,584 B)."""
    from emlkit.compile import make_options
    from emlkit.requests import ProgramSpec
    from emlkit.targets import get_target

    src = (Path(__file__).parent / "models" / "patch_chain.py").read_text()
    model = tmp_path / "patch_chain_wide.py"
    model.write_text(src.replace("(1, 3, 40, 24)", "(1, 3, 96, 64)"))
    return ProgramSpec(str(model), get_target("cortex-m55"), None, make_options(patch_bands=0))


@needs_qemu
def test_run_falls_back_to_bands_and_runs_bit_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`run` takes the same fallback as `compile`: on 128 KiB of ISRAM the wide patch chain runs in 2 bands,
    bit-exact."""
    import json

    from emlkit.requests import RunRequest
    from emlkit.run import run_model

    spec = _wide_patch_chain(tmp_path)
    assert run_model(RunRequest(spec, tmp_path / "o", _small_corstone(128 << 10), sim="qemu")) == 0
    report = json.loads((tmp_path / "o" / "patch_chain_wide_cortex-m55.json").read_text())
    assert report["fit_search"]["tried"][0]["bands"] == 0 and not report["fit_search"]["tried"][0]["fits"]
    assert report["fit_search"]["chose"] == report["patch_stages"]["patch_bands"] == 2 and report["fit"]["fits"]
    out = capsys.readouterr().out
    assert "PASS" in out and "0 steps" in out


@needs_qemu
@pytest.mark.slow
def test_run_that_fits_in_no_band_count_says_so(tmp_path: Path) -> None:
    """On 64 KiB no band count fits: `run` says by how much it is short (exit 4) and runs nothing."""
    from emlkit.errors import AotError
    from emlkit.requests import RunRequest
    from emlkit.run import run_model

    with pytest.raises(AotError) as err:
        run_model(RunRequest(_wide_patch_chain(tmp_path), tmp_path / "o2", _small_corstone(64 << 10), sim="qemu"))
    assert err.value.exit_code == 4 and "\n" not in str(err.value)
    assert "even with its first stages in bands" in str(err.value)


def test_band_compiles_keep_every_other_choice() -> None:
    """The fallback's compiles change only the band count: every choice make_options takes is carried over."""
    import inspect

    from emlkit.compile import CHOICES, make_options, options_like

    assert tuple(inspect.signature(make_options).parameters) == CHOICES
    base = make_options(lut_fusion=False, allow_float=True, linear_mode="auto", streaming_state=True, io="int8")
    again = options_like(base, patch_bands=3)
    assert [getattr(again, c) for c in CHOICES if c != "patch_bands"] == \
        [getattr(base, c) for c in CHOICES if c != "patch_bands"] and again.patch_bands == 3
