"""`emlkit opsuite`: ExecuTorch's operator suite captured with its own discovery, planned in shards, run through
our pipeline, classified and merged (emlkit/opsuite/)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from emlkit.errors import AotError
from emlkit.opsuite import classify as cl
from emlkit.opsuite import report
from emlkit.opsuite.plugin import Record
from emlkit.opsuite.run import ETREF_FLOW, Case, files_for_k, plan, parse_shard, select, shard_name

from cli_in_process import CliResult

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _py(code: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # pytest inside this pytest session would share its plugins and capture: capture in a process of its own.
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def _emlkit(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emlkit", *args], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def _one_error_line(p: subprocess.CompletedProcess[str] | CliResult, status: int) -> str:
    assert p.returncode == status, (p.returncode, p.stdout[-1500:], p.stderr[-1500:])
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-2000:]
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, p.stderr[-2000:]
    return lines[0]


# ------------------------------------------------------------------ capture

CAPTURE_SUMMARY = """
import json, torch
from emlkit.opsuite.capture import capture
s = capture(["cortex-m55", "ethos-u55-128"])
by = {}
for r in s.records:
    by.setdefault(r.case_id, []).append(r)
same = all(all(torch.equal(a, b) for a, b in zip(rs[0].inputs, rs[1].inputs) if isinstance(a, torch.Tensor))
           for rs in by.values() if not rs[0].invalid)
