"""Ethos-U flow: Arm quantizer -> TOSA partitioner -> Vela; the CPU remainder uses cortex_m:: Q/DQ ops."""

from __future__ import annotations

import contextlib
import csv
import glob
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from executorch.backends.arm.ethosu import EthosUCompileSpec
from executorch.backends.arm.ethosu.backend import EthosUBackend
from executorch.backends.arm.quantizer import (
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from executorch.backends.arm.util._factory import create_partitioner, create_quantizer
from executorch.backends.cortex_m.passes.replace_quant_nodes_pass import ReplaceQuantNodesPass
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from aot.errors import EXIT_UNSUPPORTED, AotError
from aot.lower import Lowered, LowerOptions, apply_quantizer_hooks, bind_passes, pass_reports, run_program_checks
from aot.lower.export import export_graph, export_module
from aot.native_output import stdout_to_log
from aot.targets import Target

log = logging.getLogger(__name__)

# Vela writes its summary CSV (cycles, SRAM, flash) without verbose flags; they only add stdout noise.
VELA_FLAGS: list[str] = []


@dataclass
class VelaPartition:
    """One delegate as Vela compiled it: the TOSA graph it was given, the blob it wrote and its estimates."""

    tosa: bytes
    summary: dict[str, str]
    blob: bytes


@contextlib.contextmanager
def _capture_vela(workdir: str, target_name: str) -> Iterator[list[VelaPartition]]:
    """Record every TOSA graph given to Vela and Vela's summary CSV for it.

    Vela writes its summary into one fixed folder, so a later partition would
    overwrite an earlier one's figures: read them right after each call.
    """
    captured: list[VelaPartition] = []
    original = EthosUBackend._compile_tosa_flatbuffer

    def recording(tosa_flatbuffer: bytes, compile_spec: EthosUCompileSpec) -> Any:
        try:
            result = original(tosa_flatbuffer, compile_spec)
        except Exception as exc:  # Vela (regor) raises plain RuntimeErrors for operators it cannot place
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AotError(f"Vela could not compile an NPU partition for {target_name}: {why}. ExecuTorch's "
                           "partitioner gave the NPU an operator form Vela rejects: change that layer, or compile "
                           "the model for a cortex-m target", EXIT_UNSUPPORTED) from exc
        summary: dict[str, str] = {}
        for path in glob.glob(os.path.join(workdir, "output", "*_summary_*.csv")):
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
            if rows:
                summary = rows[-1]
            os.remove(path)
        captured.append(VelaPartition(bytes(tosa_flatbuffer), summary, bytes(result.processed_bytes)))
        return result

    EthosUBackend._compile_tosa_flatbuffer = staticmethod(recording)  # type: ignore[method-assign]
    try:
        yield captured
    finally:
        EthosUBackend._compile_tosa_flatbuffer = staticmethod(original)  # type: ignore[method-assign]


def compile_spec(target: Target, workdir: str) -> EthosUCompileSpec:
    assert target.npu is not None
    spec = EthosUCompileSpec(target.npu, extra_flags=VELA_FLAGS + list(target.vela_flags))
    spec.dump_intermediate_artifacts_to(workdir)
    return spec


def make_quantizer(spec: EthosUCompileSpec, activation_bits: int = 8) -> Any:
    quantizer = create_quantizer(spec)
    if activation_bits == 16:
        quantizer.set_global(get_symmetric_a16w8_quantization_config(is_per_channel=True))
    else:
        quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    return quantizer


def lower(
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    calibration: list[tuple[torch.Tensor, ...]],
    target: Target,
    options: LowerOptions,
) -> Lowered:
    temporary = options.intermediates is None
    workdir = options.intermediates or tempfile.mkdtemp(prefix="aot_vela_")
    try:
        os.makedirs(workdir, exist_ok=True)
        spec = compile_spec(target, workdir)
        bind_passes(options, target)
        graph = export_graph(module, inputs)
        for p in options.pre_quant_passes:
            graph = p(graph)
        prepared = prepare_pt2e(graph, apply_quantizer_hooks(make_quantizer(spec, target.activation_bits), target, options))
        for sample in calibration:
            prepared(*sample)
        quantized = convert_pt2e(prepared)
        for p in options.pre_edge_passes:
            quantized = p(quantized)
        with _capture_vela(workdir, target.name) as partitions, stdout_to_log(log, "Vela"):
            edge = to_edge_transform_and_lower(
                export_module(quantized, inputs),
                partitioner=[create_partitioner(spec)],
                compile_config=EdgeCompileConfig(_check_ir_validity=False),
            )
        # Q/DQ left outside the delegate become cortex_m:: ops the firmware runs.
        edge = edge.transform([ReplaceQuantNodesPass()] + list(options.post_passes))
        run_program_checks(options, edge)
    finally:
        if temporary:  # Vela's intermediates were only needed while it ran
            shutil.rmtree(workdir, ignore_errors=True)
    return Lowered(edge=edge, inputs=inputs, quantized=quantized,
                   extra={"vela_partitions": partitions, "workdir": None if temporary else workdir,
                          "compile_spec": spec, **pass_reports(options)})
