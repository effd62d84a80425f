"""Multiply-accumulates per inference of a model, counted on its exported graph.

Counts convolutions (incl. depthwise/grouped), linear layers and matmuls: the
work the int8 kernels do. Used for MACs-per-instruction figures.
"""

from __future__ import annotations

import math

import torch


def _numel(node: torch.fx.Node) -> int:
    val = node.meta.get("val")
    return int(math.prod(val.shape)) if isinstance(val, torch.Tensor) else 0


def _shape(node: object) -> tuple[int, ...]:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else ()


def count_macs(ep: torch.export.ExportedProgram) -> int:
    total = 0
    for n in ep.graph.nodes:
        if n.op != "call_function":
            continue
        name = str(n.target)
        if "convolution" in name or name.endswith("conv2d.default") or name.endswith("conv1d.default"):
            w = _shape(n.args[1])
            if len(w) >= 3:
                total += _numel(n) * int(math.prod(w[1:]))  # (Cin/groups) * kernel per output
        elif name.endswith(("linear.default", "addmm.default")):
            w = _shape(n.args[1] if "linear" in name else n.args[2])
            k = w[-1] if "linear" in name else w[0]
            total += _numel(n) * int(k)
        elif name.endswith(("matmul.default", "bmm.default", "mm.default")):
            a = _shape(n.args[0])
            if a:
                total += _numel(n) * int(a[-1])
    return total


def model_macs(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> int:
    with torch.no_grad():
        ep = torch.export.export(module, inputs, strict=True)
    return count_macs(ep.run_decompositions({}))
