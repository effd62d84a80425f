"""The order the program's calls run in, chosen to lower the arena: ExecuTorch runs the nodes in graph order, and
where the graph branches (a residual block's skip, a U-Net's skips, independent heads) another valid order can keep
fewer bytes live at once.

Runs inside the memory planning step (OrderedPlanningPass, ExecuTorch's public MemoryPlanningPass with its `run`
extended), on the out-variant graph just before the tensors are placed, so the emitted program, its lifetimes and
our plan all follow the order chosen. The search works on calls ("units"): each call node with the `memory.alloc`
nodes of its outputs just before it and its `getitem`s just after it; placeholders stay first, the output last.
A unit's cost model: the bytes of the planned tensors it touches, live from the first unit touching them to the last
(graph inputs from the start, graph outputs to the end), as ExecuTorch's lifetimes count them. Two orders are built:
greedy (at each step the ready call adding the fewest net bytes) and a branch-and-bound search over the ready calls
(the least peak of live bytes; the live bytes depend only on the set of calls done, so a set reached again with no
lower peak is cut; at most NODE_BUDGET states and STEP_BUDGET calls costed), seeded with the better of the graph's
and greedy's peaks. Each order whose live-bytes peak is lower than the graph's is then planned for real on a copy of
the graph, and the graph is reordered only where our planner's arena comes out smaller than in graph order. The
model leaves in-place outputs out (it overestimates what our planner needs), so it only proposes orders.

Reordering keeps every call's inputs before it, so each call computes exactly what it did: the outputs are the same
bits. Graphs that write state (mutable buffers, ops that write an input other than their `out`) keep their order.
"""

from __future__ import annotations

import copy
import logging
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger(__name__)

NODE_BUDGET = 20_000  # branch-and-bound states expanded per graph
STEP_BUDGET = 300_000  # and calls' costs evaluated (about a second): wide graphs stop on this one


@dataclass
class OrderChoice:
    """What the search found: the arena in graph order and in the order kept, and the live-bytes peaks."""

    arena_graph_order: int | None = None   # our planner's arena in graph order; None: no order was worth planning
    arena: int | None = None
    live_peak_graph_order: int = 0
    live_peak: int = 0
    reordered: bool = False
    states: int = 0
    why: str = ""
    moved: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the graph as units


def _is_alloc(n: Any) -> bool:
    return n.op == "call_function" and getattr(n.target, "__name__", "") == "alloc" and not n.all_input_nodes


def _is_getitem(n: Any) -> bool:
    return n.op == "call_function" and n.target is operator.getitem


def _specs(n: Any) -> list[Any]:
    spec = n.meta.get("spec")
    items = spec if isinstance(spec, (list, tuple)) else [spec]
    out = []
    for s in items:
        while s is not None and getattr(s, "_base", None) is not None:
            s = s._base   # a view's bytes are its base's
        if s is not None and hasattr(s, "lifetime") and not getattr(s, "const", False):
            out.append(s)
    return out


def _nbytes(s: Any) -> int:
    try:
        return int(s.allocated_memory) or int(s.nbytes())
    except Exception:  # a spec without static sizes (not in our programs): count it as nothing
        return 0


@dataclass
class _Units:
    head: list[Any]              # placeholders (and anything before the first call), kept first in their order
    units: list[list[Any]]       # each call with its allocs before and getitems after, graph order
    tail: list[Any]              # the output node
    preds: list[set[int]]        # units each unit reads from
    touch: list[set[int]]        # spec ids each unit touches
    size: dict[int, int]         # spec id -> bytes
    pinned_start: set[int]       # graph inputs: live from the start
    pinned_end: set[int]         # graph outputs: live to the end


