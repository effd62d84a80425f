"""What the passes share, in one module: graph helpers, the op sets several passes match, and the pass
skeletons (each a `Pass`, emlkit/passes/manager.py, whose `__call__` runs the skeleton's `work` only
where the manager's verdict says the pass applies).

The passes in this package rewrite torch.fx graphs at three stages (pre-quantization GraphModules,
pre-edge GraphModules, the final ExportedProgram), configure the quantizer (hooks) or act inside
ExecuTorch's Arm TOSA pipeline. Each used to carry its own copy of the same set-up: naming and
registering a new weight, copying provenance metadata onto new nodes, giving new get_attr nodes a fake
value, walking a node's users, the report of what the last run changed, the loop over matching calls,
the quantizer hooks' report and the Arm-pipeline hooks' switch. They live here once, with public
names: no pass imports another pass's helpers.

Skeletons: `Rewrite` (pre-quant / pre-edge graph rewrites: `run(gm)` -> changed names),
`DqOpQLowering` (dequantize -> op -> quantize replaced by one emlkit:: op, Cortex-M), `ProgramRewrite`
(cortex_m:: nodes of the final program, `rewrite(ep, node, op)`), `PostPass` (ExecuTorch PassBase
passes over the edge program, `call(gm)`), `QuantizerHook` (`configure(quantizer, target)`, or the
declarative `alone` / `after_annotation`) and `ArmPipelinePass` (a part run inside the Arm pipeline,
`arm_hook`).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Iterator

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

import emlkit.emlkit_ops  # noqa: F401  (registers emlkit_float::masked_softmax)
from emlkit.lower.quantizer_steps import WithSteps
from emlkit.passes.manager import Pass

log = logging.getLogger(__name__)

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

# Meta keys that tell later passes and error messages where an op came from.
KEEP_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "from_node", "seq_nr")

# ---------------------------------------------------------------- ops several passes match

Q_TARGETS = {qd.quantize_per_tensor.default}
DQ_TARGETS = {qd.dequantize_per_tensor.default}
SOFTMAX = {aten.softmax.int, aten._softmax.default}
# sdpa_as_matmuls.py's float stand-in for an attention softmax with a mask from the inputs (emlkit/emlkit_ops.py)
FLOAT_MASKED_SOFTMAX = torch.ops.emlkit_float.masked_softmax.default
LOG_SOFTMAX = {aten.log_softmax.int, aten._log_softmax.default}
AVG_POOLS = {aten.avg_pool2d.default, aten.adaptive_avg_pool2d.default, aten.mean.dim}
# Ops that move or reshape a tensor without computing on it (the quantizer's qparams pass through).
PASS_THROUGH = {
    aten.view.default, aten.reshape.default, aten.permute.default, aten.transpose.int,
    aten.flatten.using_ints, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.default,
    aten.contiguous.default, aten.clone.default, aten._unsafe_view.default, aten.slice.Tensor,
    aten.select.int, aten.unflatten.int, aten.dropout.default,
}
# Meta flag of the ops the quantizer hook OwnOutputQparams gave their own output qparams; the Cortex-M
# lowerings (EmlkitSoftmax, EmlkitLogSoftmax, EmlkitAvgPool) take only those.
OWN_QPARAMS_KEY = "emlkit_own_output_qparams"
# Set by mean_as_pool.py on the average pools it makes of means: they always get their own output qparams.
MEAN_POOL_KEY = "emlkit_mean_pool"


def const_tensor(gm: torch.fx.GraphModule, node: Any) -> torch.Tensor | None:
    """The constant tensor a get_attr node reads (None for anything else)."""
    if not isinstance(node, torch.fx.Node) or node.op != "get_attr":
        return None
    obj: Any = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, torch.Tensor) else None


def constant_values(gm: torch.fx.GraphModule, upto: torch.fx.Node | None = None) -> dict[torch.fx.Node, Any]:
    """The values of the nodes (before UPTO, if given) that depend on no placeholder, computed in graph
    order (so in-place fills of constant tensors are applied): what forward() computes from constants alone."""
    env: dict[torch.fx.Node, Any] = {}
    for n in gm.graph.nodes:
        if n is upto:
            break
        if n.op == "get_attr":
            obj: Any = gm
            for part in str(n.target).split("."):
                obj = getattr(obj, part)
            env[n] = obj.detach().clone() if isinstance(obj, torch.Tensor) else obj
        elif n.op == "call_function" and all(a in env for a in n.all_input_nodes):
            args = torch.fx.node.map_arg(n.args, lambda a: env[a])
            kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: env[a])
            try:
                with torch.no_grad():
                    env[n] = n.target(*args, **kwargs)
            except Exception:  # noqa: BLE001 - an op we cannot run here only makes its users non-constant
                continue
    return env


def drop_constant_remains(gm: torch.fx.GraphModule, env: dict[torch.fx.Node, Any]) -> None:
    """Erase the constant-only nodes no longer read by the graph: a group of them linked through their arguments
    is erased whole when no node outside it reads any of them (in-place fills of the group go with it)."""
    consts = {n for n in env if n.op == "call_function" and n.graph is gm.graph}
    parent = {n: n for n in consts}

    def root(n: torch.fx.Node) -> torch.fx.Node:
        while parent[n] is not n:
            n = parent[n]
        return n

    for n in consts:
        for a in n.all_input_nodes:
            if a in consts:
                parent[root(a)] = root(n)
    groups: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for n in consts:
        groups.setdefault(root(n), []).append(n)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for members in groups.values():
        inside = set(members)
        if any(u not in inside for n in members for u in n.users):
            continue
        mutable = [n for n in members if getattr(getattr(n.target, "_schema", None), "is_mutable", False)]
        if any(n.args and n.args[0] not in inside for n in mutable):
            continue  # it writes into a buffer others may read
        for n in sorted(members, key=order.__getitem__, reverse=True):
            gm.graph.erase_node(n)


def unique_name(gm: torch.fx.GraphModule, stem: str) -> str:
    i = 0
    while hasattr(gm, f"{stem}_{i}"):
        i += 1
    return f"{stem}_{i}"


def add_parameter(gm: torch.fx.GraphModule, stem: str, value: torch.Tensor) -> str:
    """Register `value` under a fresh name; the name.

    A parameter (not a buffer) so the quantizer treats it as a weight like the one it replaces.
    """
    name = unique_name(gm, stem)
    gm.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))
    return name


def get_attrs(gm: torch.fx.GraphModule, before: torch.fx.Node, names: Iterable[str],
              fake_mode: Any) -> list[torch.fx.Node]:
    """get_attr nodes for `names`, inserted before `before`, with fake values when the graph has them."""
    g = gm.graph
    with g.inserting_before(before):
        nodes = [g.get_attr(name) for name in names]
    if fake_mode is not None:
        with fake_mode:
            for node in nodes:
                node.meta["val"] = fake_mode.from_tensor(getattr(gm, str(node.target)))
    return nodes


def copy_meta(src: torch.fx.Node, nodes: Iterable[torch.fx.Node]) -> None:
    """Give new nodes the provenance of the node they replace (KEEP_META)."""
    for new in nodes:
        for k in KEEP_META:
            if k in src.meta:
                new.meta[k] = src.meta[k]


def qparams(node: torch.fx.Node) -> tuple[float, int, int, int, torch.dtype]:
    """(scale, zero point, qmin, qmax, dtype) of a per-tensor quantize/dequantize node."""
    _, scale, zp, qmin, qmax, dtype = node.args[:6]
    return float(scale), int(zp), int(qmin), int(qmax), dtype  # type: ignore[arg-type]


def per_tensor_qparams(node: torch.fx.Node) -> bool:
    """Q/DQ with plain scalar scale/zero point (not tensors, not per channel)."""
    if len(node.args) < 6:
        return False
    _, scale, zp, _, _, dtype = node.args[:6]
    return isinstance(scale, float) and isinstance(zp, int) and dtype in (torch.int8, torch.int16)


def increasing_dequantize(arg: object) -> torch.fx.Node | None:
    """ARG when it is a per-tensor dequantize with a positive scale (dequantization keeps the order of codes, so
    order statistics of the values are those of the codes), else None."""
    if not isinstance(arg, torch.fx.Node) or arg.target not in DQ_TARGETS or not per_tensor_qparams(arg):
        return None
    scale = arg.args[1]
    return arg if isinstance(scale, (int, float)) and scale > 0 else None


def copy_region_meta(src: torch.fx.Node, dst: torch.fx.Node) -> None:
    """Give a node that replaces a q/dq region the region's provenance and value meta (val included)."""
    for k in ("stack_trace", "nn_module_stack", "source_fn_stack", "val", "tensor_meta"):
        if k in src.meta:
            dst.meta[k] = src.meta[k]


