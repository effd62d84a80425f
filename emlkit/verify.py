"""Checks on the final program before it is written: every op must have a firmware kernel."""

from __future__ import annotations

import logging
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from emlkit import hostfw
from emlkit.errors import EXIT_INTERNAL, EXIT_UNSUPPORTED, AotError
from emlkit.program_needs import ProgramNeeds

log = logging.getLogger(__name__)

def firmware_ops() -> frozenset[tuple[str, str]]:
    """(`ns::name`, overload) pairs the firmware implements, from its own registry (the host build lists it)."""
    try:
        return hostfw.registry_ops()
    except hostfw.HostBuildError as exc:
        raise hostfw.unavailable("read the firmware's operator registry", exc) from exc


@dataclass
class OpUse:
    op: str
    node: str
    source: str


_TORCH_DIR = str(Path(torch.__file__).resolve().parent) + "/"


def _source_line(node: torch.fx.Node) -> str:
    trace = node.meta.get("stack_trace") or ""
    # The last 'File ..., line N' frame outside torch is the user's line that created the op, wherever the
    # user's code is installed (site-packages included); failing that, torch's own line (an nn.Module's).
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
    inside_torch = None
    for f, line, fn, code in reversed(frames):
        if f.startswith("<"):
            continue
        if not str(Path(f).resolve()).startswith(_TORCH_DIR) and "/torch/" not in f:
            return f"{f}:{line} ({code.strip()})"
        inside_torch = inside_torch or f"{f}:{line} ({code.strip()})"
    return inside_torch or "unknown source line"


def source_line(node: torch.fx.Node) -> str:
    """The user's source line that created NODE (file:line (code)), for one-line errors."""
    return _source_line(node)


def edge_op_name(node: torch.fx.Node) -> str | None:
    if node.op != "call_function":
        return None
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return None
    return str(schema.name)


def unsupported_ops(program: Any, edge: Any) -> list[OpUse]:
    """Operators of the final program that no firmware kernel implements, with the edge node using each."""
    known = firmware_ops()
    plan = program.executorch_program.execution_plan[0]
    missing = [f"{o.name}.{o.overload}" for o in plan.operators if (o.name, o.overload) not in known]
    gm = edge.exported_program().graph_module
    bad = []
    for full in missing:
        name = full.rsplit(".", 1)[0]
        nodes = [n for n in gm.graph.nodes if edge_op_name(n) == name]
        if nodes:
            bad.extend(OpUse(full, n.name, _source_line(n)) for n in nodes)
        else:
            bad.append(OpUse(full, "?", "unknown source line"))
    return bad


def check_supported(program: Any, edge: Any, target: str, other_targets: list[str]) -> None:
    bad = unsupported_ops(program, edge)
    if not bad:
        return
    # Name an op the user wrote (one with a source line) before the Q/DQ plumbing around it.
    bad.sort(key=lambda b: (b.source == "unknown source line", b.op.startswith("cortex_m::")))
    first = bad[0]
    more = f" (and {len(bad) - 1} more: {', '.join(sorted({b.op for b in bad[1:]}))})" if len(bad) > 1 else ""
    hint = (f"try an ethos-u target ({', '.join(t for t in other_targets if t.startswith('ethos'))}), "
            "which may delegate it to the NPU, or replace the op in the model"
            if not target.startswith("ethos") else "Vela did not take it and the Cortex-M firmware has no kernel for it; replace the op in the model")
    raise AotError(f"op {first.op} (node {first.node}, at {first.source}) cannot be lowered for {target}: "
                   f"no firmware kernel implements it{more}; {hint}", EXIT_UNSUPPORTED)


# ------------------------------------------------------------------ program verifier
# aten ops that only move or reinterpret data: they are dtype-agnostic and fine on int8.
DATA_MOVEMENT = {
    "aten::view_copy", "aten::view", "aten::reshape", "aten::_unsafe_view", "aten::permute_copy",
    "aten::permute", "aten::cat", "aten::slice_copy", "aten::select_copy", "aten::squeeze_copy",
    "aten::unsqueeze_copy", "aten::expand_copy", "aten::clone", "aten::alias_copy", "aten::split_copy",
    "aten::split_with_sizes_copy", "aten::t_copy", "aten::transpose_copy", "aten::constant_pad_nd",
    "aten::index_select", "aten::gather", "aten::flip", "aten::repeat", "aten::stack", "aten::unbind_copy",
    "aten::max_pool2d", "aten::max_pool2d_with_indices",   # order-preserving: exact on int codes
    "aten::amax", "aten::amin",                            # (the quantizer shares their qparams)
    "aten::index_put",                                     # assigns elements: exact (accumulate is not: below)
    "aten::upsample_nearest2d",                            # copies elements: exact on int codes
    "emlkit::upsample_nearest2d",
    "emlkit::upsample_nearest2d_index",
    "dim_order_ops::_clone_dim_order", "dim_order_ops::_to_dim_order_copy",
}
CODES = (torch.int8, torch.int16, torch.uint8)   # dtypes of quantized codes
# An index of the extreme: the same on codes as on their values (scales are positive); on floats, a float op.
INDEX_ON_CODES = {"aten::argmax", "aten::argmin"}
# Order statistics and selections whose integer result is exact on codes (emitted on codes only by
# emlkit/passes/median_on_codes.py, adaptive_max_on_codes.py and masked_fill_on_codes.py, which give every value
# operand the output's grid).
SELECT_ON_CODES = {"aten::median", "aten::adaptive_max_pool2d", "aten::where"}
# Comparisons of codes with an integer, exact (emitted only by emlkit/passes/compare_on_codes.py, which turns the
# number a dequantized tensor was compared with into the code where the answer changes).
COMPARE_ON_CODES = {"aten::gt", "aten::ge", "aten::lt", "aten::le", "aten::eq", "aten::ne"}
# Integers that are not codes (a model's own: token ids, indices) compared with an integer: exact (`tokens == PAD`).
WHOLE_INTEGERS = (torch.int32, torch.int64)
# Logic on bools, exact (emlkit/passes/sdpa_as_matmuls.py joins a constant attention mask and one from the inputs
# with logical_or).
LOGIC_ON_BOOLS = {"aten::logical_and", "aten::logical_or", "aten::logical_xor", "aten::logical_not",
                  "aten::bitwise_and", "aten::bitwise_or", "aten::bitwise_xor", "aten::bitwise_not"}
