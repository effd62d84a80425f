#!/usr/bin/env python3
"""Compile time per zoo model and target: ours vs ExecuTorch's example compiler, in the same run.

Ours is timed in-process (model load to written .pte/.bpte/.json, including the
host reference run and the verifier). The reference is the wheel's
`executorch.backends.arm.scripts.aot_arm_compiler` run as a subprocess on the
same model file with --bundleio; its Python start-up is subtracted (measured
once with `python -c "import executorch..."`) so the ratio compares compile work.
Writes a table to stdout and JSON to --out.
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
sys.path.insert(0, str(ROOT))

log = logging.getLogger("bench_aot")

STARTUP_PROBE = ("import torch, executorch.backends.arm.scripts.aot_arm_compiler")


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

    from aot import models
    from aot.compile import compile_model, make_options

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="all")
    ap.add_argument("--targets", default="cortex-m55,ethos-u55-128")
    ap.add_argument("--out", default="out/bench_aot.json")
    ap.add_argument("--no-reference", action="store_true", help="skip ExecuTorch's example compiler")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for n in ("executorch", "torch", "torchao"):
        logging.getLogger(n).setLevel(logging.ERROR)
    import warnings

    warnings.filterwarnings("ignore")
    names = list(models.ZOO) if args.models == "all" else args.models.split(",")
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", STARTUP_PROBE], capture_output=True)
    startup = time.monotonic() - t0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for target in args.targets.split(","):
                t1 = time.monotonic()
                res = compile_model(name, target, Path(tmp) / "ours", options=make_options())
                ours = time.monotonic() - t1
                theirs = None if args.no_reference else _theirs(ROOT / "aot" / "models" / f"{name}.py", target, Path(tmp))
                theirs_net = None if theirs is None else max(theirs - startup, 0.01)
                rows.append({"model": name, "target": target, "ours_s": round(ours, 2),
                             "reference_s": None if theirs_net is None else round(theirs_net, 2),
                             "ratio": None if theirs_net is None else round(ours / theirs_net, 2),
                             "ops": sum(res.report["ops"].values())})
                log.info("%s %s: ours %.1f s, reference %s", name, target, ours, "-" if theirs_net is None else f"{theirs_net:.1f} s")
    t = Table(title=f"compile time (reference start-up {startup:.1f} s subtracted)")
    for c in ("model", "target", "ours s", "ExecuTorch example s", "ours/theirs"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["model"], r["target"], f"{r['ours_s']:.1f}", "-" if r["reference_s"] is None else f"{r['reference_s']:.1f}",
                  "-" if r["ratio"] is None else f"{r['ratio']:.2f}")
    Console().print(t)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"startup_s": round(startup, 2), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
