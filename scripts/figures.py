#!/usr/bin/env python3
"""README figures from a suite run: per model, instructions with MVE and portable kernels, MACs per
instruction, effect of LUT fusion, arena and image bytes, and Vela's two cycle estimates (NPU only, total).

Usage: ./test_cortex_m.sh --out out/suite && .venv/bin/python scripts/figures.py out/suite/results.json
Prints a markdown table (QEMU -icount shift=0: instruction counts, not cycles).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    args = ap.parse_args()
    rows = json.loads(args.results.read_text())
    by = {(r["model"], r["target"], r["variant"]): r for r in rows}
    models = list(dict.fromkeys(r["model"] for r in rows))
    f = lambda v: "-" if v is None else (f"{v:,}" if isinstance(v, int) else str(v))  # noqa: E731
    print("| model | MACs | QEMU instructions (MVE) | MACs/instr. | portable/MVE | no-LUT/LUT | arena B | image B | "
          "U55-128: NPU cycles (Vela estimate, NPU only) | U55-128: cycles (Vela estimate, total) | U55 row | "
          "U85-256: NPU cycles (Vela estimate, NPU only) | U85-256: cycles (Vela estimate, total) | U85 row |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m in models:
        main_ = by.get((m, "cortex-m55", "main"))
        if main_ is None:
            continue
        port = by.get((m, "cortex-m55", "portable"))
        nolut = by.get((m, "cortex-m55", "no-lut"))
        npu = by.get((m, "ethos-u55-128", "main"))
        u85 = by.get((m, "ethos-u85-256", "main"))
        n = main_.get("count")
        ratio = lambda o: f"{o['count'] / n:.2f}" if o and o.get("count") and n else "-"  # noqa: E731
        mpi = f"{main_['macs'] / n:.2f}" if n and main_.get("macs") else "-"
        status = main_["status"] if main_["status"] != "PASS" else ""
        print(f"| {m}{(' (' + status + ')') if status else ''} | {f(main_.get('macs'))} | {f(n)} | {mpi} | {ratio(port)} | {ratio(nolut)} | "
              f"{f(main_.get('arena_bytes'))} | {f(main_.get('image_bytes'))} | "
              f"{f(npu.get('vela_npu_only_cycles_estimate') if npu else None)} | "
              f"{f(npu.get('vela_total_cycles_estimate') if npu else None)} | {npu['status'] if npu else '-'} | "
              f"{f(u85.get('vela_npu_only_cycles_estimate') if u85 else None)} | "
              f"{f(u85.get('vela_total_cycles_estimate') if u85 else None)} | {u85['status'] if u85 else '-'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