def _units(gm: Any) -> _Units | None:
    nodes = list(gm.graph.nodes)
    head = [n for n in nodes if n.op in ("placeholder", "get_attr")]
    tail = [n for n in nodes if n.op == "output"]
    calls = [n for n in nodes if n.op == "call_function" and not _is_alloc(n) and not _is_getitem(n)]
    if len(head) + len(tail) + len(calls) + sum(1 for n in nodes if _is_alloc(n) or _is_getitem(n)) != len(nodes):
        return None  # a node kind not modelled here (call_module, ...): keep the graph's order
    unit_of: dict[Any, int] = {}
    units: list[list[Any]] = []
    for k, n in enumerate(calls):
        allocs = [a for a in n.all_input_nodes if _is_alloc(a) and a not in unit_of]
        items = [u for u in n.users if _is_getitem(u)]
        units.append([*allocs, n, *items])
        for m in units[-1]:
            unit_of[m] = k
    if any((_is_alloc(n) or _is_getitem(n)) and n not in unit_of for n in nodes):
        return None
    preds: list[set[int]] = []
    touch: list[set[int]] = []
    size: dict[int, int] = {}
    for k, members in enumerate(units):
        p: set[int] = set()
        t: set[int] = set()
        for m in members:
            for a in m.all_input_nodes:
                if a in unit_of and unit_of[a] != k:
                    p.add(unit_of[a])
                for s in _specs(a):
                    t.add(id(s))
                    size[id(s)] = _nbytes(s)
            for s in _specs(m):
                t.add(id(s))
                size[id(s)] = _nbytes(s)
        preds.append(p)
        touch.append(t)
    pinned_start = {id(s) for n in head for s in _specs(n)}
    pinned_end = {id(s) for n in tail for a in n.all_input_nodes for s in _specs(a)}
    for s in pinned_start:
        size.setdefault(s, 0)
    for n in head:
        for s in _specs(n):
            size[id(s)] = _nbytes(s)
    return _Units(head, units, tail, preds, touch, size, pinned_start, pinned_end)


# ---------------------------------------------------------------- the cost model


class _Live:
    """Live bytes as units run: a spec is live from its first touching unit (graph inputs: from the start) to its
    last (graph outputs: to the end). The units done are a bit mask, so a step costs no copies."""

    def __init__(self, u: _Units) -> None:
        self.u = u
        self.mask: dict[int, int] = {}   # spec id -> the units touching it, as bits
        for k, t in enumerate(u.touch):
            for s in t:
                self.mask[s] = self.mask.get(s, 0) | (1 << k)
        self.base = sum(u.size[s] for s in u.pinned_start)

    def step(self, k: int, done: int) -> tuple[int, int]:
        """(bytes unit K starts, bytes it ends) after the units DONE."""
        add = free = 0
        for s in self.u.touch[k]:
            m = self.mask[s]
            if not m & done and s not in self.u.pinned_start:
                add += self.u.size[s]
            if m & ~done == 1 << k and s not in self.u.pinned_end:
                free += self.u.size[s]
        return add, free

    def peak(self, order: list[int]) -> int:
        done = 0
        live = top = self.base
        for k in order:
            add, free = self.step(k, done)
            top = max(top, live + add)
            live += add - free
            done |= 1 << k
        return top


def _greedy(u: _Units, model: _Live) -> list[int]:
    """At each step the ready unit adding the fewest net bytes (then the smaller step peak, then graph order)."""
    n = len(u.units)
    pred_mask = [sum(1 << p for p in u.preds[k]) for k in range(n)]
    done = 0
    order: list[int] = []
    while len(order) < n:
        ready = [k for k in range(n) if not (done >> k) & 1 and pred_mask[k] & done == pred_mask[k]]
        best = min(ready, key=lambda k: (lambda af: (af[0] - af[1], af[0], k))(model.step(k, done)))
        order.append(best)
        done |= 1 << best
    return order


def _branch_and_bound(u: _Units, model: _Live, bound: int, seed: list[int]) -> tuple[list[int], int, int]:
    """The order of least live-bytes peak found within NODE_BUDGET states (SEED, of peak BOUND, if none beats it):
    (order, its peak, states expanded). The live bytes depend only on the set of units done, so a set reached again
    with a peak no lower than before is cut."""
    n = len(u.units)
    pred_mask = [sum(1 << p for p in u.preds[k]) for k in range(n)]
    best_order, best_peak = list(seed), bound
    seen: dict[int, int] = {}
    states = 0
    full = (1 << n) - 1
    # Iterative DFS; each frame: (done mask, live bytes, peak so far, order).
    stack: list[tuple[int, int, int, list[int]]] = [(0, model.base, model.base, [])]
    work = 0
    while stack and states < NODE_BUDGET and work < STEP_BUDGET:
        done, live, peak, order = stack.pop()
        if done == full:
            if peak < best_peak:
                best_order, best_peak = order, peak
            continue
        if peak >= best_peak or seen.get(done, 1 << 62) <= peak:
            continue
        seen[done] = peak
        states += 1
        moves = []
        for k in range(n):
            if not (done >> k) & 1 and pred_mask[k] & done == pred_mask[k]:
                add, free = model.step(k, done)
                moves.append((add - free, add, k))
        work += len(moves)
        # Push the worst first: the DFS takes the greedy move first and finds a good bound early.
        for net, add, k in sorted(moves, reverse=True):
            step_peak = max(peak, live + add)
            if step_peak < best_peak:
                stack.append((done | (1 << k), live + net, step_peak, [*order, k]))
    return best_order, best_peak, states