print(json.dumps({
    "files": sorted({r.file for r in s.records}),
    "flows": sorted({r.flow for r in s.records}),
    "cases": len(by),
    "per_case": sorted({len(rs) for rs in by.values()}),
    "invalid": {c: rs[0].invalid for c, rs in by.items() if rs[0].invalid},
    "five_d": sorted(c for c, rs in by.items() if any(getattr(t, "dim", lambda: 0)() == 5 for t in rs[0].inputs)),
    "same_inputs_every_flow": same,
    "relu": [type(by["test_relu.py::test_relu_dtype[float32]"][0].model).__module__],
}))
"""


@pytest.fixture(scope="module")
def captured() -> dict[str, Any]:
    p = _py(CAPTURE_SUMMARY)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_capture_finds_the_suite_cases(captured: dict[str, Any]) -> None:
    assert len(captured["files"]) >= 70
    assert captured["flows"] == ["emlkit_cortex_m55", "emlkit_ethos_u55_128"]
    assert captured["cases"] > 500 and captured["per_case"] == [2]   # every case once per flow
    assert captured["same_inputs_every_flow"]                        # seeded per test, not per flow
    # the models pickle by their module path, importable wherever ExecuTorch is installed
    assert captured["relu"] == ["executorch.backends.test.suite.operators.test_relu"]


def test_capture_flags_invalid_and_five_d_cases(captured: dict[str, Any]) -> None:
    why = captured["invalid"]["test_linear.py::test_linear_dtype[float32]"]
    assert "mat1 and mat2 shapes cannot be multiplied" in why
    assert "test_conv3d.py::test_conv3d_dtype[float32]" in captured["five_d"]


# ------------------------------------------------------------------ planning and shards

def _case(file: str, test: str, sub: int = 0, invalid: str = "") -> Case:
    return Case(Record(file, test, sub, "emlkit_x", torch.nn.ReLU(), (torch.zeros(2),), invalid))


def test_parse_shard() -> None:
    assert parse_shard("1/1") == (1, 1) and parse_shard("3/4") == (3, 4)
    for bad in ("3/2", "0/2", "1/0", "2", "a/b", "-1/2"):
        with pytest.raises(AotError, match="bad --shard"):
            parse_shard(bad)
    assert shard_name(2, 5) == "opsuite-2-of-5.json"


def test_shards_split_the_rows_exactly() -> None:
    cases = [_case(f"test_{i}.py", f"test_{i}_dtype[float32]") for i in range(7)]
    flows = ["emlkit_a", "emlkit_b", ETREF_FLOW]
    everything, _ = plan(cases, flows, 1, 1)
    assert everything == sorted(everything) and len(everything) == 21
    ids = sorted(c.id for c in cases)
    for n in (1, 2, 4, 7, 30):
        parts = [plan(cases, flows, k, n)[1] for k in range(1, n + 1)]
        assert sorted(r for p in parts for r in p) == everything       # together: every row, once
        for k, p in enumerate(parts):                                   # K-th: every N-th case from the K-th
            assert p == [(c, f) for c in ids[k::n] for f in flows]


def test_select_first_takes_the_dtype_case() -> None:
    cases = [_case("test_a.py", "test_a_basic"), _case("test_a.py", "test_a_dtype[float32]"),
             _case("test_a.py", "test_a_dtype[float32]", 1), _case("test_b.py", "test_b_one"),
             _case("test_b.py", "test_b_two")]
    assert [c.id for c in select(cases, "first", None)] == ["test_a.py::test_a_dtype[float32]", "test_b.py::test_b_one"]
    assert len(select(cases, "all", None)) == 5
    assert [c.id for c in select(cases, "all", r"test_a_dtype.*#1")] == ["test_a.py::test_a_dtype[float32]#1"]
    with pytest.raises(AotError, match="no case .* matches -k"):
        select(cases, "first", "nothing_like_this")
    with pytest.raises(AotError, match="bad -k"):
        select(cases, "first", "(")


# ------------------------------------------------------------------ classification

REPORT_INT8 = {"ops": {"cortex_m::quantize_per_tensor": 1, "cortex_m::quantized_activation": 1,
                       "cortex_m::dequantize_per_tensor": 1}, "partitions": 0,
               "numerics": {"snr_db": 41.0, "outputs": [{"snr_db": 41.0, "max_abs": 0.3}]},
               "verify": {"float_islands": [], "broken": []}}


def _raw(**kw: Any) -> dict[str, Any]:
    return {"exit": 0, "line": "", "report": REPORT_INT8,
            "compare": [{"ok": True, "max_abs": 0.01, "dtype": "float32"}],
            "count": 1000, "per_op": [], "seconds": 1.0, **kw}


def test_classify_pass_int8_and_snr_floor() -> None:
    row = cl.classify(_raw())
    assert row["status"] == "PASS" and row["int8"] is True and row["snr_db"] == "41.0"
    # outside the suite's atol/rtol (one int8 step of a wide output) but above the SNR floor: a pass
    row = cl.classify(_raw(compare=[{"ok": False, "max_abs": 0.4, "dtype": "float32"}]))
    assert row["status"] == "PASS"
    low = {**REPORT_INT8, "numerics": {"snr_db": 12.0, "outputs": [{"snr_db": 12.0, "max_abs": 2.0}]}}
    row = cl.classify(_raw(report=low, compare=[{"ok": False, "max_abs": 2.0, "dtype": "float32"}]))
    assert row["status"] == "WRONG" and "SNR 12.0 dB < 20 dB" in row["reason"]
    # an integer output (argmax) gets the suite's tolerance only
    row = cl.classify(_raw(compare=[{"ok": False, "max_abs": 1.0, "dtype": "int64"}]))
    assert row["status"] == "WRONG" and "SNR" not in row["reason"]


def test_classify_float_program_uses_the_suite_tolerance() -> None:
    rep = {"ops": {"aten::sigmoid": 1}, "partitions": 0, "numerics": {"snr_db": 60.0, "outputs": [{"snr_db": 60.0}]},
           "verify": {"float_islands": [{"op": "aten::sigmoid"}], "broken": []}}
    per_op = [{"op": "aten::sigmoid.out", "calls": 1, "count": 250}, {"op": "x", "calls": 1, "count": 750}]
    row = cl.classify(_raw(report=rep, per_op=per_op))
    assert row["status"] == "PASS" and row["int8"] is False
    assert row["float_ops"] == ["aten::sigmoid"] and row["float_share"] == 0.25
    row = cl.classify(_raw(report=rep, compare=[{"ok": False, "max_abs": 0.5, "dtype": "float32"}]))
    assert row["status"] == "WRONG"   # not quantized: no SNR floor, the suite's atol/rtol decides


def test_classify_failures_by_exit_status() -> None:
    line = "op aten::foo.out (node foo, at unknown source line) cannot be lowered for cortex-m55: no firmware kernel"
    row = cl.classify({"exit": 4, "line": line})
    assert row["status"] == "REFUSED" and row["op"] == "aten::foo.out" and row["reason"] == line
    fit = cl.classify({"exit": 4, "line": "error: x (cortex-m4) does not fit mps2-an386: ram needs 9 B"})
    assert fit["status"] == "REFUSED" and fit["op"] == ""
    assert cl.classify({"exit": 1, "line": "3 steps"})["status"] == "WRONG"
    for code in (2, 3, 5, 6, 7):
        row = cl.classify({"exit": code, "line": "something"})
        assert row["status"] == "ERROR" and row["reason"] == f"exit {code}: something"
    assert cl.classify(_raw(compare=[{"ok": False, "why": "output 0 has shape (2,), eager (3,)"}]))["status"] == "WRONG"


def test_classify_executorch_reference_flow() -> None:
    assert cl.classify_etref({"exit": 0, "float_ops": [], "aten_on_int": []})["status"] == "INT8"
    row = cl.classify_etref({"exit": 0, "float_ops": ["aten::gelu"], "aten_on_int": []})
    assert row["status"] == "FLOAT" and row["op"] == "aten::gelu"
    assert cl.classify_etref({"exit": 0, "float_ops": [], "aten_on_int": ["aten::clamp"]})["status"] == "ATEN_ON_INT"
    assert cl.classify_etref({"exit": 1, "line": "lower: RuntimeError: boom"})["status"] == "FAILED"
    assert cl.classify_etref({"exit": 3, "line": "case timeout"})["status"] == "ERROR"


# ------------------------------------------------------------------ merge and the results page

def _shard(k: int, n: int, rows: list[tuple[str, str, str]], total: int, **kw: Any) -> dict[str, Any]:
    return {"schema": 1, "shard": [k, n], "targets": ["cortex-m55"], "flows": ["emlkit_cortex_m55", ETREF_FLOW],
            "allow_float": False, "cases": "first", "k": "", "snr_floor_db": 20.0, "total_rows": total,
            "row_keys": [[c, f] for c, f, _ in rows],
            "rows": [{"case": c, "file": c.split("::")[0], "flow": f, "status": s, "op": "aten::foo" if s == "REFUSED"
                      else "", "reason": "r", "int8": s == "PASS"} for c, f, s in rows], **kw}


def _write_shards(tmp_path: Path, docs: list[dict[str, Any]]) -> list[str]:
    paths = []
    for i, d in enumerate(docs):
        p = tmp_path / f"s{i}.json"
        p.write_text(json.dumps(d))
        paths.append(str(p))
    return paths


def test_merge_and_page(tmp_path: Path) -> None:
    rows = [("test_a.py::test_a_dtype[float32]", "emlkit_cortex_m55", "PASS"),
            ("test_a.py::test_a_dtype[float32]", ETREF_FLOW, "INT8"),
            ("test_b.py::test_b_dtype[float32]", "emlkit_cortex_m55", "REFUSED"),
            ("test_b.py::test_b_dtype[float32]", ETREF_FLOW, "FLOAT")]
    paths = _write_shards(tmp_path, [_shard(2, 2, rows[1::2], 4), _shard(1, 2, rows[0::2], 4)])
    m = report.merge(paths)
    assert m["complete"] and m["shards"] == [1, 2] and [(r["case"], r["flow"]) for r in m["rows"]] == \
        [(c, f) for c, f, _ in rows]
    text = report.page(m)
    assert "| cortex-m55 | 2 | 2 | 1 | 1 | 0 | 1 | 0 | 0 | 0 | 0 |" in text
    assert "REFUSED `aten::foo`" in text and "`aten::foo` (1)" in text
    assert "**1 of 2**" in text and "torchvision" in text
    assert not any(tok in text for tok in ("2025", "2026", "commit"))   # no dates, no commit ids
    partial = report.merge(paths[:1])
    assert not partial["complete"] and "INCOMPLETE" in report.page(partial)


def test_merge_refuses_overlaps_and_other_measurements(tmp_path: Path) -> None:
    rows = [("test_a.py::t", "emlkit_cortex_m55", "PASS"), ("test_a.py::t", ETREF_FLOW, "INT8")]
    same_k = _write_shards(tmp_path, [_shard(1, 2, rows[:1], 2), _shard(1, 2, rows[1:], 2)])
    with pytest.raises(AotError, match="overlaps .*both are shard 1/2"):
        report.merge(same_k)
    same_row = _write_shards(tmp_path, [_shard(1, 2, rows, 2), _shard(2, 2, rows[1:], 2)])
    with pytest.raises(AotError, match="overlaps .*both hold row test_a.py::t"):
        report.merge(same_row)
    other = _write_shards(tmp_path, [_shard(1, 2, rows[:1], 2), _shard(2, 2, rows[1:], 2, allow_float=True)])
    with pytest.raises(AotError, match="inconsistent .*allow_float"):
        report.merge(other)
    split = _write_shards(tmp_path, [_shard(1, 2, rows[:1], 2), _shard(2, 3, rows[1:], 2)])
    with pytest.raises(AotError, match="inconsistent .*split into 2"):
        report.merge(split)
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(AotError, match="not an opsuite shard file"):
        report.merge([str(tmp_path / "junk.json")])
    with pytest.raises(AotError, match="cannot read shard file"):
        report.merge([str(tmp_path / "missing.json")])


# ------------------------------------------------------------------ case files (emlkit/load.py)

class _IndexPut(torch.nn.Module):
    def forward(self, x: torch.Tensor, idx: tuple[torch.Tensor, ...], v: torch.Tensor) -> torch.Tensor:
        return x.index_put(idx, v)


def test_nested_input_tuples_are_taken_flat(tmp_path: Path) -> None:
    """index_put's suite case passes a tuple of index tensors inside the inputs: the program takes them flat."""
    from emlkit.load import load_model

    x, rows, cols, v = torch.randn(4, 5), torch.tensor([0, 2]), torch.tensor([1, 3]), torch.randn(2)
    p = tmp_path / "index_put_case.pt"
    torch.save({"ModelUnderTest": _IndexPut(), "ModelInputs": (x, (rows, cols), v)}, p)
    m = load_model(str(p))
    assert [t.shape for t in m.inputs] == [(4, 5), (2,), (2,), (2,)]
    assert torch.equal(m.module(*m.inputs), x.index_put((rows, cols), v))


