"""The C API (firmware/include/emlkit.h) and the firmware as a CMake package, on the host:
firmware/lib built and installed, then used by tests/api/api_check.c through find_package(emlkit) and,
separately, through add_subdirectory. The program's outputs must equal the bundled expected outputs bit
for bit, the tensor queries must match the program, every misuse must come back as a status, and the
ETDump the library writes must be readable by ExecuTorch's Inspector."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from emlkit.hostfw import cmake_binary
from emlkit.deploy.program_io import bundled_case

REPO = Path(__file__).resolve().parents[1]
API_TEST = REPO / "tests" / "api"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(cmake_binary() is None, reason="needs cmake")]


def _cmake(*args: str) -> None:
    r = subprocess.run([cmake_binary() or "cmake", *args], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.fixture(scope="module")
def consumers(tmp_path_factory) -> dict[str, Path]:
    """api_check built against an installed emlkit (find_package) and against the sources (add_subdirectory)."""
    root = tmp_path_factory.mktemp("api")
    _cmake("-S", str(REPO / "firmware" / "lib"), "-B", str(root / "lib"), "-DCMAKE_BUILD_TYPE=Release")
    _cmake("--build", str(root / "lib"), "-j", "2")
    _cmake("--install", str(root / "lib"), "--prefix", str(root / "prefix"))
    assert (root / "prefix" / "include" / "emlkit.h").is_file()
    assert (root / "prefix" / "lib" / "cmake" / "emlkit" / "emlkitConfig.cmake").is_file()
    out = {}
    for how, extra in (("find_package", f"-DCMAKE_PREFIX_PATH={root / 'prefix'}"),
                       ("add_subdirectory", f"-DEMLKIT_SOURCE={REPO / 'firmware' / 'lib'}")):
        _cmake("-S", str(API_TEST), "-B", str(root / how), "-DCMAKE_BUILD_TYPE=Release", extra)
        _cmake("--build", str(root / how), "-j", "2")
        out[how] = root / how / "api_check"
    return out


def _run(exe: Path, cres, work: Path) -> tuple[dict, list[bytes]]:
    case = bundled_case(cres.bpte.read_bytes())
    work.mkdir(parents=True, exist_ok=True)
    pte = work / "model.pte"
    pte.write_bytes(case.program)
    ins = []
    for i, t in enumerate(case.inputs):
        p = work / f"input_{i}.bin"
        p.write_bytes(t.data)
        ins.append(str(p))
    r = subprocess.run([str(exe), str(pte), str(1 << 22), str(work), str(cres.bpte), *ins], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout), [t.data for t in case.expected]


def _quant_args(cres) -> tuple[tuple[float, int], tuple[float, int]]:
    """(scale, zero point) of the program's first quantize and last dequantize, read from the .pte."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    plan = deserialize_pte_binary(cres.pte.read_bytes()).program.execution_plan[0]
    calls = [i.instr_args for c in plan.chains for i in c.instructions if hasattr(i.instr_args, "op_index")]

    def args(call) -> tuple[float, int]:
        return float(plan.values[call.args[1]].val.double_val), int(plan.values[call.args[2]].val.int_val)

    q = next(c for c in calls if plan.operators[c.op_index].name.endswith("::quantize_per_tensor"))
    dq = [c for c in calls if plan.operators[c.op_index].name.endswith("dequantize_per_tensor")][-1]
    return args(q), args(dq)


@pytest.mark.parametrize("how", ["find_package", "add_subdirectory"])
def test_api_runs_bit_exact_and_reports_the_tensors(how: str, consumers, compiled, tmp_path: Path) -> None:
    cres = compiled("conv_relu", "cortex-m55")
    got, expected = _run(consumers[how], cres, tmp_path)
    assert [(tmp_path / f"output_{i}.bin").read_bytes() for i in range(len(expected))] == expected

    (qs, qz), (ds, dz) = _quant_args(cres)
    (inp,), (out,) = got["inputs"], got["outputs"]
    assert inp["dtype"] == 6 and inp["shape"] == [1, 3, 16, 16] and inp["dim_order"] == [0, 2, 3, 1]
    assert inp["nbytes"] == 3 * 16 * 16 * 4 and inp["quantized"] and (inp["scale"], inp["zero_point"]) == (qs, qz)
    assert out["shape"] == [1, 32, 8, 8] and out["quantized"] and (out["scale"], out["zero_point"]) == (ds, dz)
    assert (ds, dz) == (cres.report["output_qparams"][0]["scale"], cres.report["output_qparams"][0]["zero_point"])

    c = got["checks"]
    assert (c["before_init"], c["empty_config"], c["before_load"]) == ("state", "invalid_argument", "state")
    assert c["tiny_memory"] == "memory" and c["tiny_memory_msg"].startswith("cannot place arena 1 (")
    assert f"program needs arenas [{cres.report['memory']['arena_total']}]" in c["tiny_memory_msg"]
    assert c["tiny_memory_msg"].endswith("regions: memory[0] 256 (256 free)")
    assert (c["corrupt"], c["wrong_size"], c["no_such_input"], c["no_such_output"]) == (
        "invalid_program", "invalid_argument", "invalid_argument", "invalid_argument")
    assert got["arena_bytes"] == cres.report["memory"]["arena_total"] and got["profile_runs"] == 2
    # two runs: every operator's calls are twice its kernel calls in the program
    assert {p["name"]: p["calls"] for p in got["profile"]} == {k: 2 * v for k, v in cres.report["ops"].items()}
    assert not any(p["delegate"] for p in got["profile"])


