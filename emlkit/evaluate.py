"""`evaluate`: a model's accuracy on a data set, three ways: the float PyTorch model, the quantized program on the
host reference (what the compile step bundles as expected outputs) and the device, which runs every sample as one
bundled test case in ONE firmware run.

The runner's result line gives, per output, the largest difference from the bundled reference over all cases
(firmware/runner/main.c), not each case's outputs. A device that matches the reference on every case (0 steps)
has the reference's predictions, so its accuracy is the reference's and the argmax agreement is 100%. A device off
by K steps somewhere: a sample whose reference top-1 leads its runner-up by more than 2K steps keeps its argmax, so
the agreement and the device's top-1 are given as bounds (and the command exits 1, a wrong output).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from emlkit.errors import EXIT_MISMATCH, EXIT_OK, AotError
from emlkit.load import calibration_set, load_model, npz_arrays, samples_from_arrays
from emlkit.requests import EvaluateRequest

log = logging.getLogger(__name__)

INPUT_KEY = "x"
DEFAULT_LABELS = "y"


@dataclass
class EvalData:
    samples: list[tuple[torch.Tensor, ...]]
    labels: np.ndarray | None        # one per sample (or None)
    label_key: str | None
    task: str                        # classification, regression or none (no labels)


def load_data(path: Path, labels: str | None, limit: int | None, example: tuple[torch.Tensor, ...]) -> EvalData:
    """The samples of an .npz (array x, sample axis first) and its labels (array LABELS, default y when present),
    checked against the model's example inputs; the first LIMIT samples only when given."""
    arrays = npz_arrays(path, "data file")
    if INPUT_KEY not in arrays:
        raise AotError(f"data file {path} has no array '{INPUT_KEY}' (it has: {', '.join(sorted(arrays)) or 'none'}): "
                       f"save the inputs as np.savez(f, {INPUT_KEY}=inputs[N, ...], {DEFAULT_LABELS}=labels[N])")
    if limit is not None and limit < 1:
        raise AotError(f"--limit {limit}: give a positive number of samples")
    x = arrays[INPUT_KEY]
    if getattr(x, "ndim", 0) >= 1 and limit is not None:
        x = x[:limit]  # type: ignore[index]
    samples = samples_from_arrays([x], [INPUT_KEY], example, f"data file {path}")
    key = labels if labels is not None else (DEFAULT_LABELS if DEFAULT_LABELS in arrays else None)
    if key is None:
        return EvalData(samples, None, None, "none")
    if key not in arrays or key == INPUT_KEY:
        raise AotError(f"data file {path} has no labels array '{key}' (it has: {', '.join(sorted(arrays))}): "
                       "name the labels with --labels KEY")
    y = np.asarray(arrays[key])
    if y.ndim == 0 or (limit is None and len(y) != len(samples)) or len(y) < len(samples):
        raise AotError(f"data file {path}: labels '{key}' hold {len(y) if y.ndim else 0} entries for "
                       f"{len(samples)} samples: give one label per sample")
    y = y[:len(samples)]
    if np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_:
        return EvalData(samples, y.astype(np.int64), key, "classification")
    if np.issubdtype(y.dtype, np.floating):
        return EvalData(samples, y.astype(np.float64), key, "regression")
    raise AotError(f"data file {path}: labels '{key}' are {y.dtype}: give integer class labels (top-1) or float "
                   "targets (MSE)")


def _first_output(outs: Any) -> np.ndarray:
    from emlkit.numerics import flatten_outputs

    return flatten_outputs(outs)[0].detach().float().numpy()


def _score(outputs: list[np.ndarray], data: EvalData) -> dict[str, Any]:
    """Top-1 (classification: argmax of output 0's last axis) or MSE (regression) of one set of outputs."""
    if data.labels is None:
        return {}
    if data.task == "classification":
        pred = np.array([int(np.argmax(o.reshape(-1))) for o in outputs])
        correct = int((pred == data.labels.reshape(len(pred), -1)[:, 0]).sum())
        return {"top1": correct / len(pred), "correct": correct}
    errs = [float(np.mean((o.astype(np.float64).reshape(-1) - np.asarray(t, np.float64).reshape(-1)) ** 2))
            for o, t in zip(outputs, data.labels)]
    return {"mse": float(np.mean(errs))}


def _margins_steps(outputs: list[np.ndarray], scale: float | None) -> np.ndarray:
    """Each sample's lead of its top-1 over the runner-up, in quantization steps of output 0."""
    out = []
    for o in outputs:
        v = np.sort(o.reshape(-1).astype(np.float64))
        lead = v[-1] - v[-2] if v.size > 1 else math.inf
        out.append(lead / scale if scale else lead)
    return np.array(out)


def device_bounds(ref_out: list[np.ndarray], data: EvalData, scale: float | None,
                  max_steps: int | None) -> tuple[float, list[float] | None]:
    """A device up to MAX_STEPS steps off the reference somewhere (unknown: None): the least fraction of samples
    whose argmax it surely shares (the reference's top-1 leads by more than twice that), and for classification
    the range its top-1 can lie in."""
    k = max_steps if max_steps is not None else math.inf
    safe = _margins_steps(ref_out, scale) > 2 * k
    n = len(ref_out)
    if data.task != "classification" or data.labels is None:
        return float(safe.mean()), None
    ref_pred = np.array([int(np.argmax(o.reshape(-1))) for o in ref_out])
    sure = int(((ref_pred == data.labels) & safe).sum())
    return float(safe.mean()), [sure / n, (sure + int((~safe).sum())) / n]


