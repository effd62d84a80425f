"""Host execution time of the Ethos-U functional model (U55 or U85) per zoo model (delegate only and whole program).

Usage: python scripts/bench_npu.py [--models add,conv_relu,...] [--repeat 3] [--target ethos-u55-128] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

log = logging.getLogger("bench_npu")


def main(argv: list[str] | None = None) -> int:
    from emlkit import models

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(models.ZOO), help="comma-separated zoo models (default: all)")
    ap.add_argument("--target", default="ethos-u55-128")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per model; the best is reported")
    ap.add_argument("--out", default=None, help="folder for compiled programs, reused when up to date "
                    "(default: the test cache, build/test-programs/TARGET/npu-plain)")
    args = ap.parse_args(argv)
    out = args.out or str(ROOT / "build" / "test-programs" / args.target / "npu-plain")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("torchao", "executorch", "torch"):
        logging.getLogger(noisy).setLevel(logging.ERROR)

    import numpy as np
    from executorch.exir._serialize._program import deserialize_pte_binary

    from emlkit.compile import compile_model, make_options
    from emlkit.errors import AotError
    from emlkit.lower import LowerOptions
    from emlkit.npu.blob import parse_blob
    from emlkit.npu.commands import decode
    from emlkit.npu.errors import NpuError
    from emlkit.npu.run import machine_for, run_blob
    from emlkit.npu.program import run_bundled

    rows = []
    for name in [m for m in args.models.split(",") if m]:
        try:
            res = compile_model(name, args.target, out, options=LowerOptions(), reuse_cache=True)
        except AotError:
            # Some models (global_avgpool) reach the NPU only through our rewrites: time what users run.
            res = compile_model(name, args.target, str(Path(out).parent / "lut1-el0-af0"), options=make_options(),
                                reuse_cache=True)
        prog = deserialize_pte_binary(res.pte.read_bytes()).program
        blobs = [bytes(d.data) for d in prog.backend_delegate_data]
        n_cmds = sum(sum(1 for c in decode(parse_blob(b).commands, 0, machine_for(parse_blob(b)).arch) if c.is_operation)
                     for b in blobs)
        best_delegate = best_program = float("inf")
        try:
            _check(blobs, run_blob, parse_blob, np)
        except NpuError as err:
            rows.append({"model": name, "npu_commands": n_cmds, "status": f"error: {err}"})
            log.info("%-16s %5d NPU commands  not runnable: %s", name, n_cmds, err)
            continue
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for b in blobs:
                vb = parse_blob(b)
                run_blob(vb, _zeros(vb, np))
            best_delegate = min(best_delegate, time.perf_counter() - t0)
            t0 = time.perf_counter()
            result = run_bundled(res.bpte.read_bytes())
            best_program = min(best_program, time.perf_counter() - t0)
        rows.append({"model": name, "npu_commands": n_cmds, "delegate_s": round(best_delegate, 4),
                     "program_s": round(best_program, 4), "status": result["status"]})
        log.info("%-16s %5d NPU commands  delegate %.3f s  whole program %.3f s  %s", name, n_cmds,
                 best_delegate, best_program, result["status"])
    print(json.dumps(rows))
    return 0


def _zeros(vb, np) -> list:  # type: ignore[no-untyped-def]
    kinds = {1: np.int8, 2: np.int16, 4: np.int32}
    return [np.zeros(int(np.prod(io.shape)), kinds[io.elem_size]) for io in vb.inputs]


def _check(blobs, run_blob, parse_blob, np) -> None:  # type: ignore[no-untyped-def]
    for b in blobs:
        vb = parse_blob(b)
        run_blob(vb, _zeros(vb, np))


if __name__ == "__main__":
    raise SystemExit(main())
