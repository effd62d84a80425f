#!/usr/bin/env python3
"""Peak activation RAM per model: ExecuTorch's memory plan against ours, and the per-layer lower bound.

    .venv/bin/python scripts/bench_memory.py                       # the issue's models, cortex-m55; writes docs/memory.md
    .venv/bin/python scripts/bench_memory.py --models mlp,add --no-docs
    .venv/bin/python scripts/bench_memory.py --json build/memory.json

Each model is quantized and lowered once (as `emlkit compile` does); the same lowered program is then
emitted three times, its arena placed by ExecuTorch's planner and by ours (emlkit/memory_plan.py), and both
programs are loaded by the firmware built for the host (the device's own load check). The figures:
the arena of each plan (memory id 1, bytes; ours with and without in-place outputs), and the lower bound for any plan that keeps a call's output
apart from its inputs: the largest (inputs + output) over the calls. The kernels' scratch is a fixed
per-board buffer outside the arena, so it is not in these figures. The int8-input figures (`--io int8`) are of
the same lowered programs (whole and patch-based) with the int8_io pass applied, as `compile --io int8` applies it
(emlkit/passes/int8_io.py: the leading quantize of each float input removed), planned by ours and load-checked
with int8 test inputs; their ratios are to ExecuTorch's plan of the float-input program.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from emlkit import emit, program_info, reference, verify
from emlkit.compile import int8_io_inputs, lower_model, make_options, to_executorch
from emlkit.load import calibration_set, load_model
from emlkit.memory_plan import layer_bound
from emlkit.targets import get_target

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "memory.md"
PATCH_BANDS = 4
MODELS = ["mobilenet_v2", "mobilenet_v3_small", "unet_small", "mlperf_kws_dscnn", "mlperf_ic_resnet8",
          "mlperf_vww_mobilenet_v1", "mlperf_ad_autoencoder"]

log = logging.getLogger("bench_memory")


@dataclass
class Row:
    model: str
    target: str
    executorch: int        # arena bytes, ExecuTorch's planner
    no_in_place: int       # arena bytes, ours without in-place outputs
    emlkit: int            # arena bytes, ours (the default)
    bound: int             # largest inputs + output of one call
    bound_op: str
    seconds: float
    patch: int = 0          # arena bytes with --patch-stages PATCH_BANDS (ours), 0: no chain to patch
    graph_order: int = 0    # arena bytes, ours with the calls in graph order (emlkit/op_order.py not run)
    int8: int = 0           # arena bytes, ours, the program with int8 inputs (--io int8)
    int8_patch: int = 0     # arena bytes, ours, patch-based with int8 inputs; 0: no chain to patch
    int8_bound: int = 0     # the lower bound of the int8-input program
    int8_bound_op: str = ""
    int8_all: int = 0       # arena bytes, ours, int8 inputs and outputs (--io int8-all)

    @property
    def ratio(self) -> float:
        return self.emlkit / self.executorch if self.executorch else 1.0


def arena(program: object) -> int:
    return int(program_info.memory_plan(program)["arena_total"])


def int8_input_program(lowered: Any, target: Any, tosa: Any, io: str = "int8") -> Any:
    """LOWERED's program with int8 inputs (IO "int8-all": and outputs): a copy of its edge program through the
    int8_io pass (as `compile --io IO` runs it), planned by ours and load-checked by the firmware with int8 test
    inputs."""
    from emlkit.passes.int8_io import Int8Io

    low = copy.copy(lowered)
    low.edge = copy.deepcopy(lowered.edge)
    io_pass = Int8Io()
    io_pass.set_target(target, make_options(io=io))
    low.edge._edge_programs["forward"] = io_pass(low.edge.exported_program())
    low.extra = {**lowered.extra, "int8_io": io_pass.report()}
    low.inputs = int8_io_inputs(low)
    with torch.no_grad():
        expected = reference.run_lowered(low.edge, low.inputs, tosa)
    program = to_executorch(low, target, "emlkit")
    verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [(low.inputs, expected)])), target.name)
    return program


def measure(name: str, target_name: str) -> Row:
    t0 = time.monotonic()
    target = get_target(target_name)
    model = load_model(name)
    with tempfile.TemporaryDirectory() as tmp:
        lowered, tosa = lower_model(model, target, make_options(), calibration_set(None, model.inputs).samples, Path(tmp))
        with torch.no_grad():
            expected = reference.run_lowered(lowered.edge, lowered.inputs, tosa)
        edge = lowered.edge
        int8_program = int8_input_program(lowered, target, tosa)
        int8_all = arena(int8_input_program(lowered, target, tosa, "int8-all"))
        figures: dict[str, int] = {}
        bound = None
        for planner in ("executorch", "emlkit-no-in-place", "emlkit-graph-order", "emlkit"):
            lowered.edge = copy.deepcopy(edge)  # emitting changes the edge graph
            program = to_executorch(lowered, target, planner)
            # The firmware's loader places the tensors and refuses overlapping outputs: a wrong plan stops here.
            verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [(lowered.inputs, expected)])),
                                     target.name)
            figures[planner] = arena(program)
            bound = layer_bound(program)
        assert bound is not None
        # Patch-based first stages (emlkit/passes/patch_stages.py): lowered again, as `--patch-stages` compiles.
        opts = make_options(patch_bands=PATCH_BANDS)
        banded, tosa = lower_model(model, target, opts, calibration_set(None, model.inputs).samples, Path(tmp))
        patch = int8_patch = 0
        if any(p.report().get("patch_bands") for p in opts.program_passes if hasattr(p, "report")):
            int8_patch = arena(int8_input_program(banded, target, tosa))
            with torch.no_grad():
                expected = reference.run_lowered(banded.edge, banded.inputs, tosa)
            program = to_executorch(banded, target, "emlkit")
            verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [(banded.inputs, expected)])),
                                     target.name)
            patch = arena(program)
    int8_bound = layer_bound(int8_program)
    return Row(name, target.name, figures["executorch"], figures["emlkit-no-in-place"], figures["emlkit"], bound.bytes,
               bound.op, round(time.monotonic() - t0, 1), patch, figures["emlkit-graph-order"], arena(int8_program),
               int8_patch, int8_bound.bytes, int8_bound.op, int8_all)


def _and_ratio(arena_bytes: int, executorch: int) -> list[str]:
    """Two cells: a plan's arena and its ratio to ExecuTorch's plan; "-" in both where there is no such plan
    (0 bytes: no chain to patch)."""
    if not arena_bytes:
        return ["-", "-"]
    return [f"{arena_bytes:,}", f"{arena_bytes / executorch:.3f}"]


def _table(columns: list[str], cells: list[list[str]]) -> list[str]:
    """A Markdown table's lines: its header, then a row of cells per entry."""
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(row) + " |" for row in cells)]


