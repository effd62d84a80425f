"""Compile-time check of Vela's output on the functional model.

The bundled expected outputs of an Ethos-U program come from tosa_reference_model run on the TOSA graph Vela was
given. Vela (regor) can still write a command stream that computes something else: Vela 5.1.0 does for int16
fully connected stacks at batch > 1. Running each delegate's command stream on the functional model with the
inputs the reference run gave it catches that at compile time, before a board or FVP shows a FAIL.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from emlkit.reference import DelegateIO, tensor_to_numpy

log = logging.getLogger(__name__)


def check_delegates(blobs: dict[str, bytes], calls: Sequence[DelegateIO]) -> list[dict[str, Any]]:
    """One row per delegate call: commands run and the largest difference (in integer steps) from TOSA's outputs,
    or why the call could not be checked (a command the model does not cover)."""
    from emlkit.npu.run import run_blob  # the NPU model is only needed for Ethos-U compiles

    rows: list[dict[str, Any]] = []
    for call in calls:
        row: dict[str, Any] = {"delegate": call.name}
        try:
            got, trace = run_blob(blobs[call.name], [tensor_to_numpy(t) for t in call.inputs])
        except Exception as exc:  # an unmodelled command must not stop a compile; the run reports it as a SKIP
            log.debug("NPU model check of %s not run", call.name, exc_info=True)
            rows.append({**row, "checked": False, "reason": str(exc).splitlines()[0] if str(exc) else type(exc).__name__})
            continue
        diff, count = 0, 0
        for g, want in zip(got, call.outputs):
            w = tensor_to_numpy(want).astype(np.int64)
            d = np.abs(g.reshape(w.shape).astype(np.int64) - w)
            diff, count = max(diff, int(d.max(initial=0))), count + int(np.count_nonzero(d))
        rows.append({**row, "checked": True, "commands": len(trace), "max_diff_steps": diff, "elements_differing": count})
    return rows


def warn_on_mismatch(rows: Sequence[dict[str, Any]]) -> None:
    for r in rows:
        if r.get("checked") and r["max_diff_steps"]:
            log.warning("Vela's command stream for %s disagrees with its TOSA graph on the NPU functional model: "
                        "%d output elements off, up to %d steps; the NPU would not reproduce the expected outputs "
                        "(docs/ethos-u.md: 'Known Vela miscompiles'; compile for a cortex-m target or change the layer)",
                        r["delegate"], r["elements_differing"], r["max_diff_steps"])
