"""Firmware runtime + host runner: sample programs compiled on the fly run to
a pass, and corrupt or unsupported programs end in exit 2 with a one-line
JSON error, with no sanitizer report under the ASan+UBSan build."""

from __future__ import annotations

import json
import random
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from emlkit.deploy.result import ResultError, parse_result
from emlkit.deploy.sim_host import run_host, save_outputs_npy
from emlkit.hostfw import build_host_runner

SANITIZER_MARKS = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "UndefinedBehaviorSanitizer")


@dataclass
class Programs:
    dir: Path
    float_model: Path       # many aten ops, two test cases, constants in a segment
    float_inline: Path      # same program with constants inline in Program.constant_buffer
    channels_last: Path     # input and output in dim order (0, 2, 3, 1)
    wrong_expected: Path    # expected output off by 0.25
    unknown_op: Path        # aten::sin, which has no kernel
    delegated: Path         # a BackendWithCompilerDemo delegate
    pte: Path               # a plain .pte, not bundled
    arena_bytes: list[int]  # float_model's non_const_buffer_sizes
    expected: list[np.ndarray]  # float_model's expected outputs, case 0


def _bundle(et_program, model, cases, *, inline_constants: bool = False, offset: float = 0.0) -> bytes:
    import torch
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import (
        _bundled_program_schema_to_flatbuffer,
        serialize_from_bundled_program_to_flatbuffer,
    )

    tcs = []
    with torch.no_grad():
        for inputs in cases:
            outs = model(*inputs)
            outs = outs if isinstance(outs, tuple) else (outs,)
            tcs.append(MethodTestCase(inputs=inputs, expected_outputs=tuple(o + offset for o in outs)))
    bp = BundledProgram(et_program, [MethodTestSuite(method_name="forward", test_cases=tcs)])
    if not inline_constants:
        return serialize_from_bundled_program_to_flatbuffer(bp)
    # ExecuTorch's writer always moves constants to a segment; rewrite the
    # program with its own flatbuffer packer to get the inline form.
    from executorch.exir._serialize._flatbuffer_program import _program_to_flatbuffer
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(et_program.buffer).program
    assert len(program.constant_buffer) > 1
    schema = bp.serialize_to_schema()
    schema.program = _program_to_flatbuffer(program).data
    return _bundled_program_schema_to_flatbuffer(schema)