def page(rows: list[Row]) -> str:
    lines = [
        "# Peak activation RAM: ExecuTorch's memory plan and ours",
        "",
        "<!-- GENERATED by scripts/bench_memory.py: do not edit by hand. -->",
        "",
        "The arena (bytes of planned activation tensors, memory id 1) of each model compiled for "
        f"`{rows[0].target if rows else 'cortex-m55'}`, "
        "placed by ExecuTorch 1.5.1's default planner (`--memory-planner executorch`), by ours without "
        "in-place outputs (`--memory-planner emlkit-no-in-place`), by ours with the calls in the exported graph's "
        "order (`--memory-planner emlkit-graph-order`) and by ours (`emlkit/memory_plan.py`, the "
        "default: an output over its input, a concat's inputs inside its output, and a stride-1 depthwise "
        "convolution's output starting its lead (the padding's rows and pixels) before its input, where the "
        "firmware's registry allows it and the arena is smaller; unet_small's concats join channels, which NHWC interleaves; the calls reordered "
        "where another valid order plans smaller, emlkit/op_order.py). The lower bound is the "
        "largest inputs + output of one call, which no plan keeping each call's output apart from its inputs "
        "can go under (in place can). Every program passed the firmware's load check. The kernels' scratch is "
        "a per-board buffer outside the arena. Patch-based: ours with `--patch-stages "
        f"{PATCH_BANDS}` (the high-resolution first stages in {PATCH_BANDS} row bands written into one concat, "
        "emlkit/passes/patch_stages.py; - where the model has no such chain); the bands compute halo rows "
        "again, so they cost instructions (measured with `emlkit run`, in the README).",
        "",
        "Every column of the first table is the plan of the program with **float inputs** (the default, `--io "
        "float`), whose first op quantizes each input: the float input (4 bytes an element) is in the arena until "
        "that quantize has read it.",
        "",
    ]
    lines += _table(["model", "ExecuTorch plan B", "ours, no in-place B", "ours, graph order B", "ours B",
                     "ours / ExecuTorch", "lower bound B", "bound at", "patch-based B", "patch-based / ExecuTorch"],
                    [[r.model, f"{r.executorch:,}", f"{r.no_in_place:,}", f"{r.graph_order:,}",
                      *_and_ratio(r.emlkit, r.executorch), f"{r.bound:,}", r.bound_op,
                      *_and_ratio(r.patch, r.executorch)] for r in rows])
    lines += [
        "",
        "## With int8 inputs (`--io int8`)",
        "",
        "Ours (the default planner) for the program with **int8 inputs** (`--io int8`, emlkit/passes/int8_io.py: the "
        "leading quantize is gone and the caller gives the int8 codes, whose scale and zero point the compile report "
        "names), whole and patch-based (`--patch-stages "
        f"{PATCH_BANDS}`): the same lowered programs as above with the int8_io pass applied, as `compile --io int8` "
        "applies it, load-checked by the firmware with int8 test inputs. The ratios are to the first table's "
        "ExecuTorch plan, which is of the **float-input** program (ExecuTorch's own flow takes float inputs). The "
        "lower bound is the int8-input program's. The last column: ours with int8 outputs too (`--io int8-all`: "
        "the trailing dequantize gone as well), whole.",
        "",
    ]
    lines += _table(["model", "ExecuTorch plan, float input B", "ours, int8 input B",
                     "ours int8 input / ExecuTorch float input", "patch-based, int8 input B",
                     "patch-based int8 input / ExecuTorch float input", "lower bound, int8 input B", "bound at",
                     "ours, int8 inputs and outputs B", "int8 in and out / ExecuTorch float input"],
                    [[r.model, f"{r.executorch:,}", *_and_ratio(r.int8, r.executorch),
                      *_and_ratio(r.int8_patch, r.executorch), f"{r.int8_bound:,}", r.int8_bound_op,
                      *_and_ratio(r.int8_all, r.executorch)] for r in rows])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated zoo models (default: the issue's)")
    ap.add_argument("--target", default="cortex-m55")
    ap.add_argument("--no-docs", action="store_true", help=f"do not write {PAGE.relative_to(ROOT)}")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows = []
    for name in [m for m in args.models.split(",") if m]:
        row = measure(name, args.target)
        log.info("%-24s ET %9s  no in-place %9s  graph order %9s  ours %9s  (%.3f)  bound %9s at %s  patch-based %9s  "
                 "int8 input %9s  int8 patch-based %9s  int8 in+out %9s  [%.0f s]", row.model, f"{row.executorch:,}",
                 f"{row.no_in_place:,}", f"{row.graph_order:,}", f"{row.emlkit:,}", row.ratio,
                 f"{row.bound:,}", row.bound_op, f"{row.patch:,}", f"{row.int8:,}", f"{row.int8_patch:,}",
                 f"{row.int8_all:,}", row.seconds)
        rows.append(row)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"ratio": round(r.ratio, 4)} for r in rows], indent=1) + "\n")
    if not args.no_docs:
        PAGE.write_text(page(rows))
        log.info("wrote %s", PAGE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
