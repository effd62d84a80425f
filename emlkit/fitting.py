"""The fit check of a compiled Cortex-M program on a board (emlkit/deploy/fit.py), and its fallback to row bands
(emlkit/fit_search.py) when the arena does not fit: used by `compile` and by `run` alike."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from emlkit import emit, fit_search
from emlkit.requests import HOST, BoardRef, ProgramSpec

log = logging.getLogger("emlkit")


def fit_program(spec: ProgramSpec, output: Path, board: BoardRef | None, res: Any) -> tuple[Any, str]:
    """RES (SPEC compiled into OUTPUT) through the fit check on BOARD, falling back to row bands when its arena does
    not fit: the program kept and the error line ("" when it fits or nothing was checked)."""
    fit = fit_check(res, board)
    if fit_search.arena_short(fit):
        res, fit, error = _fit_in_bands(spec, output, board, res, fit)
        return res, error
    return res, fit["line"] if fit.get("checked") and not fit.get("fits") else ""


def _fit_in_bands(spec: ProgramSpec, output: Path, board: BoardRef | None, res: Any,
                  fit: dict[str, Any]) -> tuple[Any, dict[str, Any], str]:
    """The fit check's fallback (emlkit/fit_search.py): RES does not fit BOARD for its arena; compile its first
    stages in bands, cheapest first, and keep the first count that fits. Returns the program kept, its fit entry and
    the error line ("" when it fits)."""
    from emlkit.compile import compile_model, options_like

    def compile_with(bands: int, folder: Path) -> Any:
        return compile_model(spec.model, spec.target, folder, spec.calibration,
                             options_like(spec.options, patch_bands=bands), reuse_cache=True)

    what = f"{res.name} ({res.target.name})"
    name = fit.get("board", "")
    log.info("%s does not fit %s (arena %s B): trying its first stages in row bands", what, name,
             f"{int(res.report['memory']['arena_total']):,}")
    found = fit_search.search(res, fit, compile_with, lambda r: fit_check(r, board),
                              Path(output) / fit_search.SEARCH_DIR)
    line = fit_search.summary_line(what, name, found)
    log.info("%s", line)
    if found.chosen is None:
        res.report["fit_search"] = found.entry()
        emit.write_report(res.report, res.report_path)
        return res, fit, fit_search.error_line(what, name, found)
    kept = found.chosen.result
    if kept is not res:
        kept.report["fit_search"] = found.entry()
        emit.write_report(kept.report, kept.report_path)
        kept = fit_search.adopt(kept, Path(output))
    return kept, found.chosen.fit, ""


def fit_check(res: Any, board: BoardRef | None) -> dict[str, Any]:
    """Whether the compiled program fits BOARD's memories (emlkit/deploy/fit.py; builds the image that runs it,
    cached): the report's "fit" entry, added to the report and its file. {} where there is nothing to check."""
    needs = res.report.get("program_needs")
    if board is None or board == HOST or not needs:
        return {}
    from emlkit.deploy.fit import fit_report
    from emlkit.program_needs import ProgramNeeds

    fit = fit_report(board, ProgramNeeds.from_dict(needs), res.bpte.stat().st_size,
                     f"{res.name} ({res.target.name})", res.pte)
    res.report["fit"] = fit
    emit.write_report(res.report, res.report_path)
    return fit
