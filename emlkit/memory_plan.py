"""Our memory planner: where each activation tensor of a program lives in the arena.

ExecuTorch's default planner (`greedy` in executorch.exir.memory_planning) groups tensors into shared objects
and lays the objects end to end, so two tensors whose lifetimes never meet can still keep each other's bytes
apart. Ours places each tensor at an offset of its own (lifetime-aware best fit): the tensors are taken in
one of a few orders (largest first, longest-lived first, ...), each goes into the smallest gap left between
the tensors it is live with, and the order giving the smallest arena wins. Lifetimes are ExecuTorch's
(node indices, both ends inclusive), so the plan is valid by the same rule the ExecuTorch verifier checks.

In place: where the firmware's registry says an op's kernels may write their output over an input (asked
from the firmware itself, emlkit.hostfw.in_place_ops) and the call is that input's last use, the two are
joined into one block at fixed offsets from each other (the output at the input's start, or ending at its
end; a concat's inputs each at its place inside the output, where that is one run of bytes; a depthwise
convolution's output starting before its input by the lead the firmware computes for the call,
emlkit.hostfw.depthwise_lead, so the pair takes the input's bytes and the lead's instead of both tensors').
A joined chain holds its widest member's bytes for its whole life, which can cost more than it saves,
so each join is kept only where it makes the arena smaller. The firmware's loader accepts exactly these
overlaps (firmware/runtime/method.c in_place_ok, list_item_in_place, ahead_ok).

It plugs into ExecuTorch's public `MemoryPlanningPass(memory_planning_algo=...)`: `plan` has the signature
`apply_algo` calls (alignment, specs, graph module, graph signature, extra padding), sets each spec's
mem_id / mem_offset / mem_obj_id and returns the arena sizes by memory id (index 0: constants, always 0).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from emlkit import hostfw
from emlkit.errors import EXIT_USAGE, AotError

log = logging.getLogger(__name__)

# emlkit-graph-order: ours with the calls in the exported graph's order (emlkit/op_order.py not run), for comparison.
PLANNERS = ("emlkit", "emlkit-no-in-place", "emlkit-graph-order", "executorch")
DEFAULT_PLANNER = "emlkit"


@dataclass
class _Block:
    """One allocation: the specs sharing it (one, or an in-place chain), its lifetime and aligned size."""

    specs: list[Any]
    start: int
    end: int
    size: int
    order: int          # first appearance, for deterministic tie-breaks
    rel: dict[int, int] = field(default_factory=dict)   # id(spec) -> its offset in the block (in place at an end)


def _overlap(a: _Block, b: _Block) -> bool:
    return not (a.end < b.start or a.start > b.end)


def _members(b: _Block) -> list[tuple[int, int, int, int]]:
    """(start, end, offset in the block, bytes) of each spec of B: a joined chain holds only its live members' bytes."""
    if not b.rel:
        return [(b.start, b.end, 0, b.size)]
    return [(int(s.lifetime[0]), int(s.lifetime[1]), b.rel.get(id(s), 0), int(s.allocated_memory)) for s in b.specs]


def _place(blocks: Sequence[_Block], order: list[int]) -> tuple[int, list[int]]:
    """Best fit in ORDER: each block at the start of the smallest free stretch of offsets where none of its
    members shares bytes with a placed member it is live with (the lowest offset on ties), else above them
    all. Returns the arena size and each block's offset."""
    offsets = [-1] * len(blocks)
    placed: list[tuple[int, int, int, int]] = []  # (start, end, first byte, end byte) of each placed member
    top = 0
    for i in order:
        b = blocks[i]
        banned = []  # block offsets X in [lo, hi) would overlap a live placed member
        for s, e, rel, size in _members(b):
            for qs, qe, lo, hi in placed:
                if not (e < qs or s > qe):
                    banned.append((lo - rel - size + 1, hi - rel))
        banned.sort()
        best: tuple[int, int] | None = None  # (free stretch, offset)
        cursor = 0
        for lo, hi in banned:
            if lo > cursor and (best is None or lo - cursor < best[0]):
                best = (lo - cursor, cursor)
            cursor = max(cursor, hi)
        off = best[1] if best is not None else cursor
        offsets[i] = off
        for s, e, rel, size in _members(b):
            placed.append((s, e, off + rel, off + rel + size))
        top = max(top, off + b.size)
    return top, offsets


