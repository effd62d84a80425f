"""LUT fusion benchmark: op count, program size (and Vela cycles on Ethos-U) with and without the pass.

Printed, not asserted. Instructions per inference need the firmware runner (aot.run); until the
lead wires it in, that column says "not measured".

    .venv/bin/python scripts/bench_lut.py [--models lut_activations mobilenet_v2] [--targets cortex-m55 ethos-u55-128]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

log = logging.getLogger("bench_lut")


def compile_one(model: str, target: str, fusion: bool, out: Path) -> dict[str, Any]:
    from aot.compile import compile_model, make_options

    res = compile_model(model, target, out / ("fused" if fusion else "unfused"),
                        options=make_options(lut_fusion=fusion, allow_float=True))
    rep = res.report
    return {"ops": sum(rep["ops"].values()), "bytes": res.pte.stat().st_size,
            "vela": (rep.get("vela") or {}).get("total_cycles"), "regions": rep.get("lut_fusion", {}).get("regions_fused", 0),
            "snr": rep["numerics"]["snr_db"]}


def ratio(a: Any, b: Any) -> str:
    return f"{a / b:.3f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["lut_activations", "mobilenet_v2"])
    ap.add_argument("--targets", nargs="+", default=["cortex-m55", "ethos-u55-128"])
    ap.add_argument("--skip-firmware-check", action="store_true",
                    help="bypass the firmware-registry check (while firmware/ops/*.def is incomplete)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ("torch", "executorch", "torchao"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if args.skip_firmware_check:
        from aot import verify
        verify.check_supported = lambda *a, **k: None  # type: ignore[assignment]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            for target in args.targets:
                try:
                    on = compile_one(model, target, True, Path(tmp) / model / target)
                    off = compile_one(model, target, False, Path(tmp) / model / target)
                except Exception as exc:  # report and go on with the other rows
                    log.error("%s on %s: %s", model, target, str(exc).splitlines()[0])
                    continue
                rows.append((model, target, on, off))
    head = f"{'model':<16} {'target':<14} {'regions':>7} {'ops on/off':>11} {'ratio':>6} {'bytes on/off':>15} {'ratio':>6} " \
           f"{'instr/inference':>16} {'vela cycles on/off':>21} {'ratio':>6} {'SNR on/off dB':>14}"
    log.info(head)
    for model, target, on, off in rows:
        vela = f"{on['vela']}/{off['vela']}" if on["vela"] is not None else "-"
        log.info(f"{model:<16} {target:<14} {on['regions']:>7} {on['ops']:>5}/{off['ops']:<5} {ratio(on['ops'], off['ops']):>6} "
                 f"{on['bytes']:>7}/{off['bytes']:<7} {ratio(on['bytes'], off['bytes']):>6} {'not measured':>16} "
                 f"{vela:>21} {ratio(on['vela'], off['vela']):>6} {on['snr']:>6.1f}/{off['snr']:<6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
