"""Our memory planner (emlkit/memory_plan.py): its placements are valid and never larger than the live bytes
allow; in-place outputs come from the firmware's registry, are planned where the call is the input's last use,
are accepted by the firmware's loader exactly when the output starts at the input, and run bit-exact on the
device; ExecuTorch's planner stays available for comparison."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from emlkit import emit, hostfw, memory_plan, program_info, verify
from emlkit.compile import make_options, to_executorch
from emlkit.errors import EXIT_INTERNAL, AotError
from emlkit.lower import cortex_m
from emlkit.targets import get_target
from toolchain import needs_qemu

ROOT = Path(__file__).resolve().parents[1]
CHAIN = ROOT / "tests" / "models" / "in_place_chain.py"
CAT_IN_PLACE = ROOT / "tests" / "models" / "cat_in_place.py"
DW_CHAIN = ROOT / "tests" / "models" / "dw_in_place_chain.py"
needs_host_fw = pytest.mark.skipif(hostfw.cmake_binary() is None, reason="needs cmake and a host C compiler")

blocks_st = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 8), st.integers(1, 40)), min_size=1, max_size=25)


def _blocks(raw: list[tuple[int, int, int]]) -> list[Any]:
    return [memory_plan._Block([k], s, s + d, 16 * n, k) for k, (s, d, n) in enumerate(raw)]


@settings(max_examples=200, deadline=None)
@given(blocks_st)
def test_placements_never_share_live_bytes_and_stay_within_bounds(raw: list[tuple[int, int, int]]) -> None:
    blocks = _blocks(raw)
    total, _, offsets = memory_plan.best_plan(blocks)
    for i, a in enumerate(blocks):
        assert offsets[i] >= 0 and offsets[i] % 16 == 0 and offsets[i] + a.size <= total
        for j in range(i):
            b = blocks[j]
            if memory_plan._overlap(a, b):
                assert offsets[i] + a.size <= offsets[j] or offsets[j] + b.size <= offsets[i], (a, b)
    live = max(sum(b.size for b in blocks if b.start <= t <= b.end) for t in range(0, 40))
    assert live <= total <= sum(b.size for b in blocks)


class _Spec:
    """A TensorSpec stand-in: what the placement reads (lifetime, aligned bytes)."""

    def __init__(self, start: int, end: int, size: int) -> None:
        self.lifetime, self.allocated_memory = [start, end], size


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6), st.integers(1, 20), st.integers(1, 20)),
                min_size=1, max_size=15), blocks_st)
def test_chains_hold_only_their_live_members_bytes(chains: list[tuple[int, int, int, int]],
                                                   raw: list[tuple[int, int, int]]) -> None:
    """Blocks of two members (an input and the output written over it, at its start or its end) among single
    tensors: no two members of different blocks that are live together share a byte."""
    blocks = _blocks(raw)
    for k, (s, d, n_in, n_out) in enumerate(chains):
        a, b = _Spec(s, s + d, 16 * n_in), _Spec(s + d, s + d + 2, 16 * n_out)
        rel = max(0, b.allocated_memory - a.allocated_memory)  # a larger output ends where its input ends
        blocks.append(memory_plan._Block([a, b], s, s + d + 2, max(a.allocated_memory, b.allocated_memory),
                                         len(raw) + k, rel={id(a): rel, id(b): 0}))
    total, _, offsets = memory_plan.best_plan(blocks)
    spans = []
    for blk, off in zip(blocks, offsets):
        for start, end, rel, size in memory_plan._members(blk):
            spans.append((blk.order, start, end, off + rel, off + rel + size))
            assert off + rel + size <= total
    for i, (bi, s1, e1, lo1, hi1) in enumerate(spans):
        for bj, s2, e2, lo2, hi2 in spans[:i]:
            if bi != bj and not (e1 < s2 or s1 > e2):
                assert hi1 <= lo2 or hi2 <= lo1


def test_best_fit_fills_the_gap_a_freed_tensor_leaves() -> None:
    # A and C live apart, B with both: largest first puts A at 0, B above it, and C back at 0.
    blocks = [memory_plan._Block(["a"], 0, 2, 64, 0), memory_plan._Block(["b"], 1, 5, 32, 1),
              memory_plan._Block(["c"], 3, 5, 64, 2)]
    total, _, offsets = memory_plan.best_plan(blocks)
    assert total == 96 and offsets[0] == offsets[2]


@needs_host_fw
def test_in_place_ops_are_the_firmware_registry_s() -> None:
    table = hostfw.in_place_ops()
    assert table[("cortex_m::quantized_add", "out")] == {0: hostfw.IN_PLACE_START, 4: hostfw.IN_PLACE_START}
    assert table[("cortex_m::quantize_per_tensor", "out")] == {0: hostfw.IN_PLACE_START}
    # Its float output is larger than its int8 input: it may only end where the input ends.
    assert table[("cortex_m::dequantize_per_tensor", "out")] == {0: hostfw.IN_PLACE_END}
    # A concat's inputs may each lie at their place in its output.
    assert table[("aten::cat", "out")] == {0: hostfw.IN_PLACE_LIST}
    # A depthwise convolution's output may start before its input, by a lead each call computes.
    assert {k: v for k, v in table.items() if "conv" in k[0]} == {
        ("cortex_m::quantized_depthwise_conv2d", "out"): {0: hostfw.IN_PLACE_AHEAD},
        ("cortex_m::quantized_depthwise_conv2d_nhwc", "out"): {0: hostfw.IN_PLACE_AHEAD}}


@needs_host_fw
def test_the_depthwise_lead_is_the_firmware_s() -> None:
    """Stride 1, dilation 1, depth multiplier 1, the output the input's size: the output may start the padding's
    rows and columns of pixels before the input (its windows read nothing earlier), further only by whole pixels;
    any other call keeps them apart."""
    def lead(inp: tuple[int, int, int, int], out: tuple[int, int, int, int], k: int, stride: int = 1, pad: int = 1,
             dil: int = 1) -> tuple[int, int] | None:
        return hostfw.depthwise_lead(hostfw.DepthwiseCall(inp, out, (k, k), (stride, stride), (pad, pad), (dil, dil)))

    assert lead((1, 25, 5, 64), (1, 25, 5, 64), 3) == ((1 * 5 + 1) * 64, 64)  # DS-CNN's layers: 384 B, not 8,000
    assert lead((1, 12, 10, 16), (1, 12, 10, 16), 5, pad=2) == ((2 * 10 + 2) * 16, 16)
    assert lead((2, 7, 7, 8), (2, 7, 7, 8), 1, pad=0) == (0, 8)  # a 1x1 window reads only the pixel it writes
    assert lead((1, 12, 10, 16), (1, 6, 5, 16), 3, stride=2) is None
    assert lead((1, 12, 10, 16), (1, 10, 8, 16), 3, pad=0) is None  # smaller output: its pixels are not the input's
    assert lead((1, 12, 10, 16), (1, 12, 10, 32), 3) is None  # depth multiplier 2
    assert lead((1, 12, 10, 16), (1, 12, 10, 16), 3, pad=2, dil=2) is None


def _chain_program(planner: str, path: Path = CHAIN) -> tuple[Any, Any]:
    ns: dict[str, Any] = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)  # noqa: S102 - our own test model
    model, x = ns["ModelUnderTest"]().eval(), ns["ModelInputs"]
    low = cortex_m.lower(model, x, [x], get_target("cortex-m55"), make_options(memory_planner=planner))
    out = low.edge.exported_program().module()(*x)
    return low, (x, [out])


def _calls(program: Any) -> list[tuple[str, list[Any]]]:
    plan = program.executorch_program.execution_plan[0]
    return [(plan.operators[i.instr_args.op_index].name, [plan.values[a].val for a in i.instr_args.args])
            for c in plan.chains for i in c.instructions if type(i.instr_args).__name__ == "KernelCall"]


def _place(t: Any) -> tuple[int, int] | None:
    a = getattr(t, "allocation_info", None)
    return None if a is None else (a.memory_id, a.memory_offset_low)


IN_PLACE_OPS = {"cortex_m::quantize_per_tensor", "cortex_m::quantized_activation", "cortex_m::quantized_add",
                "cortex_m::quantized_mul", "cortex_m::dequantize_per_tensor"}


def _over(program: Any) -> set[str]:
    """The ops of PROGRAM whose output shares a place with one of their inputs (start or end)."""
    names = set()
    for name, args in _calls(program):
        out, o = args[-1], _place(args[-1])
        for a in args[:-1]:
            p = _place(a)
            if a is out or p is None or o is None or p[0] != o[0]:
                continue
            start = p[1] == o[1]
            end = p[1] + memory_plan._tensor_bytes(a) == o[1] + memory_plan._tensor_bytes(out)
            names.add(name) if start or end else None
    return names


def _all_pairs(group: list[Any], pairs: list[Any]) -> Any:
    """memory_plan._with_pairs taking every in-place candidate (for the device tests: each kernel writes in place)."""
    blocks = memory_plan._blocks(group, pairs)
    return (blocks, *memory_plan.best_plan(blocks))


@needs_host_fw
def test_in_place_candidates_are_planned_only_where_the_firmware_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    low, case = _chain_program("emlkit")
    program = to_executorch(low, get_target("cortex-m55"), "emlkit")
    assert _over(program) <= IN_PLACE_OPS
    no = to_executorch(_chain_program("emlkit-no-in-place")[0], get_target("cortex-m55"), "emlkit-no-in-place")
    assert not _over(no)
    assert program_info.memory_plan(program)["arena_total"] <= program_info.memory_plan(no)["arena_total"]
    verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [case])), "cortex-m55")
    # Every candidate taken: each op of the registry's writes over its input, and the firmware loads it.
    monkeypatch.setattr(memory_plan, "_with_pairs", _all_pairs)
    low, case = _chain_program("emlkit")
    program = to_executorch(low, get_target("cortex-m55"), "emlkit")
    assert _over(program) == IN_PLACE_OPS
    args = next(a for n, a in _calls(program) if n == "cortex_m::dequantize_per_tensor")
    assert _place(args[0]) != _place(args[-1])  # its float output ends where the int8 input ends
    verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [case])), "cortex-m55")


def _load_damaged(program: Any, case: Any, damage: Any) -> None:
    """Bundle PROGRAM after DAMAGE(its schema program) and load it with the firmware (verify.check_device_load)."""
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.exir._serialize._program import PTEFile, serialize_pte_binary

    bundled = emit.bundle(program, [case])
    damage(program.executorch_program)
    with tempfile.TemporaryDirectory() as d:
        pte = Path(d) / "damaged.pte"
        pte.write_bytes(bytes(serialize_pte_binary(PTEFile(program.executorch_program, None, None))))
        data = emit.bpte_bytes(BundledProgram(None, bundled.method_test_suites, pte_file_path=str(pte)))
    verify.check_device_load(program, data, "cortex-m55")


def _call_args(plan: Any, pc: int) -> list[int]:
    """The value indices of instruction PC of PLAN (a schema execution plan), a kernel call."""
    return [i.instr_args.args for c in plan.chains for i in c.instructions
            if type(i.instr_args).__name__ == "KernelCall"][pc]


def _load_expecting(program: Any, case: Any, damage: Any, pc: int, refused: bool) -> None:
    """_load_damaged, and when REFUSED the loader's refusal of instruction PC's output over its argument 0."""
    if not refused:
        _load_damaged(program, case, damage)
        return
    with pytest.raises(AotError, match=f"instruction {pc} writes its output over its argument 0") as err:
        _load_damaged(program, case, damage)
    assert err.value.exit_code == EXIT_INTERNAL


@needs_host_fw
@pytest.mark.parametrize("planner, op, place, refused", [
    ("emlkit-no-in-place", "cortex_m::quantized_activation", "at input", False),  # exactly over its input
    ("emlkit-no-in-place", "cortex_m::quantized_activation", "at input + 16", True),  # over part of it
    ("emlkit-no-in-place", "cortex_m::quantized_conv2d", "at input", True),  # not an in-place op
    ("emlkit", "cortex_m::dequantize_per_tensor", "as planned", False),  # float output ending at the int8 input's end
    ("emlkit-no-in-place", "cortex_m::dequantize_per_tensor", "not at its end", True),  # writes overtake reads
])
def test_the_loader_allows_exactly_the_registry_s_in_place_outputs(planner: str, op: str, place: str,
                                                                   refused: bool) -> None:
    from executorch.exir.schema import AllocationDetails

    low, case = _chain_program(planner)
    program = to_executorch(low, get_target("cortex-m55"), planner)
    pc = next(k for k, (n, _) in enumerate(_calls(program)) if n == op)
    assert not any(n == "emlkit" for n, _ in _calls(program)[:pc])  # kernel calls only: pc is the instruction

    def damage(prog: Any) -> None:
        plan = prog.execution_plan[0]
        args = _call_args(plan, pc)
        a, o = plan.values[args[0]].val.allocation_info, plan.values[args[-1]].val.allocation_info
        a_end = a.memory_offset_low + memory_plan._tensor_bytes(plan.values[args[0]].val)
        o_bytes = memory_plan._tensor_bytes(plan.values[args[-1]].val)
        # Over the input but 16 bytes short of its end, or (no room below) starting at it: inside the arena.
        off_end = a_end - o_bytes - 16 if a_end - o_bytes - 16 >= 0 else a.memory_offset_low
        offset = {"at input": a.memory_offset_low, "at input + 16": a.memory_offset_low + 16,
                  "as planned": o.memory_offset_low, "not at its end": off_end}[place]
        plan.values[args[-1]].val.allocation_info = AllocationDetails(o.memory_id, offset, o.memory_offset_high)

    _load_expecting(program, case, damage, pc, refused)


def _cats(program: Any) -> list[tuple[list[tuple[int, int] | None], tuple[int, int] | None, list[int]]]:
    """Each aten::cat of PROGRAM: its items' places, its output's place and its items' bytes."""
    from executorch.exir.schema import TensorList

    plan = program.executorch_program.execution_plan[0]
    found = []
    for name, args in _calls(program):
        if name == "aten::cat":
            items = [plan.values[i].val for i in args[0].items] if isinstance(args[0], TensorList) else []
            found.append(([_place(t) for t in items], _place(args[-1]), [memory_plan._tensor_bytes(t) for t in items]))
    return found


