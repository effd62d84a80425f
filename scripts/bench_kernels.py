"""Instructions per call of the cortex_m:: kernels under QEMU (-icount shift=0),
portable C vs Helium (MVE), on the reference shapes of NOTES.md and on MobileNetV2's
hardest shapes. The CMSIS-NN column holds figures recorded on 2026-12-03 (../shared/NOTES.md),
labelled as stored, not measured by this script: scripts/bench_cmsis_nn.py --cmsis-nn PATH
builds CMSIS-NN and measures both side by side in one run.

Builds tests/mve_selftest with -DBENCH twice: for cortex-m55 (portable `_ref`
and `_mve` in one image; GCC may auto-vectorise the portable code there) and
for cortex-m55+nomve (portable code as pure scalar C).

    .venv/bin/python scripts/bench_kernels.py [--build-dir build/kernels-bench]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from aot.deploy import kernel_selftest as selftest
from aot.deploy.boards import REPO_ROOT as ROOT

log = logging.getLogger("bench_kernels")

# CMSIS-NN v7 (GCC 12.2, -Ofast) on the same QEMU model, instructions per call
# (NOTES.md). The LUT figure is per element x 8192 elements.
CMSIS_MVE = {
    "conv3x3_16x16x16_32": 387_477,
    "dwconv3x3_25x5x64": 166_872,
    "conv1x1_25x5x64_64": 202_875,
    "fc_640_128": 40_158,
    "add_8192": 112_727,
    "avgpool_8x8x64": 5_016,
    "softmax_1x1000": 553_469,  # CMSIS-NN has no MVE softmax with GCC 12: scalar figure
    "lut_8192": round(0.31 * 8192),
}
CMSIS_C = {"conv3x3_16x16x16_32": 3_288_172, "lut_8192": 5 * 8192}
NOTES = {
    "avgpool_8x8x64": "global 8x8 window; float32 sums in the reference's order (bit-exact), so no integer shortcut",
    "softmax_1x1000": "float32 like the reference; no MVE variant",
    "fc_640_128": "kernel_sum form; CMSIS adds 36,906 once for kernel sums",
}


def parse(stdout: str) -> tuple[dict[str, tuple[int, int | None]], str]:
    rows: dict[str, tuple[int, int | None]] = {}
    calib = ""
    for line in stdout.splitlines():
        parts = line.split()
        if parts[:1] == ["BENCH"] and len(parts) == 4:
            # "-" for a variant the image does not time (MVE-only rows have no portable figure)
            ref = None if parts[2] == "-" else int(parts[2])
            rows[parts[1]] = (ref if ref is not None else -1, None if parts[3] == "-" else int(parts[3]))
        elif parts[:1] == ["CALIB"] and len(parts) == 3:
            calib = f"{parts[2]} counted for {parts[1]} instructions"
    return rows, calib


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build" / "kernels-bench",
                    help="where the bench images are written")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        mve_elf = selftest.build(args.build_dir / "bench_mve.elf", bench=True, mve=True)
        c_elf = selftest.build(args.build_dir / "bench_nomve.elf", bench=True, mve=False)
        runs = {k: selftest.run(e, icount=True) for k, e in (("mve", mve_elf), ("c", c_elf))}
    except (RuntimeError, OSError) as e:
        log.error("bench_kernels: %s", e)
        return 2
    for k, r in runs.items():
        if r.returncode != 0:
            log.error("bench_kernels: %s image exited with %d:\n%s%s", k, r.returncode, r.stdout, r.stderr)
            return 1
    mve_rows, calib = parse(runs["mve"].stdout)
    c_rows, _ = parse(runs["c"].stdout)
    if not mve_rows or not c_rows:
        log.error("bench_kernels: no BENCH lines in the output:\n%s", runs["mve"].stdout)
        return 1
    log.info("QEMU mps3-an547, -icount shift=0 (calibration: %s)", calib)
    log.info("CMSIS-NN column: stored figures from ../shared/NOTES.md (2026-12-03), not measured here; "
             "scripts/bench_cmsis_nn.py --cmsis-nn PATH measures side by side")
    hdr = f"{'kernel':26} {'pure C':>10} {'C (M55)':>10} {'MVE':>10} {'C/MVE':>7} {'CMSIS (st.)':>11} {'MVE/CMSIS':>9}  note"
    log.info(hdr)
    log.info("-" * len(hdr))
    for name, (ref, mve) in mve_rows.items():
        pure = c_rows.get(name, (None, None))[0]
        best = mve if mve is not None else ref
        cm = CMSIS_MVE.get(name)
        ratio = f"{best / cm:9.2f}" if cm else f"{'':9}"
        speedup = f"{pure / mve:7.1f}" if (mve and pure and pure > 0) else f"{'':7}"
        note = NOTES.get(name, "")
        if name in CMSIS_C and pure and pure > 0:
            note = (note + "; " if note else "") + f"pure C / CMSIS C = {pure / CMSIS_C[name]:.2f}"
        pure_s = f"{pure:,}" if pure and pure > 0 else "-"
        ref_s = f"{ref:,}" if ref >= 0 else "-"
        log.info(f"{name:26} {pure_s:>10} {ref_s:>10} {('-' if mve is None else f'{mve:,}'):>10} {speedup} "
                 f"{(f'{cm:,}' if cm else '-'):>11} {ratio}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