def test_case_file_loads_and_bad_ones_say_why(tmp_path: Path) -> None:
    from emlkit.load import load_model

    good = tmp_path / "relu_case.pt"
    torch.save({"ModelUnderTest": torch.nn.ReLU(), "ModelInputs": (torch.randn(2, 3),)}, good)
    m = load_model(str(good))
    assert m.name == "relu_case" and isinstance(m.module, torch.nn.ReLU) and m.inputs[0].shape == (2, 3)
    bad = {"missing.pt": None, "text.pt": b"not a zip or pickle", "list.pt": [1, 2],
           "nokeys.pt": {"ModelUnderTest": torch.nn.ReLU()},
           "notmodule.pt": {"ModelUnderTest": 3, "ModelInputs": (torch.zeros(1),)},
           "notensor.pt": {"ModelUnderTest": torch.nn.ReLU(), "ModelInputs": (torch.zeros(1), "x")}}
    want = {"missing.pt": "case file not found", "text.pt": "is not a torch .pt file", "list.pt": "holds a list",
            "nokeys.pt": "does not define ModelInputs", "notmodule.pt": "must be a torch.nn.Module",
            "notensor.pt": "must be a tensor or a tuple of tensors"}
    for name, content in bad.items():
        p = tmp_path / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        elif content is not None:
            torch.save(content, p)
        with pytest.raises(AotError, match=want[name]) as exc:
            load_model(str(p))
        assert "\n" not in str(exc.value)