@needs_host_fw
def test_a_row_concat_s_inputs_are_planned_inside_its_output() -> None:
    low, case = _chain_program("emlkit", CAT_IN_PLACE)
    program = to_executorch(low, get_target("cortex-m55"), "emlkit")
    (rows_items, rows_out, rows_bytes), (ch_items, ch_out, ch_bytes) = _cats(program)
    # Along H in NHWC: each item is one run of the output's bytes, after the items before it.
    assert rows_out is not None and rows_items == [(rows_out[0], rows_out[1]), (rows_out[0], rows_out[1] + rows_bytes[0])]
    # Along C in NHWC the items' rows interleave: copies, into an output apart from its inputs.
    assert ch_out is not None and all(p is not None and p[0] == ch_out[0] for p in ch_items)
    out_end = ch_out[1] + sum(ch_bytes)
    assert all(p[1] + n <= ch_out[1] or p[1] >= out_end for p, n in zip(ch_items, ch_bytes))  # type: ignore[index]
    no = to_executorch(_chain_program("emlkit-no-in-place", CAT_IN_PLACE)[0], get_target("cortex-m55"), "emlkit-no-in-place")
    assert program_info.memory_plan(program)["arena_total"] < program_info.memory_plan(no)["arena_total"]
    verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [case])), "cortex-m55")


