"""Elementwise LUT fusion: one lookup table per quantized single-input pointwise chain.

Matches, in the converted pt2e graph (quantized_decomposed Q/DQ + aten ops):

    dequantize(x_q, s_in, zp_in) -> f1 -> [q -> dq] -> f2 -> ... -> fN -> quantize(s_out, zp_out)

where every f_i is a pointwise op of the chain value alone (unary ops, or
add/sub/mul/div whose other operand is a Python scalar or a one-element
constant tensor, on either side), every interior node is used only inside
the region, and the intermediate requantizations are dropped.

Produces one table lookup `y_q = T[x_q]`, with T computed by dequantizing
every input code the way the backend does, running the whole chain in float
with no intermediate quantization, and quantizing the final values with the
backend's own rounding and clamping. How the table is evaluated and what op
carries it is the backend's business (`emlkit.passes.lut_backends`); the search
here does not know about backends.

Not fused: a standalone requantization (dq -> q) or a pure Q/DQ pair (no op
in between), anything that crosses a node used outside the region (branches,
graph outputs, mutations), in-place ops, and chains whose end is not
quantized (there are no output qparams to build a table for).
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from emlkit.passes.graph import (BINARY_OPS, DQ_TARGETS, Q_TARGETS, UNARY_OPS, copy_region_meta, move_onto_codes,
                                 per_tensor_qparams, qparams, unique_name)
from emlkit.passes.manager import Pass

log = logging.getLogger(__name__)

aten = torch.ops.aten


@dataclass
class Region:
    """One fusable chain: codes in (input_node), ops in order, quantize out."""

    input_node: torch.fx.Node            # integer tensor the table is indexed by
    input_dq: torch.fx.Node              # dequantize that starts the region (qparams)
    ops: list[torch.fx.Node]             # pointwise ops in evaluation order
    interior: list[torch.fx.Node]        # nodes the region removes (ops + internal Q/DQ), output first
    output_q: torch.fx.Node              # quantize that ends the region (qparams)

    @property
    def in_qparams(self) -> tuple[float, int, int, int, torch.dtype]:
        return qparams(self.input_dq)

    @property
    def out_qparams(self) -> tuple[float, int, int, int, torch.dtype]:
        return qparams(self.output_q)

    def chain_names(self) -> list[str]:
        return [op_label(n) for n in self.ops]


@dataclass
class FusionReport:
    regions: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    ops_before: int = 0
    ops_after: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"regions_fused": len(self.regions), "ops_before": self.ops_before,
                "ops_after": self.ops_after, "regions": self.regions, "skipped": self.skipped}


def op_label(node: torch.fx.Node) -> str:
    name = getattr(node.target, "__name__", str(node.target))
    consts = [_fmt(a) for a in _const_operands(node)]
    return f"{name}({', '.join(consts)})" if consts else name


def _fmt(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        v = v.item()
    return f"{v:g}" if isinstance(v, float) else str(v)


def _const_value(node: Any, gm: torch.fx.GraphModule) -> Any:
    """The value of a constant operand, or None when it is not a compile-time constant."""
    if isinstance(node, (int, float, bool)) or node is None or isinstance(node, str):
        return node
    if isinstance(node, torch.fx.Node) and node.op == "get_attr":
        obj: Any = gm
        for part in str(node.target).split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, torch.Tensor) and obj.numel() == 1 and obj.is_floating_point():
            return obj.detach().clone()
        return None
    if (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in DQ_TARGETS
            and per_tensor_qparams(node) and isinstance(node.args[0], torch.fx.Node) and node.args[0].op == "get_attr"):
        # Arm's quantizer turns a scalar operand into a quantized constant: its value is dequantize(code).
        obj = gm
        for part in str(node.args[0].target).split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, torch.Tensor) and obj.numel() == 1 and not obj.is_floating_point():
            scale, zp = node.args[1], node.args[2]
            return (obj.detach().to(torch.float32) - zp) * scale
        return None
    if isinstance(node, (list, tuple)) and all(isinstance(v, (int, float)) for v in node):
        return node
    return None


def _tensor_args(node: torch.fx.Node) -> list[torch.fx.Node]:
    return [a for a in list(node.args) + list(node.kwargs.values()) if isinstance(a, torch.fx.Node)]


def _const_operands(node: torch.fx.Node) -> list[Any]:
    gm = node.graph.owning_module
    out = []
    for a in list(node.args) + list(node.kwargs.values()):
        if isinstance(a, torch.fx.Node):
            v = _const_value(a, gm) if gm is not None else None
            if v is not None:
                out.append(v)
        elif isinstance(a, (int, float)) and not isinstance(a, bool):
            out.append(a)
    return out


def chain_operand(node: torch.fx.Node) -> torch.fx.Node | None:
    """If `node` is a fusable pointwise op of exactly one non-constant tensor, that tensor."""
    if node.op != "call_function":
        return None
    schema = getattr(node.target, "_schema", None)
    if schema is None or schema.is_mutable:     # in-place / out= variants mutate: never fused
        return None
    if node.target not in UNARY_OPS and node.target not in BINARY_OPS:
        return None
    if node.target in (aten.div.Tensor,) and node.kwargs.get("rounding_mode") is not None:
        return None
    if node.target is aten.gelu.default and node.kwargs.get("approximate", "none") not in ("none", "tanh"):
        return None
    gm = node.graph.owning_module
    dynamic = [a for a in _tensor_args(node) if _const_value(a, gm) is None]
    if len(dynamic) != 1:
        return None
    x = dynamic[0]
    if node.target in UNARY_OPS and node.args[0] is not x:
        return None
    # The constant must not broadcast the value to a new shape (a table maps element to element).
    val, xval = node.meta.get("val"), x.meta.get("val")
    if isinstance(val, torch.Tensor) and isinstance(xval, torch.Tensor) and val.shape != xval.shape:
        return None
    return x


def _only_user(node: torch.fx.Node, user: torch.fx.Node) -> bool:
    return len(node.users) == 1 and user in node.users


def find_regions(gm: torch.fx.GraphModule, report: FusionReport | None = None, single: bool = False) -> list[Region]:
    """Every maximal fusable region of the graph, found backwards from each quantize; `single`: regions end at
    the first quantized boundary (no requantization inside is dropped: one table per quantized op)."""
    regions: list[Region] = []
    taken: set[torch.fx.Node] = set()
    for q_out in reversed(list(gm.graph.nodes)):
        if q_out.op != "call_function" or q_out.target not in Q_TARGETS or not per_tensor_qparams(q_out):
            continue
        if q_out in taken:
            continue
        region = _grow(q_out, report, single)
        if region is None:
            continue
        if any(n in taken for n in region.interior):
            continue
        taken.update(region.interior)
        regions.append(region)
    regions.reverse()
    return regions


# Ops that move or copy values without changing them (their first argument is the tensor moved).
_MOVES = {aten.clone.default, aten.index_select.default, aten.view.default, aten.reshape.default,
          aten.permute.default, aten.transpose.int, aten.slice.Tensor, aten.select.int, aten.squeeze.dim,
          aten.unsqueeze.default, aten.flatten.using_ints, aten.expand.default}


def moves_onto_codes(gm: torch.fx.GraphModule) -> int:
    """`dequantize(x) -> moves -> pointwise ...` as `moves(x) -> dequantize -> pointwise ...`, where the moves
    (_MOVES: copies, index_select, views, permutes) only copy or move values and nothing else reads them: they
    move the int8 codes as well, and the pointwise chain after them then starts at a dequantize (a table). The
    quantizer leaves such runs unannotated after ops it shares qparams through (index_select and a layout clone
    after a non-dividing adaptive pool: random model dec7b:21). The count of runs moved."""
    g, moved = gm.graph, 0
    for last in [n for n in g.nodes if n.op == "call_function" and n.target in _MOVES]:
        if not last.users or not all(chain_operand(u) is last for u in last.users):
            continue
        run, cur = [last], last.args[0]
        while isinstance(cur, torch.fx.Node) and cur.op == "call_function" and cur.target in _MOVES \
                and len(cur.users) == 1:
            run.append(cur)
            cur = cur.args[0]
        dq = cur
        if not (isinstance(dq, torch.fx.Node) and dq.target in DQ_TARGETS and per_tensor_qparams(dq)
                and len(dq.users) == 1 and isinstance(dq.args[0], torch.fx.Node)
                and all(isinstance(m.meta.get("val"), torch.Tensor) for m in run)):
            continue
        move_onto_codes(g, run, dq, qparams(dq)[4])   # the codes' dtype, from the dequantize's arguments
        moved += 1
    return moved


def _grow(q_out: torch.fx.Node, report: FusionReport | None, single: bool = False) -> Region | None:
    """Walk back from a quantize through fusable ops; stop at the last DQ boundary reached."""
    ops: list[torch.fx.Node] = []
    interior: list[torch.fx.Node] = []
    best: Region | None = None
    cur = q_out.args[0]
    consumer = q_out
    stop_reason = ""
    while isinstance(cur, torch.fx.Node):
        if cur.op == "call_function" and cur.target in DQ_TARGETS and per_tensor_qparams(cur):
            src = cur.args[0]
            if ops and isinstance(src, torch.fx.Node):
                # The region input may have other users: it stays for them.
                best = Region(src, cur, list(reversed(ops)), list(interior), q_out)
            # Continue through an internal requantization q -> dq (dropped when fused).
            if (not single and isinstance(src, torch.fx.Node) and src.op == "call_function" and src.target in Q_TARGETS
                    and per_tensor_qparams(src) and _only_user(src, cur) and _only_user(cur, consumer)):
                interior = interior + [cur, src]
                consumer, cur = src, src.args[0]
                continue
            stop_reason = "reached the region input"
            break
        if not _only_user(cur, consumer):
            stop_reason = f"{cur.name} has users outside the chain"
            break
        x = chain_operand(cur)
        if x is None:
            stop_reason = f"{cur.name} ({getattr(cur.target, '__name__', cur.target)}) is not a single-input pointwise op"
            break
        ops.append(cur)
        interior = interior + [cur]
        consumer, cur = cur, x
    if best is None and ops and report is not None:
        report.skipped.append({"output": q_out.name, "chain": [op_label(n) for n in reversed(ops)],
                               "reason": f"no quantized input boundary: {stop_reason}"})
    return best


# ---------------------------------------------------------------- evaluation

def fill_undefined(out: torch.Tensor, nan: torch.Tensor) -> None:
    """Give the table entries where the fused chain is undefined (`nan`: log of a negative...) the
    nearest defined entry's value, in place, as the backends do; ValueError if none is defined."""
    if bool(nan.all()):
        raise ValueError("the fused chain is undefined on every input code")
    if bool(nan.any()):
        idx = torch.arange(len(out))
        defined = idx[~nan]
        for i in idx[nan].tolist():
            out[i] = out[defined[(defined - i).abs().argmin()]]


