"""Cortex-M flow: CortexMQuantizer -> to_edge -> CortexMPassManager -> cortex_m:: ops (CMSIS-NN semantics)."""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

import torch
from executorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config
from executorch.backends.cortex_m.passes.cortex_m_pass_manager import CortexMPassManager
from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
from executorch.backends.cortex_m.target_config import CortexMTargetConfig
from executorch.exir import to_edge_transform_and_lower

from emlkit.errors import EXIT_UNSUPPORTED, AotError, cause_chain
from emlkit.lower import LowerOptions
from emlkit.lower.flow import Flow, run_post_passes
from emlkit.targets import Target

log = logging.getLogger(__name__)


def _channels_last(t: torch.Tensor) -> torch.Tensor:
    return t.to(memory_format=torch.channels_last) if t.dim() == 4 else t


def _pass_failure(exc: BaseException) -> str:
    """'<pass>: <innermost error>' from ExecuTorch's pass-manager exception chain."""
    outer = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    m = re.search(r"running the '(\w+)' pass", outer)
    inner = cause_chain(exc)[-1]
    why = str(inner).strip().splitlines()[0] if str(inner).strip() else type(inner).__name__
    return f"{m.group(1) if m else 'a pass'}: {type(inner).__name__}: {why}"


def target_config(target: Target) -> CortexMTargetConfig:
    return CortexMTargetConfig.from_target_string(target.cpu)


def make_quantizer(options: LowerOptions) -> CortexMQuantizer:
    return CortexMQuantizer(use_explicit_layout=options.explicit_layout)


class _CortexM(Flow):
    def prepare(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                calibration: list[tuple[torch.Tensor, ...]], options: LowerOptions
                ) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[tuple[torch.Tensor, ...]]]:
        for name, sub in module.named_modules():
            if any(p.dim() == 5 for p in sub.parameters(recurse=False)):
                raise AotError(f"layer '{name}' ({type(sub).__name__}) has 5-D weights: 3-D convolutions are not "
                               "supported on Cortex-M targets (the kernels are 2-D, NHWC); fold the depth dim into "
                               "the batch or channels and use a 2-D layer", EXIT_UNSUPPORTED)
        if options.explicit_layout:
            return module, inputs, calibration
        # The dim-order flow runs CMSIS-NN's NHWC kernels on channels-last tensors.
        # On a copy: nn.Module.to() works in place, and channels-last weights left in the caller's module
        # make a later Ethos-U compile of the same module wrong (241 steps off on relu6_net).
        return (copy.deepcopy(module).to(memory_format=torch.channels_last), tuple(_channels_last(t) for t in inputs),
                [tuple(_channels_last(t) for t in s) for s in calibration])

    def quantizer(self, ws: Any, target: Target, options: LowerOptions) -> Any:
        return make_quantizer(options)

    def to_edge(self, ws: Any, exported: torch.export.ExportedProgram, target: Target,
                options: LowerOptions) -> tuple[Any, dict[str, Any]]:
        edge = to_edge_transform_and_lower(exported, compile_config=cortex_m_edge_compile_config())
        pm = CortexMPassManager(edge.exported_program(), target_config=target_config(target),
                                use_explicit_layout=options.explicit_layout)
        try:
            ep = pm.transform()
        except Exception as exc:  # ExecuTorch wraps a failing pass in a bare Exception: name the pass and its error
            raise AotError(f"ExecuTorch's Cortex-M lowering failed for {target.name}: {_pass_failure(exc)}; the "
                           "model has an op pattern ExecuTorch 1.5.1 cannot lower for Cortex-M (run with -v for the "
                           "trace): try an ethos-u target or rewrite that layer", EXIT_UNSUPPORTED) from exc
        for p in options.program_passes:
            ep = p(ep)
        edge._edge_programs["forward"] = ep
        if options.post_passes:
            edge = run_post_passes(edge, list(options.post_passes))
        return edge, {}


# lower(module, inputs, calibration, target, options) -> Lowered: the steps of emlkit/lower/flow.py.
_FLOW = _CortexM()
lower, simulate = _FLOW.lower, _FLOW.simulate