@needs_host_fw
@pytest.mark.parametrize("concat, place, refused", [
    ("rows", "as planned", False),
    ("rows", "16 B later", True),    # the items 16 bytes before their places: copying one would overwrite the other
    ("rows", "16 B earlier", True),
    ("channels", "at item 0", True),  # the channel concat's first item at the output's start: its rows interleave
])
def test_the_loader_allows_concat_items_exactly_at_their_place(concat: str, place: str, refused: bool) -> None:
    from executorch.exir.schema import AllocationDetails, TensorList

    low, case = _chain_program("emlkit", CAT_IN_PLACE)
    program = to_executorch(low, get_target("cortex-m55"), "emlkit")
    cats = [k for k, (n, _) in enumerate(_calls(program)) if n == "aten::cat"]
    pc = cats[0] if concat == "rows" else cats[1]
    assert not any(n == "emlkit" for n, _ in _calls(program)[:pc])

    def damage(prog: Any) -> None:
        # The output moves (the items keep their producers' places): the cat is the first call it reaches.
        plan = prog.execution_plan[0]
        args = _call_args(plan, pc)
        items = plan.values[args[0]].val
        assert isinstance(items, TensorList)
        o = plan.values[args[-1]].val.allocation_info
        first = [plan.values[i].val.allocation_info.memory_offset_low for i in items.items]
        offset = {"as planned": o.memory_offset_low, "16 B later": o.memory_offset_low + 16,
                  "16 B earlier": o.memory_offset_low - 16, "at item 0": first[0]}[place]
        assert offset >= 0
        plan.values[args[-1]].val.allocation_info = AllocationDetails(o.memory_id, offset, o.memory_offset_high)

    _load_expecting(program, case, damage, pc, refused)


