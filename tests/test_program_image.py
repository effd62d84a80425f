"""Per-program runner images (emlkit/deploy/program_image.py): only the program's operators are linked,
the Ethos-U backend only with a delegate, unknown operators are refused with one line; the runtime's own
snprintf (firmware/runtime/et_fmt.c) matches the C library's; the runtime core links alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from emlkit.deploy.build import build_image
from emlkit.deploy.program_image import OpSet, core_size, program_image
from emlkit.deploy.result import parse_result
from emlkit.errors import EXIT_UNSUPPORTED, AotError
from toolchain import needs_gcc

ROOT = Path(__file__).resolve().parents[1]
ADD_OPS = "cortex_m::quantize_per_tensor.out,cortex_m::dequantize_per_tensor.out,cortex_m::quantized_add.out"


def _symbols(elf: Path) -> set[str]:
    out = subprocess.run(["arm-none-eabi-nm", str(elf)], stdout=subprocess.PIPE, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


@pytest.mark.parametrize("decimal", [True, False], ids=["decimal-floats", "hex-floats"])
def test_fmt_matches_libc(tmp_path: Path, decimal: bool) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    exe = tmp_path / "fmt_check"
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", *(["-DET_FMT_FLOAT"] if decimal else []),
                    f"-I{ROOT / 'firmware' / 'runtime'}", str(ROOT / "tests" / "fmt_check.c"),
                    str(ROOT / "firmware" / "runtime" / "et_fmt.c"), "-o", str(exe)], check=True)
    p = subprocess.run([str(exe)], stdout=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stdout


def test_result_reads_hex_max_abs() -> None:
    r = parse_result('{"status": "pass", "cases": 1, "outputs": [{"max_abs": "0x1.8p-3", "max_steps": 0, "pass": true}]}')
    assert r.outputs[0].max_abs == 0.1875
    r = parse_result('{"status": "pass", "cases": 1, "outputs": [{"max_abs": 0.25, "max_steps": 0, "pass": true}]}')
    assert r.outputs[0].max_abs == 0.25


@needs_gcc
def test_add_image_has_only_its_kernels() -> None:
    full = _symbols(build_image("corstone-300").elf)
    img = program_image("corstone-300", None, OpSet.parse(ADD_OPS))
    syms = _symbols(img.elf)
    assert "emk_add_s8" in syms and "op_cortex_m_quantized_add_out" in syms
    # Present in the full image, absent here: other adapters and kernels, the Ethos-U backend and driver.
    for gone in ("op_cortex_m_quantized_conv2d_out", "emk_depthwise_conv2d_s8_mve", "op_cortex_m_softmax_out", "ethosu_run",
                 "ethosu_backend", "_svfprintf_r", "_dtoa_r"):
        assert gone not in syms, gone
    assert {"op_cortex_m_quantized_conv2d_out", "ethosu_run"} <= full
    total = img.sizes["text"] + img.sizes["data"]
    assert total < build_image("corstone-300").sizes["text"] // 2
    # Cached by operator set: the same set links nothing again.
    assert program_image("corstone-300", None, OpSet.parse(ADD_OPS)).rebuilt is False


@needs_gcc
def test_delegate_brings_the_ethos_u_backend() -> None:
    img = program_image("corstone-300", None, OpSet.parse(ADD_OPS, npu=True))
    syms = _symbols(img.elf)
    assert {"ethosu_run", "ethosu_backend", "ethosu_init"} <= syms   # the backend, and the driver npu.c brings up


@needs_gcc
def test_unregistered_operator_is_refused() -> None:
    with pytest.raises(AotError, match=r"no firmware kernel is registered for cortex_m::no_such_op\.out") as err:
        program_image("corstone-300", None, OpSet.parse("cortex_m::no_such_op.out"))
    assert err.value.exit_code == EXIT_UNSUPPORTED
    p = subprocess.run([sys.executable, "-m", "emlkit.deploy.program_image", "--ops", "cortex_m::no_such_op.out"],
                       cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.returncode == EXIT_UNSUPPORTED
    assert p.stdout.strip().splitlines()[-1].startswith("error: no firmware kernel is registered")
    assert "Traceback" not in p.stdout


@needs_gcc
def test_runtime_core_links_alone() -> None:
    c = core_size("corstone-300")
    syms = _symbols(c.elf)
    assert {"et_program_load", "et_method_init", "et_method_execute", "et_status_name"} <= syms
    assert not any(s.startswith(("op_cortex_m_", "op_aten_", "ethosu_", "plat_")) for s in syms)
    assert all(not k.startswith(("libfw_kernels", "libfw_npu")) for k in c.runtime)
    assert c.total == c.text + c.data and c.total > 0
