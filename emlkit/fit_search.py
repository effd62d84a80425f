"""The fit check's fallback: a Cortex-M program whose arena does not fit the board's RAM is compiled again with its
high-resolution first stages in row bands (emlkit/passes/patch_stages.py), and the cheapest band count that fits is
kept.

The cost of a band count is its extra MACs (the halo rows computed again), which the pass counts exactly from the
shapes for every count 2..8 (`--patch-stages auto`'s "tried" table); its arena is only estimated there, so each
candidate is compiled and put through the real fit check (emlkit/deploy/fit.py), cheapest first: the first that fits
is the cheapest that fits. A candidate whose estimated arena is no lower than one that already failed is not
compiled (the estimate is monotone enough in practice: the rest of the graph bounds it from below). Candidates are
compiled beside the output (OUT/.patch-search/) with the compile cache, and the chosen program's files replace the
output's; if none fits, the program of the options given stays the output.
"""

from __future__ import annotations

import copy
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from emlkit.patch_bands import PATCH_AUTO

log = logging.getLogger("emlkit")

SEARCH_DIR = ".patch-search"


@dataclass
class Candidate:
    """One compile tried: its band count (0: whole map), arena, extra MACs and fit entry."""

    bands: int
    arena: int
    extra_macs_pct: float
    fit: dict[str, Any]
    result: Any = None

    @property
    def fits(self) -> bool:
        return bool(self.fit.get("fits"))

    @property
    def shortfall(self) -> int:
        """The most bytes any memory lacks (0 if it fits)."""
        return max((m["need"] - m["size"] for m in self.fit.get("memories", []) if not m["fits"]), default=0)


@dataclass
class Search:
    """What the fallback tried and chose; `entry()` is the compile report's "fit_search"."""

    tried: list[Candidate] = field(default_factory=list)
    chosen: Candidate | None = None
    why_not: str = ""

    def entry(self) -> dict[str, Any]:
        return {"tried": [{"bands": c.bands, "arena": c.arena, "extra_macs_pct": c.extra_macs_pct, "fits": c.fits,
                           "shortfall": c.shortfall} for c in self.tried],
                "chose": None if self.chosen is None else self.chosen.bands, "why_not": self.why_not}


def arena_short(fit: dict[str, Any]) -> bool:
    """Whether FIT (a checked fit entry) fails in a memory that holds the arenas: only there can bands help."""
    return bool(fit.get("checked")) and not fit.get("fits") and any(
        not m["fits"] and m["parts"].get("arenas", 0) > 0 for m in fit.get("memories", []))


def _arena(res: Any) -> int:
    return int(res.report["memory"]["arena_total"])


def _bands(res: Any) -> int:
    return int((res.report.get("patch_stages") or {}).get("patch_bands") or 0)


def _extra_pct(res: Any) -> float:
    ps = res.report.get("patch_stages") or {}
    whole, banded = int(ps.get("rows_whole_map") or 0), int(ps.get("rows_computed") or 0)
    auto = ps.get("auto") or {}
    if "extra_macs_pct" in auto:
        return float(auto["extra_macs_pct"])
    return round(100.0 * (banded / whole - 1.0), 1) if whole else 0.0


