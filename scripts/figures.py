#!/usr/bin/env python3
"""Figures from a suite run: per model, instructions with MVE and portable kernels, MACs per
instruction, effect of LUT fusion, arena and image bytes, and Vela's two cycle estimates (NPU only, total).

Usage: ./test_cortex_m.sh --out out/suite && .venv/bin/python scripts/figures.py out/suite/results.json
       [--cores | --zoo | --images [--target T] | --docs docs/results.md]
Prints a markdown table (QEMU -icount shift=0: instruction counts, not cycles). --cores prints the
cores x models table instead: instructions per inference on each core's board, memory per model and
per image, and for a program that does not fit, the memory that is short. --zoo prints the newer
zoo models' per-target table: status, instructions, NPU cycles and SNR on cortex-m55, ethos-u55-128 and
ethos-u85-256, and the M4 / M3 instruction counts. --images prints image and arena sizes per model for
one target. --docs PAGE writes all of these tables to one generated page (docs/results.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


# (target, board, column title) of the cores table, in order; missing ones are left out.
CORE_COLUMNS = [
    ("cortex-m0plus", "microbit", "M0+ micro:bit (16 KiB RAM)"),
    ("cortex-m0plus", "an385-m0plus", "M0+ (stand-in: AN385's M3)"),
    ("cortex-m3", "mps2-an385", "M3 AN385"),
    ("cortex-m4", "mps2-an386", "M4 AN386"),
    ("cortex-m7", "mps2-an500", "M7 AN500"),
    ("cortex-m33", "mps2-an505", "M33 AN505"),
    ("cortex-m55", "corstone-300", "M55 + MVE AN547"),
]


def _num(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def _short_fit(r: dict) -> str:
    """'SKIP: ram 33,720 / 16,384 B' for a program that does not fit."""
    bad = [m for m in (r.get("fit") or {}).get("memories", []) if not m["fits"]]
    if not bad:
        return r["status"]
    return "SKIP: " + ", ".join(f"{m['memory']} {m['need']:,} / {m['size']:,} B" for m in bad)


def cores_table(rows: list[dict]) -> list[str]:
    by = {(r["model"], r["target"], r["asked_board"] or r["board"]): r for r in rows if r["variant"] == "main"}
    cols = [c for c in CORE_COLUMNS if any((m, c[0], c[1]) in by for m in {r["model"] for r in rows})]
    models = list(dict.fromkeys(r["model"] for r in rows))
    out = ["| model | arena B | .bpte B | " + " | ".join(c[2] for c in cols) + " |",
           "|---|---|---|" + "---|" * len(cols)]
    for m in models:
        cells, arena, model_b = [], None, None
        for t, b, _ in cols:
            r = by.get((m, t, b))
            if r is None:
                cells.append("-")
                continue
            arena = arena if arena is not None else r.get("arena_bytes")
            model_b = model_b if model_b is not None else r.get("model_bytes")
            if r["status"] == "PASS":
                cell = _num(r["count"]) + ("" if r.get("max_steps") in (0, None) else f" ({r['max_steps']} steps)")
            else:
                cell = _short_fit(r) if r["status"] == "SKIP" else r["status"]
            if (r.get("arena_bytes"), r.get("model_bytes")) != (arena, model_b):  # e.g. MVE kernel sums
                cell += f" (arena {_num(r.get('arena_bytes'))}, .bpte {_num(r.get('model_bytes'))})"
            cells.append(cell)
        out.append(f"| {m} | {_num(arena)} | {_num(model_b)} | " + " | ".join(cells) + " |")
    images = []
    for t, b, _ in cols:
        sizes = {r["image_bytes"] for r in rows if r["target"] == t and (r["asked_board"] or r["board"]) == b
                 and r["variant"] == "main" and r.get("image_bytes")}
        images.append(_num(max(sizes)) if sizes else "-")
    out.append("| image B (.text + .data) | | | " + " | ".join(images) + " |")
    return out


ZOO_COLUMNS = [("cortex-m55", "cortex-m55"), ("ethos-u55-128", "ethos-u55-128"),
               ("ethos-u85-256", "ethos-u85-256 (an547-u85 stand-in)")]


def zoo_table(rows: list[dict], names: list[str]) -> list[str]:
    by = {(r["model"], r["target"]): r for r in rows if r["variant"] == "main"}

    def cell(r: dict | None) -> str:
        if r is None:
            return "-"
        if r["status"] != "PASS":
            return _short_fit(r) if r["status"] == "SKIP" else r["status"]
        parts = ["PASS", f"{_num(r.get('count'))} instr."]
        if r.get("vela_npu_only_cycles_estimate") is not None:
            parts.append(f"{_num(r['vela_npu_only_cycles_estimate'])} NPU cycles")
        if r.get("snr_db") is not None:
            parts.append(f"{r['snr_db']:.1f} dB")
        return ", ".join(parts)

    out = ["| model | " + " | ".join(c[1] for c in ZOO_COLUMNS) + " | M4 / M3 instr. (PASS) |",
           "|---|" + "---|" * len(ZOO_COLUMNS) + "---|"]
    for m in names:
        if not any((m, t) in by for t, _ in ZOO_COLUMNS):
            continue
        small = [f"{core} {_num(r['count'])}" for core, t in (("M4", "cortex-m4"), ("M3", "cortex-m3"))
                 if (r := by.get((m, t))) is not None and r["status"] == "PASS"]
        out.append(f"| {m} | " + " | ".join(cell(by.get((m, t))) for t, _ in ZOO_COLUMNS)
                   + f" | {', '.join(small) or '-'} |")
    return out


def figures_table(rows: list[dict]) -> list[str]:
    by = {(r["model"], r["target"], r["variant"]): r for r in rows}
    models = list(dict.fromkeys(r["model"] for r in rows))
    f = lambda v: "-" if v is None else (f"{v:,}" if isinstance(v, int) else str(v))  # noqa: E731
    out = ["| model | MACs | QEMU instructions (MVE) | MACs/instr. | portable/MVE | no-LUT/LUT | arena B | image B | "
           "U55-128: NPU cycles (Vela estimate, NPU only) | U55-128: cycles (Vela estimate, total) | U55 row | "
           "U85-256: NPU cycles (Vela estimate, NPU only) | U85-256: cycles (Vela estimate, total) | U85 row |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
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
        out.append(f"| {m}{(' (' + status + ')') if status else ''} | {f(main_.get('macs'))} | {f(n)} | {mpi} | "
                   f"{ratio(port)} | {ratio(nolut)} | {f(main_.get('arena_bytes'))} | {f(main_.get('image_bytes'))} | "
                   f"{f(npu.get('vela_npu_only_cycles_estimate') if npu else None)} | "
                   f"{f(npu.get('vela_total_cycles_estimate') if npu else None)} | {npu['status'] if npu else '-'} | "
                   f"{f(u85.get('vela_npu_only_cycles_estimate') if u85 else None)} | "
                   f"{f(u85.get('vela_total_cycles_estimate') if u85 else None)} | {u85['status'] if u85 else '-'} |")
    return out


def image_table(rows: list[dict], target: str) -> list[str]:
    """Image and arena sizes per model on TARGET: `image B` is the .text + .data of the per-program image
    the row ran (emlkit/deploy/program_image.py: only the program's operators linked), `arena B` the planned
    tensor memory."""
    main_ = {r["model"]: r for r in rows if r["target"] == target and r["variant"] == "main"}
    portable = {r["model"]: r for r in rows if r["target"] == target and r["variant"] == "portable"}
    out = ["| model | operators | image B (MVE) | image B (portable) | arena B | row |",
           "|---|---|---|---|---|---|"]
    for model, r in main_.items():
        ops = len({o["op"] for o in r.get("per_op") or []}) or "-"
        p = portable.get(model, {})
        out.append(f"| {model} | {ops} | {_num(r.get('image_bytes'))} | {_num(p.get('image_bytes'))} | "
                   f"{_num(r.get('arena_bytes'))} | {r['status']} |")
    return out


def _zoo_names() -> list[str]:
    from emlkit.models import NEW_MODELS
    return list(NEW_MODELS)


DOCS_HEADER = """# Results of a suite run

<!-- GENERATED by scripts/figures.py from a suite run's results.json: do not edit by hand.
     Regenerate: ./test_cortex_m.sh --out out/suite
                 .venv/bin/python scripts/figures.py out/suite/results.json --docs docs/results.md -->

Generated by `scripts/figures.py --docs` from `{source}` of `./test_cortex_m.sh`. Under QEMU
(`-icount shift=0`) the counts are instructions, not cycles; NPU cycles are Vela's estimates.
What each figure means: [firmware/README.md](../firmware/README.md#what-each-figure-is).
"""


def docs_page(rows: list[dict], source: str) -> str:
    """Every table this script makes, as one markdown page."""
    sections = [
        ("Per model on cortex-m55, with the Ethos-U estimates", "Instructions with MVE kernels, ratios of the "
         "portable-kernel and no-LUT-fusion variants to it, MACs per instruction, arena and image bytes, and "
         "Vela's cycle estimates for the same model on ethos-u55-128 and ethos-u85-256.", figures_table(rows)),
        ("Cores x models", "Instructions per inference on each core's board, memory per model and per image; "
         "for a program that does not fit, the memory that is short.", cores_table(rows)),
        ("Newer zoo models per target", "Status, instructions, NPU cycles (Vela estimate) and SNR against the "
         "float model.", zoo_table(rows, _zoo_names())),
        ("Image and arena sizes on cortex-m55", image_table.__doc__.split(": ", 1)[1].replace("\n    ", " "),
         image_table(rows, "cortex-m55")),
    ]
    out = [DOCS_HEADER.format(source=source)]
    for title, text, lines in sections:
        out += [f"## {title}", "", text, "", *lines, ""]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--cores", action="store_true", help="the cores x models table")
    ap.add_argument("--zoo", action="store_true", help="the newer zoo models' per-target table")
    ap.add_argument("--images", action="store_true", help="image and arena sizes per model on --target")
    ap.add_argument("--target", default="cortex-m55", help="the target of --images (default cortex-m55)")
    ap.add_argument("--docs", type=Path, metavar="PAGE", help="write every table to PAGE (docs/results.md)")
    args = ap.parse_args()
    try:
        rows = json.loads(args.results.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        ap.error(f"cannot read {args.results} as a suite's results.json ({err}); run ./test_cortex_m.sh --out DIR "
                 "and pass DIR/results.json")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"model", "target", "variant", "status"} <= r.keys()
                                              for r in rows):
        ap.error(f"{args.results} is not a suite's results.json (a list of result rows with model, target, variant "
                 "and status); run ./test_cortex_m.sh --out DIR and pass DIR/results.json")
    if args.docs:
        args.docs.write_text(docs_page(rows, args.results.name))
        return 0
    if args.cores:
        lines = cores_table(rows)
    elif args.zoo:
        lines = zoo_table(rows, _zoo_names())
    elif args.images:
        lines = image_table(rows, args.target)
    else:
        lines = figures_table(rows)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
