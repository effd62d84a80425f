"""torch.export with the settings every flow needs, export errors made readable, and the quantization
steps every flow shares (our passes around torchao's prepare/calibrate/convert)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from emlkit.errors import EXIT_UNSUPPORTED, AotError
from emlkit.lower import LowerOptions, apply_quantizer_hooks


@contextlib.contextmanager
def _no_fused_attention() -> Iterator[None]:
    """nn.MultiheadAttention and nn.TransformerEncoderLayer take a fused fast path in eval mode without grad
    (aten::_native_multi_head_attention, aten::_transformer_encoder_layer_fwd): single ops no backend lowers or
    quantizes. PyTorch's public switch makes them export as the matmuls, softmax and layer norms they are."""
    was = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(was)


def export_module(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.export.ExportedProgram:
    try:
        with _no_fused_attention():
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


def quantize(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], calibration: list[tuple[torch.Tensor, ...]],
             quantizer: Any, target: Any, options: LowerOptions) -> torch.fx.GraphModule:
    """Export, pre-quant passes, annotate (quantizer hooks), calibrate, convert, pre-edge passes."""
    graph = export_graph(module, inputs)
    for p in options.pre_quant_passes:
        graph = p(graph)
    prepared = prepare_pt2e(graph, apply_quantizer_hooks(quantizer, target, options))
    for sample in calibration:
        prepared(*sample)
    quantized = convert_pt2e(prepared)
    for p in options.pre_edge_passes:
        quantized = p(quantized)
    return quantized