def search(first: Any, first_fit: dict[str, Any], compile_with: Callable[[int, Path], Any],
           check: Callable[[Any], dict[str, Any]], workdir: Path) -> Search:
    """Band counts for the program FIRST (compiled with the options given; FIRST_FIT: its fit entry, which fails for
    the arena's memory): COMPILE_WITH(bands, folder) compiles with `--patch-stages bands` (PATCH_AUTO: auto) into the
    folder, CHECK(result) is its fit entry. Returns what was tried and the cheapest count that fits, if any."""
    s = Search([Candidate(_bands(first), _arena(first), _extra_pct(first) if _bands(first) else 0.0, first_fit, first)])
    # auto's table: every count's extra MACs and estimated arena (or why there is no chain to band)
    auto = first if (first.report.get("patch_stages") or {}).get("auto") else None
    if auto is None:
        auto = compile_with(PATCH_AUTO, workdir / "auto")
        if _bands(auto) and _bands(auto) != s.tried[0].bands:
            s.tried.append(Candidate(_bands(auto), _arena(auto), _extra_pct(auto), check(auto), auto))
    table = (auto.report.get("patch_stages") or {}).get("auto") or {}
    if not table.get("tried"):
        s.why_not = f"the first stages cannot run in bands ({table.get('why', 'the patch-stages pass did not run')})"
        return _done(s)
    est = {int(b): (float(t["extra_macs_pct"]), int(t["arena_estimate"])) for b, t in table["tried"].items()}
    order = sorted(est, key=lambda b: (est[b][0], b))  # cheapest first
    for b in order:
        done = next((c for c in s.tried if c.bands == b), None)
        if done is not None:
            if done.fits:
                break
            continue
        failed = [est[c.bands][1] for c in s.tried if c.bands in est and not c.fits]
        if failed and est[b][1] >= min(failed):
            log.debug("fit search: %d bands skipped: estimated arena %d B, no lower than a count that failed", b,
                      est[b][1])
            continue
        res = compile_with(b, workdir / f"bands-{b}")
        cand = Candidate(b, _arena(res), est[b][0], check(res), res)
        s.tried.append(cand)
        log.info("fit search: %d bands: arena %s B, +%.1f%% MACs: %s", b, f"{cand.arena:,}", cand.extra_macs_pct,
                 "fits" if cand.fits else f"short by {cand.shortfall:,} B")
        if cand.fits:
            break
    if not any(c.fits for c in s.tried):
        s.why_not = "no band count fits"
    return _done(s)


def _done(s: Search) -> Search:
    fitting = [c for c in s.tried if c.fits]
    s.chosen = min(fitting, key=lambda c: (c.extra_macs_pct, c.bands)) if fitting else None
    return s


def adopt(chosen: Any, output: Path) -> Any:
    """Move the files of the compile result CHOSEN (in the search's folder) into OUTPUT, where the compile writes;
    the result, pointing at them."""
    moved = {}
    for path in (chosen.pte, chosen.bpte, chosen.report_path):
        moved[path] = output / path.name
    etrecord = (chosen.report.get("files") or {}).get("etrecord")
    if etrecord:
        moved[chosen.pte.parent / etrecord] = output / etrecord
    for src, dst in moved.items():
        shutil.copyfile(src, dst)
    out = copy.copy(chosen)
    out.pte, out.bpte, out.report_path = moved[chosen.pte], moved[chosen.bpte], moved[chosen.report_path]
    return out


def summary_line(what: str, board: str, s: Search) -> str:
    """One line: the arena whole and in bands, and what was chosen."""
    whole = next((c for c in s.tried if c.bands == 0), None)
    parts = [f"arena whole map {whole.arena:,} B" if whole else ""]
    parts += [f"{c.bands} bands {c.arena:,} B (+{c.extra_macs_pct:.1f}% MACs{'' if c.fits else ', does not fit'})"
              for c in s.tried if c.bands]
    figures = ", ".join(p for p in parts if p)
    if s.chosen is None:
        return f"{what} on {board}: {figures}; {s.why_not}"
    choice = "the whole map" if s.chosen.bands == 0 else f"--patch-stages {s.chosen.bands}"
    return f"{what} did not fit {board} as compiled; {figures}: chose {choice}, the fewest extra MACs that fit"


def error_line(what: str, board: str, s: Search) -> str:
    """The one error line when nothing fits: the least shortfall in bytes and the fix."""
    best = min(s.tried, key=lambda c: (c.shortfall, c.extra_macs_pct))
    short = [m for m in best.fit.get("memories", []) if not m["fits"]]
    mems = "; ".join(f"{m['memory']} needs {m['need']:,} B, has {m['size']:,} B" for m in short)
    fix = f"use a board with {best.shortfall:,} B more RAM or a smaller model"
    if not any(c.bands for c in s.tried):  # no band count could be compiled: the fit check's own line
        line = best.fit.get("line") or f"{what} does not fit {board}: {mems}"
        return f"{line}; short by {best.shortfall:,} B ({s.why_not}); {fix}"
    how = "the whole map" if best.bands == 0 else f"{best.bands} bands (arena {best.arena:,} B)"
    return (f"{what} does not fit {board}, even with its first stages in bands ({s.why_not}): short by "
            f"{best.shortfall:,} B at best, with {how}: {mems}; {fix}")
