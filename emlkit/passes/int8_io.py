"""`--io int8` / `--io int8-all`: the program takes int8 inputs (and, with int8-all, gives int8 outputs) (Cortex-M).

Matches, in the lowered program: each float user input whose every reader is a `cortex_m::quantize_per_tensor` of
the same scale and zero point (the flow puts one at the first use of every float input); with int8-all also each
user output that a `cortex_m::dequantize_per_tensor` writes.

Produces: the input placeholder typed int8 (the quantize's own int8 value, same shape and dim order), read by the
quantize's readers, the quantize removed; the output taken from the dequantize's int8 operand, the dequantize
removed where nothing else reads it. The report ("int8_io") gives each such input's and output's scale and zero
point (real = scale * (q - zero_point)): how a caller quantizes its data, and reads the results.

Why: the float input is 4 bytes an element and lives in the arena until the quantize has read it, which bounds the
arena of several zoo models (docs/memory.md); a sensor pipeline usually gives int8 already (TFLite's
inference_input_type=int8). A float input that some reader takes as float (a float op, --allow-float) or two
quantizes read with different qparams cannot become int8: refused, naming it (exit 4). Integer inputs (indices) and
outputs stay as they are.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from emlkit.errors import EXIT_UNSUPPORTED, AotError
from emlkit.passes.manager import Pass, declare

log = logging.getLogger(__name__)

IO_MODES = ("float", "int8", "int8-all")  # LowerOptions.io: --io's values


def _op(n: torch.fx.Node) -> str:
    """The op a call runs as its schema names it ("cortex_m::quantize_per_tensor"), else the node's target."""
    schema = getattr(n.target, "_schema", None)
    return str(schema.name) if schema is not None else str(n.target)


def _is_cm(n: Any, op: str) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and _op(n) == f"cortex_m::{op}"


def _qparams(n: torch.fx.Node) -> tuple[float, int, int, int, Any]:
    """(scale, zero point, qmin, qmax, dtype) of a cortex_m (de)quantize_per_tensor call."""
    _, scale, zp, qmin, qmax, dtype = n.args[:6]
    return float(scale), int(zp), int(qmin), int(qmax), dtype


def _entry(index: int, name: str, q: tuple[float, int, int, int, Any]) -> dict[str, Any]:
    return {"index": index, "name": name, "dtype": str(q[4]).replace("torch.", ""), "scale": q[0],
            "zero_point": q[1], "qmin": q[2], "qmax": q[3]}


@declare("program", ("cortex_m.quantize_per_tensor", "cortex_m.dequantize_per_tensor"), order=289,
         runs_after=("PatchStages", "OperandsInOutOrder"), flows=("cortex_m",), options={"int8_inputs": True})
@dataclass
class Int8Io(Pass):
    outputs_too: bool = False
    report_key: str = "int8_io"
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)

    def bind(self, target: Any, options: Any) -> None:
        self.outputs_too = options.io == "int8-all"

    def reset(self) -> None:
        self.inputs, self.outputs = [], []

    def report(self) -> dict[str, Any]:
        if not self.inputs and not self.outputs:
            return {}
        return {"inputs": list(self.inputs), "outputs": list(self.outputs),
                "meaning": "real = scale * (q - zero_point); q = clamp(round(real / scale) + zero_point, qmin, qmax)"}

    def work(self, ep: Any) -> Any:
        gm = ep.graph_module
        nodes = {n.name: n for n in gm.graph.nodes}
        for i, name in enumerate(ep.graph_signature.user_inputs):
            node = nodes.get(name)
            if node is not None:
                self._input(gm, i, node)
        if self.outputs_too:
            self._outputs(ep)
        gm.graph.eliminate_dead_code()
        gm.recompile()
        return ep

    def _input(self, gm: torch.fx.GraphModule, i: int, node: torch.fx.Node) -> None:
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or not val.dtype.is_floating_point:
            return  # indices and other integer inputs are fed as they are
        readers = list(node.users)
        quants = [u for u in readers if _is_cm(u, "quantize_per_tensor") and u.args[0] is node]
        params = {_qparams(q) for q in quants}
        if not readers or len(quants) != len(readers) or len(params) != 1:
            first = next((u for u in readers if u not in quants), None)
            why = (f"it is read as float by {_op(first)}" if first is not None
                   else "two quantizes read it with different qparams" if len(params) > 1 else "nothing reads it")
            raise AotError(f"--io int8: input {i} ({node.name}) is not quantized at its first use ({why}), so the "
                           "program cannot take it as int8: compile with --io float", EXIT_UNSUPPORTED)
        q0 = quants[0]
        node.meta["val"] = q0.meta["val"]
        if "tensor_meta" in q0.meta:
            node.meta["tensor_meta"] = q0.meta["tensor_meta"]
        for q in quants:
            q.replace_all_uses_with(node)
            gm.graph.erase_node(q)
        self.inputs.append(_entry(i, node.name, params.pop()))
        log.debug("int8_io: input %d (%s) is int8 now", i, node.name)

    def _outputs(self, ep: Any) -> None:
        gm = ep.graph_module
        out = next(n for n in gm.graph.nodes if n.op == "output")
        results = list(out.args[0])
        specs = [s for s in ep.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"]
        for k, r in enumerate(results):
            if not _is_cm(r, "dequantize_per_tensor") or not isinstance(r.args[0], torch.fx.Node):
                continue
            src = r.args[0]
            if src.op == "placeholder" or src in results:
                continue  # an input or another output given back as is: a copy would be needed; keep it float
            results[k] = src
            spec = next((s for s in specs if getattr(s.arg, "name", None) == r.name), None)
            if spec is not None:
                spec.arg.name = src.name
            self.outputs.append(_entry(k, src.name, _qparams(r)))
        out.args = (tuple(results),) if isinstance(out.args[0], tuple) else (results,)