def evaluate_chain(ops: list[torch.fx.Node], x: torch.Tensor) -> torch.Tensor:
    """Run the region's ops on `x` in x's float dtype, no intermediate quantization."""
    cur = x
    for node in ops:
        gm = node.graph.owning_module
        src = chain_operand(node)

        def sub(a: Any) -> Any:
            if isinstance(a, torch.fx.Node):
                if a is src:
                    return cur
                v = _const_value(a, gm)
                # One-element constants act as scalars on the 1-D vector of codes.
                return v.reshape(()).to(x.dtype) if isinstance(v, torch.Tensor) else v
            return a

        args = tuple(sub(a) for a in node.args)
        kwargs = {k: sub(v) for k, v in node.kwargs.items()}
        cur = node.target(*args, **kwargs)
        if not isinstance(cur, torch.Tensor) or not cur.is_floating_point():
            raise ValueError(f"{node.name} does not produce a float tensor")
        cur = cur.to(x.dtype)
    if cur.shape != x.shape:
        raise ValueError(f"chain changed the shape of its input ({tuple(x.shape)} -> {tuple(cur.shape)})")
    return cur


@dataclass
class LutFusion(Pass):
    """The pass: `gm -> gm`, configured with a backend that builds and emits tables."""

    backend: Any = None                        # emlkit.passes.lut_backends.LutBackend
    # (target, options) -> backend: the declared pass (lut_backends.LutFusion, which builds on this
    # module) gives lut_backends.backend_for.
    choose_backend: Callable[[Any, Any], Any] | None = None
    report_key: str = "lut_fusion"  # the report entry of the declared pass (lut_backends.LutFusion) too
    last: FusionReport = field(default_factory=FusionReport)

    def bind(self, target: Any, options: Any) -> None:
        if self.choose_backend is None:
            raise RuntimeError("LutFusion.bind needs choose_backend (emlkit.passes.lut_backends.backend_for)")
        self.backend = self.choose_backend(target, options)

    def report(self) -> dict[str, Any]:
        return self.last.as_dict()

    def regions(self, gm: torch.fx.GraphModule, rep: FusionReport) -> list[Region]:
        """The regions to lower as tables: every maximal one."""
        return find_regions(gm, rep)

    def reset(self) -> None:
        self.last = FusionReport()

    def skip(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        self.last.ops_before = self.last.ops_after = _count_ops(gm)  # the report says nothing was fused
        return gm

    def work(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        from emlkit.verify import _source_line

        if self.backend is None:  # built without a backend (unbound): nothing to emit tables with
            return self.skip(gm)
        rep = self.last
        rep.ops_before = _count_ops(gm)
        moves_onto_codes(gm)
        replaced: dict[torch.fx.Node, torch.fx.Node] = {}
        for region in self.regions(gm, rep):
            # A region may read the output of one fused just before it.
            region.input_node = replaced.get(region.input_node, region.input_node)
            entry = {"chain": region.chain_names(), "source": _source_line(region.ops[0]),
                     "input": region.input_node.name, "output": region.output_q.name,
                     "in_qparams": list(region.in_qparams[:4]), "out_qparams": list(region.out_qparams[:4]),
                     "dtype": str(region.in_qparams[4]).replace("torch.", "")}
            why = self.backend.cannot_fuse(region)
            if why:
                rep.skipped.append({**entry, "reason": why})
                continue
            replaced[region.output_q] = self.backend.emit(gm, region, self.backend.table(region))
            entry["table_entries"] = self.backend.table_entries(region)
            entry["lowered_as"] = self.backend.op_name
            rep.regions.append(entry)
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()
        rep.ops_after = _count_ops(gm)
        if rep.regions:
            log.debug("LUT fusion: %d regions, %d -> %d graph ops", len(rep.regions), rep.ops_before, rep.ops_after)
        return gm


def _count_ops(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and n.target is not operator.getitem)


def remove_region(gm: torch.fx.GraphModule, region: Region, replacement: torch.fx.Node) -> None:
    """Point the region output's users at `replacement`, then delete the region's nodes."""
    region.output_q.replace_all_uses_with(replacement)
    for n in [region.output_q, *region.interior, region.input_dq]:
        if len(n.users) == 0:
            gm.graph.erase_node(n)


def emit_table_op(gm: torch.fx.GraphModule, region: Region, table: torch.Tensor, op: Any) -> torch.fx.Node:
    """Replace `region` by `op(region input, table)`, the table a new buffer; every backend's emit uses this."""
    name = unique_name(gm, "_aot_lut")
    gm.register_buffer(name, table)
    with gm.graph.inserting_before(region.output_q):
        lut = gm.graph.get_attr(name)
        node = gm.graph.call_function(op, (region.input_node, lut))
    copy_region_meta(region.output_q, node)
    node.meta["stack_trace"] = region.ops[0].meta.get("stack_trace", "")
    remove_region(gm, region, node)
    return node