@needs_host_fw
def test_executorch_s_planner_stays_selectable() -> None:
    sizes = {}
    for planner in memory_plan.PLANNERS:
        low, case = _chain_program(planner)
        program = to_executorch(low, get_target("cortex-m55"), planner)
        verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [case])), "cortex-m55")
        sizes[planner] = program_info.memory_plan(program)["arena_total"]
        over = [n for n, args in _calls(program) if any(a is not args[-1] and _place(a) == _place(args[-1]) for a in args[:-1])]
        assert bool(over) == (planner in ("emlkit", "emlkit-graph-order")), (planner, over)
    assert sizes["emlkit"] <= sizes["emlkit-graph-order"] <= sizes["emlkit-no-in-place"] <= sizes["executorch"]


def test_an_unknown_planner_is_one_usage_line(emlkit_cli) -> None:
    p = emlkit_cli(["compile", "conv_relu", "--target", "cortex-m55", "--memory-planner", "tiny"])
    assert p.returncode == 2 and "invalid choice: 'tiny'" in p.stderr and "Traceback" not in p.stderr


@needs_host_fw
def test_executorch_s_storage_check_passes_under_debug_logging(tmp_path: Path, emlkit_cli) -> None:
    """`emlkit -v` turns on ExecuTorch's storage verifier (it runs only under debug logging): tensors sharing bytes
    share a mem_obj_id, and in-place outputs are declared as intended overlaps, so our plans pass it."""
    p = emlkit_cli(["-v", "compile", CHAIN, "--target", "cortex-m55", "-o", tmp_path])
    assert p.returncode == 0, p.stderr[-2000:]
    assert "reuses storage for" in p.stderr