# The orders tried; each is a sort key over blocks. Largest first is the classic greedy by size; the others
# win on graphs with long-lived skip tensors (U-Net) or many equal sizes.
_ORDERS: dict[str, Callable[[_Block], tuple[int, ...]]] = {
    "size": lambda b: (-b.size, b.start, b.order),
    "size*lifetime": lambda b: (-b.size * (b.end - b.start + 1), -b.size, b.order),
    "lifetime": lambda b: (-(b.end - b.start), -b.size, b.order),
    "start": lambda b: (b.start, -b.size, b.order),
}


def _mirrored(b: _Block) -> _Block:
    """B upside down: each member at the other end of the block."""
    if not b.rel:
        return b
    return _Block(b.specs, b.start, b.end, b.size, b.order,
                  {id(s): b.size - b.rel.get(id(s), 0) - int(s.allocated_memory) for s in b.specs})


def best_plan(blocks: Sequence[_Block]) -> tuple[int, str, list[int]]:
    """The smallest arena over the orders tried, each also on the blocks upside down (placed from the top of
    the arena): (bytes, the order's name, offsets). Upside down, a chain of outputs each starting a lead before
    its input (a depthwise convolution's) drifts up instead of into the arena's start, where it has no room."""
    best: tuple[int, str, list[int]] | None = None
    flipped = [_mirrored(b) for b in blocks]
    for name, key in _ORDERS.items():
        for upside_down, these in ((False, blocks), (True, flipped)):
            if upside_down and all(not b.rel for b in blocks):
                continue   # the same plan, mirrored
            order = sorted(range(len(these)), key=lambda i: key(these[i]))
            size, offsets = _place(these, order)
            if upside_down:
                offsets = [size - off - b.size for off, b in zip(offsets, these)]
            if best is None or size < best[0]:
                best = (size, name + (" upside down" if upside_down else ""), offsets)
    assert best is not None
    return best


def _fallback(alignment: int, specs: Any, graph_module: Any, graph_signature: Any, extra_padding: int) -> list[int]:
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite

    return MemoryPlanningAlgorithmSuite()(alignment, specs, graph_module, graph_signature, extra_padding)


def _op_key(target: Any) -> tuple[str, str] | None:
    schema = getattr(target, "_schema", None)
    return None if schema is None else (schema.name, getattr(target, "_overloadname", "") or "")


def _arg(node: Any, k: int) -> Any:
    """Schema argument K of NODE (positional or by name)."""
    if k < len(node.args):
        return node.args[k]
    args = node.target._schema.arguments
    return node.kwargs.get(args[k].name) if k < len(args) else None


def _planned(spec: Any, planned: set[Any]) -> Any:
    """The planned spec holding SPEC's bytes: itself, or the base of a view (ExecuTorch's memory.view, whose
    spec shares its base's place and lifetime); None if neither is planned here."""
    seen = 0
    while spec is not None and spec not in planned and seen < 64:
        spec, seen = getattr(spec, "_base", None), seen + 1
    return spec if spec in planned else None


InPlaceTable = dict[tuple[str, str], dict[int, str]]


def in_place_pairs(graph_module: Any, planned: set[Any], in_place: InPlaceTable) -> list[tuple[Any, Any, int]]:
    """(input spec, output spec, the input's offset from the output's) of each call that may write its output
    over that input: the firmware allows it for the op and argument (IN_PLACE, from the firmware's registry:
    the output starting at the input, or ending where it ends), the call is the input's last use, both are
    planned here in one arena, and the sizes meet the loader's condition (firmware/runtime/method.c
    in_place_ok; the compile's load check holds every plan to it)."""
    pairs: list[tuple[Any, Any, int]] = []
    for idx, node in enumerate(graph_module.graph.nodes):
        if node.op != "call_function":
            continue
        allowed = in_place.get(_op_key(node.target) or ("", ""))
        out = _planned(node.meta.get("spec"), planned)
        if not allowed or out is None or getattr(out, "dtype", None) is None:
            continue
        for k, how in sorted(allowed.items()):
            a = _arg(node, k)
            if how == hostfw.IN_PLACE_LIST:
                pairs.extend(_list_items_in_place(node, idx, a, out, planned))
                break
            if how == hostfw.IN_PLACE_AHEAD:
                pairs.extend(_ahead(node, idx, a, out, planned))
                break
            spec = _planned(a.meta.get("spec"), planned) if hasattr(a, "meta") else None
            if (spec is None or spec is out or int(spec.lifetime[1]) != idx
                    or (spec.mem_id or 1) != (out.mem_id or 1) or getattr(spec, "dtype", None) is None):
                continue
            osz, isz = out.dtype.itemsize, spec.dtype.itemsize
            if how == hostfw.IN_PLACE_START and out.nbytes() <= spec.nbytes() and osz <= isz:
                pairs.append((spec, out, 0))
                break
            rel = out.nbytes() - spec.nbytes()
            # The input's offset must keep the arena's alignment (every planned offset is a multiple of it).
            if (how == hostfw.IN_PLACE_END and osz >= isz and out.nbytes() // osz == spec.nbytes() // isz
                    and rel % max(1, int(spec.alignment)) == 0):
                pairs.append((spec, out, rel))
                break
    return pairs


