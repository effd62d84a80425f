"""A long-lived worker process of `emlkit opsuite` (emlkit/opsuite/pool.py starts them): reads one JSON job a line
on stdin, writes one JSON record a line on its own copy of stdout. Everything else it prints goes to stderr.

Jobs: "emlkit" compiles a case file for a target and runs it on the target's default board under QEMU, the
path `emlkit run` takes (compile_model, then emlkit.run.execute), and compares the device's outputs with the eager
float model; "etref" lowers it with ExecuTorch's own Cortex-M flow, compile only, and classifies the final graph
with emlkit.verify.check_program. The records are raw: emlkit/opsuite/classify.py turns them into statuses.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from emlkit.errors import EXIT_INTERNAL, EXIT_OK, AotError

# The suite's comparison (runner.run_test -> run_method_and_compare_outputs).
SUITE_ATOL = 1e-1
SUITE_RTOL = 4e-2


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _failure(exc: BaseException) -> dict[str, Any]:
    """What the CLI would end with: the AotError's line and status, or an internal error (status 6)."""
    if isinstance(exc, AotError):
        return {"exit": exc.exit_code, "line": _line(exc)}
    return {"exit": EXIT_INTERNAL, "line": f"internal error (a bug in emlkit): {type(exc).__name__}: {_line(exc)}"}


def compare_outputs(device: list[Any], eager: list[Any]) -> list[dict[str, Any]]:
    """Per output: the suite's allclose (atol 1e-1, rtol 4e-2, NaN equal to NaN) of the device's output against
    the eager float model's, and the largest difference."""
    import torch

    rows = []
    for i, ref in enumerate(eager):
        if i >= len(device):
            rows.append({"ok": False, "why": f"output {i} missing on the device"})
            continue
        dev = torch.as_tensor(device[i])
        if tuple(dev.shape) != tuple(ref.shape):
            rows.append({"ok": False, "why": f"output {i} has shape {tuple(dev.shape)}, eager {tuple(ref.shape)}"})
            continue
        d, r = dev.double(), ref.detach().double()
        ok = bool(torch.allclose(d, r, atol=SUITE_ATOL, rtol=SUITE_RTOL, equal_nan=True))
        diff = (d - r).abs().nan_to_num(0.0)
        rows.append({"ok": ok, "max_abs": float(diff.max()) if diff.numel() else 0.0,
                     "dtype": str(ref.dtype).replace("torch.", "")})
    return rows


def _report_part(rep: dict[str, Any]) -> dict[str, Any]:
    return {k: rep.get(k) for k in ("ops", "partitions", "delegated_ops", "numerics", "verify")}


def run_emlkit(job: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import torch

    from emlkit import numerics
    from emlkit.compile import compile_model, make_options
    from emlkit.load import load_model
    from emlkit.run import execute
    from emlkit.targets import get_target

    target = get_target(job["target"])
    work = Path(job["workdir"])
    saved = work / "outputs"
    rec: dict[str, Any] = {"stage": "compile"}
    try:
        case = load_model(job["case_file"])
        with torch.no_grad():
            eager = numerics.flatten_outputs(case.module(*case.inputs))
        cres = compile_model(job["case_file"], target.name, work, options=make_options(allow_float=job["allow_float"]),
                             reuse_cache=True)
        rec["report"] = _report_part(cres.report)
        rec["stage"] = "run"
        for old in saved.glob("output_*.npy"):
            old.unlink()
        o = execute(cres, target.default_board, "qemu", float(job["sim_timeout"]), "mve", str(saved))
    except Exception as exc:  # noqa: BLE001 - every failure is a classified record, as the CLI would end
        return {**rec, **_failure(exc)}
    rec.update(exit=o.exit_code, line=o.reason, run_status=o.status, board=o.board)
    r = o.result
    if r is not None:
        rec["count"], rec["unit"] = r.total, r.unit
        rec["per_op"] = [{"op": p.op, "calls": p.calls, "count": p.count} for p in r.per_op]
        steps = [x.max_steps for x in r.outputs if x.max_steps is not None]
        rec["max_steps"] = max(steps) if steps else None
    if o.exit_code == EXIT_OK:
        files = sorted(saved.glob("output_*.npy"), key=lambda p: int(p.stem.split("_")[1]))
        rec["compare"] = compare_outputs([np.load(p) for p in files], eager)
    return rec


def run_etref(job: dict[str, Any]) -> dict[str, Any]:
    """ExecuTorch's own Cortex-M flow, as emlkit/lower/cortex_m.py drives it, without any of our passes:
    CortexMQuantizer, to_edge_transform_and_lower with cortex_m_edge_compile_config, CortexMPassManager (for
    the Cortex-M55, ExecuTorch's default)."""
    import copy

    import torch
    from executorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config
    from executorch.backends.cortex_m.passes.cortex_m_pass_manager import CortexMPassManager
    from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from emlkit import verify
    from emlkit.load import load_model
    from emlkit.lower.cortex_m import target_config
    from emlkit.lower.export import export_graph, export_module
    from emlkit.targets import get_target

    stage = "load"
    try:
        case = load_model(job["case_file"])
        cl = torch.channels_last
        module = copy.deepcopy(case.module).to(memory_format=cl)
        inputs = tuple(t.to(memory_format=cl) if t.dim() == 4 else t for t in case.inputs)
        with torch.no_grad():
            stage = "quantize"
            prepared = prepare_pt2e(export_graph(module, inputs), CortexMQuantizer())
            prepared(*inputs)
            quantized = convert_pt2e(prepared)
            stage = "lower"
            edge = to_edge_transform_and_lower(export_module(quantized, inputs),
                                               compile_config=cortex_m_edge_compile_config())
            ep = CortexMPassManager(edge.exported_program(),
                                    target_config=target_config(get_target("cortex-m55"))).transform()
    except Exception as exc:  # noqa: BLE001
        return {"stage": stage, "exit": 1, "line": f"{stage}: {type(exc).__name__}: {_line(exc)}"}
    check = verify.check_program(ep.graph_module)
    return {"stage": "lower", "exit": EXIT_OK, "float_ops": sorted({f.op for f in check.float_islands}),
            "aten_on_int": sorted({f.op for f in check.broken}), "line": check.summary()}


JOBS = {"emlkit": run_emlkit, "etref": run_etref}


def main() -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # fd 1 is stderr now: anything printed (rich tables, tools we start) stays out of the protocol
    warnings.filterwarnings("ignore")
    from emlkit.logsetup import setup_logging

    setup_logging(False)
    for text in sys.stdin:
        job = json.loads(text)
        t0 = time.monotonic()
        try:
            rec = JOBS[job["kind"]](job)
        except Exception as exc:  # noqa: BLE001 - a bug here must not end the worker
            rec = _failure(exc)
        rec["seconds"] = round(time.monotonic() - t0, 1)
        proto.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
