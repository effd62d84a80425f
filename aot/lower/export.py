"""torch.export with the settings every flow needs, and export errors made readable."""

from __future__ import annotations

import torch

from aot.errors import EXIT_UNSUPPORTED, AotError


def export_module(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.export.ExportedProgram:
    try:
        return torch.export.export(module, inputs, strict=True)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AotError(
            f"model failed to export with torch.export: {type(exc).__name__}: {first} "
            "(make forward() traceable: no data-dependent Python control flow; run with --verbose for the trace)",
            EXIT_UNSUPPORTED,
        ) from exc


def export_graph(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.fx.GraphModule:
    # check_guards=False: the guard submodule it would add is rejected by ExecuTorch's passes.
    return export_module(module, inputs).module(check_guards=False)