_NHWC_ORDER = {False: [0, 2, 3, 1], True: [0, 1, 2, 3]}  # channels-last memory: dim-order op, _nhwc op


def _nhwc(spec: Any, nhwc: bool) -> tuple[int, int, int, int] | None:
    """SPEC's NHWC sizes when its bytes are NHWC: NCHW sizes in channels-last order, or NHWC sizes (_nhwc ops)."""
    if len(spec.shape) != 4 or spec.dim_order is None or [int(d) for d in spec.dim_order] != _NHWC_ORDER[nhwc]:
        return None
    n, a, b, c = (int(s) for s in spec.shape)
    return (n, a, b, c) if nhwc else (n, b, c, a)


def _pair(v: Any) -> tuple[int, int] | None:
    vals = [int(x) for x in v] if isinstance(v, (list, tuple)) else []
    return (vals[0], vals[-1]) if len(vals) in (1, 2) else None


def _ahead(node: Any, idx: int, a: Any, out: Any, planned: set[Any]) -> list[tuple[Any, Any, int]]:
    """(input spec, output spec, the input's offset from the output's) of a depthwise convolution NODE whose
    output may start before its input A (IN_PLACE_AHEAD): the call is A's last use, both are planned in one
    arena, and the firmware gives the call a lead (hostfw.depthwise_lead: the bytes the output must start before
    the input, more only by whole steps); the offset is the least such one that keeps the arena's alignment."""
    spec = _planned(a.meta.get("spec"), planned) if hasattr(a, "meta") else None
    w = _arg(node, 1)
    wval = w.meta.get("val") if hasattr(w, "meta") else None
    if (spec is None or spec is out or spec is not a.meta.get("spec") or int(spec.lifetime[1]) != idx
            or (spec.mem_id or 1) != (out.mem_id or 1) or wval is None or len(wval.shape) != 4):
        return []
    nhwc = str(node.target._schema.name).endswith("_nhwc")
    inp, res = _nhwc(spec, nhwc), _nhwc(out, nhwc)
    geo = [_pair(_arg(node, k)) for k in (3, 4, 5)]  # stride, padding, dilation
    if inp is None or res is None or any(g is None for g in geo):
        return []
    stride, pad, dil = geo
    got = hostfw.depthwise_lead(hostfw.DepthwiseCall(inp, res, (int(wval.shape[1]), int(wval.shape[2])), stride, pad,
                                                     dil))  # type: ignore[arg-type]
    if got is None:
        return []
    lead, step = got
    align = max(1, int(spec.alignment))
    rel = next((lead + k * step for k in range(align) if (lead + k * step) % align == 0), None)
    return [] if rel is None else [_Ahead((spec, out, rel))]


class _Ahead(tuple):  # type: ignore[type-arg]
    """An (input, output, offset) pair of _ahead: in place at a cost (the MVE kernel then takes its border
    columns pixel by pixel), so kept only where it makes the arena smaller (_with_pairs)."""


def _list_items_in_place(node: Any, idx: int, items: Any, out: Any, planned: set[Any]) -> list[tuple[Any, Any, int]]:
    """(item spec, output spec, its offset in the output) of each item of the tensor list ITEMS (a concat's
    inputs) that may be planned where NODE writes it: the concat's part of the output for one item is one run of
    bytes when every dim outside the concat dim, in memory order, has size 1 (the firmware's loader holds plans to
    it: method.c list_item_in_place), the call is the item's last use, and the item is planned alone (not a view
    of a larger tensor) in the output's arena at an offset that keeps the alignment."""
    if not isinstance(items, (list, tuple)) or out.dim_order is None:
        return []
    shape, order = [int(s) for s in out.shape], [int(d) for d in out.dim_order]
    dim = int(_arg(node, 1) or 0) % max(1, len(shape))
    if any(shape[d] != 1 for d in order[:order.index(dim)]):
        return []   # the concat interleaves its inputs' rows (e.g. channels in NHWC)
    pairs: list[tuple[Any, Any, int]] = []
    at = 0
    seen: set[int] = set()
    for item in items:
        own = item.meta.get("spec") if hasattr(item, "meta") else None
        nbytes = int(own.nbytes()) if own is not None else 0
        spec = _planned(own, planned) if own is not None else None
        if (spec is not None and spec is not out and id(spec) not in seen and int(spec.lifetime[1]) == idx
                and (spec.mem_id or 1) == (out.mem_id or 1) and int(spec.nbytes()) == nbytes
                and [int(d) for d in spec.dim_order] == order and spec.dtype.itemsize == out.dtype.itemsize
                and at % max(1, int(out.alignment)) == 0):
            pairs.append((spec, out, at))
        if spec is not None:
            seen.add(id(spec))
        at += nbytes
    # An item listed twice cannot lie at both of its places.
    twice = {id(s) for s, _, _ in pairs if sum(1 for t in items if hasattr(t, "meta") and
                                                _planned(t.meta.get("spec"), planned) is s) > 1}
    return [p for p in pairs if id(p[0]) not in twice]