def reaches(start: torch.fx.Node, verdict: Callable[[torch.fx.Node], bool | None]) -> bool:
    """Walk the call_function users of `start` and theirs; True as soon as `verdict` says True.

    `verdict(u)`: True - found; None - keep walking through u's users; False - stop at u.
    """
    todo, seen = list(start.users), set()
    while todo:
        u = todo.pop()
        if u in seen or u.op != "call_function":
            continue
        seen.add(u)
        v = verdict(u)
        if v:
            return True
        if v is None:
            todo.extend(u.users)
    return False


def finish(gm: torch.fx.GraphModule, what: str, names: list[Any]) -> None:
    """After a rewrite pass changed NAMES: drop dead nodes, check and recompile the graph, log."""
    if not names:
        return
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    log.debug("%s: %s", what, ", ".join(str(n) for n in names))


def rewrite_calls(gm: torch.fx.GraphModule, target: Any, rewrite: Callable[[torch.fx.GraphModule, torch.fx.Node], bool],
                  what: str) -> list[str]:
    """Apply `rewrite` to every call of `target`; the names of the nodes it changed (then `finish`ed)."""
    done = [n.name for n in list(gm.graph.nodes)
            if n.op == "call_function" and n.target is target and rewrite(gm, n)]
    finish(gm, what, done)
    return done


def calls(gm: torch.fx.GraphModule, ops: Any) -> list[torch.fx.Node]:
    """The graph's calls of any of `ops` (a snapshot: the caller may rewrite them)."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target in ops]


def wrap_int32(v: torch.Tensor) -> torch.Tensor:
    """int64 values wrapped to int32, like the kernels' accumulator arithmetic."""
    return ((v + (1 << 31)) % (1 << 32) - (1 << 31)).to(torch.int32)


# Pointwise ops (LUT fusion's chains; what a linear's int8 output may feed).
# Unary pointwise ops: every argument but the first is a compile-time constant.
UNARY_OPS: set[Any] = {
    aten.sigmoid.default, aten.tanh.default, aten.exp.default, aten.expm1.default,
    aten.log.default, aten.log2.default, aten.log10.default, aten.log1p.default,
    aten.sqrt.default, aten.rsqrt.default, aten.reciprocal.default, aten.neg.default,
    aten.abs.default, aten.relu.default, aten.relu6.default, aten.hardtanh.default,
    aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default,
    aten.hardsigmoid.default, aten.hardswish.default, aten.silu.default, aten.gelu.default,
    aten.elu.default, aten.leaky_relu.default, aten.softplus.default, aten.erf.default,
    aten.square.default, aten.sin.default, aten.cos.default, aten.atan.default,
    aten.pow.Tensor_Scalar, aten.mish.default, aten.selu.default, aten.celu.default,
    aten.logit.default, aten.sign.default,
    aten.ceil.default, aten.floor.default, aten.round.default, aten.trunc.default,
    aten.threshold.default, aten.log_sigmoid.default, aten.hardshrink.default, aten.softshrink.default,
}
# Binary ops that are pointwise in the chain value when the other operand is constant.
BINARY_OPS: set[Any] = {
    aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar, aten.rsub.Scalar,
    aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar, aten.prelu.default,
}

SPLITS = {aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default}


