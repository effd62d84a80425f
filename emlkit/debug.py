"""`debug`: where a quantized model loses accuracy, layer by layer, on the device.

The program runs once on the device with every call's output recorded (the firmware's ETDump debug events and
their debug buffer, firmware/runtime/etdump.h: the format ExecuTorch's Inspector reads). Each recorded output is
matched to the graph node it came from (the emitted program's instruction -> debug handle map, then the node of
that handle whose output has the recorded shape and dtype) and compared twice:
- with the host reference's value of that node (the edge program run in PyTorch, as `compile` does for the
  outputs): the device must be 0 steps away; the first layer that is not is where the device departs;
- with the float model's tensor at the same point, as SNR in dB after dequantizing with the node's output
  quantization parameters. The float tensor is found from the node's provenance: a quantize takes the float of
  what it quantizes; a view or copy the float node of its source name; an op the last float node of its module
  (nn_module_stack) of a comparable shape, followed through the activations it folds in (a conv with its ReLU
  compares with the ReLU's output). Comparable: the same shape, or the same without size-1 dims. A node with no
  such tensor shows no SNR.
The drop of a layer is the SNR lost since the previous layer that has one: where accuracy goes.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import math
import operator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from emlkit.debug_suggest import module_path as _module_path
from emlkit.errors import EXIT_MISMATCH, EXIT_OK, AotError
from emlkit.load import LoadedModel, calibration_set, load_model
from emlkit.numerics import compare, flatten_outputs, snr_db
from emlkit.passes.manager import source_names
from emlkit.requests import DebugRequest

log = logging.getLogger(__name__)

# Ops that move or view int codes without changing them: their quantization parameters are their input's.
_MOVES = ("view_copy", "_clone_dim_order", "clone", "permute_copy", "squeeze_copy", "unsqueeze_copy", "expand_copy",
          "slice_copy", "select_copy", "cat", "_to_dim_order_copy", "transpose", "getitem", "alias_copy")
_QUANTIZE = ("quantize_per_tensor",)
_DEQUANTIZE = ("dequantize_per_tensor",)
WORST = 3  # layers named as losing the most SNR


@dataclass
class Layer:
    instruction: int                # index in the method's instruction chain
    op: str                         # the program's operator, or delegate:<backend>
    node: str                       # the graph node whose output this is ("" when none matched)
    source: str                     # model file:line of that node
    module: str                     # the model's submodule it came from ("features.0"), "" for the top level
    shape: list[int]
    dtype: str
    steps: float | None             # largest |device - host reference|, in the tensor's units (codes for ints)
    snr_db: float | None            # device (dequantized) vs the float model at the same point
    drop_db: float | None = None    # SNR lost since the previous layer with an SNR
    float_node: str | None = None   # the float model's node it is compared with


@dataclass
class NpuCommand:
    """One Ethos-U command as the functional model (the one the co-simulated NPU runs) executed it for this input,
    against the TOSA reference's tensor of its output shape (emlkit/npu/trace.py)."""

    delegate: int
    index: int                      # in the command stream
    op: str                         # CONV, DEPTHWISE, POOL_MAX, ELEMENTWISE, DMA, ...
    ifm_shape: list[int]
    ofm_shape: list[int]
    tosa_tensor: str | None         # the closest TOSA tensor of its output shape; None: none has that shape
    steps: int | None               # largest difference from it, in int codes (0: the command computed it)
    quantized_at: str | None = None  # the delegate graph's quantize whose codes the OFM holds (see npu_float_snr)
    float_node: str | None = None   # the float model's node that quantize stands for
    snr_db: float | None = None     # the OFM, dequantized with that quantize's scale, against the float node


@dataclass
class DebugInputs:
    """The loaded model, calibration set and sample a debug run used, and the program's output SNR on the host
    reference: --suggest starts from these instead of loading and compiling them again."""
    model: LoadedModel
    calibration: list[tuple[torch.Tensor, ...]]
    sample: tuple[torch.Tensor, ...]
    as_compiled_db: float


