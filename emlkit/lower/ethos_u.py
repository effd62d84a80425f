"""Ethos-U flow: Arm quantizer -> TOSA partitioner -> Vela; the CPU remainder uses cortex_m:: Q/DQ ops."""

from __future__ import annotations

import contextlib
import copy
import csv
import glob
import logging
import os
import shutil
import tempfile
import traceback
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from executorch.backends.arm.ethosu import EthosUCompileSpec
from executorch.backends.arm.arm_vela import vela_compile
from executorch.backends.arm.quantizer import (
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from executorch.backends.arm.util._factory import create_partitioner, create_quantizer
from executorch.backends.cortex_m.passes.replace_quant_nodes_pass import ReplaceQuantNodesPass
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import get_lowered_submodules
from torch.fx.passes.operator_support import OperatorSupportBase

from emlkit.errors import EXIT_INTERNAL, EXIT_UNSUPPORTED, AotError, cause_chain
from emlkit.lower import LowerOptions
from emlkit.lower.export import export_module
from emlkit.lower.flow import Flow, run_post_passes
from emlkit.native_output import stdout_to_log
from emlkit.program_info import delegated_ops
from emlkit.targets import Target
from emlkit.verify import DATA_MOVEMENT, check_program

log = logging.getLogger(__name__)

# Vela writes its summary CSV (cycles, SRAM, flash) without verbose flags; they only add stdout noise. Its debug
# database (<name>_debug.xml, no stdout) holds the per-operation estimates and the command offsets of each operation
# that the per-command NPU estimates come from (emlkit/npu/perf.py); it does not change the command stream.
VELA_FLAGS: list[str] = ["--enable-debug-db"]


# Ops whose Ethos-U85 command streams use features our functional NPU model (emlkit/npu/) and the firmware's
# command-stream checker do not have yet: indexed DMA (gather/scatter from index_select, embedding,
# index_put, index), the elementwise SELECT of where, REDUCE_MIN, and OFM reverse (how Vela runs flip, e.g. the
# reverse direction of a bidirectional LSTM split by lstm_as_layers.py; fuzz fam:0). A U85 program could not be
# checked bit for bit with them on the NPU, so the partitioner leaves them on the CPU (int8 kernels, or
# float under --allow-float). The U55 has none of these commands: Vela places them on the CPU anyway.
# The fills that feed a where (masked_fill's full_like) stay with it: alone, a fill becomes a partition
# whose TOSA graph has no input while the delegate call passes one.
U85_CPU_OPS = frozenset({"aten::index_select", "aten::embedding", "aten::index_put", "aten::index", "aten::gather",
                         "aten::scatter", "aten::where", "aten::amin", "aten::full_like", "aten::full", "aten::flip"})


# How many kinds of data movement a compile tries keeping on the CPU after Vela refuses a partition (each try
# lowers again).
MAX_VELA_RETRIES = 12


class _KeepOnCpu(OperatorSupportBase):
    """Partitioner check: nodes of the named ops are not given to the NPU. SEEN counts the op kinds it lets through."""

    def __init__(self, ops: frozenset[str], seen: Counter[str] | None = None) -> None:
        self.ops = ops
        self.seen = seen

    def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return True
        name = getattr(getattr(node.target, "_schema", None), "name", None)   # torch and edge ops have a schema
        if name in self.ops:
            return False
        if self.seen is not None and name is not None:
            self.seen[name] += 1
        return True


def partitioner_checks(target: Target, keep: frozenset[str] = frozenset(),
                       seen: Counter[str] | None = None) -> list[OperatorSupportBase]:
    """The checks our partitioner adds to ExecuTorch's: the U85's CPU ops, and KEEP (ops Vela refused) on the CPU."""
    ops = (U85_CPU_OPS if (target.npu or "").startswith("ethos-u85") else frozenset()) | keep
    return [_KeepOnCpu(ops, seen)] if ops or seen is not None else []


@dataclass
class VelaPartition:
    """One delegate as Vela compiled it: the TOSA graph it was given, the blob it wrote and its estimates."""

    tosa: bytes
    summary: dict[str, str]
    blob: bytes
    debug_db: str = ""   # Vela's debug database (XML): per-operation estimates and their command offsets


def _raised_in_vela(exc: BaseException) -> bool:
    """True when the error (or one it wraps) was raised while ExecuTorch's vela_compile ran."""
    return any(os.path.basename(f.filename) == "arm_vela.py"
               for e in cause_chain(exc, context=True) for f in traceback.extract_tb(e.__traceback__))


def _tosa_dumps(workdir: str) -> dict[str, bytes]:
    """TOSA graphs ExecuTorch's TOSA backend wrote (compile-spec option dump_intermediate_artifacts_to),
    by delegation tag: it names them output_<tag>_<tosa spec>.tosa."""
    out: dict[str, bytes] = {}
    for path in glob.glob(os.path.join(workdir, "output_*.tosa")):
        tag = os.path.basename(path)[len("output_"):].split("_", 1)[0]
        with open(path, "rb") as f:
            out[tag] = f.read()
    return out


def _vela_summary_csv(outdir: str) -> dict[str, str]:
    summary: dict[str, str] = {}
    for path in glob.glob(os.path.join(outdir, "*_summary_*.csv")):
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        if rows:
            summary = rows[-1]
    return summary


def _vela_debug_db(outdir: str) -> str:
    for path in glob.glob(os.path.join(outdir, "*_debug.xml")):
        with open(path, encoding="utf-8") as f:
            return f.read()
    return ""


def _clear_artefacts(workdir: str) -> None:
    """Outputs of an earlier compile in a reused intermediates folder would pass for this one's."""
    for path in [*glob.glob(os.path.join(workdir, "output_*.tosa")), os.path.join(workdir, "out.tosa"),
                 *glob.glob(os.path.join(workdir, "output", "*_summary_*.csv")),
                 *glob.glob(os.path.join(workdir, "output", "*_debug.xml"))]:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def vela_partitions(edge: Any, workdir: str, target: Target) -> list[VelaPartition]:
    """Every delegate of the lowered program, in graph order: its TOSA graph, Vela blob and Vela estimates.

    Public ExecuTorch interfaces only: the blob is the delegate's processed_bytes, the TOSA graph the
    backend's intermediate dump (matched by the delegation tag kept in the delegate's original
    program). Vela writes its summary CSV and its input (out.tosa) into one fixed folder, so after
    lowering they hold the last partition's; any other partition is compiled again with vela_compile
    (deterministic: its blob must equal the delegate's) to read its estimates.
    """
    dumps = _tosa_dumps(workdir)
    last_tosa = b""
    with contextlib.suppress(FileNotFoundError), open(os.path.join(workdir, "out.tosa"), "rb") as f:
        last_tosa = f.read()
    parts: list[VelaPartition] = []
    used: set[bytes] = set()
    for name, module, _ in get_lowered_submodules(edge.exported_program().graph_module):
        if module.backend_id != "EthosUBackend":
            continue
        blob = bytes(module.processed_bytes)
        # The partition's own ops carry its tag; a placeholder fed by an earlier partition keeps that one's.
        tags = {n.meta.get("delegation_tag") for n in module.original_module.graph_module.graph.nodes
                if n.op == "call_function"} - {None, ""}
        tag = next(iter(tags)) if len(tags) == 1 else None
        if tag in dumps and dumps[tag] == last_tosa:
            tosa, summary = last_tosa, _vela_summary_csv(os.path.join(workdir, "output"))
            debug_db = _vela_debug_db(os.path.join(workdir, "output"))
        else:
            # ExecuTorch names a dump by the first tag its Arm passes left in the graph, which may be none
            # (output_<spec>.tosa) or a neighbour's: try the tagged dump first, then every other one, and keep
            # the graph Vela compiles to this delegate's blob.
            ordered = ([dumps[tag]] if tag in dumps else []) + [d for d in [*dumps.values(), last_tosa]
                                                                  if d and d not in used]
            found = next(((t, again) for t in dict.fromkeys(ordered) if (again := _recompiled(t, blob, target))), None)
            if found is None:
                raise AotError(f"internal: no dumped TOSA graph compiles to delegate {name}'s blob (tags "
                               f"{sorted(tags)}, dumps {sorted(dumps)})", EXIT_INTERNAL)
            tosa, (summary, debug_db) = found
        used.add(tosa)
        parts.append(VelaPartition(tosa, summary, blob, debug_db))
    return parts


def _recompiled(tosa: bytes, blob: bytes, target: Target) -> tuple[dict[str, str], str] | None:
    """Vela's summary and debug database for TOSA when Vela compiles it to BLOB (it is deterministic), else None."""
    with tempfile.TemporaryDirectory(prefix="aot_vela_part_") as tmp:
        try:
            again = vela_compile(tosa, list(compile_spec(target, tmp).compiler_flags), intermediate_path=tmp)
        except Exception:  # another partition's graph may not even compile alone: it is not this one
            return None
        if bytes(again.processed_bytes) != blob:
            return None
        outdir = os.path.join(tmp, "output")
        return _vela_summary_csv(outdir) or {"matched": "1"}, _vela_debug_db(outdir)


def compile_spec(target: Target, workdir: str) -> EthosUCompileSpec:
    assert target.npu is not None
    spec = EthosUCompileSpec(target.npu, system_config=target.system_config, memory_mode=target.memory_mode,
                             extra_flags=VELA_FLAGS + list(target.vela_flags))
    spec.dump_intermediate_artifacts_to(workdir)
    return spec


def make_quantizer(spec: EthosUCompileSpec, activation_bits: int = 8) -> Any:
    quantizer = create_quantizer(spec)
    if activation_bits == 16:
        quantizer.set_global(get_symmetric_a16w8_quantization_config(is_per_channel=True))
    else:
        quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    return quantizer


@contextlib.contextmanager
def _arm_pipeline_parts(options: LowerOptions) -> Iterator[None]:
    """Our passes with a part inside ExecuTorch's Arm TOSA pipeline (`arm_pipeline()`) switch it on for this
    lowering only: the part is registered for the whole process, a compile without the pass must not see it."""
    with contextlib.ExitStack() as stack:
        for p in options.pre_edge_passes:
            part = getattr(p, "arm_pipeline", None)
            if part is not None:
                stack.enter_context(part())
        yield


def _vela_refusal(target: Target, why: str) -> AotError:
    return AotError(f"Vela could not compile an NPU partition for {target.name}: {why}. ExecuTorch's partitioner gave "
                    "the NPU an operator form Vela rejects, also with any one kind of data movement kept on the CPU: "
                    "change that layer, or compile the model for a cortex-m target", EXIT_UNSUPPORTED)


@dataclass
class _Workspace:
    """One Ethos-U compile's Vela folder (removed at the end when it is temporary) and compile spec."""

    workdir: str
    temporary: bool
    spec: EthosUCompileSpec


class _EthosU(Flow):
    @contextlib.contextmanager
    def workspace(self, target: Target, options: LowerOptions) -> Iterator[_Workspace]:
        temporary = options.intermediates is None
        workdir = options.intermediates or tempfile.mkdtemp(prefix="aot_vela_")
        try:
            os.makedirs(workdir, exist_ok=True)
            yield _Workspace(workdir, temporary, compile_spec(target, workdir))
        finally:
            if temporary:  # Vela's intermediates were only needed while it ran
                shutil.rmtree(workdir, ignore_errors=True)

    def quantizer(self, ws: _Workspace, target: Target, options: LowerOptions) -> Any:
        return make_quantizer(ws.spec, target.activation_bits)

    def to_edge(self, ws: _Workspace, exported: torch.export.ExportedProgram, target: Target,
                options: LowerOptions) -> tuple[Any, dict[str, Any]]:
        with stdout_to_log(log, "Vela"), _arm_pipeline_parts(options):
            edge, kept, why = self._partition_or_keep_on_cpu(ws, exported, target)
            if edge is None:
                raise _vela_refusal(target, why)
            try:
                partitions = vela_partitions(edge, ws.workdir, target)
            except AotError as err:
                if not kept:
                    raise
                # the fallback's program could not be matched to its Vela graphs (no estimates): Vela's reason stands
                log.info("the compile with %s on the CPU could not be checked: %s", kept[0], err)
                raise _vela_refusal(target, why) from err
            if kept:
                log.warning("warning: Vela could not compile an NPU partition for %s (%s): %s runs on the CPU "
                            "instead", target.name, why, kept[0])
        # Q/DQ left outside the delegate become cortex_m:: ops the firmware runs.
        edge = run_post_passes(edge, [ReplaceQuantNodesPass()] + list(options.post_passes))
        return edge, {"vela_partitions": partitions, "workdir": None if ws.temporary else ws.workdir,
                      "compile_spec": ws.spec, **({"kept_on_cpu_for_vela": kept} if kept else {})}

    def cpu_side(self, ws: _Workspace, quantized: torch.fx.GraphModule, inputs: tuple[torch.Tensor, ...],
                 lowered: tuple[Any, dict[str, Any]], target: Target, options: LowerOptions
                 ) -> tuple[torch.fx.GraphModule, Any, dict[str, Any]]:
        """The ops the partitioner left on the CPU in float, lowered by the passes declared for the CPU side
        (manager.CPU_SIDE: the Cortex-M flow's int8 lowerings, e.g. emlkit::upsample_bilinear2d) on a copy of the
        quantized graph, which is lowered again. Kept only when the NPU runs as many ops as before: what it takes
        stays there (the partitioner decides it again, with the same answer for everything left alone)."""
        edge, extra = lowered
        passes = [p for p in options.pre_edge_passes if getattr(p, "cpu_nodes", None) is not None]
        left = _float_sources(edge)
        if not passes or not left:
            return quantized, edge, extra
        again, done = copy.deepcopy(quantized), []
        for p in passes:
            p.cpu_nodes = left
            again = p(again)
            p.cpu_nodes = frozenset()
            if any(p.report().values()):
                done.append(type(p).__name__)
        if not done:
            return quantized, edge, extra
        log.info("lowering again with %s on the CPU side (float ops the NPU left: %s)", ", ".join(done),
                 ", ".join(sorted(left)))
        edge2, extra2 = self.to_edge(ws, export_module(again, inputs), target, options)
        if sum(delegated_ops(edge2).values()) < sum(delegated_ops(edge).values()):
            log.warning("warning: lowering %s on the CPU moved work off the NPU; the float ops stay", ", ".join(done))
            for p in passes:
                p.reset()
            return quantized, edge, extra
        return again, edge2, extra2

    def _partition_or_keep_on_cpu(self, ws: _Workspace, exported: torch.export.ExportedProgram,
                                  target: Target) -> tuple[Any, list[str], str]:
        """(edge program or None, the op kinds kept on the CPU, Vela's reason for its first refusal or "").
        When Vela refuses a partition, one kind of data movement at a time (rarest first) stays on the CPU, where it
        is exact on int8 codes as on the NPU; the first that lets every partition compile wins."""
        seen: Counter[str] = Counter()
        edge, why = self._partition(ws, exported, target, frozenset(), seen)
        if edge is not None:
            return edge, [], ""
        movers = (op for op in seen if op in DATA_MOVEMENT)
        for op in sorted(movers, key=lambda o: (seen[o], o))[:MAX_VELA_RETRIES]:
            edge, _ = self._partition(ws, exported, target, frozenset({op}), None)
            if edge is not None:
                return edge, [op], why
        return None, [], why

    @staticmethod
    def _partition(ws: _Workspace, exported: torch.export.ExportedProgram, target: Target, keep: frozenset[str],
                   seen: Counter[str] | None) -> tuple[Any, str]:
        """ExecuTorch's partitioning and lowering with KEEP on the CPU: (the edge program, "") or, when Vela refuses
        a partition, (None, Vela's reason). The exported program is copied: a failed lowering may have changed it."""
        _clear_artefacts(ws.workdir)
        try:
            return to_edge_transform_and_lower(
                copy.deepcopy(exported),
                partitioner=[create_partitioner(ws.spec, partitioner_checks(target, keep, seen))],
                compile_config=EdgeCompileConfig(_check_ir_validity=False),
            ), ""
        except Exception as exc:
            if not _raised_in_vela(exc):
                raise
            # Vela (regor) raises plain RuntimeErrors for operators it cannot place.
            return None, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _float_sources(edge: Any) -> frozenset[str]:
    """The source names (manager.source_names) of the float ops the lowering left on the CPU."""
    from emlkit.passes.manager import source_names

    gm = edge.exported_program().graph_module
    islands = {f.node for f in check_program(gm).float_islands}
    return frozenset(s for n in gm.graph.nodes if n.name in islands for s in source_names(n))


# lower(module, inputs, calibration, target, options) -> Lowered: the steps of emlkit/lower/flow.py.
_FLOW = _EthosU()
lower, simulate = _FLOW.lower, _FLOW.simulate
