"""`emlkit export`: a self-contained CMake project that builds outside the repo with CMake and
arm-none-eabi-gcc alone and runs under plain QEMU (no semihosting, no loader device), printing PASS on
the UART; its ETDump read back by ExecuTorch's Inspector; the MPS3 SD-card images of the same ELF."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emlkit.hostfw import cmake_binary
from emlkit.deploy.export import (c_array, c_symbols, expand_generators, export_compiled, included_macros, program_facts,
                               registration, source_closure)
from emlkit.errors import AotError

REPO = Path(__file__).resolve().parents[1]
GCC = shutil.which("arm-none-eabi-gcc")
QEMU = shutil.which("qemu-system-arm")
needs_tools = pytest.mark.skipif(GCC is None or QEMU is None or cmake_binary() is None,
                                 reason="needs arm-none-eabi-gcc, qemu-system-arm and cmake")


# ---------------------------------------------------------------- what goes into the project


def test_registry_is_cut_to_the_program_operators() -> None:
    tables, adapters = registration([("cortex_m::quantized_conv2d", "out"), ("aten::view_copy", "out")])
    assert set(tables) == {p.name for p in (REPO / "firmware" / "ops").glob("*.def")}
    entries = [ln for text in tables.values() for ln in text.splitlines() if ln.startswith("ET_OP(")]
    assert sorted(entries) == [
        'ET_OP("aten::view_copy", "out", aten_view_copy_out, aten_view_copy_out_prepare)',
        'ET_OP("cortex_m::quantized_conv2d", "out", op_cortex_m_quantized_conv2d_out, op_cortex_m_quantized_conv2d_out_prepare)']
    assert adapters == {"aten_view_copy_out", "aten_view_copy_out_prepare", "op_cortex_m_quantized_conv2d_out",
                        "op_cortex_m_quantized_conv2d_out_prepare"}
    with pytest.raises(AotError, match="no firmware kernel is registered for cortex_m::nonexistent.out"):
        registration([("cortex_m::nonexistent", "out")])


def test_only_the_kernels_the_operators_reach() -> None:
    _, adapters = registration([("cortex_m::quantize_per_tensor", "out"), ("cortex_m::quantized_conv2d", "out")])
    names = {p.name for p in source_closure(adapters)}
    assert {"cortex_m_quantize.c", "cortex_m_conv.c", "quantize_f32.c", "conv2d_s8.c", "conv2d_s8_ref.c",
            "conv2d_s8_mve.c", "conv2d_s8_dsp.c"} <= names
    for absent in ("softmax_s8.c", "avg_pool2d_s8.c", "linear_s8.c", "aten_elementwise.c", "cortex_m_pool.c"):
        assert absent not in names
    _, adapters = registration([("cortex_m::softmax", "out")])
    assert {p.name for p in source_closure(adapters)} == {"cortex_m_softmax.c", "softmax_s8.c"}


def test_c_array() -> None:
    text = c_array("const uint8_t x[17]", bytes(range(17)))
    assert text.startswith("const uint8_t x[17] = {\n  0x00, 0x01,") and text.endswith("0x10,\n};")
    assert text.count("0x") == 17


# ---------------------------------------------------------------- the output folder


def test_existing_folder_is_kept_unless_forced(tmp_path: Path, compiled) -> None:
    cres = compiled("conv_relu", "cortex-m55")
    out = tmp_path / "proj"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(AotError, match="exists and is not empty"):
        export_compiled(cres, "corstone-300", out)
    assert (out / "mine.txt").read_text() == "keep me"

    # A failure half way (an unknown board; a broken write) leaves the folder as it was and no temporary copy.
    with pytest.raises(AotError, match="unknown board"):
        export_compiled(cres, "no-such-board", out, force=True)
    with pytest.raises(AotError, match="not one"):
        export_compiled(cres, "host", out, force=True)
    import emlkit.deploy.export as ex

    real = ex._readme

    def broken(*a, **k):
        raise KeyboardInterrupt  # as if the user pressed Ctrl-C while files were being written

    ex._readme = broken
    try:
        with pytest.raises(KeyboardInterrupt):
            export_compiled(cres, "corstone-300", out, force=True)
    finally:
        ex._readme = real
    assert (out / "mine.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]

    res = export_compiled(cres, "corstone-300", out, force=True)
    assert not (out / "mine.txt").exists() and (out / "CMakeLists.txt").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]
    assert res.operators == ["cortex_m::quantize_per_tensor.out", "cortex_m::quantized_conv2d.out",
                             "cortex_m::dequantize_per_tensor.out"]
    assert not (out / "emlkit" / "npu").exists()
    assert "model/model_data.c" in res.files and "emlkit/include/emlkit.h" in res.files


def test_cli_errors_are_one_line(emlkit_cli, tmp_path: Path) -> None:
    r = emlkit_cli(["export", "conv_relu", "--target", "cortex-m55", "--board", "nope", "-o", str(tmp_path / "p")])
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: unknown board 'nope'") and "Traceback" not in r.stderr
    assert not (tmp_path / "p").exists()


# ---------------------------------------------------------------- build outside the repo, run on QEMU


def _build(proj: Path, build: Path) -> subprocess.CompletedProcess:
    """CMake and the GNU Arm toolchain only: no Python, no repo on the way."""
    cmake = cmake_binary()
    assert cmake is not None
    env = {"PATH": os.pathsep.join(dict.fromkeys([str(Path(cmake).parent), str(Path(GCC or "").parent), "/usr/bin", "/bin"])),
           "HOME": os.environ.get("HOME", "/tmp")}
    r = subprocess.run([cmake, "-S", str(proj), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={proj / 'cmake' / 'arm-none-eabi.cmake'}"],
                       capture_output=True, text=True, env=env, timeout=300)
    if r.returncode == 0:
        r = subprocess.run([cmake, "--build", str(build), "-j", "2"], capture_output=True, text=True, env=env, timeout=900)
    return r


def qemu_console(args: list[str], timeout: float = 60.0) -> str:
    """Run QEMU until the firmware prints its RESULT line (the core then sleeps, as on a board); the console."""
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.decode(errors="replace"))
            if lines[-1].startswith(("RESULT:", "FAULT:")):
                break
    finally:
        proc.kill()
        proc.wait()
    return "".join(lines)


QEMU_CMD = ["qemu-system-arm", "-M", "mps3-an547", "-nographic", "-icount", "shift=0"]


@pytest.mark.slow
@needs_tools
def test_exported_project_builds_outside_and_passes_on_plain_qemu(tmp_path: Path, compiled, emlkit_cli) -> None:
    cres = compiled("conv_relu", "cortex-m55")
    proj = tmp_path / "proj"
    export_compiled(cres, None, proj)
    for p in proj.rglob("*"):
        if p.suffix in (".c", ".h", ".ld", ".txt", ".cmake", ".def"):
            assert str(REPO) not in p.read_text(), f"{p} refers to the repo"
    r = _build(proj, tmp_path / "build")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    elf = tmp_path / "build" / "app.elf"
    m = re.search(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+\w+\s+\S*app\.elf", r.stdout, re.M)
    assert m, r.stdout[-2000:]
    print(f"app.elf: text {m.group(1)}, data {m.group(2)}, bss {m.group(3)} bytes")

    console = qemu_console([*QEMU_CMD, "-kernel", str(elf)])
    assert "RESULT: PASS conv_relu" in console, console[-3000:]
    assert "0 of 2048 elements differ" in console
    (tmp_path / "console.txt").write_text(console)

    # ExecuTorch's Inspector reads the ETDump the firmware printed; its per-operator counts are the firmware's.
    prof = tmp_path / "prof.json"
    r = emlkit_cli(["inspect", "--log", str(tmp_path / "console.txt"), "--etrecord", str(proj / "model" / "model.etrecord"),
                    "--json", str(prof)])
    assert r.returncode == 0, r.stderr
    assert "QEMU instructions" in r.stdout
    (p,) = json.loads(prof.read_text())
    assert p["unit"] == "instructions" and p["figure"] == "QEMU instructions" and p["runs"] == 1
    facts = program_facts((proj / "model" / "model.pte").read_bytes())
    assert [row["instruction"] for row in p["rows"]] == list(range(facts.instructions))
    uart = {mm.group(1): int(mm.group(2)) for mm in re.finditer(r"^\s+(\S+)\s+\d+ calls\s+(\d+) instructions", console, re.M)}
    per_op: dict[str, float] = {}
    for row in p["rows"]:
        per_op[row["name"].rsplit(".", 1)[0]] = per_op.get(row["name"].rsplit(".", 1)[0], 0) + row["total"]
        assert row["nodes"], row  # the ETRecord maps each instruction to its graph node
    assert per_op == {k: float(v) for k, v in uart.items()}
    assert any(row["source"] == "conv_relu.py:15" for row in p["rows"])

    # The same ELF as the MPS3 SD-card images: loaded raw at the CPU addresses, as the MCC does, it boots.
    r = emlkit_cli(["flash", str(elf), "--mps3-dir", str(tmp_path / "sd")])
    assert r.returncode == 0, r.stderr
    txt = (tmp_path / "sd" / "MB" / "HBI0309C" / "AN547" / "images.txt").read_text()
    loaders = []
    for k, (name, cpu) in enumerate(re.findall(r"IMAGE\d+ADDRESS: \S+\s+;MCC address of (\w+) \(CPU (0x[0-9a-f]+)", txt)):
        loaders += ["-device", f"loader,file={tmp_path / 'sd' / 'SOFTWARE' / (name + '.bin')},addr={cpu},force-raw=on"]
    assert len(loaders) == 4, txt  # itcm (code) and ddr (the model)
    console = qemu_console([*QEMU_CMD, *loaders])
    assert "RESULT: PASS conv_relu" in console, console[-3000:]

    # The check can fail: a wrong expected output is reported.
    data = proj / "model" / "model_data.c"
    text = data.read_text()
    i = text.index("expected_0[")
    j = text.index("0x", i)
    flipped = "0x00" if text[j:j + 4] != "0x00" else "0x01"
    data.write_text(text[:j] + flipped + text[j + 4:])
    r = _build(proj, tmp_path / "build")
    assert r.returncode == 0, r.stdout[-2000:]
    console = qemu_console([*QEMU_CMD, "-kernel", str(elf)])
    assert "RESULT: FAIL 1 output(s) differ" in console, console[-2000:]


@pytest.mark.slow
@needs_tools
def test_ethos_u_export_runs_the_npu_through_the_api(tmp_path: Path, compiled) -> None:
    """An Ethos-U program exports with the NPU driver behind the same API. QEMU has no NPU: plain QEMU
    gets a clean npu_config failure; with the NPU co-simulated (emlkit/deploy/npu_cosim.py) it passes."""
    from emlkit.deploy.boards import load_board
    from emlkit.deploy.npu_cosim import NpuSpec, run_cosim

    cres = compiled("conv_relu", "ethos-u55-128")
    proj = tmp_path / "proj"
    res = export_compiled(cres, "corstone-300", proj)
    assert res.uses_npu and (proj / "emlkit" / "npu" / "ethosu_driver.c").is_file()
    assert "set(EMLKIT_ETHOSU ON)" in (proj / "CMakeLists.txt").read_text()
    r = _build(proj, tmp_path / "build")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    elf = tmp_path / "build" / "app.elf"
    console = qemu_console([*QEMU_CMD, "-kernel", str(elf)])
    assert "RESULT: FAIL eml_load returned npu_config" in console and "no Ethos-U responds" in console, console

    b = load_board("corstone-300")
    assert b.npu is not None
    reach = [(m.base, m.end, m.name) for m in b.memories if m.name in b.npu.dma_regions]
    work = tmp_path / "cosim"
    work.mkdir()
    # The firmware parks the core after its result line (no semihosting exit): the run ends at the timeout.
    out = run_cosim(["qemu-system-arm", "-M", "mps3-an547", "-nographic", "-icount", "shift=0,sleep=off", "-kernel",
                     str(elf)], elf, work, NpuSpec.parse("ethos-u55-128"), b.npu.base, b.npu.irq, reach, 30.0)
    assert "RESULT: PASS conv_relu" in out.console, out.console[-3000:]
    assert re.search(r"EthosUBackend\s+1 calls", out.console), out.console[-2000:]


def test_generating_macros_expand_like_the_preprocessor() -> None:
    # `#p` joins the literal before it, `##` pastes, a plain parameter is substituted; calls with another
    # argument count are not expanded.
    text = ('#define GEN(name, kind) \\\n'
            '  int op_##name##_prepare(int x) { return check("ns::" #name, kind, #kind); }\n'
            'GEN(conv, CONV)\nGEN(only_one)\n')
    exp = expand_generators(text)
    assert 'int op_conv_prepare(int x) { return check("ns::conv", CONV, "CONV"); }' in exp
    assert "op_only_one_prepare" not in exp


def test_generating_macros_of_included_headers_expand_nested_and_variadic(tmp_path: Path) -> None:
    # A file's own entry macro that is a header's variadic one, which is two others (firmware/ops/op_entry.h's
    # shape): every entry point it defines is found, through a header reached by another header.
    (tmp_path / "entry.h").write_text(
        '#define PREP(fn, check, ...) int fn##_prepare(int c) { return check(c, __VA_ARGS__); }\n'
        '#define EVAL(fn, run, ...) int fn(int c) { return run(c, __VA_ARGS__); }\n'
        '#define BOTH(fn, run, check, ...) EVAL(fn, run, __VA_ARGS__) PREP(fn, check, __VA_ARGS__)\n')
    (tmp_path / "util.h").write_text('#include "entry.h"\n')
    src = tmp_path / "ops.c"
    src.write_text('#include "util.h"\n#define MY_OP(fn, name, k) BOTH(fn, my_run, my_check, name, k)\n'
                   'MY_OP(op_add, "ns::add", ADD)\nPREP(op_mul, mul_check, "ns::mul", f(1, 2))\n'
                   'static int helper(int c) { return MY_OP_NOT(c); }\n')
    defined, used = c_symbols(src)
    assert defined == {"op_add", "op_add_prepare", "op_mul_prepare"}
    assert {"my_run", "my_check", "mul_check"} <= used
    headers = included_macros(src, ())
    assert "#define BOTH(" in headers and "#define MY_OP(" not in headers
    # with an argument list that does not fit, nothing is made
    assert expand_generators("BOTH(op_bad)\n", headers) == "BOTH(op_bad)\n"
