"""What every lowering flow does, once: the flows (cortex_m.py, ethos_u.py) give only the steps that differ."""

from __future__ import annotations

import contextlib
import os
import re
import traceback
from typing import Any, Iterator

import torch

from emlkit.errors import EXIT_UNSUPPORTED, AotError, cause_chain
from emlkit.lower import Lowered, LowerOptions, bind_passes, pass_reports, run_program_checks
from emlkit.lower.export import export_module, quantize
from emlkit.targets import Target


class Flow:
    """A flow's own steps; `lower` runs them in the order all flows share.

    `workspace` holds what one compile needs from start to end (the Ethos-U flow's Vela folder and
    compile spec) and cleans it up after; `prepare` may re-lay the model and its inputs; `quantizer`
    annotates; `to_edge` lowers the exported quantized program (our program and post passes
    included) and returns the edge program manager and the flow's report entries; `cpu_side` may
    lower again what that left on the CPU (the Ethos-U flow's CPU-side passes).
    """

    @contextlib.contextmanager
    def workspace(self, target: Target, options: LowerOptions) -> Iterator[Any]:
        yield None

    def prepare(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                calibration: list[tuple[torch.Tensor, ...]], options: LowerOptions
                ) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[tuple[torch.Tensor, ...]]]:
        return module, inputs, calibration

    def quantizer(self, ws: Any, target: Target, options: LowerOptions) -> Any:
        raise NotImplementedError

    def to_edge(self, ws: Any, exported: torch.export.ExportedProgram, target: Target,
                options: LowerOptions) -> tuple[Any, dict[str, Any]]:
        raise NotImplementedError

    def cpu_side(self, ws: Any, quantized: torch.fx.GraphModule, inputs: tuple[torch.Tensor, ...],
                 lowered: tuple[Any, dict[str, Any]], target: Target, options: LowerOptions
                 ) -> tuple[torch.fx.GraphModule, Any, dict[str, Any]]:
        """(quantized graph, edge program, report entries) after the flow's second look at what its lowering
        (LOWERED: to_edge's result) left on the CPU; by default the same."""
        return (quantized, *lowered)

    def simulate(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                 calibration: list[tuple[torch.Tensor, ...]], target: Target, options: LowerOptions
                 ) -> torch.fx.GraphModule:
        """The quantize-dequantize model lower() builds before ExecuTorch's lowering (the PT2E conversion with our
        passes): it computes what the program would in float arithmetic, also where the lowering refuses."""
        with self.workspace(target, options) as ws:
            module, inputs, calibration = self.prepare(module, inputs, calibration, options)
            bind_passes(options, target)
            return quantize(module, inputs, calibration, self.quantizer(ws, target, options), target, options)

    def lower(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
              calibration: list[tuple[torch.Tensor, ...]], target: Target, options: LowerOptions) -> Lowered:
        try:
            with self.workspace(target, options) as ws:
                module, inputs, calibration = self.prepare(module, inputs, calibration, options)
                bind_passes(options, target)
                quantized = quantize(module, inputs, calibration, self.quantizer(ws, target, options), target,
                                     options)
                edge, extra = self.to_edge(ws, export_module(quantized, inputs), target, options)
                quantized, edge, extra = self.cpu_side(ws, quantized, inputs, (edge, extra), target, options)
                run_program_checks(options, edge)
        except AotError:
            raise
        except Exception as exc:
            if not raised_outside_toolkit(exc):
                raise  # our own bug: an internal error with its traceback under -v
            raise AotError(f"ExecuTorch's lowering for {target.name} failed: {failure_line(exc)}; the model has an "
                           "op or pattern the quantizer or lowering of ExecuTorch 1.5.1 cannot handle for this target "
                           "(-v shows the trace): rewrite that layer or try another target", EXIT_UNSUPPORTED) from exc
        return Lowered(edge=edge, inputs=inputs, quantized=quantized, extra={**extra, **pass_reports(options)})


_TOOLKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def raised_outside_toolkit(exc: BaseException) -> bool:
    """True when the innermost error was raised by code outside this toolkit (ExecuTorch, torch, torchao)."""
    inner = cause_chain(exc, context=True)[-1]
    frames = traceback.extract_tb(inner.__traceback__)
    return bool(frames) and not os.path.abspath(frames[-1].filename).startswith(_TOOLKIT_DIR + os.sep)


def failure_line(exc: BaseException) -> str:
    """'<Type>: <first line>' of the innermost error, with the graph node torch.fx names when it names one."""
    chain = cause_chain(exc, context=True)
    inner = chain[-1]
    text = str(inner).strip()
    first = text.splitlines()[0] if text else ""
    node = next((m.group(1) for e in chain if (m := re.search(r"While executing %(\w+)", str(e)))), None)
    return f"{type(inner).__name__}: {first[:300]}" + (f" (at node {node})" if node else "")


def run_post_passes(edge: Any, passes: list[Any]) -> Any:
    """edge.transform(passes); a pass that refuses the program (AotError) is not an internal error, but
    ExecuTorch's pass manager wraps it in a bare Exception: unwrap it."""
    try:
        return edge.transform(passes)
    except AotError:
        raise
    except Exception as exc:
        inner = next((e for e in cause_chain(exc) if isinstance(e, AotError)), None)
        if inner is not None:
            raise inner from None
        raise
