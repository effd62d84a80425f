"""What each figure is, named the same way in every table, JSON field and plot.

The toolkit reports five kinds of count that must never be mixed up:
- QEMU instructions: the firmware's counter under QEMU -icount shift=0 (one per
  instruction, MVE included); not cycles.
- DWT cycles: the Cortex-M cycle counter, on an FVP or a board.
- NPU PMU cycles: the Ethos-U's own cycle counter, from an FVP's NPU model or a
  real NPU. QEMU's co-simulated NPU has no timing: its PMU counts each command's share
  of Vela's per-operation estimate (emlkit/npu/perf.py), always labelled an estimate.
- Vela's NPU-only estimate (`cycles_npu`): the NPU's own cycles as Vela models them.
- Vela's total estimate (`cycles_total`): the NPU plus the memory transfers Vela
  expects to stall it; on the zoo it is up to 6.8x the NPU-only figure.
"""

from __future__ import annotations

QEMU_INSTRUCTIONS = "QEMU instructions"
FVP_CYCLES = "FVP cycles (DWT)"
BOARD_CYCLES = "board cycles (DWT)"
DWT_CYCLES = "cycles (DWT, FVP or board)"
HOST_NS = "host ns (wall clock)"
NPU_PMU_FVP = "NPU cycles (FVP NPU model PMU)"
NPU_PMU_BOARD = "NPU cycles (board NPU PMU)"
NPU_PMU_ESTIMATE = "NPU cycles (estimate, Vela per-op model)"
VELA_NPU_ONLY = "NPU cycles (Vela estimate, NPU only)"
VELA_TOTAL = "cycles (Vela estimate, total)"

# JSON keys of the same figures (compile report "vela" object, suite rows)
VELA_NPU_ONLY_KEY = "npu_only_cycles_estimate"
VELA_TOTAL_KEY = "total_cycles_estimate"


def cpu_count_label(unit: str | None, sim: str | None = None) -> str:
    """Name of the firmware's count: its unit ("instructions", "cycles", "ns") and where it ran."""
    if unit == "instructions":
        return QEMU_INSTRUCTIONS
    if unit == "cycles":
        return {"fvp": FVP_CYCLES, "board": BOARD_CYCLES}.get(sim or "", DWT_CYCLES)
    if unit == "ns":
        return HOST_NS
    return unit or "count"


def npu_pmu_label(sim: str | None) -> str:
    """What the firmware's NPU PMU count is where it ran: QEMU's co-simulated NPU counts an estimate."""
    return {"fvp": NPU_PMU_FVP, "qemu": NPU_PMU_ESTIMATE}.get(sim or "", NPU_PMU_BOARD)
