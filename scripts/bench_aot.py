#!/usr/bin/env python3
"""Compile time per zoo model and target: ours vs ExecuTorch's example compiler, in the same run.

Both are timed the same way, as the command a user types, wall clock including
Python start-up: ours is `python -m emlkit compile MODEL --target T` (writes .pte,
.bpte with the lowered program's outputs, and the report; runs the host
reference, the verifier and, for Ethos-U, tosa_reference_model); the reference
is the wheel's `executorch.backends.arm.scripts.aot_arm_compiler --quantize
--bundleio` on the same model file. Our in-process compile time (from the
report) is listed too. Writes a table to stdout and JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

log = logging.getLogger("bench_aot")


def _ours(name: str, target: str, workdir: Path) -> tuple[float | None, float | None]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "emlkit", "compile", name, "--target", target, "-o", str(workdir)],
                          capture_output=True, text=True)
    dt = time.monotonic() - t0
    if proc.returncode != 0:
        log.warning("ours failed on %s %s: %s", name, target, proc.stderr.strip().splitlines()[-1:])
        return None, None
    rep = json.loads((workdir / f"{name}_{target}.json").read_text())
    return dt, rep["compile_seconds"]


def _theirs(model_file: Path, target: str, workdir: Path) -> float | None:
    args = ["--model_name", str(model_file), "--quantize", "--bundleio", "--target", target, "-o", str(workdir)]
    if target.startswith("ethos"):
        args.append("--delegate")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "executorch.backends.arm.scripts.aot_arm_compiler", *args],
                          capture_output=True, text=True, cwd=workdir)
    dt = time.monotonic() - t0
    if proc.returncode != 0:
        log.warning("reference compiler failed on %s %s: %s", model_file.stem, target, proc.stderr.strip().splitlines()[-1:])
        return None
    return dt


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    from emlkit import models

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="all")
    ap.add_argument("--targets", default="cortex-m55,ethos-u55-128")
    ap.add_argument("--out", default="out/bench_aot.json")
    ap.add_argument("--no-reference", action="store_true", help="skip ExecuTorch's example compiler")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    names = list(models.ZOO) if args.models == "all" else args.models.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for target in args.targets.split(","):
                ours, inproc = _ours(name, target, Path(tmp) / "ours")
                theirs = None if args.no_reference else _theirs(ROOT / "emlkit" / "models" / f"{name}.py", target, Path(tmp))
                ratio = round(ours / theirs, 2) if ours and theirs else None
                rows.append({"model": name, "target": target, "ours_s": ours and round(ours, 1),
                             "ours_in_process_s": inproc, "reference_s": theirs and round(theirs, 1), "ratio": ratio})
                log.info("%s %s: ours %s s (%s s in-process), reference %s s", name, target,
                         rows[-1]["ours_s"], inproc, rows[-1]["reference_s"])
    t = Table(title="compile time, wall clock per command (incl. Python start-up)")
    for c in ("model", "target", "ours s", "ours in-process s", "ExecuTorch example s", "ours/theirs"):
        t.add_column(c)
    f = lambda v: "-" if v is None else f"{v}"  # noqa: E731
    for r in rows:
        t.add_row(r["model"], r["target"], f(r["ours_s"]), f(r["ours_in_process_s"]), f(r["reference_s"]), f(r["ratio"]))
    Console().print(t)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
