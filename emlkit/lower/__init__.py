"""Lowering flows: quantize + lower a model for one target, using ExecuTorch's APIs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from emlkit.patch_bands import PATCH_AUTO  # LowerOptions.patch_bands: `--patch-stages auto`

# A pass over the converted (quantized, not yet lowered) torch.fx graph.
GraphPass = Callable[[torch.fx.GraphModule], torch.fx.GraphModule]


@dataclass
class LowerOptions:
    lut_fusion: bool = True
    explicit_layout: bool = False
    # Cortex-M Linear layers as per-channel 1x1 convs: "all", "auto" or "off" (emlkit/passes/linear_to_conv.py).
    linear_mode: str = "all"
    # Ops without an int8 kernel run in float on the device instead of being refused (the passes' configuration).
    allow_float: bool = False
    # Cortex-M: each int8 LSTM/GRU keeps its h (and c) across executions (emlkit_lstm.py), and calibration runs the
    # samples as one stream (export.py): a keyword spotter feeds one frame per call.
    streaming_state: bool = False
    # Who places the activation tensors in the arena: "emlkit" (emlkit/memory_plan.py) or "executorch" (its greedy).
    memory_planner: str = "emlkit"
    # Cortex-M: the high-resolution first stages run in this many row bands (emlkit/passes/patch_stages.py); 0: off,
    # PATCH_AUTO: the pass chooses the count, or off, from the chain's shapes.
    patch_bands: int = 0
    # Cortex-M: "int8" takes each float input as the int8 codes its first quantize made, "int8-all" also gives the
    # outputs as int8 codes; "float" (default) keeps float inputs and outputs (emlkit/passes/int8_io.py).
    io: str = "float"

    @property
    def patch_stages(self) -> bool:
        return self.patch_bands >= 2 or self.patch_bands == PATCH_AUTO

    @property
    def int8_inputs(self) -> bool:
        return self.io != "float"
    # Passes run on the exported float graph before quantization annotation (op rewrites).
    pre_quant_passes: list[GraphPass] = field(default_factory=list)
    # Called with (quantizer, target, options); returns the quantizer to use (configuration tweaks).
    quantizer_hooks: list[Callable[[Any, Any, Any], Any]] = field(default_factory=list)
    # Extra passes run on the quantized graph before to_edge (LUT fusion etc.).
    pre_edge_passes: list[GraphPass] = field(default_factory=list)
    # Cortex-M: passes over the lowered ExportedProgram that rewrite constants (they own them), before post_passes.
    program_passes: list[Callable[[Any], Any]] = field(default_factory=list)
    # Extra passes (ExportPass instances) run on the final edge program.
    post_passes: list[Any] = field(default_factory=list)
    # Checks run on the final edge ExportedProgram (after post_passes); they raise AotError to stop the compile.
    program_checks: list[Callable[[Any], Any]] = field(default_factory=list)
    intermediates: str | None = None   # where TOSA/Vela artefacts are kept


@dataclass
class Lowered:
    """What a flow hands to emit: the edge program manager and how to feed it."""

    edge: Any                                  # EdgeProgramManager
    inputs: tuple[torch.Tensor, ...]           # inputs in the layout the program expects
    quantized: torch.fx.GraphModule | None     # converted pt2e model (fake-quant reference)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _all_passes(options: LowerOptions) -> list[Any]:
    return [*options.pre_quant_passes, *options.quantizer_hooks, *options.pre_edge_passes, *options.program_passes,
            *options.post_passes, *options.program_checks]


def bind_passes(options: LowerOptions, target: Any) -> None:
    """Let passes that depend on the target (e.g. how a LUT is lowered) see it before they run."""
    for p in _all_passes(options):
        bind = getattr(p, "set_target", None)
        if bind is not None:
            bind(target, options)


def pass_reports(options: LowerOptions) -> dict[str, Any]:
    """Report entries of passes that keep one (`report_key` + `report()`), for Lowered.extra."""
    out: dict[str, Any] = {}
    for p in _all_passes(options):
        key = getattr(p, "report_key", None)
        if key:
            out[key] = p.report()
    return out


def apply_quantizer_hooks(quantizer: Any, target: Any, options: LowerOptions) -> Any:
    for hook in options.quantizer_hooks:
        quantizer = hook(quantizer, target, options)
    return quantizer


def run_program_checks(options: LowerOptions, edge: Any) -> None:
    for check in options.program_checks:
        check(edge.exported_program())
