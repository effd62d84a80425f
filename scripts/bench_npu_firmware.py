"""Ethos-U programs through the firmware (QEMU + co-simulated NPU) next to the host run, per model.

For each model and Ethos-U target: the firmware run's CPU instructions (QEMU -icount: the CPU operators, the
EthosUBackend's input/output copies and the driver), the NPU cycles Vela estimates for the delegates, whether
the firmware's outputs are bit-identical to the host run's (CPU operators through ExecuTorch's references, the
delegate on the functional model), and for comparison the CPU instructions of the same model compiled for
cortex-m55 (everything on the CPU). Prints a table and writes JSON.

    .venv/bin/python scripts/bench_npu_firmware.py [--models conv_relu,mobilenet_v2] [--targets ethos-u55-128]
                                                  [--json out/bench_npu_firmware.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("bench_npu_firmware")
ROOT = Path(__file__).resolve().parent.parent
TARGETS = ["ethos-u55-128", "ethos-u65-256", "ethos-u85-256"]


def _host_outputs(bpte: bytes) -> tuple[list[bytes], float, str]:
    from emlkit.npu.program import run_bundled

    t0 = time.monotonic()
    d = run_bundled(bpte)
    secs = time.monotonic() - t0
    outs = [t.contiguous().numpy().tobytes() for t in d["runs"][0].outputs]
    return outs, secs, d["status"]


def bench(model: str, target: str, out: Path) -> dict[str, Any]:
    from emlkit.compile import compile_model, make_options
    from emlkit.deploy.execute import stand_in_for
    from emlkit.deploy.boards import load_board
    from emlkit.deploy.sim_qemu import run_qemu
    from emlkit.npu.program import _bp_tensor
    from emlkit.targets import get_target

    tgt = get_target(target)
    cres = compile_model(model, target, out / "programs", options=make_options(), reuse_cache=True)
    board = load_board(tgt.default_board)
    if board.qemu is None:
        board = stand_in_for(board)
    data = cres.bpte.read_bytes()
    host_outs, host_s, host_status = _host_outputs(data)
    t0 = time.monotonic()
    r = run_qemu(cres.bpte, board, timeout=300, save_outputs=True, npu=tgt.npu)
    fw_s = time.monotonic() - t0
    fw_outs = r.output_data
    row: dict[str, Any] = {"model": model, "target": target, "board": board.name, "host_status": host_status,
                           "host_seconds": round(host_s, 2), "firmware_status": r.status, "firmware_seconds": round(fw_s, 2),
                           "vela_npu_only_cycles_estimate": (cres.report.get("vela") or {}).get("npu_only_cycles_estimate"),
                           "vela_total_cycles_estimate": (cres.report.get("vela") or {}).get("total_cycles_estimate")}
    if r.skip_reason:
        row["firmware_status"] = "skip: " + r.skip_reason
        return row
    res = r.run
    if res is not None and res.total is not None:
        ops = {p.op: p.count for p in res.per_op}
        row.update(qemu_instructions=res.total, delegate_qemu_instructions=ops.get("delegate:EthosUBackend"),
                   npu_jobs=len(r.npu.jobs) if r.npu else 0, npu_commands=sum(j.commands for j in r.npu.jobs) if r.npu else 0,
                   delegate_bytes=res.raw.get("delegate_bytes"))
    # The host keeps outputs in logical order, the device in its dim order: compare bytes in the device's layout.
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program

    bp = deserialize_from_flatbuffer_to_bundled_program(data)
    want = [_bp_tensor(v.val).contiguous().numpy().tobytes() for v in bp.method_test_suites[0].test_cases[0].expected_outputs]
    row["firmware_equals_host"] = fw_outs == host_outs == want if len(fw_outs) == len(want) else False
    cm = compile_model(model, "cortex-m55", out / "programs", options=make_options(), reuse_cache=True)
    rc = run_qemu(cm.bpte, "corstone-300", timeout=300)
    row["cortex_m55_qemu_instructions"] = rc.run.total if rc.run is not None else None
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="all", help="comma-separated zoo models, or all")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-npu-firmware")
    ap.add_argument("--json", type=Path, help="write the rows here (default OUT/results.json)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        from emlkit import models
    except ImportError:
        print("error: the emlkit package is not importable: run ./scripts/setup.sh (it installs it into .venv)", file=sys.stderr)
        return 2
    names = list(models.ZOO) if args.models == "all" else args.models.split(",")
    unknown = [m for m in names if m not in models.ZOO]
    if unknown:
        print(f"error: unknown model(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    rows = []
    for t in args.targets.split(","):
        for m in names:
            row = bench(m, t, args.out)
            rows.append(row)
            print(f"{m:18s} {t:14s} {row.get('board', ''):13s} fw {row['firmware_status']:5s} "
                  f"QEMU instr. {row.get('qemu_instructions', '-'):>10} (delegate {row.get('delegate_qemu_instructions', '-')}) "
                  f"Vela NPU-only est. {row.get('vela_npu_only_cycles_estimate', '-'):>8} total est. "
                  f"{row.get('vela_total_cycles_estimate', '-'):>8} | cortex-m55 {row.get('cortex_m55_qemu_instructions', '-'):>10} "
                  f"| fw == host {row.get('firmware_equals_host')} (host {row['host_seconds']} s, fw {row['firmware_seconds']} s)",
                  flush=True)
    path = args.json or args.out / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {path}")
    bad = [r for r in rows if r["firmware_status"] != "pass" or not r.get("firmware_equals_host")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