# Our own ops (emlkit/emlkit_ops.py): integer kernels only; a float tensor reaching one is a broken program.
INTEGER_ONLY_NAMESPACES = {"emlkit"}
# Float compute: ATen, and the float forms our passes emit before quantization for a lowering to replace
# (emlkit_float::masked_softmax; no firmware kernel runs one).
FLOAT_NAMESPACES = {"aten", "emlkit_float"}
# ops whose presence is how quantized data enters/leaves float (not compute).
QDQ = {"cortex_m::quantize_per_tensor", "cortex_m::dequantize_per_tensor",
       "quantized_decomposed::quantize_per_tensor", "quantized_decomposed::dequantize_per_tensor"}


@dataclass
class Finding:
    node: str
    op: str
    source: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"node": self.node, "op": self.op, "source": self.source, "reason": self.reason}


@dataclass
class ProgramCheck:
    broken: list[Finding]            # integer data into a float kernel: wrong answers on a device
    float_islands: list[Finding]     # float compute between dequantize and quantize
    partitions: int
    quantized_ops: int
    float_ops: int

    @property
    def coverage(self) -> float:
        total = self.quantized_ops + self.float_ops
        return 1.0 if total == 0 else self.quantized_ops / total

    def summary(self) -> str:
        return (f"partitions {self.partitions}, float islands {len(self.float_islands)}, "
                f"quantized-op coverage {100.0 * self.coverage:.0f}% "
                f"({self.quantized_ops} of {self.quantized_ops + self.float_ops} CPU compute ops"
                f"{' + delegated ops' if self.partitions else ''})")

    def as_dict(self) -> dict[str, Any]:
        return {"ok": not self.broken and not self.float_islands, "summary": self.summary(),
                "partitions": self.partitions, "float_islands": [f.as_dict() for f in self.float_islands],
                "broken": [f.as_dict() for f in self.broken], "quantized_ops": self.quantized_ops,
                "float_ops": self.float_ops, "quantized_op_coverage": round(self.coverage, 4)}


def _dtype(arg: Any) -> torch.dtype | None:
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return val.dtype if isinstance(val, torch.Tensor) else None


def check_program(gm: torch.fx.GraphModule) -> ProgramCheck:
    """Classify every non-delegated op of a final program's graph."""
    broken: list[Finding] = []
    islands: list[Finding] = []
    partitions = quantized = floating = 0
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.target is torch.ops.higher_order.executorch_call_delegate:
            partitions += 1
            continue
        name = edge_op_name(n)
        if name == "aten::index_put" and len(n.args) > 3 and n.args[3] and _dtype(n.args[0]) in CODES:
            broken.append(Finding(n.name, name, _source_line(n), "index_put with accumulate=True on integer codes "
                                  "adds codes of two scales"))
            continue
        if name is None or name in QDQ or name in DATA_MOVEMENT:
            continue
        if name in INDEX_ON_CODES and all(_dtype(a) in CODES for a in n.all_input_nodes):
            continue
        if name in SELECT_ON_CODES and all(_dtype(a) in CODES or _dtype(a) is torch.bool for a in n.all_input_nodes) \
                and any(_dtype(a) in CODES for a in n.all_input_nodes):
            continue
        if name in COMPARE_ON_CODES and len(n.args) == 2 and _dtype(n.args[0]) in CODES + WHOLE_INTEGERS \
                and isinstance(n.args[1], int) and not isinstance(n.args[1], bool):
            continue
        if name in LOGIC_ON_BOOLS and n.all_input_nodes and all(_dtype(a) is torch.bool for a in n.all_input_nodes):
            continue
        ns = name.split("::")[0]
        if ns in INTEGER_ONLY_NAMESPACES:
            floats = [a.name for a in n.all_input_nodes if (d := _dtype(a)) is not None and d.is_floating_point]
            if floats:
                broken.append(Finding(n.name, name, _source_line(n),
                                      f"integer kernel {name} reads float tensor(s) {', '.join(floats)}"))
        if ns not in FLOAT_NAMESPACES:
            quantized += 1       # cortex_m:: and emlkit:: kernels run on integer data by construction
            continue
        ints = [a.name for a in n.all_input_nodes if _dtype(a) in CODES]
        if ints:
            broken.append(Finding(n.name, name, _source_line(n),
                                  f"float kernel {name} reads integer tensor(s) {', '.join(ints)} without a dequantize"))
        else:
            islands.append(Finding(n.name, name, _source_line(n), f"{name} runs in float on the CPU"))
        floating += 1
    return ProgramCheck(broken, islands, partitions, quantized, floating)