# ------------------------------------------------------------------ the CLI: bad input, a real case

@pytest.mark.parametrize("args, says", [
    (["--targets", "cortex-m55,nope"], "unknown target 'nope'"),
    (["--shard", "3/2"], "bad --shard '3/2'"),
    (["--shard", "0/2"], "bad --shard '0/2'"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["-k", "test_(relu"], "bad -k regular expression 'test_(relu'"),   # before the capture, not after it
])
def test_bad_arguments_exit_2(emlkit_cli, tmp_path: Path, args: list[str], says: str) -> None:
    line = _one_error_line(emlkit_cli(["opsuite", *args, "--out", str(tmp_path / "o")], tmp_path), 2)
    assert says in line
    assert not (tmp_path / "o").exists()


def test_no_case_matches_k_exits_2(tmp_path: Path) -> None:
    # anchored: no operator file can match, so it says so without capturing the suite
    args = ["opsuite", "--targets", "cortex-m55", "-k", "^test_no_such_op", "--out", str(tmp_path / "o")]
    line = _one_error_line(_emlkit(args, tmp_path), 2)
    assert "no case" in line and "^test_no_such_op" in line
    assert not (tmp_path / "o").exists()


def test_k_with_a_literal_head_captures_only_the_files_it_can_match() -> None:
    files = ["test_abs.py", "test_add.py", "test_relu.py", "test_relu6.py"]
    assert files_for_k(r"^test_relu\.py", files) == ["test_relu.py"]
    assert files_for_k("^test_relu", files) == ["test_relu.py", "test_relu6.py"]
    assert files_for_k(r"^test_relu\.py::test_relu_dtype", files) == ["test_relu.py"]
    assert files_for_k("^test_a", files) == ["test_abs.py", "test_add.py"]
    assert files_for_k("^test_ad?", files) == files[:2]           # `d?` may be absent: the head is test_a
    assert files_for_k("^zzz", files) == []
    # no literal head, or an alternative that may match anywhere: every file is captured
    for pattern in (None, "relu", "^t*", r"^\w+_relu", "^test_relu|add", "^(test_relu)"):
        assert files_for_k(pattern, files) is None, pattern


