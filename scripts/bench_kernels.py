"""Instructions per call of the cortex_m:: kernels under QEMU (-icount shift=0),
portable C vs Helium (MVE), on a set of reference shapes and on MobileNetV2's hardest
shapes. For CMSIS-NN beside ours, scripts/bench_cmsis_nn.py --cmsis-nn PATH builds a
CMSIS-NN checkout you fetched and measures both side by side in one run.

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

from emlkit.deploy import kernel_selftest as selftest
from emlkit.deploy.boards import REPO_ROOT as ROOT

log = logging.getLogger("bench_kernels")

NOTES = {
    "avgpool_8x8x64": "global 8x8 window; float32 sums in the reference's order (bit-exact), so no integer shortcut",
    "softmax_1x1000": "float32 like the reference; no MVE variant",
    "fc_640_128": "kernel_sum form",
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
    hdr = f"{'kernel':26} {'pure C':>10} {'C (M55)':>10} {'MVE':>10} {'C/MVE':>7}  note"
    log.info(hdr)
    log.info("-" * len(hdr))
    for name, (ref, mve) in mve_rows.items():
        pure = c_rows.get(name, (None, None))[0]
        speedup = f"{pure / mve:7.1f}" if (mve and pure and pure > 0) else f"{'':7}"
        note = NOTES.get(name, "")
        pure_s = f"{pure:,}" if pure and pure > 0 else "-"
        ref_s = f"{ref:,}" if ref >= 0 else "-"
        log.info(f"{name:26} {pure_s:>10} {ref_s:>10} {('-' if mve is None else f'{mve:,}'):>10} {speedup}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
