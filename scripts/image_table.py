"""Image and arena sizes per model, as a README table, from a suite run's results.json.

    .venv/bin/python -m aot suite --models all --targets cortex-m55 --out out/m55
    .venv/bin/python scripts/image_table.py out/m55/results.json [--target cortex-m55]

`image B` is the .text + .data of the per-program image the row ran (aot/deploy/program_image.py: only
the program's operators linked), as `emlkit run` prints it; `arena B` the planned tensor memory.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def _n(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else "-"


def table(rows: list[dict[str, Any]], target: str) -> list[str]:
    main = {r["model"]: r for r in rows if r["target"] == target and r["variant"] == "main"}
    portable = {r["model"]: r for r in rows if r["target"] == target and r["variant"] == "portable"}
    out = ["| model | operators | image B (MVE) | image B (portable) | arena B | row |",
           "|---|---|---|---|---|---|"]
    for model, r in main.items():
        ops = len({o["op"] for o in r.get("per_op") or []}) or "-"
        p = portable.get(model, {})
        out.append(f"| {model} | {ops} | {_n(r.get('image_bytes'))} | {_n(p.get('image_bytes'))} | "
                   f"{_n(r.get('arena_bytes'))} | {r['status']} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="results.json of `emlkit suite`")
    ap.add_argument("--target", default="cortex-m55")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        rows = json.loads(args.results.read_text())
    except (OSError, json.JSONDecodeError) as err:
        log.error("error: cannot read %s: %s", args.results, err)
        return 2
    lines = table(rows, args.target)
    if len(lines) == 2:
        log.error("error: %s has no main rows for %s", args.results, args.target)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