def evaluate(req: EvaluateRequest) -> tuple[dict[str, Any], Any]:
    """The evaluation's JSON record and the device run's outcome (emlkit/run.py RunOutcome)."""
    from emlkit import emit, program_info, reference, verify
    from emlkit.compile import CompileResult, lower_model, output_folder, to_executorch
    from emlkit.memory_plan import DEFAULT_PLANNER
    from emlkit.run import execute

    spec = req.program
    target = spec.target
    model = load_model(spec.model)
    data = load_data(req.data, req.labels, req.limit, model.inputs)
    calib = calibration_set(spec.calibration, model.inputs)
    out = output_folder(req.output)
    with torch.no_grad():
        float_out = [_first_output(model.module(*s)) for s in data.samples]
    lowered, tosa = lower_model(model, target, spec.options, calib.samples,
                                out / f"{model.name}_{target.name}_eval.vela")
    # a streaming program (--streaming-state) runs the samples as one stream on the device: so does the reference
    stream: reference.StreamState | None = {} if spec.options is not None and spec.options.streaming_state else None
    with torch.no_grad():  # before the program is emitted: emitting changes the edge graph
        ref_all = [reference.run_lowered(lowered.edge, s, tosa, stream=stream) for s in data.samples]
    qp = program_info.output_qparams(lowered.edge)
    program = to_executorch(lowered, target, spec.options.memory_planner if spec.options else DEFAULT_PLANNER)
    ref_out = [r[0].detach().float().numpy() for r in ref_all]
    stem = f"{model.name}_{target.name}_eval"
    pte, bpte = out / f"{stem}.pte", out / f"{stem}.bpte"
    bundled = emit.bpte_bytes(emit.bundle(program, list(zip(data.samples, ref_all))))
    verify.check_device_load(program, bundled, target.name)  # as compile: refused with the device's message first
    emit.write_pte(program, pte)
    emit.atomic_write(bpte, bundled)
    needs = verify.program_needs(program) if target.flow == "cortex_m" else None
    report = {"program_needs": needs.to_dict() if needs is not None else None}
    cres = CompileResult(model.name, target, pte, bpte, out / f"{stem}.json", report)
    outcome = execute(cres, req.board, req.sim, req.timeout, req.kernels, None)
    if outcome.status not in ("PASS", "FAIL"):
        from emlkit.run import exit_status

        exit_status(outcome, None)  # raises the run's one-line error
    res = outcome.result
    scale = qp[0]["scale"] if qp and qp[0] else None
    steps = [o.max_steps for o in res.outputs]
    max_steps = None if any(s is None for s in steps) else max(steps, default=0)
    max_abs = None if any(o.max_abs is None for o in res.outputs) else max((o.max_abs for o in res.outputs), default=0.0)
    exact = max_abs == 0.0 and max_steps in (0, None)  # None: a float output (no step), equal here
    n = len(data.samples)
    ref_score = _score(ref_out, data)
    device: dict[str, Any] = {"status": outcome.status.lower(), "cases": res.cases}
    agreement: dict[str, Any] = {"max_steps": max_steps, "max_abs": max_abs}
    if exact:
        device.update(ref_score)
        agreement["argmax"] = 1.0
    else:
        agree_min, top1_range = device_bounds(ref_out, data, scale, max_steps)
        agreement.update({"argmax": None, "argmax_min": agree_min})
        if top1_range is not None:
            device.update({"top1": None, "top1_range": top1_range})
    if res.total is not None:
        device[f"{res.unit}_per_inference"] = round(res.total / max(res.cases, 1))
    record = {
        "model": model.name, "target": target.name, "board": outcome.board, "sim": outcome.sim,
        "data": str(req.data), "samples": n, "task": data.task, "labels": data.label_key,
        "float": _score(float_out, data), "reference": ref_score, "device": device, "agreement": agreement,
        "calibration": calib.report_entry(),
    }
    return record, outcome


def _pct(score: dict[str, Any], key: str = "top1") -> str:
    if key in score and score[key] is not None:
        return f"{100 * score[key]:.2f}% ({score.get('correct')} correct)"
    if "top1_range" in score:
        lo, hi = score["top1_range"]
        return f"{100 * lo:.2f}% .. {100 * hi:.2f}% (per-case outputs not in the result line)"
    return "-"


def print_evaluation(record: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{record['model']} on {record['board']} ({record['sim']}), {record['target']}: "
                    f"{record['samples']} samples of {record['data']}")
    t.add_column("")
    metric = {"classification": "top-1", "regression": "MSE", "none": "(no labels)"}[record["task"]]
    t.add_column(metric)
    for name, key in (("float model", "float"), ("int8 host reference", "reference"), ("device", "device")):
        score = record[key]
        cell = _pct(score) if record["task"] == "classification" else (
            f"{score['mse']:.6g}" if score.get("mse") is not None else "-")
        t.add_row(name, cell)
    a = record["agreement"]
    agree = f"{100 * a['argmax']:.2f}%" if a.get("argmax") is not None else f">= {100 * a['argmax_min']:.2f}%"
    t.add_row("device vs reference", f"argmax agrees {agree}, max {a['max_steps']} steps / {a['max_abs']}")
    c = record["calibration"]
    t.add_row("calibration", f"{c['samples']} samples ({c['kind']}{': ' + c['source'] if c['source'] else ''})")
    per = [k for k in record["device"] if k.endswith("_per_inference")]
    if per:
        t.add_row(per[0].replace("_", " "), f"{record['device'][per[0]]:,}")
    Console().print(t)


def evaluate_model(req: EvaluateRequest) -> int:
    """Evaluate, print the table and one JSON line; 0 when the device matched the reference on every sample, 1
    (a wrong output) when it did not; bad input, device errors and timeouts are AotErrors with one line."""
    record, outcome = evaluate(req)
    print_evaluation(record)
    print(json.dumps(record), flush=True)
    return EXIT_OK if record["agreement"]["argmax"] == 1.0 else EXIT_MISMATCH