@pytest.fixture(scope="session")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Programs:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
    from executorch.exir._serialize._program import deserialize_pte_binary

    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("programs")

    class Many(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 3))

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            a = x + y * 2.0 - 1.0
            a = a.permute(0, 2, 1) * self.w
            b = torch.cat([a, a], dim=1)[:, 1:7:2, :]
            c = torch.relu(b).unsqueeze(0).squeeze(0)
            e = torch.softmax(c, dim=-1) + F.hardtanh(c) + torch.clamp(c, -0.5, 0.5) + torch.sigmoid(c) / 3.0
            return e.mean(dim=-1, keepdim=True), e.reshape(-1)

    many = Many().eval()
    cases = [(torch.randn(1, 3, 4), torch.randn(1, 3, 4)) for _ in range(2)]
    et = to_edge(torch.export.export(many, cases[0], strict=True)).to_executorch(ExecutorchBackendConfig())
    p = Programs(d, d / "float.bpte", d / "float_inline.bpte", d / "cl.bpte", d / "wrong.bpte", d / "sin.bpte",
                 d / "delegate.bpte", d / "float.pte", [], [])
    p.float_model.write_bytes(_bundle(et, many, cases))
    p.float_inline.write_bytes(_bundle(et, many, cases, inline_constants=True))
    p.wrong_expected.write_bytes(_bundle(et, many, cases[:1], offset=0.25))
    p.pte.write_bytes(et.buffer)
    prog = deserialize_pte_binary(et.buffer).program
    p.arena_bytes = list(prog.execution_plan[0].non_const_buffer_sizes)
    with torch.no_grad():
        p.expected = [o.numpy() for o in many(*cases[0])]

    class CL(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2.0 + 1.0

    xc = (torch.randn(1, 3, 4, 5).to(memory_format=torch.channels_last),)
    et = to_edge(torch.export.export(CL(), xc, strict=True)).to_executorch()
    p.channels_last.write_bytes(_bundle(et, CL(), [xc]))

    class Sin(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sin(x)

    xs = (torch.randn(4),)
    et = to_edge(torch.export.export(Sin(), xs, strict=True)).to_executorch()
    p.unknown_op.write_bytes(_bundle(et, Sin(), [xs]))

    from executorch.exir.backend.test.op_partitioner_demo import AddMulPartitionerDemo

    class AM(nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x + y * y

    xa = (torch.randn(2, 2), torch.randn(2, 2))
    et = to_edge_transform_and_lower(torch.export.export(AM(), xa, strict=True),
                                     partitioner=[AddMulPartitionerDemo()]).to_executorch()
    p.delegated.write_bytes(_bundle(et, AM(), [xa]))
    return p


@pytest.fixture(scope="session")
def asan_runner() -> Path:
    return build_host_runner("Debug", sanitize=True)


def _run_raw(runner: Path, model: Path, *extra: str) -> tuple[int, dict, str]:
    p = subprocess.run([str(runner), str(model), *extra], capture_output=True, text=True, timeout=120)
    for mark in SANITIZER_MARKS:
        assert mark not in p.stderr, p.stderr[-3000:]
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stdout  # exactly one result line
    return p.returncode, json.loads(lines[0]), p.stderr


# ---- programs that run ----

def test_float_program_passes(programs: Programs) -> None:
    r = run_host(programs.float_model)
    assert r.status == "pass", r.raw
    assert r.cases == 2 and len(r.outputs) == 2
    assert all(o.max_abs is not None and o.max_abs < 1e-5 and o.max_steps is None for o in r.outputs)
    assert r.arena_bytes == programs.arena_bytes
    assert r.unit == "ns" and r.total and r.total > 0
    ops = {o.op: o for o in r.per_op}
    for name in ("aten::permute_copy", "aten::cat", "aten::slice_copy", "aten::_softmax", "aten::mean",
                 "aten::hardtanh", "aten::clamp", "aten::sigmoid", "aten::view_copy"):
        assert ops[name].calls == 2, name  # once per test case; the warm-up is not counted
    assert sum(o.count for o in r.per_op) <= r.total
    assert r.stack_bytes and 0 < r.stack_bytes < 1 << 20


def test_inline_and_segment_constants_agree(programs: Programs) -> None:
    seg, inline = programs.float_model.read_bytes(), programs.float_inline.read_bytes()
    # the segment form has the eh00 extended header inside the bundle, the inline one has not
    assert b"eh00" in seg and b"eh00" not in inline
    a, b = run_host(programs.float_model), run_host(programs.float_inline)
    assert a.status == b.status == "pass"
    assert [o.max_abs for o in a.outputs] == [o.max_abs for o in b.outputs]


def test_channels_last_input(programs: Programs, asan_runner: Path) -> None:
    rc, res, _ = _run_raw(asan_runner, programs.channels_last)
    assert (rc, res["status"]) == (0, "pass"), res
    assert res["outputs"][0]["max_abs"] < 1e-6


def test_mismatch_is_reported(programs: Programs) -> None:
    r = run_host(programs.wrong_expected)
    assert r.status == "fail"
    assert all(abs(o.max_abs - 0.25) < 1e-5 for o in r.outputs)
    assert r.outputs[0].passed is False


def test_saved_outputs_match_torch(programs: Programs, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    assert run_host(programs.float_model, save_outputs_dir=raw).status == "pass"
    paths = save_outputs_npy(raw, programs.float_model, tmp_path / "npy")
    assert len(paths) == 2
    for path, want in zip(paths, programs.expected):
        got = np.load(path)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_sanitized_build_runs_clean(programs: Programs, asan_runner: Path) -> None:
    for model in (programs.float_model, programs.float_inline):
        rc, res, _ = _run_raw(asan_runner, model)
        assert (rc, res["status"]) == (0, "pass")


# ---- clear errors ----

def test_arena_too_small_names_exact_bytes(programs: Programs, asan_runner: Path) -> None:
    need = programs.arena_bytes[1]
    rc, res, _ = _run_raw(asan_runner, programs.float_model, "--regions", str(need - 1))
    assert rc == 2 and res["status"] == "error"
    assert f"cannot place arena 1 ({need} bytes)" in res["error"]
    assert f"host0 {need - 1}" in res["error"]
    # enough for the arena but not for the runtime's tables: says how many bytes those need
    rc, res, _ = _run_raw(asan_runner, programs.float_model, "--regions", str(need + 16))
    assert rc == 2 and "cannot place runtime memory" in res["error"]


def test_unknown_op_names_it(programs: Programs, asan_runner: Path) -> None:
    rc, res, _ = _run_raw(asan_runner, programs.unknown_op)
    assert rc == 2 and "unknown operator aten::sin.out" in res["error"]


def test_missing_backend_names_it(programs: Programs, asan_runner: Path) -> None:
    rc, res, _ = _run_raw(asan_runner, programs.delegated)
    assert rc == 2 and "'BackendWithCompilerDemo'" in res["error"]


def test_plain_pte_is_refused(programs: Programs, asan_runner: Path) -> None:
    rc, res, _ = _run_raw(asan_runner, programs.pte)
    assert rc == 2 and "not a bundled program" in res["error"]


def test_misaligned_tensor_is_refused(asan_runner: Path) -> None:
    # Found by scripts/bench_fuzz.py: a tensor planned at an odd offset made a
    # float kernel load misaligned data (a fault on Cortex-M).
    model = Path(__file__).parent / "data" / "runtime_misaligned_tensor.bpte"
    rc, res, _ = _run_raw(asan_runner, model)
    assert rc == 2 and "not 4-byte aligned" in res["error"]


def test_invalid_operator_argument_is_refused_at_load(asan_runner: Path, tmp_path: Path) -> None:
    """Operator arguments are checked once, when the method is built (the adapters' prepare step), not
    per inference: a program whose aten::_softmax gets dim 5 for a rank-2 tensor is refused at load,
    before any instruction runs, with the one-line "instruction N (op.overload): reason" message."""
    import torch
    import torch.nn as nn
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import _bundled_program_schema_to_flatbuffer
    from executorch.exir import to_edge
    from executorch.exir._serialize._flatbuffer_program import _program_to_flatbuffer
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import Int, KernelCall

    class SM(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(x, dim=-1)

    x = (torch.randn(2, 5),)
    et = to_edge(torch.export.export(SM(), x, strict=True)).to_executorch()
    with torch.no_grad():
        bp = BundledProgram(et, [MethodTestSuite(method_name="forward",
                                                 test_cases=[MethodTestCase(inputs=x, expected_outputs=(SM()(*x),))])])
    schema = bp.serialize_to_schema()
    good = tmp_path / "good.bpte"
    good.write_bytes(_bundled_program_schema_to_flatbuffer(schema))
    rc, res, _ = _run_raw(asan_runner, good)
    assert (rc, res["status"]) == (0, "pass"), res

    program = deserialize_pte_binary(et.buffer).program
    plan = program.execution_plan[0]
    calls = [(n, ins.instr_args) for n, ins in enumerate(plan.chains[0].instructions)
             if isinstance(ins.instr_args, KernelCall) and plan.operators[ins.instr_args.op_index].name == "aten::_softmax"]
    assert len(calls) == 1
    n, call = calls[0]
    plan.values[call.args[1]].val = Int(5)  # dim 5 of a rank-2 input
    schema.program = _program_to_flatbuffer(program).data
    bad = tmp_path / "bad.bpte"
    bad.write_bytes(_bundled_program_schema_to_flatbuffer(schema))
    rc, res, _ = _run_raw(asan_runner, bad)
    assert rc == 2 and res["status"] == "error" and res["stage"] == "load", res
    assert res["error"] == f"instruction {n} (aten::_softmax.out): aten::_softmax: dim 5 out of range for rank 2", res
    assert res["code"] == "invalid_argument", res


def _inner_offset(data: bytes) -> int:
    i = data.find(b"ET12")
    assert i >= 4
    return i - 4


def _corruptions(data: bytes) -> dict[str, bytes]:
    inner = _inner_offset(data)
    eh = inner + 8
    assert data[eh:eh + 4] == b"eh00"
    out = {
        "empty": b"",
        "wrong identifier": data[:4] + b"XX08" + data[8:],
        "inner wrong identifier": data[:inner + 4] + b"ET99" + data[inner + 8:],
        "root offset outside": struct.pack("<I", len(data) + 64) + data[4:],
        "inner root offset outside": data[:inner] + struct.pack("<I", 0xFFFFFFF0) + data[inner + 4:],
        "program size beyond file": data[:eh + 8] + struct.pack("<Q", 1 << 40) + data[eh + 16:],
        "segment base beyond file": data[:eh + 16] + struct.pack("<Q", 1 << 40) + data[eh + 24:],
        "header length huge": data[:eh + 4] + struct.pack("<I", 0xFFFFFFFF) + data[eh + 8:],
    }
    for frac in (0.02, 0.25, 0.5, 0.75, 0.98):
        out[f"truncated at {frac}"] = data[: int(len(data) * frac)]
    return out


def test_corrupt_programs_fail_cleanly(programs: Programs, asan_runner: Path, tmp_path: Path) -> None:
    data = programs.float_model.read_bytes()
    for name, bad in _corruptions(data).items():
        f = tmp_path / "bad.bpte"
        f.write_bytes(bad)
        rc, res, _ = _run_raw(asan_runner, f)
        assert rc == 2 and res["status"] == "error", (name, res)
        assert res["error"], name


def test_random_byte_flips_never_crash(programs: Programs, asan_runner: Path, tmp_path: Path) -> None:
    # Flips may leave a runnable program (pass/fail) or break it (error),
    # but never crash, hang or trip a sanitizer.
    data = bytearray(programs.float_inline.read_bytes())
    rng = random.Random(1234)
    seen = set()
    for i in range(40):
        bad = bytearray(data)
        for _ in range(rng.choice((1, 2, 8))):
            pos = rng.randrange(len(bad))
            bad[pos] ^= 1 << rng.randrange(8)
        f = tmp_path / f"flip{i}.bpte"
        f.write_bytes(bytes(bad))
        rc, res, _ = _run_raw(asan_runner, f)
        assert {0: "pass", 1: "fail", 2: "error"}[rc] == res["status"]
        seen.add(res["status"])
    assert "error" in seen


def test_fuzzer_findings_are_refused(asan_runner: Path) -> None:
    # Inputs libFuzzer once crashed the loader with (kept in tests/data/fuzz_crashes, also seeds): each
    # must now end as one clean error line. loader_slice_copy_overlap: a slice_copy planned with its
    # output overlapping its input (memcpy over overlapping ranges).
    crashes = sorted((Path(__file__).parent / "data" / "fuzz_crashes").glob("loader_*"))
    assert crashes
    for f in crashes:
        rc, res, _ = _run_raw(asan_runner, f)
        assert rc == 2 and res["status"] == "error", (f.name, res)
    rc, res, _ = _run_raw(asan_runner, crashes[0])
    assert "writes its output over its argument" in res["error"], res


# ---- result line parsing ----

def test_parse_result_line() -> None:
    r = parse_result('noise\n{"status": "pass", "cases": 1, "outputs": [{"max_abs": 0.0, "max_steps": 0}], '
                     '"instructions": 1234, "unit": "instructions", "per_op": [{"op": "a", "calls": 2, "count": 7}], '
                     '"arena_bytes": [0, 16], "stack_bytes": 100}\n')
    assert r.passed and r.total == 1234 and r.unit == "instructions" and r.outputs[0].max_steps == 0
    assert r.per_op[0].count == 7 and r.arena_bytes == [0, 16] and r.stack_bytes == 100
    e = parse_result('{"status": "error", "error": "bad"}')
    assert e.status == "error" and e.error == "bad"
    with pytest.raises(ResultError, match="no JSON result line"):
        parse_result("Segmentation fault\n")
    with pytest.raises(ResultError, match="status"):
        parse_result('{"status": "maybe"}')


# ---- quantized zoo programs (cortex_m kernels), exact expected outputs ----

@pytest.mark.slow
@pytest.mark.parametrize("model", ["add", "conv_relu", "mlp", "softmax"])
def test_quantized_zoo_model_matches_exactly(model: str, compiled, asan_runner: Path) -> None:
    res = compiled(model, "cortex-m55")
    rc, line, _ = _run_raw(asan_runner, res.bpte)
    assert (rc, line["status"]) == (0, "pass"), line
    assert all(o["max_steps"] == 0 for o in line["outputs"]), line["outputs"]
    r = run_host(res.bpte)  # Release build agrees
    assert r.status == "pass" and [o.max_steps for o in r.outputs] == [0] * len(r.outputs)
    assert any(o.op.startswith("cortex_m::quantized") or o.op == "cortex_m::softmax" for o in r.per_op)
    assert all(o.calls > 0 for o in r.per_op)


def test_block_copies_in_every_layout(tmp_path: Path, asan_runner: Path) -> None:
    """cat, slice (with steps) and layout copies on contiguous and channels-last tensors, run under ASan:
    the block-copy path (whole contiguous runs) and the element path agree with torch exactly."""
    import torch
    import torch.nn as nn
    from executorch.exir import ExecutorchBackendConfig, to_edge

    class Moves(nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
            c1 = torch.cat([x, y, x], dim=1)            # channels: a contiguous run per pixel (channels-last)
            c3 = torch.cat([x, y], dim=3)               # width
            s1 = c1[:, 2:9:3, 1:, :]                    # strided channels
            s2 = c3[:, :, ::2, 3:11]                    # strided rows, a window of columns
            p = c1.permute(0, 2, 3, 1).contiguous()     # layout change: no common run
            return c1 * 1.0, c3 + 0.0, s1 * 1.0, s2 + 0.0, p * 1.0

    for fmt in (torch.contiguous_format, torch.channels_last):
        xs = (torch.randn(1, 4, 5, 6).to(memory_format=fmt), torch.randn(1, 4, 5, 6).to(memory_format=fmt))
        et = to_edge(torch.export.export(Moves(), xs, strict=True)).to_executorch(ExecutorchBackendConfig())
        f = tmp_path / f"moves_{'cl' if fmt is torch.channels_last else 'c'}.bpte"
        f.write_bytes(_bundle(et, Moves(), [xs]))
        rc, res, err = _run_raw(asan_runner, f)
        assert rc == 0 and res["status"] == "pass", (res, err[-1500:])
        r = run_host(f)
        assert r.status == "pass" and all(o.max_abs == 0 for o in r.outputs), r.raw
