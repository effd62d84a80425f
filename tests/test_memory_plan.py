"""Our memory planner (emlkit/memory_plan.py): its placements are valid and never larger than the live bytes
allow; in-place outputs come from the firmware's registry, are planned where the call is the input's last use,
are accepted by the firmware's loader exactly when the output starts at the input, and run bit-exact on the
device; ExecuTorch's planner stays available for comparison."""

from __future__ import annotations

import subprocess
import sys
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


def test_best_fit_fills_the_gap_a_freed_tensor_leaves() -> None:
    # A and C live apart, B with both: largest first puts A at 0, B above it, and C back at 0.
    blocks = [memory_plan._Block(["a"], 0, 2, 64, 0), memory_plan._Block(["b"], 1, 5, 32, 1),
              memory_plan._Block(["c"], 3, 5, 64, 2)]
    total, _, offsets = memory_plan.best_plan(blocks)
    assert total == 96 and offsets[0] == offsets[2]


@needs_host_fw
def test_in_place_ops_are_the_firmware_registry_s() -> None:
    table = hostfw.in_place_ops()
    assert table[("cortex_m::quantized_add", "out")] == frozenset({0, 4})
    assert table[("cortex_m::quantize_per_tensor", "out")] == frozenset({0})
    assert ("cortex_m::dequantize_per_tensor", "out") not in table  # its output is larger than its input
    assert not any("conv" in name for name, _ in table)


def _chain_program(planner: str) -> tuple[Any, Any]:
    ns: dict[str, Any] = {}
    exec(compile(CHAIN.read_text(), str(CHAIN), "exec"), ns)  # noqa: S102 - our own test model
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


@needs_host_fw
def test_in_place_outputs_start_at_their_input_and_load() -> None:
    low, case = _chain_program("emlkit")
    program = to_executorch(low, get_target("cortex-m55"), "emlkit")
    over = {name for name, args in _calls(program) if any(a is not args[-1] and _place(a) == _place(args[-1]) for a in args[:-1])}
    assert {"cortex_m::quantize_per_tensor", "cortex_m::quantized_activation", "cortex_m::quantized_add",
            "cortex_m::quantized_mul"} <= over
    assert all(hostfw.in_place_ops().get((n, "out")) for n in over)
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


@needs_host_fw
@pytest.mark.parametrize("op, shift, refused", [
    ("cortex_m::quantized_activation", 0, False),   # exactly over its input: allowed
    ("cortex_m::quantized_activation", 16, True),   # over part of its input: its kernel would read written bytes
    ("cortex_m::quantized_conv2d", 0, True),        # not an in-place op in the registry
])
def test_the_loader_allows_exactly_the_registry_s_in_place_outputs(op: str, shift: int, refused: bool) -> None:
    from executorch.exir.schema import AllocationDetails

    low, case = _chain_program("emlkit-no-in-place")
    program = to_executorch(low, get_target("cortex-m55"), "emlkit-no-in-place")

    def damage(prog: Any) -> None:
        plan = prog.execution_plan[0]
        args = next(i.instr_args.args for c in plan.chains for i in c.instructions
                    if type(i.instr_args).__name__ == "KernelCall" and plan.operators[i.instr_args.op_index].name == op)
        a = plan.values[args[0]].val.allocation_info
        plan.values[args[-1]].val.allocation_info = AllocationDetails(a.memory_id, a.memory_offset_low + shift,
                                                                      a.memory_offset_high)

    if not refused:
        _load_damaged(program, case, damage)
        return
    with pytest.raises(AotError, match="writes its output over its argument 0") as err:
        _load_damaged(program, case, damage)
    assert err.value.exit_code == EXIT_INTERNAL


@needs_host_fw
def test_executorch_s_planner_stays_selectable() -> None:
    sizes = {}
    for planner in memory_plan.PLANNERS:
        low, case = _chain_program(planner)
        program = to_executorch(low, get_target("cortex-m55"), planner)
        verify.check_device_load(program, emit.bpte_bytes(emit.bundle(program, [case])), "cortex-m55")
        sizes[planner] = program_info.memory_plan(program)["arena_total"]
        over = [n for n, args in _calls(program) if any(a is not args[-1] and _place(a) == _place(args[-1]) for a in args[:-1])]
        assert bool(over) == (planner == "emlkit"), (planner, over)
    assert sizes["emlkit"] <= sizes["emlkit-no-in-place"] <= sizes["executorch"]


def test_an_unknown_planner_is_one_usage_line() -> None:
    p = subprocess.run([sys.executable, "-m", "emlkit", "compile", "conv_relu", "--target", "cortex-m55",
                        "--memory-planner", "tiny"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "invalid choice: 'tiny'" in p.stderr and "Traceback" not in p.stderr


@needs_qemu
@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4"])
def test_in_place_chain_runs_bit_exact_on_the_device(tmp_path: Path, target: str) -> None:
    """The MVE (M55) and DSP (M4) kernels write over their inputs and still match the reference bit for bit."""
    p = subprocess.run([sys.executable, "-m", "emlkit", "run", str(CHAIN), "--target", target, "-o", str(tmp_path)],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-2000:]
    assert "PASS" in p.stdout
