"""CPU/NPU accuracy parity: int8 SNR of every zoo model on cortex-m55 against ethos-u55-128.

Usage: .venv/bin/python scripts/parity.py [--models a,b] [--out DIR] [--markdown]

Both targets quantize the same model with the same calibration (ModelInputs);
the SNR is each lowered program's host-reference output against the float
model. A gap above 1 dB means the CPU lowering loses accuracy the NPU keeps.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings

from aot import models
from aot.cli import setup_logging
from aot.compile import compile_model, make_options
from aot.errors import AotError

CPU, NPU = "cortex-m55", "ethos-u55-128"
LIMIT_DB = 1.0


def _snr(model: str, target: str, outdir: str) -> float | str:
    try:
        res = compile_model(model, target, f"{outdir}/{target}", options=make_options(), reuse_cache=True)
    except AotError as err:
        return f"error: {err}"
    snr = res.report["numerics"]["snr_db"]
    return math.inf if snr == "inf" else float(snr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="all")
    ap.add_argument("--out", default="out/parity")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)
    setup_logging(False)
    warnings.filterwarnings("ignore")
    names = list(models.ZOO) if args.models == "all" else args.models.split(",")
    rows, bad = [], 0
    for m in names:
        cpu, npu = _snr(m, CPU, args.out), _snr(m, NPU, args.out)
        if isinstance(cpu, float) and isinstance(npu, float):
            gap = npu - cpu if math.isfinite(npu) or math.isfinite(cpu) else 0.0
            ok = gap <= LIMIT_DB
        else:
            gap, ok = None, False
        bad += not ok
        rows.append({"model": m, CPU: cpu, NPU: npu, "gap_db": gap, "ok": ok})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if args.markdown:
        print(f"| model | {CPU} SNR dB | {NPU} SNR dB | gap dB (NPU - CPU) |")
        print("|---|---|---|---|")
        for r in rows:
            f = lambda v: v if isinstance(v, str) else ("inf" if math.isinf(v) else f"{v:.1f}")  # noqa: E731
            gap = "-" if r["gap_db"] is None else ("0.0" if math.isnan(r["gap_db"]) else f"{r['gap_db']:+.1f}")
            print(f"| {r['model']} | {f(r[CPU])} | {f(r[NPU])} | {gap} |")
    print(f"{len(rows) - bad} of {len(rows)} models within {LIMIT_DB} dB", file=sys.stderr)
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
