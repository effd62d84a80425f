"""Facts read off a final ExecuTorch program: operator histogram, delegates, memory plan."""

from __future__ import annotations

import operator
from collections import Counter
from typing import Any

import torch

from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.schema import DelegateCall, KernelCall


def op_histogram(program: Any) -> dict[str, int]:
    """Kernel calls per operator (and `delegate:<backend>` per delegate call) in the final program."""
    plan = program.executorch_program.execution_plan[0]
    hist: Counter[str] = Counter()
    for chain in plan.chains:
        for ins in chain.instructions:
            a = ins.instr_args
            if isinstance(a, KernelCall):
                op = plan.operators[a.op_index]
                hist[op.name] += 1
            elif isinstance(a, DelegateCall):
                hist[f"delegate:{plan.delegates[a.delegate_index].id}"] += 1
    return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))


def delegated_ops(edge: Any) -> dict[str, int]:
    """Ops inside each delegate's partition (what the NPU runs)."""
    gm = edge.exported_program().graph_module
    hist: Counter[str] = Counter()
    for name, sub in gm.named_children():
        if not name.startswith("lowered_module"):
            continue
        for n in sub.original_module.graph_module.graph.nodes:
            if n.op == "call_function":
                hist[_op_name(n.target)] += 1
    return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))


# Ops that only move a tensor between int8 codes and float at a partition's edge: not a layer's computation.
_EDGE_OPS = frozenset({"cortex_m::quantize_per_tensor", "cortex_m::dequantize_per_tensor",
                       "quantized_decomposed::quantize_per_tensor", "quantized_decomposed::dequantize_per_tensor",
                       "quantized_decomposed::dequantize_per_channel", "quantized_decomposed::quantize_per_channel"})


def _layer_of(n: torch.fx.Node) -> str:
    """'path (Type)' of the innermost module a node came from, '(model)' for the model's own forward."""
    stack = n.meta.get("nn_module_stack") or {}
    if not stack:
        return "(model)"
    path, kind = list(stack.values())[-1]
    if not path:
        return "(model)"
    kind_name = getattr(kind, "__name__", str(kind)).rsplit(".", 1)[-1].strip("'>")
    return f"{path} ({kind_name})"


def layer_placement(edge: Any) -> list[dict[str, Any]]:
    """Where each layer of an NPU program runs: per source module, 'NPU', 'CPU' or 'NPU and CPU', and the ops each
    side runs (the delegates' TOSA-bound ops and the CPU's kernel calls; the Q/DQ at the partition edges left out)."""
    gm = edge.exported_program().graph_module
    where: dict[str, dict[str, Counter[str]]] = {}

    def add(n: torch.fx.Node, side: str) -> None:
        op = _op_name(n.target)
        if op in _EDGE_OPS or n.target is operator.getitem or op == "alloc":   # alloc: the planner's buffers
            return
        where.setdefault(_layer_of(n), {}).setdefault(side, Counter())[op] += 1

    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.target is executorch_call_delegate:
            lowered = getattr(gm, n.args[0].target)
            for inner in lowered.original_module.graph_module.graph.nodes:
                if inner.op == "call_function":
                    add(inner, "NPU")
        else:
            add(n, "CPU")
    return [{"layer": layer, "runs_on": " and ".join(s for s in ("NPU", "CPU") if s in sides),
             **{f"{s.lower()}_ops": dict(sorted(c.items())) for s, c in sides.items()}}
            for layer, sides in where.items()]


def _op_name(target: Any) -> str:
    name = getattr(target, "__name__", str(target))
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return str(schema.name)
    return name


def memory_plan(program: Any) -> dict[str, Any]:
    prog = program.executorch_program
    plan = prog.execution_plan[0]
    const = sum(len(b.storage) for b in prog.constant_buffer)
    const += sum(s.size for s in prog.segments)
    return {
        "arena_bytes": {str(i): int(s) for i, s in enumerate(plan.non_const_buffer_sizes) if i > 0},
        "arena_total": int(sum(plan.non_const_buffer_sizes)),
        "constant_bytes": int(const),
        "program_bytes": len(program.buffer),
    }


def partition_count(edge: Any) -> int:
    gm = edge.exported_program().graph_module
    return sum(1 for name, _ in gm.named_children() if name.startswith("lowered_module"))


def output_qparams(edge: Any, int8_outputs: list[dict[str, Any]] | None = None) -> list[dict[str, Any] | None]:
    """Scale/zero point of each float output that comes from a dequantize, and of each output `--io int8-all` gives
    as int8 codes (INT8_OUTPUTS: the int8_io pass's report entries), for steps in reports."""
    gm = edge.exported_program().graph_module
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    codes = {e["index"]: e for e in int8_outputs or []}
    res: list[dict[str, Any] | None] = []
    for k, a in enumerate(out_node.args[0]):
        info = None
        if k in codes:
            info = {"scale": float(codes[k]["scale"]), "zero_point": int(codes[k]["zero_point"]), "int8": True}
        elif isinstance(a, torch.fx.Node) and a.op == "call_function" and "dequantize" in str(a.target):
            info = {"scale": float(a.args[1]), "zero_point": int(a.args[2])}
        res.append(info)
    return res
