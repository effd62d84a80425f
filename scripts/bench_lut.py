"""LUT fusion benchmark: op count, program size (and NPU ops, Vela cycles on Ethos-U) with and without the pass.

Printed, not asserted. NPU cycles are Vela's estimate for the delegates. Instructions per inference on
Cortex-M targets are measured: the program runs on corstone-300 under QEMU (-icount shift=0, so
instructions, not cycles) with the MVE kernels, as `python -m emlkit run` does (--no-run skips that).

    .venv/bin/python scripts/bench_lut.py [--models lut_activations mobilenet_v2] [--targets cortex-m55 ethos-u55-128 ethos-u55-128-a16w8]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path
from typing import Any


log = logging.getLogger("bench_lut")


def compile_one(model: str, target: str, fusion: bool, out: Path, run: bool = True) -> dict[str, Any]:
    from emlkit.compile import compile_model, make_options

    res = compile_model(model, target, out / ("fused" if fusion else "unfused"),
                        options=make_options(lut_fusion=fusion, allow_float=True))
    rep = res.report
    instr = None
    if run and res.target.flow == "cortex_m":
        from emlkit.run import execute

        o = execute(res, "corstone-300", "qemu", 600, "mve", None)  # QEMU models only the M55 board
        instr = o.result.total if o.status == "PASS" and o.result is not None else None
        if instr is None:
            log.warning("%s on %s did not run: %s %s", model, target, o.status, o.reason)
    return {"instr": instr, "ops": sum(rep["ops"].values()), "bytes": res.pte.stat().st_size,
            "npu_ops": sum(rep.get("delegated_ops", {}).values()) if rep.get("vela") else None,
            "vela": (rep.get("vela") or {}).get("npu_only_cycles_estimate"), "regions": rep.get("lut_fusion", {}).get("regions_fused", 0),
            "skipped": len(rep.get("lut_fusion", {}).get("skipped", [])), "snr": rep["numerics"]["snr_db"]}


def ratio(a: Any, b: Any) -> str:
    return f"{a / b:.3f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["lut_activations", "mobilenet_v2"])
    ap.add_argument("--targets", nargs="+", default=["cortex-m55", "ethos-u55-128", "ethos-u55-128-a16w8"])
    ap.add_argument("--no-run", action="store_true", help="skip the QEMU runs (no instruction counts)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ("torch", "executorch", "torchao"):
        logging.getLogger(name).setLevel(logging.ERROR)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            for target in args.targets:
                try:
                    on = compile_one(model, target, True, Path(tmp) / model / target, not args.no_run)
                    off = compile_one(model, target, False, Path(tmp) / model / target, not args.no_run)
                except Exception as exc:  # report and go on with the other rows
                    log.error("%s on %s: %s", model, target, str(exc).splitlines()[0])
                    continue
                rows.append((model, target, on, off))
    head = f"{'model':<16} {'target':<19} {'regions':>7} {'skip':>4} {'ops on/off':>11} {'ratio':>6} " \
           f"{'bytes on/off':>15} {'ratio':>6} {'NPU ops on/off':>14} {'Vela NPU-only est. on/off':>25} {'ratio':>6} " \
           f"{'SNR on/off dB':>15} {'QEMU instructions on/off':>25} {'ratio':>6}"
    log.info(head)
    for model, target, on, off in rows:
        # NPU ops: ops inside the Ethos-U delegates; Vela's NPU-only cycle estimate (not a measurement).
        npu = f"{on['npu_ops']}/{off['npu_ops']}" if on["npu_ops"] is not None else "-"
        vela = f"{on['vela']}/{off['vela']}" if on["vela"] is not None else "-"
        log.info(f"{model:<16} {target:<19} {on['regions']:>7} {on['skipped']:>4} {on['ops']:>5}/{off['ops']:<5} "
                 f"{ratio(on['ops'], off['ops']):>6} {on['bytes']:>7}/{off['bytes']:<7} {ratio(on['bytes'], off['bytes']):>6} "
                 f"{npu:>14} {vela:>25} {ratio(on['vela'], off['vela']):>6} {on['snr']:>7.2f}/{off['snr']:<7.2f} "
                 f"{str(on['instr']) + '/' + str(off['instr']) if on['instr'] else '-':>25} {ratio(on['instr'], off['instr']):>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