def test_shared_objects_are_runs_of_overlapping_bytes() -> None:
    class S:
        def __init__(self, off: int, size: int) -> None:
            self.mem_offset, self.allocated_memory, self.mem_obj_id = off, size, None

    specs = [S(0, 16), S(8, 16), S(24, 8), S(32, 4), S(30, 1)]
    assert memory_plan._number_shared_objects(specs, 5) == 8  # the next free id
    assert [s.mem_obj_id for s in specs] == [5, 5, 6, 7, 6]  # [0, 24) overlap; [24, 32) holds the byte at 30


@needs_qemu
@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4"])
def test_in_place_kernels_run_bit_exact_on_the_device(tmp_path: Path, target: str,
                                                      monkeypatch: pytest.MonkeyPatch, emlkit_cli) -> None:
    """Every in-place op writing over its input, with the MVE (M55) and DSP (M4) kernels, matches the reference
    bit for bit; the planner's own choice (a subset) runs too."""
    from emlkit.compile import compile_model

    default = emlkit_cli(["run", CHAIN, "--target", target, "-o", tmp_path / "default"])
    assert default.returncode == 0 and "PASS" in default.stdout, (default.stdout + default.stderr)[-2000:]
    monkeypatch.setattr(memory_plan, "_with_pairs", _all_pairs)
    res = compile_model(str(CHAIN), target, tmp_path / "all")
    p = emlkit_cli(["run", res.bpte, "--target", target, "-o", tmp_path / "run"])
    assert p.returncode == 0 and "PASS" in p.stdout, (p.stdout + p.stderr)[-2000:]
    from executorch.exir._serialize._program import deserialize_pte_binary

    class _Prog:  # _calls reads program.executorch_program
        executorch_program = deserialize_pte_binary(res.pte.read_bytes()).program

    assert _over(_Prog()) == IN_PLACE_OPS


