"""The calls' order before planning (emlkit/op_order.py): another topological order is kept only where our planner's
arena comes out smaller, every call still follows its inputs, graphs that write state keep their order, and a
reordered program runs bit-exact on the device."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from emlkit import emit, hostfw, op_order, program_info, reference, verify
from emlkit.compile import lower_model, make_options, to_executorch
from emlkit.load import calibration_set, load_model
from emlkit.targets import get_target
from toolchain import needs_qemu

ROOT = Path(__file__).resolve().parents[1]
BRANCHES = ROOT / "tests" / "models" / "branch_order.py"
needs_host_fw = pytest.mark.skipif(hostfw.cmake_binary() is None, reason="needs cmake and a host C compiler")


def _emit(path: Path, planner: str) -> tuple[Any, Any]:
    """PATH lowered for cortex-m55 and emitted with PLANNER, after the firmware's own load check: (program, lowered)."""
    target = get_target("cortex-m55")
    model = load_model(str(path))
    with tempfile.TemporaryDirectory() as tmp:
        lowered, tosa = lower_model(model, target, make_options(patch_bands=0),
                                    calibration_set(None, model.inputs).samples, Path(tmp))
    with torch.no_grad():
        expected = reference.run_lowered(lowered.edge, lowered.inputs, tosa)
    program = to_executorch(lowered, target, planner)
    verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [(lowered.inputs, expected)])), target.name)
    return program, lowered


def _calls(program: Any) -> list[tuple[str, list[int]]]:
    """Each kernel call's operator and output shape (its last argument), in the order the program runs them."""
    from executorch.exir.schema import KernelCall

    plan = program.executorch_program.execution_plan[0]
    return [(plan.operators[i.instr_args.op_index].name, list(plan.values[i.instr_args.args[-1]].val.sizes))
            for c in plan.chains for i in c.instructions if isinstance(i.instr_args, KernelCall)]


@needs_host_fw
def test_interleaved_branches_are_run_one_after_the_other() -> None:
    """Written a1, b1, a2, b2, both 32-channel maps are live at b1; a1, a2, b1, b2 holds one of them."""
    before, _ = _emit(BRANCHES, "emlkit-graph-order")
    after, lowered = _emit(BRANCHES, "emlkit")
    a0, a1 = (int(program_info.memory_plan(p)["arena_total"]) for p in (before, after))
    choice = lowered.extra["op_order"]
    assert choice["reordered"] and choice["arena_graph_order"] == a0 and choice["arena"] == a1
    map32 = 32 * 16 * 16  # one int8 32-channel map: graph order holds two at once, the new order one
    assert a1 <= a0 - map32 // 2, (a0, a1)
    assert choice["live_peak"] < choice["live_peak_graph_order"]
    # the same calls, in another order
    assert sorted(_calls(before)) == sorted(_calls(after)) and _calls(before) != _calls(after)
    convs = [shape[1] for op, shape in _calls(after) if op == "cortex_m::quantized_conv2d"]
    assert convs == [32, 8, 32, 8] and \
        [shape[1] for op, shape in _calls(before) if op == "cortex_m::quantized_conv2d"] == [32, 32, 8, 8]


class _Spec:
    def __init__(self, nbytes: int) -> None:
        self.allocated_memory, self.lifetime, self.const = nbytes, [None, None], False


def _graph(edges: dict[str, list[str]], sizes: dict[str, int]) -> torch.fx.GraphModule:
    """A graph of calls (torch.add chains) over one input, each node's spec SIZES[name] bytes, in the dict's order."""
    g = torch.fx.Graph()
    nodes = {"x": g.placeholder("x")}
    nodes["x"].meta["spec"] = _Spec(sizes.get("x", 0))
    for name, srcs in edges.items():
        n = g.call_function(torch.add, tuple(nodes[s] for s in srcs[:2]) if len(srcs) > 1 else (nodes[srcs[0]], 1))
        n.name = name
        n.meta["spec"] = _Spec(sizes[name])
        nodes[name] = n
    g.output(nodes[list(edges)[-1]])
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_orders_are_topological_and_the_search_beats_graph_order() -> None:
    # two branches interleaved, as branch_order.py: a1 (big) b1 (big) a2 b2 out
    edges = {"a1": ["x"], "b1": ["x"], "a2": ["a1"], "b2": ["b1"], "out": ["a2", "b2"]}
    sizes = {"x": 10, "a1": 100, "b1": 100, "a2": 5, "b2": 5, "out": 5}
    gm = _graph(edges, sizes)
    u = op_order._units(gm)
    assert u is not None
    model = op_order._Live(u)
    graph = list(range(len(u.units)))
    assert model.peak(graph) == 10 + 100 + 100
    greedy = op_order._greedy(u, model)
    bb, peak, states = op_order._branch_and_bound(u, model, model.peak(graph), graph)
    for order in (greedy, bb):
        pos = {k: i for i, k in enumerate(order)}
        assert sorted(order) == graph and all(pos[p] < pos[k] for k in order for p in u.preds[k])
    assert peak == model.peak(bb) == 10 + 100 + 5 and states > 0

    planned: list[list[str]] = []

    def arena_of(dup: Any) -> int:  # stands in for the planner: the live-bytes peak of the copy's order
        names = [n.name for n in dup.graph.nodes if n.op == "call_function"]
        planned.append(names)
        d = op_order._units(dup)
        assert d is not None
        return op_order._Live(d).peak(list(range(len(d.units))))

    c = op_order.choose(gm, None, arena_of)
    assert c.reordered and c.arena_graph_order == 210 and c.arena == 115
    order = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    assert order.index("a2") < order.index("b1") or order.index("b2") < order.index("a1")
    assert planned[0] == ["a1", "b1", "a2", "b2", "out"]  # graph order planned first, for the comparison


def test_an_order_our_planner_does_not_plan_smaller_is_not_kept() -> None:
    edges = {"a1": ["x"], "b1": ["x"], "a2": ["a1"], "b2": ["b1"], "out": ["a2", "b2"]}
    gm = _graph(edges, {"x": 10, "a1": 100, "b1": 100, "a2": 5, "b2": 5, "out": 5})
    c = op_order.choose(gm, None, lambda dup: 210)
    assert not c.reordered and "plan no smaller" in c.why
    assert [n.name for n in gm.graph.nodes if n.op == "call_function"] == list(edges)


def test_a_graph_that_writes_state_keeps_its_order() -> None:
    gm = _graph({"a1": ["x"], "b1": ["x"], "out": ["a1", "b1"]}, {"a1": 1, "b1": 1, "out": 1})
    c = op_order.choose(gm, SimpleNamespace(buffers_to_mutate={"out": "state"}), lambda dup: 0)
    assert not c.reordered and "writes state" in c.why


@needs_qemu
def test_a_reordered_program_runs_bit_exact_on_the_device(tmp_path: Path) -> None:
    from qemu_run_lib import run_bit_exact

    run_bit_exact(tmp_path, "branch_order", BRANCHES.read_text(), "cortex-m55", None, 1, timeout=900)
    import json

    (report,) = (tmp_path / "o").glob("*.json")
    assert json.loads(report.read_text())["op_order"]["reordered"]
