"""What the graph-rewriting passes share: constants, parameters, node metadata and the pass skeletons.

The passes in this package rewrite torch.fx graphs at three stages (pre-quantization GraphModules,
pre-edge GraphModules, the final ExportedProgram). Each used to carry its own copy of the same
set-up: naming and registering a new weight, copying provenance metadata onto new nodes, giving
new get_attr nodes a fake value, walking a node's users, the report of what the last run changed
and the loop over matching calls. They live here once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable

import torch

from emlkit.passes.manager import Pass

log = logging.getLogger(__name__)

# Meta keys that tell later passes and error messages where an op came from.
KEEP_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "from_node", "seq_nr")


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


def calls(gm: torch.fx.GraphModule, targets: Any) -> list[torch.fx.Node]:
    """The graph's calls of any of `targets` (a snapshot: the caller may rewrite them)."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target in targets]


def wrap_int32(v: torch.Tensor) -> torch.Tensor:
    """int64 values wrapped to int32, like the kernels' accumulator arithmetic."""
    return ((v + (1 << 31)) % (1 << 32) - (1 << 31)).to(torch.int32)


# ---------------------------------------------------------------- pass skeletons

@dataclass
class Rewrite(Pass):
    """Base of the pre-quantization rewrites: a report listing the nodes the last run changed.

    Subclasses name the list's report entry (`report_name`); the manager sets `applicable` (set_target).
    """

    report_key: str = ""
    done: list[Any] = field(default_factory=list)
    applicable: bool = False  # until bound to a target it applies to
    report_name: ClassVar[str] = "rewritten"

    def report(self) -> dict[str, Any]:
        return {self.report_name: list(self.done)}

    def __call__(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        self.done = []
        if self.applicable:
            self.done = self.run(gm)
        return gm

    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        raise NotImplementedError


class Recorder(Pass):
    """Mixin for the post-edge and program passes: the names of the nodes the last run changed."""

    report_key: ClassVar[str] = ""
    report_name: ClassVar[str] = "rewritten"

    def __init__(self) -> None:
        super().__init__()
        self.done: list[str] = []

    def report(self) -> dict[str, Any]:
        return {self.report_name: list(self.done)}


class ProgramRewrite(Recorder):
    """Base of the passes that edit cortex_m:: nodes of the final ExportedProgram in place.

    `cm_ops` are cortex_m:: op names (those this ExecuTorch lacks are skipped); `rewrite` changes one
    node and says whether it did. The report gives the count (`report_name`).
    """

    cm_ops: ClassVar[tuple[str, ...]] = ()  # not `ops`: that is the declaration's (emlkit/passes/manager.py)

    def report(self) -> dict[str, Any]:
        return {self.report_name: len(self.done)}

    def __call__(self, ep: Any) -> Any:
        from executorch.exir.dialects._ops import ops as exir_ops

        cm = exir_ops.edge.cortex_m
        names = {getattr(cm, n).default: n for n in self.cm_ops if hasattr(cm, n)}
        self.done = [n.name for n in calls(ep.graph_module, names) if self.rewrite(ep, n, names[n.target])]
        if self.done:
            ep.graph_module.recompile()
        return ep

    def rewrite(self, ep: Any, n: torch.fx.Node, op: str) -> bool:
        raise NotImplementedError