@needs_qemu  # the concat is the same C copy on every core: the M4 run is a slow case
@pytest.mark.parametrize("target", ["cortex-m55", pytest.param("cortex-m4", marks=pytest.mark.slow)])
def test_a_concat_in_place_runs_bit_exact_on_the_device(tmp_path: Path, target: str, emlkit_cli) -> None:
    """The row concat's inputs written by their producers straight into its output (the concat copies nothing
    for them) and the channel concat's copies match the reference bit for bit."""
    p = emlkit_cli(["run", CAT_IN_PLACE, "--target", target, "-o", tmp_path])
    assert p.returncode == 0 and "PASS" in p.stdout, (p.stdout + p.stderr)[-2000:]
    from executorch.exir._serialize._program import deserialize_pte_binary

    class _Prog:
        executorch_program = deserialize_pte_binary(next(tmp_path.glob("*.pte")).read_bytes()).program

    (items, out, nbytes), _ = _cats(_Prog())
    assert out is not None and items[1] == (out[0], out[1] + nbytes[0])


def _depthwise_places(program: Any) -> list[tuple[int, int, int, int]]:
    """(input offset, output offset, input bytes, output bytes) of each depthwise call of PROGRAM (one arena)."""
    found = []
    for name, args in _calls(program):
        if name == "cortex_m::quantized_depthwise_conv2d":
            (mi, i), (mo, o) = _place(args[0]), _place(args[-1])  # type: ignore[misc]
            assert mi == mo
            found.append((i, o, memory_plan._tensor_bytes(args[0]), memory_plan._tensor_bytes(args[-1])))
    return found


