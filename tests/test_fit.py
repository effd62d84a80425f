"""The compile-time memory fit check (emlkit/deploy/fit.py): its prediction against what the runner
reports and does, the one-line message per memory, and how compile, run and the suite use it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from emlkit.deploy import boards as B
from emlkit.deploy import fit
from emlkit.deploy.build import build_image
from toolchain import needs_gcc, needs_qemu


def _needs(cres) -> fit.ProgramNeeds:
    return fit.ProgramNeeds.from_dict(cres.report["program_needs"])


def test_program_needs_round_trip(compiled) -> None:
    cres = compiled("conv_relu", "cortex-m0plus")
    n = _needs(cres)
    assert n.arenas == [int(v) for v in cres.report["memory"]["arena_bytes"].values()]
    assert n.output_bytes == 4 * 32 * 8 * 8  # one float output [1, 32, 8, 8]
    assert n.instructions > 0 and n.arguments > n.instructions and n.tensors <= n.values
    assert fit.ProgramNeeds.from_dict(n.to_dict()) == n
    layout = {"et_value": 24, "et_tensor": 52, "et_op_slot": 32, "et_instr": 48, "pointer": 4}
    up8 = lambda x: (x + 7) // 8 * 8  # noqa: E731
    assert n.runtime_bytes(layout) == (up8(24 * n.values) + up8(52 * n.tensors) + up8(32 * n.operators)
                                       + up8(48 * n.instructions) + up8(4 * n.arguments))


def _microbit_image(cres) -> Path:  # noqa: ANN001
    """The micro:bit image for one program, as `emlkit run` links it (the every-operator image overflows its flash)."""
    from emlkit.deploy.program_image import OpSet, program_image

    return program_image("microbit", None, OpSet.of_file(Path(cres.pte))).elf


@needs_gcc
def test_image_facts_and_layout(compiled) -> None:
    facts = fit.read_image(_microbit_image(compiled("mlp", "cortex-m0plus")))
    assert set(facts.layout) == set(fit.LAYOUT_NAMES) and facts.layout["pointer"] == 4
    b = B.load_board("microbit")
    use = dict((k, dict(v)) for k, v in fit.image_use(b, facts).items())
    assert set(use) == {"flash", "ram"}  # nothing of the image lands in the model partition
    assert use["flash"]["code"] > 20_000 and use["flash"][".data load image"] == use["ram"][".data+.bss"] - \
        next(s.size for s in facts.sections if s.name == ".bss")
    assert use["ram"]["stack"] == b.link.stack_size and use["ram"]["libc heap"] == b.link.libc_heap_size


@needs_qemu
@pytest.mark.parametrize("model, target, board", [("mlp", "cortex-m0plus", "microbit"),
                                                  ("conv_relu", "cortex-m4", "mps2-an386"),
                                                  ("attention", "cortex-m55", "corstone-300")])
def test_prediction_matches_the_runner(compiled, model: str, target: str, board: str) -> None:
    """Runtime memory predicted from the program's counts and the image's struct sizes equals what the
    runner computes on the device (32-bit soft-float, hard-float and MVE builds)."""
    from emlkit.run import execute

    o = execute(compiled(model, target), board, "qemu", 300, "mve", None)
    assert o.status == "PASS", o.reason
    assert o.fit.fits and o.fit.runtime_bytes == o.result.runtime_bytes
    assert sum(o.result.arena_bytes) == sum(_needs(compiled(model, target)).arenas)


@needs_qemu
def test_a_program_the_check_refuses_does_not_fit_on_the_device(compiled) -> None:
    """conv_relu needs ~34 KB of RAM; the micro:bit has 16 KiB. Run anyway (no check): the runner
    itself cannot place its memory (the arena, or the runtime memory after it), so the check refused for the reason
    the device fails."""
    from emlkit.deploy.sim_qemu import run_qemu

    cres = compiled("conv_relu", "cortex-m0plus")
    b = B.load_board("microbit")
    elf = _microbit_image(cres)
    res = fit.check(b, fit.read_image(elf), _needs(cres), cres.bpte.stat().st_size)
    assert not res.fits and [m.memory for m in res.memories if not m.fits] == ["ram"]
    r = run_qemu(cres.bpte, b, elf=elf, timeout=60)
    assert r.result["status"] == "error" and r.result["code"] == "arena_too_small", r.console
    assert "cannot place" in r.result["error"], r.result["error"]  # the arena or the runtime memory after it


@needs_gcc
def test_the_line_names_memory_need_and_size(compiled) -> None:
    cres = compiled("conv_relu", "cortex-m0plus")
    b = B.load_board("microbit")
    facts = fit.read_image(_microbit_image(cres))
    res = fit.check(b, facts, _needs(cres), cres.bpte.stat().st_size)
    line = res.line("conv_relu (cortex-m0plus)")
    assert "\n" not in line
    assert line.startswith("conv_relu (cortex-m0plus) does not fit microbit: ram needs ")
    assert ", has 16,384 B" in line and f"arenas {sum(_needs(cres).arenas):,}" in line and "runtime " in line
    ram = next(m for m in res.memories if m.memory == "ram")
    assert ram.need == sum(b for _, b in ram.parts) > 16_384 and ram.unplaced
    # the model slot: a bigger model than the partition holds
    small = dataclasses.replace(b, model=dataclasses.replace(b.model, max_size=4096))
    res = fit.check(small, facts, _needs(cres), cres.bpte.stat().st_size)
    assert "flash_model needs" in res.line("x") and "has a 4,096 B model slot" in res.line("x")
    # the same program on a board with more RAM fits
    big = dataclasses.replace(b, memories=tuple(dataclasses.replace(m, size=64 << 10) if m.name == "ram" else m
                                                for m in b.memories))
    facts_big = dataclasses.replace(facts, symbols={**facts.symbols,
                                                    "__stack_limit__": (0x20000000 + (64 << 10) - b.link.stack_size, 0)})
    assert fit.check(big, facts_big, _needs(cres), cres.bpte.stat().st_size).fits


def test_an_image_that_does_not_link_is_a_code_fit_failure() -> None:
    b = B.load_board("microbit")
    log = "arm-none-eabi/bin/ld: runner.elf section `.text' will not fit in region `FLASH'\n" \
          "arm-none-eabi/bin/ld: region `FLASH' overflowed by 1234 bytes\ncollect2: error: ld returned 1 exit status"
    res = fit.overflow_result(b, log)
    assert res is not None and not res.fits
    assert res.line("m (t)") == (f"m (t) does not fit microbit: flash needs {0x37000 + 1234:,} B (image "
                                 f"{0x37000 + 1234:,}), has {0x37000:,} B (the runner image does not link)")
    assert fit.overflow_result(b, "undefined reference to `foo'") is None


@needs_qemu
def test_cli_compile_and_run_exit_4_with_one_line(tmp_path: Path, emlkit_cli) -> None:
    for cmd in (["compile"], ["run"]):
        p = emlkit_cli([*cmd, "conv_relu", "--target", "cortex-m0plus", "-o", tmp_path / "o"], tmp_path)
        assert p.returncode == 4, p.stdout[-1500:] + p.stderr[-1500:]
        err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
        assert len(err) == 1 and "Traceback" not in p.stderr
        assert err[0].startswith("error: conv_relu (cortex-m0plus) does not fit microbit: ram needs ")
    assert (tmp_path / "o" / "conv_relu_cortex-m0plus.bpte").is_file()  # the program is written all the same
    p = emlkit_cli(["compile", "mlp", "--target", "cortex-m0plus", "--board", "microbit", "-o", tmp_path / "o"], tmp_path)
    assert p.returncode == 0 and "memory on microbit" in p.stdout and "fits:" in p.stdout, p.stderr[-1500:]


@needs_qemu
def test_suite_row_is_a_skip_naming_why(compiled) -> None:
    from conftest import CACHE

    from emlkit.compile import program_cache_dir
    from emlkit.suite import Case, run_case

    # the tests' program cache, as ./scripts/test.sh's quick suite uses it: the program is compiled once
    row = run_case(Case("conv_relu", "cortex-m0plus", "microbit", "qemu"), str(CACHE), 120)
    assert row.status == "SKIP" and "does not fit microbit: ram needs" in row.reason
    assert row.count is None  # nothing ran, nothing measured
    # the suite's program is where the tests' fixture looks, and the fixture reuses it without compiling again
    pte = program_cache_dir(CACHE, "cortex-m0plus") / "conv_relu_cortex-m0plus.pte"
    written = pte.stat().st_mtime_ns
    assert compiled("conv_relu", "cortex-m0plus").pte == pte and pte.stat().st_mtime_ns == written