def split_pieces(u: torch.fx.Node, axis: int) -> list[tuple[torch.fx.Node, int, int]] | None:
    """(getitem, offset, size) for every read piece of a split/chunk along `axis`; None if not one."""
    vals = u.meta.get("val")
    if not isinstance(vals, (list, tuple)) or not all(isinstance(v, torch.Tensor) for v in vals):
        return None
    sizes = [int(v.shape[axis]) for v in vals]
    offsets = [sum(sizes[:i]) for i in range(len(sizes))]
    out = []
    for g in u.users:
        if g.target is not operator.getitem or not isinstance(g.args[1], int):
            return None
        if g.users:  # export keeps a getitem per piece, read or not
            i = g.args[1] % len(sizes)
            out.append((g, offsets[i], sizes[i]))
    return out


def fold_into(gm: torch.fx.GraphModule, bn: torch.fx.Node, w: torch.Tensor,
              b: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(W', b') of a layer with weight W [N, ...] and bias b followed by the eval BatchNorm `bn`."""
    training = bn.args[5] if len(bn.args) > 5 else bn.kwargs.get("training", False)
    eps = bn.args[7] if len(bn.args) > 7 else bn.kwargs.get("eps", 1e-5)
    mean, var = const_tensor(gm, bn.args[3]), const_tensor(gm, bn.args[4])
    cout = w.shape[0]
    gamma = const_tensor(gm, bn.args[1]) if bn.args[1] is not None else torch.ones(cout)
    beta = const_tensor(gm, bn.args[2]) if bn.args[2] is not None else torch.zeros(cout)
    if training or mean is None or var is None or gamma is None or beta is None:
        return None
    with torch.no_grad():
        k = gamma.double() / torch.sqrt(var.double() + float(eps))
        w2 = (w.double() * k.view(-1, *([1] * (w.dim() - 1)))).to(w.dtype)
        b0 = b.double() if b is not None else torch.zeros(cout, dtype=torch.float64)
        b2 = ((b0 - mean.double()) * k + beta.double()).to(w.dtype)
    return w2, b2


def folded_params(gm: torch.fx.GraphModule, bn: torch.fx.Node, w: torch.Tensor, b: torch.Tensor | None, stem: str,
                  before: torch.fx.Node, fake_mode: Any) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """fold_into's (W', b') as new parameters STEM_weight, STEM_bias, read by get_attr nodes before BEFORE; None when
    the BatchNorm does not fold (training, or statistics that are not constants)."""
    folded = fold_into(gm, bn, w, b)
    if folded is None:
        return None
    names = [add_parameter(gm, f"{stem}_weight", folded[0].contiguous()),
             add_parameter(gm, f"{stem}_bias", folded[1].contiguous())]
    w_get, b_get = get_attrs(gm, before, names, fake_mode)
    return w_get, b_get


def node_arg(n: torch.fx.Node, i: int, name: str, default: Any = None) -> Any:
    """Argument `name` of call `n`: positional i if given there, else the keyword, else `default`."""
    return n.args[i] if len(n.args) > i else n.kwargs.get(name, default)


def dim_order_of(x: Any) -> list[int] | None:
    """The dim order of a node argument's example tensor; None without one."""
    v = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    return list(v.dim_order()) if isinstance(v, torch.Tensor) else None


def node_val(x: Any) -> torch.Tensor | None:
    """The example tensor (meta "val") of a node argument; None for a constant or a node without one."""
    v = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def shape_of(n: Any) -> tuple[int, ...] | None:
    """Shape of a node's tensor. Q/DQ nodes that convert_pt2e made and the table lookups LUT fusion made
    have no shape meta; all are elementwise: their input's shape. A get_attr's is its constant's."""
    if not isinstance(n, torch.fx.Node):
        return None
    val = n.meta.get("val")
    if (val is None and n.op == "call_function" and n.args
            and ("quantize_per_tensor" in str(n.target) or "quantized_activation" in str(n.target))):
        return shape_of(n.args[0])
    if val is None and n.op == "get_attr":  # a constant convert_pt2e folded a quantize into has no value meta
        val = const_tensor(n.graph.owning_module, n) if n.graph.owning_module is not None else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def pool_geometry(n: torch.fx.Node) -> tuple[list[int], list[int]] | None:
    """(kernel, stride) of an average pool whose windows all have k_h * k_w taps, else None."""
    shape = shape_of(n.args[0])
    if shape is None or len(shape) != 4:
        return None
    h, w = shape[2], shape[3]
    if n.target == aten.avg_pool2d.default:
        args = list(n.args) + [None] * 7
        k = args[1]
        k = [k, k] if isinstance(k, int) else list(k)
        k = k * 2 if len(k) == 1 else k
        s = args[2] if args[2] is not None else []
        s = [s, s] if isinstance(s, int) else list(s)
        s = k if not s else (s * 2 if len(s) == 1 else s)
        pad = args[3] if args[3] is not None else [0, 0]
        pad = [pad, pad] if isinstance(pad, int) else list(pad)
        ceil = bool(n.kwargs.get("ceil_mode", args[4] or False))
        divisor = n.kwargs.get("divisor_override", args[6])
        if any(pad) or divisor is not None or k[0] > h or k[1] > w:
            return None
        if ceil and ((h - k[0]) % s[0] or (w - k[1]) % s[1]):
            return None                          # a partial last window has fewer taps
        return k, s
    if n.target == aten.adaptive_avg_pool2d.default:
        out = list(n.args[1])
        out = out * 2 if len(out) == 1 else out
        if any(o is None or o <= 0 for o in out) or h % out[0] or w % out[1]:
            return None
        k = [h // out[0], w // out[1]]
        return k, k
    if n.target == aten.mean.dim:
        dims = n.args[1] if len(n.args) > 1 else None
        keep = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
        if not keep or n.kwargs.get("dtype") is not None or not isinstance(dims, (list, tuple)):
            return None
        if sorted(d % 4 for d in dims) != [2, 3]:
            return None
        return [h, w], [h, w]
    return None


EMBEDDING_BAGS = (aten.embedding_bag.default, aten.embedding_bag.padding_idx, aten._embedding_bag.default)
BAG_WEIGHTS_ARG = 6  # per_sample_weights in every bag overload


def values_output(n: torch.fx.Node) -> torch.fx.Node | None:
    """The getitem of output 0 of multi-output N (an adaptive max pool's values, a bag's sums), or None when N's
    other outputs are read or output 0 is not read once."""
    users = list(n.users)
    if any(u.target is not operator.getitem or (u.args[1] != 0 and u.users) for u in users):
        return None
    values = [u for u in users if u.args[1] == 0]
    return values[0] if len(values) == 1 else None


def annotate_bags(model: torch.fx.GraphModule, record: list[str]) -> None:
    """Quantizer annotation: each embedding bag whose other outputs are unused gets the int8 per-tensor activation
    spec on its values and on its float per-sample weights' edge (no quantizer annotates bags)."""
    from executorch.backends.cortex_m.quantizer.quantization_configs import INT8_ACTIVATION_PER_TENSOR_QSPEC

    qspec, key = INT8_ACTIVATION_PER_TENSOR_QSPEC, matched_key()
    for n in list(model.graph.nodes):
        out = values_output(n) if n.op == "call_function" and n.target in EMBEDDING_BAGS else None
        if out is None or n.meta.get(Q_ANNOTATION_KEY) is not None:
            continue
        psw = n.args[BAG_WEIGHTS_ARG] if len(n.args) > BAG_WEIGHTS_ARG else None
        val = psw.meta.get("val") if isinstance(psw, torch.fx.Node) else None
        edges = {psw: qspec} if isinstance(val, torch.Tensor) and val.dtype.is_floating_point else {}
        n.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(edges, None, _annotated=True)
        out.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation({}, qspec, _annotated=True)
        n.meta[key] = out.meta[key] = True
        record.append(n.name)


def match_dq_op_q(n: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """(dequantize, quantize) around `n` when it reads one int8 dequantize and only feeds one int8 quantize."""
    dq = n.args[0] if n.args else None
    if not (isinstance(dq, torch.fx.Node) and dq.op == "call_function" and dq.target in DQ_TARGETS
            and per_tensor_qparams(dq) and isinstance(dq.args[0], torch.fx.Node)):
        return None
    if len(n.users) != 1:
        return None
    q = next(iter(n.users))
    if q.op != "call_function" or q.target not in Q_TARGETS or not per_tensor_qparams(q):
        return None
    if qparams(dq)[4] != torch.int8 or qparams(q)[4] != torch.int8 or qparams(q)[2:4] != (-128, 127):
        return None
    return dq, q


def replace_dq_op_q(gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node, q: torch.fx.Node,
                    new: torch.fx.Node) -> None:
    """`new` in place of the region dq -> n -> q (whose dead nodes go)."""
    copy_region_meta(q, new)
    val = n.meta.get("val")
    if not isinstance(new.meta.get("val"), torch.Tensor) and isinstance(val, torch.Tensor):
        # convert_pt2e's quantize has no value meta: a lowering of the next op reads this one's shape through
        # its dequantize (shape_of), and found none (PReLU -> adaptive average pool stayed float)
        new.meta["val"] = torch.empty_like(val, dtype=qparams(q)[4])
    new.meta["stack_trace"] = n.meta.get("stack_trace", "")
    q.replace_all_uses_with(new)
    for dead in (q, n, dq):
        if not dead.users:
            gm.graph.erase_node(dead)


# ---------------------------------------------------------------- quantizer annotation helpers

def matched_key() -> str:
    """The pattern matcher's key for "already annotated"; a public class attribute of ExecuTorch's
    PatternMatcher, read from it so a rename there fails loudly here."""
    from executorch.backends.cortex_m.quantizer.pattern_matcher import PatternMatcher

    return PatternMatcher.Q_PATTERN_MATCHED_KEY


def retype_edge(src: torch.fx.Node, user: torch.fx.Node, new: Callable[[Any, Any], Any]) -> bool:
    """Give the edge SRC -> USER the qspec `new(SRC's output qspec, USER's input qspec for SRC)` on both of
    its ends (one observer); False, and nothing changed, if either end is not annotated or `new` gives None."""
    out_ann, in_ann = src.meta.get(Q_ANNOTATION_KEY), user.meta.get(Q_ANNOTATION_KEY)
    if out_ann is None or out_ann.output_qspec is None or in_ann is None or src not in in_ann.input_qspec_map:
        return False
    spec = new(out_ann.output_qspec, in_ann.input_qspec_map[src])
    if spec is None:
        return False
    out_ann.output_qspec = spec
    in_ann.input_qspec_map[src] = spec
    return True


Candidates = Callable[[torch.fx.GraphModule], list[torch.fx.Node]]


def annotate_alone(model: torch.fx.GraphModule, candidates: Candidates, record: list[str], what: str,
                   mark: tuple[str, ...] = ()) -> None:
    """Annotate each candidate op on its own before the Cortex-M pattern quantizers run.

    Its first input and its output get the quantizer's int8 per-tensor activation spec (an observer
    of its own) and it is marked as matched, so no pattern fuses it with its producer; `mark` names
    extra meta flags set on it for later passes.
    """
    from executorch.backends.cortex_m.quantizer.quantization_configs import INT8_ACTIVATION_PER_TENSOR_QSPEC

    qspec, key = INT8_ACTIVATION_PER_TENSOR_QSPEC, matched_key()
    for n in candidates(model):
        n.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation({n.args[0]: qspec}, qspec, _annotated=True)
        n.meta[key] = True
        for flag in mark:
            n.meta[flag] = True
        record.append(n.name)
    if record:
        log.debug("%s: %s", what, ", ".join(record))


def annotating_alone(quantizer: Any, candidates: Candidates, record: list[str], what: str,
                     mark: tuple[str, ...] = ()) -> Any:
    """`quantizer` with `annotate_alone` run before its own steps."""
    return WithSteps(quantizer, before=lambda m: annotate_alone(m, candidates, record, what, mark))


# ---------------------------------------------------------------- ExecuTorch's Arm pipeline

class ArmPipelineHook:
    """A part of one of our passes that runs inside ExecuTorch's Arm TOSA pipeline, after a named Arm pass:
    `rewrite(graph_module) -> changed node names`, run after the Arm pass `after()` returns, while active.

    ExecuTorch 1.5.1's `register_pass_insertions_after(ArmPassClass, [pass])` adds a pass to every Arm
    pipeline the process builds from then on, and cannot take it back. So a hook is registered once per
    process (`install()`) and acts only inside `active(record)`, which the Ethos-U flow enters around the
    lowering of a compile that configured the owning pass (`arm_pipeline()` on the pass); a compile
    without the pass, or for another target, does not see it. The names the rewrite returns are appended
    to `record` for the pass's report.
    """

    def __init__(self, name: str, after: Callable[[], type], rewrite: Callable[[torch.fx.GraphModule], list[str]]):
        self.name = name
        self._after = after  # a function so ExecuTorch's Arm backend is imported only when a hook is installed
        self._rewrite = rewrite
        self._record: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(name, default=None)
        self._installed = False

    def install(self) -> None:
        """Register the hook in ExecuTorch's Arm pass manager, once per process."""
        if self._installed:
            return
        from executorch.backends.arm._passes.arm_pass import ArmPass
        from executorch.backends.arm._passes.arm_pass_manager import register_pass_insertions_after
        from executorch.exir.pass_base import PassResult as ExirPassResult

        hook = self

        class _HookPass(ArmPass):
            _passes_required_after: set[Any] = set()

            def call(self, graph_module: torch.fx.GraphModule) -> ExirPassResult:
                record = hook._record.get()
                if record is None:
                    return ExirPassResult(graph_module, False)
                done = hook._rewrite(graph_module)
                record.extend(done)
                if done:
                    log.debug("%s: %s", hook.name, ", ".join(done))
                return ExirPassResult(graph_module, bool(done))

        _HookPass.__name__ = _HookPass.__qualname__ = f"{type(self).__name__}_{self.name}"
        register_pass_insertions_after(self._after(), [_HookPass()])
        self._installed = True

    @contextlib.contextmanager
    def active(self, record: list[str] | None) -> Iterator[None]:
        """The hook acts (appending to RECORD) inside this block; with None it stays off."""
        token = self._record.set(record)
        try:
            yield
        finally:
            self._record.reset(token)


# ---------------------------------------------------------------- pass skeletons

@dataclass
class Rewrite(Pass):
    """Base of the graph rewrites (pre-quant, pre-edge): `run(gm)` rewrites and returns what it changed,
    which the report lists under `report_name`."""

    done: list[Any] = field(default_factory=list)
    report_name: ClassVar[str] = "rewritten"

    def report(self) -> dict[str, Any]:
        return {self.report_name: list(self.done)}

    def reset(self) -> None:
        self.done = []

    def work(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        self.done = self.run(gm)
        return gm

    def run(self, gm: torch.fx.GraphModule) -> list[Any]:
        raise NotImplementedError


@dataclass
class NodeRewrite(Rewrite):
    """A Rewrite that takes each call of `matches` on its own: `rewrite_node(gm, n)` replaces n or leaves it
    and says which; `run` lists the rewritten nodes and tidies the graph (`what` names them in the log)."""

    matches: ClassVar[tuple[Any, ...]] = ()
    what: ClassVar[str] = "rewritten"
    honours_cpu_nodes: ClassVar[bool] = True

    def run(self, gm: torch.fx.GraphModule) -> list[Any]:
        done = []
        for n in [n for n in gm.graph.nodes
                  if n.op == "call_function" and n.target in self.matches and self.may_rewrite(n)]:
            name = n.name
            if self.rewrite_node(gm, n):
                done.append(name)
        finish(gm, self.what, done)
        return done

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        raise NotImplementedError


class FloatRewrite(NodeRewrite):
    """A NodeRewrite of float ops before quantization: `rewrite_float(gm, n, xv, yv)` sees only the calls whose
    first input and output carry example tensors (xv, yv; node_val), the input a float one."""

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        xv, yv = node_val(n.args[0]), node_val(n)
        return xv is not None and yv is not None and xv.is_floating_point() and self.rewrite_float(gm, n, xv, yv)

    def rewrite_float(self, gm: torch.fx.GraphModule, n: torch.fx.Node, xv: torch.Tensor, yv: torch.Tensor) -> bool:
        raise NotImplementedError


class CodesRewrite(NodeRewrite):
    """A NodeRewrite of ops whose first input is an increasing per-tensor dequantize (increasing_dequantize):
    order statistics and selections of the values are those of the codes, so `on_codes(gm, n, dq)` can run the
    op on dq's int8 input instead (by default: values_on_codes)."""

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        dq = increasing_dequantize(n.args[0])
        return dq is not None and self.on_codes(gm, n, dq)

    def on_codes(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node) -> bool:
        return values_on_codes(gm, n, dq)


def values_on_codes(gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node) -> bool:
    """N (an order statistic: median, a max pool) run on DQ's codes, followed by the same dequantize: for a
    positive per-tensor scale `op(dequantize(x)) == dequantize(op(x))` exactly. An op returning (values, indices)
    is rewritten only when just its values are used: which of tied elements an index names is not specified."""
    import operator

    g = gm.graph
    args, kwargs = (dq.args[0], *n.args[1:]), dict(n.kwargs)
    if isinstance(n.meta.get("val"), torch.Tensor):
        with g.inserting_after(n):
            op = g.call_function(n.target, args, kwargs)
        with g.inserting_after(op):
            back = g.call_function(dq.target, (op, *dq.args[1:]), dict(dq.kwargs))
        made, values, first = [op, back], n, op
    else:
        items = list(n.users)
        if not items or any(u.target is not operator.getitem or u.args[1] != 0 for u in items):
            return False  # the indices are used (or the tuple escapes)
        with g.inserting_after(n):
            op = g.call_function(n.target, args, kwargs)
        with g.inserting_after(op):
            first = g.call_function(operator.getitem, (op, 0))
        with g.inserting_after(first):
            back = g.call_function(dq.target, (first, *dq.args[1:]), dict(dq.kwargs))
        made, values = [op, first, back], items[0]
        for extra in items[1:]:  # several getitem 0: one value
            extra.replace_all_uses_with(items[0])
            g.erase_node(extra)
    v = dq.args[0].meta.get("val") if isinstance(dq.args[0], torch.fx.Node) else None
    if isinstance(v, torch.Tensor):
        op.meta["val"] = n.target(v, *n.args[1:], **kwargs)
        if first is not op and isinstance(op.meta["val"], tuple):
            first.meta["val"] = op.meta["val"][0]
    if isinstance(values.meta.get("val"), torch.Tensor):
        back.meta["val"] = values.meta["val"]
    copy_meta(n, made)
    values.replace_all_uses_with(back)
    g.erase_node(values)
    if values is not n:
        g.erase_node(n)
    return True


def move_onto_codes(g: torch.fx.Graph, run: list[torch.fx.Node], dq: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    """RUN (ops that move or copy values unchanged, each the only reader of the next: run[0] nearest its readers,
    run[-1] reading the dequantize DQ) made again on DQ's codes of DTYPE, with DQ after them; run[0]'s readers read
    that new dequantize, and RUN and DQ are erased. The values are the same: the moves copy codes, not floats."""
    codes = dq.args[0]
    with g.inserting_before(run[0]):
        for m in reversed(run):   # from the dequantize towards the readers
            made = g.call_function(m.target, (codes, *m.args[1:]), dict(m.kwargs))
            made.meta.update(m.meta)
            made.meta["val"] = m.meta["val"].to(dtype)
            codes = made
        back = g.call_function(dq.target, (codes, *dq.args[1:]), dict(dq.kwargs))
    back.meta.update(dq.meta)
    back.meta["val"] = run[0].meta["val"]
    run[0].replace_all_uses_with(back)
    for dead in run + [dq]:
        g.erase_node(dead)
    return back


def replace_node(old: torch.fx.Node, made: list[torch.fx.Node], result: torch.fx.Node) -> None:
    """`old` replaced by the nodes `made`, whose last value `result` takes its uses; `old` is erased."""
    copy_meta(old, made)
    old.replace_all_uses_with(result)
    old.graph.erase_node(old)


@dataclass
class DqOpQLowering(Pass):
    """Base of the pre-edge passes that lower `dequantize -> op -> quantize` to one emlkit:: op (Cortex-M):
    the walk over the matches and a report of the nodes they lowered.

    Subclasses say which ops they take (`takes`; by default the calls of `op_targets` whose input has a rank in
    `ranks`) and build the replacement (`lower`, called with the graph inserting before the quantize): the new
    node and its report entry, or None to leave the op.
    """

    op_targets: ClassVar[tuple[Any, ...]] = ()
    ranks: ClassVar[range] = range(0)
    honours_cpu_nodes: ClassVar[bool] = True
    lowered: list[dict[str, Any]] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        return {"lowered": list(self.lowered)}

    def takes(self, n: torch.fx.Node) -> bool:
        shape = shape_of(n.args[0]) if n.target in self.op_targets else None
        return shape is not None and len(shape) in self.ranks

    def lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node, dq: torch.fx.Node,
              q: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, Any]] | None:
        raise NotImplementedError

    def reset(self) -> None:
        self.lowered = []

    def work(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        for n in list(gm.graph.nodes):
            m = match_dq_op_q(n) if n.op == "call_function" and self.takes(n) and self.may_rewrite(n) else None
            if m is None:
                continue
            dq, q = m
            with gm.graph.inserting_before(q):
                got = self.lower(gm, n, dq, q)
            if got is None:
                continue
            new, entry = got
            replace_dq_op_q(gm, n, dq, q, new)
            self.lowered.append({"node": n.name, **entry})
        if self.lowered:
            gm.graph.eliminate_dead_code()
            gm.graph.lint()
            gm.recompile()
        return gm


class Recorder(Pass):
    """Base of the post-edge and program passes: the names of the nodes the last run changed."""

    report_name: ClassVar[str] = "rewritten"

    def __init__(self) -> None:
        super().__init__()
        self.done: list[str] = []

    def report(self) -> dict[str, Any]:
        return {self.report_name: list(self.done)}

    def reset(self) -> None:
        self.done = []


class PostPass(Recorder, PassBase):
    """Base of the post passes, ExecuTorch PassBase passes over the final edge program (`call(gm)` ->
    PassResult), which ExecuTorch's pass manager calls through `Pass.__call__`."""


class ProgramRewrite(Recorder):
    """Base of the passes that edit cortex_m:: nodes of the final ExportedProgram in place.

    `cm_ops` are cortex_m:: op names (those this ExecuTorch lacks are skipped); `rewrite` changes one
    node and says whether it did. The report gives the count (`report_name`).
    """

    cm_ops: ClassVar[tuple[str, ...]] = ()  # not `ops`: that is the declaration's (emlkit/passes/manager.py)

    def report(self) -> dict[str, Any]:
        return {self.report_name: len(self.done)}

    def work(self, ep: Any) -> Any:
        from executorch.exir.dialects._ops import ops as exir_ops

        cm = exir_ops.edge.cortex_m
        names = {getattr(cm, n).default: n for n in self.cm_ops if hasattr(cm, n)}
        self.done = [n.name for n in calls(ep.graph_module, names) if self.rewrite(ep, n, names[n.target])]
        if self.done:
            ep.graph_module.recompile()
        return ep

    def rewrite(self, ep: Any, n: torch.fx.Node, op: str) -> bool:
        raise NotImplementedError


@dataclass
class QuantizerHook(Pass):
    """Base of the quantizer hooks (LowerOptions.quantizer_hooks; an adapter: ExecuTorch's quantizer is
    wrapped, not a graph rewritten). Called with (quantizer, target, options), it returns the quantizer
    to use; the manager's verdict is taken for the target it is called with. What the last call changed
    is in `done`, which the report lists under `report_name`.

    A hook either overrides `configure`, or declares what it does: `alone` (candidates annotated on
    their own before the quantizer's patterns, `alone_what` for the log, `alone_mark` meta flags set on
    them) or `after_annotation(model, record)` (run after the quantizer annotated the model).
    """

    done: list[str] = field(default_factory=list)
    report_name: ClassVar[str] = "done"
    flows: ClassVar[tuple[str, ...]] = ("cortex_m",)  # an undeclared hook: the Cortex-M flow's quantizer
    alone: ClassVar[Candidates | None] = None
    alone_what: ClassVar[str] = ""
    alone_mark: ClassVar[tuple[str, ...]] = ()
    after_annotation: ClassVar[Callable[[torch.fx.GraphModule, list[str]], None] | None] = None

    def report(self) -> dict[str, Any]:
        return {self.report_name: list(self.done)}

    def applies(self, target: Any, options: Any = None) -> bool:
        from emlkit.passes.manager import applies_to

        return applies_to(type(self), target, options)

    def reset(self) -> None:
        self.done = []

    def __call__(self, quantizer: Any, target: Any, options: Any) -> Any:
        self.applicable = self.applies(target, options)
        return super().__call__(quantizer, target, options)

    def work(self, quantizer: Any, target: Any, options: Any) -> Any:
        return self.configure(quantizer, target)

    def configure(self, quantizer: Any, target: Any) -> Any:
        cls = type(self)
        if cls.alone is not None:
            return annotating_alone(quantizer, cls.alone, self.done, cls.alone_what, cls.alone_mark)
        if cls.after_annotation is not None:
            step = cls.after_annotation
            return WithSteps(quantizer, after=lambda m: step(m, self.done))
        raise NotImplementedError


@dataclass
class ArmPipelinePass(Rewrite):
    """Base of the pre-edge passes whose work runs inside ExecuTorch's Arm TOSA pipeline (`arm_hook`):
    the hook is installed when the pass is bound to a target it applies to, and acts during the lowering
    of that compile only (`arm_pipeline`, entered by the Ethos-U flow). `arm_record()` is the list the
    hook appends the names it changed to."""

    arm_hook: ClassVar[ArmPipelineHook]

    def bind(self, target: Any, options: Any) -> None:
        type(self).arm_hook.install()

    def arm_pipeline(self) -> contextlib.AbstractContextManager[None]:
        """Entered by the Ethos-U flow around ExecuTorch's lowering: the Arm-pipeline part acts inside."""
        return type(self).arm_hook.active(self.arm_record() if self.applicable else None)

    def arm_record(self) -> list[str]:
        return []


# ---------------------------------------------------------------- Linear layers with constant weights

# Activations the Cortex-M quantizer folds into a conv's output range (ActivationFusionPass).
FUSABLE_ACTIVATIONS = {aten.relu.default, aten.relu_.default, aten.hardtanh.default, aten.hardtanh_.default,
                       aten.clamp.default, aten.relu6.default}

@dataclass
class LinearOperands:
    """A linear node's input, constant weight [N, C], bias node (constant or None) and leading dims."""

    x: torch.fx.Node
    w: torch.Tensor
    b_node: torch.fx.Node | None
    xval: torch.Tensor
    lead: list[int]


def linear_operands(gm: torch.fx.GraphModule, n: torch.fx.Node) -> LinearOperands | None:
    """The operands of `aten.linear` when a 1x1 conv can replace it (constant weights, static shape)."""
    x, w_node = n.args[0], n.args[1]
    b_node = n.args[2] if len(n.args) > 2 else n.kwargs.get("bias")
    w = const_tensor(gm, w_node)
    xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    if w is None or w.dim() != 2 or not isinstance(xval, torch.Tensor) or xval.dim() < 1:
        return None
    if b_node is not None and const_tensor(gm, b_node) is None:
        return None          # a computed bias is not a conv bias
    lead = list(xval.shape[:-1])
    if not all(isinstance(d, int) for d in lead):
        return None          # dynamic shapes: leave it to the linear lowering
    return LinearOperands(x, w, b_node, xval, lead)


def conv_weight(gm: torch.fx.GraphModule, n: torch.fx.Node, ops: LinearOperands, stem: str) -> torch.fx.Node:
    """The linear's weight [N, C] as a new constant conv weight [N, C, 1, 1], read before `n`."""
    cout, cin = ops.w.shape
    name = add_parameter(gm, stem, ops.w.detach().reshape(cout, cin, 1, 1).clone())
    return get_attrs(gm, n, [name], getattr(ops.xval, "fake_mode", None))[0]


def conv_val(x4: torch.fx.Node, w4: torch.fx.Node, b_node: torch.fx.Node | None) -> torch.Tensor:
    """The fake value of conv2d(x4, w4, b_node) (call under the graph's fake mode)."""
    bval = b_node.meta.get("val") if isinstance(b_node, torch.fx.Node) else None
    return torch.nn.functional.conv2d(x4.meta["val"], w4.meta["val"], bval)


def replace_linear(n: torch.fx.Node, new: tuple[torch.fx.Node, ...]) -> None:
    """The new nodes (the last one the result) take the linear's provenance and its place."""
    copy_meta(n, new)
    n.replace_all_uses_with(new[-1])
    n.graph.erase_node(n)


@dataclass
class LinearRewrite(Rewrite):
    """Base of the rewrites of `aten.linear` layers with constant weights (see linear_operands)."""

    what: ClassVar[str] = "linear rewritten"      # the debug log's label

    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        return rewrite_calls(gm, aten.linear.default, self._rewrite, self.what)

    def _rewrite(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        ops = linear_operands(gm, n)
        return ops is not None and self.rewrite_linear(gm, n, ops)

    def rewrite_linear(self, gm: torch.fx.GraphModule, n: torch.fx.Node, ops: LinearOperands) -> bool:
        raise NotImplementedError


# ---------------------------------------------------------------- LSTM layers (lstm_output_qparams.py, emlkit_lstm.py)

LSTM_OPS = {aten.lstm.input}
GRU_OPS = {aten.gru.input}
_ZERO_FILLS = {aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default}


def lstm_zero_state(gm: torch.fx.GraphModule, node: Any) -> bool:
    """Whether an LSTM's initial-state argument is all zeros (a zero fill or an all-zero constant)."""
    if not isinstance(node, torch.fx.Node):
        return False
    if node.op == "call_function" and node.target in _ZERO_FILLS:
        return True
    if node.op == "call_function" and node.target == aten.full.default and len(node.args) > 1:
        return node.args[1] == 0
    t = const_tensor(gm, node)
    return t is not None and not bool(t.any())


@dataclass
class LstmLayer:
    """One `aten.lstm.input` (`aten.gru.input`) call the int8 kernel takes: a single unidirectional layer with zero
    initial state or a given one (the model's inputs, constants or computed tensors, or slices of them: an LSTM's
    (h0, c0), two distinct tensors other than x, a GRU's h0), constant float weights, whose read outputs are the sequence (getitem 0) and, for an
    LSTM, c_n (getitem 2), or c_n alone (the sequence's h codes then have fixed qparams, H_ALONE_QPARAMS)."""

    node: torch.fx.Node
    x: torch.fx.Node
    w_ih: torch.Tensor
    w_hh: torch.Tensor
    bias: torch.Tensor | None          # LSTM: b_ih + b_hh; GRU: b_ih and b_hh stacked ([2, 3H])
    batch_first: bool
    output: torch.fx.Node | None       # the getitem of the sequence output; None: an LSTM whose c_n alone is read
    gru: bool = False                  # an `aten.gru.input` (gates r, z, n) rather than an LSTM
    cell_out: torch.fx.Node | None = None  # LSTM: the getitem of c_n when it is read (the kernel's last cell)
    state: tuple[torch.fx.Node, ...] | None = None   # a given (h0, c0) (GRU: (h0,)), None for zeros


# The h codes of an LSTM whose sequence output nobody reads (its c_n alone is): no observer sees h, so h's fixed range
# (-1, 1) (h = o * tanh(c)) sets them; a given h0 is quantized to the same codes.
H_ALONE_QPARAMS = (1.0 / 128.0, 0)

STATE_VIEWS = {aten.slice.Tensor, aten.select.int, aten.unsqueeze.default, aten.view.default,
                aten.reshape.default}


def state_root(node: torch.fx.Node) -> torch.fx.Node:
    """What a given RNN state is a slice or view of (quantized and dequantized or not): a model input, a constant
    or a computed tensor."""
    while node.op == "call_function" and node.target in (DQ_TARGETS | Q_TARGETS | STATE_VIEWS) and \
            isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    return node


def _state_source(node: torch.fx.Node) -> bool:
    """Whether a given state is an input, a constant tensor, or computed from an input: not a fill or other
    computation from constants alone, which would run on the device in float (rnn_state_constants.py folds those)."""
    root = state_root(node)
    if root.op in ("placeholder", "get_attr"):
        return True
    seen, todo = set(), [root]
    while todo:
        m = todo.pop()
        if m.op == "placeholder":
            return True
        for a in m.all_input_nodes:
            if a not in seen:
                seen.add(a)
                todo.append(a)
    return False


def lstm_layer(gm: torch.fx.GraphModule, n: torch.fx.Node) -> LstmLayer | None:
    """The layer of an `aten.lstm.input` or `aten.gru.input` call the int8 kernels take (LstmLayer), else None."""
    gru = n.target in GRU_OPS
    if n.op != "call_function" or n.target not in (LSTM_OPS | GRU_OPS) or len(n.args) < 9:
        return None
    x, hx, params, has_biases, num_layers, _dropout, train, bidirectional, batch_first = n.args[:9]
    xs = shape_of(x)
    if xs is None or len(xs) != 3 or num_layers != 1 or train or bidirectional:
        return None
    states = [hx] if gru else hx
    if not isinstance(states, (list, tuple)) or len(states) != (1 if gru else 2):
        return None
    given = None
    if not all(lstm_zero_state(gm, h) for h in states):
        hs = shape_of(states[0]) if isinstance(states[0], torch.fx.Node) else None
        if hs is None or not all(isinstance(s, torch.fx.Node) and shape_of(s) == hs for s in states) \
                or len(set((*states, x))) != len(states) + 1:
            return None                    # a state of another shape, or one tensor read as two operands
        if not all(_state_source(s) for s in states):
            return None                    # computed on the device from constants alone: rnn_state_constants.py
        given = tuple(states)
    consts = [const_tensor(gm, p) for p in params] if isinstance(params, (list, tuple)) else []
    if len(consts) != (4 if has_biases else 2) or any(c is None or not c.is_floating_point() for c in consts):
        return None
    w_ih, w_hh = consts[0], consts[1]
    assert w_ih is not None and w_hh is not None
    gates = 3 if gru else 4
    hid = w_hh.shape[1] if w_hh.dim() == 2 else 0
    if hid == 0 or tuple(w_ih.shape) != (gates * hid, xs[2]) or tuple(w_hh.shape) != (gates * hid, hid):
        return None                        # proj_size or an unexpected layout
    bias = None
    if has_biases:
        b_ih, b_hh = consts[2], consts[3]
        assert b_ih is not None and b_hh is not None
        bias = torch.stack([b_ih.detach().double(), b_hh.detach().double()]) if gru else \
            b_ih.detach().double() + b_hh.detach().double()
    outs = {}
    for u in n.users:
        if u.op != "call_function" or u.target is not operator.getitem:
            return None
        outs[u.args[1]] = u
    # h_n read: lstm_as_layers.py expresses it through the sequence output first; c_n: the kernel's last cell
    cell = outs[2] if 2 in outs and outs[2].users else None
    seq = outs[0] if 0 in outs and (outs[0].users or cell is None) else None  # an LSTM's c_n may be read alone
    if set(outs) - {0, 1, 2} or (seq is None and (gru or cell is None)) or (1 in outs and outs[1].users) or \
            (cell is not None and gru):
        return None
    if given is not None and shape_of(given[0]) != (1, xs[0] if batch_first else xs[1], hid):
        return None
    return LstmLayer(n, x, w_ih.detach().double(), w_hh.detach().double(), bias, bool(batch_first), seq, gru,
                     cell, given)
