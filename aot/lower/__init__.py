"""Lowering flows: quantize + lower a model for one target, using ExecuTorch's APIs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

# A pass over the converted (quantized, not yet lowered) torch.fx graph.
GraphPass = Callable[[torch.fx.GraphModule], torch.fx.GraphModule]


@dataclass
class LowerOptions:
    lut_fusion: bool = True
    explicit_layout: bool = False
    # Extra passes run on the quantized graph before to_edge (LUT fusion etc.).
    pre_edge_passes: list[GraphPass] = field(default_factory=list)
    # Extra passes (ExportPass instances) run on the final edge program.
    post_passes: list[Any] = field(default_factory=list)
    intermediates: str | None = None   # where TOSA/Vela artefacts are kept


@dataclass
class Lowered:
    """What a flow hands to emit: the edge program manager and how to feed it."""

    edge: Any                                  # EdgeProgramManager
    inputs: tuple[torch.Tensor, ...]           # inputs in the layout the program expects
    quantized: torch.fx.GraphModule | None     # converted pt2e model (fake-quant reference)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