def _blocks(group: list[Any], pairs: list[tuple[Any, Any, int]]) -> list[_Block]:
    """GROUP's specs as blocks, each in-place chain (PAIRS) joined into one block whose specs keep their offsets
    from each other (block.rel); a pair that would contradict offsets already joined is left out."""
    parent = {id(s): id(s) for s in group}
    pot = {id(s): 0 for s in group}   # offset from the parent

    def find(x: int) -> tuple[int, int]:
        off = 0
        while parent[x] != x:
            off += pot[x]
            x = parent[x]
        return x, off

    for a, b, rel in pairs:   # offset(a) = offset(b) + rel
        if id(a) not in parent or id(b) not in parent:
            continue
        ra, oa = find(id(a))
        rb, ob = find(id(b))
        if ra != rb:
            parent[rb], pot[rb] = ra, oa - rel - ob
    members: dict[int, list[tuple[Any, int]]] = {}
    for s in group:
        r, off = find(id(s))
        members.setdefault(r, []).append((s, off))
    blocks = []
    for k, specs in enumerate(members.values()):
        low = min(off for _, off in specs)
        blocks.append(_Block([s for s, _ in specs], min(int(s.lifetime[0]) for s, _ in specs),
                             max(int(s.lifetime[1]) for s, _ in specs),
                             max(off - low + int(s.allocated_memory) for s, off in specs), k,
                             rel={id(s): off - low for s, off in specs}))
    return blocks


def _with_pairs(group: list[Any], pairs: list[tuple[Any, Any, int]]) -> tuple[list[_Block], int, str, list[int]]:
    """The smallest plan of GROUP over in-place choices: all of PAIRS, then each pair dropped in turn where that
    makes the arena smaller (joining a chain ties the placement of its tensors, which can cost more than the
    bytes it shares; a depthwise output ahead of its input, _Ahead, also where the arena stays the same), and
    none."""
    def attempt(chosen: list[tuple[Any, Any, int]]) -> tuple[list[_Block], int, str, list[int]]:
        blocks = _blocks(group, chosen)
        return (blocks, *best_plan(blocks))

    best = attempt(pairs)
    chosen = list(pairs)
    for pair in list(pairs):
        trial = attempt([p for p in chosen if p is not pair])
        if trial[1] < best[1] or (isinstance(pair, _Ahead) and trial[1] == best[1]):
            best, chosen = trial, [p for p in chosen if p is not pair]
    if chosen:
        none = attempt([])
        if none[1] < best[1]:
            best = none
    return best


def plan(alignment: int, specs: Any, graph_module: Any, graph_signature: Any, extra_padding: int = 0,
         in_place: InPlaceTable | None = None) -> list[int]:
    """Place SPECS (ExecuTorch TensorSpecs with lifetimes) in their arenas; the arena sizes by memory id. With
    IN_PLACE (the firmware's in-place ops), a call's output shares its input's place where in_place_pairs allows.

    Control flow (sub-graphs with arenas of their own) and storage-sharing views are left to ExecuTorch's
    planner: no program of ours has them, and its handling of them is not restated here."""
    specs = list(specs)
    reserved = [int(x) for x in (getattr(graph_module, "input_mem_buffer_sizes", None) or [])]
    if any(reserved) or any(s.storage_base is not None for s in specs):
        log.debug("memory plan: control flow or storage views; ExecuTorch's planner places this graph")
        return _fallback(alignment, specs, graph_module, graph_signature, extra_padding)
    by_mem: dict[int, list[Any]] = {}
    for s in specs:
        by_mem.setdefault(1 if s.mem_id is None else int(s.mem_id), []).append(s)
    sizes = [0] * (max(by_mem, default=1) + 1)
    for s in specs:
        s.realign(alignment)
    pairs = in_place_pairs(graph_module, set(specs), in_place) if in_place else []
    obj = 0
    for mem_id in sorted(by_mem):
        group = by_mem[mem_id]
        blocks, total, how, offsets = _with_pairs(group, pairs)
        for b, off in zip(blocks, offsets):
            for s in b.specs:
                s.mem_id, s.mem_offset = mem_id, off + b.rel.get(id(s), 0)
        obj = _number_shared_objects(group, obj)
        sizes[mem_id] = total + extra_padding
        log.debug("memory plan: arena %d: %d B for %d tensors, %d in place (order %s)", mem_id, total, len(group),
                  len(group) - len(blocks), how)
    if len(sizes) < 2:
        sizes.append(0)
    return sizes