def test_merge_bad_shard_file_exits_2(emlkit_cli, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("[]")
    line = _one_error_line(emlkit_cli(["opsuite", "merge", str(tmp_path / "bad.json"), "-o", "r.json"], tmp_path), 2)
    assert "not an opsuite shard file" in line
    line = _one_error_line(emlkit_cli(["opsuite", "merge", str(tmp_path / "none.json"), "-o", "r.json"], tmp_path), 2)
    assert "cannot read shard file" in line


def test_case_timeout_kills_the_worker(tmp_path: Path) -> None:
    from emlkit.opsuite.pool import run_jobs

    got: list[dict[str, Any]] = []
    job = {"kind": "emlkit", "case_file": "x.pt", "target": "cortex-m55", "allow_float": False, "sim_timeout": 1,
           "workdir": str(tmp_path / "w")}
    t0 = time.monotonic()
    run_jobs([job], 1, 0.5, tmp_path / "logs", lambda j, r: got.append(r))   # the worker cannot even start in 0.5 s
    assert time.monotonic() - t0 < 60
    assert got[0]["exit"] == 3 and "case timeout" in got[0]["line"]
    assert cl.classify(got[0])["status"] == "ERROR"


@pytest.mark.slow
def test_relu_end_to_end_on_cortex_m55(tmp_path: Path) -> None:
    out = tmp_path / "o"
    p = _emlkit(["opsuite", "--targets", "cortex-m55", "-k", r"^test_relu\.py", "--out", str(out)], tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    doc = json.loads((out / "opsuite-1-of-1.json").read_text())
    rows = {r["flow"]: r for r in doc["rows"]}
    assert set(rows) == {"emlkit_cortex_m55", ETREF_FLOW}
    ours = rows["emlkit_cortex_m55"]
    assert ours["case"] == "test_relu.py::test_relu_dtype[float32]"
    assert ours["status"] == "PASS" and ours["int8"] is True, ours
    assert ours["count"] and ours["unit"] == "instructions" and float(ours["snr_db"]) >= 20
    assert rows[ETREF_FLOW]["status"] in cl.ETREF_STATUSES
    merged = _emlkit(["opsuite", "merge", str(out / "opsuite-1-of-1.json"), "-o", str(tmp_path / "r.json"),
                      "--docs", str(tmp_path / "page.md")], tmp_path)
    assert merged.returncode == 0, merged.stderr[-2000:]
    assert "PASS int8" in (tmp_path / "page.md").read_text()


@pytest.mark.slow
def test_ctrl_c_leaves_earlier_shard_files_whole(tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    earlier = out / "opsuite-1-of-1.json"
    earlier.write_text('{"earlier": true}\n')
    proc = subprocess.Popen([sys.executable, "-m", "emlkit", "opsuite", "--targets", "cortex-m55", "-k", r"^test_relu\.py",
                             "--out", str(out)], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()   # capture is done: the rows are about to run
    assert first.startswith("opsuite:"), first
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert earlier.read_text() == '{"earlier": true}\n'
    assert not list(out.glob(".*.tmp"))
