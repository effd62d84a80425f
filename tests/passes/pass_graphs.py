"""Helpers of the pass tests: a tiny model's exported graph, a pass bound to a target, the ops a graph calls."""

from __future__ import annotations

from typing import Any

import torch

from emlkit.compile import make_options
from emlkit.lower.export import export_graph
from emlkit.targets import get_target


def graph_of(module: torch.nn.Module, *inputs: torch.Tensor) -> torch.fx.GraphModule:
    """The graph the pre-quant passes get (torch.export, as the flows export)."""
    return export_graph(module.eval(), inputs)


def bound(p: Any, target: str, **options: Any) -> Any:
    """`p` bound to a compile target as the flow binds it (the manager's verdict, then its settings)."""
    p.set_target(get_target(target), make_options(**options))
    return p


def called(gm: torch.fx.GraphModule) -> list[Any]:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]