def _number_shared_objects(specs: list[Any], first: int) -> int:
    """Give SPECS (placed in one arena) ExecuTorch's mem_obj_id: one id per run of overlapping byte ranges, as its
    storage verifier expects of tensors that share bytes; the next free id."""
    end, obj = -1, first - 1
    for s in sorted(specs, key=lambda x: int(x.mem_offset)):
        if int(s.mem_offset) > end:
            obj += 1
        s.mem_obj_id = obj
        end = max(end, int(s.mem_offset) + int(s.allocated_memory) - 1)
    return obj + 1


def memory_planning_pass(planner: str) -> Any:
    """ExecuTorch's MemoryPlanningPass with PLANNER's algorithm ("emlkit": ours, in place where the firmware
    allows, the calls in the order of least arena (emlkit/op_order.py); "emlkit-no-in-place": ours without in
    place; "emlkit-graph-order": ours in the graph's order; "executorch": its default)."""
    from executorch.exir.passes import MemoryPlanningPass

    if planner not in PLANNERS:
        raise AotError(f"unknown memory planner {planner!r}: use one of {', '.join(PLANNERS)}", EXIT_USAGE)
    if planner == "executorch":
        return MemoryPlanningPass()
    try:
        table = hostfw.in_place_ops() if planner in ("emlkit", "emlkit-graph-order") else {}
    except hostfw.HostBuildError as exc:
        raise hostfw.unavailable("ask the firmware which ops run in place", exc) from exc

    def algo(alignment: int, specs: Any, graph_module: Any, graph_signature: Any, extra_padding: int = 0) -> list[int]:
        return plan(alignment, specs, graph_module, graph_signature, extra_padding, table)

    algo.__name__ = f"emlkit_{planner.replace('-', '_')}"
    # In-place outputs overlap their inputs' lifetimes by design (the firmware's load check holds them to its rule);
    # ExecuTorch's storage verifier, which runs only under debug logging (`emlkit -v`), would refuse them.
    if planner == "emlkit-graph-order":
        return MemoryPlanningPass(memory_planning_algo=algo, allow_lifetime_and_storage_overlap=bool(table))
    from emlkit.op_order import ordered_planning_pass

    return ordered_planning_pass(algo, bool(table))


# Element sizes of ExecuTorch's ScalarType codes (executorch/exir/scalar_type.py).
_ELEMENT_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2}


@dataclass(frozen=True)
class LayerBound:
    """The call whose planned tensors (inputs and output) take the most bytes: no plan that keeps a call's
    output apart from its inputs can make the arena smaller."""

    bytes: int
    instruction: int
    op: str


def _tensor_bytes(t: Any) -> int:
    n = 1
    for s in t.sizes:
        n *= int(s)
    return n * _ELEMENT_BYTES.get(int(t.scalar_type), 8)


def layer_bound(program: Any) -> LayerBound:
    """The largest (inputs + output) bytes of planned tensors over the calls of method 0 of PROGRAM
    (an ExecutorchProgramManager); each tensor counted once per call, unaligned."""
    from executorch.exir.schema import DelegateCall, KernelCall, Tensor, TensorList

    plan = program.executorch_program.execution_plan[0]
    best = LayerBound(0, -1, "")
    pc = 0
    for chain in plan.chains:
        for ins in chain.instructions:
            a = ins.instr_args
            if isinstance(a, (KernelCall, DelegateCall)):
                seen: set[int] = set()
                for vi in a.args:
                    v = plan.values[vi].val
                    idxs = list(v.items) if isinstance(v, TensorList) else [vi]
                    for ti in idxs:
                        t = plan.values[ti].val
                        if isinstance(t, Tensor) and t.allocation_info is not None:
                            seen.add(ti)
                total = sum(_tensor_bytes(plan.values[ti].val) for ti in seen)
                if total > best.bytes:
                    op = (plan.operators[a.op_index].name if isinstance(a, KernelCall)
                          else f"delegate {plan.delegates[a.delegate_index].id}")
                    best = LayerBound(total, pc, op)
            pc += 1
    return best