def test_api_runs_the_bundled_test_cases(consumers, compiled, tmp_path: Path) -> None:
    """eml_load_bundled and the test-case calls: every case passes bit-exact, the plan is the compiler's, every
    call's output of the first run is captured, and misuse comes back as a status."""
    from emlkit.etdump import inspect_etdump

    cres = compiled("conv_relu", "cortex-m55")
    got, _ = _run(consumers["find_package"], cres, tmp_path)
    b = got["bundle"]
    assert got["checks"]["no_cases"] == "state"
    assert b["cases"] >= 1 and b["diffs"] == [{"max_steps": 0, "pass": True}] * b["cases"]
    assert sum(b["plan_arenas"]) == cres.report["memory"]["arena_total"] and b["runtime_bytes"] > 0
    assert (b["few_diffs"], b["no_such_case"], b["huge"]) == ("invalid_argument", "invalid_argument", "memory")
    assert b["huge_msg"].startswith(f"cannot place a huge block ({1 << 22} bytes): program needs arenas [")
    assert b["operators"] > 50 and b["debug_missed"] == 0
    debug = (tmp_path / "debug.bin").read_bytes()
    assert len(debug) == b["debug_bytes"] > 0
    p = inspect_etdump((tmp_path / "bundle_etdump.etdp").read_bytes(), cres.pte.with_suffix(".etrecord"))
    assert p.runs == b["cases"] and all(r.calls == b["cases"] for r in p.rows)


def test_api_resets_a_streaming_program_mid_sequence(consumers, tmp_path: Path) -> None:
    """A --streaming-state program (tests/test_lstm_streaming.py: an LSTM and a GRU over one frame) with its frames
    as the bundle's cases: run in sequence they pass only with the state kept from case to case; after half of them
    and eml_reset_state the sequence passes again from its first frame."""
    import test_lstm_streaming as ls

    _, (model, one, frames, got) = ls.streams(tmp_path, "cortex-m55")
    cres = ls.bundled(tmp_path, model, one, "cortex-m55", list(zip(frames, got)))
    out, _ = _run(consumers["find_package"], cres, tmp_path / "run")
    b = out["bundle"]
    assert b["cases"] == ls.N and b["after_reset"] == [True] * ls.N
    assert b["diffs"] == [{"max_steps": 0, "pass": True}] * ls.N


def test_inspector_reads_the_api_etdump(consumers, compiled, tmp_path: Path) -> None:
    from emlkit.etdump import inspect_etdump

    cres = compiled("conv_relu", "cortex-m55")
    got, _ = _run(consumers["find_package"], cres, tmp_path)
    etdump = (tmp_path / "etdump.etdp").read_bytes()
    assert len(etdump) == got["etdump_bytes"] and etdump[8:12] == b"ED00"
    etrecord = cres.pte.with_suffix(".etrecord")
    p = inspect_etdump(etdump, etrecord)
    assert (p.method, p.unit, p.runs) == ("forward", "ns", 2)
    assert [r.instruction for r in p.rows] == [0, 1, 2, 3]
    assert [r.name for r in p.rows] == ["cortex_m::quantize_per_tensor.out", "cortex_m::quantized_conv2d.out",
                                        "cortex_m::quantized_conv2d.out", "cortex_m::dequantize_per_tensor.out"]
    assert all(r.calls == 2 and r.nodes for r in p.rows)
    # the per-operator totals are the same clock readings the API's profile adds up
    totals: dict[str, float] = {}
    for r in p.rows:
        totals[r.name.rsplit(".", 1)[0]] = totals.get(r.name.rsplit(".", 1)[0], 0.0) + r.total
    assert totals == {e["name"]: float(e["count"]) for e in got["profile"]}
