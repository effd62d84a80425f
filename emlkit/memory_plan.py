"""Our memory planner: where each activation tensor of a program lives in the arena.

ExecuTorch's default planner (`greedy` in executorch.exir.memory_planning) groups tensors into shared objects
and lays the objects end to end, so two tensors whose lifetimes never meet can still keep each other's bytes
apart. Ours places each tensor at an offset of its own (lifetime-aware best fit): the tensors are taken in
one of a few orders (largest first, longest-lived first, ...), each goes into the smallest gap left between
the tensors it is live with, and the order giving the smallest arena wins. Lifetimes are ExecuTorch's
(node indices, both ends inclusive), so the plan is valid by the same rule the ExecuTorch verifier checks.

It plugs into ExecuTorch's public `MemoryPlanningPass(memory_planning_algo=...)`: `plan` has the signature
`apply_algo` calls (alignment, specs, graph module, graph signature, extra padding), sets each spec's
mem_id / mem_offset / mem_obj_id and returns the arena sizes by memory id (index 0: constants, always 0).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Sequence

log = logging.getLogger(__name__)

PLANNERS = ("emlkit", "executorch")
DEFAULT_PLANNER = "emlkit"


@dataclass
class _Block:
    """One allocation: the specs sharing it (one, or an in-place chain), its lifetime and aligned size."""

    specs: list[Any]
    start: int
    end: int
    size: int
    order: int          # first appearance, for deterministic tie-breaks
    offset: int = -1


def _overlap(a: _Block, b: _Block) -> bool:
    return not (a.end < b.start or a.start > b.end)


def _place(blocks: Sequence[_Block], order: list[int]) -> tuple[int, list[int]]:
    """Best fit in ORDER: each block at the smallest gap among the placed blocks it is live with that holds it
    (the lowest offset on ties), else above them all. Returns the arena size and each block's offset."""
    offsets = [-1] * len(blocks)
    placed: list[int] = []
    top = 0
    for i in order:
        b = blocks[i]
        live = sorted((offsets[j], offsets[j] + blocks[j].size) for j in placed if _overlap(b, blocks[j]))
        best: tuple[int, int] | None = None  # (gap size, offset)
        cursor = 0
        for lo, hi in live:
            gap = lo - cursor
            if gap >= b.size and (best is None or gap < best[0]):
                best = (gap, cursor)
            cursor = max(cursor, hi)
        off = best[1] if best is not None else cursor
        offsets[i] = off
        placed.append(i)
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


def best_plan(blocks: Sequence[_Block]) -> tuple[int, str, list[int]]:
    """The smallest arena over the orders tried: (bytes, the order's name, offsets)."""
    best: tuple[int, str, list[int]] | None = None
    for name, key in _ORDERS.items():
        order = sorted(range(len(blocks)), key=lambda i: key(blocks[i]))
        size, offsets = _place(blocks, order)
        if best is None or size < best[0]:
            best = (size, name, offsets)
    assert best is not None
    return best


def _fallback(alignment: int, specs: Any, graph_module: Any, graph_signature: Any, extra_padding: int) -> list[int]:
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite

    return MemoryPlanningAlgorithmSuite()(alignment, specs, graph_module, graph_signature, extra_padding)


def plan(alignment: int, specs: Any, graph_module: Any, graph_signature: Any, extra_padding: int = 0) -> list[int]:
    """Place SPECS (ExecuTorch TensorSpecs with lifetimes) in their arenas; the arena sizes by memory id.

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
    obj = 0
    for mem_id in sorted(by_mem):
        group = by_mem[mem_id]
        blocks = []
        for k, s in enumerate(group):
            s.realign(alignment)
            blocks.append(_Block([s], int(s.lifetime[0]), int(s.lifetime[1]), int(s.allocated_memory), k))
        total, how, offsets = best_plan(blocks)
        for b, off in zip(blocks, offsets):
            for s in b.specs:
                s.mem_id, s.mem_offset, s.mem_obj_id = mem_id, off, obj
            obj += 1
        sizes[mem_id] = total + extra_padding
        log.debug("memory plan: arena %d: %d B for %d tensors (order %s)", mem_id, total, len(group), how)
    if len(sizes) < 2:
        sizes.append(0)
    return sizes


def memory_planning_pass(planner: str) -> Any:
    """ExecuTorch's MemoryPlanningPass with PLANNER's algorithm ("emlkit": ours; "executorch": its default)."""
    from executorch.exir.passes import MemoryPlanningPass

    if planner not in PLANNERS:
        raise ValueError(f"unknown memory planner {planner!r}: one of {', '.join(PLANNERS)}")
    return MemoryPlanningPass() if planner == "executorch" else MemoryPlanningPass(memory_planning_algo=plan)


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
