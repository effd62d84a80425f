"""Per-command trace of the functional model, checked against the TOSA reference model.

The TOSA graph Vela compiled is re-serialised with every intermediate tensor
marked as a graph output, run once on tosa_reference_model, and each NPU
command's OFM is compared with the TOSA tensors of the same shape and type. A
command is reported against the closest such tensor (0 when one matches
exactly); commands that write only part of a tensor (Vela's stripes and the
1x1 pools it uses for layout changes) usually have no tensor of their shape
and show "-".
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from emlkit.native_output import stdout_to_log
from emlkit.npu.errors import NpuError
from emlkit.npu.execute import TraceEntry
from emlkit.npu.run import run_blob

log = logging.getLogger(__name__)


@dataclass
class TraceRow(TraceEntry):
    """A trace entry (its OFM dropped) and the TOSA tensor closest to that OFM."""
    tosa_tensor: str | None = None
    max_diff: int | None = None

    def format(self) -> str:
        diff = "-" if self.max_diff is None else str(self.max_diff)
        ref = self.tosa_tensor or "-"
        return (f"{self.index:4d} 0x{self.offset:06x} {self.op:<12} ifm {str(self.ifm_shape):<16} "
                f"ofm {str(self.ofm_shape):<16} max diff {diff:>4}  vs {ref}")


def tosa_intermediates(tosa: bytes, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Every non-constant tensor of a TOSA graph, as tosa_reference_model computes it."""
    import tosa_reference_model as ref  # type: ignore[import-not-found]
    import tosa_serializer as ts  # type: ignore[import-not-found]

    ser = ts.TosaSerializer("")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "graph.tosa")
        Path(path).write_bytes(tosa)
        with stdout_to_log(log, "tosa_serializer"):
            loaded = ser.loadTosaFlatbuffer(path)
        if not loaded:
            raise NpuError("the delegate's TOSA graph does not load in tosa_serializer")
    blk = ser.regions[0].basicBlocks[0]
    names = list(blk.outputs)
    for op in blk.operators:
        if str(op.op) in ("Op.CONST", "Op.CONST_SHAPE"):
            continue
        for o in op.outputs:
            if o not in names:
                blk.addOutput(o)
                names.append(o)
    with stdout_to_log(log, "tosa_reference_model"):
        outs, status = ref.run(bytes(ser.serialize()), [np.ascontiguousarray(a) for a in inputs], verbosity="NONE",
                               initialize_variable_tensor_from_numpy=True)
    if status != ref.GraphStatus.TOSA_VALID:
        raise NpuError(f"tosa_reference_model rejected the traced TOSA graph (status {status})")
    return {n: np.asarray(o) for n, o in zip(names, outs)}


def _hwc(shape: tuple[int, ...]) -> tuple[int, ...]:
    s = [d for d in shape]
    while len(s) > 3 and s[0] == 1:
        s = s[1:]
    while len(s) < 3:
        s = [1] + s
    return tuple(s)


def compare(entries: Sequence[TraceEntry], tensors: dict[str, np.ndarray]) -> list[TraceRow]:
    rows = []
    by_shape: dict[tuple[int, ...], list[tuple[str, np.ndarray]]] = {}
    for n, t in tensors.items():
        by_shape.setdefault(_hwc(t.shape), []).append((n, t))
    for e in entries:
        best: tuple[int, str] | None = None
        if e.ofm is not None:
            for n, t in by_shape.get(tuple(e.ofm.shape), []):
                if t.dtype.itemsize > 2 and e.op not in ("CONV", "DEPTHWISE"):
                    continue  # int32 TOSA tensors are rescale-internal, fused away by Vela
                d = int(np.abs(t.reshape(e.ofm.shape).astype(np.int64) - e.ofm).max())
                if best is None or d < best[0]:
                    best = (d, n)
        rows.append(TraceRow(e.index, e.offset, e.op, tuple(e.ifm_shape), tuple(e.ofm_shape), detail=e.detail,
                             tosa_tensor=best[1] if best else None, max_diff=best[0] if best else None))
    return rows


def trace_delegate(blob: bytes, tosa: bytes | None, inputs: Sequence[np.ndarray]) -> list[TraceRow]:
    """Run a delegate with a per-command trace; with its TOSA graph, each OFM is checked against TOSA."""
    _, entries = run_blob(blob, list(inputs), keep=True)
    tensors = tosa_intermediates(tosa, inputs) if tosa is not None else {}
    return compare(entries, tensors)


def run_bundled(bpte: bytes) -> Any:
    """A bundled program's first test case on the host executor with every NPU command traced (OFMs kept):
    a ProgramRun."""
    from emlkit.npu.program import _bp_tensor, run_pte
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program

    bp = deserialize_from_flatbuffer_to_bundled_program(bpte)
    tc = bp.method_test_suites[0].test_cases[0]
    return run_pte(bytes(bp.program), [_bp_tensor(v.val) for v in tc.inputs], trace=True)


def trace_bundled(bpte: bytes, tosa_graphs: Sequence[bytes | None], run: Any = None) -> list[list[TraceRow]]:
    """Trace every delegate of a bundled program's first test case (RUN: run_bundled's, when made already).
    tosa_graphs[i] is delegate i's graph (the compile writes OUTDIR/<model>_<target>.tosa/lowered_module_<i>.tosa),
    or None to skip the check."""
    run = run if run is not None else run_bundled(bpte)
    result = []
    for i, (entries, ins) in enumerate(zip(run.traces, run.delegate_inputs)):
        tosa = tosa_graphs[i] if i < len(tosa_graphs) else None
        result.append(compare(entries, tosa_intermediates(tosa, ins) if tosa is not None else {}))
    return result


def log_trace(rows: Sequence[TraceRow], delegate: int = 0, logger: Any = log) -> None:
    logger.info("NPU trace, delegate %d (%d commands):", delegate, len(rows))
    for r in rows:
        logger.info("%s", r.format())