@dataclass
class DebugReport:
    model: str
    target: str
    board: str
    sim: str
    layers: list[Layer]
    first_departure: int | None     # index in layers of the first one off the host reference
    worst: list[int] = field(default_factory=list)  # indices in layers, most SNR lost first
    plot: str | None = None
    etdump: str | None = None
    debug_buffer: str | None = None
    etrecord: str | None = None
    npu_commands: list[NpuCommand] = field(default_factory=list)
    remedies: dict[str, Any] | None = None   # debug --suggest: {"layer", "as_compiled_db", "remedies": [...]}
    # what the run was made from, for --suggest: not part of the report's JSON
    inputs: DebugInputs | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        d = asdict(dataclasses.replace(self, inputs=None))
        d.pop("inputs")
        for row in [*d["layers"], *d["npu_commands"]]:
            for k in ("snr_db", "drop_db"):
                if row.get(k) is not None and not math.isfinite(row[k]):
                    row[k] = "inf" if row[k] > 0 else "-inf"
        return d


# ---------------------------------------------------------------- the device's recorded outputs

_DTYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
           6: torch.float32, 7: torch.float64, 11: torch.bool}


def device_outputs(etdump: bytes, debug_buffer: bytes) -> tuple[dict[int, torch.Tensor], dict[int, str]]:
    """Every call's recorded output, by instruction index, and each instruction's operator name, from the run
    that holds debug events."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    try:
        dump = deserialize_from_etdump_flatcc(etdump)
    except Exception as exc:
        raise AotError(f"the device's ETDump does not parse: {type(exc).__name__}: {exc}") from exc
    for run in dump.run_data or []:
        events = run.events or []
        debug = [e.debug_event for e in events if e.debug_event is not None]
        if not debug:
            continue
        names = {e.profile_event.instruction_id: e.profile_event.name for e in events
                 if e.profile_event is not None and e.profile_event.instruction_id >= 0}
        out: dict[int, torch.Tensor] = {}
        for d in debug:
            t = d.debug_entry.tensor
            dtype = _DTYPES.get(int(t.scalar_type.value if hasattr(t.scalar_type, "value") else t.scalar_type))
            if dtype is None:
                continue
            n = math.prod(t.sizes) * torch.empty((), dtype=dtype).element_size()
            if t.offset + n > len(debug_buffer):
                raise AotError(f"the debug buffer ({len(debug_buffer)} bytes) is shorter than its events say "
                               f"(instruction {d.instruction_id} ends at {t.offset + n}): rerun the program")
            raw = bytearray(debug_buffer[t.offset:t.offset + n])
            out[d.instruction_id] = torch.frombuffer(raw, dtype=dtype).reshape(list(t.sizes)) if n else \
                torch.zeros(list(t.sizes), dtype=dtype)
        return out, names
    raise AotError("the device's ETDump holds no debug events: the firmware image predates `emlkit debug` or the "
                   "run failed before its first case; rebuild and rerun")


# ---------------------------------------------------------------- graph matching

def _op_name(n: torch.fx.Node) -> str:
    return str(getattr(n.target, "__name__", n.target)).split(".")[0]


def _is(n: torch.fx.Node, names: tuple[str, ...]) -> bool:
    return n.op == "call_function" and any(k in str(n.target) for k in names)


def _handles(node: torch.fx.Node) -> tuple[int, ...]:
    h = node.meta.get("debug_handle")
    if h is None:
        return ()
    return (h,) if isinstance(h, int) else tuple(h)


def _val(n: torch.fx.Node) -> Any:
    v = n.meta.get("val")
    return v if isinstance(v, torch.Tensor) else None


def instruction_nodes(gm: torch.fx.GraphModule, handle_map: dict[int, Any], recorded: dict[int, torch.Tensor],
                      names: dict[int, str] | None = None) -> dict[int, torch.fx.Node]:
    """The node each recorded instruction's output belongs to: a node of the instruction's debug handles whose
    output has the recorded shape and dtype, of the instruction's operator where one is (a copy after an op may
    share its handle). Nodes a pass split from one (a fused projection into its parts)
    share a handle: instructions with the same handles take those nodes one by one, in graph order, as the
    program was emitted in that order; a lone instruction takes the last (its op after views and copies)."""
    by_handle: dict[int, list[torch.fx.Node]] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function":
            for h in _handles(n):
                by_handle.setdefault(h, []).append(n)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    groups: dict[tuple[Any, ...], list[int]] = {}
    cands: dict[int, list[torch.fx.Node]] = {}
    for instr in sorted(recorded):
        t = recorded[instr]
        hs = handle_map.get(instr)
        hs = [hs] if isinstance(hs, int) else list(hs or [])
        found = {n for h in hs for n in by_handle.get(h, [])
                 if (v := _val(n)) is not None and list(v.shape) == list(t.shape) and v.dtype == t.dtype}
        op = (names or {}).get(instr, "").split("::")[-1].split(".")[0]
        same_op = {n for n in found if op and f".{op}." in f".{str(getattr(n.target, '__name__', n.target))}."}
        cands[instr] = sorted(same_op or found, key=lambda n: order[n])
        groups.setdefault((tuple(sorted(hs)), tuple(t.shape), t.dtype), []).append(instr)
    out: dict[int, torch.fx.Node] = {}
    for instrs in groups.values():
        if len(instrs) == 1:
            if cands[instrs[0]]:
                out[instrs[0]] = cands[instrs[0]][-1]
            continue
        nodes = cands[instrs[0]]
        for k, instr in enumerate(instrs):  # one node each, in order; more instructions than nodes: unmatched
            if k < len(nodes):
                out[instr] = nodes[k]
    return out


def qparams(n: torch.fx.Node) -> tuple[float, int] | None:
    """The (scale, zero point) of a node's int output: its folded output qparams, a quantize's own arguments, a
    code-moving op's input's, or a dequantize user's."""
    seen = 0
    while n is not None and seen < 64:
        seen += 1
        oq = n.meta.get("output_qparams") or {}
        if 0 in oq and not getattr(oq[0], "per_channel", False):
            return float(oq[0].scale), int(oq[0].zp)
        if _is(n, _QUANTIZE) and len(n.args) >= 3:
            return float(n.args[1]), int(n.args[2])
        for u in n.users:
            if _is(u, _DEQUANTIZE) and len(u.args) >= 3 and u.args[0] is n:
                return float(u.args[1]), int(u.args[2])
        if _is(n, _MOVES) and n.args and isinstance(n.args[0], torch.fx.Node):
            n = n.args[0]
            continue
        return None
    return None