def enforce(check: ProgramCheck, target: str, allow_float: bool) -> list[str]:
    """Raise for programs that must not be written; return warnings for the report."""
    if check.broken:
        b = check.broken[0]
        more = f" (and {len(check.broken) - 1} more)" if len(check.broken) > 1 else ""
        raise AotError(f"the lowered program for {target} is broken: node {b.node} at {b.source}: {b.reason}{more}; "
                       "the quantizer did not annotate this op or the pattern around it failed to lower: "
                       "rewrite the op (see emlkit/passes) or report the model", EXIT_UNSUPPORTED)
    if check.float_islands:
        listing = "; ".join(f"{f.op} at {f.source}" for f in check.float_islands[:4])
        more = f" and {len(check.float_islands) - 4} more" if len(check.float_islands) > 4 else ""
        msg = f"{len(check.float_islands)} float op(s) left on the CPU for {target}: {listing}{more}"
        if not allow_float:
            raise AotError(f"{msg}; quantize or replace these ops, or pass --allow-float to accept float islands",
                           EXIT_UNSUPPORTED)
        log.warning("%s (allowed by --allow-float)", msg)
        return [msg]
    return []


def _node_of_instruction(program: Any, index: int) -> torch.fx.Node | None:
    """The graph node the emitter turned into kernel call `index` of the method's first chain: the emitter
    writes calls in graph order, so the k-th call of an operator is the k-th node calling it."""
    plan = program.executorch_program.execution_plan[0]
    instrs = plan.chains[0].instructions if plan.chains else []
    if not 0 <= index < len(instrs) or not hasattr(instrs[index].instr_args, "op_index"):
        return None
    op = plan.operators[instrs[index].instr_args.op_index].name
    k = sum(1 for ins in instrs[:index] if getattr(ins.instr_args, "op_index", None) is not None
            and plan.operators[ins.instr_args.op_index].name == op)
    calls = [n for n in program.exported_program().graph_module.graph.nodes if n.op == "call_function"
             and getattr(getattr(n.target, "_schema", None), "name", None) == op]
    return calls[k] if k < len(calls) else None


def check_device_load(program: Any, bpte: bytes, target: str) -> None:
    """Load the bundled program with the firmware itself (built for the host, emlkit.hostfw) before anything
    is written: every op adapter's prepare and the loader's checks run as on the device, so a program the
    device would refuse is refused here with the device's own message."""
    with tempfile.TemporaryDirectory(prefix="emlkit-load-") as d:
        path = Path(d) / "program.bpte"
        path.write_bytes(bpte)
        try:
            refusal = hostfw.load_check(path)
        except hostfw.HostBuildError as exc:
            raise hostfw.unavailable("run the firmware's load check", exc) from exc
    if refusal is None:
        return
    if refusal.message.startswith("cannot place"):  # the fit check's question, asked against the board
        log.warning("warning: the host load check could not place the program (%s): not checked at compile time",
                    refusal.message)
        return
    if refusal.message.startswith("corrupt program"):
        raise AotError(f"the firmware would refuse the program for {target} at load: {refusal.message}; the memory "
                       "plan puts a kernel's output over its own input (a bug: report the model)", EXIT_INTERNAL)
    node = None if refusal.instruction is None else _node_of_instruction(program, refusal.instruction)
    message = refusal.message
    if node is not None:  # the node names the place; the adapter's own message follows "instruction N (op): "
        message = f"node {node.name} at {_source_line(node)}: {message.split('): ', 1)[-1]}"
    raise AotError(f"the firmware would refuse the program for {target} at load: {message}; the "
                   "lowering produced arguments our kernels do not take: change that layer or report the model",
                   EXIT_UNSUPPORTED)


def program_needs(program: Any) -> ProgramNeeds:
    """What the emitted program (an ExecutorchProgramManager) asks the device's runtime for, counted by the
    firmware's own loader on the host (emlkit.program_needs)."""
    try:
        return ProgramNeeds.from_program(program.executorch_program, program.buffer)
    except hostfw.HostBuildError as exc:
        raise hostfw.unavailable("read the program with the firmware's loader", exc) from exc
    except hostfw.ProgramRefused as exc:  # the load check passed, so this is ours
        raise AotError(f"the firmware's loader cannot size the program: {exc} (a bug: report the model)",
                       EXIT_INTERNAL) from exc