@needs_host_fw
def test_depthwise_outputs_are_planned_a_lead_before_their_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    low, case = _chain_program("emlkit", DW_CHAIN)
    program = to_executorch(low, get_target("cortex-m55"), "emlkit")
    no = to_executorch(_chain_program("emlkit-no-in-place", DW_CHAIN)[0], get_target("cortex-m55"), "emlkit-no-in-place")
    assert program_info.memory_plan(program)["arena_total"] < program_info.memory_plan(no)["arena_total"]
    # In place only where that makes the arena smaller (it costs the MVE kernel instructions), each at its lead.
    leads = [i - o if o < i < o + m else None for i, o, _, m in _depthwise_places(program)]
    assert any(leads) and all(d in (None, want) for d, want in zip(leads, (432, 352, None))), leads
    verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [case])), "cortex-m55")
    # Every candidate taken.
    monkeypatch.setattr(memory_plan, "_with_pairs", _all_pairs)
    low, case = _chain_program("emlkit", DW_CHAIN)
    program = to_executorch(low, get_target("cortex-m55"), "emlkit")
    (i3, o3, n3, _), (i5, o5, n5, _), (i2, o2, n2, m2) = _depthwise_places(program)
    # 3x3 over 12x10x36: a lead of 11 pixels (396 B) and one more for the arena's 16-byte alignment.
    assert i3 - o3 == 432 and n3 == 12 * 10 * 36
    assert i5 - o5 == (2 * 10 + 2) * 16 and n5 == 12 * 10 * 16  # 5x5: two rows and two pixels
    assert i2 + n2 <= o2 or o2 + m2 <= i2  # stride 2: apart
    verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [case])), "cortex-m55")


@needs_host_fw
@pytest.mark.parametrize("move, refused", [
    (0, None),  # as planned: the lead and a whole pixel more
    (36, None),  # exactly the lead
    (37, "395 bytes before its argument 0, over it: the kernel needs it to start 396 bytes"),  # 1 byte short
    (1, "431 bytes before"),  # a part of a pixel more than the lead: channels would land on other channels
])
def test_the_loader_holds_a_depthwise_output_to_its_lead(move: int, refused: str | None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The 3x3 over 12x10x36 (lead 396 B), its output moved by MOVE bytes from its planned place (432 B before
    its input)."""
    from executorch.exir.schema import AllocationDetails

    monkeypatch.setattr(memory_plan, "_with_pairs", _all_pairs)
    low, case = _chain_program("emlkit", DW_CHAIN)
    program = to_executorch(low, get_target("cortex-m55"), "emlkit")
    pcs = [k for k, (n, _) in enumerate(_calls(program)) if n == "cortex_m::quantized_depthwise_conv2d"]
    pc = pcs[0]
    assert not any(n == "emlkit" for n, _ in _calls(program)[:pc])

    def damage(prog: Any) -> None:
        plan = prog.execution_plan[0]
        args = _call_args(plan, pc)
        o = plan.values[args[-1]].val.allocation_info
        assert o.memory_offset_low + move >= 0
        plan.values[args[-1]].val.allocation_info = AllocationDetails(o.memory_id, o.memory_offset_low + move,
                                                                      o.memory_offset_high)

    if refused is None:
        _load_damaged(program, case, damage)
        return
    with pytest.raises(AotError, match=f"instruction {pc} writes its output {refused}") as err:
        _load_damaged(program, case, damage)
    assert err.value.exit_code == EXIT_INTERNAL


@needs_qemu
@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4", "cortex-m3"])
def test_depthwise_in_place_runs_bit_exact_on_the_device(tmp_path: Path, target: str,
                                                         monkeypatch: pytest.MonkeyPatch, emlkit_cli) -> None:
    """Each stride-1 depthwise writing its output a lead before its input, with the MVE (M55), DSP (M4) and
    portable (M3: the 3x3 window pairs) kernels, matches the reference bit for bit."""
    from emlkit.compile import compile_model
    from executorch.exir._serialize._program import deserialize_pte_binary

    monkeypatch.setattr(memory_plan, "_with_pairs", _all_pairs)
    res = compile_model(str(DW_CHAIN), target, tmp_path / "all")

    class _Prog:  # _calls reads program.executorch_program
        executorch_program = deserialize_pte_binary(res.pte.read_bytes()).program

    places = _depthwise_places(_Prog())
    assert [i - o for i, o, _, _ in places[:2]] == [432, 352]
    p = emlkit_cli(["run", res.bpte, "--target", target, "-o", tmp_path / "run"])
    assert p.returncode == 0 and "PASS" in p.stdout, (p.stdout + p.stderr)[-2000:]
