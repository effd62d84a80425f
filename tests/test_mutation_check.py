"""scripts/mutation_check.py: which lines it mutates and how (the full run is a separate, long command)."""

from __future__ import annotations

from pathlib import Path

from scripts.mutation_check import KERNEL_TESTS, _drop_clamp, host_lines, kernel_mutants, pass_mutants

REPO = Path(__file__).resolve().parent.parent

SRC = """#include "kernels.h"
static int a(void) { return 1; }
#if FW_HAVE_MVE
static int mve_only(void) { return 2; }
#else
static int portable(void) { return 3; }
#endif
#if FW_HAVE_DSP
static int dsp(void) { return 4; }
#elif FW_HAVE_MVE
static int mve2(void) { return 5; }
#endif
#ifndef GUARD
static int guarded(void) { return 6; }
#endif
"""


def test_host_lines_skip_arch_branches() -> None:
    lines = [t for _, t in host_lines(SRC)]
    assert any("a(void)" in t for t in lines) and any("portable" in t for t in lines)
    assert any("guarded" in t for t in lines)
    assert not any(w in t for t in lines for w in ("mve_only", "dsp(void)", "mve2"))


def test_drop_clamp() -> None:
    assert _drop_clamp("  y = (int8_t)k_clamp(f(a, b) + zp, lo, hi);") == "  y = (int8_t)(f(a, b) + zp);"
    assert _drop_clamp("  y = x;") is None


def test_every_kernel_file_has_tests_and_mutants() -> None:
    kernels = {p.name for p in (REPO / "firmware" / "kernels").glob("*.c")}
    assert kernels <= set(KERNEL_TESTS), kernels - set(KERNEL_TESTS)
    muts = kernel_mutants(REPO)
    assert {m.kind for m in muts} >= {"loop bound off by one", "clamp dropped", "saturation bound", "offset sign",
                                      "rounding term removed", "shift one bit short"}
    for m in muts:
        assert m.new != m.old and "FW_HAVE" not in m.old


def test_pass_mutants_match_the_sources() -> None:
    # A curated mutant whose text left the source would be skipped silently as stillborn.
    assert all(m.line > 0 for m in pass_mutants(REPO)), [m.path for m in pass_mutants(REPO) if m.line == 0]