def _apply(gm: Any, u: _Units, order: list[int]) -> None:
    """Put GM's nodes in ORDER (units), placeholders first and the output last."""
    seq = [*u.head, *(m for k in order for m in u.units[k]), *u.tail]
    cursor = seq[0]
    for n in seq[1:]:
        cursor.append(n)  # moves n right after cursor
        cursor = n


def _writes_state(gm: Any, signature: Any) -> bool:
    if signature is not None and (getattr(signature, "buffers_to_mutate", None)
                                  or getattr(signature, "user_inputs_to_mutate", None)):
        return True
    for n in gm.graph.nodes:
        schema = getattr(n.target, "_schema", None) if n.op == "call_function" else None
        if schema is None:
            continue
        for a in schema.arguments:
            if a.alias_info is not None and a.alias_info.is_write and not a.kwarg_only:
                return True
    return False


def choose(gm: Any, signature: Any, arena_of: Callable[[Any], int]) -> OrderChoice:
    """Reorder GM's calls where that makes ARENA_OF (our planner on a copy of a graph module) smaller; the choice."""
    c = OrderChoice()
    if _writes_state(gm, signature):
        c.why = "the graph writes state: graph order kept"
        return c
    u = _units(gm)
    if u is None or len(u.units) < 2:
        c.why = "nothing to reorder"
        return c
    model = _Live(u)
    graph = list(range(len(u.units)))
    c.live_peak_graph_order = c.live_peak = model.peak(graph)
    greedy = _greedy(u, model)
    g_peak = model.peak(greedy)
    seed, bound = (greedy, g_peak) if g_peak < c.live_peak else (graph, c.live_peak)
    bb, bb_peak, c.states = _branch_and_bound(u, model, bound, seed)
    candidates = [o for o, p in ((bb, bb_peak), (greedy, g_peak)) if p < c.live_peak and o != graph]
    if not candidates:
        c.why = f"no order keeps fewer bytes live than the graph's ({c.live_peak} B)"
        return c
    c.arena_graph_order = c.arena = least = arena_of(_reordered_copy(gm, graph))
    best: list[int] | None = None
    for order in {tuple(o): o for o in candidates}.values():
        arena = arena_of(_reordered_copy(gm, order))
        if arena < least:
            best, least, c.arena, c.live_peak = order, arena, arena, model.peak(order)
    if best is None:
        c.why = f"the orders with fewer live bytes plan no smaller than graph order ({c.arena_graph_order} B)"
        return c
    c.moved = [u.units[k][-1].name for i, k in enumerate(best) if k != i][:8]
    _apply(gm, u, best)
    gm.recompile()
    c.reordered = True
    c.why = f"arena {c.arena_graph_order} -> {c.arena} B"
    return c


def reset_lifetimes(gm: Any) -> None:
    """Forget the lifetimes of GM's tensor specs: ExecuTorch widens a spec's lifetime over what it holds already,
    and a graph module's copy shares its specs (node metadata is copied shallowly), so planning a copy in another
    order would leave that order's lifetimes on the original's specs."""
    for n in gm.graph.nodes:
        spec = n.meta.get("spec")
        for s in spec if isinstance(spec, (list, tuple)) else [spec]:
            while s is not None and hasattr(s, "lifetime"):
                s.lifetime = [None, None]
                s = getattr(s, "_base", None)


def _reordered_copy(gm: Any, order: list[int]) -> Any:
    reset_lifetimes(gm)
    dup = copy.deepcopy(gm)
    u = _units(dup)
    assert u is not None
    _apply(dup, u, order)
    dup.recompile()
    return dup


def ordered_planning_pass(algo: Callable[..., list[int]], allow_overlap: bool) -> Any:
    """ExecuTorch's MemoryPlanningPass with ALGO, its graph's calls first put in the order of the smallest arena
    (choose); the choice is kept on the pass (`.choice`)."""
    from executorch.exir.passes import MemoryPlanningPass

    class OrderedPlanningPass(MemoryPlanningPass):
        choice: OrderChoice | None = None

        def run(self, graph_module: Any, graph_signature: Any = None) -> Any:
            def arena_of(dup: Any) -> int:
                sizes = MemoryPlanningPass(memory_planning_algo=algo,
                                           allow_lifetime_and_storage_overlap=allow_overlap).run(
                    dup, graph_signature).graph_module.meta.get("non_const_buffer_sizes", [0])
                return int(sum(sizes[1:]))

            self.choice = choose(graph_module, graph_signature, arena_of)
            reset_lifetimes(graph_module)
            log.debug("op order: %s", self.choice.why)
            return super().run(graph_module, graph_signature)

    return OrderedPlanningPass(memory_planning_algo=algo, allow_lifetime_and_storage_overlap=allow_overlap)
