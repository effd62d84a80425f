#!/usr/bin/env python3
"""Firmware figures per zoo model on corstone-300 under QEMU (-icount shift=0).

For each model compiled for cortex-m55: instructions per inference with the MVE
kernels and with the portable C kernels (ratio portable/MVE), MACs per
instruction, the top operators, planned arena bytes and stack; once per image:
runtime and kernel code size (.text of libfw_runtime.a / libfw_kernels.a), image
.text/.data/.bss. QEMU counts instructions, not cycles. Writes JSON and a
markdown table (--out).
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("bench_firmware")


def lib_text(build_dir: Path, lib: str) -> int | None:
    hits = list(build_dir.rglob(lib))
    if not hits:
        return None
    out = subprocess.run(["arm-none-eabi-size", "-t", str(hits[0])], capture_output=True, text=True).stdout
    last = [l for l in out.splitlines() if "(TOTALS)" in l]
    return int(last[0].split()[0]) if last else None


def main() -> int:
    from emlkit import models
    from emlkit.logsetup import setup_logging
    from emlkit.compile import compile_model, make_options
    from emlkit.deploy.build import BuildOptions, build_image
    from emlkit.run import execute

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="all")
    ap.add_argument("--board", default="corstone-300")
    ap.add_argument("--out", default="out/bench_firmware")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    setup_logging(False)
    import warnings

    warnings.filterwarnings("ignore")
    names = list(models.ZOO) if args.models == "all" else args.models.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    images = {}
    for kernels in ("mve", "portable"):
        img = build_image(args.board, BuildOptions(mve=(kernels == "mve")))
        images[kernels] = {"text": img.sizes.get("text"), "data": img.sizes.get("data"), "bss": img.sizes.get("bss"),
                           "runtime_text": lib_text(img.build_dir, "libfw_runtime.a"),
                           "kernels_text": lib_text(img.build_dir, "libfw_kernels.a")}
    rows = []
    for name in names:
        cres = compile_model(name, "cortex-m55", out / "programs", options=make_options(), reuse_cache=True)
        row = {"model": name, "macs": cres.report.get("macs"), "arena_bytes": cres.report["memory"]["arena_total"]}
        for kernels in ("mve", "portable"):
            o = execute(cres, args.board, "qemu", args.timeout, kernels, None)
            r = o.result
            row[f"{kernels}_status"] = o.status
            row[f"{kernels}_instructions"] = r.total if r is not None else None
            if kernels == "mve" and r is not None:
                row["stack_bytes"] = r.stack_bytes
                row["top_ops"] = [{"op": p.op, "calls": p.calls, "count": p.count}
                                  for p in sorted(r.per_op, key=lambda p: -p.count)[:3]]
        mve, port = row.get("mve_instructions"), row.get("portable_instructions")
        row["portable_over_mve"] = round(port / mve, 2) if mve and port else None
        row["macs_per_instruction"] = round(row["macs"] / mve, 3) if mve and row["macs"] else None
        rows.append(row)
        log.info("%s: MVE %s, portable %s instructions", name, mve, port)
    (out / "bench_firmware.json").write_text(json.dumps({"images": images, "rows": rows}, indent=2) + "\n")
    md = ["| model | MACs | instr. MVE | instr. portable | portable/MVE | MACs/instr. (MVE) | arena B | stack B | top ops (MVE) |",
          "|---|---|---|---|---|---|---|---|---|"]
    f = lambda v: "-" if v is None else (f"{v:,}" if isinstance(v, int) else str(v))  # noqa: E731
    for r in rows:
        top = "; ".join(f"{t['op'].split('::')[-1]} {t['count']:,}" for t in r.get("top_ops", []))
        md.append(f"| {r['model']} | {f(r['macs'])} | {f(r.get('mve_instructions'))} | {f(r.get('portable_instructions'))} | "
                  f"{f(r['portable_over_mve'])} | {f(r['macs_per_instruction'])} | {f(r['arena_bytes'])} | {f(r.get('stack_bytes'))} | {top} |")
    md.append("")
    for k, v in images.items():
        md.append(f"- image ({k} kernels): .text {f(v['text'])}, .data {f(v['data'])}, .bss {f(v['bss'])}; "
                  f"runtime .text {f(v['runtime_text'])}, kernels .text {f(v['kernels_text'])}")
    (out / "bench_firmware.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