def capture_values(gm: torch.fx.GraphModule, inputs: tuple[Any, ...]) -> dict[str, Any]:
    """Every node's value when GM runs on INPUTS, by node name."""
    values: dict[str, Any] = {}

    class _Capture(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            out = super().run_node(n)
            values[n.name] = out
            return out

    with torch.no_grad():
        _Capture(gm).run(*inputs)
    return values


class FloatModel:
    """The float model's value at every node of its exported graph, for one input."""

    def __init__(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        from emlkit.lower.export import export_module

        ep = export_module(module, inputs)
        gm = ep.module()
        self.values: dict[str, Any] = capture_values(gm, inputs)
        self.nodes = [n for n in gm.graph.nodes]
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        meta = {n.name: n for n in ep.graph.nodes}  # the lifted graph keeps the module stacks
        self.path = {n.name: _module_path(meta.get(n.name, n)) for n in self.nodes}
        self.inputs = [n.name for n in self.nodes if n.op == "placeholder"][-len(inputs):] if inputs else []
        outs = next((n for n in self.nodes if n.op == "output"), None)
        flat = outs.args[0] if outs is not None else []
        flat = flat if isinstance(flat, (list, tuple)) else [flat]
        self.outputs = [a.name for a in flat if isinstance(a, torch.fx.Node)]

    def tensor(self, name: str | None) -> torch.Tensor | None:
        v = self.values.get(name) if name else None
        return v if isinstance(v, torch.Tensor) else None


def _shape(v: Any) -> list[int] | None:
    return list(v.shape) if isinstance(v, torch.Tensor) else None


def comparable(a: list[int] | None, b: list[int] | None) -> bool:
    """Element for element the same tensor: the same shape, or the same once size-1 dims are dropped (a Linear
    run as a 1x1 conv); never a transpose of one."""
    return a is not None and b is not None and (a == b or [d for d in a if d != 1] == [d for d in b if d != 1])


# What a quantized op takes into itself: a BatchNorm folded into its weights, and the activations ExecuTorch folds
# into its output clamp.
_FOLDED = ("relu", "relu_", "relu6", "hardtanh", "hardtanh_", "clamp", "clamp_", "batch_norm",
           "_native_batch_norm_legit_no_training", "getitem")


class FloatMatcher:
    """Which float node each edge node's output stands for (see the module docstring)."""

    def __init__(self, fm: FloatModel, gm: torch.fx.GraphModule, user_inputs: list[str]) -> None:
        self.fm = fm
        self.gm = gm
        self.memo: dict[str, str | None] = {}
        self.user_inputs = {name: i for i, name in enumerate(user_inputs)}
        out = next(n for n in gm.graph.nodes if n.op == "output")
        flat = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
        self.graph_outputs = {a.name: i for i, a in enumerate(flat) if isinstance(a, torch.fx.Node)}

    def match(self, n: torch.fx.Node) -> str | None:
        if n.name not in self.memo:
            self.memo[n.name] = None  # cycles cannot occur in a graph, but a bad meta must not recurse forever
            self.memo[n.name] = self._match(n)
        return self.memo[n.name]

    def _match(self, n: torch.fx.Node) -> str | None:
        fm = self.fm
        want = _shape(_val(n))
        if n.name in self.graph_outputs and self.graph_outputs[n.name] < len(fm.outputs):
            return fm.outputs[self.graph_outputs[n.name]]
        for u in n.users:  # an int output the program dequantizes for the user: the model's output
            if _is(u, _DEQUANTIZE) and u.name in self.graph_outputs and self.graph_outputs[u.name] < len(fm.outputs):
                return fm.outputs[self.graph_outputs[u.name]]
        if n.op == "placeholder":
            i = self.user_inputs.get(n.name)
            return fm.inputs[i] if i is not None and i < len(fm.inputs) else None
        src = n.args[0] if n.args and isinstance(n.args[0], torch.fx.Node) else None
        if (_is(n, _QUANTIZE) or _is(n, _DEQUANTIZE)) and src is not None:
            return self.match(src)
        named = [r for r in source_names(n) if comparable(_shape(fm.values.get(r)), want)]
        if _is(n, _MOVES):  # a view or copy: the float node of its name and shape, else its source's if comparable
            same = [r for r in named if _shape(fm.values.get(r)) == want]
            if same:
                return max(same, key=lambda r: fm.index.get(r, -1))
            m = self.match(src) if src is not None else None
            if m is not None and comparable(_shape(fm.values.get(m)), want):
                return m
            if not (n.target is operator.getitem and src is not None and isinstance(src.meta.get("val"), (tuple, list))):
                return None
            # an element of a multi-output op (max_pool2d_with_indices): matched by its module as the op would be
        named = [r for r in named if fm.nodes[fm.index[r]].op == "call_function"] if named else []
        path = _module_path(n)
        own = [node for node in fm.nodes if node.op == "call_function" and fm.path.get(node.name) == path
               and comparable(_shape(fm.values.get(node.name)), want)] if path else []
        if own:
            last = own[-1]
            # through the activations the op folds in: conv + ReLU compares with the ReLU's output
            while len(last.users) == 1:
                u = next(iter(last.users))
                name = str(getattr(u.target, "__name__", u.target)).split(".")[0]
                if u.op != "call_function" or name not in _FOLDED or not comparable(_shape(fm.values.get(u.name)), want):
                    break
                last = u
            return last.name
        if named:
            return max(named, key=lambda r: fm.index.get(r, -1))
        return None


# ---------------------------------------------------------------- comparing

def _steps(device: torch.Tensor, ref: Any) -> float | None:
    if not isinstance(ref, torch.Tensor) or list(ref.shape) != list(device.shape):
        return None
    if device.dtype.is_floating_point:
        return float((device.double() - ref.double()).abs().max()) if device.numel() else 0.0
    return float((device.long() - ref.long()).abs().max()) if device.numel() else 0.0


def _real(t: torch.Tensor, qp: tuple[float, int] | None) -> torch.Tensor | None:
    if t.dtype.is_floating_point:
        return t.double()
    if qp is None:
        return None
    return (t.double() - qp[1]) * qp[0]


def _snr(device: torch.Tensor, node: torch.fx.Node, ftensor: torch.Tensor | None) -> float | None:
    if ftensor is None or not comparable(list(ftensor.shape), list(device.shape)):
        return None
    real = _real(device, qparams(node))
    if real is None:
        return None
    return snr_db(ftensor.reshape(-1).double(), real.reshape(-1))


def _source(n: torch.fx.Node, model_source: str) -> str:
    from emlkit.etdump import _source_line

    return _source_line({n.name: n.meta.get("stack_trace")}, model_source if model_source.endswith(".py") else None)


def build_layers(recorded: dict[int, torch.Tensor], names: dict[int, str], nodes: dict[int, torch.fx.Node],
                 host: dict[str, Any], matcher: FloatMatcher, model_source: str) -> list[Layer]:
    layers: list[Layer] = []
    for instr in sorted(recorded):
        t = recorded[instr]
        n = nodes.get(instr)
        op = names.get(instr, "?")
        op = op.removesuffix(".out")
        if n is None:
            layers.append(Layer(instr, op, "", "", "", list(t.shape), str(t.dtype).removeprefix("torch."), None, None))
            continue
        if op == "DELEGATE_CALL":
            op = "delegate:" + _backend(matcher.gm, n)
        fname = matcher.match(n)
        layers.append(Layer(instr, op, n.name, _source(n, model_source), _module_path(n), list(t.shape),
                            str(t.dtype).removeprefix("torch."), _steps(t, host.get(n.name)),
                            _snr(t, n, matcher.fm.tensor(fname)), float_node=fname))
    prev = None
    for row in layers:
        if row.snr_db is None:
            continue
        if prev is not None and math.isfinite(prev) and math.isfinite(row.snr_db):
            row.drop_db = prev - row.snr_db
        prev = row.snr_db
    return layers


def _backend(gm: torch.fx.GraphModule, n: torch.fx.Node) -> str:
    """The backend of the delegate call whose output node N is (directly or through a getitem)."""
    call = n.args[0] if n.target is operator.getitem and n.args else n
    if isinstance(call, torch.fx.Node) and call.args and isinstance(call.args[0], torch.fx.Node):
        lowered = getattr(gm, str(call.args[0].target), None)
        if lowered is not None and getattr(lowered, "backend_id", None):
            return str(lowered.backend_id)
    return "delegate"


def first_departure(layers: list[Layer]) -> int | None:
    return next((i for i, r in enumerate(layers) if (r.steps or 0) > 0), None)


def worst_layers(layers: list[Layer], k: int = WORST) -> list[int]:
    drops = [(r.drop_db, i) for i, r in enumerate(layers) if r.drop_db is not None and r.drop_db > 0]
    return [i for _, i in sorted(drops, reverse=True)[:k]]


# ---------------------------------------------------------------- the command

def _handle_map(program: Any) -> dict[int, Any]:
    m = program.debug_handle_map
    if m and all(isinstance(v, dict) for v in m.values()):  # per method
        m = m.get("forward") or next(iter(m.values()))
    return {int(k): v for k, v in (m or {}).items()}


def _input_sample(req: DebugRequest, example: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    if req.inputs is None:
        return example
    if not Path(req.inputs).exists():
        raise AotError(f"--inputs {req.inputs}: no such file or folder (give a .pt of an input tuple, an .npz with "
                       "one array per input, or a folder of .npy/.pt samples)")
    return calibration_set(str(req.inputs), example, "--inputs").samples[0]


def debug_model(req: DebugRequest, tamper: Callable[[Any], None] | None = None) -> DebugReport:
    """Run REQ's model on the device with every call's output recorded and compare layer by layer.

    `tamper` (tests) changes the lowered edge program after the host reference ran and before it is emitted: the
    device then runs a program the reference does not, as a kernel bug would make it."""
    from emlkit import emit, reference, verify
    from emlkit.compile import CompileResult, lower_model, output_folder, to_executorch
    from emlkit.memory_plan import DEFAULT_PLANNER
    from emlkit.run import execute, exit_status

    spec = req.program
    target = spec.target
    model = load_model(spec.model)
    sample = _input_sample(req, model.inputs)
    calib = calibration_set(spec.calibration, model.inputs)
    out = output_folder(req.output)
    stem = f"{model.name}_{target.name}_debug"
    lowered, tosa = lower_model(model, target, spec.options, calib.samples, out / f"{stem}.vela")
    host: dict[str, Any] = {}
    with torch.no_grad():
        ref_out = reference.run_lowered(lowered.edge, sample, tosa, capture=host)
    if tamper is not None:
        tamper(lowered.edge)
    edge_before_emit = copy.deepcopy(lowered.edge)
    program = to_executorch(lowered, target, spec.options.memory_planner if spec.options else DEFAULT_PLANNER)
    bundled = emit.bundle(program, [(sample, ref_out)])
    data = emit.bpte_bytes(bundled)
    verify.check_device_load(program, data, target.name)
    pte, bpte, etrecord = out / f"{stem}.pte", out / f"{stem}.bpte", out / f"{stem}.etrecord"
    emit.write_pte(program, pte)
    emit.atomic_write(bpte, data)
    etrecord_error = emit.write_etrecord(edge_before_emit, bundled, etrecord)
    needs = verify.program_needs(program) if target.flow == "cortex_m" else None
    cres = CompileResult(model.name, target, pte, bpte, out / f"{stem}.json",
                         {"program_needs": needs.to_dict() if needs is not None else None})
    etdump_path = out / f"{stem}.etdp"
    outcome = execute(cres, req.board, req.sim, req.timeout, req.kernels, None, etdump=str(etdump_path), debug=True)
    if outcome.status not in ("PASS", "FAIL"):
        exit_status(outcome, None)  # raises the run's one-line error
    if outcome.etdump is None or outcome.debug_buffer is None:
        raise AotError(f"the device wrote no ETDump with debug events on {outcome.board}: it needs a simulator "
                       "with semihosting (QEMU, an FVP) or --board host")
    recorded, names = device_outputs(Path(outcome.etdump).read_bytes(), Path(outcome.debug_buffer).read_bytes())
    ep = edge_before_emit.exported_program()
    nodes = instruction_nodes(ep.graph_module, _handle_map(program), recorded, names)
    fm = FloatModel(model.module, sample)
    matcher = FloatMatcher(fm, ep.graph_module, list(ep.graph_signature.user_inputs))
    layers = build_layers(recorded, names, nodes, host, matcher, model.source)
    rep = DebugReport(model.name, target.name, outcome.board, outcome.sim, layers, first_departure(layers),
                      worst_layers(layers), None, str(outcome.etdump), str(outcome.debug_buffer),
                      None if etrecord_error else str(etrecord))
    with torch.no_grad():
        want = flatten_outputs(model.module(*sample))
    rep.inputs = DebugInputs(model, calib.samples, sample, min(c["snr_db"] for c in compare(want, ref_out)))
    if tosa:
        rep.npu_commands = npu_commands(data, [tosa[k] for k in sorted(tosa, key=_delegate_index)],
                                        ep.graph_module, fm)
    rep.plot = plot(rep, out / f"{stem}.png")
    return rep


def _delegate_index(name: str) -> int:
    tail = name.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def npu_commands(bpte: bytes, tosa_graphs: list[bytes], edge_gm: torch.fx.GraphModule | None = None,
                 fm: FloatModel | None = None) -> list[NpuCommand]:
    """Every command of every Ethos-U delegate, run on the functional model with the bundled input and checked
    against the TOSA reference's intermediate tensors; with the edge graph and the float model, each command
    whose output is the codes of one of the delegate graph's quantizes gets an SNR against float there."""
    from emlkit.npu.errors import NpuError
    from emlkit.npu.trace import run_bundled, trace_bundled

    try:
        run = run_bundled(bpte)
        traces = trace_bundled(bpte, tosa_graphs, run)
    except NpuError as err:
        log.warning("warning: no per-command NPU table: %s", err)
        return []
    out = [NpuCommand(d, r.index, r.op, list(r.ifm_shape), list(r.ofm_shape), r.tosa_tensor, r.max_diff)
           for d, rows in enumerate(traces) for r in rows]
    if edge_gm is not None and fm is not None:
        modules = delegate_modules(edge_gm)
        for d, (entries, args) in enumerate(zip(run.traces, run.delegate_args)):
            if d < len(modules):
                rows = [c for c in out if c.delegate == d]
                npu_float_snr(rows, entries, args, modules[d], fm)
    return out


def delegate_modules(edge_gm: torch.fx.GraphModule) -> list[Any]:
    """The ExportedProgram each delegate call lowered (its original_module), in call order."""
    mods = []
    for n in edge_gm.graph.nodes:
        if n.op == "call_function" and "call_delegate" in str(n.target) and n.args and n.args[0].op == "get_attr":
            mods.append(getattr(edge_gm, n.args[0].target).original_module)
    return mods


def _to_hwc(t: torch.Tensor) -> torch.Tensor:
    """A logical NCHW (or N..C) tensor in the NPU's memory order: batch dropped, channels last."""
    t = t[0] if t.dim() == 4 and t.shape[0] == 1 else t
    return t.permute(1, 2, 0) if t.dim() == 3 else t


def npu_float_snr(rows: list[NpuCommand], entries: list[Any], args: list[torch.Tensor], ep: Any,
                  fm: FloatModel, tolerance: int = 1) -> None:
    """Fill each row's SNR against float: the delegate's graph runs with PT2E's quantize/dequantize semantics on
    the delegate's inputs, and a command whose OFM is within TOLERANCE codes of one quantize's output (the same
    values up to the integer requantization's rounding) is that tensor: its OFM dequantized with that quantize's
    scale and zero point is compared with the float model's node for it. Commands that write an intermediate
    Vela keeps to itself (a stripe, a fused op's partial) get none."""
    gm = ep.module()
    values = capture_values(gm, tuple(args))
    graph = {n.name: n for n in ep.graph_module.graph.nodes}
    quants = [(n.name, values[n.name], float(n.args[1]), int(n.args[2])) for n in gm.graph.nodes
              if _is(n, _QUANTIZE) and isinstance(values.get(n.name), torch.Tensor) and n.name in graph
              and isinstance(n.args[1], (int, float)) and isinstance(n.args[2], int)]
    matcher = FloatMatcher(fm, ep.graph_module, [])
    matcher.graph_outputs = {}  # a delegate's outputs are not the model's
    by_index = {r.index: r for r in rows}
    for e in entries:
        row = by_index.get(e.index)
        if row is None or e.ofm is None:
            continue
        ofm = torch.from_numpy(np.ascontiguousarray(e.ofm)).to(torch.int64)
        best: tuple[int, str, torch.Tensor, float, int] | None = None
        for name, codes, scale, zp in quants:
            hwc = _to_hwc(codes)
            if hwc.numel() != ofm.numel() or (hwc.dim() == ofm.dim() and tuple(hwc.shape) != tuple(ofm.shape)):
                continue
            d = int((hwc.reshape(ofm.shape).to(torch.int64) - ofm).abs().max())
            if d <= tolerance and (best is None or d < best[0]):
                best = (d, name, codes, scale, zp)
        if best is None:
            continue
        _, name, codes, scale, zp = best
        row.quantized_at = name
        row.float_node = matcher.match(graph[name])
        ft = fm.tensor(row.float_node)
        if ft is None or ft.numel() != codes.numel():
            continue
        real = (ofm.reshape(_to_hwc(codes).shape).double() - zp) * scale
        if codes.dim() == 4 and codes.shape[0] == 1:
            real = real.permute(2, 0, 1)
        row.snr_db = snr_db(ft.reshape(-1).double(), real.reshape(-1))


def plot(rep: DebugReport, path: Path) -> str | None:
    """SNR against depth, the departure and the worst layers marked; None when no layer has an SNR."""
    pts = [(i, r.snr_db) for i, r in enumerate(rep.layers) if r.snr_db is not None and math.isfinite(r.snr_db)]
    if not pts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(min(18.0, max(6.0, 0.35 * len(rep.layers))), 4.5))
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o")
    for i in rep.worst:
        r = rep.layers[i]
        ax.annotate(f"-{r.drop_db:.1f} dB", (i, r.snr_db), textcoords="offset points", xytext=(0, -14),
                    ha="center", color="tab:red", fontsize=8)
    if rep.first_departure is not None:
        ax.axvline(rep.first_departure, color="tab:red", linestyle="--", label="device departs from the reference")
        ax.legend(loc="best", fontsize=8)
    every = max(1, len(rep.layers) // 48)  # a readable number of labels
    ticks = list(range(0, len(rep.layers), every))
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{i}:{rep.layers[i].op.split('::')[-1]}" for i in ticks], rotation=60, ha="right",
                       fontsize=7)
    ax.set_ylabel("SNR vs float model (dB)")
    ax.set_title(f"{rep.model} on {rep.target} ({rep.board}, {rep.sim}): SNR per layer")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return str(path)


def _fmt_db(v: float | None) -> str:
    if v is None:
        return "-"
    return "inf" if math.isinf(v) and v > 0 else f"{v:.1f}"


def print_report(rep: DebugReport) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{rep.model} on {rep.board} ({rep.sim}), {rep.target}: every layer's output on the device")
    for col in ("#", "op", "module", "source", "shape", "float at", "steps vs ref", "SNR dB", "drop dB"):
        t.add_column(col, justify="right" if col in ("#", "steps vs ref", "SNR dB", "drop dB") else "left")
    for i, r in enumerate(rep.layers):
        mark = ""
        if i == rep.first_departure:
            mark = " [red]<- departs[/red]"
        elif i in rep.worst:
            mark = f" [yellow]<- worst {rep.worst.index(i) + 1}[/yellow]"
        steps = "-" if r.steps is None else (f"{r.steps:g}" if r.steps else "0")
        t.add_row(str(r.instruction), r.op.split("::")[-1], r.module or "-", r.source, "x".join(map(str, r.shape)) or "()",
                  r.float_node or "-", steps, _fmt_db(r.snr_db), _fmt_db(r.drop_db) + mark)
    con = Console(width=max(Console().width, 150))
    con.print(t)
    if rep.first_departure is None:
        con.print(f"device = host reference at every one of {len(rep.layers)} layers (0 steps)")
    else:
        r = rep.layers[rep.first_departure]
        con.print(f"[red]first departure from the host reference: instruction {r.instruction}, {r.op} "
                  f"({r.node or 'no node'}{', ' + r.source if r.source else ''}): "
                  f"{'no reference value' if r.steps is None else f'{r.steps:g} steps'}[/red]")
    if rep.worst:
        con.print("most SNR lost: " + ", ".join(
            f"#{rep.layers[i].instruction} {rep.layers[i].op.split('::')[-1]}"
            f"{' in ' + rep.layers[i].module if rep.layers[i].module else ''} (-{rep.layers[i].drop_db:.1f} dB)"
            for i in rep.worst))
    if rep.plot:
        con.print(f"plot: {rep.plot}")
    if rep.npu_commands:
        _print_npu(con, rep)
    if rep.etrecord:
        con.print(f"ExecuTorch's Inspector reads the same data: Inspector(etdump_path={rep.etdump!r}, "
                  f"etrecord={rep.etrecord!r}, debug_buffer_path={rep.debug_buffer!r})")


def _print_npu(con: Any, rep: DebugReport) -> None:
    from rich.table import Table

    t = Table(title="inside the NPU delegates: every command on the functional model, against the closest TOSA "
                    "reference tensor of its output shape")
    for col in ("delegate", "#", "command", "ifm", "ofm", "closest TOSA tensor", "steps to it", "float at", "SNR dB"):
        t.add_column(col, justify="right" if col in ("delegate", "#", "steps to it", "SNR dB") else "left")
    for c in rep.npu_commands:
        t.add_row(str(c.delegate), str(c.index), c.op, "x".join(map(str, c.ifm_shape)) or "-",
                  "x".join(map(str, c.ofm_shape)) or "-", c.tosa_tensor or "-", "-" if c.steps is None else str(c.steps),
                  c.float_node or "-", _fmt_db(c.snr_db))
    con.print(t)
    checked = [c for c in rep.npu_commands if c.steps is not None]
    con.print(f"{sum(c.steps == 0 for c in checked)} of {len(checked)} commands with a TOSA tensor of their shape "
              f"compute it exactly ({len(rep.npu_commands)} in all; the others move data or write a stripe). A "
              "command off its closest tensor may compute another tensor of that shape, which TOSA does not keep "
              "(Vela fuses ops): the delegate's output above is the verdict.")


def _suggest(req: DebugRequest, rep: DebugReport) -> None:
    from emlkit.debug_suggest import print_remedies, suggest

    if not rep.worst:
        log.info("no layer loses SNR: nothing to suggest")
        return
    if rep.inputs is None:
        raise AotError("internal: debug --suggest needs the report of a debug run made in this process")
    layer = rep.layers[rep.worst[0]]
    name = f"#{layer.instruction} {layer.op.split('::')[-1]}" + (f" ({layer.module})" if layer.module else "")
    run = rep.inputs
    base, remedies = suggest(run.model, req.program.target, req.program.options, run.calibration, run.sample,
                             layer.module, Path(req.output) / f"{rep.model}_{rep.target}_suggest",
                             as_compiled_db=run.as_compiled_db)
    print_remedies(base, remedies, name)
    rep.remedies = {"layer": name, "as_compiled_db": base, "remedies": [asdict(r) for r in remedies]}


def debug_cmd(req: DebugRequest) -> int:
    """Print the per-layer table, write NAME_TARGET_debug.json/.png; 0 when the device equals the host reference
    at every layer, 1 (a wrong output) when it departs."""
    rep = debug_model(req)
    print_report(rep)
    if req.suggest:
        _suggest(req, rep)
    path = Path(req.output) / f"{rep.model}_{rep.target}_debug.json"
    path.write_text(json.dumps(rep.to_json(), indent=1) + "\n")
    log.info("wrote %s", path)
    return EXIT_OK if rep.first_departure is None else EXIT_MISMATCH


